// fbt/layers/block.hpp: one pre-norm decoder block (spec section 1).
//
//   mid = x + Attn(RMSNorm_1(x)),   out = mid + SwiGLU(RMSNorm_2(mid))
// Backward runs the residual stream in place: on entry dx holds d out, on exit d x.
// Parameters: model.layers.{i}.input_layernorm.weight, .post_attention_layernorm.weight, + attention, mlp.
#pragma once

#include "attention.hpp"
#include "mlp.hpp"

namespace fbt {

template <class T> struct Block {
  using Scalar = T;
  int D = 0;
  T eps = T(1e-6);
  std::size_t g1 = 0, g2 = 0;
  CausalSelfAttention<T> attn;
  SwiGLUMlp<T> mlp;

  struct Cache {
    T *ln1, *r1;   // (N, D), (N)  input_layernorm output (a temporary, recomputed by backward) and rstd
    T* mid;        // (N, D)  residual after attention
    T *ln2, *r2;   // (N, D), (N)  likewise for post_attention_layernorm
    typename CausalSelfAttention<T>::Cache attn;
    typename SwiGLUMlp<T>::Cache mlp;
  };
  struct Scratch {
    T* dln;  // (N, D)  gradient w.r.t. a norm output
    typename CausalSelfAttention<T>::Scratch attn;
    typename SwiGLUMlp<T>::Scratch mlp;
  };

  Block() = default;
  Block(const ModelConfig& c) : D(c.hidden_size), eps(T(c.rms_norm_eps)), attn(c), mlp(c) {}

  /// std: init std; out_std: the depth-scaled std of o_proj and down_proj (std / sqrt(2L)).
  void declare(ParamStore<T>& ps, int layer, double std, double out_std) {
    const std::string p = "model.layers." + std::to_string(layer) + ".";
    g1 = ps.add(p + "input_layernorm.weight", {D}, Init::Ones);
    attn.declare(ps, p + "self_attn.", std, out_std);
    g2 = ps.add(p + "post_attention_layernorm.weight", {D}, Init::Ones);
    mlp.declare(ps, p + "mlp.", std, out_std);
  }
  /// share: a cache whose temporaries (ln1, ln2, the MLP's h) this one reuses; backward recomputes them,
  /// so one set serves every layer and pass (null: allocate them).
  void alloc(Arena<T>& a, Cache& c, int B, int Tn, const Cache* share = nullptr) const {
    const std::size_t N = std::size_t(B) * Tn;
    c.ln1 = share ? share->ln1 : a.take(N * D), c.ln2 = share ? share->ln2 : a.take(N * D);
    c.r1 = a.take(N), c.mid = a.take(N * D), c.r2 = a.take(N);
    attn.alloc(a, c.attn, B, Tn);
    mlp.alloc(a, c.mlp, B, Tn, share ? &share->mlp : nullptr);
  }
  void alloc_scratch(Arena<T>& a, Scratch& s, int B, int Tn) const {
    s.dln = a.take(std::size_t(B) * Tn * D);
    attn.alloc_scratch(a, s.attn, B, Tn);
    mlp.alloc_scratch(a, s.mlp, B, Tn);
  }

  /// \brief out (N, D) = block(x (N, D)); out must not alias x (backward needs x).
  void forward(const ParamStore<T>& ps, Cache& c, const T* x, T* out, const PassShape& s, const RopeTable<T>& rope) const {
    const int N = s.N();
    const T* P = ps.values();
    rmsnorm_forward(smat(c.ln1, N, D), vec(c.r1, N), csmat(x, N, D), cvec(P + g1, D), eps);
    mat(c.mid, N, D) = cmat(x, N, D);
    attn.forward(ps, c.attn, c.ln1, c.mid, s, rope);
    rmsnorm_forward(smat(c.ln2, N, D), vec(c.r2, N), csmat(c.mid, N, D), cvec(P + g2, D), eps);
    mat(out, N, D) = cmat(c.mid, N, D);
    mlp.forward(ps, c.mlp, c.ln2, out, N);
  }

  /// \brief dx (N, D): d out on entry, d x on exit (in place). x is the block input of the same forward.
  void backward(ParamStore<T>& ps, const Cache& c, const Scratch& sc, T* dx, const T* x, const PassShape& s,
                const RopeTable<T>& rope) const {
    const int N = s.N();
    const T* P = ps.values();
    T* G = ps.grads();
    // MLP branch: d mid = d out + RMSNorm_2^T (mlp^T d out)   (ln2 recomputed: it is not kept per layer)
    rmsnorm_forward(smat(c.ln2, N, D), vec(c.r2, N), csmat(c.mid, N, D), cvec(P + g2, D), eps);
    zero(sc.dln, std::size_t(N) * D);
    mlp.backward(ps, c.mlp, sc.mlp, dx, sc.dln, c.ln2, N);
    rmsnorm_backward(smat(dx, N, D), vec(G + g2, D), csmat(sc.dln, N, D), csmat(c.mid, N, D), cvec(P + g2, D), cvec(c.r2, N));
    // attention branch: d x = d mid + RMSNorm_1^T (attn^T d mid)   (ln1 recomputed likewise)
    rmsnorm_forward(smat(c.ln1, N, D), vec(c.r1, N), csmat(x, N, D), cvec(P + g1, D), eps);
    zero(sc.dln, std::size_t(N) * D);
    attn.backward(ps, c.attn, sc.attn, dx, sc.dln, c.ln1, s, rope);
    rmsnorm_backward(smat(dx, N, D), vec(G + g1, D), csmat(sc.dln, N, D), csmat(x, N, D), cvec(P + g1, D), cvec(c.r1, N));
  }
};

}  // namespace fbt
