// tests/cuda/engine_checks.hpp: the library's step, optimizer and decoder run over a backend `Be` (through
// fbt::BackendModel<M, Be>, fbt::BackendOptimizer<M, Be> and fbt::Decoder<M, Be>) against the same code on the CPU backend: the whole
// K-pass step (per-pass losses, diagnostics, every gradient), AdamW, the grouped Muon / NorMuon step,
// gradient clipping, and KV-cached decoding (logits of prefill and steps, greedy tokens) in every mode.
//
// Used by tests/cuda/test_engine_host.cpp (fbt::check::HostBackend: runs everywhere, in CI) and by
// tests/cuda/test_gpu.cu (fbt::cuda::CudaBackend: runs where a GPU exists). Errors are relative:
// max |backend - reference| / max |reference| per tensor (1e-30 when the reference is all zero).
// The model type is chosen from the config's fuser (fbt::with_model), so every built-in fuser runs.
#pragma once

#include <algorithm>
#include <cmath>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <common/tiny_model.hpp>

#include "fbt/decode/decoder.hpp"
#include "fbt/model/backend_model.hpp"
#include "fbt/train/adamw.hpp"
#include "fbt/train/backend_optimizer.hpp"
#include "fbt/train/clip.hpp"
#include "fbt/train/muon.hpp"

namespace fbt_test {

/// max |a - b| / max |b| (a NaN anywhere in a, e.g. an element never written, gives +inf).
template <class U> double rel_err(const float* a, const U* b, std::size_t n) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (!std::isfinite(a[i])) return INFINITY;
    num = std::max(num, std::fabs(double(a[i]) - double(b[i])));
    den = std::max(den, std::fabs(double(b[i])));
  }
  return num / std::max(den, 1e-30);
}
inline double rel_err(double a, double b) { return std::isfinite(a) ? std::fabs(a - b) / std::max(std::fabs(b), 1e-30) : INFINITY; }

/// What one comparison found: the worst relative error and where.
struct Worst {
  double err = 0;
  std::string where, context;
  double loss_err = 0;  ///< compare_step: the worst over the per-pass losses alone
  void add(double e, const std::string& w) {
    if (!(e <= err)) err = e, where = w;  // NaN/inf win
  }
  std::string str() const {
    std::ostringstream os;
    os << err << " at " << where;
    if (!context.empty()) os << " (" << context << ")";
    return os.str();
  }
};

/// The double-precision twin of a built model type (the same fuser template, the standard block).
template <class X> struct AsDouble;
template <template <class> class F> struct AsDouble<fbt::Model<float, F<float>, fbt::DecoderBlock<float>>> {
  using type = fbt::Model<double, F<double>, fbt::DecoderBlock<double>>;
};
template <> struct AsDouble<fbt::Model<float>> {
  using type = fbt::Model<double>;
};

/// Moves every parameter away from its init (gains 1 + N(0, 0.2^2)), with matrices N(0, (0.3 sqrt(8 /
/// fan_in))^2): the tiny harness's 0.3 at fan-in 8, and a scale that keeps attention and the fed-back
/// states O(1) at wider shapes (at D 64 with QK-norm off, std 0.3 saturates the softmax and the CPU path
/// in float is itself 1e-4 off a double reference).
template <class M> void randomize_scaled(M& m, std::uint64_t seed) {
  using T = typename M::Scalar;
  fbt::Rng rng(seed);
  for (const auto& s : m.params.specs()) {
    T* p = m.params.values() + s.offset;
    const double sd = s.shape.size() == 1 ? 0.2 : 0.3 * std::sqrt(8.0 / double(s.shape[1]));
    for (std::size_t i = 0; i < s.size; ++i) p[i] = T(s.shape.size() == 1 ? 1.0 + sd * rng.normal() : sd * rng.normal());
  }
}

/// One step to compare. prefix: random plain prefixes per pass and row; docs: random document starts;
/// ignore: some targets are -1.
struct StepCase {
  int B = 2, T = 13, K = 3;
  double sigma = 0.0, lambda = 1.0, grad_scale = 1.0;
  bool detach = false, prefix = true, docs = true, ignore = true;
  int grad_passes = 0;
  std::uint64_t seed = 7;
};

template <class V> std::string join(const V& v) {
  std::ostringstream os;
  for (std::size_t i = 0; i < v.size(); ++i) os << (i ? "," : "") << v[i];
  return v.empty() ? std::string("-") : os.str();
}

