// fbt/backend/backend.hpp: the backend contract: where a step's buffers live and who runs its kernels.
//
// fbt writes the K-pass step, the pass forward/backward, the optimizer and the KV-cache decoder once
// (model/, decode/, train/), over a backend `Be` (the ggml idea: the graph once, a backend per device).
// A backend owns no model state; it provides memory and the operations below, all on contiguous
// row-major arrays in its own memory unless a leading dimension is given. "+=" means the operation
// accumulates into its output; every other output is overwritten.
//
//   fbt::CpuBackend<T>        (backend/cpu.hpp)  host memory, the ops/ kernels (Eigen); float or double
//   fbt::cuda::CudaBackend    (cuda/backend.cuh) device memory, cuda/kernels.cuh and cuBLAS; float
//   fbt::check::HostBackend   (check/host_backend.hpp) host memory, plain loops with the CUDA kernels'
//                             contracts, so the shared code can be checked against the CPU without a GPU
//
// Memory
//   template <class U> using Buf            owning buffer: resize(n) (contents lost), data(), size()
//   upload(dst, src, n) / download(dst, src, n)   host -> backend / backend -> host (download waits)
//   copy(dst, src, n), zero(p, n), sync()
// Products
//   gemm(C, ldc, A, lda, tA, B, ldb, tB, M, N, K, acc)   C (M, N) = op(A) op(B) (+ C when acc)
// Normalisation, rotation, attention
//   rmsnorm_forward(out, rstd, inp, w, R, C, eps)         out may be inp
//   rmsnorm_backward(dinp +=, dw +=, dout, inp, w, rstd, R, C)   dw may be null
//   rope_forward(out, inp, pos, RopeView, R, NH) / rope_backward(dinp +=, dout, pos, RopeView, R, NH)
//   attention_state_size(B, T, NH), attention_scratch_size(B, T, NH)   elements the backend needs
//   attention_forward(out, state, q, k, v, first, B, T, NH, NKV, hs)
//   attention_backward(dq +=, dk +=, dv +=, scratch, dout, out, state, q, k, v, first, B, T, NH, NKV, hs)
//   attention_decode(out, q, kc, vc, len1, max_len1, R, NH, NKV, hs)   kc, vc: per-row cache pointers
//   kv_append(kc, vc, k, v, pos, R, KD)                   row r of k, v -> kc[r], vc[r] at pos[r]
//   gather_rows(dst, src_ptrs, mask, R, C), scatter_rows(dst_ptrs, src, R, C)
// Elementwise (n elements)
//   swiglu_forward(h, g, u, n), swiglu_backward(dg +=, du +=, dh, g, u, n)
//   sigmoid_gate_forward(y, a, z, n), sigmoid_gate_backward(da +=, dz +=, dy, a, z, n)   da/dz may be null
//   mul(y, a, b, n): y = a * b (y may alias a or b);  mul_add(y, a, b, n): y += a * b (no aliasing)
//   mul_backward(da +=, db +=, dy, a, b, n): da += dy * b, db += dy * a (the backward of both)    da/db may be null
//   scale_groups(y, x, s, R, G, C): y[r, g*C + c] = x[r, g*C + c] * s[r, g]; x, y (R, G*C), s (R, G); y may be x
//     (a per-head scale: G = NH, C = head_dim; a per-row scale: G = 1)
//   scale_groups_backward(dx +=, ds +=, dy, x, s, R, G, C): dx += dy * s, ds[r, g] += sum_c dy * x   dx/ds may be null
//   sigmoid(y, z, n): y = 1 / (1 + exp(-z)) (y may be z);  sigmoid_backward(dz +=, dy, y, n): dz += dy y (1 - y)
//   axpby(y, a, x, b, n): y = a x + b y;  add(y, x, n): y += x;  scale(x, s, n): x *= s (in double)
//   copy_plain_rows(dst, src, mask, R, C), move_plain_rows(dst +=, src (zeroed), mask, R, C)  rows with mask 0
//   shift_right_forward(out, inp, B, T, C), shift_right_backward(dinp +=, dout, B, T, C)
//   embedding_forward(out, tokens, E, N, V, C), embedding_backward(dE +=, dout, tokens, N, V, C)
//   bias_forward(out +=, b, R, C), bias_backward(db +=, dout, R, C)
//   jitter_add(out, src, seed, row_offset, B, row_len, sigma)   out = src + U(-sigma, sigma), seeded per row
// Loss, optimizer, reductions (results in double, returned to the host)
//   softmax_xent_forward(logits -> probs, losses, lse, targets, N, V, z) -> sum of the losses
//   softmax_xent_backward(probs -> dlogits, lse, targets, N, V, scale, z)
//   adamw(p, g, m, v, n, AdamWRates, wd)
//   row_sumsq(out, x, R, C): out (R) = sum over each row of x (R, C) of x^2, accumulated in double  (Muon, NorMuon)
//   row_div_sqrt(x, v, R, C, eps): row r of x (R, C) /= sqrt(v[r]) + eps                          (NorMuon)
//   sum_squares(x, n), masked_sumsq(x, mask, R, C), masked_diff_sumsq(a, b, mask, R, C) -> double
//   masked_sigmoid_moments(z, mask, R, C) -> {sum sigmoid, sum sigmoid^2}     (rows with mask != 0)
#pragma once

#include <cmath>
#include <cstdint>
#include <utility>

#include "../ops/rope.hpp"

namespace fbt {

/// The rates of one AdamW step, computed in double on the host and rounded to T once (train/adamw.hpp).
template <class T> struct AdamWRates {
  T b1, b2;      ///< beta1, beta2
  T ib1, ib2;    ///< 1 - beta1, 1 - beta2
  T rbc1, rbc2;  ///< 1 / (1 - beta1^t), 1 / (1 - beta2^t)
  T eps, lr;
};

/// The jitter of the carried state (spec 3): batch row r (global index row_offset + r) draws from the
/// SplitMix64 stream seeded seed ^ (0xD1B54A32D192ED03 * (row_offset + r + 1)), so a batch split across
/// threads or devices draws exactly the noise the whole batch would.
inline std::uint64_t jitter_row_seed(std::uint64_t seed, long row) { return seed ^ (0xD1B54A32D192ED03ull * std::uint64_t(row + 1)); }

}  // namespace fbt
