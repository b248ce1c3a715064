// tests/common/pass_runner.hpp: run the passes of a step one at a time through the Model's pass API,
// with chosen source states, so tests can build the objective a knob defines (detach, grad_passes) and
// read every pass's top states.
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
template <class T>
PassRun run_passes(fbt::Model<T>& m, const fbt::Batch& b, int K, const std::vector<int>* prefix = nullptr,
                   const std::vector<std::vector<T>>* fixed = nullptr) {
  fbt::Workspace<T> w;
  m.prepare(w, b.B, b.T, 1, false);
  m.begin_batch(w, b.tokens, b.doc_start);
  const int N = b.B * b.T, D = m.D;
  if (K > 1) m.fuser.shared_forward(m.params, w.fshared, w.e, N);
  PassRun r;
  std::vector<T> prev;
  auto& p = w.pass[0];
  for (int j = 0; j < K; ++j) {
    if (j == 0) {
      m.plain_input(w, p);
    } else {
      const std::vector<T>& src = (fixed && !(*fixed)[j].empty()) ? (*fixed)[j] : prev;
      m.fused_input(w, p, src.data(), nullptr, prefix ? prefix->data() + std::size_t(j) * b.B : nullptr);
    }
    r.x0.emplace_back(p.res[0], p.res[0] + std::size_t(N) * D);
    m.stack_forward(w, p);
    r.hf.emplace_back(p.hf, p.hf + std::size_t(N) * D);
    const T* s = m.source_state(p);
    prev.assign(s, s + std::size_t(N) * D);
    r.source.emplace_back(prev.begin(), prev.end());
    const auto sc = m.head_forward(w, p, b.targets, 0.0);
    r.loss.push_back(sc.second ? sc.first / double(sc.second) : 0.0);
  }
  return r;
}

}  // namespace fbt_test
