// A small native program with a known CPU split, for jprof's quick start and end-to-end test.
//
//   main -> hot::run_workload(unsigned long)
//          -> hot::compute_a(unsigned long, unsigned long)    50%
//          -> hot::compute_b(unsigned long, unsigned long)    30%
//          -> hot::leaf_caller(unsigned long, unsigned long)
//             -> hot::frameless_leaf(unsigned long, unsigned long)  20% (no frame pointer setup)
//
// Built with -O2 -g -fno-omit-frame-pointer, except leaf.cpp (see there). Usage:
//   hotspots [SCALE]   SCALE multiplies the run time (default 1.0, about 1.5 s).
#include <cstdio>
#include <cstdlib>

#include "hot.h"

namespace hot {

// Work is handed out in rounds of these many iterations so that the split holds at any moment,
// also when the program is stopped early.
constexpr unsigned long kUnit = 100000;
constexpr unsigned long kShareA = 5;
constexpr unsigned long kShareB = 3;
constexpr unsigned long kShareLeaf = 2;
// Rounds at SCALE 1: about 1.5 s on a 3 GHz x86-64.
constexpr double kRoundsAtScale1 = 600;

volatile std::uint64_t sink;

// Publishing each result through a call makes compute_a/compute_b non-leaf functions: GCC
// skips the frame-pointer setup in leaf functions even with -fno-omit-frame-pointer, and these
// two are meant to be the well-behaved, framed hot functions.
__attribute__((noinline)) void publish(std::uint64_t value) { sink = value; }

// An empty asm after the call keeps the call a real call: a tail jump would leave no frame.
#define NO_TAIL_CALL() asm volatile("" ::: "memory")

// `seed` differs per round so the calls cannot be hoisted out of the loop as pure.
__attribute__((noinline)) void compute_a(unsigned long iterations, std::uint64_t seed) {
    publish(HOT_MIX_LOOP(iterations, seed));
    NO_TAIL_CALL();
}

__attribute__((noinline)) void compute_b(unsigned long iterations, std::uint64_t seed) {
    publish(HOT_MIX_LOOP(iterations, seed));
    NO_TAIL_CALL();
}

// Does nothing hot itself; the frameless leaf it calls is where the time goes.
__attribute__((noinline)) void leaf_caller(unsigned long iterations, std::uint64_t seed) {
    publish(frameless_leaf(iterations, seed) + 1);
    NO_TAIL_CALL();
}

__attribute__((noinline)) void run_workload(unsigned long rounds) {
    for (unsigned long r = 0; r < rounds; ++r) {
        compute_a(kShareA * kUnit, r);
        compute_b(kShareB * kUnit, r);
        leaf_caller(kShareLeaf * kUnit, r);
    }
}

}  // namespace hot

int main(int argc, char** argv) {
    double scale = argc > 1 ? std::atof(argv[1]) : 1.0;
    if (!(scale > 0)) {
        std::fprintf(stderr, "usage: %s [SCALE > 0]\n", argv[0]);
        return 2;
    }
    unsigned long rounds = static_cast<unsigned long>(hot::kRoundsAtScale1 * scale);
    if (rounds == 0) rounds = 1;
    hot::run_workload(rounds);
    std::printf("hotspots: %lu rounds done\n", rounds);
    return 0;
}
