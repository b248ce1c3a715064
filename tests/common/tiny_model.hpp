// tests/common/tiny_model.hpp: small random configurations and batches for the model tests.
#pragma once

#include <vector>

#include "fbt/model/multipass.hpp"
#include "gradcheck.hpp"

namespace fbt_test {

/// A tiny Qwen3-style config: D 8, L 2, 2 heads sharing 1 kv head (GQA), head_dim 4, SwiGLU 12, V 11.
inline fbt::ModelConfig tiny_config(const std::string& fuser = "glu") {
  fbt::ModelConfig c;
  c.vocab_size = 11, c.hidden_size = 8, c.num_hidden_layers = 2, c.num_attention_heads = 2, c.num_key_value_heads = 1;
  c.intermediate_size = 12, c.max_position_embeddings = 64, c.fuser = fuser;
  return c;
}

/// The paper's model-side recipe (spec section 10) on a config: no N_in on pass 1, one N_in also serving as
/// the gate norm, its gain started at the embeddings' scale, sandwich block norms.
inline fbt::ModelConfig paper_norms(fbt::ModelConfig c) {
  c.input_norm = "feedback_passes", c.gate_norm = c.fuser == "none" ? "separate" : "shared", c.in_norm_init = "embedding";
  c.block_norm = "sandwich";
  return c;
}

/// Moves every parameter away from its init (gains 1 + N(0, 0.2^2), others N(0, 0.3^2)), so that no
/// gradient is accidentally zero or symmetric (W_s = 0, W_U = I, gains = 1 at init).
template <class M> void randomize(M& m, std::uint64_t seed) {
  using T = typename M::Scalar;
  fbt::Rng rng(seed);
  for (const auto& s : m.params.specs()) {
    T* p = m.params.values() + s.offset;
    for (std::size_t i = 0; i < s.size; ++i) p[i] = T(s.shape.size() == 1 ? 1.0 + 0.2 * rng.normal() : 0.3 * rng.normal());
  }
}

struct TinyBatch {
  int B, T;
  std::vector<int> tokens, targets;
  std::vector<std::uint8_t> doc_start;
  fbt::Batch batch(bool docs = false) const {
    return fbt::Batch{B, T, tokens.data(), targets.data(), docs ? doc_start.data() : nullptr};
  }
};

inline TinyBatch tiny_batch(int B, int T, int V, std::uint64_t seed) {
  fbt::Rng rng(seed);
  TinyBatch b{B, T, {}, {}, {}};
  for (int i = 0; i < B * T; ++i) b.tokens.push_back(int(rng.below(V))), b.targets.push_back(int(rng.below(V)));
  b.doc_start.assign(std::size_t(B) * T, 0);
  return b;
}

}  // namespace fbt_test
