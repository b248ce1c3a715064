// fbt/train/stats.hpp: paired tests for comparing two decoding modes (or two models) on the same items.
//
//   mcnemar_exact     McNemar's exact test on paired right/wrong outcomes (McNemar 1947; the exact form is
//                     the two-sided binomial sign test on the discordant pairs): of the items where the two
//                     disagree, b are right only under A and c only under B; under the null hypothesis (A and B
//                     equally good) b ~ Binomial(b + c, 1/2), and
//                       p = min(1, 2 * sum_{i=0}^{min(b,c)} C(b+c, i) / 2^(b+c))     (p = 1 when b + c = 0)
//   paired_t_interval the mean of paired differences d_i = x_i - y_i (e.g. the losses of two modes on the same
//                     validation windows) with its Student-t confidence interval
//                       mean(d) +- t_{(1+level)/2, n-1} * sd(d) / sqrt(n)
//                     (sd with n - 1 in the denominator). The t quantile is found by bisection on the Student-t
//                     CDF, which is a regularized incomplete beta function (Numerical Recipes 6.4, continued
//                     fraction), so no table limits the degrees of freedom.
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "../config.hpp"

namespace fbt {

/// The result of McNemar's exact test on two paired outcome vectors.
struct McNemarResult {
  int n = 0;             ///< paired items
  int both = 0;          ///< right under both
  int neither = 0;       ///< wrong under both
  int b = 0;             ///< right under A only
  int c = 0;             ///< right under B only
  double p_value = 1.0;  ///< two-sided exact p-value
};

/// \brief Two-sided exact McNemar p-value from the discordant counts b and c (>= 0).
inline double mcnemar_exact_p(int b, int c) {
  FBT_ASSERT(b >= 0 && c >= 0, "mcnemar_exact_p: discordant counts must be >= 0, got b " + std::to_string(b) + ", c " + std::to_string(c));
  const int n = b + c, k = std::min(b, c);
  if (n == 0) return 1.0;
  // sum_{i<=k} C(n,i) 2^-n: for n <= 1000 term by term from 2^-n (C(n,i+1) = C(n,i) (n-i)/(i+1)), exact to
  // rounding; beyond, 2^-n underflows, so each term in logs (lgamma)
  double tail = 0;
  if (n <= 1000) {
    double term = std::ldexp(1.0, -n);
    for (int i = 0; i <= k; ++i) tail += term, term = term * double(n - i) / double(i + 1);
  } else {
    for (int i = 0; i <= k; ++i)
      tail += std::exp(std::lgamma(n + 1.0) - std::lgamma(i + 1.0) - std::lgamma(n - i + 1.0) - n * std::log(2.0));
  }
  return std::min(1.0, 2.0 * tail);
}

/// \brief McNemar's exact test of outcomes a and b (1 = right, 0 = wrong) on the same items, in the same order.
inline McNemarResult mcnemar_exact(const std::vector<int>& a, const std::vector<int>& b) {
  FBT_ASSERT(a.size() == b.size(), "mcnemar_exact: " + std::to_string(a.size()) + " outcomes against " + std::to_string(b.size()) +
                                       " (a paired test needs the same items)");
  McNemarResult r;
  r.n = int(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    const bool x = a[i] != 0, y = b[i] != 0;
    if (x && y) ++r.both;
    else if (!x && !y) ++r.neither;
    else if (x) ++r.b;
    else ++r.c;
  }
  r.p_value = mcnemar_exact_p(r.b, r.c);
  return r;
}

namespace detail {
/// Continued fraction of the incomplete beta function (Numerical Recipes, betacf; modified Lentz).
inline double beta_cf(double a, double b, double x) {
  const double tiny = 1e-300, eps = 1e-15;
  const double qab = a + b, qap = a + 1, qam = a - 1;
  double c = 1, d = 1 - qab * x / qap;
  if (std::fabs(d) < tiny) d = tiny;
  d = 1 / d;
  double h = d;
  for (int m = 1; m <= 1000; ++m) {
    const int m2 = 2 * m;
    double aa = m * (b - m) * x / ((qam + m2) * (a + m2));
    d = 1 + aa * d, c = 1 + aa / c;
    if (std::fabs(d) < tiny) d = tiny;
    if (std::fabs(c) < tiny) c = tiny;
    d = 1 / d, h *= d * c;
    aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2));
    d = 1 + aa * d, c = 1 + aa / c;
    if (std::fabs(d) < tiny) d = tiny;
    if (std::fabs(c) < tiny) c = tiny;
    d = 1 / d;
    const double del = d * c;
    h *= del;
    if (std::fabs(del - 1) < eps) break;
  }
  return h;
}
/// The regularized incomplete beta function I_x(a, b), 0 <= x <= 1.
inline double incomplete_beta(double a, double b, double x) {
  if (x <= 0) return 0;
  if (x >= 1) return 1;
  const double front = std::exp(std::lgamma(a + b) - std::lgamma(a) - std::lgamma(b) + a * std::log(x) + b * std::log(1 - x));
  return x < (a + 1) / (a + b + 2) ? front * beta_cf(a, b, x) / a : 1 - front * beta_cf(b, a, 1 - x) / b;
}
}  // namespace detail

