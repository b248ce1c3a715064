// exercises/check_concat_backward.cpp: the checker of exercise E1 (docs/course/03-exercises.md).
//
// Includes <concat_backward.hpp> with ANGLE brackets, so the include path picks the file under test:
//   target exercise_concat_backward_student   -I exercises/ (or a hand-in folder)  -> your concat_backward.hpp
//   target exercise_concat_backward_solution / _mutant_<bug>: the teacher's solution, or a mutant of it
// In double, with sizes and data drawn from the run's seed (printed on the first line; `--seed N` repeats a run:
// D in 3..8, N = B * T rows with B in 2..3, T in 2..5), weights and gains moved away from their init, and the
// scalar f = sum_{n,o} w[n, o] u[n, o] (a random w, so du = w), it checks every gradient twice:
//   1. against central finite differences (tests/common/gradcheck.hpp: err = ||g - g_fd|| / max(||g||, ||g_fd||),
//      PASS when err < 1e-6 and the gradient is not all zero; a correct backward gives ~1e-10), on the N rows and
//      on one row alone (B = 1, T = 1);
//   2. against fbt's own concat fuser (ConcatFuser backward + pre_backward), to 1e-10 of its scale;
// and that the gradients ACCUMULATE (+=) into pre-filled buffers. On a failure it names the mistake when it
// can: = for += from the accumulation check, the halves of W_c swapped from dW_c, and (with the teacher's
// reference, course/instructor/reference/concat_backward_reference.hpp, on the include path) the RMSNorm
// backward without its mean term or its gain; it prints "diagnosis: ..." when one matches (or "likely: ..."
// from the failing terms), and which hint of exercises/hints/concat_backward.md to read. The score (rubric:
// docs/course/teaching.md) is the line "grade: ...".
// Exit status: 0 iff every line says PASS; 77 when the file is the untouched stub (it defines
// FBT_EXERCISE_UNSOLVED and wrote nothing: ctest reads 77 as "skipped", i.e. not attempted yet); 1 otherwise.
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include <concat_backward.hpp>    // yours, the solution or a mutant: chosen by the include path (see above)
#include <common/gradcheck.hpp>  // tests/common/gradcheck.hpp: check_gradient, randn

#include "checker.hpp"  // report, fmt, the score, the crash guard
#include "fbt/layers/concat_fuser.hpp"

#if __has_include(<concat_backward_reference.hpp>)
#include <concat_backward_reference.hpp>  // the teacher's: the RMSNorm backward's known mistakes, for the diagnoses
#define FBT_COURSE_HAVE_REFERENCE 1
#endif

using namespace fbt_course;

