// exercises/check_chain_backward.cpp: the checker of exercise E2 (docs/course/03-exercises.md).
//
// Includes <chain_backward.hpp> with ANGLE brackets, so the include path picks the file under test:
//   target exercise_chain_backward_student   -I exercises/ (or a hand-in folder)  -> your chain_backward.hpp
//   target exercise_chain_backward_solution / _mutant_<bug>: the teacher's solution, or a mutant of it
// Toy chain (exercises/given/toy_chain.hpp) in double, lambda = 0.5 (so c_j != 1 from K = 2 on), with the sizes
// and data drawn from the run's seed (printed on the first line; `--seed N` repeats a run): D in 3..6, T in 2..6
// positions per case, B in 2..3 sequences, K in 3..4 for the longest chain.
//   1. a LADDER of cases, each reported before the next: K = 1, one sequence; K = 2, one sequence; K = 2, B
//      sequences; K = 3 or 4, B sequences; then T = 1 (one position per sequence: nothing is fed back, so every
//      pass equals the first). Each compares dA, dW, dX with central finite differences of the whole K-pass
//      loss (tests/common/gradcheck.hpp; PASS when rel err < 1e-6 and the gradient is not all zero).
//      For the first failing case it prints where dX is wrong, per (pass whose loss it is, position), from
//      finite differences of the chain cut after each pass, and compares with the detach gradient (finite
//      differences of the chain with the fed-back states held fixed).
//   2. the gradients accumulate (+=): called on buffers that already hold values, each of dX, dA, dW must
//      receive the same amount as from zero (the sizes of case 4);
//   3. (given code, lesson 1's claim) the chain is a Jacobi iteration: pass k equals the token-by-token
//      recurrence H*[t] = tanh(A x_t + W H*[t-1]) exactly at t <= max(p, 1) + k - 1 = k (invariant 1 with
//      p = 0: position 1 is plain in every pass), and delta_k = rms(H_k - H_{k-1}) reaches 0 once k > T.
// Then a diagnosis: "diagnosis: ..." when your gradients equal a known mistake (the teacher's reference,
// course/instructor/reference/chain_backward_reference.hpp, when it is on the include path; or a gradient
// that is overwritten), else "likely: ..." read from the error map; and which hint of
// exercises/hints/chain_backward.md to read. The score (rubric: docs/course/teaching.md) is the line "grade: ...".
// Exit status: 0 iff every line says PASS; 77 when the file is the untouched stub (it defines
// FBT_EXERCISE_UNSOLVED and wrote nothing: ctest reads 77 as "skipped", i.e. not attempted yet); 1 otherwise.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include <chain_backward.hpp>    // yours, the solution or a mutant: chosen by the include path (see above)
#include <common/gradcheck.hpp>  // tests/common/gradcheck.hpp: check_gradient, randn

#include "checker.hpp"  // report, fmt, the score, the crash guard

#if __has_include(<chain_backward_reference.hpp>)
#include <chain_backward_reference.hpp>  // the teacher's: the known mistakes, for the diagnoses
#define FBT_COURSE_HAVE_REFERENCE 1
#endif

using namespace fbt_course;
using fbt_course_check::fmt;

