// fbt/ops/vexp.hpp: the exponential of the elementwise kernels (SwiGLU, the sigmoid gates, attention's
// softmax, the loss), vectorised through Eigen's packets: `fbt::vexp(array_expression)`.
//
//   exp(x) = 2^n exp(r),   n = round(x log2(e)),   r = x - n ln(2)        (Cody-Waite: ln(2) in two parts, so
//                                                                           r is exact to float rounding)
//   exp(r) ~= 1 + r + r^2 (c2 + c3 r + c4 r^2 + c5 r^3 + c6 r^4 + c7 r^5),  |r| <= ln(2)/2
//                                                                          (Cephes expf's minimax polynomial)
//   2^n: the float whose exponent bits are n + 127.
//
// Float: at most 1.2e-7 relative error against exp in double over [-87, 88] (tests/ops/test_vexp.cpp).
// Eigen 3.4's own pexp reaches about the same but rebuilds 2^n for exponents far outside float's range
// (its pldexp), which the clamp below makes unnecessary: this one takes 0.61-0.80x its time on Zen 3
// (bench_kernels' BM_Exp, docs/PERFORMANCE.md). x is clamped to [-87.34, 88.72] first: below, the result
// is the smallest normal float (1.2e-38) instead of a smaller number or 0 (Eigen's exp also stops at about
// that); from 88.38 on, where n reaches 128, it is +inf (float's exp overflows at 88.72; 2.4e38 to 3.4e38
// in between). NaN stays NaN. n is rounded by adding and subtracting 1.5 * 2^23, so the kernel needs only
// what Eigen's SSE2 packets have (no SSE4.1 round), and the sum's low bits are n. Double (and any scalar
// but float, or a CPU without x86 packets): Eigen's exp.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include <Eigen/Core>

namespace fbt {

namespace detail {

/// Clamp bounds and the rounding constant of vexp (float).
constexpr float kExpLo = -87.3365447504f, kExpHi = 88.7228391f, kExpRound = 12582912.f;  // 1.5 * 2^23

/// \brief exp of one float by vexp's formula (the scalar path of ExpOp: the same steps as the packets).
inline float vexp_scalar(float x0) {
  if (x0 != x0) return x0;  // NaN
  const float x = x0 < kExpLo ? kExpLo : (x0 > kExpHi ? kExpHi : x0);
  const float v = x * 1.44269504088896341f + kExpRound;  // round(x log2 e) in the low mantissa bits
  const float n = v - kExpRound;
  float r = n * -0.693359375f + x;
  r = n * 2.12194440e-4f + r;
  float y = 1.9875691500e-4f;
  y = y * r + 1.3981999507e-3f;
  y = y * r + 8.3334519073e-3f;
  y = y * r + 4.1665795894e-2f;
  y = y * r + 1.6666665459e-1f;
  y = y * r + 5.0000001201e-1f;
  y = y * (r * r) + (r + 1.f);
  std::uint32_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  bits = (bits + 127u) << 23;  // low bits of v hold n; (n + 127) << 23 is 2^n (n = 128 gives +inf)
  float two_n;
  std::memcpy(&two_n, &bits, sizeof two_n);
  return y * two_n;
}

#if defined(EIGEN_VECTORIZE_SSE2)
/// \brief exp of a float packet by the formula above (Packet4f, Packet8f, Packet16f).
template <class P> EIGEN_STRONG_INLINE P vexp_packet(const P& x0) {
  namespace ei = Eigen::internal;
  using PI = typename ei::unpacket_traits<P>::integer_packet;
  // pmin/pmax keep a NaN in x0 (Eigen's argument order follows std::min/std::max)
  const P x = ei::pmax(ei::pmin(x0, ei::pset1<P>(kExpHi)), ei::pset1<P>(kExpLo));
  const P v = ei::pmadd(x, ei::pset1<P>(1.44269504088896341f), ei::pset1<P>(kExpRound));
  const P n = ei::psub(v, ei::pset1<P>(kExpRound));
  P r = ei::pmadd(n, ei::pset1<P>(-0.693359375f), x);
  r = ei::pmadd(n, ei::pset1<P>(2.12194440e-4f), r);
  P y = ei::pset1<P>(1.9875691500e-4f);
  y = ei::pmadd(y, r, ei::pset1<P>(1.3981999507e-3f));
  y = ei::pmadd(y, r, ei::pset1<P>(8.3334519073e-3f));
  y = ei::pmadd(y, r, ei::pset1<P>(4.1665795894e-2f));
  y = ei::pmadd(y, r, ei::pset1<P>(1.6666665459e-1f));
  y = ei::pmadd(y, r, ei::pset1<P>(5.0000001201e-1f));
  y = ei::pmadd(y, ei::pmul(r, r), ei::padd(r, ei::pset1<P>(1.f)));
  const PI e = ei::plogical_shift_left<23>(ei::padd(ei::preinterpret<PI>(v), ei::pset1<PI>(127)));
  return ei::pmul(y, ei::preinterpret<P>(e));
}
#endif

}  // namespace detail

/// \brief Eigen functor of vexp: float by the formula above, packets where the CPU has them; any other
/// scalar by Eigen's exp.
template <class T> struct ExpOp {
  EIGEN_STRONG_INLINE T operator()(const T& x) const {
    if constexpr (std::is_same_v<T, float>) return detail::vexp_scalar(x);
    else return Eigen::numext::exp(x);
  }
  template <class P> EIGEN_STRONG_INLINE P packetOp(const P& x) const {
#if defined(EIGEN_VECTORIZE_SSE2)
    if constexpr (std::is_same_v<T, float>) return detail::vexp_packet(x);
    else return Eigen::internal::pexp(x);
#else
    return Eigen::internal::pexp(x);
#endif
  }
};

/// \brief exp(a), elementwise, as an Eigen expression: `y = fbt::vexp(x.array() - m)`.
template <class Derived> auto vexp(const Eigen::ArrayBase<Derived>& a) {
  return a.unaryExpr(ExpOp<typename Derived::Scalar>());
}

}  // namespace fbt

namespace Eigen::internal {
template <class T> struct functor_traits<fbt::ExpOp<T>> {
  enum { Cost = functor_traits<scalar_exp_op<T>>::Cost, PacketAccess = packet_traits<T>::HasExp };
};
}  // namespace Eigen::internal
