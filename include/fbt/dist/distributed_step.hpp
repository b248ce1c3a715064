// fbt/dist/distributed_step.hpp: a K-pass step split across the ranks of a communicator by batch rows.
//
// The ranks-wide version of model/parallel_step.hpp (which it uses inside each rank, so threads per rank
// still work). Every rank holds the same global batch; rank r takes rows [r0, r0 + rows) of it (the
// shares of ParallelStepper: B / N rows each, the first B % N ranks one more), with
//   row_offset = r0 (the jitter streams are per global row, so the noise is the one-process run's),
//   grad_scale = (its share of the batch's targets) x the caller's grad_scale (so the summed gradient is
//                the gradient of the whole batch's mean loss),
//   the prefix plan cut to its rows,
// runs the step into its own gradients, and the gradients are summed over the ranks in rank order
// (Communicator::allreduce_sum). The statistics (per-pass losses, diagnostics) are combined the same way,
// so every rank ends the step with the same gradients and the same StepStats. An error on one rank (a
// non-finite loss, a bad batch) stops every rank with that rank's message (Communicator::agree).
#pragma once

#include <vector>

#include "../model/parallel_step.hpp"
#include "comm.hpp"

namespace fbt {

template <class M> class DistributedStepper {
 public:
  using T = typename M::Scalar;
  DistributedStepper(M& m, Communicator& comm, int threads) : m_(m), comm_(comm), local_(m, threads) {}
  int ranks() const { return comm_.size(); }

  /// \brief As multipass_step on the whole (global) batch b: gradients ACCUMULATED into m.params (the
  /// sum over ranks of each rank's share); st describes the whole batch. Collective: every rank calls it
  /// with the same b and o.
  void step(const Batch& b, const StepOptions& o, StepStats& st) {
    const int N = comm_.size(), r = comm_.rank();
    FBT_ASSERT(b.B >= N, "distributed step: the batch has " + std::to_string(b.B) + " rows for " + std::to_string(N) +
                             " ranks (each rank needs at least one row: raise batch_size or use fewer ranks)");
    int r0 = 0;
    for (int i = 0; i < r; ++i) r0 += b.B / N + (i < b.B % N ? 1 : 0);
    const int rows = b.B / N + (r < b.B % N ? 1 : 0);
    long total = 0, mine = 0;
    const std::size_t off = std::size_t(r0) * b.T;
    for (int n = 0; n < b.B * b.T; ++n) total += b.targets[n] >= 0;
    for (std::size_t n = off; n < off + std::size_t(rows) * b.T; ++n) mine += b.targets[n] >= 0;
    const Batch part{rows, b.T, b.tokens + off, b.targets + off, b.doc_start ? b.doc_start + off : nullptr};
    StepOptions po = o;
    po.row_offset = o.row_offset + r0;
    po.grad_scale = total > 0 ? o.grad_scale * double(mine) / double(total) : 0.0;
    if (o.prefix) {
      prefix_.resize(std::size_t(o.K) * rows);
      for (int j = 0; j < o.K; ++j)
        for (int i = 0; i < rows; ++i) prefix_[std::size_t(j) * rows + i] = o.prefix[std::size_t(j) * b.B + r0 + i];
      po.prefix = prefix_.data();
    }
    // this rank's gradients go to a zeroed buffer, then the sum over ranks is added to m.params' gradients
    const std::size_t P = m_.params.size();
    if (o.backward) {
      saved_.assign(m_.params.grads(), m_.params.grads() + P);
      std::fill(m_.params.grads(), m_.params.grads() + P, T(0));
    }
    std::string err;
    try {
      local_.step(part, po, local_st_);
    } catch (const Error& e) {
      err = e.what();
    }
    comm_.agree(err.empty(), err);
    if (o.backward) {
      comm_.allreduce_sum(m_.params.grads(), P);
      for (std::size_t i = 0; i < P; ++i) m_.params.grads()[i] += saved_[i];
    }
    // statistics: losses weighted by target shares, diagnostics by row shares, summed over ranks
    const int K = o.K;
    const double wt = total > 0 ? double(mine) / double(total) : 0.0, wr = double(rows) / b.B;
    stats_.assign(std::size_t(5 * K + 1), 0.0);
    for (int j = 0; j < K; ++j) {
      stats_[std::size_t(j)] = wt * local_st_.loss[j];
      stats_[std::size_t(K + j)] = wr * local_st_.state_rms[j];
      stats_[std::size_t(2 * K + j)] = wr * local_st_.gate_mean[j];
      stats_[std::size_t(3 * K + j)] = wr * local_st_.gate_std[j];
      stats_[std::size_t(4 * K + j)] = wr * local_st_.feedback_ratio[j];
    }
    stats_[std::size_t(5 * K)] = double(local_st_.targets);
    comm_.allreduce_sum(stats_.data(), stats_.size());
    st.reset(K);
    st.weight = local_st_.weight;
    for (int j = 0; j < K; ++j) {
      st.loss[j] = stats_[std::size_t(j)], st.state_rms[j] = stats_[std::size_t(K + j)];
      st.gate_mean[j] = stats_[std::size_t(2 * K + j)], st.gate_std[j] = stats_[std::size_t(3 * K + j)];
      st.feedback_ratio[j] = stats_[std::size_t(4 * K + j)];
    }
    st.targets = long(stats_[std::size_t(5 * K)]);
    for (int j = 0; j < K; ++j) st.objective += st.weight[j] * st.loss[j];
  }

 private:
  M& m_;
  Communicator& comm_;
  ParallelStepper<M> local_;
  StepStats local_st_;
  std::vector<int> prefix_;
  std::vector<T> saved_;
  std::vector<double> stats_;
};

}  // namespace fbt
