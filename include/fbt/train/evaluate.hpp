// fbt/train/evaluate.hpp: the diagnostics of spec section 6.
//
//   evaluate_passes     per-pass validation losses L_1..L_K (parallel K-pass forward, no prefix, no noise)
//   sequential_loss     the sequential-exact validation loss: token-by-token recurrence through the KV-cache
//                       decoder, teacher-forced (with feedback off it equals the parallel pass-1 loss)
//   contraction_monitor on a fixed batch, fed-back passes k = 1..k_max without prefix mixing: loss L(k)
//                       and delta_k = rms(H_k - H_{k-1}), which must flatten and decay
//   pass_logits         the logits of passes 1..K of that chain (pass k = fused(k-1) prefill at every position)
#pragma once

#include <cmath>
#include <vector>

#include "../data/dataset.hpp"
#include "../decode/decoder.hpp"
#include "../model/multipass.hpp"

namespace fbt {

/// \brief Mean validation loss of each of K passes over the first `max_windows` validation windows
/// (all when <= 0), evaluated B windows at a time. Returns (K) losses.
template <class M>
std::vector<double> evaluate_passes(M& m, Workspace<M>& w, const DataSource& data, int Tn, int K, int max_windows, int B = 8) {
  const int nw = max_windows > 0 ? std::min(max_windows, data.num_eval_windows(Tn)) : data.num_eval_windows(Tn);
  FBT_ASSERT(nw > 0, "evaluate: the validation split has no window of " + std::to_string(Tn + 1) + " tokens");
  std::vector<double> sum(K, 0.0);
  long count = 0;
  std::vector<int> tok, tgt, rt, rg;
  std::vector<std::uint8_t> ds, rd;
  StepOptions o;
  o.K = K, o.backward = false;
  StepStats st;
  for (int w0 = 0; w0 < nw; w0 += B) {
    const int nb = std::min(B, nw - w0);
    tok.clear(), tgt.clear(), ds.clear();
    for (int i = 0; i < nb; ++i) {
      data.eval_window(w0 + i, Tn, rt, rg, rd);
      tok.insert(tok.end(), rt.begin(), rt.end()), tgt.insert(tgt.end(), rg.begin(), rg.end()), ds.insert(ds.end(), rd.begin(), rd.end());
    }
    multipass_step(m, w, Batch{nb, Tn, tok.data(), tgt.data(), ds.data()}, o, st);
    for (int j = 0; j < K; ++j) sum[j] += st.loss[j] * st.targets;
    count += st.targets;
  }
  for (auto& s : sum) s /= double(count);
  return sum;
}

/// \brief Mean CE of token-by-token decoding (teacher-forced) over `windows` validation windows, in the
/// given mode (soft: true feedback at every position but each document's first; standard: none).
template <class M, class Be>
double sequential_loss(Decoder<M, Be>& dec, const DataSource& data, int Tn, int windows, DecodeModeSpec mode) {
  using T = typename M::Scalar;
  const int V = dec.model().V;
  const int nw = std::min(windows, data.num_eval_windows(Tn));
  FBT_ASSERT(nw > 0, "sequential_loss: the validation split has no window of " + std::to_string(Tn + 1) + " tokens");
  std::vector<int> tok, tgt;
  std::vector<std::uint8_t> ds;
  std::vector<T> logits(V);
  double sum = 0;
  long count = 0;
  auto ce = [&](int target) {
    if (target < 0) return;
    double mx = -INFINITY;
    for (int v = 0; v < V; ++v) mx = std::max(mx, double(logits[v]));
    double z = 0;
    for (int v = 0; v < V; ++v) z += std::exp(double(logits[v]) - mx);
    sum += mx + std::log(z) - double(logits[target]);
    ++count;
  };
  for (int i = 0; i < nw; ++i) {
    data.eval_window(i, Tn, tok, tgt, ds);
    auto s = dec.new_sequence(Tn, mode);
    dec.prefill(s, tok.data(), 1, logits.data());
    ce(tgt[0]);
    auto* sp = &s;
    for (int t = 1; t < Tn; ++t) {
      dec.step(&sp, 1, &tok[t], logits.data());
      ce(tgt[t]);
    }
  }
  return sum / double(count);
}

struct ContractionCurve {
  std::vector<double> loss;   ///< (k_max) L(k), k = 1..k_max (k = 1 is the plain pass)
  std::vector<double> delta;  ///< (k_max) delta_k = rms(H_k - H_{k-1}); delta_1 = 0
};

/// \brief The contraction monitor on one fixed batch: k_max passes of the fed-back chain (no prefix
/// mixing, no noise), the loss of each and the rms change of the final-norm states between passes.
template <class M> ContractionCurve contraction_monitor(M& m, Workspace<M>& w, const Batch& b, int k_max) {
  using T = typename M::Scalar;
  FBT_ASSERT(k_max >= 1, "contraction_monitor: k_max must be >= 1");
  FBT_ASSERT(k_max == 1 || m.feedback(), "contraction_monitor needs a feedback fuser");
  const std::size_t ND = std::size_t(b.B) * b.T * m.D;
  CpuBackend<T> be;
  PassRunner<M> run(be, m, m.weights(), w);
  run.prepare(b.B, b.T, 1, false);
  run.begin_batch(b.tokens, b.doc_start, b.targets);
  ContractionCurve c;
  std::vector<T> prev(ND);
  run.forward_chain(k_max, [&](int k, PassCache<M>& p) {
    double d2 = 0;
    if (k > 0)
      for (std::size_t i = 0; i < ND; ++i) d2 += double(p.hf[i] - prev[i]) * double(p.hf[i] - prev[i]);
    std::copy(p.hf, p.hf + ND, prev.begin());
    const auto [sum, cnt] = run.head_forward(p, 0.0);
    c.loss.push_back(cnt ? sum / double(cnt) : 0.0);
    c.delta.push_back(std::sqrt(d2 / double(ND)));
  });
  return c;
}

/// \brief Logits (K, B*T, V) of passes 1..K of the fed-back chain on a batch (no prefix mixing, no noise:
/// pass k is the fused(k-1) prefill at every position; targets are not needed).
template <class M> std::vector<typename M::Scalar> pass_logits(const M& m, const Batch& b, int K) {
  using T = typename M::Scalar;
  FBT_ASSERT(K >= 1 && (K == 1 || M::has_feedback), "pass_logits: K = " + std::to_string(K) + " (a baseline has 1 pass)");
  const std::size_t NV = std::size_t(b.B) * b.T * m.V;
  std::vector<T> out(std::size_t(K) * NV);
  CpuBackend<T> be;
  Workspace<M> w;
  PassRunner<M> run(be, m, m.weights(), w);
  run.prepare(b.B, b.T, 1, false);
  run.begin_batch(b.tokens, b.doc_start, nullptr);
  run.forward_chain(K, [&](int j, PassCache<M>& p) {
    linear(be, out.data() + std::size_t(j) * NV, p.hf, m.params.values() + m.head_offset(), b.B * b.T, m.V, m.D, m.D, false);
  });
  return out;
}

}  // namespace fbt
