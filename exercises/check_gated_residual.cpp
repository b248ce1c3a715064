// exercises/check_gated_residual.cpp: the checker of exercise E5 (docs/course/04-fuser-lab.md), the gated
// residual fuser
//
//     u = e + sigmoid(W_g [s; e]) * (W_s s)        W_g (D, 2D), W_s (D, D)
//
// Includes <gated_residual.hpp> with ANGLE brackets, so the include path picks the file under test
// (exercises/ or a hand-in folder for the student; the teacher's solution or a mutant of it, generated in the
// build directory, for the other targets). Its sizes and data are drawn from the run's seed (printed on the first
// line; `--seed N` repeats a run). In double, it checks
//   (a) the fuser on its own, N = B * T rows (B in 2..3, T in 2..4), D in 3..8, weights moved away from their
//       init, the scalar
//       f = sum_{n,o} w[n, o] u[n, o] (a fixed random w, so du = w):
//       the parameters' names and shapes; the forward against the formula written out here; each gradient
//       (dW_g, dW_s, ds, de) against central finite differences (tests/common/gradcheck.hpp: PASS when
//       rel err < 1e-6 and the gradient is not all zero); accumulation (+=); a detached pass (ds null); the four
//       gradients again on one row alone (B = 1, T = 1);
//   (b) the whole K-pass step (K in 2..4, B in 1..2 sequences of T in 4..8 positions) of a tiny
//       Model<double, GatedResidualFuser<double>> against finite differences, every parameter tensor
//       (fbt::check_step_gradients): the fuser plugs in;
//   (c) the checkpoint round trip of that model: save_model, load_model, the same tensors bit for bit and
//       the same step objective.
// On a failure it names the gradient and the tensor at fault: "diagnosis: ..." when a failing gradient equals a
// known mistake (the teacher's reference, course/instructor/reference/gated_residual_reference.hpp, when it is
// on the include path), when a gradient is overwritten (= for +=), or when (a) passes and (b) fails (a cache
// slice that backward reads, kept in temp); else "likely: ..." per failing gradient; then which hint of
// exercises/hints/gated_residual.md to read. A crash (a null or too short slice) becomes a FAIL line that
// names the step, and writes past the fuser's slices are caught by guard slices around them. The score
// (rubric: docs/course/teaching.md) is the line "grade: ...".
// Exit status: 0 iff every line says PASS; 77 for the untouched stub (not attempted); 1 otherwise.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <gated_residual.hpp>    // yours, the solution or a mutant: chosen by the include path (see above)
#include <common/gradcheck.hpp>  // tests/common/gradcheck.hpp: check_gradient, randn

#include "checker.hpp"  // report, fmt, the score, the crash guard
#include "fbt/fbt.hpp"

#if __has_include(<gated_residual_reference.hpp>)
#include <gated_residual_reference.hpp>  // the teacher's: the known mistakes, for the diagnoses
#define FBT_COURSE_HAVE_REFERENCE 1
#endif

using Fuser = fbt_course::GatedResidualFuser<double>;

