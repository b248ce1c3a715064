// fbt/model/parallel_step.hpp: a K-pass step split across CPU threads by batch rows.
//
// Rows of a batch are independent in every pass (shift_right, attention and the documents all stay
// inside a row), so each thread runs the whole multipass_step on its share of rows, into its own
// Workspace and, for threads > 0, its own gradient buffer (the weights are read in place by all), and
// the gradients are summed at the end. Each share's loss gradient is scaled by its share of the
// targets, so the result is the gradient of the whole batch's mean loss; the jitter is drawn per row
// from per-pass seeds (see multipass_step), so the noise is the same as one thread would draw. Results
// equal the one-thread step up to the order of floating-point sums.
#pragma once

#include <memory>

#include "../core/parallel.hpp"
#include "multipass.hpp"

namespace fbt {

template <class M> class ParallelStepper {
 public:
  using T = typename M::Scalar;
  ParallelStepper(M& m, int threads) : m_(m), pool_(std::max(1, threads)) {
    FBT_ASSERT(threads >= 1, "ParallelStepper: threads must be >= 1, got " + std::to_string(threads));
    ws_.resize(threads), st_.resize(threads), opt_.resize(threads), batch_.resize(threads), prefix_.resize(threads), rng_.resize(threads);
    grads_.resize(threads);
    for (int i = 1; i < threads; ++i) grads_[i].assign(m.params.size(), T(0));
  }
  int threads() const { return pool_.threads(); }

  /// \brief As multipass_step on the whole batch (gradients ACCUMULATED into m.params), split by rows.
  void step(const Batch& b, const StepOptions& o, StepStats& st) {
    validate_step(m_, b, o);
    const int nt = std::min(threads(), b.B);
    if (nt == 1) return multipass_step(m_, ws_[0], b, o, st);
    // shares of rows and of targets
    long total = 0;
    for (int n = 0; n < b.B * b.T; ++n) total += b.targets[n] >= 0;
    int r0 = 0;
    for (int i = 0; i < nt; ++i) {
      const int rows = b.B / nt + (i < b.B % nt ? 1 : 0);
      const std::size_t off = std::size_t(r0) * b.T;
      batch_[i] = Batch{rows, b.T, b.tokens + off, b.targets + off, b.doc_start ? b.doc_start + off : nullptr};
      long cnt = 0;
      for (std::size_t n = off; n < off + std::size_t(rows) * b.T; ++n) cnt += b.targets[n] >= 0;
      opt_[i] = o;
      opt_[i].row_offset = o.row_offset + r0;
      opt_[i].grad_scale = total > 0 ? o.grad_scale * double(cnt) / double(total) : 0.0;
      if (o.prefix) {
        prefix_[i].resize(std::size_t(o.K) * rows);
        for (int j = 0; j < o.K; ++j)
          for (int r = 0; r < rows; ++r) prefix_[i][std::size_t(j) * rows + r] = o.prefix[std::size_t(j) * b.B + r0 + r];
        opt_[i].prefix = prefix_[i].data();
      }
      if (o.rng) rng_[i] = *o.rng, opt_[i].rng = &rng_[i];
      r0 += rows;
    }
    if (o.backward)  // the other threads start from zero gradients
      for (int i = 1; i < nt; ++i) std::fill(grads_[i].begin(), grads_[i].end(), T(0));
    pool_.run(nt, &ParallelStepper::work, this);
    if (o.rng) *o.rng = rng_[0];  // every share consumed the same draws
    // gradients: master += the other threads'
    const auto P = Eigen::Index(m_.params.size());
    if (o.backward)
      for (int i = 1; i < nt; ++i) vec(m_.params.grads(), P) += cvec(grads_[i].data(), P);
    // statistics: each pass's mean loss over all targets; diagnostics averaged over shares by rows
    const int K = o.K;
    st.reset(K);
    st.weight = st_[0].weight;
    for (int i = 0; i < nt; ++i) {
      const double wt = total > 0 ? double(st_[i].targets) / double(total) : 0.0, wr = double(batch_[i].B) / b.B;
      for (int j = 0; j < K; ++j) {
        st.loss[j] += wt * st_[i].loss[j];
        st.state_rms[j] += wr * st_[i].state_rms[j], st.gate_mean[j] += wr * st_[i].gate_mean[j];
        st.gate_std[j] += wr * st_[i].gate_std[j], st.feedback_ratio[j] += wr * st_[i].feedback_ratio[j];
      }
      st.targets += st_[i].targets;
    }
    for (int j = 0; j < K; ++j) st.objective += st.weight[j] * st.loss[j];
  }

 private:
  static void work(void* self, int i) {
    auto* s = static_cast<ParallelStepper*>(self);
    CpuBackend<T> be;
    Weights<T> w = s->m_.weights();
    if (i > 0) w.grad = s->grads_[i].data();
    multipass_step(be, s->m_, w, s->ws_[i], s->batch_[i], s->opt_[i], s->st_[i]);
  }

  M& m_;
  std::vector<AlignedVector<T>> grads_;  // per thread > 0: its gradients
  std::vector<Workspace<M>> ws_;
  std::vector<StepStats> st_;
  std::vector<StepOptions> opt_;
  std::vector<Batch> batch_;
  std::vector<std::vector<int>> prefix_;
  std::vector<Rng> rng_;
  WorkerPool pool_;
};

}  // namespace fbt
