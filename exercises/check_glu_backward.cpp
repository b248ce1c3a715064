// exercises/check_glu_backward.cpp: the checker of exercise E6 (docs/course/03-exercises.md), the backward of the
// paper's GLU fuser u = (W_U s) * sigmoid(W_G N_g(e)).
//
// Includes <glu_backward.hpp> with ANGLE brackets, so the include path picks the file under test:
//   target exercise_glu_backward_student   -I exercises/ (or a hand-in folder)  -> your glu_backward.hpp
//   target exercise_glu_backward_solution / _mutant_<bug>: the teacher's solution, or a mutant of it
// In double, with sizes and data drawn from the run's seed (first line; `--seed N` repeats a run), weights moved
// away from their init, and the scalar f = sum_k sum_{n,o} w_k[n, o] u_k[n, o] over the K passes (a random w_k,
// so du_k = w_k):
//   1. a LADDER of cases, each reported before the next, each gradient against central finite differences
//      (tests/common/gradcheck.hpp; PASS when rel err < 1e-6 and the gradient is not all zero):
//        one row: dW_U and ds (the proposal);  one row: dW_G (through the sigmoid);  one row: dg_g and de
//        (through N_g);  one sequence of T rows (B = 1): all five;  K passes (K 2..4) over B sequences sharing e:
//        all five (de, dW_G, dg_g, dW_U sum over the passes), one of them with T = 1 position;
//   2. against fbt's own GluFuser (fbt/layers/glu_fuser.hpp): the given forward and the five gradients;
//   3. the gradients accumulate (+=): on buffers that already hold values, each adds the same amount.
// Then a diagnosis: "diagnosis: ..." when your gradients equal a known mistake (the teacher's reference,
// course/instructor/reference/glu_backward_reference.hpp, when it is on the include path; or a gradient that is
// overwritten), else "likely: ..." from the gradients that fail first; and which hint of
// exercises/hints/glu_backward.md to read. The score (rubric: docs/course/teaching.md) is the line "grade: ...".
// Exit status: 0 iff every line says PASS; 77 when the file is the untouched stub (it defines
// FBT_EXERCISE_UNSOLVED and wrote nothing: ctest reads 77 as "skipped", i.e. not attempted yet); 1 otherwise.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include <glu_backward.hpp>      // yours, the solution or a mutant: chosen by the include path (see above)
#include <common/gradcheck.hpp>  // tests/common/gradcheck.hpp: check_gradient, randn

#include "checker.hpp"  // run_seed, draw, report, fmt, the score, the crash guard
#include "fbt/layers/glu_fuser.hpp"

#if __has_include(<glu_backward_reference.hpp>)
#include <glu_backward_reference.hpp>  // the teacher's: the known mistakes, for the diagnoses
#define FBT_COURSE_HAVE_REFERENCE 1
#endif

using namespace fbt_course;
using fbt_course_check::fmt;

