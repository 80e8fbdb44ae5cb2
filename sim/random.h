// Seeded draws that give the same values on every machine: the standard
// leaves std::uniform_real_distribution's algorithm to the implementation.
#ifndef GOLDMINER_SIM_RANDOM_H_
#define GOLDMINER_SIM_RANDOM_H_

#include <random>

namespace goldminer::sim {

// Uniform in [0, 1) from the top 53 bits of one draw.
inline double uniform01(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1p-53; }

}  // namespace goldminer::sim

#endif  // GOLDMINER_SIM_RANDOM_H_
