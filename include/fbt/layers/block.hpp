// fbt/layers/block.hpp: one pre-norm decoder block, templated on its attention and MLP (spec section 1;
// nanoGPT's Block), optionally with the paper's "sandwich" norms (spec section 10, knob block_norm).
//
//   pre:       mid = x + Attn(RMSNorm_1(x)),            out = mid + Mlp(RMSNorm_2(mid))
//   sandwich:  mid = x + RMSNorm_a(Attn(RMSNorm_1(x))),  out = mid + RMSNorm_m(Mlp(RMSNorm_2(mid)))
// ("RMS normalization is applied around each residual block", arXiv:2608.08888 App. A; the post-branch
// norms are Gemma 2's and OLMo 2's, gains initialised to 1). Backward runs the residual stream in place:
// on entry dx holds d out, on exit d x.
// Parameters (under model.layers.{i}.): input_layernorm.weight, self_attn.*, post_attention_layernorm.weight
// (the MLP's input norm, Qwen3's name), mlp.*, and with sandwich attn_output_layernorm.weight and
// mlp_output_layernorm.weight. A block is built from its own sizes (a LayerSpec, or its attention's and MLP's specs), never
// from the whole-model config, so the blocks of one stack may differ in width and heads.
#pragma once

#include <utility>

#include "../core/options.hpp"
#include "attention.hpp"
#include "contract.hpp"
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
  bool sandwich = false;   ///< block_norm sandwich: an RMSNorm on each branch's output too
  OptionValues options{};  ///< the block type's own options (block_options, resolved against its declare_options)
  int sliding_window = 0;  ///< attention window W of a sliding_attention layer (config layer_types); 0 = full attention

  AttentionSpec attention() const {
    return AttentionSpec{hidden_size, num_attention_heads, num_key_value_heads, head_dim, qk_norm, rms_norm_eps, rope_theta,
                         max_position_embeddings, init_std, out_std, sliding_window};
  }
  MlpSpec mlp() const { return MlpSpec{hidden_size, intermediate_size, init_std, out_std}; }
};

