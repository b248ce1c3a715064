// fbt/model/parallel_step.hpp: a K-pass step split across CPU threads by batch rows.
//
// Rows of a batch are independent in every pass, so each thread runs the whole multipass_step on its
// share of rows (model/batch_share.hpp: its rows, row offset, prefix columns and target-share gradient
// scale), into its own Workspace and, for threads > 0, its own gradient buffer (the weights are read in
// place by all), and the gradients are summed at the end. The result is the gradient of the whole batch's
// mean loss; the jitter is drawn per row from per-pass seeds (see multipass_step), so the noise is the
// same as one thread would draw. Results equal the one-thread step up to the order of floating-point sums.
//
// With a grad_ready callback (StepOptions; what data-parallel training reduces early with), thread 0
// adds the other threads' gradients of block l as soon as every thread has finished block l's backward,
// and then calls the callback with l: so "block l is ready" still means all of the batch's block-l
// gradient is in m.params. block_param_ranges says which part of the flat buffer each block owns.
#pragma once

#include <atomic>
#include <cstdlib>
#include <memory>
#include <thread>
#include <utility>

#include "../core/parallel.hpp"
#include "batch_share.hpp"

namespace fbt {

/// \brief [lo, hi) of the flat parameter buffer that holds block l's tensors ("model.layers.{l}.*"), for
/// every block: contiguous, in layer order, each block's range following the previous one's. Empty when
/// the layout is not so (a block whose tensors are not adjacent, or an alias into or out of a block):
/// then no gradient is final before the whole backward is.
template <class M> std::vector<std::pair<std::size_t, std::size_t>> block_param_ranges(const M& m) {
  using Range = std::pair<std::size_t, std::size_t>;
  std::vector<Range> r(std::size_t(m.L), Range{~std::size_t(0), 0});
  std::vector<std::size_t> count(std::size_t(m.L), 0);
  const std::string prefix = "model.layers.";
  for (const auto& s : m.params.specs()) {
    if (s.name.compare(0, prefix.size(), prefix) != 0) continue;
    const int l = std::atoi(s.name.c_str() + prefix.size());
    if (l < 0 || l >= m.L) return {};
    r[l].first = std::min(r[l].first, s.offset), r[l].second = std::max(r[l].second, s.offset + s.size);
    count[l] += s.size;
  }
  for (const auto& a : m.params.used_aliases())
    if (a.first.compare(0, prefix.size(), prefix) == 0 || a.second.compare(0, prefix.size(), prefix) == 0) return {};
  for (int l = 0; l < m.L; ++l) {
    if (count[l] == 0) r[l] = {l > 0 ? r[l - 1].second : 0, l > 0 ? r[l - 1].second : 0};  // a block without tensors
    if (r[l].second - r[l].first != count[l]) return {};                                    // not adjacent
    if (l > 0 && count[l] > 0 && r[l].first != r[l - 1].second && count[l - 1] > 0) return {};
  }
  return r;
}

template <class M> class ParallelStepper {
 public:
  using T = typename M::Scalar;
  ParallelStepper(M& m, int threads) : m_(m), pool_(std::max(1, threads)) {
    FBT_ASSERT(threads >= 1, "ParallelStepper: threads must be >= 1, got " + std::to_string(threads));
    ws_.resize(threads), st_.resize(threads), share_.resize(threads), rng_.resize(threads);
    grads_.resize(threads);
    for (int i = 1; i < threads; ++i) grads_[i].assign(m.params.size(), T(0));
    ranges_ = block_param_ranges(m);
    layer_done_ = std::make_unique<std::atomic<int>[]>(std::size_t(std::max(m.L, 1)));
    added_.assign(std::size_t(m.L), 0);
  }
  int threads() const { return pool_.threads(); }

  /// \brief As multipass_step on the whole batch (gradients ACCUMULATED into m.params), split by rows.
  void step(const Batch& b, const StepOptions& o, StepStats& st) {
    validate_step(m_, b, o);
    const int nt = std::min(threads(), b.B);
    if (nt == 1) return multipass_step(m_, ws_[0], b, o, st);
    nt_ = nt;
    // early per-block sums only when a caller wants them and the layout has block ranges
    ready_ = (o.backward && o.grad_ready.fn && !ranges_.empty()) ? o.grad_ready : GradReady{};
    const long total = count_targets(b, 0, b.B);
    for (int i = 0; i < nt; ++i) {
      share_[i].cut(b, o, share_first_row(b.B, nt, i), share_rows(b.B, nt, i), total);
      if (o.rng) rng_[i] = *o.rng, share_[i].opt.rng = &rng_[i];
      share_[i].opt.grad_ready = ready_.fn ? GradReady{i == 0 ? &ParallelStepper::lead_ready : &ParallelStepper::worker_ready, this} : GradReady{};
    }
    if (ready_.fn) {
      for (int l = 0; l < m_.L; ++l) layer_done_[l].store(0, std::memory_order_relaxed);
      std::fill(added_.begin(), added_.end(), 0);
      failed_.store(false);
    }
    if (o.backward)  // the other threads start from zero gradients
      for (int i = 1; i < nt; ++i) std::fill(grads_[i].begin(), grads_[i].end(), T(0));
    pool_.run(nt, &ParallelStepper::work, this);
    if (o.rng) *o.rng = rng_[0];  // every share consumed the same draws
    // gradients: master += the other threads' (but the blocks thread 0 has added already)
    if (o.backward) {
      std::size_t lo = 0;
      if (ready_.fn)
        for (int l = 0; l < m_.L; ++l)
          if (added_[l]) add_others(lo, ranges_[l].first), lo = ranges_[l].second;
      add_others(lo, m_.params.size());
    }
    // statistics: each pass's mean loss over all targets; diagnostics averaged over shares by rows
    st.reset(o.K);
    for (int i = 0; i < nt; ++i) add_share_stats(st, st_[i], share_[i]);
    finish_share_stats(st, st_[0].weight);
  }

 private:
  void add_others(std::size_t lo, std::size_t hi) {
    if (hi <= lo) return;
    const auto n = Eigen::Index(hi - lo);
    for (int i = 1; i < nt_; ++i) vec(m_.params.grads() + lo, n) += cvec(grads_[i].data() + lo, n);
  }
  // threads > 0: block l is done in this thread's buffer
  static void worker_ready(void* self, int l) { static_cast<ParallelStepper*>(self)->layer_done_[l].fetch_add(1, std::memory_order_release); }
  // thread 0: once every thread is done with block l, add their block-l gradients and hand l on
  static void lead_ready(void* self, int l) {
    auto* s = static_cast<ParallelStepper*>(self);
    while (s->layer_done_[l].load(std::memory_order_acquire) < s->nt_ - 1) {
      if (s->failed_.load(std::memory_order_acquire)) return;  // the pool rethrows that thread's error
      std::this_thread::yield();
    }
    s->add_others(s->ranges_[l].first, s->ranges_[l].second);
    s->added_[l] = 1;
    s->ready_(l);
  }
  static void work(void* self, int i) {
    auto* s = static_cast<ParallelStepper*>(self);
    CpuBackend<T> be;
    Weights<T> w = s->m_.weights();
    if (i > 0) w.grad = s->grads_[i].data();
    try {
      multipass_step(be, s->m_, w, s->ws_[i], s->share_[i].batch, s->share_[i].opt, s->st_[i]);
    } catch (...) {
      s->failed_.store(true, std::memory_order_release);
      throw;
    }
  }

  M& m_;
  std::vector<AlignedVector<T>> grads_;  // per thread > 0: its gradients
  std::vector<Workspace<M>> ws_;
  std::vector<StepStats> st_;
  std::vector<BatchShare> share_;
  std::vector<Rng> rng_;
  std::vector<std::pair<std::size_t, std::size_t>> ranges_;  // block_param_ranges (empty: no early sums)
  std::unique_ptr<std::atomic<int>[]> layer_done_;           // (L) threads > 0 done with block l
  std::vector<char> added_;                                  // (L) thread 0 has added block l
  std::atomic<bool> failed_{false};
  GradReady ready_;
  int nt_ = 1;
  WorkerPool pool_;
};

}  // namespace fbt
