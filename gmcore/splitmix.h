// SplitMix64 (Steele, Lea and Flood): a well-mixed 64-bit value from any
// 64-bit state, identical on every machine, unlike the standard library's
// distributions. The seeded choices (lease order, sampling, demand draws,
// test data) all mix through it.
#ifndef GOLDMINER_GMCORE_SPLITMIX_H_
#define GOLDMINER_GMCORE_SPLITMIX_H_

#include <cstdint>

namespace goldminer {

constexpr uint64_t kSplitMixStep = 0x9e3779b97f4a7c15ULL;

// The output for state x (the generator's next value after state x).
inline uint64_t splitmix64(uint64_t x) {
  x += kSplitMixStep;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// The generator: next() gives splitmix64 of successive states.
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = splitmix64(state_);
    state_ += kSplitMixStep;
    return z;
  }

 private:
  uint64_t state_;
};

}  // namespace goldminer

#endif  // GOLDMINER_GMCORE_SPLITMIX_H_
