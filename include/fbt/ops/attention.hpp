// fbt/ops/attention.hpp: causal grouped-query scaled dot-product attention (Vaswani et al. 2017;
// GQA, Ainslie et al. 2023), with document masking for packed sequences.
//
// Per batch row b and query head h (key/value head kh = h / (NH / NKV), spec section 9):
//   S = Q K^T / sqrt(hs)                      (T, T)
//   A[t, s] = softmax over s in [first_t, t]   (0 elsewhere: causal and within t's document)
//   O = A V                                   (T, hs)
// Backward (dA = dO V^T):
//   dS = A * (dA - rowsum(dA * A));  dQ += dS K / sqrt(hs);  dK += dS^T Q / sqrt(hs);  dV += A^T dO
// `first` (B*T) gives, for each position, the first position of its document within the row (0 when
// the row is one document): that is the whole of the document mask (spec invariant 6).
// The probabilities A are kept (B, NH, T, T) for backward, as llm.c does.
#pragma once

#include <cmath>
#include <limits>

#include "gemm.hpp"

namespace fbt {

struct AttnShape {
  int B, T, NH, NKV, hs;
};

/// Queries are processed in blocks of this many rows; a block attends only to keys [first of its first
/// row, its last row], so the causal upper triangle (and earlier documents) is never computed.
constexpr int kAttnBlock = 64;

/// \brief out (B*T, NH*hs) = attention(q (B*T, NH*hs), k, v (B*T, NKV*hs)); att (B, NH, T, T) probabilities.
/// Only the entries of the causal blocks are written: row t's window [first_t, t] holds its probabilities
/// and the rest of its block row is zero; entries left of a block's first key or right of its last row are
/// not touched (backward never reads them).
template <class T>
void attention_forward(RowMapS<T> out, T* att, CRowMapS<T> q, CRowMapS<T> k, CRowMapS<T> v, const int* first,
                       const AttnShape& s) {
  const int B = s.B, Tn = s.T, NH = s.NH, NKV = s.NKV, hs = s.hs, group = NH / NKV;
  FBT_ASSERT(NKV > 0 && NH % NKV == 0, "attention_forward: NKV must divide NH");
  FBT_ASSERT(q.rows() == Eigen::Index(B) * Tn && q.cols() == Eigen::Index(NH) * hs && k.cols() == Eigen::Index(NKV) * hs &&
                 v.cols() == k.cols() && out.cols() == q.cols() && out.rows() == q.rows() && k.rows() == q.rows() && v.rows() == q.rows(),
             "attention_forward: shape mismatch");
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < Tn; ++t) {
      const int f = first[std::size_t(b) * Tn + t];
      FBT_ASSERT(f >= 0 && f <= t && (t == 0 || f >= first[std::size_t(b) * Tn + t - 1]),
                 "attention_forward: window start " + std::to_string(f) + " of position " + std::to_string(t) + " is outside [0, t] or goes back");
    }
  const T scale = T(1) / std::sqrt(T(hs));
  for (int b = 0; b < B; ++b) {
    const int* fb = first + std::size_t(b) * Tn;
    for (int h = 0; h < NH; ++h) {
      const int kh = h / group;
      const std::size_t r0 = std::size_t(b) * Tn;
      T* A = att + (std::size_t(b) * NH + h) * Tn * Tn;
      for (int i0 = 0; i0 < Tn; i0 += kAttnBlock) {
        const int i1 = std::min(Tn, i0 + kAttnBlock), k0 = fb[i0], nk = i1 - k0, nq = i1 - i0;
        auto Q = csmat(q.data() + (r0 + i0) * q.outerStride() + h * hs, nq, hs, q.outerStride());
        auto K = csmat(k.data() + (r0 + k0) * k.outerStride() + kh * hs, nk, hs, k.outerStride());
        auto V = csmat(v.data() + (r0 + k0) * v.outerStride() + kh * hs, nk, hs, v.outerStride());
        auto O = smat(out.data() + (r0 + i0) * out.outerStride() + h * hs, nq, hs, out.outerStride());
        auto Ab = smat(A + std::size_t(i0) * Tn + k0, nq, nk, Tn);  // this block's rows, keys [k0, i1)
        gemm(Ab, Q, false, K, true, false);                      // scaled inside the softmax below
        for (int t = i0; t < i1; ++t) {
          const int f = fb[t] - k0, e = t - k0 + 1;  // the window [f, e) in block coordinates
          auto row = Ab.row(t - i0);
          // numerically stable softmax of scale * row over the allowed window; zero elsewhere in the block
          const T mx = row.segment(f, e - f).maxCoeff();
          row.segment(f, e - f) = ((row.segment(f, e - f).array() - mx) * scale).exp();
          row.segment(f, e - f) /= row.segment(f, e - f).sum();
          if (f > 0) row.head(f).setZero();
          if (e < nk) row.tail(nk - e).setZero();
        }
        gemm(O, csmat(Ab.data(), nq, nk, Tn), false, V, false, false);
      }
    }
  }
}

