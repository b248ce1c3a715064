// fbt/decode/precision_check.hpp: how often decoding in bf16 picks the same greedy token as fp32.
//
// Two measures over the same token windows, each decoded token by token with the KV cache in a given mode
// (standard, soft, fused(k)), once with fp32 products and once with bf16 products (ops/gemm_bf16.hpp):
//
//   teacher-forced: both decoders are fed the window's own tokens; at every position the argmax of the
//     next-token logits is compared. A disagreement does not change what either decoder sees next, so each
//     position counts once: the share of positions whose greedy choice is the same.
//   free-running:  from the window's first `prompt` tokens, each precision generates `new_tokens` greedily
//     from its own choices; the share of generated positions where the two sequences hold the same token.
//     After a first disagreement the two texts usually part for good, so this is the stricter measure
//     (and `first_divergence` records where they parted, -1 when they never did).
#pragma once

#include <vector>

#include "../ops/gemm_bf16.hpp"
#include "decoder.hpp"
#include "sampling.hpp"

namespace fbt {

struct GreedyAgreement {
  long positions = 0, same = 0;                       ///< teacher-forced
  long generated = 0, generated_same = 0;             ///< free-running
  std::vector<int> first_divergence;                  ///< free-running, per window: the first differing new token, -1 if none
  double rate() const { return positions ? double(same) / double(positions) : 0.0; }
  double free_rate() const { return generated ? double(generated_same) / double(generated) : 0.0; }
};

/// \brief Greedy agreement of precision `b` against `a` (see the header comment) on `windows` (each at
/// least prompt + 1 tokens), decoding in `mode`. Restores the process's precision after.
template <class M, class Be>
GreedyAgreement greedy_agreement(Decoder<M, Be>& dec, const std::vector<std::vector<int>>& windows, DecodeModeSpec mode, Precision a,
                                 Precision b, int prompt, int new_tokens) {
  using T = typename M::Scalar;
  const int V = dec.model().V;
  GreedyAgreement g;
  std::vector<T> la(V), lb(V);
  for (const auto& w : windows) {
    const int Tn = int(w.size());
    FBT_ASSERT(Tn >= prompt + 1 && prompt >= 1, "greedy_agreement: a window needs at least prompt + 1 tokens");
    // teacher-forced: one sequence per precision, fed the window's tokens
    auto sa = dec.new_sequence(Tn, mode), sb = dec.new_sequence(Tn, mode);
    auto *pa = &sa, *pb = &sb;
    for (int t = 0; t < Tn; ++t) {
      {
        ScopedMatmulPrecision p(a);
        if (t == 0) dec.prefill(sa, w.data(), 1, la.data());
        else dec.step(&pa, 1, &w[t], la.data());
      }
      {
        ScopedMatmulPrecision p(b);
        if (t == 0) dec.prefill(sb, w.data(), 1, lb.data());
        else dec.step(&pb, 1, &w[t], lb.data());
      }
      ++g.positions;
      g.same += argmax_token(la.data(), V) == argmax_token(lb.data(), V);
    }
    // free-running from the first `prompt` tokens
    const int cap = std::min(prompt + new_tokens, dec.model().opts.max_position_embeddings);
    auto fa = dec.new_sequence(cap, mode), fb = dec.new_sequence(cap, mode);
    auto *qa = &fa, *qb = &fb;
    {
      ScopedMatmulPrecision p(a);
      dec.prefill(fa, w.data(), prompt, la.data());
    }
    {
      ScopedMatmulPrecision p(b);
      dec.prefill(fb, w.data(), prompt, lb.data());
    }
    int first = -1;
    for (int i = 0; i < cap - prompt; ++i) {
      const int ta = argmax_token(la.data(), V), tb = argmax_token(lb.data(), V);
      ++g.generated;
      g.generated_same += ta == tb;
      if (ta != tb && first < 0) first = i;
      if (i + 1 == cap - prompt) break;
      {
        ScopedMatmulPrecision p(a);
        dec.step(&qa, 1, &ta, la.data());
      }
      {
        ScopedMatmulPrecision p(b);
        dec.step(&qb, 1, &tb, lb.data());
      }
    }
    g.first_divergence.push_back(first);
  }
  return g;
}

}  // namespace fbt
