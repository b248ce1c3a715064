// fbt/layers/embedding.hpp: the token embedding E (V, D) as a layer (ops/embedding.hpp); "<scope>weight".
//
//   out[n] = E[tok_n]          backward: dE[tok_n] += dout[n]
// With tied embeddings the LM head reads the same table (model/model.hpp).
#pragma once

#include "common.hpp"

namespace fbt {

template <class T> struct Embedding {
  using Scalar = T;
  int V = 0, D = 0;       ///< vocabulary, width
  double init_std = 0.02; ///< N(0, init_std^2)
  std::size_t w = 0;      ///< offset of E (V, D)

  Embedding() = default;
  Embedding(int vocab_size, int hidden_size, double initializer_range = 0.02) : V(vocab_size), D(hidden_size), init_std(initializer_range) {
    FBT_ASSERT(V > 0 && D > 0, "Embedding: vocab_size and hidden_size must be > 0");
  }

  void declare(const ParamRegistry<T>& r) { w = r.add("weight", {V, D}, Init::Normal, init_std); }

  /// \brief out (N, D) = E[tokens] (tokens (N) in backend memory, checked by the caller).
  template <class Be> void forward(Be& be, const Weights<T>& wt, T* out, const int* tokens, int N) const {
    be.embedding_forward(out, tokens, wt.value + w, N, V, D);
  }
  /// \brief dE[tokens] += dout (N, D).
  template <class Be> void backward(Be& be, const Weights<T>& wt, const T* dout, const int* tokens, int N) const {
    be.embedding_backward(wt.grad + w, dout, tokens, N, V, D);
  }
};

}  // namespace fbt
