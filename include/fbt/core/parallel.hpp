// fbt/core/parallel.hpp: a minimal persistent worker pool for coarse parallelism.
//
// fbt parallelises coarsely (a training step splits its batch rows across threads, each running the whole
// K-pass forward and backward on its share; see model/parallel_step.hpp): on 2 cores, fine-grained
// per-kernel threading gains little at these sizes. The pool keeps its threads between calls, and
// run() passes a plain function pointer and context, so dispatching allocates nothing.
#pragma once

#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace fbt {

class WorkerPool {
 public:
  explicit WorkerPool(int threads) {
    for (int i = 1; i < threads; ++i) th_.emplace_back([this, i] { loop(i); });
  }
  ~WorkerPool() {
    {
      std::lock_guard<std::mutex> g(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& t : th_) t.join();
  }
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;
  int threads() const { return int(th_.size()) + 1; }

  /// \brief Runs fn(ctx, i) for i in [0, n) (n <= threads()): i = 0 on the calling thread, the rest on
  /// workers; returns when all are done, rethrowing the first exception any of them raised.
  void run(int n, void (*fn)(void*, int), void* ctx) {
    {
      std::lock_guard<std::mutex> g(mu_);
      fn_ = fn, ctx_ = ctx, n_ = n, pending_ = n - 1, err_ = nullptr;
      ++gen_;
    }
    cv_.notify_all();
    try {
      fn(ctx, 0);
    } catch (...) {
      std::lock_guard<std::mutex> g(mu_);
      if (!err_) err_ = std::current_exception();
    }
    std::unique_lock<std::mutex> lk(mu_);
    done_.wait(lk, [&] { return pending_ == 0; });
    if (err_) std::rethrow_exception(err_);
  }

 private:
  void loop(int i) {
    long seen = 0;
    for (;;) {
      std::unique_lock<std::mutex> lk(mu_);
      cv_.wait(lk, [&] { return stop_ || gen_ != seen; });
      if (stop_) return;
      seen = gen_;
      if (i >= n_) continue;
      auto fn = fn_;
      void* ctx = ctx_;
      lk.unlock();
      std::exception_ptr e;
      try {
        fn(ctx, i);
      } catch (...) {
        e = std::current_exception();
      }
      lk.lock();
      if (e && !err_) err_ = e;
      if (--pending_ == 0) done_.notify_all();
    }
  }

  std::vector<std::thread> th_;
  std::mutex mu_;
  std::condition_variable cv_, done_;
  void (*fn_)(void*, int) = nullptr;
  void* ctx_ = nullptr;
  int n_ = 0, pending_ = 0;
  long gen_ = 0;
  bool stop_ = false;
  std::exception_ptr err_;
};

}  // namespace fbt