inline std::string describe(const fbt::ModelConfig& c) {
  std::ostringstream os;
  os << "fuser=" << c.fuser << " D=" << c.hidden_size << " L=" << c.num_hidden_layers << " NH=" << c.num_attention_heads
     << " NKV=" << c.num_key_value_heads << " hs=" << c.hs() << " F=" << c.intermediate_size << " V=" << c.vocab_size;
  if (!c.uniform())
    os << " layer_F=" << join(c.layer_intermediate_size) << " layer_NH=" << join(c.layer_num_attention_heads)
       << " layer_NKV=" << join(c.layer_num_key_value_heads);
  os << " src=" << c.feedback_source;
  if (c.feedback_source == "layer") os << "(" << c.feedback_layer << ")";
  os << " in_norm=" << c.input_norm << " qk=" << c.qk_norm << " tied=" << c.tie_word_embeddings << " z=" << c.z_loss
     << " docs_attn=" << c.doc_attention;
  if (c.sliding_window > 0) os << " window=" << c.sliding_window << " sliding=" << c.layer_window(0) << "," << c.layer_window(c.num_hidden_layers - 1);
  return os.str();
}
inline std::string describe(const fbt::ModelConfig& c, const StepCase& s) {
  std::ostringstream os;
  os << describe(c) << " | B=" << s.B << " T=" << s.T << " K=" << s.K << " sigma=" << s.sigma << " lambda=" << s.lambda
     << " detach=" << s.detach << " g=" << s.grad_passes << " prefix=" << s.prefix << " docs=" << s.docs << " ignore=" << s.ignore;
  return os.str();
}

struct StepData {
  TinyBatch batch;
  std::vector<int> prefix;  // (K, B)
};
inline StepData make_step_data(const fbt::ModelConfig& c, const StepCase& s) {
  StepData d{tiny_batch(s.B, s.T, c.vocab_size, s.seed + 11), {}};
  fbt::Rng rng(s.seed + 13);
  for (int n = 0; n < s.B * s.T; ++n) {
    if (s.ignore && rng.below(7) == 0) d.batch.targets[n] = -1;
    if (s.docs && n % s.T != 0 && rng.below(6) == 0) d.batch.doc_start[n] = 1;
  }
  if (s.prefix) {
    d.prefix.assign(std::size_t(s.K) * s.B, 0);
    for (auto& p : d.prefix) p = int(rng.below(std::uint32_t(s.T + 1)));
  }
  return d;
}

