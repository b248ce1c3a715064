// fbt/layers/block.hpp: one pre-norm decoder block, templated on its attention and MLP (spec section 1;
// nanoGPT's Block).
//
//   mid = x + Attn(RMSNorm_1(x)),   out = mid + Mlp(RMSNorm_2(mid))
// Backward runs the residual stream in place: on entry dx holds d out, on exit d x.
// Parameters (under model.layers.{i}.): input_layernorm.weight, self_attn.*, post_attention_layernorm.weight,
// mlp.*. A block is built from its own sizes (a LayerSpec, or its attention's and MLP's specs), never
// from the whole-model config, so the blocks of one stack may differ in width and heads.
#pragma once

#include <utility>

#include "attention.hpp"
#include "mlp.hpp"

namespace fbt {

/// \brief The sizes of one decoder layer, as a model config records them (model/config.hpp): what the
/// builder makes a block from and what a block reports back for the checkpoint.
struct LayerSpec {
  int hidden_size = 0;
  int num_attention_heads = 0;
  int num_key_value_heads = 0;
  int head_dim = 0;
  int intermediate_size = 0;
  bool qk_norm = true;
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  int max_position_embeddings = 4096;
  double init_std = 0.02;  ///< projections
  double out_std = 0.02;   ///< o_proj and down_proj (the model passes std / sqrt(2L))

