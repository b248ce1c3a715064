// exercises/check_gated_residual.cpp: the checker of exercise E5 (docs/course/04-fuser-lab.md), the gated
// residual fuser
//
//     u = e + sigmoid(W_g [s; e]) * (W_s s)        W_g (D, 2D), W_s (D, D)
//
// Includes <gated_residual.hpp> with ANGLE brackets, so the include path picks the file under test
// (exercises/ for the student, exercises/solutions/ for the solution); a mutant build names its file in
// FBT_EXERCISE_HEADER instead. In double, it checks
//   (a) the fuser on its own, N = 6 rows, D = 8, weights moved away from their init, the scalar
//       f = sum_{n,o} w[n, o] u[n, o] (a fixed random w, so du = w):
//       the parameters' names and shapes; the forward against the formula written out here; each gradient
//       (dW_g, dW_s, ds, de) against central finite differences (tests/common/gradcheck.hpp: PASS when
//       rel err < 1e-6 and the gradient is not all zero); accumulation (+=); a detached pass (ds null);
//   (b) the whole K = 3 step of a tiny Model<double, GatedResidualFuser<double>> against finite
//       differences, every parameter tensor (fbt::check_step_gradients): the fuser plugs in;
//   (c) the checkpoint round trip of that model: save_model, load_model, the same tensors bit for bit and
//       the same step objective.
// Every line says PASS or FAIL and what; exit status 0 iff every line says PASS.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#ifdef FBT_EXERCISE_HEADER
#include FBT_EXERCISE_HEADER  // a mutant of the solution (exercises/mutants/)
#else
#include <gated_residual.hpp>  // yours or the solution: chosen by the include path (see above)
#endif
#include <common/gradcheck.hpp>  // tests/common/gradcheck.hpp: check_gradient, randn

#include "fbt/fbt.hpp"

using Fuser = fbt_course::GatedResidualFuser<double>;

