// tests/cuda/engine_checks.hpp: the CUDA path's engine (include/fbt/cuda/engine.cuh) against the CPU
// path, for any backend: the whole K-pass step (per-pass losses, diagnostics, every gradient), AdamW,
// gradient clipping, and KV-cached decoding (logits of prefill and steps, greedy tokens) in every mode.
//
// Used by tests/cuda/test_engine_host.cpp (host backend: runs everywhere, in CI) and by
// tests/cuda/test_gpu.cu (CudaBackend: runs where a GPU exists). Errors are relative:
// max |device - cpu| / max |cpu| per tensor (the CPU's max, or 1e-30 when the CPU tensor is all zero).
#pragma once

#include <algorithm>
#include <cmath>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <common/tiny_model.hpp>

#include "fbt/cuda/engine.cuh"
#include "fbt/decode/decoder.hpp"
#include "fbt/train/adamw.hpp"
#include "fbt/train/clip.hpp"

namespace fbt_test {

/// max |a - b| / max |b| (a NaN anywhere in a, e.g. an element never written, gives +inf).
inline double rel_err(const float* a, const float* b, std::size_t n) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (!std::isfinite(a[i])) return INFINITY;
    num = std::max(num, std::fabs(double(a[i]) - double(b[i])));
    den = std::max(den, std::fabs(double(b[i])));
  }
  return num / std::max(den, 1e-30);
}
inline double rel_err(const float* a, const double* b, std::size_t n) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (!std::isfinite(a[i])) return INFINITY;
    num = std::max(num, std::fabs(double(a[i]) - b[i]));
    den = std::max(den, std::fabs(b[i]));
  }
  return num / std::max(den, 1e-30);
}
inline double rel_err(double a, double b) { return std::isfinite(a) ? std::fabs(a - b) / std::max(std::fabs(b), 1e-30) : INFINITY; }