namespace {

int N = 0, D = 0;           // drawn per run: N = B * T rows of (a), D the width of (a)
int g_B = 0, g_T = 0;       // (a)'s B and T
std::uint64_t g_seed = 0;  // the run's seed
constexpr int kMaxPoints = 10;  // the rubric: the 2 parameters, forward, dW_g, dW_s, ds, de, +=, (b), (c): 1 each

/// One result line: "  PASS  what  detail".
void report(const std::string& what, bool ok, const std::string& detail, int points = 0) {
  fbt_course_check::report(what, ok, detail, points, 34);
}
using fbt_course_check::fmt;

/// What the checks found, for the diagnosis at the end.
struct Findings {
  bool a_ran = false, a_ok = true;  // (a) ran, and every check of (a) passed
  bool b_ok = true;                 // every check of (b) passed
  std::vector<std::string> diagnoses;  // "diagnosis: ..." or "likely: ..." lines
  int hint = 0;                        // the hint to read (the highest one named)
  void say(const std::string& line, int h) {
    for (const auto& d : diagnoses)
      if (d == line) return;
    diagnoses.push_back(line), hint = std::max(hint, h);
  }
};
Findings findings;

double max_abs_diff(const double* a, const double* b, std::size_t n) {
  double d = 0;
  for (std::size_t i = 0; i < n; ++i) d = std::max(d, std::abs(a[i] - b[i]));
  return d;
}

/// The fuser on its own: its parameters in a ParamStore, its Cache in a region, a CPU backend.
struct Bench {
  int rows;  // N of this bench
  Fuser fz{[] {
    fbt::FuserArgs args;
    args.hidden_size = D;
    return args;
  }()};
  fbt::ParamStore<double> ps;
  fbt::CpuBackend<double> be;
  fbt::HostBuffer<double> mem;
  Fuser::Cache c{};
  // guard slices before and after the fuser's keep and temp slices: a write past a slice lands in one
  static constexpr std::size_t kGuard = 64;
  static constexpr double kMark = 1234.5678;
  double *keep_before = nullptr, *keep_after = nullptr, *temp_before = nullptr, *temp_after = nullptr;
  explicit Bench(int n) : rows(n) {
    fbt_course_check::guard("declare", "an error in declare (r.add with a name, a shape {rows, cols} and an init)");
    fz.declare(fbt::ParamRegistry<double>(ps, "model.feedback."));
    ps.finalize();
    fbt_course_check::guard("alloc", "an error in alloc: it only takes slices (keep.take(n), temp.take(n)) and must not write to them");
    fbt::lay_out_regions<double>(mem, [&](fbt::Regions<double>& r) {
      keep_before = r.keep.take(kGuard);
      fbt::Carver<double> t = r.temp();
      temp_before = t.take(kGuard);
      fz.alloc(be, r.keep, t, c, rows, true);
      keep_after = r.keep.take(kGuard), temp_after = t.take(kGuard);
      r.done(t);
    });
    for (double* g : {keep_before, keep_after, temp_before, temp_after}) std::fill(g, g + kGuard, kMark);
  }
  /// Which guard slices were written to ("" when none).
  std::string guards_hit() const {
    std::string hit;
    const char* names[] = {"before its first keep slice", "past its last keep slice", "before its first temp slice", "past its last temp slice"};
    const double* gs[] = {keep_before, keep_after, temp_before, temp_after};
    for (int i = 0; i < 4; ++i)
      if (!std::all_of(gs[i], gs[i] + kGuard, [](double v) { return v == kMark; })) hit += std::string(hit.empty() ? "" : ", ") + names[i];
    return hit;
  }
  void forward(const double* s, const double* e, double* u) {
    fbt_course_check::guard("your forward, (a)", "a null or too short cache slice: does alloc take every slice forward writes, "
                                                 "n = N * D elements each (keep.take(n) or temp.take(n))?");
    fz.forward(be, fbt::host_weights(ps), c, s, e, nullptr, u, rows);
    fbt_course_check::guard("the checker", "a bug of the checker: please report it");
  }
  void backward(const double* s, const double* e, const double* du, double* ds, double* de) {
    fbt_course_check::guard("your backward, (a)", "a null or too short cache slice: does alloc take every slice backward reads or writes "
                                                  "(its scratch from temp when grad is true)? Or ds used although it is null "
                                                  "(a detached pass)?");
    fz.backward(be, fbt::host_weights(ps), c, s, e, nullptr, du, ds, de, nullptr, rows);
    fbt_course_check::guard("the checker", "a bug of the checker: please report it");
  }
};

/// (a), last: the four gradients on one row alone (B = 1, T = 1), with (a)'s weights.
void check_one_row(const double* W_g, const double* W_s, bool rows_ok) {
  Bench b(1);
  std::copy(W_g, W_g + std::size_t(D) * 2 * D, b.ps.value("model.feedback.w_g.weight"));
  std::copy(W_s, W_s + std::size_t(D) * D, b.ps.value("model.feedback.w_s.weight"));
  fbt::Rng rng(g_seed + 5);
  std::vector<double> s(D), e(D), w(D), u(D), ds(D, 0.0), de(D, 0.0);  // (1, D) each
  fbt_test::randn(s.data(), D, rng), fbt_test::randn(e.data(), D, rng), fbt_test::randn(w.data(), D, rng);
  auto f = [&]() {
    std::vector<double> uf(D);
    b.forward(s.data(), e.data(), uf.data());
    double acc = 0;
    for (int i = 0; i < D; ++i) acc += w[i] * uf[i];
    return acc;
  };
  b.ps.zero_grad();
  b.forward(s.data(), e.data(), u.data());
  b.backward(s.data(), e.data(), w.data(), ds.data(), de.data());
  std::vector<double> dW_g(b.ps.grad("model.feedback.w_g.weight"), b.ps.grad("model.feedback.w_g.weight") + 2 * D * D);
  std::vector<double> dW_s(b.ps.grad("model.feedback.w_s.weight"), b.ps.grad("model.feedback.w_s.weight") + D * D);
  double worst = 0;
  worst = std::max(worst, fbt_test::check_gradient(f, b.ps.value("model.feedback.w_g.weight"), dW_g.data(), dW_g.size()).err);
  worst = std::max(worst, fbt_test::check_gradient(f, b.ps.value("model.feedback.w_s.weight"), dW_s.data(), dW_s.size()).err);
  worst = std::max(worst, fbt_test::check_gradient(f, s.data(), ds.data(), ds.size()).err);
  worst = std::max(worst, fbt_test::check_gradient(f, e.data(), de.data(), de.size()).err);
  report("one row (B = 1, T = 1): the four", worst < 1e-6, fmt("worst rel err %.2e", worst));
  if (!(worst < 1e-6) && rows_ok) findings.say("likely: one row alone (N = 1) is wrong although N rows may pass: is a size fixed somewhere instead of N?", 1);
}

/// (a) the fuser on its own. Returns false when its parameters are not there (nothing else can run).
bool check_fuser() {
  std::printf("(a) the fuser on its own (N = %d rows: B = %d, T = %d; D = %d, double)\n", N, g_B, g_T, D);
  Bench b(N);
  const char* names[] = {"model.feedback.w_g.weight", "model.feedback.w_s.weight"};
  const fbt::Shape shapes[] = {{D, 2 * D}, {D, D}};
  bool params_ok = true;
  for (int i = 0; i < 2; ++i) {
    const bool ok = b.ps.has(names[i]) && b.ps.spec(names[i]).shape == shapes[i];
    report(std::string("parameter ") + names[i], ok, ok ? "declared, shape as stated" : "missing or of the wrong shape (declare)", 1);
    params_ok = params_ok && ok;
  }
  if (!params_ok) return false;
  findings.a_ran = true;
  double* W_g = b.ps.value(names[0]);  // (D, 2D)
  double* W_s = b.ps.value(names[1]);  // (D, D)
  fbt::Rng rng(g_seed + 2026);
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
  report("forward u = e + sigmoid(z) * a", fd < 1e-12, fmt("max diff %.2e from the formula", fd), 1);
  if (!(fd < 1e-12)) findings.say("likely: the forward is wrong: u = e + sigmoid(z) * a with z = W_g [s; e] (W_g's first D columns on s) and a = W_s s", 1);

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
  struct Item { const char* name; const char* gradient; double* x; const double* grad; std::size_t n; const char* likely; };
  const Item items[] = {
      {"dW_g (D, 2D)", "dW_g", W_g, dW_g.data(), dW_g.size(),
       "likely: dW_g is wrong: check dz, the gradient at the gate's input z (through the product with a, then the sigmoid), and which half of "
       "W_g sees s and which e"},
      {"dW_s (D, D)", "dW_s", W_s, dW_s.data(), dW_s.size(), "likely: dW_s is wrong: check da, the gradient at a = W_s s (through the product with the gate)"},
      {"ds   (N, D)", "ds", s.data(), ds.data(), ds.size(), "likely: ds is wrong: s reaches u by two routes (the proposal a = W_s s and the gate's state half); is one missing or wrong?"},
      {"de   (N, D)", "de", e.data(), de.data(), de.size(), "likely: de is wrong: e reaches u by two routes (the residual and the gate's embedding half); is one missing or wrong?"}};
  bool grads_ok[4];
  for (int i = 0; i < 4; ++i) {
    const Item& it = items[i];
    const fbt_test::GradCheck r = fbt_test::check_gradient(f, it.x, it.grad, it.n);
    double gn = 0;
    for (std::size_t k = 0; k < it.n; ++k) gn += it.grad[k] * it.grad[k];
    grads_ok[i] = r.err < 1e-6 && std::sqrt(gn) > 1e-8;
    report(it.name, grads_ok[i], fmt("rel err %.2e   |g| %.3g", r.err, std::sqrt(gn)), 1);
  }
  // name each failing gradient's mistake: a known one when the reference is here, else the gradient's routes
  for (int i = 0; i < 4; ++i) {
    if (grads_ok[i]) continue;
    std::string named;
#ifdef FBT_COURSE_HAVE_REFERENCE
    using namespace fbt_course_reference;
    auto pick = [i](const GatedGrads& g) -> const std::vector<double>& { return i == 0 ? g.dW_g : i == 1 ? g.dW_s : i == 2 ? g.ds : g.de; };
    const GatedGrads right = gated_backward_reference(W_g, W_s, s.data(), e.data(), w.data(), N, D, kGatedCorrect);
    std::vector<std::string> explains;
    for (int bug = 1; bug < kGatedBugs; ++bug) {
      const GatedGrads v = gated_backward_reference(W_g, W_s, s.data(), e.data(), w.data(), N, D, GatedBug(bug));
      const std::vector<double>& mine = std::vector<double>(items[i].grad, items[i].grad + items[i].n);
      const double scale = std::max(1e-300, std::abs(*std::max_element(pick(v).begin(), pick(v).end(), [](double x, double y) { return std::abs(x) < std::abs(y); })));
      if (max_abs_diff(pick(v).data(), pick(right).data(), items[i].n) > 1e-9 * scale &&
          max_abs_diff(mine.data(), pick(v).data(), items[i].n) < 1e-9 * scale) {
        findings.say(std::string("diagnosis: ") + gated_bug_info(GatedBug(bug)).diagnosis, gated_bug_info(GatedBug(bug)).hint);
        named = "yes";
      }
    }
#endif
    if (named.empty()) findings.say(items[i].likely, 2);
  }

  // accumulation: a second backward adds the same again, to each of the four gradients
  std::vector<double> ds2 = ds, de2 = de;  // (N, D) each
  b.forward(s.data(), e.data(), u.data());
  b.backward(s.data(), e.data(), w.data(), ds2.data(), de2.data());
  std::string overwritten;  // the gradients to which a second backward did not add the same again
  double worst = 0;
  auto added_again = [&](const char* name, const double* second, const std::vector<double>& first) {
    double d = 0, scale = 1e-300;
    for (std::size_t i = 0; i < first.size(); ++i) d = std::max(d, std::abs(second[i] - 2 * first[i])), scale = std::max(scale, std::abs(first[i]));
    worst = std::max(worst, d / scale);
    if (d > 1e-10 * scale) overwritten += std::string(overwritten.empty() ? "" : ", ") + name;
  };
  added_again("dW_g", b.ps.grad(names[0]), dW_g), added_again("dW_s", b.ps.grad(names[1]), dW_s);
  added_again("ds", ds2.data(), ds), added_again("de", de2.data(), de);
  report("gradients accumulate (+=)", overwritten.empty(),
         overwritten.empty() ? fmt("max rel diff %.2e after a second backward", worst) : "a second backward did not add the same again to " + overwritten, 1);
  if (!overwritten.empty())
    findings.say("diagnosis: " + overwritten + (overwritten.find(',') == std::string::npos ? " is" : " are") +
                     " overwritten (=), not accumulated (+=): the backward must add to every gradient buffer (a parameter and e are "
                     "used by several passes, and ds, de already hold other layers' gradients)",
                 1);

  // a detached pass: ds null, the other gradients unchanged
  b.ps.zero_grad();
  std::vector<double> de3(N * D, 0.0);  // (N, D)
  b.forward(s.data(), e.data(), u.data());
  b.backward(s.data(), e.data(), w.data(), nullptr, de3.data());
  const double dd = std::max({max_abs_diff(de3.data(), de.data(), de.size()), max_abs_diff(b.ps.grad(names[0]), dW_g.data(), dW_g.size()),
                              max_abs_diff(b.ps.grad(names[1]), dW_s.data(), dW_s.size())});
  report("detached pass (ds null)", dd < 1e-12, fmt("max diff %.2e of de, dW_g, dW_s", dd));
  if (!(dd < 1e-12)) findings.say("likely: with ds null (a detached pass) the other gradients change: skip only ds's terms, keep the rest", 2);
  const std::string hit = b.guards_hit();
  report("writes inside the cache's slices", hit.empty(), hit.empty() ? "guard slices untouched" : "written " + hit);
  if (!hit.empty())
    findings.say("diagnosis: your fuser writes outside its slices (" + hit + "): is a slice shorter than the N * D elements written to it?", 2);
  check_one_row(W_g, W_s, grads_ok[0] && grads_ok[1] && grads_ok[2] && grads_ok[3]);
  findings.a_ok = fbt_course_check::score().failures == 0;
  return true;
}

fbt::ModelConfig tiny_config() {
  fbt::ModelConfig cfg;  // V 32, D 16, 2 blocks
  cfg.vocab_size = 32, cfg.hidden_size = 16, cfg.num_hidden_layers = 2, cfg.num_attention_heads = 2, cfg.num_key_value_heads = 1;
  cfg.intermediate_size = 24, cfg.max_position_embeddings = 64, cfg.fuser = Fuser::name;
  return cfg;
}

struct TinyBatch {
  int B, T, K;  // drawn per run
  std::vector<int> tok, tgt, prefix;  // (B, T), (B, T), (K, B)
  std::vector<std::uint8_t> docs;     // (B, T)
  TinyBatch(int b, int t, int k) : B(b), T(t), K(k), tok(b * t), tgt(b * t), prefix(k * b, 1), docs(b * t, 0) {
    fbt::Rng rng(g_seed + 3);
    for (int i = 0; i < B * T; ++i) tok[i] = int(rng.below(32)), tgt[i] = int(rng.below(32));
    docs[(B - 1) * T + T / 2] = 1;  // a document boundary in the last row
  }
  fbt::Batch batch() const { return fbt::Batch{B, T, tok.data(), tgt.data(), docs.data()}; }
};

/// (b) the K-pass step of a tiny model through the public API.
void check_model(fbt::Model<double, Fuser>& m, const TinyBatch& tb) {
  std::printf("(b) the K = %d step of a tiny Model<double, GatedResidualFuser<double>> (B = %d, T = %d; jitter, prefix 1, a document boundary)\n",
              tb.K, tb.B, tb.T);
  fbt::Rng jitter(g_seed + 4);
  fbt::StepOptions o;
  o.K = tb.K, o.sigma = 0.02, o.rng = &jitter, o.prefix = tb.prefix.data(), o.lambda = 0.7;
  fbt_course_check::guard("the K-pass step of the model, (b)",
                          "a null or too short cache slice in a pass of the model: a pass that does not train (grad false) still runs "
                          "forward, so forward may only write slices alloc always takes; backward's scratch comes from temp when grad is true");
  const int failures_before = fbt_course_check::score().failures;
  const fbt::StepGradReport rep = fbt::check_step_gradients(m, tb.batch(), o);
  fbt_course_check::guard("the checker", "a bug of the checker: please report it");
  int others = 0, others_bad = 0;
  std::string others_named;  // the first failing ones
  double others_worst = 0;
  for (const auto& r : rep.rows) {
    if (r.tensor.rfind("model.feedback.", 0) == 0) {  // the feedback's tensors (the fuser's, and N_in's gain), one line each
      report(r.tensor, r.check.err < 1e-6, fmt("rel err %.2e   |g_fd| %.3g", r.check.err, r.check.norm));
    } else {  // the rest of the model, one line: a wrong ds or de reaches every tensor below the fuser
      ++others, others_worst = std::max(others_worst, r.check.err);
      if (!(r.check.err < 1e-6) && ++others_bad <= 3) others_named += (others_bad > 1 ? ", " : "") + r.tensor;
    }
  }
  report("the model's other tensors", others_bad == 0 && others > 0,
         fmt("%.0f tensors, worst rel err %.2e", double(others), others_worst) + (others_bad ? ", " + std::to_string(others_bad) + " fail: " + others_named + (others_bad > 3 ? ", ..." : "") : ""));
  findings.b_ok = fbt_course_check::score().failures == failures_before;
  report("(b) as a whole", findings.b_ok, findings.b_ok ? "every tensor of the step" : "some tensor of the step is wrong (above)", 1);
  if (!findings.b_ok && findings.a_ok)
    findings.say("diagnosis: (a) passes, (b) fails: is a cache slice in temp? What forward computes and backward reads must be a keep "
                 "slice: in a model, the other layers reuse temp between a pass's forward and its backward (temp is only for "
                 "scratch used inside one call). Each pass has its own Cache; backward may read only its Cache and its arguments",
                 2);
  else if (!findings.b_ok)
    findings.say("note: (b) fails because (a) does: a wrong ds or de reaches every tensor below the fuser. Fix (a) first", 0);
}

/// (c) save, load into a fresh model, the same tensors and the same objective.
void check_checkpoint(fbt::Model<double, Fuser>& m, const TinyBatch& tb) {
  std::printf("(c) checkpoint round trip (save_model, load_model)\n");
  const std::string path = (std::filesystem::temp_directory_path() / "fbt_e5_gated_residual.safetensors").string();
  fbt_course_check::guard("the checkpoint round trip, (c)", "a crash in save_model or load_model: does declare give every tensor a name and shape?");
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
      o.K = tb.K, o.prefix = tb.prefix.data(), o.backward = false;
      return fbt::multipass_step(x, ws, tb.batch(), o).objective;
    };
    const double a = objective(m), bb = objective(back);
    report("same K-pass objective", a == bb, fmt("%.17g vs %.17g", a, bb), 1);
  } catch (const std::exception& ex) {
    report("load_model", false, ex.what(), 1);
  }
  std::filesystem::remove(path);
}

}  // namespace