namespace {

constexpr int kMaxPoints = 10;  // the rubric: the ladder's cases 2 + 2 + 2 + 1 + 1 + 1, accumulation 1
constexpr double kEps = 1e-6;

void report(const std::string& what, bool ok, const std::string& detail, int points = 0) {
  fbt_course_check::report(what, ok, detail, points, 52);
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

// the five gradients, in the order the checker names them
enum Which { kWU, kWG, kGain, kS, kE, kWhich };
const char* const kName[kWhich] = {"dW_U", "dW_G", "dg_g", "ds", "de"};

/// The parameters, drawn once per run (D too).
int D = 0;
std::vector<double> gWU, gWG, gGain;  // (D, D), (D, D), (D)

/// One case of the ladder: K passes over N = B * T rows, each pass with its own state s_k and its own du_k = w_k;
/// the embeddings e are the same in every pass (as in training).
struct Case {
  std::string name;
  int B = 1, T = 1, K = 1;
  std::vector<Which> checked;  // the gradients this case checks
  int points = 0;
  std::vector<double> s, w, e;  // (K * N, D), (K * N, D), (N, D)
  int N() const { return B * T; }
};

/// Five gradient buffers: ds (K * N, D), one block per pass; de (N, D); dW_U, dW_G (D, D); dg_g (D).
struct Grads {
  std::vector<double> g[kWhich];
};
Grads zero_grads(const Case& cs) {
  Grads r;
  r.g[kWU].assign(std::size_t(D) * D, 0.0), r.g[kWG].assign(std::size_t(D) * D, 0.0), r.g[kGain].assign(D, 0.0);
  r.g[kS].assign(std::size_t(cs.K) * cs.N() * D, 0.0), r.g[kE].assign(std::size_t(cs.N()) * D, 0.0);
  return r;
}

GluParams<double> params() {
  GluParams<double> p;
  p.D = D, p.eps = kEps, p.w_u = gWU.data(), p.w_g = gWG.data(), p.g_g = gGain.data();
  return p;
}

/// f = sum_k <w_k, u_k> (its own buffers).
double f_of(const Case& cs) {
  const int N = cs.N();
  const std::size_t ND = std::size_t(N) * D;
  double acc = 0;
  std::vector<double> u(ND);
  for (int k = 0; k < cs.K; ++k) {
    GluCache<double> c;
    glu_forward(params(), c, cs.s.data() + k * ND, cs.e.data(), u.data(), N);
    for (std::size_t i = 0; i < ND; ++i) acc += cs.w[k * ND + i] * u[i];
  }
  return acc;
}

/// Your backward, pass by pass, into the buffers of g (which it must add to).
void student_into(const Case& cs, Grads& g) {
  const int N = cs.N();
  const std::size_t ND = std::size_t(N) * D;
  std::vector<double> u(ND);
  for (int k = 0; k < cs.K; ++k) {
    GluCache<double> c;
    glu_forward(params(), c, cs.s.data() + k * ND, cs.e.data(), u.data(), N);
    GluGrads<double> pg{g.g[kWU].data(), g.g[kWG].data(), g.g[kGain].data()};
    fbt_course_check::guard("your glu_backward",
                            "an index out of range: ds, de, du are (N, D) (row n starts at n * D), g.w_u and g.w_g are (D, D), "
                            "g.g_g is (D); cache.rg has one value per row");
    glu_backward(params(), c, cs.s.data() + k * ND, cs.e.data(), cs.w.data() + k * ND, g.g[kS].data() + k * ND, g.g[kE].data(), pg, N);
    fbt_course_check::guard("the checker", "a bug of the checker: please report it");
  }
}
Grads student(const Case& cs) {
  Grads g = zero_grads(cs);
  student_into(cs, g);
  return g;
}
bool all_zero(const Grads& g) {
  for (const auto& v : g.g)
    if (max_abs(v) != 0) return false;
  return true;
}

#ifdef FBT_COURSE_HAVE_REFERENCE
Grads reference(const Case& cs, fbt_course_reference::GluBug bug) {
  const int N = cs.N();
  const std::size_t ND = std::size_t(N) * D;
  Grads g = zero_grads(cs);
  for (int k = 0; k < cs.K; ++k) {
    fbt_course_reference::GluRefGrads r;
    r.ds.assign(ND, 0.0), r.de = g.g[kE], r.dw_u = g.g[kWU], r.dw_g = g.g[kWG], r.dg_g = g.g[kGain];
    fbt_course_reference::glu_backward_reference(gWU.data(), gWG.data(), gGain.data(), kEps, cs.s.data() + k * ND, cs.e.data(),
                                                 cs.w.data() + k * ND, N, D, bug, r);
    std::copy(r.ds.begin(), r.ds.end(), g.g[kS].begin() + k * ND);
    g.g[kE] = r.de, g.g[kWU] = r.dw_u, g.g[kWG] = r.dw_g, g.g[kGain] = r.dg_g;
  }
  return g;
}
bool same(const Grads& a, const Grads& b) {  // equal up to round-off
  for (int i = 0; i < kWhich; ++i)
    if (rel_diff(a.g[i], b.g[i]) > 1e-8) return false;
  return true;
}
#endif

/// A case with its data drawn from rng.
Case make_case(fbt::Rng& rng, std::string name, int B, int T, int K, std::vector<Which> checked, int points) {
  Case cs;
  cs.name = std::move(name), cs.B = B, cs.T = T, cs.K = K, cs.checked = std::move(checked), cs.points = points;
  const std::size_t ND = std::size_t(cs.N()) * D;
  cs.s.resize(K * ND), cs.w.resize(K * ND), cs.e.resize(ND);
  fbt_test::randn(cs.s.data(), cs.s.size(), rng);
  fbt_test::randn(cs.w.data(), cs.w.size(), rng);
  fbt_test::randn(cs.e.data(), cs.e.size(), rng, 1.0, 0.3);
  return cs;
}

}  // namespace

int main(int argc, char** argv) {
  const std::uint64_t seed = fbt_course_check::run_seed(argc, argv);
  fbt_course_check::install_crash_guard("glu_backward", kMaxPoints);
  fbt::Rng rng(seed);
  D = fbt_course_check::draw(rng, 3, 8);
  const int T1 = fbt_course_check::draw(rng, 2, 6);                                    // case 4: one sequence
  const int B2 = fbt_course_check::draw(rng, 2, 3), T2 = fbt_course_check::draw(rng, 2, 5), K2 = fbt_course_check::draw(rng, 2, 4);  // case 5
  const int B3 = fbt_course_check::draw(rng, 2, 4), K3 = fbt_course_check::draw(rng, 2, 4);  // case 6: T = 1
  std::printf("exercise E6: backward of the GLU fuser u = (W_U s) * sigmoid(W_G N_g(e))  (D = %d, double)\n", D);
  gWU.resize(std::size_t(D) * D), gWG.resize(std::size_t(D) * D), gGain.resize(D);
  fbt_test::randn(gWU.data(), gWU.size(), rng, 0.5);  // away from the init (W_U = I, W_G ~ 0: the gate would be 1/2 everywhere)
  fbt_test::randn(gWG.data(), gWG.size(), rng, 0.7);
  fbt_test::randn(gGain.data(), gGain.size(), rng, 0.2, 1.0);

  std::vector<Case> cases;
  cases.push_back(make_case(rng, "one row: dW_U, ds (the proposal a = W_U s)", 1, 1, 1, {kWU, kS}, 2));
  cases.push_back(make_case(rng, "one row: dW_G (through the sigmoid)", 1, 1, 1, {kWG}, 2));
  cases.push_back(make_case(rng, "one row: dg_g, de (through N_g)", 1, 1, 1, {kGain, kE}, 2));
  cases.push_back(make_case(rng, "B = 1, T = " + std::to_string(T1) + ": all five", 1, T1, 1, {kWU, kWG, kGain, kS, kE}, 1));
  cases.push_back(make_case(rng, "K = " + std::to_string(K2) + " passes, B = " + std::to_string(B2) + ", T = " + std::to_string(T2) + ": all five",
                            B2, T2, K2, {kWU, kWG, kGain, kS, kE}, 1));
  cases.push_back(make_case(rng, "K = " + std::to_string(K3) + " passes, B = " + std::to_string(B3) + ", T = 1: all five", B3, 1, K3,
                            {kWU, kWG, kGain, kS, kE}, 1));

  std::printf("1. the ladder: each case's gradients against central finite differences (PASS: rel err < 1e-6, not all zero)\n");
#ifdef FBT_COURSE_HAVE_REFERENCE
  using fbt_course_reference::kGluBugs;
  bool matches[kGluBugs];
  std::fill(matches, matches + kGluBugs, true);
#endif
  bool nothing = true;
  int first_fail = -1;
  bool first_wrong[kWhich] = {};  // the gradients that fail in the first failing case
  for (std::size_t ci = 0; ci < cases.size(); ++ci) {
    Case& cs = cases[ci];
    Grads g = student(cs);
    nothing = nothing && all_zero(g);
    auto f = [&]() { return f_of(cs); };
    double* x[kWhich] = {gWU.data(), gWG.data(), gGain.data(), cs.s.data(), cs.e.data()};
    bool ok = true, wrong[kWhich] = {};
    std::string detail;
    for (Which which : cs.checked) {
      const double err = fbt_test::check_gradient(f, x[which], g.g[which].data(), g.g[which].size()).err;
      wrong[which] = !(err < 1e-6) || max_abs(g.g[which]) < 1e-12;
      ok = ok && !wrong[which];
      detail += std::string(detail.empty() ? "rel err " : "  ") + kName[which] + fmt(" %.1e", err);
    }
    report("case " + std::to_string(ci + 1) + ": " + cs.name, ok, detail, cs.points);
#ifdef FBT_COURSE_HAVE_REFERENCE
    for (int b = 1; b < kGluBugs; ++b) matches[b] = matches[b] && same(g, reference(cs, fbt_course_reference::GluBug(b)));
#endif
    if (!ok && first_fail < 0) {
      first_fail = int(ci);
      std::copy(wrong, wrong + kWhich, first_wrong);
    }
  }

  std::printf("2. against fbt's GluFuser (fbt/layers/glu_fuser.hpp) on case 4 (PASS: max diff < 1e-10 of the gradient's scale)\n");
  {
    const Case& cs = cases[3];
    const int N = cs.N();
    fbt::FuserArgs args;
    args.hidden_size = D, args.rms_norm_eps = kEps;
    fbt::GluFuser<double> fz(args);
    fbt::ParamStore<double> ps;
    fz.declare(fbt::ParamRegistry<double>(ps, "model.feedback."));
    ps.finalize();
    std::copy(gWU.begin(), gWU.end(), ps.value("model.feedback.w_u.weight"));
    std::copy(gWG.begin(), gWG.end(), ps.value("model.feedback.w_g.weight"));
    std::copy(gGain.begin(), gGain.end(), ps.value("model.feedback.gate_norm.weight"));
    fbt::CpuBackend<double> be;
    const fbt::Weights<double> wts = fbt::host_weights(ps);
    fbt::HostBuffer<double> mem;
    fbt::GluFuser<double>::PreCache pc{};
    fbt::GluFuser<double>::Cache fc{};
    double *pre = nullptr, *dpre = nullptr;
    fbt::lay_out_regions<double>(mem, [&](fbt::Regions<double>& r) {
      pre = r.keep.take(std::size_t(N) * D), dpre = r.keep.take(std::size_t(N) * D);
      fbt::Carver<double> t = r.temp();
      fz.alloc_pre(be, r.keep, t, pc, N, true);
      fz.alloc(be, r.keep, t, fc, N, true);
      r.done(t);
    });
    std::fill(dpre, dpre + std::size_t(N) * D, 0.0);
    Grads lib = zero_grads(cs);
    std::vector<double> u_lib(std::size_t(N) * D), u(std::size_t(N) * D);
    fz.pre_forward(be, wts, pc, cs.e.data(), pre, N);                                                                   // pre = W_G N_g(e)
    fz.forward(be, wts, fc, cs.s.data(), cs.e.data(), pre, u_lib.data(), N);                                            // u = (W_U s) * sigmoid(pre)
    fz.backward(be, wts, fc, cs.s.data(), cs.e.data(), pre, cs.w.data(), lib.g[kS].data(), lib.g[kE].data(), dpre, N);  // the state's side
    fz.pre_backward(be, wts, pc, cs.e.data(), dpre, lib.g[kE].data(), N);                                               // the gate's side
    auto grad_of = [&](const char* name) {
      const auto& sp = ps.spec(std::string("model.feedback.") + name);
      return std::vector<double>(ps.grads() + sp.offset, ps.grads() + sp.offset + sp.size);
    };
    lib.g[kWU] = grad_of("w_u.weight"), lib.g[kWG] = grad_of("w_g.weight"), lib.g[kGain] = grad_of("gate_norm.weight");
    GluCache<double> c;
    glu_forward(params(), c, cs.s.data(), cs.e.data(), u.data(), N);
    double d = rel_diff(u, u_lib);
    report("forward u (given code)", d < 1e-12, fmt("max diff %.2e", d));
    const Grads mine = student(cs);
    for (int i = 0; i < kWhich; ++i) d = rel_diff(mine.g[i], lib.g[i]), report(kName[i], d < 1e-10, fmt("max diff %.2e", d));
  }

  std::printf("3. gradients accumulate (+=): on buffers that already hold values, each gradient adds the same amount (case 5)\n");
  std::string overwritten;  // the gradients that do not add to what their buffer held
  {
    const Case& cs = cases[4];
    Case one = cs;  // one pass of case 5: a single call, so that only the buffers' old values differ
    one.K = 1, one.s.resize(std::size_t(cs.N()) * D), one.w.resize(std::size_t(cs.N()) * D);
    const Grads from_zero = student(one);
    Grads held = zero_grads(one);  // buffers with values in them already
    fbt::Rng r2(seed + 11);
    for (auto& v : held.g) fbt_test::randn(v.data(), v.size(), r2);
    Grads g = held;
    student_into(one, g);
    double worst = 0;
    for (int i = 0; i < kWhich; ++i) {
      std::vector<double> added(g.g[i].size());
      for (std::size_t j = 0; j < added.size(); ++j) added[j] = g.g[i][j] - held.g[i][j];
      const double d = rel_diff(added, from_zero.g[i]);
      worst = std::max(worst, d);
      if (d > 1e-9 && max_abs(from_zero.g[i]) > 0) overwritten += std::string(overwritten.empty() ? "" : ", ") + kName[i];
    }
    if (nothing)
      report("all five gradients", false, "the gradient is all zeros: nothing was written to ds, de, dW_U, dW_G, dg_g", 1);
    else
      report("all five gradients", overwritten.empty(),
             overwritten.empty() ? fmt("max rel diff %.2e", worst) : overwritten + " did not add to the values already there", 1);
  }

  // the diagnosis: a known mistake, else the gradients that fail first
  if (fbt_course_check::score().failures) {
    int hint = 2;
    std::string diagnosis;
    if (nothing)
      diagnosis = "likely: the gradient is all zeros: nothing was written to ds, de, dW_U, dW_G, dg_g", hint = 1;
    else if (!overwritten.empty())
      diagnosis = "diagnosis: " + overwritten + (overwritten.find(',') == std::string::npos ? " is" : " are") +
                  " overwritten (=), not accumulated (+=): every update must add to the buffer. The K passes share e, W_U, W_G "
                  "and g_g, so their gradients sum over the passes; within one call a row of ds or de sums over the D outputs",
      hint = 1;
#ifdef FBT_COURSE_HAVE_REFERENCE
    for (int b = 1; b < kGluBugs && diagnosis.empty(); ++b)
      if (matches[b]) {
        const auto& info = fbt_course_reference::glu_bug_info(fbt_course_reference::GluBug(b));
        diagnosis = std::string("diagnosis: ") + info.diagnosis, hint = info.hint;
      }
#endif
    if (diagnosis.empty() && first_fail >= 0) {  // no known mistake matches: read the symptom
      if (first_wrong[kWU] && first_wrong[kS])
        diagnosis = "likely: the proposal side is wrong (dW_U and ds): u = a * gate with a = W_U s; what reaches a, and from a, W_U and s?",
        hint = 1;
      else if (first_wrong[kWU])
        diagnosis = "likely: dW_U is wrong but ds is right: which index of W_U[o, c] goes with the output o, which with the input s[n, c]?", hint = 2;
      else if (first_wrong[kS])
        diagnosis = "likely: ds is wrong but dW_U is right: s[n, c] reaches every a[n, o] through W_U[o, c]; sum over o", hint = 2;
      else if (first_wrong[kWG])
        diagnosis = "likely: dW_G is wrong: the gate's pre-activation pre = W_G N_g(e) reaches u through sigmoid; check dpre and "
                    "which input W_G multiplies (cache.ng)",
        hint = 2;
      else if (first_wrong[kGain] && !first_wrong[kE])
        diagnosis = "likely: dg_g is wrong but de is right: ng = ehat * g_g, so dg_g collects dng * ehat over the rows", hint = 2;
      else if (first_wrong[kE] && !first_wrong[kGain])
        diagnosis = "likely: de is wrong but dg_g is right: the RMSNorm backward of N_g (rg depends on the whole row of e)", hint = 3;
      else if (first_wrong[kE])
        diagnosis = "likely: dg_g and de are wrong: what reaches N_g(e) from the gate, dng = dpre W_G?", hint = 2;
      else
        diagnosis = "likely: one pass alone is right; with several rows or passes it is not: does every row n use its own rows of "
                    "s, e, du and the cache, and does every gradient add (+=) over the rows and passes?",
        hint = 1;
    }
    if (!diagnosis.empty()) std::printf("%s\n", diagnosis.c_str());
    if (first_fail >= 0)
      std::printf("stuck? read exercises/hints/glu_backward.md, hint %d (first failing case: %s)\n", hint, cases[first_fail].name.c_str());
    else
      std::printf("stuck? read exercises/hints/glu_backward.md, hint %d\n", hint);
  }

#ifdef FBT_EXERCISE_UNSOLVED
  if (nothing) {
    fbt_course_check::print_grade("glu_backward", true, kMaxPoints);
    std::printf("NOT ATTEMPTED: exercises/glu_backward.hpp is the shipped stub (it defines FBT_EXERCISE_UNSOLVED and writes\n"
                "nothing). Delete that line when you start; exit status 77 (ctest: skipped)\n");
    return 77;
  }
  std::printf("note: your file still defines FBT_EXERCISE_UNSOLVED; delete that line\n");
#endif
  fbt_course_check::print_grade("glu_backward");
  const int failures = fbt_course_check::score().failures;
  std::printf("%s: %d check(s) failed\n", failures ? "FAIL" : "PASS", failures);
  return failures ? 1 : 0;
}