/// \brief The whole step on the CPU and on Be, from the same weights, batch and jitter seed.
///
/// The reference is the CPU step in double (a model of the same type in double holding the same float
/// weights), so the error measured is the backend's own float rounding. The CPU step in float on the
/// same model is run too: the backend is also held to it (`cpu_err`), and the CPU's own error against
/// the reference is reported in `context` (a config where both are large is ill-conditioned, not wrong).
/// Returns the worst relative error over the per-pass losses, the objective, the diagnostics and every
/// gradient tensor.
template <class Be, class M, class... A> Worst compare_step_as(const fbt::ModelConfig& cfg, const StepCase& s, double* cpu_err, A&&... be_args) {
  using MD = typename AsDouble<M>::type;
  M m(cfg, s.seed);
  randomize_scaled(m, s.seed + 1);
  MD md(cfg, s.seed);
  for (std::size_t i = 0; i < m.params.size(); ++i) md.params.values()[i] = double(m.params.values()[i]);
  const StepData d = make_step_data(cfg, s);
  const fbt::Batch b = d.batch.batch(s.docs);
  auto opts = [&](fbt::Rng& rng) {
    fbt::StepOptions o;
    o.K = s.K, o.lambda = s.lambda, o.sigma = s.sigma, o.detach = s.detach, o.grad_passes = s.grad_passes, o.grad_scale = s.grad_scale;
    o.prefix = s.prefix ? d.prefix.data() : nullptr;
    o.rng = &rng;
    return o;
  };
  // the CPU step in double (the reference) and in float (the same model)
  fbt::Rng rr(s.seed + 17), rc(s.seed + 17);
  fbt::Workspace<MD> wd;
  fbt::Workspace<M> wc;
  fbt::StepStats sr, sc;
  md.params.zero_grad(), m.params.zero_grad();
  fbt::multipass_step(md, wd, b, opts(rr), sr);
  fbt::multipass_step(m, wc, b, opts(rc), sc);
  // the same step on Be, from the same weights
  fbt::BackendModel<M, Be> dm(m, std::forward<A>(be_args)...);
  fbt::Rng rd(s.seed + 17);
  fbt::StepStats sd;
  dm.multipass_step(b, opts(rd), sd);
  std::vector<float> gdev(m.params.size());
  dm.download_grads(gdev.data());
  const double* gref = md.params.grads();
  const float* gcpu = m.params.grads();

  Worst worst, cpu, vs_cpu;
  if (rr.next_u32() != rd.next_u32()) worst.add(INFINITY, "jitter draws (Rng state after the step)");
  if (sd.targets != sr.targets) worst.add(INFINITY, "target count");
  auto stat = [&](const std::vector<double>& x, const std::vector<double>& ref, const std::vector<double>& xc, int j, const std::string& what) {
    const std::string w = what + " pass " + std::to_string(j + 1);
    worst.add(rel_err(x[j], ref[j]), w);
    vs_cpu.add(rel_err(x[j], xc[j]), w);
    cpu.add(rel_err(xc[j], ref[j]), w);
  };
  for (int j = 0; j < s.K; ++j) {
    stat(sd.loss, sr.loss, sc.loss, j, "loss");
    worst.loss_err = std::max(worst.loss_err, rel_err(sd.loss[j], sr.loss[j]));
    stat(sd.state_rms, sr.state_rms, sc.state_rms, j, "state_rms");
    stat(sd.gate_mean, sr.gate_mean, sc.gate_mean, j, "gate_mean");
    stat(sd.feedback_ratio, sr.feedback_ratio, sc.feedback_ratio, j, "feedback_ratio");
    // the gate's spread is a difference of moments: relative to max(spread, 1e-3)
    worst.add(std::fabs(sd.gate_std[j] - sr.gate_std[j]) / std::max(1e-3, sr.gate_std[j]), "gate_std pass " + std::to_string(j + 1));
  }
  worst.add(rel_err(sd.objective, sr.objective), "objective");
  for (const auto& sp : m.params.specs()) {
    worst.add(rel_err(gdev.data() + sp.offset, gref + sp.offset, sp.size), "grad " + sp.name);
    vs_cpu.add(rel_err(gdev.data() + sp.offset, gcpu + sp.offset, sp.size), "grad " + sp.name);
    cpu.add(rel_err(gcpu + sp.offset, gref + sp.offset, sp.size), "grad " + sp.name);
  }
  if (cpu_err) *cpu_err = vs_cpu.err;
  worst.context = "against the CPU step in float: " + vs_cpu.str() + "; the CPU in float against the reference: " + cpu.str();
  return worst;
}
/// As compare_step_as, with the model type the config's fuser names.
template <class Be, class... A> Worst compare_step(const fbt::ModelConfig& cfg, const StepCase& s, double* cpu_err, A&&... be_args) {
  return fbt::with_model<float>(cfg, [&](auto tag) {
    return compare_step_as<Be, typename decltype(tag)::type>(cfg, s, cpu_err, std::forward<A>(be_args)...);
  });
}

