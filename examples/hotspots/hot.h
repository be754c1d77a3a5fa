// Declarations shared by the two translation units of the hotspots example.
#pragma once

#include <cstdint>

namespace hot {

// The same integer mixing loop in every hot function, so that equal iteration counts cost
// equal time and the iteration ratios below are the expected CPU split.
#define HOT_MIX_LOOP(iterations, seed)          \
    ({                                          \
        std::uint64_t x_ = (seed) | 1;          \
        std::uint64_t acc_ = 0;                 \
        for (unsigned long i_ = 0; i_ < (iterations); ++i_) { \
            x_ ^= x_ << 13;                     \
            x_ ^= x_ >> 7;                      \
            x_ ^= x_ << 17;                     \
            acc_ += x_ * 0x9E3779B97F4A7C15ull; \
        }                                       \
        acc_;                                   \
    })

// Lives in leaf.cpp, compiled with -fomit-frame-pointer: a hot leaf with no frame setup.
std::uint64_t frameless_leaf(unsigned long iterations, std::uint64_t seed);

}  // namespace hot