/// \brief The Student-t CDF with `df` (> 0) degrees of freedom.
inline double student_t_cdf(double t, double df) {
  const double tail = 0.5 * detail::incomplete_beta(df / 2, 0.5, df / (df + t * t));  // P(T > |t|)
  return t >= 0 ? 1 - tail : tail;
}

/// \brief The q-quantile (0 < q < 1) of the Student-t distribution with `df` (> 0) degrees of freedom.
inline double student_t_quantile(double q, double df) {
  FBT_ASSERT(q > 0 && q < 1 && df > 0, "student_t_quantile: needs 0 < q < 1 and df > 0");
  double lo = -1e6, hi = 1e6;
  for (int i = 0; i < 200; ++i) {
    const double mid = 0.5 * (lo + hi);
    (student_t_cdf(mid, df) < q ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

/// A mean paired difference with its confidence interval.
struct PairedInterval {
  int n = 0;             ///< pairs
  double mean = NAN;     ///< mean of x_i - y_i
  double lo = NAN, hi = NAN;  ///< the interval (NaN with fewer than 2 pairs)
  double level = 0.95;
};

/// \brief The paired t-interval of mean(x - y) at `level` (default 95%): x and y are measurements of the same
/// items (the same validation windows) in the same order.
inline PairedInterval paired_t_interval(const std::vector<double>& x, const std::vector<double>& y, double level = 0.95) {
  FBT_ASSERT(x.size() == y.size(), "paired_t_interval: " + std::to_string(x.size()) + " values against " + std::to_string(y.size()));
  FBT_ASSERT(level > 0 && level < 1, "paired_t_interval: level must be in (0, 1)");
  PairedInterval r;
  r.n = int(x.size()), r.level = level;
  if (r.n == 0) return r;
  double s = 0;
  for (std::size_t i = 0; i < x.size(); ++i) s += x[i] - y[i];
  r.mean = s / r.n;
  if (r.n < 2) return r;
  double ss = 0;
  for (std::size_t i = 0; i < x.size(); ++i) ss += (x[i] - y[i] - r.mean) * (x[i] - y[i] - r.mean);
  const double se = std::sqrt(ss / (r.n - 1) / r.n);
  const double h = student_t_quantile(0.5 * (1 + level), r.n - 1) * se;
  r.lo = r.mean - h, r.hi = r.mean + h;
  return r;
}

/// \brief The paired t-interval over the items where both x and y have a value (NaN = none: a validation
/// window without a target, evaluate_passes' window_loss); x and y list the same items in the same order.
inline PairedInterval paired_t_interval_where_both(const std::vector<double>& x, const std::vector<double>& y, double level = 0.95) {
  std::vector<double> a, b;
  for (std::size_t i = 0; i < std::min(x.size(), y.size()); ++i)
    if (!std::isnan(x[i]) && !std::isnan(y[i])) a.push_back(x[i]), b.push_back(y[i]);
  return paired_t_interval(a, b, level);
}

}  // namespace fbt
