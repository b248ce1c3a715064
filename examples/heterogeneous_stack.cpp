// examples/heterogeneous_stack.cpp: a stack of blocks that differ in MLP width and head counts.
//
//   build/examples/heterogeneous_stack
//
// Each block is built from its own LayerSpec (its heads, KV heads, MLP width), never from a whole-model
// config, so a stack may taper, widen or mix attention shapes. The K-pass step, the KV-cache decoder
// (whose per-sequence cache holds each layer at its own width) and the checkpoint all follow. Checks:
//   1. the K = 3 chain's backward against central finite differences in double (every tensor);
//   2. KV-cached decoding against the parallel forward: standard decoding, teacher-forced, equals pass
//      1 at every position; the fused(2) prefill equals pass 3 at the prompt's last position;
//   3. greedy decoding in every mode;
//   4. the checkpoint records the per-layer sizes, and the model it loads gives the same logits.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "fbt/fbt.hpp"

namespace {

/// The four blocks: 4/2/2/1 query heads over 2/2/1/1 KV heads, MLP widths 64, 48, 32, 16.
template <class T> std::vector<fbt::DecoderBlock<T>> tapered_blocks(int D, int max_pos) {
  const int heads[4] = {4, 2, 2, 1}, kv[4] = {2, 2, 1, 1}, mlp[4] = {64, 48, 32, 16};
  std::vector<fbt::DecoderBlock<T>> blocks;
  for (int l = 0; l < 4; ++l) {
    fbt::LayerSpec s;
    s.hidden_size = D, s.num_attention_heads = heads[l], s.num_key_value_heads = kv[l], s.head_dim = 8, s.intermediate_size = mlp[l];
    s.max_position_embeddings = max_pos, s.out_std = 0.02 / std::sqrt(8.0);
    blocks.emplace_back(s);
  }
  return blocks;
}

template <class T> fbt::Model<T> make_model(int V, int D, std::uint64_t seed) {
  fbt::ModelOptions opts;
  opts.max_position_embeddings = 64;
  return fbt::Model<T>(fbt::Embedding<T>(V, D), tapered_blocks<T>(D, 64), fbt::GluFuser<T>(fbt::FuserArgs{D}), opts, seed);
}

}  // namespace

int main() {
  using M = fbt::Model<double>;
  const int V = 40, D = 16;
  M m = make_model<double>(V, D, 1);
  fbt::perturb_parameters(m.params, 2);
  std::printf("a tapered stack: %zu parameters; KV widths", m.params.size());
  for (const auto& b : m.blocks) std::printf(" %d", b.kv_width());
  std::printf(", MLP widths");
  for (const auto& b : m.blocks) std::printf(" %d", b.layer_spec().intermediate_size);
  std::printf("\n");

  // ---- 1. gradients ---------------------------------------------------------------------------------
  fbt::Rng rng(3);
  const int B = 2, Tn = 8;
  std::vector<int> tok(B * Tn), tgt(B * Tn);
  std::vector<std::uint8_t> docs(B * Tn, 0);
  for (int i = 0; i < B * Tn; ++i) tok[i] = int(rng.below(V)), tgt[i] = int(rng.below(V));
  docs[Tn + 5] = 1;
  fbt::StepOptions o;
  o.K = 3;
  const auto rep = fbt::check_step_gradients(m, fbt::Batch{B, Tn, tok.data(), tgt.data(), docs.data()}, o);
  std::printf("\n1. K = 3 chain, backward vs central differences: worst relative error over %zu tensors %.3g (bound 1e-6)\n",
              rep.rows.size(), rep.worst());
  bool ok = rep.ok(1e-6);

  // ---- 2. KV-cached decoding against the parallel forward --------------------------------------------
  const auto logits = fbt::pass_logits(m, fbt::Batch{1, Tn, tok.data()}, 3);  // (3, T, V)
  fbt::Decoder<M> dec(m);
  std::vector<double> lg(V);
  double worst_std = 0;
  auto st = dec.new_sequence(Tn, fbt::DecodeModeSpec{});
  auto* sp = &st;
  for (int t = 0; t < Tn; ++t) {
    if (t == 0) dec.prefill(st, tok.data(), 1, lg.data());
    else dec.step(&sp, 1, &tok[t], lg.data());
    for (int v = 0; v < V; ++v) worst_std = std::max(worst_std, std::abs(lg[v] - logits[std::size_t(t) * V + v]));
  }
  auto f2 = dec.new_sequence(Tn, fbt::DecodeModeSpec::parse("fused(2)"));
  dec.prefill(f2, tok.data(), Tn, lg.data());
  double worst_f2 = 0;
  for (int v = 0; v < V; ++v) worst_f2 = std::max(worst_f2, std::abs(lg[v] - logits[(std::size_t(2) * Tn + Tn - 1) * V + v]));
  std::printf("\n2. standard decoding vs pass 1, every position: max |diff| %.2g; fused(2) prefill vs pass 3: %.2g (bound 1e-10)\n",
              worst_std, worst_f2);
  ok = ok && worst_std < 1e-10 && worst_f2 < 1e-10;

  // ---- 3. greedy decoding in every mode ----------------------------------------------------------------
  std::printf("\n3. greedy continuations of the first 4 tokens:\n");
  for (const char* mode : {"standard", "soft", "fused(1)", "fused(2)"}) {
    fbt::GenerateOptions g;
    g.mode = fbt::DecodeModeSpec::parse(mode), g.max_new_tokens = 10;
    std::printf("   %-9s", mode);
    for (int t : fbt::generate(dec, std::vector<int>(tok.begin(), tok.begin() + 4), g)) std::printf(" %d", t);
    std::printf("\n");
  }

  // ---- 4. checkpoint: the per-layer sizes are in its config ----------------------------------------
  const std::string path = (std::filesystem::temp_directory_path() / "fbt_heterogeneous.safetensors").string();
  fbt::save_model(path, m);
  const fbt::ModelConfig cfg = fbt::read_model_config(path);
  std::printf("\n4. %s: layer_intermediate_size", path.c_str());
  for (int x : cfg.layer_intermediate_size) std::printf(" %d", x);
  std::printf(", layer_num_attention_heads");
  for (int x : cfg.layer_num_attention_heads) std::printf(" %d", x);
  std::printf(", layer_num_key_value_heads");
  for (int x : cfg.layer_num_key_value_heads) std::printf(" %d", x);
  const M loaded = fbt::load_model<M>(path);  // built from those sizes by the config's builder
  const auto again = fbt::pass_logits(loaded, fbt::Batch{1, Tn, tok.data()}, 3);
  const bool same = std::memcmp(again.data(), logits.data(), logits.size() * sizeof(double)) == 0;
  std::printf("\n   the loaded model's logits (3 passes): %s\n", same ? "identical" : "DIFFER");
  ok = ok && same && cfg.layer_intermediate_size == std::vector<int>{64, 48, 32, 16};
  std::filesystem::remove(path);
  std::printf("\n%s\n", ok ? "heterogeneous_stack: all checks passed" : "heterogeneous_stack: a check FAILED");
  return ok ? 0 : 1;
}
