// fbt/decode/score.hpp: the log-likelihood of a continuation under a decoding mode, batched on the decoder
// (what an evaluation harness's loglikelihood request asks: lm-evaluation-harness through python/fbt/lm_eval.py).
//
//   log p(c | x) = sum_i log_softmax(logits_i)[c_i]    logits_0: after prefilling the context x in the mode's
//                                                       prefill; logits_i (i >= 1): after the decoding step
//                                                       that fed c_{i-1}
// Each continuation token is fed as a decoding step, so the mode's policy decides the feedback exactly as when
// the model generates those tokens: in soft mode every continuation position is fused with the previous
// position's state. greedy: every c_i is the argmax of its logits (the lowest id among ties, as greedy
// decoding picks). Requests are scored `batch` at a time: each sequence prefilled alone, then one batched
// step per continuation position for the sequences still scoring.
#pragma once

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "decoder.hpp"
#include "sampling.hpp"

namespace fbt {

/// One loglikelihood request: the context (prefilled) and the continuation (scored), token ids.
struct ScoreRequest {
  std::vector<int> context;       ///< (P) >= 1 token
  std::vector<int> continuation;  ///< (C) >= 1 token
};

struct ScoreResult {
  double logprob = 0.0;                ///< sum over the continuation of log p(c_i | ...)
  bool greedy = true;                  ///< every c_i is its position's argmax
  std::vector<double> token_logprobs;  ///< (C) each token's log p
};

/// \brief Scores each request in `mode` (see the file's comment). Refuses, naming the request: an empty context or
/// continuation, a token outside the vocabulary, context + continuation - 1 positions beyond max_position_embeddings.
/// between, when set, runs after every batched step (a caller's interrupt check; it may throw).
template <class M, class Be>
std::vector<ScoreResult> score_continuations(Decoder<M, Be>& dec, const std::vector<ScoreRequest>& reqs, const DecodeModeSpec& mode, int batch = 16,
                                             const std::function<void()>& between = {}) {
  using T = typename M::Scalar;
  using Seq = typename Decoder<M, Be>::Seq;
  const int V = dec.model().V, maxpos = dec.model().opts.max_position_embeddings;
  if (batch < 1) throw Error("score: batch must be >= 1, got " + std::to_string(batch));
  for (std::size_t i = 0; i < reqs.size(); ++i) {
    const std::string who = "score: request " + std::to_string(i) + ": ";
    const auto& r = reqs[i];
    if (r.context.empty()) throw Error(who + "an empty context (at least one token: a document's separator, for example)");
    if (r.continuation.empty()) throw Error(who + "an empty continuation");
    for (const auto* v : {&r.context, &r.continuation})
      for (int t : *v)
        if (t < 0 || t >= V) throw Error(who + "token " + std::to_string(t) + " is outside the vocabulary [0, " + std::to_string(V) + ")");
    const long long need = static_cast<long long>(r.context.size()) + static_cast<long long>(r.continuation.size()) - 1;
    if (need > maxpos)
      throw Error(who + std::to_string(r.context.size()) + " context + " + std::to_string(r.continuation.size()) + " continuation tokens need " +
                  std::to_string(need) + " positions, more than max_position_embeddings (" + std::to_string(maxpos) + ")");
  }
  std::vector<ScoreResult> out(reqs.size());
  auto add = [&](std::size_t i, std::size_t j, const T* lg) {  // log_softmax(lg)[c_j] in double, and whether it is the argmax
    double mx = -INFINITY;
    for (int v = 0; v < V; ++v) mx = std::max(mx, double(lg[v]));
    double sum = 0;
    for (int v = 0; v < V; ++v) sum += std::exp(double(lg[v]) - mx);
    const int c = reqs[i].continuation[j];
    const double lp = double(lg[c]) - mx - std::log(sum);
    out[i].token_logprobs.push_back(lp);
    out[i].logprob += lp;
    out[i].greedy = out[i].greedy && argmax_token(lg, V) == c;
  };
  for (std::size_t b0 = 0; b0 < reqs.size(); b0 += std::size_t(batch)) {
    const std::size_t b1 = std::min(reqs.size(), b0 + std::size_t(batch)), n = b1 - b0;
    std::vector<Seq> seqs;
    seqs.reserve(n);
    std::vector<T> first(n * std::size_t(V)), lg(n * std::size_t(V));  // (n, V) the prefills' logits, (R, V) a step's
    for (std::size_t i = b0; i < b1; ++i) {
      const auto& r = reqs[i];
      seqs.push_back(dec.new_sequence(int(r.context.size() + r.continuation.size() - 1), mode));
      dec.prefill(seqs.back(), r.context.data(), int(r.context.size()), first.data() + (i - b0) * V);
    }
    std::vector<std::size_t> active;  // request indices (from b0) still scoring, in the order of the last logits' rows
    for (std::size_t k = 0; k < n; ++k) {
      add(b0 + k, 0, first.data() + k * V);
      if (reqs[b0 + k].continuation.size() > 1) active.push_back(k);
    }
    std::vector<Seq*> rows;
    std::vector<int> toks;
    for (std::size_t j = 1; !active.empty(); ++j) {  // feed c_{j-1}, score c_j
      rows.clear(), toks.clear();
      for (std::size_t k : active) rows.push_back(&seqs[k]), toks.push_back(reqs[b0 + k].continuation[j - 1]);
      dec.step(rows.data(), int(rows.size()), toks.data(), lg.data());
      std::vector<std::size_t> still;
      for (std::size_t r = 0; r < active.size(); ++r) {
        add(b0 + active[r], j, lg.data() + r * V);
        if (reqs[b0 + active[r]].continuation.size() > j + 1) still.push_back(active[r]);
      }
      active.swap(still);
      if (between) between();
    }
  }
  return out;
}

}  // namespace fbt