/// What one comparison found: the worst relative error and where.
struct Worst {
  double err = 0;
  std::string where, context;
  double loss_err = 0;  ///< compare_step: the worst over the per-pass losses and the objective alone
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

/// Moves every parameter away from its init like fbt_test::randomize (gains 1 + N(0, 0.2^2)), with matrices
/// N(0, (0.3 sqrt(8 / fan_in))^2): the tiny harness's 0.3 at fan-in 8, and a scale that keeps attention
/// and the fed-back states O(1) at wider shapes (at D 64 with QK-norm off, std 0.3 saturates the softmax
/// and the CPU path in float is itself 1e-4 off a double reference).
template <class T> void randomize_scaled(fbt::Model<T>& m, std::uint64_t seed) {
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

inline std::string describe(const fbt::ModelConfig& c, const StepCase& s) {
  std::ostringstream os;
  os << "fuser=" << c.fuser << " D=" << c.hidden_size << " L=" << c.num_hidden_layers << " NH=" << c.num_attention_heads
     << " NKV=" << c.num_key_value_heads << " hs=" << c.hs() << " F=" << c.intermediate_size << " V=" << c.vocab_size
     << " src=" << c.feedback_source << " in_norm=" << c.input_norm << " qk=" << c.qk_norm << " tied=" << c.tie_word_embeddings
     << " z=" << c.z_loss << " docs_attn=" << c.doc_attention << " | B=" << s.B << " T=" << s.T << " K=" << s.K << " sigma=" << s.sigma
     << " detach=" << s.detach << " g=" << s.grad_passes << " prefix=" << s.prefix << " docs=" << s.docs;
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

/// The whole step on the CPU and on Be, from the same weights, batch and jitter seed. The reference is
/// the CPU path in double (a Model<double> holding the same float weights), so the error measured is
/// the device's own float rounding; the CPU path in float is run too and its error against the same
/// reference is reported in `context` (a config where both are large is ill-conditioned, not wrong).
/// Returns the worst relative error over the per-pass losses, the diagnostics and every gradient tensor.
template <class Be, class... A> Worst compare_step(const fbt::ModelConfig& cfg, const StepCase& s, A&&... be_args) {
  fbt::Model<float> m(cfg, s.seed);
  randomize_scaled(m, s.seed + 1);
  fbt::Model<double> md(cfg, s.seed);
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
  // CPU reference (double) and the CPU path in float, for context
  fbt::Rng rr(s.seed + 17), rc(s.seed + 17);
  fbt::Workspace<double> wd;
  fbt::Workspace<float> w;
  fbt::StepStats sr, sc;
  md.params.zero_grad(), m.params.zero_grad();
  fbt::multipass_step(md, wd, b, opts(rr), sr);
  fbt::multipass_step(m, w, b, opts(rc), sc);
  const std::vector<double> gref(md.params.grads(), md.params.grads() + md.params.size());
  // device
  fbt::cuda::DeviceModelT<Be> dm(m, std::forward<A>(be_args)...);
  fbt::Rng rd(s.seed + 17);
  fbt::StepStats sd;
  dm.multipass_step(b, opts(rd), sd);
  std::vector<float> gdev(m.params.size());
  dm.download_grads(gdev.data());

  Worst worst, cpu;
  if (rr.next_u32() != rd.next_u32()) worst.add(INFINITY, "jitter draws (Rng state after the step)");
  for (int j = 0; j < s.K; ++j) {
    const std::string pj = " pass " + std::to_string(j + 1);
    worst.add(rel_err(sd.loss[j], sr.loss[j]), "loss" + pj);
    worst.loss_err = std::max(worst.loss_err, rel_err(sd.loss[j], sr.loss[j]));
    cpu.add(rel_err(sc.loss[j], sr.loss[j]), "loss" + pj);
    worst.add(rel_err(sd.state_rms[j], sr.state_rms[j]), "state_rms" + pj);
    worst.add(rel_err(sd.gate_mean[j], sr.gate_mean[j]), "gate_mean" + pj);
    worst.add(std::fabs(sd.gate_std[j] - sr.gate_std[j]) / std::max(1e-3, sr.gate_std[j]), "gate_std" + pj);
    worst.add(rel_err(sd.feedback_ratio[j], sr.feedback_ratio[j]), "feedback_ratio" + pj);
  }
  worst.add(rel_err(sd.objective, sr.objective), "objective");
  if (sd.targets != sr.targets) worst.add(INFINITY, "target count");
  for (const auto& sp : m.params.specs()) {
    worst.add(rel_err(gdev.data() + sp.offset, gref.data() + sp.offset, sp.size), "grad " + sp.name);
    cpu.add(rel_err(m.params.grads() + sp.offset, gref.data() + sp.offset, sp.size), "grad " + sp.name);
  }
  worst.context = "CPU path in float against the same reference: " + cpu.str();
  return worst;
}

/// AdamW (two updates) and clip_grad_norm on the device against the CPU, from the same gradients.
template <class Be, class... A> Worst compare_adamw(const fbt::ModelConfig& cfg, std::uint64_t seed, A&&... be_args) {
  fbt::Model<float> m(cfg, seed);
  randomize_scaled(m, seed + 1);
  fbt::Rng rng(seed + 2);
  fbt::cuda::DeviceModelT<Be> dm(m, std::forward<A>(be_args)...);
  fbt::AdamWConfig a;
  a.weight_decay = 0.1;
  Worst worst;
  for (int it = 0; it < 2; ++it) {
    for (std::size_t i = 0; i < m.params.size(); ++i) m.params.grads()[i] = float(rng.normal(0.0, 1e-2 * (it + 1)));
    dm.backend().upload(dm.grads(), m.params.grads(), m.params.size());
    const double nc = fbt::clip_grad_norm(m.params, 0.5), nd = dm.clip_grad_norm(0.5);
    worst.add(rel_err(nd, nc), "clip_grad_norm step " + std::to_string(it + 1));
    fbt::adamw_update(m.params, a, 3e-3);
    dm.adamw_update(a, 3e-3);
  }
  // download() writes the device's values, moments and step over the host store
  const std::vector<float> vc(m.params.values(), m.params.values() + m.params.size());
  const std::vector<float> mc(m.params.adam_m(), m.params.adam_m() + m.params.size());
  const std::vector<float> vvc(m.params.adam_v(), m.params.adam_v() + m.params.size());
  dm.download();
  for (const auto& sp : m.params.specs()) {
    worst.add(rel_err(m.params.values() + sp.offset, vc.data() + sp.offset, sp.size), "value " + sp.name);
    worst.add(rel_err(m.params.adam_m() + sp.offset, mc.data() + sp.offset, sp.size), "adam_m " + sp.name);
    worst.add(rel_err(m.params.adam_v() + sp.offset, vvc.data() + sp.offset, sp.size), "adam_v " + sp.name);
  }
  if (m.params.step != 2) worst.add(INFINITY, "AdamW step counter");
  return worst;
}

/// Decoding on the device against the CPU Decoder: prefill and step logits, and greedy tokens, for a
/// batch of requests (one with a document separator in its prompt) in the given mode.
template <class Be, class... A>
Worst compare_decode(const fbt::ModelConfig& cfg, const std::string& mode, std::uint64_t seed, std::vector<int>* tokens_out, A&&... be_args) {
  fbt::Model<float> m(cfg, seed);
  randomize_scaled(m, seed + 1);
  const int sep = cfg.vocab_size - 1, V = cfg.vocab_size;
  fbt::Rng rng(seed + 3);
  std::vector<fbt::Request> reqs;
  for (int i = 0; i < 3; ++i) {
    fbt::Request r;
    const int P = 3 + 4 * i;
    for (int t = 0; t < P; ++t) r.prompt.push_back(int(rng.below(std::uint32_t(V - 1))));
    if (i == 2) r.prompt[4] = sep;  // a document boundary inside the prompt
    r.opts.mode = fbt::DecodeModeSpec::parse(mode);
    r.opts.max_new_tokens = 6 + 3 * i;
    reqs.push_back(r);
  }
  Worst worst;
  // logits: prefill then two steps of a two-sequence batch
  fbt::cuda::DeviceModelT<Be> dm(m, std::forward<A>(be_args)...);
  fbt::cuda::DeviceDecoderT<Be> dd(dm, sep);
  fbt::Decoder<float> cd(m, sep);
  const auto ms = fbt::DecodeModeSpec::parse(mode);
  auto c0 = cd.new_sequence(32, ms), c1 = cd.new_sequence(32, ms);
  auto d0 = dd.new_sequence(32, ms), d1 = dd.new_sequence(32, ms);
  std::vector<float> lc(2 * V), ld(2 * V);
  cd.prefill(c0, reqs[0].prompt.data(), int(reqs[0].prompt.size()), lc.data());
  dd.prefill(d0, reqs[0].prompt.data(), int(reqs[0].prompt.size()), ld.data());
  worst.add(rel_err(ld.data(), lc.data(), V), "prefill logits (" + mode + ")");
  cd.prefill(c1, reqs[2].prompt.data(), int(reqs[2].prompt.size()), lc.data());
  dd.prefill(d1, reqs[2].prompt.data(), int(reqs[2].prompt.size()), ld.data());
  worst.add(rel_err(ld.data(), lc.data(), V), "prefill logits with a document start (" + mode + ")");
  fbt::Sequence<float>* cs[2] = {&c0, &c1};
  typename fbt::cuda::DeviceDecoderT<Be>::Sequence* ds[2] = {&d0, &d1};
  const int steps[3][2] = {{1, 2}, {sep, 5}, {3, 4}};  // the second step starts a document in sequence 0
  for (int st = 0; st < 3; ++st) {
    cd.step(cs, 2, steps[st], lc.data());
    dd.step(ds, 2, steps[st], ld.data());
    worst.add(rel_err(ld.data(), lc.data(), std::size_t(2) * V), "step " + std::to_string(st + 1) + " logits (" + mode + ")");
  }
  // greedy generation: the same tokens
  fbt::Decoder<float> cd2(m, sep);
  fbt::cuda::DeviceDecoderT<Be> dd2(dm, sep);
  const auto tc = fbt::generate_batch(cd2, reqs);
  const auto td = fbt::cuda::generate_batch(dd2, reqs);
  for (std::size_t i = 0; i < reqs.size(); ++i)
    if (tc[i] != td[i]) worst.add(INFINITY, "greedy tokens of request " + std::to_string(i) + " (" + mode + ")");
  if (tokens_out)
    for (const auto& t : td) tokens_out->insert(tokens_out->end(), t.begin(), t.end());
  return worst;
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
  return out;
}

}  // namespace fbt_test