/// \brief AdamW (two updates) and clip_grad_norm on Be (BackendOptimizer) against the CPU (ParamStore), from
/// the same gradients; then download() must bring back the values, moments and step.
template <class Be, class... A> Worst compare_adamw(const fbt::ModelConfig& cfg, std::uint64_t seed, A&&... be_args) {
  return fbt::with_model<float>(cfg, [&](auto tag) {
    using M = typename decltype(tag)::type;
    M m(cfg, seed);
    randomize_scaled(m, seed + 1);
    fbt::Rng rng(seed + 2);
    fbt::BackendModel<M, Be> dm(m, std::forward<A>(be_args)...);
    fbt::BackendOptimizer<M, Be> opt(dm);
    fbt::AdamWConfig a;
    a.weight_decay = 0.1;
    Worst worst;
    for (int it = 0; it < 2; ++it) {
      for (std::size_t i = 0; i < m.params.size(); ++i) m.params.grads()[i] = float(rng.normal(0.0, 1e-2 * (it + 1)));
      dm.backend().upload(dm.grads(), m.params.grads(), m.params.size());
      worst.add(rel_err(opt.grad_global_norm(), fbt::grad_global_norm(m.params)), "grad_global_norm step " + std::to_string(it + 1));
      const double nc = fbt::clip_grad_norm(m.params, 0.5), nd = opt.clip_grad_norm(0.5);
      worst.add(rel_err(nd, nc), "clip_grad_norm step " + std::to_string(it + 1));
      std::vector<float> gd(m.params.size());
      dm.download_grads(gd.data());
      worst.add(rel_err(gd.data(), m.params.grads(), m.params.size()), "clipped gradients step " + std::to_string(it + 1));
      fbt::adamw_update(m.params, a, 3e-3);
      opt.adamw_update(a, 3e-3);
    }
    // download() writes the backend's values, moments and step over the host store
    const std::vector<float> vc(m.params.values(), m.params.values() + m.params.size());
    const std::vector<float> mc(m.params.adam_m(), m.params.adam_m() + m.params.size());
    const std::vector<float> vvc(m.params.adam_v(), m.params.adam_v() + m.params.size());
    m.params.step = 0;
    dm.download(), opt.download();
    for (const auto& sp : m.params.specs()) {
      worst.add(rel_err(m.params.values() + sp.offset, vc.data() + sp.offset, sp.size), "value " + sp.name);
      worst.add(rel_err(m.params.adam_m() + sp.offset, mc.data() + sp.offset, sp.size), "adam_m " + sp.name);
      worst.add(rel_err(m.params.adam_v() + sp.offset, vvc.data() + sp.offset, sp.size), "adam_v " + sp.name);
    }
    if (m.params.step != 2) worst.add(INFINITY, "AdamW step counter");
    return worst;
  });
}

/// \brief The grouped step (train/muon.hpp: Muon or NorMuon for the matrices, AdamW for the rest; three
/// updates, with weight decay) on Be (BackendOptimizer::grouped_update) against the CPU (ParamStore), from the
/// same gradients; then download() must bring back the values, both moments, the row moments and the step.
template <class Be, class... A> Worst compare_grouped(const fbt::ModelConfig& cfg, fbt::MuonVariant variant, std::uint64_t seed, A&&... be_args) {
  return fbt::with_model<float>(cfg, [&](auto tag) {
    using M = typename decltype(tag)::type;
    M m(cfg, seed);
    randomize_scaled(m, seed + 1);
    fbt::Rng rng(seed + 2);
    fbt::BackendModel<M, Be> dm(m, std::forward<A>(be_args)...);
    fbt::BackendOptimizer<M, Be> opt(dm);
    fbt::AdamWConfig a;
    a.weight_decay = 0.1;
    fbt::MuonConfig mc;
    mc.variant = variant, mc.weight_decay = 0.01;
    fbt::MuonWorkspace<fbt::CpuBackend<float>> ws;
    for (int it = 0; it < 3; ++it) {
      for (std::size_t i = 0; i < m.params.size(); ++i) m.params.grads()[i] = float(rng.normal(0.0, 1e-2 * (it + 1)));
      dm.backend().upload(dm.grads(), m.params.grads(), m.params.size());
      fbt::grouped_update(m.params, a, 3e-3, mc, 2e-2, ws);
      opt.grouped_update(a, 3e-3, mc, 2e-2);
    }
    const bool nor = variant == fbt::MuonVariant::NorMuon;
    const std::size_t nr = m.params.row_moments_size();
    const std::vector<float> vc(m.params.values(), m.params.values() + m.params.size());
    const std::vector<float> mc1(m.params.adam_m(), m.params.adam_m() + m.params.size());
    const std::vector<float> vvc(m.params.adam_v(), m.params.adam_v() + m.params.size());
    const std::vector<float> rc = nor ? std::vector<float>(m.params.row_moments(), m.params.row_moments() + nr) : std::vector<float>();
    m.params.step = 0;
    if (nor) std::fill(m.params.row_moments(), m.params.row_moments() + nr, -1.f);
    dm.download(), opt.download();
    Worst worst;
    for (const auto& sp : m.params.specs()) {
      worst.add(rel_err(m.params.values() + sp.offset, vc.data() + sp.offset, sp.size), "value " + sp.name);
      worst.add(rel_err(m.params.adam_m() + sp.offset, mc1.data() + sp.offset, sp.size), "adam_m " + sp.name);
      worst.add(rel_err(m.params.adam_v() + sp.offset, vvc.data() + sp.offset, sp.size), "adam_v " + sp.name);
      if (nor && fbt::param_group(sp) == fbt::ParamGroup::Matrix)
        worst.add(rel_err(m.params.row_moments() + sp.row_offset, rc.data() + sp.row_offset, std::size_t(sp.shape[0])), "row_v " + sp.name);
    }
    if (m.params.step != 3) worst.add(INFINITY, "step counter");
    return worst;
  });
}

