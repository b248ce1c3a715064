// fbt/dist/distributed_step.hpp: a K-pass step split across the ranks of a communicator by batch rows.
//
// The ranks-wide version of model/parallel_step.hpp (which it uses inside each rank, so threads per rank
// still work), with the same cut (model/batch_share.hpp): every rank holds the same global batch; rank r
// takes share r of its rows (B / N each, the first B % N ranks one more), with the global row offset (the
// jitter streams are per global row, so the noise is the one-process run's), its prefix columns and its
// share of the batch's targets as gradient scale (so the summed gradient is the gradient of the whole
// batch's mean loss). The gradients are then summed over the ranks in rank order
// (Communicator::allreduce_sum), so every rank ends the step with the same gradients, bit for bit.
//
// Gradient accumulation: step(..., reduce = false) keeps a micro-batch's gradients on the rank; the
// micro-batch with reduce = true sums everything accumulated since over the ranks: one reduction per
// optimizer step, whatever grad_accum is.
//
// Overlap (DistOptions::overlap, as PyTorch DDP does): during the reducing micro-batch's last backward
// pass, block l's gradients are final as soon as its backward is done (StepOptions::grad_ready), and the
// blocks' gradients lie in the flat buffer in layer order (block_param_ranges). Walking down the stack,
// consecutive blocks are grouped into buckets of at least bucket_bytes, and each bucket's reduction is
// started (Communicator::start_allreduce_sum) while the blocks below it are still in backward; the rest
// (embedding, norms, fuser, head: final only when the step returns) goes last, then all are awaited.
// Every element is still summed in rank order, so the result is the same bits as without overlap.
//
// Statistics (per-pass losses, diagnostics) are combined like the threads' and summed over the ranks, with
// one more slot that says whether any rank failed: an error on one rank (a non-finite loss, a bad batch)
// then stops every rank with that rank's message (Communicator::agree). A failing rank still takes part in
// every reduction the others start (it starts the buckets it did not reach), so no rank is left waiting.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "../model/parallel_step.hpp"
#include "comm.hpp"