/// \brief Accumulates dq, dk, dv from dout; needs att and the q, k, v of the same forward.
/// scratch: T*T elements (dA / dS of one block), overwritten.
template <class T>
void attention_backward(RowMapS<T> dq, RowMapS<T> dk, RowMapS<T> dv, T* scratch, CRowMapS<T> dout, const T* att,
                        CRowMapS<T> q, CRowMapS<T> k, CRowMapS<T> v, const int* first, const AttnShape& s) {
  const int B = s.B, Tn = s.T, NH = s.NH, NKV = s.NKV, hs = s.hs, group = NH / NKV;
  FBT_ASSERT(dq.rows() == q.rows() && dq.cols() == q.cols() && dk.cols() == k.cols() && dv.cols() == v.cols() && dout.cols() == q.cols(),
             "attention_backward: shape mismatch");
  const T scale = T(1) / std::sqrt(T(hs));
  for (int b = 0; b < B; ++b) {
    const int* fb = first + std::size_t(b) * Tn;
    for (int h = 0; h < NH; ++h) {
      const int kh = h / group;
      const std::size_t r0 = std::size_t(b) * Tn;
      const T* A = att + (std::size_t(b) * NH + h) * Tn * Tn;
      for (int i0 = 0; i0 < Tn; i0 += kAttnBlock) {
        const int i1 = std::min(Tn, i0 + kAttnBlock), k0 = fb[i0], nk = i1 - k0, nq = i1 - i0;
        auto Q = csmat(q.data() + (r0 + i0) * q.outerStride() + h * hs, nq, hs, q.outerStride());
        auto K = csmat(k.data() + (r0 + k0) * k.outerStride() + kh * hs, nk, hs, k.outerStride());
        auto V = csmat(v.data() + (r0 + k0) * v.outerStride() + kh * hs, nk, hs, v.outerStride());
        auto dO = csmat(dout.data() + (r0 + i0) * dout.outerStride() + h * hs, nq, hs, dout.outerStride());
        auto dQ = smat(dq.data() + (r0 + i0) * dq.outerStride() + h * hs, nq, hs, dq.outerStride());
        auto dK = smat(dk.data() + (r0 + k0) * dk.outerStride() + kh * hs, nk, hs, dk.outerStride());
        auto dV = smat(dv.data() + (r0 + k0) * dv.outerStride() + kh * hs, nk, hs, dv.outerStride());
        auto Ab = csmat(A + std::size_t(i0) * Tn + k0, nq, nk, Tn);
        auto dA = smat(scratch, nq, nk);
        gemm(dV, Ab, true, dO, false, true);
        gemm(dA, dO, false, V, true, false);
        // softmax backward, row by row: dS = scale * A * (dA - <dA, A>); masked entries have A = 0, so dS = 0
        for (int t = 0; t < nq; ++t) {
          const T dot = dA.row(t).dot(Ab.row(t));
          dA.row(t) = scale * Ab.row(t).cwiseProduct((dA.row(t).array() - dot).matrix());
        }
        gemm(dQ, csmat(scratch, nq, nk), false, K, false, true);
        gemm(dK, csmat(scratch, nq, nk), true, Q, false, true);
      }
    }
  }
}

/// \brief Decoding: one query position attends to the len1 cached positions of its sequence (itself last).
/// out (NH*hs); scores: len1 scratch; q (NH*hs) after QK-norm and RoPE; Kc, Vc (len1, NKV*hs) the cache.
template <class T>
void attention_decode(T* out, T* scores, const T* q, const T* Kc, const T* Vc, int len1, int NH, int NKV, int hs) {
  FBT_ASSERT(len1 > 0 && NKV > 0 && NH % NKV == 0, "attention_decode: bad shape");
  const int group = NH / NKV, KD = NKV * hs;
  const T scale = T(1) / std::sqrt(T(hs));
  auto p = vec(scores, len1);
  for (int h = 0; h < NH; ++h) {
    const int kh = h / group;
    p.noalias() = csmat(Kc + kh * hs, len1, hs, KD) * cvec(q + h * hs, hs);  // (len1)
    const T mx = p.maxCoeff();
    p = ((p.array() - mx) * scale).exp().matrix();
    p /= p.sum();
    vec(out + h * hs, hs).noalias() = csmat(Vc + kh * hs, len1, hs, KD).transpose() * p;
  }
}

// The kernels above for float and double are compiled once in src/kernels.cpp (the fbt::kernels library)
// when FBT_COMPILED_KERNELS is defined (fbt::kernels defines it); otherwise they are header-only templates.
#define FBT_OPS_ATTENTION_INSTANTIATE(EXTERN, T) \
  EXTERN template void attention_forward<T>(RowMapS<T>, T*, CRowMapS<T>, CRowMapS<T>, CRowMapS<T>, const int*, const AttnShape&); \
  EXTERN template void attention_backward<T>(RowMapS<T>, RowMapS<T>, RowMapS<T>, T*, CRowMapS<T>, const T*, CRowMapS<T>, CRowMapS<T>, CRowMapS<T>, const int*, const AttnShape&); \
  EXTERN template void attention_decode<T>(T*, T*, const T*, const T*, const T*, int, int, int, int);
#ifdef FBT_COMPILED_KERNELS
FBT_OPS_ATTENTION_INSTANTIATE(extern, float)
FBT_OPS_ATTENTION_INSTANTIATE(extern, double)
#endif

}  // namespace fbt
