// fbt/check/host_backend.hpp: fbt::check::HostBackend, a host implementation of the backend contract
// (backend/backend.hpp, checked by backend/contract.hpp) with the CUDA kernels' contracts (cuda/kernels.cuh).
//
// Plain loops with the same arguments, the same accumulate-or-write rules and the same algorithms as the
// CUDA kernels: attention keeps only the logsumexp (B, NH, T) as its state, uses a (B, NH, T) scratch
// (Dt = rowsum(dO * O)) and recomputes the probabilities in backward (the CPU's tiled kernels do the same,
// ops/attention.hpp; these are the plain per-row loops).
// Fresh buffers are filled with NaN (ints with a huge value, pointers with null), like uninitialised
// device memory, so that any reliance of the shared code on a zero fill shows up as a NaN in the
// comparison with the CPU. GEMM operands may be rounded to bf16 (the CUDA backend's GemmMode::bf16).
// It lets the library's K-pass step, optimizer, decoder and trainer run over a CUDA-like backend, and be
// checked, on machines without a GPU.
//
//   fbt::BackendModel<M, fbt::check::HostBackend> dm(m);   // as with fbt::cuda::CudaBackend
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

#include "../backend/backend.hpp"
#include "../core/rng.hpp"
#include "../ops/gemm.hpp"

namespace fbt::check {

template <class U> U garbage() {
  if constexpr (std::is_floating_point_v<U>) return std::numeric_limits<U>::quiet_NaN();
  else if constexpr (std::is_integral_v<U>) return std::numeric_limits<U>::max() / 2;
  else return U{};
}

/// Host "device buffer": resize() loses the contents and fills with garbage, as cudaMalloc would.
template <class U> class HostBuf {
 public:
  HostBuf() = default;
  explicit HostBuf(std::size_t n) { resize(n); }
  void resize(std::size_t n) { v_.assign(n, garbage<U>()); }
  U* data() { return v_.data(); }
  const U* data() const { return v_.data(); }
  std::size_t size() const { return v_.size(); }

 private:
  std::vector<U> v_;
};

/// float -> bf16 -> float, round to nearest even (what __float2bfloat16 does to a finite value).
inline float round_bf16(float x) {
  std::uint32_t u;
  std::memcpy(&u, &x, 4);
  u = (u + 0x7FFFu + ((u >> 16) & 1u)) & 0xFFFF0000u;
  float y;
  std::memcpy(&y, &u, 4);
  return y;
}

struct HostBackend {
  using Scalar = float;
  template <class U> using Buf = HostBuf<U>;
  static constexpr const char* name = "host";
  /// bf16: round both operands of every product to bf16 first (the CUDA backend's GemmMode::bf16).
  explicit HostBackend(bool bf16_operands = false) : bf16(bf16_operands) {}
  bool bf16 = false;
  long launches = 0;  ///< kernel-like calls so far (a test's check that the work ran here)

  template <class U> void upload(U* dst, const U* src, std::size_t n) { std::copy(src, src + n, dst); }
  template <class U> void download(U* dst, const U* src, std::size_t n) { std::copy(src, src + n, dst); }
  template <class U> void copy(U* dst, const U* src, std::size_t n) {
    if (n && dst != src) std::memmove(static_cast<void*>(dst), static_cast<const void*>(src), n * sizeof(U));
  }
  template <class U> void zero(U* p, std::size_t n) { std::fill(p, p + n, U{}); }
  void sync() {}