namespace {

constexpr int N = 6, D = 8;
int failures = 0;

/// One result line: "  PASS  what  detail".
void report(const std::string& what, bool ok, const std::string& detail) {
  std::printf("  %-4s  %-34s %s\n", ok ? "PASS" : "FAIL", what.c_str(), detail.c_str());
  if (!ok) ++failures;
}
std::string fmt(const char* f, double a, double b = 0) {
  char buf[160];
  std::snprintf(buf, sizeof buf, f, a, b);
  return buf;
}
double max_abs_diff(const double* a, const double* b, std::size_t n) {
  double d = 0;
  for (std::size_t i = 0; i < n; ++i) d = std::max(d, std::abs(a[i] - b[i]));
  return d;
}

/// The fuser on its own: its parameters in a ParamStore, its Cache in a region, a CPU backend.
struct Bench {
  Fuser fz{fbt::FuserArgs{D}};
  fbt::ParamStore<double> ps;
  fbt::CpuBackend<double> be;
  fbt::HostBuffer<double> mem;
  Fuser::Cache c{};
  Bench() {
    fz.declare(fbt::ParamRegistry<double>(ps, "model.feedback."));
    ps.finalize();
    fbt::lay_out_regions<double>(mem, [&](fbt::Regions<double>& r) {
      fbt::Carver<double> t = r.temp();
      fz.alloc(be, r.keep, t, c, N, true);
      r.done(t);
    });
  }
  void forward(const double* s, const double* e, double* u) { fz.forward(be, fbt::host_weights(ps), c, s, e, nullptr, u, N); }
  void backward(const double* s, const double* e, const double* du, double* ds, double* de) {
    fz.backward(be, fbt::host_weights(ps), c, s, e, nullptr, du, ds, de, nullptr, N);
  }
};

/// (a) the fuser on its own. Returns false when its parameters are not there (nothing else can run).
bool check_fuser() {
  std::printf("(a) the fuser on its own (N = %d rows, D = %d, double)\n", N, D);
  Bench b;
  const char* names[] = {"model.feedback.w_g.weight", "model.feedback.w_s.weight"};
  const fbt::Shape shapes[] = {{D, 2 * D}, {D, D}};
  bool params_ok = true;
  for (int i = 0; i < 2; ++i) {
    const bool ok = b.ps.has(names[i]) && b.ps.spec(names[i]).shape == shapes[i];
    report(std::string("parameter ") + names[i], ok, ok ? "declared, shape as stated" : "missing or of the wrong shape (declare)");
    params_ok = params_ok && ok;
  }
  if (!params_ok) return false;
  double* W_g = b.ps.value(names[0]);  // (D, 2D)
  double* W_s = b.ps.value(names[1]);  // (D, D)
  fbt::Rng rng(2026);
  fbt_test::randn(W_g, std::size_t(D) * 2 * D, rng, 0.5);  // away from init: W_s = 0 would zero the state's gradients
  fbt_test::randn(W_s, std::size_t(D) * D, rng, 0.5);
  std::vector<double> s(N * D), e(N * D), w(N * D);  // (N, D) each; f = sum w * u, so du = w
  fbt_test::randn(s.data(), s.size(), rng);
  fbt_test::randn(e.data(), e.size(), rng);
  fbt_test::randn(w.data(), w.size(), rng);

  // the forward against the formula, written out
  std::vector<double> u(N * D), u_ref(N * D);  // (N, D) each
  b.forward(s.data(), e.data(), u.data());
  for (int n = 0; n < N; ++n)
    for (int o = 0; o < D; ++o) {
      double z = 0, a = 0;
      for (int c = 0; c < D; ++c) z += W_g[o * 2 * D + c] * s[n * D + c] + W_g[o * 2 * D + D + c] * e[n * D + c], a += W_s[o * D + c] * s[n * D + c];
      u_ref[n * D + o] = e[n * D + o] + a / (1 + std::exp(-z));
    }
  const double fd = max_abs_diff(u.data(), u_ref.data(), u.size());
  report("forward u = e + sigmoid(z) * a", fd < 1e-12, fmt("max diff %.2e from the formula", fd));

  auto f = [&]() {  // the scalar the finite differences differentiate (its own output buffer)
    std::vector<double> uf(N * D);
    b.forward(s.data(), e.data(), uf.data());
    double acc = 0;
    for (int i = 0; i < N * D; ++i) acc += w[i] * uf[i];
    return acc;
  };
  // your backward, into zeroed buffers (forward first: backward reads the cache)
  b.ps.zero_grad();
  std::vector<double> ds(N * D, 0.0), de(N * D, 0.0);  // (N, D) each
  b.forward(s.data(), e.data(), u.data());
  b.backward(s.data(), e.data(), w.data(), ds.data(), de.data());
  std::vector<double> dW_g(b.ps.grad(names[0]), b.ps.grad(names[0]) + 2 * D * D);  // (D, 2D)
  std::vector<double> dW_s(b.ps.grad(names[1]), b.ps.grad(names[1]) + D * D);      // (D, D)

  std::printf("    gradients against central finite differences (h = 1e-5; PASS: rel err < 1e-6, not all zero)\n");
  struct Item { const char* name; double* x; const double* grad; std::size_t n; };
  const Item items[] = {{"dW_g (D, 2D)", W_g, dW_g.data(), dW_g.size()}, {"dW_s (D, D)", W_s, dW_s.data(), dW_s.size()},
                        {"ds   (N, D)", s.data(), ds.data(), ds.size()}, {"de   (N, D)", e.data(), de.data(), de.size()}};
  for (const auto& it : items) {
    const fbt_test::GradCheck r = fbt_test::check_gradient(f, it.x, it.grad, it.n);
    double gn = 0;
    for (std::size_t i = 0; i < it.n; ++i) gn += it.grad[i] * it.grad[i];
    report(it.name, r.err < 1e-6 && std::sqrt(gn) > 1e-8, fmt("rel err %.2e   |g| %.3g", r.err, std::sqrt(gn)));
  }

  // accumulation: a second backward adds the same again
  std::vector<double> ds2 = ds, de2 = de;  // (N, D) each
  b.forward(s.data(), e.data(), u.data());
  b.backward(s.data(), e.data(), w.data(), ds2.data(), de2.data());
  double acc = 0, scale = 1e-300;
  for (int i = 0; i < N * D; ++i) acc = std::max({acc, std::abs(ds2[i] - 2 * ds[i]), std::abs(de2[i] - 2 * de[i])});
  for (std::size_t i = 0; i < dW_g.size(); ++i) acc = std::max(acc, std::abs(b.ps.grad(names[0])[i] - 2 * dW_g[i])), scale = std::max(scale, std::abs(dW_g[i]));
  for (std::size_t i = 0; i < dW_s.size(); ++i) acc = std::max(acc, std::abs(b.ps.grad(names[1])[i] - 2 * dW_s[i])), scale = std::max(scale, std::abs(dW_s[i]));
  report("gradients accumulate (+=)", acc < 1e-10 * std::max(1.0, scale), fmt("max diff %.2e after a second backward", acc));

  // a detached pass: ds null, the other gradients unchanged
  b.ps.zero_grad();
  std::vector<double> de3(N * D, 0.0);  // (N, D)
  b.forward(s.data(), e.data(), u.data());
  b.backward(s.data(), e.data(), w.data(), nullptr, de3.data());
  const double dd = std::max({max_abs_diff(de3.data(), de.data(), de.size()), max_abs_diff(b.ps.grad(names[0]), dW_g.data(), dW_g.size()),
                              max_abs_diff(b.ps.grad(names[1]), dW_s.data(), dW_s.size())});
  report("detached pass (ds null)", dd < 1e-12, fmt("max diff %.2e of de, dW_g, dW_s", dd));
  return true;
}

fbt::ModelConfig tiny_config() {
  fbt::ModelConfig cfg;  // V 32, D 16, 2 blocks
  cfg.vocab_size = 32, cfg.hidden_size = 16, cfg.num_hidden_layers = 2, cfg.num_attention_heads = 2, cfg.num_key_value_heads = 1;
  cfg.intermediate_size = 24, cfg.max_position_embeddings = 64, cfg.fuser = Fuser::name;
  return cfg;
}

struct TinyBatch {
  static constexpr int B = 2, T = 8;
  std::vector<int> tok = std::vector<int>(B * T), tgt = std::vector<int>(B * T), prefix = std::vector<int>(3 * B, 1);  // (B, T), (B, T), (K, B)
  std::vector<std::uint8_t> docs = std::vector<std::uint8_t>(B * T, 0);                                                // (B, T)
  TinyBatch() {
    fbt::Rng rng(3);
    for (int i = 0; i < B * T; ++i) tok[i] = int(rng.below(32)), tgt[i] = int(rng.below(32));
    docs[T + 4] = 1;  // a document boundary in row 1
  }
  fbt::Batch batch() const { return fbt::Batch{B, T, tok.data(), tgt.data(), docs.data()}; }
};

/// (b) the K = 3 step of a tiny model through the public API.
void check_model(fbt::Model<double, Fuser>& m, const TinyBatch& tb) {
  std::printf("(b) the K = 3 step of a tiny Model<double, GatedResidualFuser<double>> (jitter, prefix 1, a document boundary)\n");
  fbt::Rng jitter(4);
  fbt::StepOptions o;
  o.K = 3, o.sigma = 0.02, o.rng = &jitter, o.prefix = tb.prefix.data(), o.lambda = 0.7;
  const fbt::StepGradReport rep = fbt::check_step_gradients(m, tb.batch(), o);
  int others = 0, others_bad = 0;
  double others_worst = 0;
  for (const auto& r : rep.rows) {
    if (r.tensor.rfind("model.feedback.", 0) == 0) {  // the feedback's tensors (the fuser's, and N_in's gain), one line each
      report(r.tensor, r.check.err < 1e-6, fmt("rel err %.2e   |g_fd| %.3g", r.check.err, r.check.norm));
    } else {  // the rest of the model, one line: a wrong ds or de reaches every tensor below the fuser
      ++others, others_worst = std::max(others_worst, r.check.err);
      if (!(r.check.err < 1e-6)) ++others_bad;
    }
  }
  report("the model's other tensors", others_bad == 0 && others > 0,
         fmt("%.0f tensors, worst rel err %.2e", double(others), others_worst) + (others_bad ? ", " + std::to_string(others_bad) + " fail" : ""));
}

/// (c) save, load into a fresh model, the same tensors and the same objective.
void check_checkpoint(fbt::Model<double, Fuser>& m, const TinyBatch& tb) {
  std::printf("(c) checkpoint round trip (save_model, load_model)\n");
  const std::string path = (std::filesystem::temp_directory_path() / "fbt_e5_gated_residual.safetensors").string();
  fbt::save_model(path, m);
  try {
    fbt::Model<double, Fuser> back = fbt::load_model<fbt::Model<double, Fuser>>(path);
    report("config's fuser", back.cfg.fuser == Fuser::name, "\"" + back.cfg.fuser + "\"");
    const bool same = back.params.size() == m.params.size() &&
                      std::equal(m.params.values(), m.params.values() + m.params.size(), back.params.values());
    report("tensors bit for bit", same, fmt("%.0f values", double(m.params.size())));
    auto objective = [&](fbt::Model<double, Fuser>& x) {
      fbt::Workspace<fbt::Model<double, Fuser>> ws;
      fbt::StepOptions o;
      o.K = 3, o.prefix = tb.prefix.data(), o.backward = false;
      return fbt::multipass_step(x, ws, tb.batch(), o).objective;
    };
    const double a = objective(m), bb = objective(back);
    report("same K = 3 objective", a == bb, fmt("%.17g vs %.17g", a, bb));
  } catch (const std::exception& ex) {
    report("load_model", false, ex.what());
  }
  std::filesystem::remove(path);
}

}  // namespace

int main() {
  std::printf("exercise E5: the gated residual fuser u = e + sigmoid(W_g [s; e]) * (W_s s)\n");
  if (!check_fuser()) {
#ifdef FBT_EXERCISE_UNSOLVED
    std::printf("NOT ATTEMPTED: exercises/gated_residual.hpp is the shipped stub (it defines FBT_EXERCISE_UNSOLVED and declares\n"
                "no parameters). Delete that line when you start; exit status 77 (ctest: skipped)\n");
    return 77;
#endif
    std::printf("FAIL: the parameters are not declared as stated; (b) and (c) need them\n");
    return 1;
  }
#ifdef FBT_EXERCISE_UNSOLVED
  std::printf("note: your file still defines FBT_EXERCISE_UNSOLVED; delete that line\n");
#endif
  fbt::Model<double, Fuser> m(tiny_config(), 1);
  fbt::perturb_parameters(m.params, 2);  // away from the init: W_s = 0 would make the state's gradient zero
  const TinyBatch tb;
  check_model(m, tb);
  check_checkpoint(m, tb);
  std::printf("%s: %d check(s) failed\n", failures ? "FAIL" : "PASS", failures);
  return failures ? 1 : 0;
}
