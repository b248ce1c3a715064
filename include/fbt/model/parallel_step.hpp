// fbt/model/parallel_step.hpp: a K-pass step split across threads by batch rows.
//
// Rows of a batch are independent in every pass (shift_right, attention and the documents all stay
// inside a row), so each thread runs the whole multipass_step on its share of rows, into its own
// Workspace and (for threads > 0) its own replica of the parameters, and the gradients are summed at
// the end. Each share's loss gradient is scaled by its share of the targets, so the result is the
// gradient of the whole batch's mean loss; the jitter is drawn per row from per-pass seeds (see
// multipass_step), so the noise is the same as one thread would draw. Results equal the one-thread step
// up to the order of floating-point sums.
#pragma once

#include <cstring>
#include <memory>

#include "../core/parallel.hpp"
#include "multipass.hpp"

namespace fbt {

template <class T> class ParallelStepper {
 public:
  ParallelStepper(Model<T>& m, int threads) : m_(m), pool_(std::max(1, threads)) {
    FBT_ASSERT(threads >= 1, "ParallelStepper: threads must be >= 1, got " + std::to_string(threads));
    ws_.resize(threads), st_.resize(threads), opt_.resize(threads), batch_.resize(threads), prefix_.resize(threads), rng_.resize(threads);
    for (int i = 1; i < threads; ++i) rep_.push_back(std::make_unique<Model<T>>(m));
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
    for (int i = 1; i < nt; ++i) {  // replicas read the current weights and start from zero gradients
      ParamStore<T>& ps = rep_[i - 1]->params;
      std::memcpy(ps.values(), m_.params.values(), m_.params.size() * sizeof(T));
      if (o.backward) ps.zero_grad();
    }
    nt_ = nt;
    pool_.run(nt, &ParallelStepper::work, this);
    if (o.rng) *o.rng = rng_[0];  // every share consumed the same draws
    // gradients: master += replicas
    if (o.backward)
      for (int i = 1; i < nt; ++i) vec(m_.params.grads(), Eigen::Index(m_.params.size())) += cvec(rep_[i - 1]->params.grads(), Eigen::Index(m_.params.size()));
    // statistics: each pass's mean loss over all targets; diagnostics averaged over shares by rows
    const int K = o.K;
    st.loss.assign(K, 0.0), st.weight = st_[0].weight, st.objective = 0, st.targets = 0;
    st.state_rms.assign(K, 0.0), st.gate_mean.assign(K, 0.0), st.gate_std.assign(K, 0.0), st.feedback_ratio.assign(K, 0.0);
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
    Model<T>& m = i == 0 ? s->m_ : *s->rep_[i - 1];
    multipass_step(m, s->ws_[i], s->batch_[i], s->opt_[i], s->st_[i]);
  }

  Model<T>& m_;
  std::vector<std::unique_ptr<Model<T>>> rep_;
  std::vector<Workspace<T>> ws_;
  std::vector<StepStats> st_;
  std::vector<StepOptions> opt_;
  std::vector<Batch> batch_;
  std::vector<std::vector<int>> prefix_;
  std::vector<Rng> rng_;
  int nt_ = 1;
  WorkerPool pool_;
};

}  // namespace fbt