  void gemm(float* C, long ldc, const float* A, long lda, bool tA, const float* B, long ldb, bool tB, long M, long N, long K, bool acc) {
    ++launches;
    std::vector<float> a16, b16;
    if (bf16) {  // contiguous rounded copies of the stored operands
      const long ar = tA ? K : M, ac = tA ? M : K, br = tB ? N : K, bc = tB ? K : N;
      a16.resize(std::size_t(ar * ac)), b16.resize(std::size_t(br * bc));
      for (long i = 0; i < ar; ++i)
        for (long j = 0; j < ac; ++j) a16[std::size_t(i * ac + j)] = round_bf16(A[i * lda + j]);
      for (long i = 0; i < br; ++i)
        for (long j = 0; j < bc; ++j) b16[std::size_t(i * bc + j)] = round_bf16(B[i * ldb + j]);
      A = a16.data(), lda = ac, B = b16.data(), ldb = bc;
    }
    auto Cm = fbt::smat(C, M, N, ldc);
    auto Am = tA ? fbt::csmat(A, K, M, lda) : fbt::csmat(A, M, K, lda);
    auto Bm = tB ? fbt::csmat(B, N, K, ldb) : fbt::csmat(B, K, N, ldb);
    if (!acc)  // beta = 0: C is written, never read (it may hold NaN)
      for (long i = 0; i < M; ++i)
        for (long j = 0; j < N; ++j) Cm(i, j) = 0.f;
    fbt::gemm(Cm, Am, tA, Bm, tB, true);
  }

