// examples/feedback_from_layer.cpp: feed back the output of a middle block instead of the top state.
//
//   build/examples/feedback_from_layer
//
// The fed-back state is wherever the model's feedback tap says (ModelOptions::tap): the final norm's
// output (the default), or any block's output. Here a 4-block model feeds back block 1's output. The
// tap changes the forward (which state is shifted and fused) and the backward (the carry from pass j
// enters pass j-1's stack at block 1, not at the top) and the decoder (which state a sequence keeps).
// The example checks all three:
//   1. the K = 3 chain's backward against central finite differences in double (every tensor);
//   2. exactness (spec invariant 1): with no prefix mixing, pass k of the parallel forward equals
//      token-by-token decoding with true feedback (the KV-cache decoder, soft mode, teacher-forced) at
//      the first k positions, and the later positions differ until more passes are run;
//   3. the tap is recorded in the model's config (feedback_source "layer", feedback_layer 1).
// The model is composed from its parts, as a program of your own would.
#include <cmath>
#include <cstdio>

#include "fbt/fbt.hpp"

int main() {
  using T = double;  // the checks need double; the same code runs in float
  using M = fbt::Model<T>;  // GluFuser, DecoderBlock
  const int V = 40, D = 16, L = 4;

  // ---- compose: embedding, four blocks, the GLU fuser, and the tap at block 1 -----------------------
  fbt::LayerSpec s;
  s.hidden_size = D, s.num_attention_heads = 2, s.num_key_value_heads = 1, s.head_dim = 8, s.intermediate_size = 32;
  s.max_position_embeddings = 64, s.out_std = 0.02 / std::sqrt(2.0 * L);
  std::vector<fbt::DecoderBlock<T>> blocks(L, fbt::DecoderBlock<T>(s));
  fbt::ModelOptions opts;
  opts.tap = fbt::FeedbackTap::layer_output(1);  // block 1's output (0-based) is the fed-back state
  opts.max_position_embeddings = 64;
  M m(fbt::Embedding<T>(V, D), blocks, fbt::GluFuser<T>(fbt::FuserArgs{D}), opts, /*seed=*/1);
  fbt::perturb_parameters(m.params, 2);  // away from the init (W_U = I, gains 1) for the checks
  std::printf("a %d-block model, %zu parameters, feeding back block %d's output\n", L, m.params.size(), m.opts.tap.layer);

  // ---- 1. gradients of the K = 3 chain -------------------------------------------------------------
  fbt::Rng rng(3);
  const int B = 2, Tn = 8;
  std::vector<int> tok(B * Tn), tgt(B * Tn), prefix(3 * B, 0);
  for (int i = 0; i < B * Tn; ++i) tok[i] = int(rng.below(V)), tgt[i] = int(rng.below(V));
  prefix[B + 1] = prefix[2 * B + 1] = 3;  // row 1 keeps 3 plain positions in the fed-back passes
  fbt::StepOptions o;
  o.K = 3, o.prefix = prefix.data();
  const auto rep = fbt::check_step_gradients(m, fbt::Batch{B, Tn, tok.data(), tgt.data()}, o);
  std::printf("\n1. K = 3 chain, backward vs central differences: worst relative error over %zu tensors %.3g (bound 1e-6)\n",
              rep.rows.size(), rep.worst());
  bool ok = rep.ok(1e-6);

  // ---- 2. the parallel passes against the decoder ---------------------------------------------------
  const int K = 4;
  const auto logits = fbt::pass_logits(m, fbt::Batch{1, Tn, tok.data()}, K);  // (K, T, V), row 0 of the batch
  fbt::Decoder<M> dec(m);
  auto seq = dec.new_sequence(Tn, fbt::DecodeModeSpec::parse("soft"));
  std::vector<std::vector<T>> dlog(Tn, std::vector<T>(V));
  dec.prefill(seq, tok.data(), 1, dlog[0].data());
  auto* sp = &seq;
  for (int t = 1; t < Tn; ++t) dec.step(&sp, 1, &tok[t], dlog[t].data());  // teacher-forced, true feedback
  std::printf("\n2. max |logit difference| between pass k and soft decoding, by position (exact up to k):\n   pass ");
  for (int t = 0; t < Tn; ++t) std::printf("%8d", t + 1);
  std::printf("\n");
  for (int k = 1; k <= K; ++k) {
    std::printf("   %4d ", k);
    for (int t = 0; t < Tn; ++t) {
      double d = 0;
      for (int v = 0; v < V; ++v) d = std::max(d, std::abs(logits[(std::size_t(k - 1) * Tn + t) * V + v] - dlog[t][v]));
      std::printf("%8.1e", d);
      if (t + 1 <= k) ok = ok && d < 1e-10;  // exact where the spec says so
      if (t + 1 == k + 1) ok = ok && d > 1e-8;  // and not yet one position later
    }
    std::printf("\n");
  }

  // ---- 3. the checkpoint's config says where the tap is ---------------------------------------------
  std::printf("\n3. config: feedback_source \"%s\", feedback_layer %d\n", m.cfg.feedback_source.c_str(), m.cfg.feedback_layer);
  ok = ok && m.cfg.feedback_source == "layer" && m.cfg.feedback_layer == 1;
  std::printf("\n%s\n", ok ? "feedback_from_layer: all checks passed" : "feedback_from_layer: a check FAILED");
  return ok ? 0 : 1;
}