/// The diagnosis lines, and which hint to read.
void print_diagnosis() {
  if (fbt_course_check::score().failures == 0) return;
  for (const auto& d : findings.diagnoses) std::printf("%s\n", d.c_str());
  std::printf("stuck? read exercises/hints/gated_residual.md, hint %d\n", std::max(1, findings.hint));
}

int main(int argc, char** argv) {
  g_seed = fbt_course_check::run_seed(argc, argv);
  fbt_course_check::install_crash_guard("gated_residual", kMaxPoints);
  fbt::Rng rng(g_seed);
  D = fbt_course_check::draw(rng, 3, 8);
  g_B = fbt_course_check::draw(rng, 2, 3), g_T = fbt_course_check::draw(rng, 2, 4), N = g_B * g_T;
  const int B = fbt_course_check::draw(rng, 1, 2), T = fbt_course_check::draw(rng, 4, 8), K = fbt_course_check::draw(rng, 2, 4);
  std::printf("exercise E5: the gated residual fuser u = e + sigmoid(W_g [s; e]) * (W_s s)\n");
  if (!check_fuser()) {
#ifdef FBT_EXERCISE_UNSOLVED
    fbt_course_check::print_grade("gated_residual", true, kMaxPoints);
    std::printf("NOT ATTEMPTED: exercises/gated_residual.hpp is the shipped stub (it defines FBT_EXERCISE_UNSOLVED and declares\n"
                "no parameters). Delete that line when you start; exit status 77 (ctest: skipped)\n");
    return 77;
#endif
    std::printf("likely: declare does not add model.feedback.w_g.weight (D, 2D) and model.feedback.w_s.weight (D, D); (b) and (c) need them\n");
    std::printf("stuck? read exercises/hints/gated_residual.md, hint 1\n");
    std::printf("grade: gated_residual 0/%d\n", kMaxPoints);
    std::printf("FAIL: the parameters are not declared as stated; (b) and (c) need them\n");
    return 1;
  }
#ifdef FBT_EXERCISE_UNSOLVED
  std::printf("note: your file still defines FBT_EXERCISE_UNSOLVED; delete that line\n");
#endif
  fbt::Model<double, Fuser> m(tiny_config(), 1);
  fbt::perturb_parameters(m.params, g_seed + 2);  // away from the init: W_s = 0 would make the state's gradient zero
  const TinyBatch tb(B, T, K);
  check_model(m, tb);
  check_checkpoint(m, tb);
  print_diagnosis();
  fbt_course_check::print_grade("gated_residual");
  const int failures = fbt_course_check::score().failures;
  std::printf("%s: %d check(s) failed\n", failures ? "FAIL" : "PASS", failures);
  return failures ? 1 : 0;
}
