// fbt/cuda/kernels.cuh: the model's kernels on the GPU, one __global__ kernel + one host
// launcher per CPU kernel of fbt/ops/, named like it, in the same argument order, plus a cudaStream_t
// (STYLE 2.8, llm.c llmc/*.cuh). Backward launchers ACCUMULATE into their gradients, as on the CPU.
//
// Layout: every activation is a contiguous row-major (rows, cols) fp32 buffer in device memory (the
// (B, T, C) tensors are (B*T, C), as in llm.c); integer tables (tokens, targets, positions, window
// starts) are int32 device arrays. Shapes are checked on the host before the launch; every launch is
// checked (FBT_CUDA_CHECK_LAUNCH).
//
// Kernels, and the CPU kernel each one mirrors:
//   rmsnorm_forward/backward       ops/rmsnorm.hpp       one warp per row; dw via shared-memory partials
//   rope_forward/backward          ops/rope.hpp          one thread per rotated pair (in place allowed)
//   attention_forward/backward     ops/attention.hpp     tiled, online softmax (Milakov & Gimelshein 2018;
//                                                        FlashAttention, Dao et al. 2022): only the
//                                                        logsumexp (B, NH, T) is stored, never a T x T matrix
//   attention_decode               ops/attention.hpp     one block per (sequence, head) over its KV cache
//   swiglu_forward/backward        ops/activations.hpp
//   sigmoid_gate_forward/backward  ops/activations.hpp   the GLU fuser's product
//   mul, mul_add, mul_backward     ops/elementwise.hpp   elementwise products
//   scale_groups(_backward)        ops/elementwise.hpp   per-row / per-head broadcast scale; ds: one thread per group
//   sigmoid(_backward)             ops/elementwise.hpp
//   shift_right_forward/backward   ops/shift.hpp
//   embedding_forward/backward     ops/embedding.hpp     backward scatters with atomicAdd
//   softmax_xent_forward/backward  ops/softmax_xent.hpp  one block per row, in place
//   bias_forward/backward          ops/linear.hpp
//   adamw_update_tensor            train/adamw.hpp       one launch per tensor (decay is per tensor)
//   row_sumsq, row_div_sqrt        train/muon.hpp        NorMuon's row statistics: one block per row / elementwise
// and the glue the shared model code needs (backend/backend.hpp): add/axpby, masked row copies (plain vs
// fed-back rows), the seeded jitter (bit-identical to the CPU's SplitMix64 streams), the reductions in
// double (sums of squares, the masked sums behind the feedback diagnostics), and the decoder's KV-cache
// append / state gather and scatter.
// CUDA-only: include from .cu translation units.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "../backend/backend.hpp"
#include "check.cuh"