  void rmsnorm_forward(float* out, float* rstd, const float* inp, const float* w, int R, int C, float eps) {
    ++launches;
    for (int r = 0; r < R; ++r) {
      const float* x = inp + std::size_t(r) * C;
      float ss = 0;
      for (int c = 0; c < C; ++c) ss += x[c] * x[c];
      const float rs = 1.f / std::sqrt(ss / float(C) + eps);
      float* y = out + std::size_t(r) * C;
      for (int c = 0; c < C; ++c) y[c] = x[c] * rs * w[c];
      rstd[r] = rs;
    }
  }
  void rmsnorm_backward(float* dinp, float* dw, const float* dout, const float* inp, const float* w, const float* rstd, int R, int C) {
    ++launches;
    for (int r = 0; r < R; ++r) {
      const float* x = inp + std::size_t(r) * C;
      const float* dy = dout + std::size_t(r) * C;
      const float rs = rstd[r];
      float dot = 0;
      for (int c = 0; c < C; ++c) dot += dy[c] * w[c] * x[c];
      const float proj = dot * rs / float(C);
      float* dx = dinp + std::size_t(r) * C;
      for (int c = 0; c < C; ++c) {
        dx[c] += rs * (dy[c] * w[c] - x[c] * (rs * proj));
        if (dw) dw[c] += dy[c] * x[c] * rs;
      }
    }
  }
  void rope_forward(float* out, const float* inp, const int* pos, const fbt::RopeView<float>& tab, int R, int NH) {
    ++launches;
    const int half = tab.half, hs = 2 * half;
    const float *cs = tab.cos, *sn = tab.sin;
    for (int n = 0; n < R; ++n)
      for (int h = 0; h < NH; ++h)
        for (int i = 0; i < half; ++i) {
          const std::size_t base = (std::size_t(n) * NH + h) * hs;
          const float c = cs[std::size_t(pos[n]) * half + i], s = sn[std::size_t(pos[n]) * half + i];
          const float x1 = inp[base + i], x2 = inp[base + i + half];
          out[base + i] = x1 * c - x2 * s;
          out[base + i + half] = x2 * c + x1 * s;
        }
  }
  void rope_backward(float* dinp, const float* dout, const int* pos, const fbt::RopeView<float>& tab, int R, int NH) {
    ++launches;
    const int half = tab.half, hs = 2 * half;
    const float *cs = tab.cos, *sn = tab.sin;
    for (int n = 0; n < R; ++n)
      for (int h = 0; h < NH; ++h)
        for (int i = 0; i < half; ++i) {
          const std::size_t base = (std::size_t(n) * NH + h) * hs;
          const float c = cs[std::size_t(pos[n]) * half + i], s = sn[std::size_t(pos[n]) * half + i];
          const float dy1 = dout[base + i], dy2 = dout[base + i + half];
          dinp[base + i] += dy1 * c + dy2 * s;
          dinp[base + i + half] += dy2 * c - dy1 * s;
        }
  }
  /// The state: the logsumexp of each query row's scaled scores (B, NH, T); the scratch: Dt (B, NH, T).
  static std::size_t attention_state_size(int B, int T, int NH) { return std::size_t(B) * NH * T; }
  static std::size_t attention_scratch_size(int B, int T, int NH) { return std::size_t(B) * NH * T; }
  /// Attention that keeps the logsumexp only (the CUDA kernels' contract).
  void attention_forward(float* out, float* lse, const float* q, const float* k, const float* v, const int* first, int B, int T, int NH, int NKV,
                         int hs) {
    ++launches;
    const int QD = NH * hs, KD = NKV * hs, group = NH / NKV;
    const float scale = 1.f / std::sqrt(float(hs));
    std::vector<float> s(T);
    for (int b = 0; b < B; ++b)
      for (int h = 0; h < NH; ++h)
        for (int i = 0; i < T; ++i) {
          const std::size_t ri = std::size_t(b) * T + i;
          const int f = first[ri], kh = h / group;
          float m = -INFINITY;
          for (int j = f; j <= i; ++j) {
            float acc = 0;
            for (int d = 0; d < hs; ++d) acc += q[ri * QD + h * hs + d] * k[(std::size_t(b) * T + j) * KD + kh * hs + d];
            s[j] = acc * scale, m = std::max(m, s[j]);
          }
          float l = 0;
          for (int j = f; j <= i; ++j) l += (s[j] = std::exp(s[j] - m));
          for (int d = 0; d < hs; ++d) {
            float acc = 0;
            for (int j = f; j <= i; ++j) acc += s[j] * v[(std::size_t(b) * T + j) * KD + kh * hs + d];
            out[ri * QD + h * hs + d] = acc / l;
          }
          lse[(std::size_t(b) * NH + h) * T + i] = m + std::log(l);
        }
  }
  /// Accumulates dq, dk, dv (as the CUDA kernels do); recomputes p = exp(s - lse); Dt overwritten.
  void attention_backward(float* dq, float* dk, float* dv, float* Dt, const float* dout, const float* out, const float* lse, const float* q,
                          const float* k, const float* v, const int* first, int B, int T, int NH, int NKV, int hs) {
    ++launches;
    const int QD = NH * hs, KD = NKV * hs, group = NH / NKV;
    const float scale = 1.f / std::sqrt(float(hs));
    for (int b = 0; b < B; ++b)
      for (int h = 0; h < NH; ++h)
        for (int i = 0; i < T; ++i) {
          const std::size_t ri = std::size_t(b) * T + i;
          float acc = 0;
          for (int d = 0; d < hs; ++d) acc += dout[ri * QD + h * hs + d] * out[ri * QD + h * hs + d];
          Dt[(std::size_t(b) * NH + h) * T + i] = acc;
        }
    for (int b = 0; b < B; ++b)
      for (int h = 0; h < NH; ++h)
        for (int i = 0; i < T; ++i) {
          const std::size_t ri = std::size_t(b) * T + i, bh = std::size_t(b) * NH + h;
          const int kh = h / group;
          for (int j = first[ri]; j <= i; ++j) {
            const std::size_t rj = std::size_t(b) * T + j;
            float s = 0, dp = 0;
            for (int d = 0; d < hs; ++d) {
              s += q[ri * QD + h * hs + d] * k[rj * KD + kh * hs + d];
              dp += dout[ri * QD + h * hs + d] * v[rj * KD + kh * hs + d];
            }
            const float p = std::exp(s * scale - lse[bh * T + i]);
            const float ds = p * (dp - Dt[bh * T + i]) * scale;
            for (int d = 0; d < hs; ++d) {
              dq[ri * QD + h * hs + d] += ds * k[rj * KD + kh * hs + d];
              dk[rj * KD + kh * hs + d] += ds * q[ri * QD + h * hs + d];
              dv[rj * KD + kh * hs + d] += p * dout[ri * QD + h * hs + d];
            }
          }
        }
  }
  /// kc[r], vc[r]: sequence r's (capacity, KD) cache of this layer.
  void attention_decode(float* out, const float* q, const float* const* kc, const float* const* vc, const int* len1, int /*max_len1*/, int R,
                        int NH, int NKV, int hs) {
    ++launches;
    const int KD = NKV * hs, QD = NH * hs, group = NH / NKV;
    const float scale = 1.f / std::sqrt(float(hs));
    for (int r = 0; r < R; ++r) {
      const int n = len1[r];
      std::vector<float> p(n);
      for (int h = 0; h < NH; ++h) {
        const int kh = h / group;
        const float* K = kc[r] + kh * hs;
        const float* V = vc[r] + kh * hs;
        float m = -INFINITY, sum = 0;
        for (int j = 0; j < n; ++j) {
          float acc = 0;
          for (int d = 0; d < hs; ++d) acc += q[std::size_t(r) * QD + h * hs + d] * K[std::size_t(j) * KD + d];
          p[j] = acc * scale, m = std::max(m, p[j]);
        }
        for (int j = 0; j < n; ++j) sum += (p[j] = std::exp(p[j] - m));
        for (int d = 0; d < hs; ++d) {
          float acc = 0;
          for (int j = 0; j < n; ++j) acc += p[j] * V[std::size_t(j) * KD + d];
          out[std::size_t(r) * QD + h * hs + d] = acc / sum;
        }
      }
    }
  }
  void kv_append(float* const* kc, float* const* vc, const float* k, const float* v, const int* pos, int R, int KD) {
    ++launches;
    for (int r = 0; r < R; ++r)
      for (int c = 0; c < KD; ++c) {
        const std::size_t at = std::size_t(pos[r]) * KD + c;
        kc[r][at] = k[std::size_t(r) * KD + c], vc[r][at] = v[std::size_t(r) * KD + c];
      }
  }
  void gather_rows(float* dst, const float* const* src, const float* mask, int R, int C) {
    ++launches;
    for (int r = 0; r < R; ++r)
      for (int c = 0; c < C; ++c) dst[std::size_t(r) * C + c] = mask[r] != 0.f ? src[r][c] : 0.f;
  }
  void scatter_rows(float* const* dst, const float* src, int R, int C) {
    ++launches;
    for (int r = 0; r < R; ++r) std::copy(src + std::size_t(r) * C, src + std::size_t(r + 1) * C, dst[r]);
  }
  static float sigm(float x) { return 1.f / (1.f + std::exp(-x)); }
  void swiglu_forward(float* h, const float* g, const float* u, std::size_t n) {
    ++launches;
    for (std::size_t i = 0; i < n; ++i) h[i] = g[i] / (1.f + std::exp(-g[i])) * u[i];
  }
  void swiglu_backward(float* dg, float* du, const float* dh, const float* g, const float* u, std::size_t n) {
    ++launches;
    for (std::size_t i = 0; i < n; ++i) {
      const float sg = sigm(g[i]);
      dg[i] += dh[i] * u[i] * sg * (1.f + g[i] * (1.f - sg));
      du[i] += dh[i] * g[i] * sg;
    }
  }
  void sigmoid_gate_forward(float* y, const float* a, const float* z, std::size_t n) {
    ++launches;
    for (std::size_t i = 0; i < n; ++i) y[i] = a[i] / (1.f + std::exp(-z[i]));
  }
  void sigmoid_gate_backward(float* da, float* dz, const float* dy, const float* a, const float* z, std::size_t n) {
    ++launches;
    for (std::size_t i = 0; i < n; ++i) {
      const float sg = sigm(z[i]);
      if (da) da[i] += dy[i] * sg;
      if (dz) dz[i] += dy[i] * a[i] * sg * (1.f - sg);
    }
  }
  void mul(float* y, const float* a, const float* b, std::size_t n) {
    ++launches;
    for (std::size_t i = 0; i < n; ++i) y[i] = a[i] * b[i];
  }
  void mul_add(float* y, const float* a, const float* b, std::size_t n) {
    ++launches;
    for (std::size_t i = 0; i < n; ++i) y[i] += a[i] * b[i];
  }
  void mul_backward(float* da, float* db, const float* dy, const float* a, const float* b, std::size_t n) {
    ++launches;
    for (std::size_t i = 0; i < n; ++i) {
      if (da) da[i] += dy[i] * b[i];
      if (db) db[i] += dy[i] * a[i];
    }
  }
  void scale_groups(float* y, const float* x, const float* s, int R, int G, int C) {
    ++launches;
    for (std::size_t i = 0; i < std::size_t(R) * G * C; ++i) y[i] = x[i] * s[i / C];
  }
  void scale_groups_backward(float* dx, float* ds, const float* dy, const float* x, const float* s, int R, int G, int C) {
    ++launches;
    for (std::size_t rg = 0; rg < std::size_t(R) * G; ++rg) {  // one CUDA thread per (row, group)
      float acc = 0.f;
      for (std::size_t i = rg * C; i < (rg + 1) * C; ++i) {
        if (dx) dx[i] += dy[i] * s[rg];
        acc += dy[i] * x[i];
      }
      if (ds) ds[rg] += acc;
    }
  }
  void sigmoid(float* y, const float* z, std::size_t n) {
    ++launches;
    for (std::size_t i = 0; i < n; ++i) y[i] = sigm(z[i]);
  }
  void sigmoid_backward(float* dz, const float* dy, const float* y, std::size_t n) {
    ++launches;
    for (std::size_t i = 0; i < n; ++i) dz[i] += dy[i] * y[i] * (1.f - y[i]);
  }
  void axpby(float* y, float a, const float* x, float b, std::size_t n) {
    ++launches;
    for (std::size_t i = 0; i < n; ++i) y[i] = b == 0.f ? a * x[i] : a * x[i] + b * y[i];
  }
  void add(float* y, const float* x, std::size_t n) { axpby(y, 1.f, x, 1.f, n); }
  void scale(float* x, double s, std::size_t n) {
    ++launches;
    for (std::size_t i = 0; i < n; ++i) x[i] = float(double(x[i]) * s);
  }
  void copy_plain_rows(float* dst, const float* src, const float* mask, int R, int C) {
    ++launches;
    for (int r = 0; r < R; ++r)
      if (mask[r] == 0.f) std::copy(src + std::size_t(r) * C, src + std::size_t(r + 1) * C, dst + std::size_t(r) * C);
  }
  void move_plain_rows(float* dst, float* src, const float* mask, int R, int C) {
    ++launches;
    for (int r = 0; r < R; ++r)
      if (mask[r] == 0.f)
        for (int c = 0; c < C; ++c) dst[std::size_t(r) * C + c] += src[std::size_t(r) * C + c], src[std::size_t(r) * C + c] = 0.f;
  }
  void shift_right_forward(float* out, const float* inp, int B, int T, int C) {
    ++launches;
    for (std::size_t i = 0; i < std::size_t(B) * T * C; ++i) out[i] = (i / C) % T == 0 ? 0.f : inp[i - C];
  }
  void shift_right_backward(float* dinp, const float* dout, int B, int T, int C) {
    ++launches;
    for (std::size_t i = 0; i < std::size_t(B) * T * C; ++i)
      if ((i / C) % T != std::size_t(T - 1)) dinp[i] += dout[i + C];
  }
  void embedding_forward(float* out, const int* tokens, const float* E, int N, int /*V: checked on the host*/, int C) {
    ++launches;
    for (int n = 0; n < N; ++n) std::copy(E + std::size_t(tokens[n]) * C, E + std::size_t(tokens[n] + 1) * C, out + std::size_t(n) * C);
  }
  void embedding_backward(float* dE, const float* dout, const int* tokens, int N, int /*V*/, int C) {
    ++launches;
    for (int n = 0; n < N; ++n)
      for (int c = 0; c < C; ++c) dE[std::size_t(tokens[n]) * C + c] += dout[std::size_t(n) * C + c];
  }
  void bias_forward(float* out, const float* b, int R, int C) {
    ++launches;
    for (std::size_t i = 0; i < std::size_t(R) * C; ++i) out[i] += b[i % C];
  }
  void bias_backward(float* db, const float* dout, int R, int C) {
    ++launches;
    for (std::size_t i = 0; i < std::size_t(R) * C; ++i) db[i % C] += dout[i];
  }
  /// The CUDA backend's arithmetic: the losses in float, then summed in double on the host.
  double softmax_xent_forward(float* logits, float* losses, float* lse, const int* targets, int N, int V, double z) {
    ++launches;
    for (int n = 0; n < N; ++n) {
      float* row = logits + std::size_t(n) * V;
      const int y = targets[n];
      float m = -INFINITY, sum = 0;
      for (int c = 0; c < V; ++c) m = std::max(m, row[c]);
      for (int c = 0; c < V; ++c) sum += std::exp(row[c] - m);
      const float ly = y >= 0 ? row[y] : 0.f;
      for (int c = 0; c < V; ++c) row[c] = std::exp(row[c] - m) / sum;
      const float l = m + std::log(sum);
      lse[n] = l;
      losses[n] = y >= 0 ? l - ly + float(z) * l * l : 0.f;
    }
    double sum = 0.0;
    for (int n = 0; n < N; ++n) sum += double(losses[n]);
    return sum;
  }
  void softmax_xent_backward(float* probs, const float* lse, const int* targets, int N, int V, double scale, double z) {
    ++launches;
    for (int n = 0; n < N; ++n) {
      float* row = probs + std::size_t(n) * V;
      const int y = targets[n];
      for (int c = 0; c < V; ++c) {
        if (y < 0) {
          row[c] = 0.f;
          continue;
        }
        float v = row[c] * float(scale * (1.0 + 2.0 * z * double(lse[n])));
        if (c == y) v -= float(scale);
        row[c] = v;
      }
    }
  }
  void adamw(float* p, const float* g, float* m, float* v, std::size_t n, const fbt::AdamWRates<float>& r, float wd) {
    ++launches;
    for (std::size_t i = 0; i < n; ++i) {
      m[i] = r.b1 * m[i] + r.ib1 * g[i];
      v[i] = r.b2 * v[i] + r.ib2 * g[i] * g[i];
      p[i] -= r.lr * ((m[i] * r.rbc1) / (std::sqrt(v[i] * r.rbc2) + r.eps) + wd * p[i]);
    }
  }
  void jitter_add(float* out, const float* src, std::uint64_t seed, int row_offset, int B, std::size_t row_len, double sigma) {
    ++launches;
    for (int r = 0; r < B; ++r) {
      fbt::SplitMix64 rr(fbt::jitter_row_seed(seed, long(row_offset) + r));
      for (std::size_t i = 0; i < row_len; ++i) {
        const float nz = float(rr.uniform(-sigma, sigma));
        out[r * row_len + i] = src[r * row_len + i] + nz;
      }
    }
  }
  void row_sumsq(float* out, const float* x, int R, int C) {
    ++launches;
    for (int r = 0; r < R; ++r) {
      double s = 0.0;
      for (int c = 0; c < C; ++c) s += double(x[std::size_t(r) * C + c]) * double(x[std::size_t(r) * C + c]);
      out[r] = float(s);
    }
  }
  void row_div_sqrt(float* x, const float* v, int R, int C, float eps) {
    ++launches;
    for (std::size_t i = 0; i < std::size_t(R) * C; ++i) x[i] = x[i] / (std::sqrt(v[i / C]) + eps);
  }
  double sum_squares(const float* x, std::size_t n) {
    ++launches;
    double s = 0.0;
    for (std::size_t i = 0; i < n; ++i) s += double(x[i]) * double(x[i]);
    return s;
  }
  double masked_sumsq(const float* x, const float* mask, int R, int C) {
    ++launches;
    double s = 0.0;
    for (int r = 0; r < R; ++r)
      if (mask[r] != 0.f)
        for (int c = 0; c < C; ++c) s += double(x[std::size_t(r) * C + c]) * double(x[std::size_t(r) * C + c]);
    return s;
  }
  double masked_diff_sumsq(const float* a, const float* b, const float* mask, int R, int C) {
    ++launches;
    double s = 0.0;
    for (int r = 0; r < R; ++r)
      if (mask[r] != 0.f)
        for (int c = 0; c < C; ++c) {
          const double d = double(a[std::size_t(r) * C + c]) - double(b[std::size_t(r) * C + c]);
          s += d * d;
        }
    return s;
  }
  std::pair<double, double> masked_sigmoid_moments(const float* z, const float* mask, int R, int C) {
    ++launches;
    double s = 0.0, ss = 0.0;
    for (int r = 0; r < R; ++r)
      if (mask[r] != 0.f)
        for (int c = 0; c < C; ++c) {
          const double g = 1.0 / (1.0 + std::exp(-double(z[std::size_t(r) * C + c])));
          s += g, ss += g * g;
        }
    return {s, ss};
  }
};

}  // namespace fbt::check
