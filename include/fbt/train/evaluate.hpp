// fbt/train/evaluate.hpp: the diagnostics of spec section 6.
//
//   evaluate_passes     per-pass validation losses L_1..L_K (parallel K-pass forward, no prefix, no noise)
//   sequential_loss     the sequential-exact validation loss: token-by-token recurrence through the KV-cache
//                       decoder, teacher-forced (with feedback off it equals the parallel pass-1 loss)
//   contraction_monitor on a fixed batch, fed-back passes k = 1..k_max without prefix mixing: loss L(k)
//                       and delta_k = rms(H_k - H_{k-1}), which must flatten and decay
//   pass_logits         the logits of passes 1..K of that chain (pass k = fused(k-1) prefill at every position)
//   pass_hidden_states  pass K's residual stream at chosen depths (what the probe and Python's hidden_states read)
// and the loss per position within a document (PositionSums; position 0 is a document's
// kSep) of every pass, of sequential decoding and of the data's optimum (DataSource::eval_window_optimal).
#pragma once

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <vector>

#include "../data/dataset.hpp"
#include "../decode/decoder.hpp"
#include "../model/multipass.hpp"
#include "reports.hpp"
#include "run_dir.hpp"

namespace fbt {

/// The largest position within a document that gets its own entry in a loss-by-position table.
/// \brief Thrown by the evaluation loops at a window boundary when a stop signal arrived while a run watches
/// for one (Trainer::run: detail::EvalStopWatch): a long evaluation does not hold up SIGTERM.
struct EvalInterrupted : Error {
  using Error::Error;
};
namespace detail {
/// How many runs of this process let a stop signal interrupt their evaluations.
inline std::atomic<int>& eval_stop_watchers() {
  static std::atomic<int> n{0};
  return n;
}
/// Lets a stop signal interrupt evaluations while it lives (a run's run()).
struct EvalStopWatch {
  EvalStopWatch() { ++eval_stop_watchers(); }
  ~EvalStopWatch() { --eval_stop_watchers(); }
  EvalStopWatch(const EvalStopWatch&) = delete;
  EvalStopWatch& operator=(const EvalStopWatch&) = delete;
};
/// A window boundary of an evaluation: throws EvalInterrupted when a watched stop signal arrived.
inline void eval_window_boundary() {
  if (eval_stop_watchers().load() > 0 && stop_signal().load() != 0)
    throw EvalInterrupted("evaluation interrupted by " + signal_name(stop_signal().load()) + " at a window boundary");
}
}  // namespace detail

inline constexpr int kMaxLossPositions = 256;

/// \brief Sums of a per-target loss by the target's position within its document.
///
/// A target's position is its index in its document, counted from the document's first token (its kSep:
/// position 0); in a window that starts inside a document (text data), from the window's first token.
/// Entry i < P-1 holds position i; the last entry, P-1, pools every position >= P-1. With
/// P = loss_positions(T) = min(T, kMaxLossPositions) + 1 no position is pooled while T <= 256 (a window's
/// targets are at positions 0..T), so the count-weighted mean of the entries is the overall mean.
struct PositionSums {
  std::vector<double> sum;  ///< (P) summed loss
  std::vector<long> count;  ///< (P) targets