namespace {

int N = 0, D = 0;                // drawn per run: N = B * T rows, D the width
constexpr int kMaxPoints = 10;  // the rubric: dW_c 2, dg_s 1, dg_g 1, ds 2, de 2 (finite differences), one row 1, accumulation 1

void report(const std::string& what, bool ok, const std::string& detail, int points = 0) {
  fbt_course_check::report(what, ok, detail, points, 30);
}
using fbt_course_check::fmt;

/// max_i |a_i - b_i| / max(1e-300, max_i |b_i|)
double rel_diff(const std::vector<double>& a, const std::vector<double>& b) {
  double d = 0, s = 1e-300;
  for (std::size_t i = 0; i < a.size(); ++i) d = std::max(d, std::abs(a[i] - b[i])), s = std::max(s, std::abs(b[i]));
  return d / s;
}

bool all_zero(const std::vector<double>& v) {
  for (double x : v)
    if (x != 0) return false;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  const std::uint64_t seed = fbt_course_check::run_seed(argc, argv);
  fbt_course_check::install_crash_guard("concat_backward", kMaxPoints);
  fbt::Rng rng(seed);
  D = fbt_course_check::draw(rng, 3, 8);
  const int B = fbt_course_check::draw(rng, 2, 3), T = fbt_course_check::draw(rng, 2, 5);
  N = B * T;
  std::printf("exercise E1: backward of the concat fuser u = W_c [N_s(s); N_g(e)]  (N = %d rows: B = %d, T = %d; D = %d, double)\n", N, B, T, D);
  // inputs and parameters, away from init so that no gradient is zero by accident
  std::vector<double> s(N * D), e(N * D);      // (N, D) each
  std::vector<double> w_c(D * 2 * D);          // (D, 2D)
  std::vector<double> g_s(D), g_g(D);          // (D) each
  fbt_test::randn(s.data(), s.size(), rng);
  fbt_test::randn(e.data(), e.size(), rng, 1.0, 0.3);
  fbt_test::randn(w_c.data(), w_c.size(), rng, 0.3);
  fbt_test::randn(g_s.data(), D, rng, 0.2, 1.0);
  fbt_test::randn(g_g.data(), D, rng, 0.2, 1.0);
  std::vector<double> w(N * D);                // (N, D)  f = sum w * u, so du = w
  fbt_test::randn(w.data(), w.size(), rng);

  ConcatParams<double> p;
  p.D = D, p.eps = 1e-6, p.w_c = w_c.data(), p.g_s = g_s.data(), p.g_g = g_g.data();
  ConcatCache<double> cache;
  std::vector<double> u(N * D);                // (N, D)
  auto f = [&]() {  // the scalar the finite differences differentiate (its own buffers: u stays unperturbed)
    ConcatCache<double> c;
    std::vector<double> uf(N * D);
    concat_forward(p, c, s.data(), e.data(), uf.data(), N);
    double acc = 0;
    for (int i = 0; i < N * D; ++i) acc += w[i] * uf[i];
    return acc;
  };

  // your backward, into zeroed buffers
  concat_forward(p, cache, s.data(), e.data(), u.data(), N);
  std::vector<double> ds(N * D, 0.0), de(N * D, 0.0), dw_c(D * 2 * D, 0.0), dg_s(D, 0.0), dg_g(D, 0.0);
  ConcatGrads<double> g{dw_c.data(), dg_s.data(), dg_g.data()};
  fbt_course_check::guard("your concat_backward", "an index out of range: ds, de, du are (N, D), g.w_c is (D, 2D) (row o starts at o * 2D), "
                                                  "g.g_s and g.g_g are (D); cache.rs and cache.rg have one value per row");
  concat_backward(p, cache, s.data(), e.data(), w.data(), ds.data(), de.data(), g, N);

  std::printf("1. against central finite differences (h = 1e-5; PASS: rel err < 1e-6, gradient not all zero)\n");
  struct Item { const char* name; std::vector<double>* x; std::vector<double>* grad; int points; };
  const Item items[] = {{"dW_c   (D, 2D)", &w_c, &dw_c, 2}, {"dg_s   (D)  state_norm gain", &g_s, &dg_s, 1}, {"dg_g   (D)  gate_norm gain", &g_g, &dg_g, 1},
                        {"ds     (N, D)", &s, &ds, 2}, {"de     (N, D)", &e, &de, 2}};
  for (const auto& it : items) {
    const fbt_test::GradCheck r = fbt_test::check_gradient(f, it.x->data(), it.grad->data(), it.x->size());
    double gn = 0;
    for (double v : *it.grad) gn += v * v;
    report(it.name, r.err < 1e-6 && std::sqrt(gn) > 1e-8, fmt("rel err %.2e   |g| %.3g", r.err, std::sqrt(gn)), it.points);
  }
  {  // one row alone (B = 1, T = 1): its first row of s, e, w
    std::vector<double> s1(s.begin(), s.begin() + D), e1(e.begin(), e.begin() + D), w1(w.begin(), w.begin() + D);  // (1, D) each
    auto f1 = [&]() {
      ConcatCache<double> c;
      std::vector<double> uf(D);
      concat_forward(p, c, s1.data(), e1.data(), uf.data(), 1);
      double acc = 0;
      for (int i = 0; i < D; ++i) acc += w1[i] * uf[i];
      return acc;
    };
    ConcatCache<double> c1;
    std::vector<double> u1(D), ds1(D, 0.0), de1(D, 0.0), dw1(w_c.size(), 0.0), dgs1(D, 0.0), dgg1(D, 0.0);
    concat_forward(p, c1, s1.data(), e1.data(), u1.data(), 1);
    ConcatGrads<double> g1{dw1.data(), dgs1.data(), dgg1.data()};
    fbt_course_check::guard("your concat_backward (one row)", "an index out of range with N = 1: is a size fixed somewhere instead of N?");
    concat_backward(p, c1, s1.data(), e1.data(), w1.data(), ds1.data(), de1.data(), g1, 1);
    double worst = 0, gn = 0;
    std::vector<double>* xs[] = {&w_c, &g_s, &g_g, &s1, &e1};
    std::vector<double>* gs[] = {&dw1, &dgs1, &dgg1, &ds1, &de1};
    for (int k = 0; k < 5; ++k) {
      worst = std::max(worst, fbt_test::check_gradient(f1, xs[k]->data(), gs[k]->data(), xs[k]->size()).err);
      for (double v : *gs[k]) gn += v * v;
    }
    report("one row (B = T = 1), all five", worst < 1e-6 && std::sqrt(gn) > 1e-8, fmt("worst rel err %.2e", worst), 1);
  }

  std::printf("2. against fbt's ConcatFuser (fbt/layers/concat_fuser.hpp; PASS: max diff < 1e-10 of the gradient's scale)\n");
  fbt::FuserArgs args;
  args.hidden_size = D;
  fbt::ConcatFuser<double> fz(args);
  fbt::ParamStore<double> ps;
  fz.declare(fbt::ParamRegistry<double>(ps, "model.feedback."));
  ps.finalize();
  std::copy(w_c.begin(), w_c.end(), ps.value("model.feedback.w_c.weight"));
  std::copy(g_s.begin(), g_s.end(), ps.value("model.feedback.state_norm.weight"));
  std::copy(g_g.begin(), g_g.end(), ps.value("model.feedback.gate_norm.weight"));
  fbt::CpuBackend<double> be;
  const fbt::Weights<double> wts = fbt::host_weights(ps);
  fbt::HostBuffer<double> mem;
  fbt::ConcatFuser<double>::PreCache pc{};
  fbt::ConcatFuser<double>::Cache fc{};
  double *pre = nullptr, *dpre = nullptr;
  fbt::lay_out_regions<double>(mem, [&](fbt::Regions<double>& r) {
    pre = r.keep.take(std::size_t(N) * D), dpre = r.keep.take(std::size_t(N) * D);
    fbt::Carver<double> t = r.temp();
    fz.alloc_pre(be, r.keep, t, pc, N, true);
    fz.alloc(be, r.keep, t, fc, N, true);
    r.done(t);
  });
  std::vector<double> u_lib(N * D), ds_lib(N * D, 0.0), de_lib(N * D, 0.0);
  fz.pre_forward(be, wts, pc, e.data(), pre, N);                                                       // N_g(e), W_c[:, D:] N_g(e)
  fz.forward(be, wts, fc, s.data(), e.data(), pre, u_lib.data(), N);                                   // + W_c[:, :D] N_s(s)
  fz.backward(be, wts, fc, s.data(), e.data(), pre, w.data(), ds_lib.data(), de_lib.data(), dpre, N);  // state side
  fz.pre_backward(be, wts, pc, e.data(), dpre, de_lib.data(), N);                                      // embedding side
  auto lib = [&](const char* name) {
    const auto& sp = ps.spec(std::string("model.feedback.") + name);
    return std::vector<double>(ps.grads() + sp.offset, ps.grads() + sp.offset + sp.size);
  };
  double d;
  d = rel_diff(u, u_lib), report("forward u (given code)", d < 1e-12, fmt("max diff %.2e", d));
  d = rel_diff(dw_c, lib("w_c.weight")), report("dW_c", d < 1e-10, fmt("max diff %.2e", d));
  d = rel_diff(dg_s, lib("state_norm.weight")), report("dg_s", d < 1e-10, fmt("max diff %.2e", d));
  d = rel_diff(dg_g, lib("gate_norm.weight")), report("dg_g", d < 1e-10, fmt("max diff %.2e", d));
  d = rel_diff(ds, ds_lib), report("ds", d < 1e-10, fmt("max diff %.2e", d));
  d = rel_diff(de, de_lib), report("de", d < 1e-10, fmt("max diff %.2e", d));

  std::printf("3. gradients accumulate (+=): a second call adds the same amount again\n");
  std::vector<double> ds2 = ds, de2 = de, dw_c2 = dw_c, dg_s2 = dg_s, dg_g2 = dg_g;
  ConcatGrads<double> g2{dw_c2.data(), dg_s2.data(), dg_g2.data()};
  fbt_course_check::guard("your concat_backward (its second call)", "an index out of range (see the first call)");
  concat_backward(p, cache, s.data(), e.data(), w.data(), ds2.data(), de2.data(), g2, N);
  auto twice = [](std::vector<double> v) {
    for (auto& x : v) x *= 2;
    return v;
  };
  double worst = 0;
  std::string overwritten;  // the gradients that a second call left as they were (= instead of +=)
  const char* names[] = {"ds", "de", "dW_c", "dg_s", "dg_g"};
  int i = 0;
  for (auto [a, b] : {std::pair{&ds2, &ds}, {&de2, &de}, {&dw_c2, &dw_c}, {&dg_s2, &dg_s}, {&dg_g2, &dg_g}}) {
    worst = std::max(worst, rel_diff(*a, twice(*b)));
    if (!all_zero(*b) && rel_diff(*a, *b) < 1e-12) overwritten += std::string(overwritten.empty() ? "" : ", ") + names[i];
    ++i;
  }
  const bool nothing = all_zero(ds) && all_zero(de) && all_zero(dw_c) && all_zero(dg_s) && all_zero(dg_g);
  if (nothing)
    report("all five gradients", false, "the gradient is all zeros: nothing was written to ds, de, dW_c, dg_s, dg_g", 1);
  else if (!overwritten.empty())
    report("all five gradients", false, "a second call did not add: " + overwritten + " overwritten (=), not accumulated (+=)", 1);
  else
    report("all five gradients", worst < 1e-12, fmt("max diff %.2e", worst), 1);

  if (fbt_course_check::score().failures) {  // name the mistake: compare with known wrong variants of the library's gradients
    // dns = du W_c[:, :D], dng = du W_c[:, D:]: what the matrix part sends to the two norms
    std::vector<double> dns(N * D, 0.0), dng(N * D, 0.0);
    for (int n = 0; n < N; ++n)
      for (int o = 0; o < D; ++o)
        for (int c = 0; c < D; ++c)
          dns[n * D + c] += w[n * D + o] * w_c[o * 2 * D + c], dng[n * D + c] += w[n * D + o] * w_c[o * 2 * D + D + c];
    std::vector<double> swapped(dw_c.size());  // your dW_c with its halves swapped
    for (int o = 0; o < D; ++o)
      for (int c = 0; c < D; ++c) swapped[o * 2 * D + c] = dw_c[o * 2 * D + D + c], swapped[o * 2 * D + D + c] = dw_c[o * 2 * D + c];
    const std::vector<double> dw_lib = lib("w_c.weight");
#ifdef FBT_COURSE_HAVE_REFERENCE
    using fbt_course_reference::NormBug;
    auto matches = [&](NormBug bug) {
      return rel_diff(ds, fbt_course_reference::norm_backward(dns, s, g_s, cache.rs, bug, N, D)) < 1e-9 &&
             rel_diff(de, fbt_course_reference::norm_backward(dng, e, g_g, cache.rg, bug, N, D)) < 1e-9;
    };
#else
    enum class NormBug { kNoMean, kNoGain };
    auto matches = [](NormBug) { return false; };  // without the teacher's reference: read the symptom only
#endif
    const bool matrix_ok = rel_diff(dw_c, dw_lib) < 1e-10, gains_ok = rel_diff(dg_s, lib("state_norm.weight")) < 1e-10 &&
                                                                     rel_diff(dg_g, lib("gate_norm.weight")) < 1e-10;
    const bool inputs_ok = rel_diff(ds, ds_lib) < 1e-10 && rel_diff(de, de_lib) < 1e-10;
    std::string diagnosis;
    int hint = 2;
    if (nothing)
      diagnosis = "likely: the gradient is all zeros: nothing was written to ds, de, dW_c, dg_s, dg_g", hint = 1;
    else if (!overwritten.empty() && matrix_ok && gains_ok && inputs_ok)
      diagnosis = "diagnosis: your backward overwrites (=) instead of accumulating (+=): " + overwritten, hint = 1;
    else if (!matrix_ok && rel_diff(swapped, dw_lib) < 1e-10)
      diagnosis = "diagnosis: the two halves of W_c are swapped: the left half W_c[:, :D] multiplies N_s(s), the right half N_g(e)", hint = 2;
    else if (matrix_ok && gains_ok && matches(NormBug::kNoMean))
      diagnosis = "diagnosis: the RMSNorm backward misses its mean term: dx = r * (dxhat - xhat * mean(dxhat * xhat)), not r * dxhat", hint = 3;
    else if (matrix_ok && gains_ok && matches(NormBug::kNoGain))
      diagnosis = "diagnosis: the RMSNorm backward misses the gain: dxhat = dy * g before the norm's own backward", hint = 3;
    else if (matrix_ok && gains_ok)
      diagnosis = "likely: the matrix and the gains are right; the error is in the RMSNorm backward to s and e", hint = 3;
    else if (!matrix_ok)
      diagnosis = "likely: dW_c is wrong: start with the matrix part, u = W_c[:, :D] ns + W_c[:, D:] ng", hint = 1;
    else
      diagnosis = "likely: a gain's gradient is wrong: ns = shat * g_s, so dg_s collects dns * shat over the rows", hint = 2;
    std::printf("%s\n", diagnosis.c_str());
    std::printf("stuck? read exercises/hints/concat_backward.md, hint %d\n", hint);
  }
#ifdef FBT_EXERCISE_UNSOLVED
  if (nothing) {
    fbt_course_check::print_grade("concat_backward", true, kMaxPoints);
    std::printf("NOT ATTEMPTED: exercises/concat_backward.hpp is the shipped stub (it defines FBT_EXERCISE_UNSOLVED and writes\n"
                "nothing). Delete that line when you start; exit status 77 (ctest: skipped)\n");
    return 77;
  }
  std::printf("note: your file still defines FBT_EXERCISE_UNSOLVED; delete that line\n");
#endif

  fbt_course_check::print_grade("concat_backward");
  const int failures = fbt_course_check::score().failures;
  std::printf("%s: %d check(s) failed\n", failures ? "FAIL" : "PASS", failures);
  return failures ? 1 : 0;
}