namespace fbt {

struct DistOptions {
  bool overlap = true;                       ///< reduce the blocks' gradients in buckets during the backward
  std::size_t bucket_bytes = 250000;         ///< a bucket's least size in bytes (the last one may be smaller)
};

template <class M> class DistributedStepper {
 public:
  using T = typename M::Scalar;
  DistributedStepper(M& m, Communicator& comm, int threads, DistOptions d = {}) : m_(m), comm_(comm), local_(m, threads), d_(d) {
    const auto ranges = block_param_ranges(m);
    // buckets, top block first: consecutive blocks until bucket_bytes (a bucket is [lo, hi) of the buffer)
    if (!ranges.empty()) {
      std::size_t hi = ranges.back().second;
      for (int l = m.L - 1; l >= 0; --l) {
        const std::size_t lo = ranges[l].first;
        if ((hi - lo) * sizeof(T) >= d_.bucket_bytes || l == 0) {
          if (hi > lo) buckets_.push_back(Bucket{l, lo, hi});
          hi = lo;
        }
      }
      blocks_lo_ = ranges.front().first, blocks_hi_ = ranges.back().second;
    }
  }
  int ranks() const { return comm_.size(); }
  const DistOptions& options() const { return d_; }
  /// Whether this model's gradients can be reduced during the backward (block_param_ranges is not empty).
  bool can_overlap() const { return !buckets_.empty(); }
  /// Buckets of the last reducing step (0 without overlap), and how many of them started during its backward.
  int buckets_used() const { return buckets_used_; }
  int buckets_started_early() const { return early_; }
  /// Seconds the last step spent communicating after its own computation was done: the exposed part of
  /// the gradient reduction (what overlap shrinks), plus the statistics' small reduction.
  double exposed_seconds() const { return exposed_; }

  /// \brief As multipass_step on the whole (global) batch b (collective: every rank calls it with the
  /// same b and o): this rank's share runs, its gradients ACCUMULATE into m.params locally, and with
  /// reduce (the last micro-batch of an optimizer step) every gradient accumulated since the last reduce
  /// is summed over the ranks. st describes the whole global batch (the same on every rank).
  void step(const Batch& b, const StepOptions& o, StepStats& st, bool reduce = true) {
    const int N = comm_.size(), r = comm_.rank();
    FBT_ASSERT(b.B >= N, "distributed step: the batch has " + std::to_string(b.B) + " rows for " + std::to_string(N) +
                             " ranks (each rank needs at least one row: raise batch_size or use fewer ranks)");
    const std::size_t P = m_.params.size();
    if (o.backward && !open_) {  // the caller's gradients are set aside: only this step's are summed
      saved_.assign(m_.params.grads(), m_.params.grads() + P);
      std::fill(m_.params.grads(), m_.params.grads() + P, T(0));
      open_ = true;
    }
    share_.cut(b, o, share_first_row(b.B, N, r), share_rows(b.B, N, r), count_targets(b, 0, b.B));
    const bool overlap = reduce && o.backward && d_.overlap && can_overlap() && N > 1;
    next_bucket_ = 0, early_ = 0;
    share_.opt.grad_ready = overlap ? GradReady{&DistributedStepper::on_ready, this} : GradReady{};
    std::string err;
    try {
      local_.step(share_.batch, share_.opt, local_st_);
    } catch (const Error& e) {
      err = e.what();
    }
    const auto t_done = std::chrono::steady_clock::now();
    if (reduce && o.backward) {
      T* g = m_.params.grads();
      if (overlap) {
        while (next_bucket_ < int(buckets_.size())) start_bucket(next_bucket_++);  // a failed rank's unreached buckets
        comm_.start_allreduce_sum(g, blocks_lo_);                                  // the rest: below and above the blocks
        comm_.start_allreduce_sum(g + blocks_hi_, P - blocks_hi_);
        comm_.wait_all();
        buckets_used_ = int(buckets_.size());
      } else {
        comm_.allreduce_sum(g, P);
        buckets_used_ = 0;
      }
      for (std::size_t i = 0; i < P; ++i) g[i] += saved_[i];
      open_ = false;
    }
    // statistics: this rank's share weighted, summed over the ranks; the last slot counts failed ranks
    const int K = o.K;
    StepStats part;
    part.reset(K);
    if (err.empty()) add_share_stats(part, local_st_, share_);
    stats_.assign(std::size_t(5 * K + 2), 0.0);
    for (int j = 0; j < K; ++j) {
      stats_[std::size_t(j)] = part.loss[j], stats_[std::size_t(K + j)] = part.state_rms[j];
      stats_[std::size_t(2 * K + j)] = part.gate_mean[j], stats_[std::size_t(3 * K + j)] = part.gate_std[j];
      stats_[std::size_t(4 * K + j)] = part.feedback_ratio[j];
    }
    stats_[std::size_t(5 * K)] = double(part.targets);
    stats_[std::size_t(5 * K + 1)] = err.empty() ? 0.0 : 1.0;
    comm_.allreduce_sum(stats_.data(), stats_.size());
    exposed_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_done).count();
    if (stats_[std::size_t(5 * K + 1)] > 0) {
      open_ = false;
      comm_.agree(err.empty(), err);  // throws on every rank with the first failing rank's message
    }
    st.reset(K);
    for (int j = 0; j < K; ++j) {
      st.loss[j] = stats_[std::size_t(j)], st.state_rms[j] = stats_[std::size_t(K + j)];
      st.gate_mean[j] = stats_[std::size_t(2 * K + j)], st.gate_std[j] = stats_[std::size_t(3 * K + j)];
      st.feedback_ratio[j] = stats_[std::size_t(4 * K + j)];
    }
    st.targets = long(stats_[std::size_t(5 * K)]);
    finish_share_stats(st, local_st_.weight);
  }

 private:
  struct Bucket {
    int last_block;         // the bucket is ready once this block (its lowest) is
    std::size_t lo, hi;     // [lo, hi) of the flat gradient buffer
  };
  void start_bucket(int k) { comm_.start_allreduce_sum(m_.params.grads() + buckets_[k].lo, buckets_[k].hi - buckets_[k].lo); }
  // block l's gradients are final: start the bucket it completes; let the reductions in flight advance
  static void on_ready(void* self, int l) {
    auto* s = static_cast<DistributedStepper*>(self);
    if (s->next_bucket_ < int(s->buckets_.size()) && s->buckets_[s->next_bucket_].last_block == l) s->start_bucket(s->next_bucket_++), ++s->early_;
    s->comm_.progress();
  }

  M& m_;
  Communicator& comm_;
  ParallelStepper<M> local_;
  DistOptions d_;
  BatchShare share_;
  StepStats local_st_;
  std::vector<T> saved_;
  std::vector<double> stats_;
  std::vector<Bucket> buckets_;
  std::size_t blocks_lo_ = 0, blocks_hi_ = 0;
  int next_bucket_ = 0, buckets_used_ = 0, early_ = 0;
  double exposed_ = 0;
  bool open_ = false;  // gradients accumulated on this rank since the last reduce
};

}  // namespace fbt