namespace {

int D = 0;                          // drawn per run
constexpr int Bmax = 3, Tmax = 6;   // the largest case's sizes: the data is drawn for them once
constexpr double kLambda = 0.5;
constexpr int kMaxPoints = 10;  // the rubric: the ladder's cases 2 + 2 + 2 + 2 + 1, accumulation 1

void report(const std::string& what, bool ok, const std::string& detail, int points = 0) {
  fbt_course_check::report(what, ok, detail, points, 48);
}
double max_abs(const std::vector<double>& v) {
  double m = 0;
  for (double x : v) m = std::max(m, std::abs(x));
  return m;
}
/// max_i |a_i - b_i| / max(1e-300, max_i |b_i|)
double rel_diff(const std::vector<double>& a, const std::vector<double>& b) {
  double d = 0;
  for (std::size_t i = 0; i < a.size(); ++i) d = std::max(d, std::abs(a[i] - b[i]));
  return d / std::max(1e-300, max_abs(b));
}

/// The three gradients of one backward call.
struct Grads {
  std::vector<double> dX, dA, dW;  // (N, D), (D, D), (D, D)
};

/// One rung of the ladder.
struct Case {
  std::string name;
  int B, T, K;
  int points;
};

// the data: one draw for the largest sizes; a smaller case uses the first B * T rows
std::vector<double> gA, gW, gX, gR;  // (D, D), (D, D), (Bmax * Tmax, D), (Bmax * Tmax, D)

ToyChain<double> chain(int B, int T, int K, double lambda) {
  ToyChain<double> p;
  p.B = B, p.T_ = T, p.D = D, p.K = K, p.lambda = lambda, p.A = gA.data(), p.W = gW.data();
  return p;
}
Grads zero_grads(int N) { return Grads{std::vector<double>(std::size_t(N) * D, 0.0), std::vector<double>(D * D, 0.0), std::vector<double>(D * D, 0.0)}; }

/// Your backward, into the buffers of g (which it must add to).
void student_into(const ToyChain<double>& p, Grads& g) {
  ToyChainCache<double> cache;
  toy_chain_forward(p, cache, gX.data(), gR.data());
  fbt_course_check::guard("your toy_chain_backward",
                          "an index out of range: rows are n = b * p.T_ + t (p.N() rows in all), buffers are (N, D); "
                          "cache.H[j] and cache.S[j] exist for j = 0 .. p.K-1");
  toy_chain_backward(p, cache, gX.data(), gR.data(), g.dX.data(), g.dA.data(), g.dW.data());
  fbt_course_check::guard("the checker", "a bug of the checker: please report it");
}
Grads student(const ToyChain<double>& p) {
  Grads g = zero_grads(p.N());
  student_into(p, g);
  return g;
}
#ifdef FBT_COURSE_HAVE_REFERENCE
bool same(const Grads& a, const Grads& b) {  // equal up to round-off
  return rel_diff(a.dX, b.dX) < 1e-8 && rel_diff(a.dA, b.dA) < 1e-8 && rel_diff(a.dW, b.dW) < 1e-8;
}
Grads reference(const ToyChain<double>& p, fbt_course_reference::ChainBug bug) {
  ToyChainCache<double> cache;
  toy_chain_forward(p, cache, gX.data(), gR.data());
  Grads g = zero_grads(p.N());
  fbt_course_reference::chain_backward_reference(p, cache, gX.data(), gR.data(), bug, g.dX.data(), g.dA.data(), g.dW.data());
  return g;
}
#endif

/// Central finite differences of f with respect to x (n values), h = 1e-5.
template <class F> std::vector<double> finite_differences(F f, double* x, std::size_t n) {
  std::vector<double> g(n);
  for (std::size_t i = 0; i < n; ++i) {
    const double x0 = x[i], h = 1e-5;
    x[i] = x0 + h;
    const double fp = f();
    x[i] = x0 - h;
    const double fm = f();
    x[i] = x0;
    g[i] = (fp - fm) / (2 * h);
  }
  return g;
}
/// dLoss/dX of the chain p by finite differences.
std::vector<double> fd_dX(const ToyChain<double>& p) {
  return finite_differences(
      [&]() {
        ToyChainCache<double> c;
        return toy_chain_forward(p, c, gX.data(), gR.data());
      },
      gX.data(), std::size_t(p.N()) * D);
}
/// The detach gradient dLoss/dX: finite differences of the chain with every fed-back S_j held at its value.
std::vector<double> fd_detach_dX(const ToyChain<double>& p) {
  ToyChainCache<double> fixed;
  toy_chain_forward(p, fixed, gX.data(), gR.data());
  const int N = p.N();
  auto loss = [&]() {
    double l = 0;
    for (int j = 0; j < p.K; ++j)
      for (int n = 0; n < N; ++n)
        for (int o = 0; o < D; ++o) {
          double z = 0;
          for (int c = 0; c < D; ++c) z += gX[n * D + c] * gA[o * D + c] + fixed.S[j][n * D + c] * gW[o * D + c];
          l += p.pass_weight(j) * gR[n * D + o] * std::tanh(z);
        }
    return l;
  };
  return finite_differences(loss, gX.data(), std::size_t(N) * D);
}

/// dX of each pass's own loss term c_j <R, H_j>: by linearity, the chain cut after pass k (same c_j) gives the
/// sum over passes 1..k, so pass k's part is the difference of two cuts. dx_of(chain) gives the dX of a chain.
template <class Fn> std::vector<std::vector<double>> per_pass_dX(const Case& cs, Fn dx_of) {
  std::vector<std::vector<double>> parts;
  std::vector<double> prev(std::size_t(cs.B) * cs.T * D, 0.0);
  for (int k = 1; k <= cs.K; ++k) {
    const double lambda_k = cs.K > 1 ? kLambda * double(k - 1) / double(cs.K - 1) : kLambda;  // c_j = lambda / (K - 1) kept
    const std::vector<double> cur = dx_of(chain(cs.B, cs.T, k, lambda_k));
    std::vector<double> part(cur.size());
    for (std::size_t i = 0; i < cur.size(); ++i) part[i] = cur[i] - prev[i];
    parts.push_back(part), prev = cur;
  }
  return parts;
}

/// Prints where dX is wrong; returns the wrong (pass, row) entries as wrong[j][n].
std::vector<std::vector<bool>> error_map(const Case& cs) {
  const auto mine = per_pass_dX(cs, [](const ToyChain<double>& p) { return student(p).dX; });
  const auto ref = per_pass_dX(cs, fd_dX);
  double scale = 1e-300;
  for (const auto& r : ref) scale = std::max(scale, max_abs(r));
  std::printf("  where dX is wrong (x) or right (.), by the pass whose loss term it comes from and the position t\n");
  std::printf("  (| between sequences):\n");
  std::vector<std::vector<bool>> wrong(cs.K, std::vector<bool>(std::size_t(cs.B) * cs.T, false));
  for (int j = 0; j < cs.K; ++j) {
    std::string row;
    for (int n = 0; n < cs.B * cs.T; ++n) {
      if (n > 0 && n % cs.T == 0) row += " |";
      double d = 0;
      for (int k = 0; k < D; ++k) d = std::max(d, std::abs(mine[j][n * D + k] - ref[j][n * D + k]));
      wrong[j][n] = d > 1e-6 * scale;
      row += wrong[j][n] ? " x" : " .";
    }
    std::printf("    loss of pass %d  %s\n", j + 1, row.c_str());
  }
  return wrong;
}

}  // namespace

