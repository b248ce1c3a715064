// fbt/layers/common.hpp: what every layer shares: where its parameters are, the shape of a pass, and the
// two products every layer uses, written over a backend.
//
// A layer is a small value type that owns no tensors (STYLE 2.2): it keeps its own sizes and the offsets
// of its parameters in the flat ParamStore, lays out its cache on request, and has const forward /
// backward members that take the backend, the weights and the cache explicitly, so the K-pass objective
// can hold one cache per pass and the same layer code runs on every backend (layers/contract.hpp has the
// written contract and its compile-time checks).
#pragma once

#include <cstddef>
#include <string>

#include "../backend/backend.hpp"
#include "../core/arena.hpp"
#include "../core/params.hpp"
#include "../core/tensor.hpp"
#include "../ops/bf16_weights.hpp"

namespace fbt {

/// \brief A model's parameters as one backend sees them: the flat buffers of the ParamStore layout.
/// On the CPU they are the ParamStore's own buffers; on a GPU, its device copies (model/backend_model.hpp).
template <class T> struct Weights {
  const T* value = nullptr;   ///< (P) parameter values
  T* grad = nullptr;          ///< (P) gradients, accumulated by backward (null: forward only)
  const T* consts = nullptr;  ///< constants (RoPE tables), ParamStore::constants() layout
};

/// \brief The weights of a ParamStore on the CPU (its own buffers).
template <class T> Weights<T> host_weights(ParamStore<T>& ps) { return Weights<T>{ps.values(), ps.grads(), ps.constants()}; }
template <class T> Weights<T> host_weights(const ParamStore<T>& ps) { return Weights<T>{ps.values(), nullptr, ps.constants()}; }

/// The shape of one pass over a batch, with the per-position tables every layer may need.
struct PassShape {
  int B = 0, T = 0;
  const int* pos = nullptr;    ///< (B*T) RoPE position of each token (restarts at a document start when masked), backend memory
  const int* first = nullptr;  ///< (B*T) first position of the token's attention window within its row, backend memory
  int window = 0;                     ///< the sliding window W that first_window is for (0: none)
  const int* first_window = nullptr;  ///< (B*T) max(first[t], t - W + 1): a sliding layer's window start, backend memory
  int N() const { return B * T; }
  /// The window starts of a layer with sliding window W (0: full attention, `first`).
  const int* first_for(int W) const {
    if (W <= 0) return first;
    FBT_ASSERT(W == window && first_window, "PassShape: no window-start table for sliding window " + std::to_string(W) + " (this pass has " +
                                                (window > 0 ? "one for " + std::to_string(window) : std::string("none")) + ")");
    return first_window;
  }
};

/// What one decoding step of one layer reads (decode/decoder.hpp fills it): R sequences, one new
/// position each, and this layer's slice of each sequence's KV cache.
template <class T> struct DecodeStep {
  int R = 0;                  ///< sequences in the step
  const int* pos = nullptr;   ///< (R) position of the new token in its sequence (RoPE, and where its K/V go), backend memory
  const int* len1 = nullptr;  ///< (R) cached positions including the new one, backend memory
  int max_len1 = 0;           ///< max of len1 (host)
  T* const* kc = nullptr;     ///< (R) this layer's key cache of each sequence, (rows, KD) each (rows: capacity, or W on a sliding layer), backend memory
  T* const* vc = nullptr;     ///< (R) likewise for the values
  const int* slot = nullptr;  ///< (R) the cache row the new K/V go to, backend memory: a sliding layer's ring slot pos % W
                              ///< (its len1 then counts the live rows, min(len, W)); null: pos
};

/// \brief out (N, OC) = x (N, C) W^T (+ out when acc); W (OC, C) with row stride ldw (a half of a wider
/// matrix when ldw > C).
template <class Be, class T> void linear(Be& be, T* out, const T* x, const T* W, int N, int OC, int C, int ldw, bool acc) {
  be.gemm(out, OC, x, C, false, W, ldw, true, N, OC, C, acc);
}
/// \brief dx (N, C) += dy W (skipped when dx is null; dx = dy W when acc_dx is false: a layer's own scratch
/// written whole, with no zeroing first); dW (OC, C, row stride ldw) += dy^T x (skipped when null).
/// In bf16 (ops/gemm_bf16.hpp) dy is rounded once for both products (an input scope, ops/bf16_weights.hpp).
template <class Be, class T>
void linear_backward(Be& be, T* dx, T* dW, const T* dy, const T* x, const T* W, int N, int OC, int C, int ldw, bool acc_dx = true) {
  Bf16InputScope<T> once(dx && dW ? dy : nullptr, std::size_t(N) * OC);
  if (dx) be.gemm(dx, C, dy, OC, false, W, ldw, false, N, C, OC, acc_dx);
  if (dW) be.gemm(dW, ldw, dy, OC, true, x, C, false, OC, C, N, true);
}

}  // namespace fbt