  AttentionSpec attention() const {
    return AttentionSpec{hidden_size, num_attention_heads, num_key_value_heads, head_dim, qk_norm, rms_norm_eps, rope_theta,
                         max_position_embeddings, init_std, out_std};
  }
  MlpSpec mlp() const { return MlpSpec{hidden_size, intermediate_size, init_std, out_std}; }
};

template <class Attn, class Mlp> struct PreNormBlock {
  using Scalar = typename Attn::Scalar;
  using T = Scalar;
  static_assert(std::is_same<typename Mlp::Scalar, T>::value, "PreNormBlock: attention and MLP must have the same scalar type");
  int D = 0;
  RMSNorm<T> norm1, norm2;  // input_layernorm, post_attention_layernorm
  Attn attn;
  Mlp mlp;

  struct Cache {
    T *ln1, *r1;   // (N, D), (N)  input_layernorm output (a temporary, recomputed by backward) and rstd
    T* mid;        // (N, D)  residual after attention
    T *ln2, *r2;   // (N, D), (N)  likewise for post_attention_layernorm
    T* dln;        // (N, D)  backward's scratch: gradient w.r.t. a norm output (temporary; null without grad)
    typename Attn::Cache attn;
    typename Mlp::Cache mlp;
  };
  struct DecodeCache {
    T *ln, *rstd;  // (R, D), (R)
    typename Attn::DecodeCache attn;
    typename Mlp::DecodeCache mlp;
  };

  PreNormBlock() = default;
  PreNormBlock(const typename Attn::Spec& a, const typename Mlp::Spec& m, double rms_norm_eps)
      : D(a.hidden_size), norm1(a.hidden_size, rms_norm_eps), norm2(a.hidden_size, rms_norm_eps), attn(a), mlp(m) {
    FBT_ASSERT(a.hidden_size == m.hidden_size, "PreNormBlock: attention and MLP widths differ");
  }
  /// From the sizes a config records (the standard attention and MLP).
  explicit PreNormBlock(const LayerSpec& s) : PreNormBlock(s.attention(), s.mlp(), s.rms_norm_eps) {}

  /// The sizes of this block as a config records them (needs the standard attention and MLP specs).
  LayerSpec layer_spec() const {
    const AttentionSpec& a = attn.spec;
    return LayerSpec{D, a.num_heads, a.num_kv_heads, a.head_dim, mlp.spec.intermediate_size, a.qk_norm, a.rms_norm_eps, a.rope_theta,
                     a.max_positions, a.init_std, a.out_std};
  }
  int kv_width() const { return attn.kv_width(); }

  void declare(const ParamRegistry<T>& r) {
    norm1.declare(r.scope("input_layernorm"));
    attn.declare(r.scope("self_attn"));
    norm2.declare(r.scope("post_attention_layernorm"));
    mlp.declare(r.scope("mlp"));
  }
  /// With grad, the norm outputs (and the MLP's product) are temporaries that backward recomputes;
  /// without, everything but what a prefill commits is.
  template <class Be> void alloc(const Be& be, Carver<T>& keep, Carver<T>& temp, Cache& c, int B, int Tn, bool grad) const {
    const std::size_t N = std::size_t(B) * Tn;
    Carver<T>& a = grad ? keep : temp;
    c.ln1 = temp.take(N * D), c.ln2 = temp.take(N * D);
    c.r1 = a.take(N), c.mid = a.take(N * D), c.r2 = a.take(N);
    c.dln = grad ? temp.take(N * D) : nullptr;
    attn.alloc(be, keep, temp, c.attn, B, Tn, grad);
    mlp.alloc(be, keep, temp, c.mlp, B, Tn, grad);
  }
  template <class Be> void alloc_decode(const Be& be, Carver<T>& a, DecodeCache& c, int R) const {
    c.ln = a.take(std::size_t(R) * D), c.rstd = a.take(R);
    attn.alloc_decode(be, a, c.attn, R);
    mlp.alloc_decode(be, a, c.mlp, R);
  }

  /// \brief out (N, D) = block(x (N, D)); out must not alias x (backward needs x).
  template <class Be> void forward(Be& be, const Weights<T>& w, Cache& c, const T* x, T* out, const PassShape& s) const {
    const int N = s.N();
    const std::size_t ND = std::size_t(N) * D;
    norm1.forward(be, w, c.ln1, c.r1, x, N);
    be.copy(c.mid, x, ND);
    attn.forward(be, w, c.attn, c.ln1, c.mid, s);
    norm2.forward(be, w, c.ln2, c.r2, c.mid, N);
    be.copy(out, c.mid, ND);
    mlp.forward(be, w, c.mlp, c.ln2, out, s);
  }

  /// \brief dx (N, D): d out on entry, d x on exit (in place). x is the block input of the same forward.
  template <class Be> void backward(Be& be, const Weights<T>& w, const Cache& c, T* dx, const T* x, const PassShape& s) const {
    const int N = s.N();
    const std::size_t ND = std::size_t(N) * D;
    // MLP branch: d mid = d out + RMSNorm_2^T (mlp^T d out)   (ln2 recomputed: it is not kept per layer)
    norm2.forward(be, w, c.ln2, c.r2, c.mid, N);
    be.zero(c.dln, ND);
    mlp.backward(be, w, c.mlp, dx, c.dln, c.ln2, s);
    norm2.backward(be, w, dx, c.dln, c.mid, c.r2, N);
    // attention branch: d x = d mid + RMSNorm_1^T (attn^T d mid)   (ln1 recomputed likewise)
    norm1.forward(be, w, c.ln1, c.r1, x, N);
    be.zero(c.dln, ND);
    attn.backward(be, w, c.attn, dx, c.dln, c.ln1, s);
    norm1.backward(be, w, dx, c.dln, x, c.r1, N);
  }

  /// \brief One decoding step: x (R, D) <- block(x), each row one new position against its KV cache.
  template <class Be> void decode(Be& be, const Weights<T>& w, const DecodeCache& c, T* x, const DecodeStep<T>& st) const {
    norm1.forward(be, w, c.ln, c.rstd, x, st.R);
    attn.decode(be, w, c.attn, c.ln, x, st);
    norm2.forward(be, w, c.ln, c.rstd, x, st.R);
    mlp.decode(be, w, c.mlp, c.ln, x, st);
  }

  /// The keys and values (N, KD) a forward computed: what a prefill commits to the KV cache.
  std::pair<const T*, const T*> kv(const Cache& c) const { return attn.kv(c.attn); }
};

/// The standard decoder block: Qwen3 attention and a SwiGLU MLP.
template <class T> using DecoderBlock = PreNormBlock<CausalSelfAttention<T>, SwiGLU<T>>;

}  // namespace fbt
