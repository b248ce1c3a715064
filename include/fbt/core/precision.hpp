// fbt/core/precision.hpp: the precision of the model's matrix products (fp32 or bf16 operands, fp32 sums),
// whether this build can run bf16 (compiled with oneDNN: FBT_HAVE_DNNL), the process-wide setting, and
// the float <-> bfloat16 bit conversions (round to nearest even).
//
// What a config, a file writer or a command needs to know about bf16 without the products themselves:
// the products are ops/gemm_bf16.hpp (which includes this file).
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>
#include <string>

#include "../config.hpp"

namespace fbt {

/// The precision of the model's matrix products (the operands; sums are always float).
enum class Precision { fp32, bf16 };

inline const char* precision_name(Precision p) { return p == Precision::bf16 ? "bf16" : "fp32"; }
/// Parses "fp32" / "bf16" (also "float32", "bfloat16"); throws naming the value otherwise.
inline Precision parse_precision(const std::string& s) {
  if (s == "fp32" || s == "float32" || s == "float") return Precision::fp32;
  if (s == "bf16" || s == "bfloat16") return Precision::bf16;
  throw Error("precision: unknown value '" + s + "' (expected fp32 or bf16)");
}

/// True when this build can run bf16 products (compiled with oneDNN).
inline bool bf16_available() {
#if defined(FBT_HAVE_DNNL)
  return true;
#else
  return false;
#endif
}
/// Why bf16 is not available, with what to do (empty when it is).
inline std::string bf16_unavailable_reason() {
  if (bf16_available()) return {};
  return "this build of fbt has no bf16 matrix products: it was compiled without oneDNN. Install it "
         "(Debian: apt-get install libdnnl-dev, or scripts/setup.sh) and rebuild; CMake then reports "
         "'fbt: oneDNN <version> found, --precision bf16 enabled'";
}

namespace detail {
inline std::atomic<int>& matmul_precision_flag() {
  static std::atomic<int> p{int(Precision::fp32)};
  return p;
}

/// Sets a process-wide switch (an atomic) for a scope and restores its previous value after: the base of
/// ScopedMatmulPrecision here, ScopedFp32Eigen and ScopedFp32OneDnn (ops/gemm_dnnl.hpp) and ScopedBf16Fallback
/// (ops/gemm_bf16.hpp).
template <class V> class ScopedSwitch {
 public:
  ScopedSwitch(std::atomic<V>& s, V v) : s_(s), prev_(s.exchange(v)) {}
  ~ScopedSwitch() { s_.store(prev_); }
  ScopedSwitch(const ScopedSwitch&) = delete;
  ScopedSwitch& operator=(const ScopedSwitch&) = delete;

 private:
  std::atomic<V>& s_;
  V prev_;
};
}  // namespace detail

/// The precision the CPU backend's products use now (process-wide).
inline Precision matmul_precision() { return Precision(detail::matmul_precision_flag().load(std::memory_order_relaxed)); }
/// Sets it for the whole process. bf16 in a build without oneDNN throws (bf16_unavailable_reason()).
inline void set_matmul_precision(Precision p) {
  if (p == Precision::bf16 && !bf16_available()) throw Error("precision bf16: " + bf16_unavailable_reason());
  detail::matmul_precision_flag().store(int(p), std::memory_order_relaxed);
}
/// Sets the precision for a scope and restores the previous one after.
class ScopedMatmulPrecision : detail::ScopedSwitch<int> {
 public:
  explicit ScopedMatmulPrecision(Precision p) : ScopedSwitch(detail::matmul_precision_flag(), int(checked(p))) {}

 private:
  static Precision checked(Precision p) {  // bf16 in a build without oneDNN throws, as set_matmul_precision does
    if (p == Precision::bf16 && !bf16_available()) throw Error("precision bf16: " + bf16_unavailable_reason());
    return p;
  }
};

/// float -> bfloat16 bits, rounded to nearest even (NaN stays a quiet NaN).
inline std::uint16_t float_to_bf16(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return std::uint16_t((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return std::uint16_t(u >> 16);
}
inline float bf16_to_float(std::uint16_t b) {
  const std::uint32_t u = std::uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
/// x rounded to the nearest bfloat16, as a float.
inline float round_bf16(float x) { return bf16_to_float(float_to_bf16(x)); }

}  // namespace fbt
