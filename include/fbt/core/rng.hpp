// fbt/core/rng.hpp: a small, fully specified random number generator.
//
// std::mt19937 is specified bit for bit by the C++ standard, but std::normal_distribution is not, so
// fbt draws its own uniforms (24 or 53 mantissa bits from the 32-bit engine) and normals (Box-Muller),
// which makes every seeded result identical across compilers and standard libraries. The engine state
// can be saved and restored (for bit-identical resume).
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <sstream>
#include <string>

namespace fbt {

class Rng {
 public:
  explicit Rng(std::uint64_t seed = 0) { reseed(seed); }
  void reseed(std::uint64_t seed) {
    std::seed_seq seq{static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32)};
    eng_.seed(seq);
    have_spare_ = false;
  }
  std::uint32_t next_u32() { return static_cast<std::uint32_t>(eng_()); }
  /// Uniform in [0, 1) with 53 random bits.
  double uniform() {
    const std::uint64_t a = next_u32() >> 5, b = next_u32() >> 6;  // 27 + 26 bits
    return (double(a) * 67108864.0 + double(b)) * (1.0 / 9007199254740992.0);
  }
  /// Uniform in [lo, hi).
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
  /// Uniform integer in [0, n) (n > 0), by rejection so it is exactly uniform.
  std::uint32_t below(std::uint32_t n) {
    const std::uint32_t lim = std::uint32_t(-1) - std::uint32_t(-1) % n;
    std::uint32_t r;
    do r = next_u32(); while (r >= lim);
    return r % n;
  }
  /// Standard normal (Box-Muller, both values used).
  double normal() {
    if (have_spare_) {
      have_spare_ = false;
      return spare_;
    }
    double u1;
    do u1 = uniform(); while (u1 <= 0.0);
    const double u2 = uniform();
    const double r = std::sqrt(-2.0 * std::log(u1)), th = 6.283185307179586 * u2;
    spare_ = r * std::sin(th);
    have_spare_ = true;
    return r * std::cos(th);
  }
  double normal(double mean, double std) { return mean + std * normal(); }

  /// Full state as text (engine + Box-Muller spare), for checkpoints.
  std::string state() const {
    std::ostringstream os;
    os.precision(17);
    os << eng_ << ' ' << int(have_spare_) << ' ' << spare_;
    return os.str();
  }
  void set_state(const std::string& s) {
    std::istringstream is(s);
    int hs = 0;
    is >> eng_ >> hs >> spare_;
    have_spare_ = hs != 0;
  }

 private:
  std::mt19937 eng_;
  bool have_spare_ = false;
  double spare_ = 0.0;
};

/// SplitMix64 (Steele, Lea & Flood 2014): a tiny counter-based generator for cheap independent
/// streams (the per-row jitter of the K-pass step); no state but one word, no allocation.
struct SplitMix64 {
  std::uint64_t s;
  explicit SplitMix64(std::uint64_t seed) : s(seed) {}
  std::uint64_t next() {
    std::uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  /// Uniform in [lo, hi) with 53 random bits.
  double uniform(double lo, double hi) { return lo + (hi - lo) * double(next() >> 11) * (1.0 / 9007199254740992.0); }
};

}  // namespace fbt