template <class Attn, class Mlp> struct PreNormBlock {
  /// The config's block name. A block of your own made from PreNormBlock (another attention or MLP) is a
  /// struct deriving from it with its own `static constexpr const char* name`.
  static constexpr const char* name = "decoder";
  using Scalar = typename Attn::Scalar;
  using T = Scalar;
  static_assert(std::is_same<typename Mlp::Scalar, T>::value, "PreNormBlock: attention and MLP must have the same scalar type");
  int D = 0;
  bool sandwich = false;
  RMSNorm<T> norm1, norm2;  // input_layernorm, post_attention_layernorm
  RMSNorm<T> out1, out2;    // sandwich: attn_output_layernorm, mlp_output_layernorm
  Attn attn;
  Mlp mlp;

  struct Cache {
    T *ln1, *r1;   // (N, D), (N)  input_layernorm output (a temporary, recomputed by backward) and rstd
    T* mid;        // (N, D)  residual after attention
    T *ln2, *r2;   // (N, D), (N)  likewise for post_attention_layernorm
    T* dln;        // (N, D)  backward's scratch: gradient w.r.t. a norm output (temporary; null without grad)
    // sandwich only (null otherwise): the branches' outputs before their norms, and those norms' rstd
    T *ao, *ra;    // (N, D), (N)  attention output
    T *mo, *rm;    // (N, D), (N)  MLP output
    T* br;         // (N, D)  a normalised branch output, then backward's d branch (temporary)
    typename Attn::Cache attn;
    typename Mlp::Cache mlp;
  };
  struct DecodeCache {
    T *ln, *rstd;  // (R, D), (R)
    T* br;         // (R, D)  sandwich: a branch's output (null otherwise)
    typename Attn::DecodeCache attn;
    typename Mlp::DecodeCache mlp;
  };

  PreNormBlock() = default;
  PreNormBlock(const typename Attn::Spec& a, const typename Mlp::Spec& m, double rms_norm_eps, bool sandwich_norms = false)
      : D(a.hidden_size), sandwich(sandwich_norms), norm1(a.hidden_size, rms_norm_eps), norm2(a.hidden_size, rms_norm_eps),
        out1(a.hidden_size, rms_norm_eps), out2(a.hidden_size, rms_norm_eps), attn(a), mlp(m) {
    FBT_ASSERT(a.hidden_size == m.hidden_size, "PreNormBlock: attention and MLP widths differ");
  }
  /// From the sizes a config records (the standard attention and MLP).
  explicit PreNormBlock(const LayerSpec& s) : PreNormBlock(s.attention(), s.mlp(), s.rms_norm_eps, s.sandwich) {}

  /// The sizes of this block as a config records them (needs the standard attention and MLP specs).
  LayerSpec layer_spec() const {
    const AttentionSpec& a = attn.spec;
    LayerSpec s{D, a.num_heads, a.num_kv_heads, a.head_dim, mlp.spec.intermediate_size, a.qk_norm, a.rms_norm_eps, a.rope_theta,
                a.max_positions, a.init_std, a.out_std, sandwich};
    s.sliding_window = a.sliding_window;
    return s;
  }
  int kv_width() const { return attn.kv_width(); }

  void declare(const ParamRegistry<T>& r) {
    norm1.declare(r.scope("input_layernorm"));
    attn.declare(r.scope("self_attn"));
    norm2.declare(r.scope("post_attention_layernorm"));
    mlp.declare(r.scope("mlp"));
    if (sandwich) {
      out1.declare(r.scope("attn_output_layernorm"));
      out2.declare(r.scope("mlp_output_layernorm"));
    }
  }
  /// With grad, the norm outputs (and the MLP's product) are temporaries that backward recomputes;
  /// without, everything but what a prefill commits is.
  template <class Be> void alloc(const Be& be, Carver<T>& keep, Carver<T>& temp, Cache& c, int B, int Tn, bool grad) const {
    static_assert(check_attention<Attn, Be>() && check_mlp<Mlp, Be>());  // the part contract (layers/contract.hpp)
    const std::size_t N = std::size_t(B) * Tn;
    Carver<T>& a = grad ? keep : temp;
    c.ln1 = temp.take(N * D), c.ln2 = temp.take(N * D);
    c.r1 = a.take(N), c.mid = a.take(N * D), c.r2 = a.take(N);
    c.dln = grad ? temp.take(N * D) : nullptr;
    c.ao = c.ra = c.mo = c.rm = c.br = nullptr;
    if (sandwich) c.ao = a.take(N * D), c.ra = a.take(N), c.mo = a.take(N * D), c.rm = a.take(N), c.br = temp.take(N * D);
    attn.alloc(be, keep, temp, c.attn, B, Tn, grad);
    mlp.alloc(be, keep, temp, c.mlp, B, Tn, grad);
  }
  template <class Be> void alloc_decode(const Be& be, Carver<T>& a, DecodeCache& c, int R) const {
    static_assert(check_attention<Attn, Be>() && check_mlp<Mlp, Be>());
    c.ln = a.take(std::size_t(R) * D), c.rstd = a.take(R);
    c.br = sandwich ? a.take(std::size_t(R) * D) : nullptr;
    attn.alloc_decode(be, a, c.attn, R);
    mlp.alloc_decode(be, a, c.mlp, R);
  }

  /// \brief out (N, D) = block(x (N, D)); out must not alias x (backward needs x).
  template <class Be> void forward(Be& be, const Weights<T>& w, Cache& c, const T* x, T* out, const PassShape& s) const {
    const int N = s.N();
    const std::size_t ND = std::size_t(N) * D;
    norm1.forward(be, w, c.ln1, c.r1, x, N);
    be.copy(c.mid, x, ND);
    if (!sandwich) attn.forward(be, w, c.attn, c.ln1, c.mid, s);
    else add_normed_branch(be, w, out1, c.ao, c.ra, c.br, c.mid, N, [&](T* y) { attn.forward(be, w, c.attn, c.ln1, y, s); });
    norm2.forward(be, w, c.ln2, c.r2, c.mid, N);
    be.copy(out, c.mid, ND);
    if (!sandwich) mlp.forward(be, w, c.mlp, c.ln2, out, s);
    else add_normed_branch(be, w, out2, c.mo, c.rm, c.br, out, N, [&](T* y) { mlp.forward(be, w, c.mlp, c.ln2, y, s); });
  }

  /// \brief dx (N, D): d out on entry, d x on exit (in place). x is the block input of the same forward.
  template <class Be> void backward(Be& be, const Weights<T>& w, const Cache& c, T* dx, const T* x, const PassShape& s) const {
    const int N = s.N();
    const std::size_t ND = std::size_t(N) * D;
    // MLP branch: d mid = d out + RMSNorm_2^T (mlp^T d out)   (ln2 recomputed: it is not kept per layer)
    // (sandwich: the branch's gradient first goes back through its output norm, into c.br)
    norm2.forward(be, w, c.ln2, c.r2, c.mid, N);
    const T* dmlp = dx;
    if (sandwich) {
      be.zero(c.br, ND);
      out2.backward(be, w, c.br, dx, c.mo, c.rm, N);
      dmlp = c.br;
    }
    be.zero(c.dln, ND);
    mlp.backward(be, w, c.mlp, dmlp, c.dln, c.ln2, s);
    norm2.backward(be, w, dx, c.dln, c.mid, c.r2, N);
    // attention branch: d x = d mid + RMSNorm_1^T (attn^T d mid)   (ln1 recomputed likewise)
    norm1.forward(be, w, c.ln1, c.r1, x, N);
    const T* dattn = dx;
    if (sandwich) {
      be.zero(c.br, ND);
      out1.backward(be, w, c.br, dx, c.ao, c.ra, N);
      dattn = c.br;
    }
    be.zero(c.dln, ND);
    attn.backward(be, w, c.attn, dattn, c.dln, c.ln1, s);
    norm1.backward(be, w, dx, c.dln, x, c.r1, N);
  }

  /// \brief One decoding step: x (R, D) <- block(x), each row one new position against its KV cache.
  template <class Be> void decode(Be& be, const Weights<T>& w, const DecodeCache& c, T* x, const DecodeStep<T>& st) const {
    norm1.forward(be, w, c.ln, c.rstd, x, st.R);
    if (!sandwich) attn.decode(be, w, c.attn, c.ln, x, st);
    else add_normed_branch(be, w, out1, c.br, c.rstd, c.br, x, st.R, [&](T* y) { attn.decode(be, w, c.attn, c.ln, y, st); });
    norm2.forward(be, w, c.ln, c.rstd, x, st.R);
    if (!sandwich) mlp.decode(be, w, c.mlp, c.ln, x, st);
    else add_normed_branch(be, w, out2, c.br, c.rstd, c.br, x, st.R, [&](T* y) { mlp.decode(be, w, c.mlp, c.ln, y, st); });
  }

  /// \brief The sandwich's residual add: raw (R, D) = branch (run accumulates into it from zero),
  /// normed (R, D) = norm(raw) with rstd (R), res += normed. normed may be raw (decoding keeps no raw).
  template <class Be, class Run>
  void add_normed_branch(Be& be, const Weights<T>& w, const RMSNorm<T>& norm, T* raw, T* rstd, T* normed, T* res, int R, Run&& run) const {
    const std::size_t RD = std::size_t(R) * D;
    be.zero(raw, RD);
    run(raw);
    norm.forward(be, w, normed, rstd, raw, R);
    be.add(res, normed, RD);
  }

  /// The keys and values (N, KD) a forward computed: what a prefill commits to the KV cache.
  std::pair<const T*, const T*> kv(const Cache& c) const { return attn.kv(c.attn); }
};

/// The standard decoder block: Qwen3 attention and a SwiGLU MLP.
template <class T> using DecoderBlock = PreNormBlock<CausalSelfAttention<T>, SwiGLU<T>>;

}  // namespace fbt