/// \brief Decoding on Be (a Decoder built from a BackendModel) against the CPU Decoder on the host model:
/// prefill and step logits of a two-sequence batch (one prompt with a document separator, one step that
/// starts a document), and the greedy tokens of generate_batch, in the given mode.
template <class Be, class... A> Worst compare_decode(const fbt::ModelConfig& cfg, const std::string& mode, std::uint64_t seed, A&&... be_args) {
  return fbt::with_model<float>(cfg, [&](auto tag) {
    using M = typename decltype(tag)::type;
    M m(cfg, seed);
    randomize_scaled(m, seed + 1);
    const int sep = cfg.vocab_size - 1, V = cfg.vocab_size;
    const auto ms = fbt::DecodeModeSpec::parse(mode);
    fbt::Rng rng(seed + 3);
    std::vector<fbt::Request> reqs;
    for (int i = 0; i < 3; ++i) {
      fbt::Request r;
      const int P = 3 + 4 * i;
      for (int t = 0; t < P; ++t) r.prompt.push_back(int(rng.below(std::uint32_t(V - 1))));
      if (i == 2) r.prompt[4] = sep;  // a document boundary inside the prompt
      r.opts.mode = ms;
      r.opts.max_new_tokens = 6 + 3 * i;
      reqs.push_back(r);
    }
    Worst worst;
    // logits: prefill then three steps of a two-sequence batch
    fbt::BackendModel<M, Be> dm(m, std::forward<A>(be_args)...);
    fbt::Decoder<M, Be> dd(dm, sep);
    fbt::Decoder<M> cd(m, sep);
    auto c0 = cd.new_sequence(32, ms), c1 = cd.new_sequence(32, ms);
    auto d0 = dd.new_sequence(32, ms), d1 = dd.new_sequence(32, ms);
    std::vector<float> lc(2 * V), ld(2 * V);
    cd.prefill(c0, reqs[0].prompt.data(), int(reqs[0].prompt.size()), lc.data());
    dd.prefill(d0, reqs[0].prompt.data(), int(reqs[0].prompt.size()), ld.data());
    worst.add(rel_err(ld.data(), lc.data(), V), "prefill logits (" + mode + ")");
    cd.prefill(c1, reqs[2].prompt.data(), int(reqs[2].prompt.size()), lc.data());
    dd.prefill(d1, reqs[2].prompt.data(), int(reqs[2].prompt.size()), ld.data());
    worst.add(rel_err(ld.data(), lc.data(), V), "prefill logits with a document start (" + mode + ")");
    typename fbt::Decoder<M>::Seq* cs[2] = {&c0, &c1};
    typename fbt::Decoder<M, Be>::Seq* ds[2] = {&d0, &d1};
    const int steps[3][2] = {{1, 2}, {sep, 5}, {3, 4}};  // the second step starts a document in sequence 0
    for (int st = 0; st < 3; ++st) {
      cd.step(cs, 2, steps[st], lc.data());
      dd.step(ds, 2, steps[st], ld.data());
      worst.add(rel_err(ld.data(), lc.data(), std::size_t(2) * V), "step " + std::to_string(st + 1) + " logits (" + mode + ")");
    }
    // greedy generation: the same tokens
    fbt::Decoder<M> cd2(m, sep);
    fbt::Decoder<M, Be> dd2(dm, sep);
    const auto tc = fbt::generate_batch(cd2, reqs);
    const auto td = fbt::generate_batch(dd2, reqs);
    for (std::size_t i = 0; i < reqs.size(); ++i)
      if (tc[i] != td[i]) worst.add(INFINITY, "greedy tokens of request " + std::to_string(i) + " (" + mode + ")");
    return worst;
  });
}

