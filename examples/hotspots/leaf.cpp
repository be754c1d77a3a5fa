// The frameless hot leaf of the hotspots example. Built on its own with
// -O2 -fomit-frame-pointer so it never pushes %rbp: a frame-pointer unwinder that starts here
// skips its caller (hot::leaf_caller) unless it recovers the return address at the stack
// pointer, which is exactly what jprof must do.
#include "hot.h"

namespace hot {

__attribute__((noinline)) std::uint64_t frameless_leaf(unsigned long iterations, std::uint64_t seed) {
    return HOT_MIX_LOOP(iterations, seed);
}

}  // namespace hot