int main(int argc, char** argv) {
  const std::uint64_t seed = fbt_course_check::run_seed(argc, argv);
  fbt_course_check::install_crash_guard("chain_backward", kMaxPoints);
  fbt::Rng rng(seed);
  using fbt_course_check::draw;
  D = draw(rng, 3, 6);
  const int T1 = draw(rng, 2, Tmax), T2 = draw(rng, 2, Tmax), T3 = draw(rng, 2, Tmax), T4 = draw(rng, 2, Tmax);
  const int B = draw(rng, 2, Bmax), K4 = draw(rng, 3, 4);
  std::printf("exercise E2: backward of a K-pass chain (D = %d, lambda = %g, double; T positions per sequence, drawn per case)\n", D, kLambda);
  gA.resize(std::size_t(D) * D), gW.resize(std::size_t(D) * D), gX.resize(std::size_t(Bmax) * Tmax * D), gR.resize(gX.size());
  fbt_test::randn(gA.data(), gA.size(), rng, 0.6);
  fbt_test::randn(gW.data(), gW.size(), rng, 0.6);
  fbt_test::randn(gX.data(), gX.size(), rng);
  fbt_test::randn(gR.data(), gR.size(), rng);

  std::printf("1. the ladder: dA, dW, dX against central finite differences (PASS: rel err < 1e-6, gradient not all zero)\n");
  auto sz = [](int B_, int T_) { return "B = " + std::to_string(B_) + ", T = " + std::to_string(T_); };
  const Case cases[] = {{"K = 1, " + sz(1, T1) + " (no carry)", 1, T1, 1, 2},
                        {"K = 2, " + sz(1, T2) + " (one sequence)", 1, T2, 2, 2},
                        {"K = 2, " + sz(B, T3) + " (sequences)", B, T3, 2, 2},
                        {"K = " + std::to_string(K4) + ", " + sz(B, T4), B, T4, K4, 2},
                        {"K = " + std::to_string(K4) + ", " + sz(B, 1) + " (nothing fed back)", B, 1, K4, 1}};
  constexpr int kCases = 5;
#ifdef FBT_COURSE_HAVE_REFERENCE
  using fbt_course_reference::kChainBugs;
  bool matches[kChainBugs];
  std::fill(matches, matches + kChainBugs, true);
#endif
  bool all_zero = true;
  int first_fail = -1;
  std::vector<std::vector<bool>> wrong;  // the first failing case's error map
  bool is_detach = false;                // the first failing case's gradient equals the detach gradient
  for (int ci = 0; ci < kCases; ++ci) {
    const Case& cs = cases[ci];
    ToyChain<double> p = chain(cs.B, cs.T, cs.K, kLambda);
    const Grads g = student(p);
    all_zero = all_zero && max_abs(g.dX) == 0 && max_abs(g.dA) == 0 && max_abs(g.dW) == 0;
    auto f = [&]() {
      ToyChainCache<double> c;
      return toy_chain_forward(p, c, gX.data(), gR.data());
    };
    const double eA = fbt_test::check_gradient(f, gA.data(), g.dA.data(), gA.size()).err;
    const double eW = fbt_test::check_gradient(f, gW.data(), g.dW.data(), gW.size()).err;
    const double eX = fbt_test::check_gradient(f, gX.data(), g.dX.data(), g.dX.size()).err;  // the first B sequences
    const bool ok = eA < 1e-6 && eW < 1e-6 && eX < 1e-6 && max_abs(g.dA) > 1e-9 && max_abs(g.dX) > 1e-9 && (cs.K == 1 || cs.T == 1 || max_abs(g.dW) > 1e-9);  // dW is 0 when nothing is fed back
    report("case " + std::to_string(ci + 1) + ": " + cs.name, ok, fmt("rel err dA %.1e  dW %.1e  dX %.1e", eA, eW, eX), cs.points);
#ifdef FBT_COURSE_HAVE_REFERENCE
    for (int b = 1; b < kChainBugs; ++b) matches[b] = matches[b] && same(g, reference(p, fbt_course_reference::ChainBug(b)));
#endif
    if (!ok && first_fail < 0) {
      first_fail = ci;
      wrong = error_map(cs);
      if (cs.K > 1) {
        const std::vector<double> det = fd_detach_dX(p);
        is_detach = rel_diff(g.dX, det) < 1e-6;
        std::printf("  against the detach gradient (no carry between passes): %s\n",
                    is_detach ? "EQUAL: your gradient does not reach earlier passes"
                              : fmt("rel diff of dX %.1e (not the detach gradient)", rel_diff(g.dX, det)).c_str());
      }
    }
  }

  std::printf("2. gradients accumulate (+=): on buffers that already hold values, each gradient adds the same amount (case 4)\n");
  std::string overwritten;  // the gradients that do not add to what their buffer held
  {
    ToyChain<double> p = chain(cases[3].B, cases[3].T, cases[3].K, kLambda);
    const Grads from_zero = student(p);
    Grads held = zero_grads(p.N());  // buffers with values in them already
    fbt::Rng r2(seed + 11);
    fbt_test::randn(held.dX.data(), held.dX.size(), r2), fbt_test::randn(held.dA.data(), held.dA.size(), r2),
        fbt_test::randn(held.dW.data(), held.dW.size(), r2);
    Grads g = held;
    student_into(p, g);
    const char* names[] = {"dX", "dA", "dW"};
    const std::vector<double>* got[] = {&g.dX, &g.dA, &g.dW};
    const std::vector<double>* before[] = {&held.dX, &held.dA, &held.dW};
    const std::vector<double>* zero_based[] = {&from_zero.dX, &from_zero.dA, &from_zero.dW};
    double worst = 0;
    for (int t = 0; t < 3; ++t) {
      std::vector<double> added(got[t]->size());
      for (std::size_t i = 0; i < added.size(); ++i) added[i] = (*got[t])[i] - (*before[t])[i];
      const double d = rel_diff(added, *zero_based[t]);
      worst = std::max(worst, d);
      if (d > 1e-9 && max_abs(*zero_based[t]) > 0) overwritten += std::string(overwritten.empty() ? "" : ", ") + names[t];
    }
    if (all_zero)
      report("dX, dA, dW", false, "the gradient is all zeros: nothing was written to dX, dA, dW", 1);
    else
      report("dX, dA, dW", overwritten.empty(),
             overwritten.empty() ? fmt("max rel diff %.2e", worst) : overwritten + " did not add to the values already there", 1);
  }

  std::printf("3. (given code) the chain is a Jacobi iteration: pass k exact for t <= max(p, 1) + k - 1 = k (p = 0), fixed point after T passes\n");
  {
    const int Tn = T4, N = B * Tn;  // the sizes of case 4
    const std::vector<double>&X = gX, &A = gA, &W = gW;
    // the token-by-token recurrence (soft decoding, teacher-forced): H*[b, t] = tanh(A x + W H*[b, t-1]), H*[b, -1] = 0
    std::vector<double> Hs(N * D, 0.0);  // (N, D)
    for (int b = 0; b < B; ++b)
      for (int t = 0; t < Tn; ++t)
        for (int o = 0; o < D; ++o) {
          const int n = b * Tn + t;
          double z = 0;
          for (int c = 0; c < D; ++c) z += X[n * D + c] * A[o * D + c] + (t > 0 ? Hs[(n - 1) * D + c] * W[o * D + c] : 0.0);
          Hs[n * D + o] = std::tanh(z);
        }
    ToyChain<double> longer = chain(B, Tn, Tn + 2, 1.0);  // unroll past T
    ToyChainCache<double> lc;
    toy_chain_forward(longer, lc, gX.data(), gR.data());
    for (int k = 1; k <= longer.K; ++k) {
      const std::vector<double>& H = lc.H[k - 1];
      int exact = Tn;  // the longest run of positions t = 1..exact (1-based) equal to H* in every sequence
      for (int b = 0; b < B; ++b) {
        int run = 0;
        while (run < Tn) {
          double d = 0;
          for (int c = 0; c < D; ++c) d = std::max(d, std::abs(H[(b * Tn + run) * D + c] - Hs[(b * Tn + run) * D + c]));
          if (d > 1e-14) break;
          ++run;
        }
        exact = std::min(exact, run);
      }
      double d2 = 0;
      if (k > 1)
        for (std::size_t i = 0; i < H.size(); ++i) d2 += (H[i] - lc.H[k - 2][i]) * (H[i] - lc.H[k - 2][i]);
      const double delta = std::sqrt(d2 / double(H.size()));
      const int predicted = std::min(k, Tn);
      report("pass " + std::to_string(k) + ": exact for t <= " + std::to_string(exact) + " (predicted " + std::to_string(predicted) + ")",
             exact == predicted, k > 1 ? fmt("delta_k %.2e", delta) : std::string("delta_1 (no previous pass)"));
    }
  }

  // the diagnosis: a known mistake, else a symptom of the error map
  if (first_fail >= 0 || !overwritten.empty()) {
    int hint = 2;
    std::string diagnosis;
    if (!all_zero && !overwritten.empty())
      diagnosis = "diagnosis: " + overwritten +
                  (overwritten.find(',') == std::string::npos ? " is" : " are") +
                  " overwritten (=), not accumulated (+=): every update must add to the buffer. Within one pass a row of dX sums "
                  "over the D outputs o; X and A are used by every pass, so dX and dA sum over the passes too",
      hint = 1;
#ifdef FBT_COURSE_HAVE_REFERENCE
    for (int b = 1; b < kChainBugs && diagnosis.empty(); ++b)
      if (matches[b]) {
        const auto& info = fbt_course_reference::chain_bug_info(fbt_course_reference::ChainBug(b));
        diagnosis = std::string("diagnosis: ") + info.diagnosis, hint = info.hint;
      }
#endif
    if (diagnosis.empty() && first_fail >= 0) {  // no known mistake matches: read the symptom
      const Case& cs = cases[first_fail];
      bool pass1_right = true, later_wrong = false, only_boundary = true, any = false, only_last_pass = true;
      for (int j = 0; j < cs.K; ++j)
        for (int n = 0; n < cs.B * cs.T; ++n) {
          if (!wrong[j][n]) continue;
          any = true;
          const int t = n % cs.T, b = n / cs.T;
          if (j == 0) pass1_right = false;
          else later_wrong = true;
          if (j < 2) only_last_pass = false;
          if (!((t == cs.T - 1 && b < cs.B - 1) || (t == 0 && b > 0))) only_boundary = false;
        }
      if (all_zero)
        diagnosis = "likely: your gradient is all zero: nothing was written to dX, dA, dW", hint = 1;
      else if (cs.K == 1 || !pass1_right)
        diagnosis = "likely: one pass alone is already wrong: check its own loss term c_1 R, tanh' = 1 - H^2 and the two products", hint = 1;
      else if (is_detach)
        diagnosis = "likely: your gradient does not reach earlier passes (no carry from pass j to pass j-1)", hint = 2;
      else if (any && only_boundary && cs.B > 1)
        diagnosis = "likely: the carry leaks across sequences: only the positions next to a sequence boundary are wrong", hint = 3;
      else if (cs.K >= 3 && only_last_pass)
        diagnosis = "likely: K = 2 is right and only the third pass's loss is wrong: what happens to the carry between two passes? "
                    "(is it reset before pass j-1's carry is written? does c_j multiply only pass j's own loss term?)",
        hint = 2;
      else if (pass1_right && later_wrong)
        diagnosis = "likely: pass 1's own loss is right; the gradient of the later passes' losses is wrong (carry, shift or c_j)", hint = 2;
      else
        diagnosis = "likely: no single known mistake; compare your carry with the shift's forward in exercises/given/toy_chain.hpp", hint = 2;
    }
    std::printf("%s\n", diagnosis.c_str());
    if (first_fail >= 0)
      std::printf("stuck? read exercises/hints/chain_backward.md, hint %d (first failing case: %s)\n", hint, cases[first_fail].name.c_str());
    else
      std::printf("stuck? read exercises/hints/chain_backward.md, hint %d\n", hint);
  }

#ifdef FBT_EXERCISE_UNSOLVED
  if (all_zero) {
    fbt_course_check::print_grade("chain_backward", true, kMaxPoints);
    std::printf("NOT ATTEMPTED: exercises/chain_backward.hpp is the shipped stub (it defines FBT_EXERCISE_UNSOLVED and writes\n"
                "nothing). Delete that line when you start; exit status 77 (ctest: skipped)\n");
    return 77;
  }
  std::printf("note: your file still defines FBT_EXERCISE_UNSOLVED; delete that line\n");
#endif
  fbt_course_check::print_grade("chain_backward");
  const int failures = fbt_course_check::score().failures;
  std::printf("%s: %d check(s) failed\n", failures ? "FAIL" : "PASS", failures);
  return failures ? 1 : 0;
}