namespace fbt {
namespace cuda {

// Kernels are templates on the scalar (always float today): a non-template __global__ function defined
// in a header would be a duplicate symbol when two translation units include it.

namespace detail {

constexpr int kThreads = 256;  // elementwise kernels
constexpr int kWarp = 32;

/// Blocks for a grid-stride loop over n elements (capped: the loop covers the rest).
inline unsigned grid_for(std::size_t n, int threads = kThreads) {
  const std::size_t b = (n + threads - 1) / threads;
  return unsigned(std::max<std::size_t>(1, std::min<std::size_t>(b, std::size_t(1) << 20)));
}

template <class T> __device__ __forceinline__ T warp_sum(T v) {
  for (int o = kWarp / 2; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
template <class T> __device__ __forceinline__ T warp_max(T v) {
  for (int o = kWarp / 2; o > 0; o /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
/// Sum over the block (blockDim.x a multiple of 32, at most 1024); every thread gets the result.
/// `red` is 32 elements of shared memory; the call ends with a barrier so red can be reused.
template <class T> __device__ T block_sum(T v, T* red) {
  const int lane = threadIdx.x % kWarp, w = threadIdx.x / kWarp, nw = blockDim.x / kWarp;
  v = warp_sum(v);
  if (lane == 0) red[w] = v;
  __syncthreads();
  T r = lane < nw ? red[lane] : T(0);
  r = warp_sum(r);
  __syncthreads();
  return r;
}
template <class T> __device__ T block_max(T v, T* red) {
  const int lane = threadIdx.x % kWarp, w = threadIdx.x / kWarp, nw = blockDim.x / kWarp;
  v = warp_max(v);
  if (lane == 0) red[w] = v;
  __syncthreads();
  T r = lane < nw ? red[lane] : T(-INFINITY);
  r = warp_max(r);
  __syncthreads();
  return r;
}

template <class T> __device__ __forceinline__ T sigmoidf_(T x) { return T(1) / (T(1) + expf(-x)); }

}  // namespace detail

// =========================================================================================== RMSNorm

/// rstd_n = 1/sqrt(mean_c x^2 + eps); out = x * rstd * w. One warp per row; out may alias inp (each lane
/// reads its elements for the sum of squares before it writes them).
template <class T>
__global__ void rmsnorm_forward_kernel(T* out, T* rstd, const T* inp, const T* w, int R, int C, T eps) {
  const int lane = threadIdx.x % detail::kWarp;
  const long row = long(blockIdx.x) * (blockDim.x / detail::kWarp) + threadIdx.x / detail::kWarp;
  if (row >= R) return;
  const T* x = inp + row * C;
  T ss = 0;
  for (int c = lane; c < C; c += detail::kWarp) ss += x[c] * x[c];
  ss = detail::warp_sum(ss);
  const T r = T(1) / sqrtf(ss / T(C) + eps);
  T* y = out + row * C;
  for (int c = lane; c < C; c += detail::kWarp) y[c] = x[c] * r * w[c];
  if (lane == 0) rstd[row] = r;
}

/// Per row (dxhat = dy * w, xhat = x * rstd):  dx += rstd * (dxhat - xhat * mean_c(dxhat * xhat));
/// dw += sum_rows dy * xhat. A block's warps take rows in turn; the dw partial sums of the block live
/// in shared memory (C floats) and are added to dw once per block, so the global atomics are
/// (blocks x C) rather than (R x C).
template <class T>
__global__ void rmsnorm_backward_kernel(T* dinp, T* dw, const T* dout, const T* inp, const T* w, const T* rstd, int R, int C) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* dw_s = reinterpret_cast<T*>(smem_raw);  // (C) this block's share of dw
  if (dw)
    for (int c = threadIdx.x; c < C; c += blockDim.x) dw_s[c] = 0;
  __syncthreads();
  const int lane = threadIdx.x % detail::kWarp, warps = blockDim.x / detail::kWarp;
  for (long row = long(blockIdx.x) * warps + threadIdx.x / detail::kWarp; row < R; row += long(gridDim.x) * warps) {
    const T* x = inp + row * C;
    const T* dy = dout + row * C;
    const T r = rstd[row];
    // first: the reduction sum_c dy * w * x (times rstd / C: the mean of dxhat * xhat)
    T dot = 0;
    for (int c = lane; c < C; c += detail::kWarp) dot += dy[c] * w[c] * x[c];
    const T proj = detail::warp_sum(dot) * r / T(C);
    // then: dx += rstd * (dy * w - x * rstd * proj), and this row's dy * xhat into the block's dw
    T* dx = dinp + row * C;
    for (int c = lane; c < C; c += detail::kWarp) {
      dx[c] += r * (dy[c] * w[c] - x[c] * (r * proj));
      if (dw) atomicAdd(dw_s + c, dy[c] * x[c] * r);
    }
  }
  __syncthreads();
  if (dw)
    for (int c = threadIdx.x; c < C; c += blockDim.x) atomicAdd(dw + c, dw_s[c]);
}

/// \brief out = rmsnorm(inp) * w.  out, inp (R, C) (out may alias inp); rstd (R); w (C).
template <class T> void rmsnorm_forward(T* out, T* rstd, const T* inp, const T* w, int R, int C, T eps, cudaStream_t stream) {
  FBT_ASSERT(R >= 0 && C > 0, "cuda rmsnorm_forward: bad shape");
  if (R == 0) return;
  const int rows_per_block = detail::kThreads / detail::kWarp;
  rmsnorm_forward_kernel<T><<<(R + rows_per_block - 1) / rows_per_block, detail::kThreads, 0, stream>>>(out, rstd, inp, w, R, C, eps);
  FBT_CUDA_CHECK_LAUNCH("rmsnorm_forward_kernel");
}

/// \brief Accumulates dinp (R, C) and dw (C) (dw may be null: skipped); needs rstd of the same forward.
template <class T>
void rmsnorm_backward(T* dinp, T* dw, const T* dout, const T* inp, const T* w, const T* rstd, int R, int C, cudaStream_t stream) {
  FBT_ASSERT(R >= 0 && C > 0 && std::size_t(C) * sizeof(T) <= 48 * 1024, "cuda rmsnorm_backward: C must be in [1, 12288]");
  if (R == 0) return;
  const int warps = detail::kThreads / detail::kWarp;
  const int blocks = std::min((R + warps - 1) / warps, 1024);
  rmsnorm_backward_kernel<T><<<blocks, detail::kThreads, dw ? std::size_t(C) * sizeof(T) : 0, stream>>>(dinp, dw, dout, inp, w, rstd, R, C);
  FBT_CUDA_CHECK_LAUNCH("rmsnorm_backward_kernel");
}

// ============================================================================================== RoPE

/// One thread per (row n, head h, pair i): y_i = x_i cos - x_{i+half} sin, y_{i+half} = x_{i+half} cos + x_i sin.
/// cos/sin tables (max_pos, half). Reads both elements before writing: out may alias inp.
template <class T>
__global__ void rope_forward_kernel(T* out, const T* inp, const int* pos, const T* cos_t, const T* sin_t, int R, int NH, int half) {
  const long n_all = long(R) * NH * half;
  for (long idx = long(blockIdx.x) * blockDim.x + threadIdx.x; idx < n_all; idx += long(gridDim.x) * blockDim.x) {
    const int i = int(idx % half);
    const long nh = idx / half;  // n * NH + h
    const long n = nh / NH;
    const long base = nh * 2 * half;  // rows are NH * hs contiguous, so (n, h) starts at nh * hs
    const T c = cos_t[long(pos[n]) * half + i], s = sin_t[long(pos[n]) * half + i];
    const T x1 = inp[base + i], x2 = inp[base + i + half];
    out[base + i] = x1 * c - x2 * s;
    out[base + i + half] = x2 * c + x1 * s;
  }
}

/// dx += R(p)^T dy (the rotation by -angle).
template <class T>
__global__ void rope_backward_kernel(T* dinp, const T* dout, const int* pos, const T* cos_t, const T* sin_t, int R, int NH, int half) {
  const long n_all = long(R) * NH * half;
  for (long idx = long(blockIdx.x) * blockDim.x + threadIdx.x; idx < n_all; idx += long(gridDim.x) * blockDim.x) {
    const int i = int(idx % half);
    const long nh = idx / half;
    const long n = nh / NH;
    const long base = nh * 2 * half;
    const T c = cos_t[long(pos[n]) * half + i], s = sin_t[long(pos[n]) * half + i];
    const T dy1 = dout[base + i], dy2 = dout[base + i + half];
    dinp[base + i] += dy1 * c + dy2 * s;
    dinp[base + i + half] += dy2 * c - dy1 * s;
  }
}

/// \brief out = R(pos) inp per head.  out, inp (R, NH*hs) with hs = 2 tab.half; pos (R) (positions checked
/// by the caller against tab.max_pos); tab: the (max_pos, half) cos and sin tables in device memory.
template <class T> void rope_forward(T* out, const T* inp, const int* pos, const RopeView<T>& tab, int R, int NH, cudaStream_t stream) {
  FBT_ASSERT(tab.half > 0 && R >= 0 && NH > 0, "cuda rope_forward: bad shape");
  const std::size_t n = std::size_t(R) * NH * tab.half;
  if (n == 0) return;
  rope_forward_kernel<T><<<detail::grid_for(n), detail::kThreads, 0, stream>>>(out, inp, pos, tab.cos, tab.sin, R, NH, tab.half);
  FBT_CUDA_CHECK_LAUNCH("rope_forward_kernel");
}
/// \brief dinp += R(pos)^T dout.  dinp, dout (R, NH*hs).
template <class T> void rope_backward(T* dinp, const T* dout, const int* pos, const RopeView<T>& tab, int R, int NH, cudaStream_t stream) {
  FBT_ASSERT(tab.half > 0 && R >= 0 && NH > 0, "cuda rope_backward: bad shape");
  const std::size_t n = std::size_t(R) * NH * tab.half;
  if (n == 0) return;
  rope_backward_kernel<T><<<detail::grid_for(n), detail::kThreads, 0, stream>>>(dinp, dout, pos, tab.cos, tab.sin, R, NH, tab.half);
  FBT_CUDA_CHECK_LAUNCH("rope_backward_kernel");
}

// ========================================================================================= Attention
//
// Causal grouped-query attention with document windows: query t of row b attends to keys
// [first[b, t], t] of the same row; query head h reads key/value head h / (NH / NKV).
// Forward, per (b, h) and a block of 32 query rows (one thread per row, one warp per block):
//   the key/value tiles [first of the block's first row, its last row] are staged in shared memory;
//   each thread keeps its running max m, its sum l and its output o (registers) and, per tile,
//   rescales o and l once by exp(m_old - m_new) (online softmax). At the end o /= l and the row's
//   logsumexp lse = m + log l (of the scaled scores) is stored: (B, NH, T), all backward needs.
// Backward (FlashAttention-2 order, no atomics): Dt_i = dO_i . O_i (= rowsum(dA * A) of the CPU
// kernel), then p_ij = exp(s_ij - lse_i) is recomputed and
//   ds_ij = p_ij (dO_i . v_j - Dt_i)
//   dv_j += sum_i p_ij dO_i,  dk_j += scale sum_i ds_ij q_i      (one thread per key row, all heads of its group)
//   dq_i += scale sum_j ds_ij k_j                                (one thread per query row)
// HS is the head size rounded up to 16, 32, 64 or 128 (shared tiles are zero-padded beyond hs).

namespace detail {

/// Tile sizes: 32 rows per block (one thread per row); the staged tile is 32 rows for HS <= 64 and 8
/// for HS = 128, which keeps every kernel's static shared memory under 48 KiB.
template <int HS> struct AttnTile {
  static constexpr int kRows = 32;
  static constexpr int kTile = HS <= 64 ? 32 : 8;
};

/// Loads rows [r0, r0 + nrows) of one head (columns [col, col + hs) of a (B*T, ld) buffer, batch row b)
/// into a (nrows, HSP) shared tile, zero beyond hs or beyond T. All threads of the block take part.
template <int HSP, class T>
__device__ void load_tile(T* tile, const T* src, long b, int T_, int r0, int nrows, int ld, int col, int hs) {
  for (int idx = threadIdx.x; idx < nrows * HSP; idx += blockDim.x) {
    const int r = idx / HSP, d = idx % HSP, t = r0 + r;
    tile[idx] = (t < T_ && d < hs) ? src[(b * T_ + t) * long(ld) + col + d] : T(0);
  }
}
/// As load_tile, into a tile whose rows are HS + 1 apart (rows owned by one thread each: the padding
/// puts thread r's element d in bank (r + d) % 32, so a warp reading "its own row" has no conflicts).
template <int HS, class T>
__device__ void load_own_rows(T (*tile)[HS + 1], const T* src, long b, int T_, int r0, int ld, int col, int hs) {
  constexpr int R = AttnTile<HS>::kRows;
  for (int idx = threadIdx.x; idx < R * HS; idx += blockDim.x) {
    const int r = idx / HS, d = idx % HS, t = r0 + r;
    tile[r][d] = (t < T_ && d < hs) ? src[(b * T_ + t) * long(ld) + col + d] : T(0);
  }
}

}  // namespace detail

/// grid (ceil(T/32), NH, B), block 32.  out (B*T, NH*hs), lse (B, NH, T); q (B*T, NH*hs), k, v (B*T, NKV*hs).
template <int HS, class T>
__global__ void __launch_bounds__(32) attention_forward_kernel(T* out, T* lse, const T* q, const T* k, const T* v, const int* first, int T_,
                                                               int NH, int NKV, int hs, T scale) {
  constexpr int BR = detail::AttnTile<HS>::kRows, BC = detail::AttnTile<HS>::kTile;
  __shared__ T Qs[BR][HS + 1];
  __shared__ T Ks[BC * HS];
  __shared__ T Vs[BC * HS];
  const long b = blockIdx.z;
  const int h = blockIdx.y, kh = h / (NH / NKV), i0 = blockIdx.x * BR, tid = threadIdx.x;
  const int QD = NH * hs, KD = NKV * hs;
  const int i = i0 + tid;  // this thread's query row
  const bool active = i < T_;
  const int* fb = first + b * T_;
  const int fi = active ? fb[i] : 0;
  const int iend = min(i0 + BR, T_);  // keys beyond the block's last row are never visible
  const int k0 = fb[i0];              // nor keys before its first row's window (first is non-decreasing)
  detail::load_own_rows<HS>(Qs, q, b, T_, i0, QD, h * hs, hs);
  T m = -INFINITY, l = 0;
  T o[HS];
#pragma unroll
  for (int d = 0; d < HS; ++d) o[d] = 0;
  for (int j0 = k0; j0 < iend; j0 += BC) {
    __syncthreads();  // the previous tile is consumed (and, the first time, Qs is written)
    // rows past iend (but before T) are loaded too: finite values that the mask below hides
    detail::load_tile<HS>(Ks, k, b, T_, j0, BC, KD, kh * hs, hs);
    detail::load_tile<HS>(Vs, v, b, T_, j0, BC, KD, kh * hs, hs);
    __syncthreads();
    if (!active) continue;
    // scaled scores of this tile; keys outside [first_i, i] are -inf
    T s[BC];
    T mt = -INFINITY;
#pragma unroll
    for (int jj = 0; jj < BC; ++jj) {
      T acc = 0;
#pragma unroll
      for (int d = 0; d < HS; ++d) acc += Qs[tid][d] * Ks[jj * HS + d];
      const int j = j0 + jj;
      s[jj] = (j >= fi && j <= i) ? acc * scale : T(-INFINITY);
      mt = fmaxf(mt, s[jj]);
    }
    if (mt == T(-INFINITY)) continue;  // nothing visible in this tile (earlier document, or later keys)
    // online softmax: rescale what was accumulated so far to the new max, once per tile
    const T mn = fmaxf(m, mt), corr = expf(m - mn);  // m = -inf the first time: corr = 0
    l *= corr;
#pragma unroll
    for (int d = 0; d < HS; ++d) o[d] *= corr;
#pragma unroll
    for (int jj = 0; jj < BC; ++jj) {
      s[jj] = expf(s[jj] - mn);  // exp(-inf) = 0 for hidden keys
      l += s[jj];
    }
#pragma unroll
    for (int d = 0; d < HS; ++d) {
      T acc = 0;
#pragma unroll
      for (int jj = 0; jj < BC; ++jj) acc += s[jj] * Vs[jj * HS + d];
      o[d] += acc;
    }
    m = mn;
  }
  if (!active) return;
  // every row sees at least itself, so l > 0
  const T inv = T(1) / l;
  T* orow = out + (b * T_ + i) * long(QD) + h * hs;
#pragma unroll
  for (int d = 0; d < HS; ++d)
    if (d < hs) orow[d] = o[d] * inv;
  lse[(b * NH + h) * long(T_) + i] = m + logf(l);
}

/// Dt (B, NH, T) = rowsum(dout * out) per head: one warp per (row, head).
template <class T>
__global__ void attention_backward_dot_kernel(T* Dt, const T* dout, const T* out, int B, int T_, int NH, int hs) {
  const int lane = threadIdx.x % detail::kWarp;
  const long w = long(blockIdx.x) * (blockDim.x / detail::kWarp) + threadIdx.x / detail::kWarp;  // (b*T + t) * NH + h
  if (w >= long(B) * T_ * NH) return;
  const long bt = w / NH;
  const int h = int(w % NH);
  const T* a = dout + bt * NH * hs + h * hs;
  const T* o = out + bt * NH * hs + h * hs;
  T acc = 0;
  for (int d = lane; d < hs; d += detail::kWarp) acc += a[d] * o[d];
  acc = detail::warp_sum(acc);
  if (lane == 0) {
    const long b = bt / T_, t = bt % T_;
    Dt[(b * NH + h) * T_ + t] = acc;
  }
}

/// grid (ceil(T/32), NKV, B), block 32: one thread per key row j accumulates dk_j and dv_j over the
/// query heads of its group and the queries that see it (i >= j, first_i <= j).
template <int HS, class T>
__global__ void __launch_bounds__(32) attention_backward_dkv_kernel(T* dk, T* dv, const T* dout, const T* lse, const T* Dt, const T* q,
                                                                    const T* k, const T* v, const int* first, int T_, int NH, int NKV, int hs,
                                                                    T scale) {
  constexpr int BR = detail::AttnTile<HS>::kRows, QT = detail::AttnTile<HS>::kTile;
  __shared__ T Ks[BR][HS + 1];
  __shared__ T Vs[BR][HS + 1];
  __shared__ T Qs[QT * HS];
  __shared__ T dOs[QT * HS];
  __shared__ T Ls[QT], Ds[QT];
  __shared__ int Fs[QT];
  const long b = blockIdx.z;
  const int kh = blockIdx.y, j0 = blockIdx.x * BR, tid = threadIdx.x, group = NH / NKV;
  const int QD = NH * hs, KD = NKV * hs;
  const int j = j0 + tid;  // this thread's key row
  const bool active = j < T_;
  const int jlast = min(j0 + BR, T_) - 1;
  const int* fb = first + b * T_;
  detail::load_own_rows<HS>(Ks, k, b, T_, j0, KD, kh * hs, hs);
  detail::load_own_rows<HS>(Vs, v, b, T_, j0, KD, kh * hs, hs);
  T dka[HS], dva[HS];
#pragma unroll
  for (int d = 0; d < HS; ++d) dka[d] = dva[d] = 0;
  for (int h = kh * group; h < (kh + 1) * group; ++h) {
    const T* lse_h = lse + (b * NH + h) * long(T_);
    const T* D_h = Dt + (b * NH + h) * long(T_);
    // queries before j0 never see this block's keys; once first_i > jlast no later query does either
    for (int i0 = j0; i0 < T_ && fb[i0] <= jlast; i0 += QT) {
      __syncthreads();
      detail::load_tile<HS>(Qs, q, b, T_, i0, QT, QD, h * hs, hs);
      detail::load_tile<HS>(dOs, dout, b, T_, i0, QT, QD, h * hs, hs);
      for (int r = threadIdx.x; r < QT; r += blockDim.x) {
        const int i = i0 + r;
        Ls[r] = i < T_ ? lse_h[i] : T(0);
        Ds[r] = i < T_ ? D_h[i] : T(0);
        Fs[r] = i < T_ ? fb[i] : T_;  // past the end: visible to no key
      }
      __syncthreads();
      if (!active) continue;
      for (int r = 0; r < QT; ++r) {
        const int i = i0 + r;
        if (i < j || i >= T_ || Fs[r] > j) continue;  // key j is visible to query i iff first_i <= j <= i
        T s = 0, dp = 0;
#pragma unroll
        for (int d = 0; d < HS; ++d) {
          s += Qs[r * HS + d] * Ks[tid][d];
          dp += dOs[r * HS + d] * Vs[tid][d];
        }
        const T p = expf(s * scale - Ls[r]);
        const T ds = p * (dp - Ds[r]) * scale;
#pragma unroll
        for (int d = 0; d < HS; ++d) {
          dva[d] += p * dOs[r * HS + d];
          dka[d] += ds * Qs[r * HS + d];
        }
      }
    }
  }
  if (!active) return;
  T* dkrow = dk + (b * T_ + j) * long(KD) + kh * hs;
  T* dvrow = dv + (b * T_ + j) * long(KD) + kh * hs;
#pragma unroll
  for (int d = 0; d < HS; ++d)
    if (d < hs) dkrow[d] += dka[d], dvrow[d] += dva[d];
}

/// grid (ceil(T/32), NH, B), block 32: one thread per query row i accumulates dq_i over its window.
template <int HS, class T>
__global__ void __launch_bounds__(32) attention_backward_dq_kernel(T* dq, const T* dout, const T* lse, const T* Dt, const T* q, const T* k,
                                                                   const T* v, const int* first, int T_, int NH, int NKV, int hs, T scale) {
  constexpr int BR = detail::AttnTile<HS>::kRows, BC = detail::AttnTile<HS>::kTile;
  __shared__ T Qs[BR][HS + 1];
  __shared__ T dOs[BR][HS + 1];
  __shared__ T Ks[BC * HS];
  __shared__ T Vs[BC * HS];
  const long b = blockIdx.z;
  const int h = blockIdx.y, kh = h / (NH / NKV), i0 = blockIdx.x * BR, tid = threadIdx.x;
  const int QD = NH * hs, KD = NKV * hs;
  const int i = i0 + tid;
  const bool active = i < T_;
  const int* fb = first + b * T_;
  const int fi = active ? fb[i] : 0;
  const int iend = min(i0 + BR, T_), k0 = fb[i0];
  detail::load_own_rows<HS>(Qs, q, b, T_, i0, QD, h * hs, hs);
  detail::load_own_rows<HS>(dOs, dout, b, T_, i0, QD, h * hs, hs);
  const T Li = active ? lse[(b * NH + h) * long(T_) + i] : T(0);
  const T Di = active ? Dt[(b * NH + h) * long(T_) + i] : T(0);
  T dqa[HS];
#pragma unroll
  for (int d = 0; d < HS; ++d) dqa[d] = 0;
  for (int j0 = k0; j0 < iend; j0 += BC) {
    __syncthreads();
    detail::load_tile<HS>(Ks, k, b, T_, j0, BC, KD, kh * hs, hs);
    detail::load_tile<HS>(Vs, v, b, T_, j0, BC, KD, kh * hs, hs);
    __syncthreads();
    if (!active) continue;
    for (int jj = 0; jj < BC; ++jj) {
      const int j = j0 + jj;
      if (j < fi || j > i) continue;
      T s = 0, dp = 0;
#pragma unroll
      for (int d = 0; d < HS; ++d) {
        s += Qs[tid][d] * Ks[jj * HS + d];
        dp += dOs[tid][d] * Vs[jj * HS + d];
      }
      const T ds = expf(s * scale - Li) * (dp - Di) * scale;
#pragma unroll
      for (int d = 0; d < HS; ++d) dqa[d] += ds * Ks[jj * HS + d];
    }
  }
  if (!active) return;
  T* dqrow = dq + (b * T_ + i) * long(QD) + h * hs;
#pragma unroll
  for (int d = 0; d < HS; ++d)
    if (d < hs) dqrow[d] += dqa[d];
}

namespace detail {
inline int attn_hs_bucket(int hs) {
  FBT_ASSERT(hs >= 1 && hs <= 128, "cuda attention: head_dim " + std::to_string(hs) + " is not supported (1..128)");
  return hs <= 16 ? 16 : hs <= 32 ? 32 : hs <= 64 ? 64 : 128;
}
inline void attn_check(int B, int T_, int NH, int NKV, int hs) {
  FBT_ASSERT(B > 0 && T_ > 0 && NH > 0 && NKV > 0 && NH % NKV == 0, "cuda attention: bad shape (NKV must divide NH)");
  (void)attn_hs_bucket(hs);
}
template <int HS, class T>
void attention_forward_hs(T* out, T* lse, const T* q, const T* k, const T* v, const int* first, int B, int T_, int NH, int NKV, int hs,
                          cudaStream_t stream) {
  const dim3 grid((T_ + 31) / 32, NH, B);
  attention_forward_kernel<HS, T><<<grid, 32, 0, stream>>>(out, lse, q, k, v, first, T_, NH, NKV, hs, T(1) / sqrtf(T(hs)));
  FBT_CUDA_CHECK_LAUNCH("attention_forward_kernel");
}
template <int HS, class T>
void attention_backward_hs(T* dq, T* dk, T* dv, const T* Dt, const T* dout, const T* lse, const T* q, const T* k, const T* v, const int* first,
                           int B, int T_, int NH, int NKV, int hs, cudaStream_t stream) {
  const T scale = T(1) / sqrtf(T(hs));
  attention_backward_dkv_kernel<HS, T><<<dim3((T_ + 31) / 32, NKV, B), 32, 0, stream>>>(dk, dv, dout, lse, Dt, q, k, v, first, T_, NH, NKV,
                                                                                        hs, scale);
  FBT_CUDA_CHECK_LAUNCH("attention_backward_dkv_kernel");
  attention_backward_dq_kernel<HS, T><<<dim3((T_ + 31) / 32, NH, B), 32, 0, stream>>>(dq, dout, lse, Dt, q, k, v, first, T_, NH, NKV, hs,
                                                                                       scale);
  FBT_CUDA_CHECK_LAUNCH("attention_backward_dq_kernel");
}
}  // namespace detail

/// \brief out (B*T, NH*hs) = attention(q (B*T, NH*hs), k, v (B*T, NKV*hs)); lse (B, NH, T) the logsumexp of
/// each row's scaled scores (what backward needs). first (B*T): each position's window start (device ints;
/// non-decreasing within a row, first[t] <= t: checked on the host by the caller). hs <= 128.
template <class T>
void attention_forward(T* out, T* lse, const T* q, const T* k, const T* v, const int* first, int B, int T_, int NH, int NKV, int hs,
                       cudaStream_t stream) {
  detail::attn_check(B, T_, NH, NKV, hs);
  switch (detail::attn_hs_bucket(hs)) {
    case 16: return detail::attention_forward_hs<16>(out, lse, q, k, v, first, B, T_, NH, NKV, hs, stream);
    case 32: return detail::attention_forward_hs<32>(out, lse, q, k, v, first, B, T_, NH, NKV, hs, stream);
    case 64: return detail::attention_forward_hs<64>(out, lse, q, k, v, first, B, T_, NH, NKV, hs, stream);
    default: return detail::attention_forward_hs<128>(out, lse, q, k, v, first, B, T_, NH, NKV, hs, stream);
  }
}

/// \brief Accumulates dq, dk, dv from dout; needs out, lse and the q, k, v of the same forward.
/// Dt: (B, NH, T) scratch, overwritten.
template <class T>
void attention_backward(T* dq, T* dk, T* dv, T* Dt, const T* dout, const T* out, const T* lse, const T* q, const T* k, const T* v,
                        const int* first, int B, int T_, int NH, int NKV, int hs, cudaStream_t stream) {
  detail::attn_check(B, T_, NH, NKV, hs);
  const long rows = long(B) * T_ * NH;
  const int warps = detail::kThreads / detail::kWarp;
  attention_backward_dot_kernel<T><<<unsigned((rows + warps - 1) / warps), detail::kThreads, 0, stream>>>(Dt, dout, out, B, T_, NH, hs);
  FBT_CUDA_CHECK_LAUNCH("attention_backward_dot_kernel");
  switch (detail::attn_hs_bucket(hs)) {
    case 16: return detail::attention_backward_hs<16>(dq, dk, dv, Dt, dout, lse, q, k, v, first, B, T_, NH, NKV, hs, stream);
    case 32: return detail::attention_backward_hs<32>(dq, dk, dv, Dt, dout, lse, q, k, v, first, B, T_, NH, NKV, hs, stream);
    case 64: return detail::attention_backward_hs<64>(dq, dk, dv, Dt, dout, lse, q, k, v, first, B, T_, NH, NKV, hs, stream);
    default: return detail::attention_backward_hs<128>(dq, dk, dv, Dt, dout, lse, q, k, v, first, B, T_, NH, NKV, hs, stream);
  }
}

// ====================================================================================== Decode steps

/// grid (R, NH), block 128: row r's query head h against its sequence's cache of this layer (len1[r]
/// positions, itself last). kc[r], vc[r]: that (capacity, NKV*hs) cache, already offset to the layer.
/// Shared memory: the len1 scores (dynamic) and the query (static, hs <= 128).
template <class T>
__global__ void attention_decode_kernel(T* out, const T* q, const T* const* kc, const T* const* vc, const int* len1, int NH, int NKV, int hs, T scale) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* p = reinterpret_cast<T*>(smem_raw);  // (len1)
  __shared__ T qs[128];
  __shared__ T red[32];
  const int r = blockIdx.x, h = blockIdx.y, kh = h / (NH / NKV), KD = NKV * hs, QD = NH * hs, n = len1[r];
  const T* K = kc[r] + kh * hs;
  const T* V = vc[r] + kh * hs;
  for (int d = threadIdx.x; d < hs; d += blockDim.x) qs[d] = q[long(r) * QD + h * hs + d];
  __syncthreads();
  T mx = -INFINITY;
  for (int j = threadIdx.x; j < n; j += blockDim.x) {
    T acc = 0;
    for (int d = 0; d < hs; ++d) acc += qs[d] * K[long(j) * KD + d];
    p[j] = acc * scale;
    mx = fmaxf(mx, p[j]);
  }
  mx = detail::block_max(mx, red);
  T sum = 0;
  for (int j = threadIdx.x; j < n; j += blockDim.x) {
    p[j] = expf(p[j] - mx);
    sum += p[j];
  }
  sum = detail::block_sum(sum, red);  // ends with a barrier: every p[j] is written
  for (int d = threadIdx.x; d < hs; d += blockDim.x) {
    T acc = 0;
    for (int j = 0; j < n; ++j) acc += p[j] * V[long(j) * KD + d];
    out[long(r) * QD + h * hs + d] = acc / sum;
  }
}

/// \brief out (R, NH*hs): each of R new positions attends to its own sequence's cache (len1[r] positions,
/// the new one written last by kv_append). kc, vc (R): device pointers to each sequence's (capacity,
/// NKV*hs) cache of this layer; len1 (R) device ints, max_len1 their maximum (host).
template <class T>
void attention_decode(T* out, const T* q, const T* const* kc, const T* const* vc, const int* len1, int max_len1, int R, int NH, int NKV, int hs,
                      cudaStream_t stream) {
  FBT_ASSERT(R > 0 && NH % NKV == 0 && hs >= 1 && hs <= 128, "cuda attention_decode: bad shape");
  const std::size_t smem = std::size_t(std::max(1, max_len1)) * sizeof(T);
  FBT_ASSERT(smem <= 48 * 1024 - 640, "cuda attention_decode: " + std::to_string(max_len1) + " cached positions exceed the kernel's 12k limit");
  attention_decode_kernel<T><<<dim3(R, NH), 128, smem, stream>>>(out, q, kc, vc, len1, NH, NKV, hs, T(1) / sqrtf(T(hs)));
  FBT_CUDA_CHECK_LAUNCH("attention_decode_kernel");
}

/// Writes row r of k, v (R, KD) at position pos[r] of sequence r's caches kc[r], vc[r] (this layer's).
template <class T> __global__ void kv_append_kernel(T* const* kc, T* const* vc, const T* k, const T* v, const int* pos, int R, int KD) {
  const long n = long(R) * KD;
  for (long idx = long(blockIdx.x) * blockDim.x + threadIdx.x; idx < n; idx += long(gridDim.x) * blockDim.x) {
    const int r = int(idx / KD), c = int(idx % KD);
    const long at = long(pos[r]) * KD + c;
    kc[r][at] = k[idx];
    vc[r][at] = v[idx];
  }
}
/// \brief Row r of k, v (R, KD) -> kc[r], vc[r] at position pos[r] (device pointers and ints, R each).
template <class T> void kv_append(T* const* kc, T* const* vc, const T* k, const T* v, const int* pos, int R, int KD, cudaStream_t stream) {
  if (R == 0) return;
  kv_append_kernel<T><<<detail::grid_for(std::size_t(R) * KD), detail::kThreads, 0, stream>>>(kc, vc, k, v, pos, R, KD);
  FBT_CUDA_CHECK_LAUNCH("kv_append_kernel");
}

/// dst (R, C): row r = src[r] (a device pointer per row) where mask[r] != 0, else zeros.
template <class T> __global__ void gather_rows_kernel(T* dst, const T* const* src, const T* mask, int R, int C) {
  const long n = long(R) * C;
  for (long idx = long(blockIdx.x) * blockDim.x + threadIdx.x; idx < n; idx += long(gridDim.x) * blockDim.x) {
    const int r = int(idx / C);
    dst[idx] = mask[r] != T(0) ? src[r][idx % C] : T(0);
  }
}
template <class T> void gather_rows(T* dst, const T* const* src, const T* mask, int R, int C, cudaStream_t stream) {
  if (R == 0) return;
  gather_rows_kernel<T><<<detail::grid_for(std::size_t(R) * C), detail::kThreads, 0, stream>>>(dst, src, mask, R, C);
  FBT_CUDA_CHECK_LAUNCH("gather_rows_kernel");
}
/// dst[r] (a device pointer per row) = row r of src (R, C).
template <class T> __global__ void scatter_rows_kernel(T* const* dst, const T* src, int R, int C) {
  const long n = long(R) * C;
  for (long idx = long(blockIdx.x) * blockDim.x + threadIdx.x; idx < n; idx += long(gridDim.x) * blockDim.x) dst[idx / C][idx % C] = src[idx];
}
template <class T> void scatter_rows(T* const* dst, const T* src, int R, int C, cudaStream_t stream) {
  if (R == 0) return;
  scatter_rows_kernel<T><<<detail::grid_for(std::size_t(R) * C), detail::kThreads, 0, stream>>>(dst, src, R, C);
  FBT_CUDA_CHECK_LAUNCH("scatter_rows_kernel");
}

// ======================================================================================= Elementwise

template <class T> __global__ void swiglu_forward_kernel(T* h, const T* g, const T* u, long n) {
  for (long i = long(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += long(gridDim.x) * blockDim.x)
    h[i] = g[i] / (T(1) + expf(-g[i])) * u[i];
}
/// dg += dh u sigmoid(g) (1 + g (1 - sigmoid(g))),  du += dh silu(g)
template <class T> __global__ void swiglu_backward_kernel(T* dg, T* du, const T* dh, const T* g, const T* u, long n) {
  for (long i = long(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += long(gridDim.x) * blockDim.x) {
    const T G = g[i], sg = detail::sigmoidf_(G), DH = dh[i];
    dg[i] += DH * u[i] * sg * (T(1) + G * (T(1) - sg));
    du[i] += DH * G * sg;
  }
}
template <class T> __global__ void sigmoid_gate_forward_kernel(T* y, const T* a, const T* z, long n) {
  for (long i = long(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += long(gridDim.x) * blockDim.x) y[i] = a[i] / (T(1) + expf(-z[i]));
}
/// da += dy sigmoid(z),  dz += dy a sigmoid(z) (1 - sigmoid(z)); a null da or dz is skipped.
template <class T> __global__ void sigmoid_gate_backward_kernel(T* da, T* dz, const T* dy, const T* a, const T* z, long n) {
  for (long i = long(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += long(gridDim.x) * blockDim.x) {
    const T sg = detail::sigmoidf_(z[i]), DY = dy[i];
    if (da) da[i] += DY * sg;
    if (dz) dz[i] += DY * a[i] * sg * (T(1) - sg);
  }
}

/// \brief h = silu(g) * u, all (n) (h may alias g or u).
template <class T> void swiglu_forward(T* h, const T* g, const T* u, std::size_t n, cudaStream_t stream) {
  if (n == 0) return;
  swiglu_forward_kernel<T><<<detail::grid_for(n), detail::kThreads, 0, stream>>>(h, g, u, long(n));
  FBT_CUDA_CHECK_LAUNCH("swiglu_forward_kernel");
}
/// \brief Accumulates dg, du (n) from dh.
template <class T> void swiglu_backward(T* dg, T* du, const T* dh, const T* g, const T* u, std::size_t n, cudaStream_t stream) {
  if (n == 0) return;
  swiglu_backward_kernel<T><<<detail::grid_for(n), detail::kThreads, 0, stream>>>(dg, du, dh, g, u, long(n));
  FBT_CUDA_CHECK_LAUNCH("swiglu_backward_kernel");
}
/// \brief y = a * sigmoid(z), all (n).
template <class T> void sigmoid_gate_forward(T* y, const T* a, const T* z, std::size_t n, cudaStream_t stream) {
  if (n == 0) return;
  sigmoid_gate_forward_kernel<T><<<detail::grid_for(n), detail::kThreads, 0, stream>>>(y, a, z, long(n));
  FBT_CUDA_CHECK_LAUNCH("sigmoid_gate_forward_kernel");
}
/// \brief Accumulates da, dz (n) from dy; a null da or dz is skipped.
template <class T> void sigmoid_gate_backward(T* da, T* dz, const T* dy, const T* a, const T* z, std::size_t n, cudaStream_t stream) {
  if (n == 0) return;
  sigmoid_gate_backward_kernel<T><<<detail::grid_for(n), detail::kThreads, 0, stream>>>(da, dz, dy, a, z, long(n));
  FBT_CUDA_CHECK_LAUNCH("sigmoid_gate_backward_kernel");
}

// ========================================================================== elementwise products, broadcast scale, sigmoid

template <class T> __global__ void mul_kernel(T* y, const T* a, const T* b, long n) {
  for (long i = long(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += long(gridDim.x) * blockDim.x) y[i] = a[i] * b[i];
}
template <class T> __global__ void mul_add_kernel(T* y, const T* a, const T* b, long n) {
  for (long i = long(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += long(gridDim.x) * blockDim.x) y[i] += a[i] * b[i];
}
/// da += dy b,  db += dy a; a null da or db is skipped.
template <class T> __global__ void mul_backward_kernel(T* da, T* db, const T* dy, const T* a, const T* b, long n) {
  for (long i = long(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += long(gridDim.x) * blockDim.x) {
    if (da) da[i] += dy[i] * b[i];
    if (db) db[i] += dy[i] * a[i];
  }
}
/// y[i] = x[i] s[i / C]: element i of x (R, G*C) belongs to group i / C of s (R, G).
template <class T> __global__ void scale_groups_kernel(T* y, const T* x, const T* s, long n, int C) {
  for (long i = long(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += long(gridDim.x) * blockDim.x) y[i] = x[i] * s[i / C];
}
/// One thread per group (r, g): dx += dy s over its C elements, ds += their sum of dy x.
template <class T> __global__ void scale_groups_backward_kernel(T* dx, T* ds, const T* dy, const T* x, const T* s, long groups, int C) {
  for (long rg = long(blockIdx.x) * blockDim.x + threadIdx.x; rg < groups; rg += long(gridDim.x) * blockDim.x) {
    const T sg = s[rg];
    T acc = 0;
    for (long i = rg * C; i < (rg + 1) * C; ++i) {
      if (dx) dx[i] += dy[i] * sg;
      acc += dy[i] * x[i];
    }
    if (ds) ds[rg] += acc;
  }
}
template <class T> __global__ void sigmoid_kernel(T* y, const T* z, long n) {
  for (long i = long(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += long(gridDim.x) * blockDim.x) y[i] = detail::sigmoidf_(z[i]);
}
/// dz += dy y (1 - y), y the forward's output.
template <class T> __global__ void sigmoid_backward_kernel(T* dz, const T* dy, const T* y, long n) {
  for (long i = long(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += long(gridDim.x) * blockDim.x) dz[i] += dy[i] * y[i] * (T(1) - y[i]);
}

/// \brief y = a * b, all (n) (y may alias a or b).
template <class T> void mul(T* y, const T* a, const T* b, std::size_t n, cudaStream_t stream) {
  if (n == 0) return;
  mul_kernel<T><<<detail::grid_for(n), detail::kThreads, 0, stream>>>(y, a, b, long(n));
  FBT_CUDA_CHECK_LAUNCH("mul_kernel");
}
/// \brief y += a * b, all (n).
template <class T> void mul_add(T* y, const T* a, const T* b, std::size_t n, cudaStream_t stream) {
  if (n == 0) return;
  mul_add_kernel<T><<<detail::grid_for(n), detail::kThreads, 0, stream>>>(y, a, b, long(n));
  FBT_CUDA_CHECK_LAUNCH("mul_add_kernel");
}
/// \brief Backward of mul and mul_add: accumulates da, db (n) from dy; a null da or db is skipped.
template <class T> void mul_backward(T* da, T* db, const T* dy, const T* a, const T* b, std::size_t n, cudaStream_t stream) {
  if (n == 0) return;
  mul_backward_kernel<T><<<detail::grid_for(n), detail::kThreads, 0, stream>>>(da, db, dy, a, b, long(n));
  FBT_CUDA_CHECK_LAUNCH("mul_backward_kernel");
}
/// \brief y (R, G*C) = x (R, G*C) scaled by s (R, G) over each group of C (y may alias x).
template <class T> void scale_groups(T* y, const T* x, const T* s, int R, int G, int C, cudaStream_t stream) {
  const std::size_t n = std::size_t(R) * G * C;
  if (n == 0) return;
  scale_groups_kernel<T><<<detail::grid_for(n), detail::kThreads, 0, stream>>>(y, x, s, long(n), C);
  FBT_CUDA_CHECK_LAUNCH("scale_groups_kernel");
}
/// \brief dx (R, G*C) += dy s (broadcast), ds (R, G) += sums over C of dy x; a null dx or ds is skipped.
template <class T> void scale_groups_backward(T* dx, T* ds, const T* dy, const T* x, const T* s, int R, int G, int C, cudaStream_t stream) {
  const std::size_t groups = std::size_t(R) * G;
  if (groups == 0 || C == 0) return;
  scale_groups_backward_kernel<T><<<detail::grid_for(groups), detail::kThreads, 0, stream>>>(dx, ds, dy, x, s, long(groups), C);
  FBT_CUDA_CHECK_LAUNCH("scale_groups_backward_kernel");
}
/// \brief y = sigmoid(z), all (n) (y may alias z).
template <class T> void sigmoid(T* y, const T* z, std::size_t n, cudaStream_t stream) {
  if (n == 0) return;
  sigmoid_kernel<T><<<detail::grid_for(n), detail::kThreads, 0, stream>>>(y, z, long(n));
  FBT_CUDA_CHECK_LAUNCH("sigmoid_kernel");
}
/// \brief dz += dy y (1 - y), all (n), y = sigmoid(z) the forward's output.
template <class T> void sigmoid_backward(T* dz, const T* dy, const T* y, std::size_t n, cudaStream_t stream) {
  if (n == 0) return;
  sigmoid_backward_kernel<T><<<detail::grid_for(n), detail::kThreads, 0, stream>>>(dz, dy, y, long(n));
  FBT_CUDA_CHECK_LAUNCH("sigmoid_backward_kernel");
}

/// y = a x + b y (b = 0: y = a x, y's old contents never read, so a NaN there does not leak).
template <class T> __global__ void axpby_kernel(T* y, T a, const T* x, T b, long n) {
  for (long i = long(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += long(gridDim.x) * blockDim.x)
    y[i] = b == T(0) ? a * x[i] : a * x[i] + b * y[i];
}
/// \brief y = a x + b y over n elements (add: a = b = 1).
template <class T> void axpby(T* y, T a, const T* x, T b, std::size_t n, cudaStream_t stream) {
  if (n == 0) return;
  axpby_kernel<T><<<detail::grid_for(n), detail::kThreads, 0, stream>>>(y, a, x, b, long(n));
  FBT_CUDA_CHECK_LAUNCH("axpby_kernel");
}

/// Plain rows (mask[r] == 0) of a fed-back pass: dst.row(r) = src.row(r).
template <class T> __global__ void copy_plain_rows_kernel(T* dst, const T* src, const T* mask, int R, int C) {
  const long n = long(R) * C;
  for (long i = long(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += long(gridDim.x) * blockDim.x)
    if (mask[i / C] == T(0)) dst[i] = src[i];
}
/// Plain rows: dst.row(r) += src.row(r), then src.row(r) = 0 (their gradient goes to e, not the fuser).
template <class T> __global__ void move_plain_rows_kernel(T* dst, T* src, const T* mask, int R, int C) {
  const long n = long(R) * C;
  for (long i = long(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += long(gridDim.x) * blockDim.x)
    if (mask[i / C] == T(0)) dst[i] += src[i], src[i] = T(0);
}
/// \brief Rows with mask 0: dst = src.  dst, src (R, C); mask (R).
template <class T> void copy_plain_rows(T* dst, const T* src, const T* mask, int R, int C, cudaStream_t stream) {
  if (R == 0) return;
  copy_plain_rows_kernel<T><<<detail::grid_for(std::size_t(R) * C), detail::kThreads, 0, stream>>>(dst, src, mask, R, C);
  FBT_CUDA_CHECK_LAUNCH("copy_plain_rows_kernel");
}
/// \brief Rows with mask 0: dst += src, src = 0.
template <class T> void move_plain_rows(T* dst, T* src, const T* mask, int R, int C, cudaStream_t stream) {
  if (R == 0) return;
  move_plain_rows_kernel<T><<<detail::grid_for(std::size_t(R) * C), detail::kThreads, 0, stream>>>(dst, src, mask, R, C);
  FBT_CUDA_CHECK_LAUNCH("move_plain_rows_kernel");
}

// ============================================================================ shift_right, embedding

/// out[b, t] = inp[b, t-1] (t >= 1), out[b, 0] = 0.  (B*T, C)
template <class T> __global__ void shift_right_forward_kernel(T* out, const T* inp, int T_, long n, int C) {
  for (long i = long(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += long(gridDim.x) * blockDim.x)
    out[i] = (i / C) % T_ == 0 ? T(0) : inp[i - C];
}
/// dinp[b, t-1] += dout[b, t]
template <class T> __global__ void shift_right_backward_kernel(T* dinp, const T* dout, int T_, long n, int C) {
  for (long i = long(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += long(gridDim.x) * blockDim.x)
    if ((i / C) % T_ != T_ - 1) dinp[i] += dout[i + C];
}
/// \brief out, inp (B*T, C): each row's sequence moved one position later, position 0 zero.
template <class T> void shift_right_forward(T* out, const T* inp, int B, int T_, int C, cudaStream_t stream) {
  const std::size_t n = std::size_t(B) * T_ * C;
  if (n == 0) return;
  shift_right_forward_kernel<T><<<detail::grid_for(n), detail::kThreads, 0, stream>>>(out, inp, T_, long(n), C);
  FBT_CUDA_CHECK_LAUNCH("shift_right_forward_kernel");
}
/// \brief dinp (B*T, C) += dout shifted one position earlier.
template <class T> void shift_right_backward(T* dinp, const T* dout, int B, int T_, int C, cudaStream_t stream) {
  const std::size_t n = std::size_t(B) * T_ * C;
  if (n == 0) return;
  shift_right_backward_kernel<T><<<detail::grid_for(n), detail::kThreads, 0, stream>>>(dinp, dout, T_, long(n), C);
  FBT_CUDA_CHECK_LAUNCH("shift_right_backward_kernel");
}

template <class T> __global__ void embedding_forward_kernel(T* out, const int* tokens, const T* E, long n, int C) {
  for (long i = long(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += long(gridDim.x) * blockDim.x)
    out[i] = E[long(tokens[i / C]) * C + i % C];
}
template <class T> __global__ void embedding_backward_kernel(T* dE, const T* dout, const int* tokens, long n, int C) {
  for (long i = long(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += long(gridDim.x) * blockDim.x)
    atomicAdd(dE + long(tokens[i / C]) * C + i % C, dout[i]);
}
/// \brief out (N, C) = rows of E (V, C) picked by tokens (N, device; range-checked by the caller on the host).
template <class T> void embedding_forward(T* out, const int* tokens, const T* E, int N, int C, cudaStream_t stream) {
  const std::size_t n = std::size_t(N) * C;
  if (n == 0) return;
  embedding_forward_kernel<T><<<detail::grid_for(n), detail::kThreads, 0, stream>>>(out, tokens, E, long(n), C);
  FBT_CUDA_CHECK_LAUNCH("embedding_forward_kernel");
}
/// \brief dE (V, C) += dout (N, C) scattered by tokens (atomic: repeated tokens add up).
template <class T> void embedding_backward(T* dE, const T* dout, const int* tokens, int N, int C, cudaStream_t stream) {
  const std::size_t n = std::size_t(N) * C;
  if (n == 0) return;
  embedding_backward_kernel<T><<<detail::grid_for(n), detail::kThreads, 0, stream>>>(dE, dout, tokens, long(n), C);
  FBT_CUDA_CHECK_LAUNCH("embedding_backward_kernel");
}

// ============================================================================================== bias

template <class T> __global__ void bias_forward_kernel(T* out, const T* b, long n, int C) {
  for (long i = long(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += long(gridDim.x) * blockDim.x) out[i] += b[i % C];
}
/// Column sums: block (256 columns) x grid.y (chunks of 256 rows); one atomicAdd per column per chunk.
template <class T> __global__ void bias_backward_kernel(T* db, const T* dout, int R, int C) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C) return;
  const int r0 = blockIdx.y * 256, r1 = min(R, r0 + 256);
  T acc = 0;
  for (int r = r0; r < r1; ++r) acc += dout[long(r) * C + c];
  atomicAdd(db + c, acc);
}
/// \brief out (R, C) += b (C) on every row.
template <class T> void bias_forward(T* out, const T* b, int R, int C, cudaStream_t stream) {
  const std::size_t n = std::size_t(R) * C;
  if (n == 0) return;
  bias_forward_kernel<T><<<detail::grid_for(n), detail::kThreads, 0, stream>>>(out, b, long(n), C);
  FBT_CUDA_CHECK_LAUNCH("bias_forward_kernel");
}
/// \brief db (C) += column sums of dout (R, C).
template <class T> void bias_backward(T* db, const T* dout, int R, int C, cudaStream_t stream) {
  if (R == 0 || C == 0) return;
  bias_backward_kernel<T><<<dim3((C + 255) / 256, (R + 255) / 256), 256, 0, stream>>>(db, dout, R, C);
  FBT_CUDA_CHECK_LAUNCH("bias_backward_kernel");
}

// ========================================================================== softmax cross-entropy

/// One block per row: m = max, sum = sum exp(l - m), p = exp(l - m) / sum in place, lse = m + log sum,
/// loss = lse - l_y + z lse^2 (0 for an ignored target y < 0).
template <class T>
__global__ void softmax_xent_forward_kernel(T* logits, T* losses, T* lse, const int* targets, int V, T z_loss) {
  __shared__ T red[32];
  __shared__ T ly_s;
  const long n = blockIdx.x;
  T* row = logits + n * V;
  const int y = targets[n];
  T mx = -INFINITY;
  for (int c = threadIdx.x; c < V; c += blockDim.x) mx = fmaxf(mx, row[c]);
  mx = detail::block_max(mx, red);
  T sum = 0;
  for (int c = threadIdx.x; c < V; c += blockDim.x) sum += expf(row[c] - mx);
  if (threadIdx.x == 0) ly_s = y >= 0 ? row[y] : T(0);  // read before the row is overwritten below
  sum = detail::block_sum(sum, red);                     // ends with a barrier: ly_s is visible
  const T inv = T(1) / sum;
  for (int c = threadIdx.x; c < V; c += blockDim.x) row[c] = expf(row[c] - mx) * inv;
  if (threadIdx.x == 0) {
    const T l = mx + logf(sum);
    lse[n] = l;
    losses[n] = y >= 0 ? l - ly_s + z_loss * l * l : T(0);
  }
}
/// probs -> dlogits in place: scale (1 + 2 z lse) p - scale [v = y]; zero rows where y < 0.
template <class T>
__global__ void softmax_xent_backward_kernel(T* probs, const T* lse, const int* targets, long n, int V, double scale, double z_loss) {
  for (long i = long(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += long(gridDim.x) * blockDim.x) {
    const long r = i / V;
    const int y = targets[r];
    if (y < 0) {
      probs[i] = T(0);
      continue;
    }
    // the factor is computed in double and rounded once, as the CPU kernel does
    T v = probs[i] * T(scale * (1.0 + 2.0 * z_loss * double(lse[r])));
    if (i % V == y) v -= T(scale);
    probs[i] = v;
  }
}
/// \brief logits (N, V) -> probabilities in place; losses (N), lse (N) written. targets (N, device;
/// checked < V by the caller). The caller sums the losses (in double, on the host).
template <class T>
void softmax_xent_forward(T* logits, T* losses, T* lse, const int* targets, int N, int V, double z_loss, cudaStream_t stream) {
  if (N == 0) return;
  FBT_ASSERT(V > 0, "cuda softmax_xent_forward: empty vocabulary");
  softmax_xent_forward_kernel<T><<<N, 256, 0, stream>>>(logits, losses, lse, targets, V, T(z_loss));
  FBT_CUDA_CHECK_LAUNCH("softmax_xent_forward_kernel");
}
/// \brief probabilities (N, V) -> dlogits in place: scale * (p - onehot(y) + 2 z lse p); zero for ignored rows.
template <class T>
void softmax_xent_backward(T* probs, const T* lse, const int* targets, int N, int V, double scale, double z_loss, cudaStream_t stream) {
  const std::size_t n = std::size_t(N) * V;
  if (n == 0) return;
  softmax_xent_backward_kernel<T><<<detail::grid_for(n), detail::kThreads, 0, stream>>>(probs, lse, targets, long(n), V, scale, z_loss);
  FBT_CUDA_CHECK_LAUNCH("softmax_xent_backward_kernel");
}

// ============================================================================================ AdamW

/// m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;  p -= lr (m/bc1 / (sqrt(v/bc2) + eps) + wd p), in T, in the
/// CPU kernel's order (train/adamw.hpp).
template <class T>
__global__ void adamw_kernel(T* p, const T* g, T* m, T* v, long n, T b1, T b2, T ib1, T ib2, T rbc1, T rbc2, T eps, T lr, T wd) {
  for (long i = long(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += long(gridDim.x) * blockDim.x) {
    const T G = g[i];
    const T M = b1 * m[i] + ib1 * G;
    const T Vv = b2 * v[i] + ib2 * G * G;
    m[i] = M, v[i] = Vv;
    p[i] -= lr * ((M * rbc1) / (sqrtf(Vv * rbc2) + eps) + wd * p[i]);
  }
}
/// \brief One AdamW step over one tensor of n elements (wd: its decoupled weight decay, 0 for gains/biases);
/// the rates are computed in double on the host and rounded once (train/adamw.hpp).
template <class T> void adamw_update_tensor(T* p, const T* g, T* m, T* v, std::size_t n, const AdamWRates<T>& a, T wd, cudaStream_t stream) {
  if (n == 0) return;
  adamw_kernel<T><<<detail::grid_for(n), detail::kThreads, 0, stream>>>(p, g, m, v, long(n), a.b1, a.b2, a.ib1, a.ib2, a.rbc1, a.rbc2, a.eps,
                                                                        a.lr, wd);
  FBT_CUDA_CHECK_LAUNCH("adamw_kernel");
}

// ============================================================================ NorMuon row statistics

/// out[r] = sum over row r of x^2 (rows of C), accumulated in double and rounded to T once: one block per
/// row, so each row's sum has a fixed order (deterministic).
template <class T> __global__ void row_sumsq_kernel(T* out, const T* x, int C) {
  __shared__ double red[32];
  const long r = blockIdx.x;
  double s = 0;
  for (int c = threadIdx.x; c < C; c += blockDim.x) s += double(x[r * C + c]) * double(x[r * C + c]);
  s = detail::block_sum(s, red);
  if (threadIdx.x == 0) out[r] = T(s);
}
/// \brief out (R) = the sum of squares of each row of x (R, C) (train/muon.hpp: NorMuon's second moment).
template <class T> void row_sumsq(T* out, const T* x, int R, int C, cudaStream_t stream) {
  if (R == 0) return;
  row_sumsq_kernel<T><<<R, 128, 0, stream>>>(out, x, C);
  FBT_CUDA_CHECK_LAUNCH("row_sumsq_kernel");
}
/// x[i] /= sqrt(v[row of i]) + eps, in T (the CPU's order: root, add, divide).
template <class T> __global__ void row_div_sqrt_kernel(T* x, const T* v, long n, int C, T eps) {
  for (long i = long(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += long(gridDim.x) * blockDim.x) x[i] = x[i] / (sqrtf(v[i / C]) + eps);
}
/// \brief Row r of x (R, C) divided by sqrt(v[r]) + eps (NorMuon's neuron-wise normalisation).
template <class T> void row_div_sqrt(T* x, const T* v, int R, int C, T eps, cudaStream_t stream) {
  const std::size_t n = std::size_t(R) * C;
  if (n == 0) return;
  row_div_sqrt_kernel<T><<<detail::grid_for(n), detail::kThreads, 0, stream>>>(x, v, long(n), C, eps);
  FBT_CUDA_CHECK_LAUNCH("row_div_sqrt_kernel");
}

// ============================================================================ jitter, reductions

/// out = src + U(lo, hi) noise, bit for bit the CPU's draws (CpuBackend::jitter_add): batch row r uses the
/// SplitMix64 stream seeded fbt::jitter_row_seed(seed, row_offset + r) (backend/backend.hpp), i.e.
/// seed ^ (0xD1B54A32D192ED03 * (row_offset + r + 1)); its i-th element is that
/// stream's (i+1)-th output, which SplitMix64 computes directly (a counter-based generator), so every
/// element is drawn independently. The double arithmetic uses the _rn intrinsics: no FMA contraction,
/// the same rounding as the CPU's lo + (hi - lo) * x * 2^-53.
template <class T>
__global__ void jitter_add_kernel(T* out, const T* src, unsigned long long seed, long row_offset, long n, long row_len, double lo, double hi) {
  for (long i = long(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += long(gridDim.x) * blockDim.x) {
    const unsigned long long r = (unsigned long long)(i / row_len), k = (unsigned long long)(i % row_len);
    const unsigned long long s0 = seed ^ (0xD1B54A32D192ED03ull * (unsigned long long)(row_offset + r + 1));
    unsigned long long z = s0 + (k + 1) * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    const double u = __dadd_rn(lo, __dmul_rn(__dmul_rn(__dsub_rn(hi, lo), double(z >> 11)), 1.0 / 9007199254740992.0));
    out[i] = src[i] + T(u);
  }
}
/// \brief out (B, row_len) = src + the jitter of a fed-back pass (sigma: U(-sigma, sigma)).
template <class T>
void jitter_add(T* out, const T* src, std::uint64_t seed, int row_offset, int B, std::size_t row_len, double sigma, cudaStream_t stream) {
  const std::size_t n = std::size_t(B) * row_len;
  if (n == 0) return;
  jitter_add_kernel<T><<<detail::grid_for(n), detail::kThreads, 0, stream>>>(out, src, (unsigned long long)seed, long(row_offset), long(n),
                                                                             long(row_len), -sigma, sigma);
  FBT_CUDA_CHECK_LAUNCH("jitter_add_kernel");
}

/// acc[0] += sum x^2 over n elements (in double).
template <class T> __global__ void sum_squares_kernel(double* acc, const T* x, long n) {
  __shared__ double red[32];
  double s = 0;
  for (long i = long(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += long(gridDim.x) * blockDim.x) s += double(x[i]) * double(x[i]);
  s = detail::block_sum(s, red);
  if (threadIdx.x == 0) atomicAdd(acc, s);
}
/// \brief acc (device double) += sum of squares of x (n).
template <class T> void sum_squares(double* acc, const T* x, std::size_t n, cudaStream_t stream) {
  if (n == 0) return;
  sum_squares_kernel<T><<<std::min(detail::grid_for(n), 1024u), detail::kThreads, 0, stream>>>(acc, x, long(n));
  FBT_CUDA_CHECK_LAUNCH("sum_squares_kernel");
}
/// x = T(double(x) * s) over n elements (the CPU clip_grad_norm's arithmetic).
template <class T> __global__ void scale_kernel(T* x, double s, long n) {
  for (long i = long(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += long(gridDim.x) * blockDim.x) x[i] = T(double(x[i]) * s);
}
/// \brief x (n) *= s, computed in double and rounded once per element.
template <class T> void scale_inplace(T* x, double s, std::size_t n, cudaStream_t stream) {
  if (n == 0) return;
  scale_kernel<T><<<detail::grid_for(n), detail::kThreads, 0, stream>>>(x, s, long(n));
  FBT_CUDA_CHECK_LAUNCH("scale_kernel");
}

/// Masked row reductions behind the feedback diagnostics (spec 6), over rows with mask != 0, in double.
/// One block per row; a masked-out row returns at once (uniform per block: no thread reaches a barrier the
/// others skip); each row's block sum is added to the accumulator with one atomicAdd.
/// acc[0] += sum x^2
template <class T> __global__ void masked_sumsq_kernel(double* acc, const T* x, const T* mask, int C) {
  __shared__ double red[32];
  const long n = blockIdx.x;
  if (mask[n] == T(0)) return;
  double s = 0;
  for (int c = threadIdx.x; c < C; c += blockDim.x) s += double(x[n * C + c]) * double(x[n * C + c]);
  s = detail::block_sum(s, red);
  if (threadIdx.x == 0) atomicAdd(acc, s);
}
/// acc[0] += sum (a - b)^2
template <class T> __global__ void masked_diff_sumsq_kernel(double* acc, const T* a, const T* b, const T* mask, int C) {
  __shared__ double red[32];
  const long n = blockIdx.x;
  if (mask[n] == T(0)) return;
  double s = 0;
  for (int c = threadIdx.x; c < C; c += blockDim.x) {
    const double d = double(a[n * C + c]) - double(b[n * C + c]);
    s += d * d;
  }
  s = detail::block_sum(s, red);
  if (threadIdx.x == 0) atomicAdd(acc, s);
}
/// acc[0] += sum sigmoid(z), acc[1] += sum sigmoid(z)^2
template <class T> __global__ void masked_sigmoid_moments_kernel(double* acc, const T* z, const T* mask, int C) {
  __shared__ double red[32];
  const long n = blockIdx.x;
  if (mask[n] == T(0)) return;
  double s = 0, ss = 0;
  for (int c = threadIdx.x; c < C; c += blockDim.x) {
    const double g = 1.0 / (1.0 + exp(-double(z[n * C + c])));
    s += g, ss += g * g;
  }
  s = detail::block_sum(s, red), ss = detail::block_sum(ss, red);
  if (threadIdx.x == 0) atomicAdd(acc, s), atomicAdd(acc + 1, ss);
}
/// \brief acc[0] (device double, zeroed by the caller) += sum of x^2 over the rows of x (R, C) with mask (R) != 0.
template <class T> void masked_sumsq(double* acc, const T* x, const T* mask, int R, int C, cudaStream_t stream) {
  if (R == 0 || C == 0) return;
  masked_sumsq_kernel<T><<<R, 128, 0, stream>>>(acc, x, mask, C);
  FBT_CUDA_CHECK_LAUNCH("masked_sumsq_kernel");
}
/// \brief acc[0] += sum of (a - b)^2 over the rows of a, b (R, C) with mask != 0.
template <class T> void masked_diff_sumsq(double* acc, const T* a, const T* b, const T* mask, int R, int C, cudaStream_t stream) {
  if (R == 0 || C == 0) return;
  masked_diff_sumsq_kernel<T><<<R, 128, 0, stream>>>(acc, a, b, mask, C);
  FBT_CUDA_CHECK_LAUNCH("masked_diff_sumsq_kernel");
}
/// \brief acc[0] += sum sigmoid(z), acc[1] += sum sigmoid(z)^2 over the rows of z (R, C) with mask != 0.
template <class T> void masked_sigmoid_moments(double* acc, const T* z, const T* mask, int R, int C, cudaStream_t stream) {
  if (R == 0 || C == 0) return;
  masked_sigmoid_moments_kernel<T><<<R, 128, 0, stream>>>(acc, z, mask, C);
  FBT_CUDA_CHECK_LAUNCH("masked_sigmoid_moments_kernel");
}

}  // namespace cuda
}  // namespace fbt