/// A tiny model whose fed-back state is block 0's output (a middle-layer tap): L 3, the tap at layer 0.
inline fbt::ModelConfig layer_tap_config(const std::string& fuser) {
  fbt::ModelConfig c = tiny_config(fuser);
  c.num_hidden_layers = 3, c.feedback_source = "layer", c.feedback_layer = 0;
  return c;
}
/// A tiny heterogeneous stack: blocks of different MLP widths and head counts (one head size), so each
/// layer has its own key/value width in the decoder's cache.
inline fbt::ModelConfig hetero_config(const std::string& fuser) {
  fbt::ModelConfig c = tiny_config(fuser);  // D 8, hs 4
  c.num_hidden_layers = 3;
  c.layer_intermediate_size = {12, 20, 6}, c.layer_num_attention_heads = {2, 4, 2}, c.layer_num_key_value_heads = {1, 2, 2};
  return c;
}

/// A tiny mixed stack with sliding-window layers (Hugging Face layer_types): sliding, full, sliding with W 3,
/// so that decoding runs the sliding layers' ring caches far past the window.
inline fbt::ModelConfig window_config(const std::string& fuser) {
  fbt::ModelConfig c = tiny_config(fuser);
  c.num_hidden_layers = 3, c.sliding_window = 3, c.layer_types = {"sliding_attention", "full_attention", "sliding_attention"};
  return c;
}

/// The configurations the step is checked on: every fuser, and the knobs that change the chain.
inline std::vector<std::pair<fbt::ModelConfig, StepCase>> step_cases(bool big) {
  std::vector<std::pair<fbt::ModelConfig, StepCase>> out;
  auto base = [&](const std::string& fuser) {
    fbt::ModelConfig c = tiny_config(fuser);  // D 8, L 2, NH 2, NKV 1, hs 4
    if (big) {  // hs 32 (and a partial 32-row attention tile: T 45)
      c.hidden_size = 64, c.num_attention_heads = 2, c.num_key_value_heads = 1, c.intermediate_size = 96, c.vocab_size = 37;
    }
    return c;
  };
  StepCase s;
  if (big) s.T = 45, s.B = 3;
  for (const char* f : {"glu", "gated_add", "concat"}) out.push_back({base(f), s});
  {
    StepCase t = s;
    t.K = 1;
    out.push_back({base("none"), t});
  }
  {
    StepCase t = s;
    t.sigma = 0.05;
    out.push_back({base("glu"), t});
  }
  {
    StepCase t = s;
    t.detach = true;
    out.push_back({base("gated_add"), t});
  }
  {
    StepCase t = s;
    t.grad_passes = 1, t.K = 3;
    out.push_back({base("glu"), t});
  }
  {
    auto c = base("concat");
    c.feedback_source = "pre_final_norm", c.input_norm = "fused_only", c.qk_norm = false, c.tie_word_embeddings = false, c.z_loss = 1e-3;
    out.push_back({c, s});
  }
  {
    auto c = base("glu");
    c.doc_attention = "causal", c.num_key_value_heads = c.num_attention_heads;
    StepCase t = s;
    t.K = 2, t.prefix = false, t.lambda = 0.5, t.grad_scale = 0.25;
    out.push_back({c, t});
  }
  {  // the fed-back state tapped at block 0 of 3, with jitter (the carry enters the stack in the middle)
    auto c = base("gated_add");
    c.num_hidden_layers = 3, c.feedback_source = "layer", c.feedback_layer = 0;
    StepCase t = s;
    t.sigma = 0.05;
    out.push_back({c, t});
  }
  {  // a heterogeneous stack: per-layer MLP widths and head counts
    auto c = base("glu");
    c.num_hidden_layers = 3;
    c.layer_intermediate_size = {c.intermediate_size, 2 * c.intermediate_size, c.intermediate_size / 2};
    c.layer_num_attention_heads = {2, 4, 2}, c.layer_num_key_value_heads = {1, 2, 2};
    c.head_dim = c.hs();
    out.push_back({c, s});
  }
  {  // both, on the concat fuser, detached
    auto c = base("concat");
    c.num_hidden_layers = 3, c.feedback_source = "layer", c.feedback_layer = 1;
    c.layer_num_attention_heads = {2, 2, 4}, c.layer_num_key_value_heads = {2, 1, 1};
    c.head_dim = c.hs();
    StepCase t = s;
    t.detach = true, t.K = 2;
    out.push_back({c, t});
  }
  {  // sliding-window layers in a mixed stack (W 3, or 17 across the 32-row attention tiles of T 45)
    auto c = base("glu");
    c.num_hidden_layers = 3, c.sliding_window = big ? 17 : 3, c.layer_types = {"sliding_attention", "full_attention", "sliding_attention"};
    out.push_back({c, s});
  }
  return out;
}

}  // namespace fbt_test
