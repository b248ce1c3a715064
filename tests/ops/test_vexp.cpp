// tests/ops/test_vexp.cpp: fbt::vexp, the exp of the elementwise kernels (fbt/ops/vexp.hpp).
//
// Checks: float against exp in double over a dense sweep of [-87, 88], through the packets (an Eigen array
// expression) and the scalar path: relative error <= 1.5e-7 (the formula reaches 1.15e-7; one float ulp is
// 1.19e-7 at most); packets and scalar path agree to 1 ulp at every length and offset (the tail and an
// unaligned start run the scalar path); the edges: exp(0) = 1, NaN stays NaN, +inf and x > 88.38 give +inf,
// -inf and x < -87.34 give a value in [0, 1.2e-38], 88 is finite; double is Eigen's exp, bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "fbt/ops/vexp.hpp"

namespace test_ops_vexp {

using namespace fbt;

namespace {

using ArrF = Eigen::Array<float, Eigen::Dynamic, 1>;
using ArrD = Eigen::Array<double, Eigen::Dynamic, 1>;

double rel_err(float got, double x) {
  const double ref = std::exp(x);
  return std::abs(double(got) - ref) / ref;
}

TEST(Vexp, FloatMatchesExpInDoubleOverTheRange) {
  const int n = 175001;  // x = -87 + 0.001 i: [-87, 88]
  ArrF x(n), y(n);
  for (int i = 0; i < n; ++i) x[i] = float(-87.0 + 0.001 * i);
  y = vexp(x);
  double worst_packet = 0, worst_scalar = 0;
  for (int i = 0; i < n; ++i) {
    worst_packet = std::max(worst_packet, rel_err(y[i], double(x[i])));
    worst_scalar = std::max(worst_scalar, rel_err(detail::vexp_scalar(x[i]), double(x[i])));
  }
  EXPECT_LE(worst_packet, 1.5e-7);
  EXPECT_LE(worst_scalar, 1.5e-7);
}

TEST(Vexp, PacketsAndScalarPathAgreeAtEveryLengthAndOffset) {
  std::vector<float> buf(80);
  for (std::size_t i = 0; i < buf.size(); ++i) buf[i] = float(-20.0 + 0.77 * double(i));
  for (int off = 0; off < 4; ++off)
    for (int len = 1; len <= 70; ++len) {
      Eigen::Map<const ArrF> x(buf.data() + off, len);  // unaligned for off > 0
      const ArrF y = vexp(x - 1.f);
      for (int i = 0; i < len; ++i) {
        const float s = detail::vexp_scalar(x[i] - 1.f);
        EXPECT_LE(std::abs(y[i] - s), std::numeric_limits<float>::epsilon() * s) << "offset " << off << " length " << len << " i " << i;
      }
    }
}

TEST(Vexp, Edges) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  ArrF x(16);
  x << 0.f, nan, inf, -inf, 88.f, 88.5f, 100.f, -87.f, -88.f, -100.f, 1.f, -1.f, 1e-30f, -1e-30f, 0.5f, 10.f;
  const ArrF y = vexp(x);
  for (int i = 0; i < 2; ++i) {  // packets, then the scalar path
    auto at = [&](int k) { return i == 0 ? y[k] : detail::vexp_scalar(x[k]); };
    EXPECT_EQ(at(0), 1.f);
    EXPECT_TRUE(std::isnan(at(1)));
    EXPECT_EQ(at(2), inf);
    EXPECT_GE(at(3), 0.f);
    EXPECT_LE(at(3), std::numeric_limits<float>::min());
    EXPECT_TRUE(std::isfinite(at(4)));
    EXPECT_LE(rel_err(at(4), 88.0), 1.5e-7);
    EXPECT_EQ(at(5), inf);
    EXPECT_EQ(at(6), inf);
    EXPECT_LE(rel_err(at(7), -87.0), 1.5e-7);
    for (int k : {8, 9}) {
      EXPECT_GE(at(k), 0.f);
      EXPECT_LE(at(k), std::numeric_limits<float>::min());
    }
    for (int k = 10; k < 16; ++k) EXPECT_LE(rel_err(at(k), double(x[k])), 1.5e-7) << x[k];
  }
}

TEST(Vexp, DoubleIsEigensExp) {
  ArrD x = ArrD::LinSpaced(1001, -700.0, 700.0);
  const ArrD a = vexp(x), b = x.exp();
  for (Eigen::Index i = 0; i < x.size(); ++i) EXPECT_EQ(a[i], b[i]) << x[i];
}

}  // namespace
}  // namespace test_ops_vexp