  void reset(int P) { sum.assign(std::size_t(P), 0.0), count.assign(std::size_t(P), 0); }
  void add(int pos, double loss) {
    const std::size_t i = std::size_t(std::min(pos, int(sum.size()) - 1));
    sum[i] += loss, ++count[i];
  }
  /// (P) the mean at each position; NaN where there is no target.
  std::vector<double> mean() const {
    std::vector<double> m(sum.size(), std::numeric_limits<double>::quiet_NaN());
    for (std::size_t i = 0; i < sum.size(); ++i)
      if (count[i] > 0) m[i] = sum[i] / double(count[i]);
    return m;
  }
  /// The mean over every target (= the count-weighted mean of mean()).
  double total_mean() const {
    double s = 0;
    long c = 0;
    for (std::size_t i = 0; i < sum.size(); ++i) s += sum[i], c += count[i];
    return c > 0 ? s / double(c) : std::numeric_limits<double>::quiet_NaN();
  }
};

/// Entries of a loss-by-position table for windows of T tokens: min(T, kMaxLossPositions) + 1.
inline int loss_positions(int T) { return std::min(T, kMaxLossPositions) + 1; }

/// \brief pos (T): the position within its document of each target of one window row (see PositionSums):
/// target t is token t+1; a separator target (`sep`: kSep for bytes, -1 = none) opens a document (position 0).
inline void target_positions(const int* targets, const std::uint8_t* doc_start, int T, int* pos, int sep = kSep) {
  int start = 0;  // the window index of the current document's first token (or of the window's)
  for (int t = 0; t < T; ++t) {
    if (t == 0 || doc_start[t]) start = t;
    pos[t] = targets[t] == sep ? 0 : t + 1 - start;
  }
}

namespace detail {
/// Windows an evaluation of `max_windows` uses: all when <= 0.
inline int parallel_eval_windows(const DataSource& data, int Tn, int max_windows) {
  const int n = data.num_eval_windows(Tn);
  return max_windows > 0 ? std::min(max_windows, n) : n;
}
/// Windows a sequential evaluation of `windows` uses: all when < 0 (0 is "off" for its callers).
inline int sequential_eval_windows(const DataSource& data, int Tn, int windows) {
  const int n = data.num_eval_windows(Tn);
  return windows < 0 ? n : std::min(windows, n);
}
}  // namespace detail

/// \brief Mean validation loss of each of K passes over the first `max_windows` validation windows
/// (all when <= 0), evaluated B windows at a time. Returns (K) losses. Pass k is the fed-back chain of
/// multipass_step without prefix mixing or noise: fused(k-1) prefill at every position. With
/// `by_position`, also fills (K) PositionSums of each pass's losses (P = loss_positions(Tn)). With
/// `window_loss`, also fills (K, windows) each window's mean loss per pass (NaN for a window without a
/// target): the pairs a paired t-interval (stats.hpp) compares between passes or models on the same windows.
/// Runs on any backend (be, with the weights wt in its memory, e.g. a BackendModel's); the overload below
/// is the CPU's, with the model's own weights.
template <class M, class Be>
std::vector<double> evaluate_passes(Be& be, const M& m, const Weights<typename M::Scalar>& wt, Workspace<M, Be>& w, const DataSource& data, int Tn,
                                    int K, int max_windows, int B = 8, std::vector<PositionSums>* by_position = nullptr,
                                    std::vector<std::vector<double>>* window_loss = nullptr) {
  using T = typename M::Scalar;
  FBT_ASSERT(K >= 1 && (K == 1 || m.feedback()), "evaluate: K = " + std::to_string(K) + " (a baseline has 1 pass)");
  const int nw = detail::parallel_eval_windows(data, Tn, max_windows);
  FBT_ASSERT(nw > 0, "evaluate: the validation split has no window of " + std::to_string(Tn + 1) + " tokens");
  std::vector<double> sum(std::size_t(K), 0.0);
  long count = 0;
  if (by_position) {
    by_position->assign(std::size_t(K), PositionSums{});
    for (auto& p : *by_position) p.reset(loss_positions(Tn));
  }
  if (window_loss) window_loss->assign(std::size_t(K), std::vector<double>(std::size_t(nw), std::numeric_limits<double>::quiet_NaN()));
  std::vector<int> tok, tgt, rt, rg, pos;
  std::vector<std::uint8_t> ds, rd;
  std::vector<T> losses;  // (nb * Tn) this pass's per-target losses, on the host
  PassRunner<M, Be> run(be, m, wt, w);
  for (int w0 = 0; w0 < nw; w0 += B) {
    detail::eval_window_boundary();
    const int nb = std::min(B, nw - w0);
    tok.clear(), tgt.clear(), ds.clear();
    for (int i = 0; i < nb; ++i) {
      data.eval_window(w0 + i, Tn, rt, rg, rd);
      tok.insert(tok.end(), rt.begin(), rt.end()), tgt.insert(tgt.end(), rg.begin(), rg.end()), ds.insert(ds.end(), rd.begin(), rd.end());
    }
    pos.resize(tgt.size());
    for (int i = 0; i < nb; ++i) target_positions(tgt.data() + std::size_t(i) * Tn, ds.data() + std::size_t(i) * Tn, Tn, pos.data() + std::size_t(i) * Tn, data.doc_sep());
    run.prepare(nb, Tn, 1, false);
    run.begin_batch(tok.data(), ds.data(), tgt.data());
    run.forward_chain(K, [&](int j, PassCache<M>& p) {
      const auto [s, c] = run.head_forward(p, 0.0);  // per-target losses in w.losses (0 where there is no target)
      if (!std::isfinite(s)) throw Error("evaluate: non-finite loss (" + std::to_string(s) + ") in pass " + std::to_string(j + 1) + " of " + std::to_string(K));
      sum[std::size_t(j)] += s;
      if (j == 0) count += c;
      if (by_position) {
        losses.resize(tgt.size());
        be.download(losses.data(), w.losses, tgt.size());
        for (std::size_t n = 0; n < tgt.size(); ++n)
          if (tgt[n] >= 0) (*by_position)[std::size_t(j)].add(pos[n], double(losses[n]));
      }
      if (window_loss) {
        losses.resize(tgt.size());
        be.download(losses.data(), w.losses, tgt.size());
        for (int i = 0; i < nb; ++i) {  // row i of the batch is window w0 + i
          double ws = 0;
          long wc = 0;
          for (std::size_t n = std::size_t(i) * Tn; n < std::size_t(i + 1) * Tn; ++n)
            if (tgt[n] >= 0) ws += double(losses[n]), ++wc;
          if (wc > 0) (*window_loss)[std::size_t(j)][std::size_t(w0 + i)] = ws / double(wc);
        }
      }
    });
  }
  for (auto& s : sum) s /= double(count);
  return sum;
}
template <class M>
std::vector<double> evaluate_passes(M& m, Workspace<M>& w, const DataSource& data, int Tn, int K, int max_windows, int B = 8,
                                    std::vector<PositionSums>* by_position = nullptr, std::vector<std::vector<double>>* window_loss = nullptr) {
  CpuBackend<typename M::Scalar> be;
  return evaluate_passes(be, m, m.weights(), w, data, Tn, K, max_windows, B, by_position, window_loss);
}

/// \brief Mean CE of token-by-token decoding (teacher-forced) over the first `windows` validation windows
/// (all when < 0), in the given mode (soft: true feedback at every position but each document's first;
/// standard: none). With `by_position`, also fills the losses by position (P = loss_positions(Tn)).
/// Cost: one decoder step per target (about 0.05 ms for the default model on one core).
template <class M, class Be>
double sequential_loss(Decoder<M, Be>& dec, const DataSource& data, int Tn, int windows, DecodeModeSpec mode,
                       PositionSums* by_position = nullptr) {
  using T = typename M::Scalar;
  const int V = dec.model().V;
  FBT_ASSERT(windows != 0, "sequential_loss: windows must be > 0, or < 0 for all");
  const int nw = detail::sequential_eval_windows(data, Tn, windows);
  FBT_ASSERT(nw > 0, "sequential_loss: the validation split has no window of " + std::to_string(Tn + 1) + " tokens");
  std::vector<int> tok, tgt, pos(static_cast<std::size_t>(Tn));
  std::vector<std::uint8_t> ds;
  std::vector<T> logits(V);
  if (by_position) by_position->reset(loss_positions(Tn));
  double sum = 0;
  long count = 0;
  auto ce = [&](int t) {
    const int target = tgt[std::size_t(t)];
    if (target < 0) return;
    double mx = -INFINITY;
    for (int v = 0; v < V; ++v) mx = std::max(mx, double(logits[v]));
    double z = 0;
    for (int v = 0; v < V; ++v) z += std::exp(double(logits[v]) - mx);
    const double l = mx + std::log(z) - double(logits[target]);
    sum += l;
    ++count;
    if (by_position) by_position->add(pos[std::size_t(t)], l);
  };
  for (int i = 0; i < nw; ++i) {
    detail::eval_window_boundary();
    data.eval_window(i, Tn, tok, tgt, ds);
    target_positions(tgt.data(), ds.data(), Tn, pos.data(), data.doc_sep());
    auto s = dec.new_sequence(Tn, mode);
    dec.prefill(s, tok.data(), 1, logits.data());
    ce(0);
    auto* sp = &s;
    for (int t = 1; t < Tn; ++t) {
      dec.step(&sp, 1, &tok[t], logits.data());
      ce(t);
    }
  }
  return sum / double(count);
}

/// \brief The data's optimal loss of the first n validation windows' targets by position (P =
/// loss_positions(Tn)); false (and `out` empty) when the data has no known optimum.
inline bool optimal_by_position(const DataSource& data, int Tn, int n, PositionSums& out) {
  std::vector<int> tok, tgt, pos(static_cast<std::size_t>(Tn));
  std::vector<std::uint8_t> ds;
  std::vector<double> opt;
  out.reset(loss_positions(Tn));
  for (int i = 0; i < n; ++i) {
    if (!data.eval_window_optimal(i, Tn, opt)) {
      out.reset(0);
      return false;
    }
    data.eval_window(i, Tn, tok, tgt, ds);
    target_positions(tgt.data(), ds.data(), Tn, pos.data(), data.doc_sep());
    for (int t = 0; t < Tn; ++t)
      if (tgt[std::size_t(t)] >= 0) out.add(pos[std::size_t(t)], opt[std::size_t(t)]);
  }
  return true;
}

/// \brief The contraction monitor on one fixed batch: k_max passes of the fed-back chain (no prefix
/// mixing, no noise), the loss of each and the rms change of the final-norm states between passes.
/// Runs on any backend (be, with the weights wt in its memory); the overload below is the CPU's.
template <class M, class Be>
ContractionCurve contraction_monitor(Be& be, const M& m, const Weights<typename M::Scalar>& wt, Workspace<M, Be>& w, const Batch& b, int k_max) {
  using T = typename M::Scalar;
  FBT_ASSERT(k_max >= 1, "contraction_monitor: k_max must be >= 1");
  FBT_ASSERT(k_max == 1 || m.feedback(), "contraction_monitor needs a feedback fuser");
  const std::size_t ND = std::size_t(b.B) * b.T * m.D;
  PassRunner<M, Be> run(be, m, wt, w);
  run.prepare(b.B, b.T, 1, false);
  run.begin_batch(b.tokens, b.doc_start, b.targets);
  ContractionCurve c;
  std::vector<T> prev(ND), hf(ND);  // (B*T, D) the previous and this pass's final-norm states, on the host
  run.forward_chain(k_max, [&](int k, PassCache<M>& p) {
    be.download(hf.data(), p.hf, ND);
    double d2 = 0;
    if (k > 0)
      for (std::size_t i = 0; i < ND; ++i) d2 += double(hf[i] - prev[i]) * double(hf[i] - prev[i]);
    std::swap(prev, hf);
    const auto [sum, cnt] = run.head_forward(p, 0.0);
    c.loss.push_back(cnt ? sum / double(cnt) : 0.0);
    c.delta.push_back(std::sqrt(d2 / double(ND)));
  });
  return c;
}
template <class M> ContractionCurve contraction_monitor(M& m, Workspace<M>& w, const Batch& b, int k_max) {
  CpuBackend<typename M::Scalar> be;
  return contraction_monitor(be, m, m.weights(), w, b, k_max);
}

/// \brief Logits (K, B*T, V) of passes 1..K of the fed-back chain on a batch (no prefix mixing, no noise:
/// pass k is the fused(k-1) prefill at every position; targets are not needed). prefix (B, host), when given:
/// row b's positions t < prefix[b] stay plain in every fed-back pass (a fixed prefix, spec invariant 1).
/// \brief Pass K's states at each depth of `depths` (the chain of pass_logits): out (depths.size(), B*T, D).
/// Depth 0 = the layer-0 input (after the fuser and N_in), l in 1..L = block l-1's output, L + 1 = the final
/// norm's output. be and w are the caller's, so a loop of calls reuses one workspace.
template <class M>
void pass_hidden_states(typename M::Scalar* out, CpuBackend<typename M::Scalar>& be, Workspace<M>& w, const M& m, const Batch& b, int K,
                        const std::vector<int>& depths, const int* prefix = nullptr) {
  FBT_ASSERT(K >= 1 && (K == 1 || m.feedback()), "pass_hidden_states: K = " + std::to_string(K) + " (a baseline has 1 pass)");
  for (int d : depths) FBT_ASSERT(d >= 0 && d <= m.L + 1, "pass_hidden_states: depth " + std::to_string(d) + " outside [0, L + 1]");
  const std::size_t ND = std::size_t(b.B) * b.T * m.D;
  PassRunner<M> run(be, m, m.weights(), w);
  run.prepare(b.B, b.T, 1, true);  // a gradient workspace keeps every depth's residual stream
  run.begin_batch(b.tokens, b.doc_start, nullptr);
  run.forward_chain(
      K,
      [&](int j, PassCache<M>& p) {
        if (j + 1 < K) return;
        for (std::size_t i = 0; i < depths.size(); ++i) {
          const auto* src = depths[i] <= m.L ? p.res[depths[i]] : p.hf;
          std::copy(src, src + ND, out + i * ND);
        }
      },
      prefix);
}

template <class M> std::vector<typename M::Scalar> pass_logits(const M& m, const Batch& b, int K, const int* prefix = nullptr) {
  using T = typename M::Scalar;
  FBT_ASSERT(K >= 1 && (K == 1 || m.feedback()), "pass_logits: K = " + std::to_string(K) + " (a baseline has 1 pass)");
  const std::size_t NV = std::size_t(b.B) * b.T * m.V;
  std::vector<T> out(std::size_t(K) * NV);
  CpuBackend<T> be;
  Workspace<M> w;
  PassRunner<M> run(be, m, m.weights(), w);
  run.prepare(b.B, b.T, 1, false);
  run.begin_batch(b.tokens, b.doc_start, nullptr);
  run.forward_chain(
      K, [&](int j, PassCache<M>& p) { linear(be, out.data() + std::size_t(j) * NV, p.hf, m.params.values() + m.head_offset(), b.B * b.T, m.V, m.D, m.D, false); },
      prefix);
  return out;
}

}  // namespace fbt
