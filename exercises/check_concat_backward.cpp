// exercises/check_concat_backward.cpp: the checker of exercise E1 (docs/course/03-exercises.md).
//
// Includes <concat_backward.hpp> with ANGLE brackets, so the include path picks the file under test:
//   target exercise_concat_backward_student   -I exercises/            -> your exercises/concat_backward.hpp
//   target exercise_concat_backward_solution  -I exercises/solutions/  -> the reference solution
// In double, with D = 8 and N = 6 rows, weights and gains moved away from their init, and the scalar
// f = sum_{n,o} w[n, o] u[n, o] (a fixed random w, so du = w), it checks every gradient twice:
//   1. against central finite differences (tests/common/gradcheck.hpp: err = ||g - g_fd|| / max(||g||, ||g_fd||),
//      PASS when err < 1e-6 and the gradient is not all zero; a correct backward gives ~1e-10);
//   2. against fbt's own concat fuser (ConcatFuser backward + pre_backward), to 1e-10 of its scale;
// and that the gradients ACCUMULATE (+=) into pre-filled buffers. Exit status 0 iff every line says PASS.
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include <concat_backward.hpp>  // yours or the solution: chosen by the include path (see above)
#include <common/gradcheck.hpp>  // tests/common/gradcheck.hpp: check_gradient, randn

#include "fbt/layers/concat_fuser.hpp"

using namespace fbt_course;

namespace {

constexpr int N = 6, D = 8;
int failures = 0;

/// One result line: "  PASS  what  detail".
void report(const std::string& what, bool ok, const std::string& detail) {
  std::printf("  %-4s  %-30s %s\n", ok ? "PASS" : "FAIL", what.c_str(), detail.c_str());
  if (!ok) ++failures;
}
std::string fmt(const char* f, double a, double b = 0) {
  char buf[128];
  std::snprintf(buf, sizeof buf, f, a, b);
  return buf;
}

/// max_i |a_i - b_i| / max(1e-300, max_i |b_i|)
double rel_diff(const std::vector<double>& a, const std::vector<double>& b) {
  double d = 0, s = 1e-300;
  for (std::size_t i = 0; i < a.size(); ++i) d = std::max(d, std::abs(a[i] - b[i])), s = std::max(s, std::abs(b[i]));
  return d / s;
}

}  // namespace

int main() {
  std::printf("exercise E1: backward of the concat fuser u = W_c [N_s(s); N_g(e)]  (N = %d rows, D = %d, double)\n", N, D);
  fbt::Rng rng(2026);
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
  concat_backward(p, cache, s.data(), e.data(), w.data(), ds.data(), de.data(), g, N);

  std::printf("1. against central finite differences (h = 1e-5; PASS: rel err < 1e-6, gradient not all zero)\n");
  struct Item { const char* name; std::vector<double>* x; std::vector<double>* grad; };
  const Item items[] = {{"dW_c   (D, 2D)", &w_c, &dw_c}, {"dg_s   (D)  state_norm gain", &g_s, &dg_s}, {"dg_g   (D)  gate_norm gain", &g_g, &dg_g},
                        {"ds     (N, D)", &s, &ds}, {"de     (N, D)", &e, &de}};
  for (const auto& it : items) {
    const fbt_test::GradCheck r = fbt_test::check_gradient(f, it.x->data(), it.grad->data(), it.x->size());
    double gn = 0;
    for (double v : *it.grad) gn += v * v;
    report(it.name, r.err < 1e-6 && std::sqrt(gn) > 1e-8, fmt("rel err %.2e   |g| %.3g", r.err, std::sqrt(gn)));
  }

  std::printf("2. against fbt's ConcatFuser (fbt/layers/concat_fuser.hpp; PASS: max diff < 1e-10 of the gradient's scale)\n");
  fbt::ConcatFuser<double> fz(fbt::FuserArgs{D});
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
  concat_backward(p, cache, s.data(), e.data(), w.data(), ds2.data(), de2.data(), g2, N);
  auto twice = [](std::vector<double> v) {
    for (auto& x : v) x *= 2;
    return v;
  };
  double worst = 0;
  for (auto [a, b] : {std::pair{&ds2, &ds}, {&de2, &de}, {&dw_c2, &dw_c}, {&dg_s2, &dg_s}, {&dg_g2, &dg_g}})
    worst = std::max(worst, rel_diff(*a, twice(*b)));
  bool nonzero = false;
  for (double v : dw_c) nonzero = nonzero || v != 0;
  report("all five gradients", worst < 1e-12 && nonzero, fmt("max diff %.2e", worst));

  std::printf("%s: %d check(s) failed\n", failures ? "FAIL" : "PASS", failures);
  return failures ? 1 : 0;
}
