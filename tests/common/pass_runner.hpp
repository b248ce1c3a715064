// tests/common/pass_runner.hpp: run the passes of a step one at a time through the pass API
// (fbt::PassRunner), with chosen source states, so tests can build the objective a knob defines
// (detach, grad_passes) and read every pass's top states.
#pragma once

#include <vector>

#include "tiny_model.hpp"

namespace fbt_test {

struct PassRun {
  std::vector<double> loss;                  // (K) mean CE per pass
  std::vector<std::vector<double>> x0;       // (K) layer-0 input X (N*D) per pass
  std::vector<std::vector<double>> hf;       // (K) final-norm output (N*D) per pass
  std::vector<std::vector<double>> source;   // (K) state each pass feeds to the next (N*D)
};

/// Runs K passes in order. Pass j >= 1 is fed the source state `fixed[j]` when fixed[j] is non-empty,
/// else the previous pass's own source state (the ordinary chain). Noise-free.
template <class M>
PassRun run_passes(M& m, const fbt::Batch& b, int K, const std::vector<int>* prefix = nullptr,
                   const std::vector<std::vector<typename M::Scalar>>* fixed = nullptr) {
  using T = typename M::Scalar;
  fbt::CpuBackend<T> be;
  fbt::Workspace<M> w;
  fbt::PassRunner<M> run(be, m, m.weights(), w);
  run.prepare(b.B, b.T, 1, false);
  run.begin_batch(b.tokens, b.doc_start, b.targets);
  const int N = b.B * b.T, D = m.D;
  if (K > 1) run.precompute();
  PassRun r;
  std::vector<T> prev;
  auto& p = w.pass[0];
  for (int j = 0; j < K; ++j) {
    if (j == 0) {
      run.plain_input(p);
    } else if constexpr (M::may_feed_back) {
      const std::vector<T>& src = (fixed && !(*fixed)[j].empty()) ? (*fixed)[j] : prev;
      run.fused_input(p, src.data(), nullptr, prefix ? prefix->data() + std::size_t(j) * b.B : nullptr);
    }
    r.x0.emplace_back(p.res[0], p.res[0] + std::size_t(N) * D);
    run.stack_forward(p);
    r.hf.emplace_back(p.hf, p.hf + std::size_t(N) * D);
    const T* s = run.source(p);
    prev.assign(s, s + std::size_t(N) * D);
    r.source.emplace_back(prev.begin(), prev.end());
    const auto sc = run.head_forward(p, 0.0);
    r.loss.push_back(sc.second ? sc.first / double(sc.second) : 0.0);
  }
  return r;
}

/// Runs the stack on given layer-0 inputs X (N*D) (no cache, one full forward); returns hf and the source states.
template <class M>
std::pair<std::vector<double>, std::vector<double>> forward_inputs(M& m, const fbt::Batch& b, const std::vector<typename M::Scalar>& X) {
  using T = typename M::Scalar;
  fbt::CpuBackend<T> be;
  fbt::Workspace<M> w;
  fbt::PassRunner<M> run(be, m, m.weights(), w);
  run.prepare(b.B, b.T, 1, false);
  run.begin_batch(b.tokens, b.doc_start, b.targets);
  auto& p = w.pass[0];
  std::copy(X.begin(), X.end(), p.res[0]);
  run.stack_forward(p);
  const std::size_t ND = std::size_t(b.B) * b.T * m.D;
  const T* s = run.source(p);
  return {std::vector<double>(p.hf, p.hf + ND), std::vector<double>(s, s + ND)};
}

/// Logits of row n from final-norm states hf (the head: tied embedding or lm_head).
template <class M> std::vector<double> head_logits(const M& m, const std::vector<double>& hf, std::size_t n) {
  const auto* W = m.params.values() + m.head_offset();
  std::vector<double> out(m.V, 0.0);
  for (int v = 0; v < m.V; ++v)
    for (int c = 0; c < m.D; ++c) out[v] += double(W[std::size_t(v) * m.D + c]) * hf[n * m.D + c];
  return out;
}

/// Naive token-by-token decoding with true feedback, teacher-forced: position t's input uses the top
/// state the model produced at t-1 (plain at t < max(p, 1) and at document starts). Built by T passes:
/// pass i feeds the true states of positions < i, which fixes position i (the stack is causal).
template <class M> std::vector<double> sequential_states(M& m, const fbt::Batch& b, const std::vector<int>& prefix_row) {
  static_assert(std::is_same<typename M::Scalar, double>::value, "sequential_states runs in double");
  const int N = b.B * b.T, D = m.D;
  std::vector<std::vector<double>> fixed(2);
  fixed[1].assign(std::size_t(N) * D, 0.0);
  std::vector<int> prefix(2 * b.B, 0);
  for (int i = 0; i < b.B; ++i) prefix[b.B + i] = prefix_row[i];
  std::vector<double> hf(std::size_t(N) * D, 0.0);
  for (int t = 0; t < b.T; ++t) {
    const PassRun r = run_passes(m, b, 2, &prefix, &fixed);
    for (int i = 0; i < b.B; ++i) {
      const std::size_t n = std::size_t(i) * b.T + t;
      std::copy(r.hf[1].begin() + n * D, r.hf[1].begin() + (n + 1) * D, hf.begin() + n * D);
      std::copy(r.source[1].begin() + n * D, r.source[1].begin() + (n + 1) * D, fixed[1].begin() + n * D);
    }
  }
  return hf;
}

}  // namespace fbt_test
