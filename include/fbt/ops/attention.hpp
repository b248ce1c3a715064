// fbt/ops/attention.hpp: causal grouped-query scaled dot-product attention (Vaswani et al. 2017;
// GQA, Ainslie et al. 2023), with document masking for packed sequences, fused flash-style (Dao et al.
// 2022, FlashAttention): the (T, T) scores and probabilities are never stored; backward recomputes them
// from the logsumexp of each query row.
//
// Per batch row b and query head h (key/value head kh = h / (NH / NKV), spec section 9), with the scaled
// scores s_ij = q_i . k_j / sqrt(hs) over the window j in [first_i, i] (causal and within i's document;
// entries outside it are never computed into anything):
//   forward:   m_i = max_j s_ij;  p_ij = exp(s_ij - m_i);  l_i = sum_j p_ij;
//              out_i = (sum_j p_ij v_j) / l_i;  lse_i = m_i + log l_i                   (state: lse (B, NH, T))
//   backward:  p_ij = exp(s_ij - lse_i);  Dt_i = dO_i . out_i                           (scratch: Dt (B, NH, T))
//              dP_ij = dO_i . v_j;  dS_ij = p_ij (dP_ij - Dt_i);
//              dq_i += sum_j dS_ij k_j / sqrt(hs);  dk_j += sum_i dS_ij q_i / sqrt(hs);  dv_j += sum_i p_ij dO_i
// The same state and scratch as the CUDA kernels (cuda/kernels.cuh) and check/host_backend.hpp.
// `first` (B*T) gives, for each position, the first position of its document within the row (0 when
// the row is one document): that is the whole of the document mask (spec invariant 6).
//
// The work, per (b, kh): the head's keys (and, in backward, values) are packed as key tiles transposed,
// KT (T / Bk, hs, Bk), so that a score row over a tile is Bk-wide multiply-adds over d (the packing is a
// register transpose of L x L blocks). Query rows go in groups (4 rows in forward, 16 in backward), over
// the key tiles from the tile holding their first window start to their last row, the diagonal's tile
// only as far as the half holding that row (the causal upper triangle and earlier documents are skipped a
// half tile at a time); the products over keys skip, per register tile of rows and per group of keys, the
// rows and keys that causality zeroes. The group's score rows (group, <= T) stay in L1, so the softmax is
// two plain passes over each row (max, then exp and sum) instead of FlashAttention's online rescaling per
// tile, which, at Bk = 32 and hs = 32, cost as much as the products. The products accumulate in registers
// over tiles of 4 rows; those over keys (P V, dS K, P^T dO, dS^T Q) are vectorised over hs.
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>

#include "gemm.hpp"
#include "vexp.hpp"

namespace fbt {

struct AttnShape {
  int B, T, NH, NKV, hs;
};

/// Keys per tile, rows per register tile of the products, and query rows per group in forward and in
/// backward (where the group's rows share one read and write of each key's dk, dv); measured on Zen 4 at
/// hs 32 and T 128, 256 (docs/PERFORMANCE.md). The packets per register row follow the vector registers
/// the CPU has (kAttnRowPackets below).
constexpr int kAttnKeys = 32, kAttnTileRows = 4, kAttnRowsForward = 4, kAttnRowsBackward = 16;

namespace detail {

constexpr int BK_ = kAttnKeys, RT_ = kAttnTileRows;
static_assert(kAttnRowsForward % RT_ == 0 && kAttnRowsBackward % RT_ == 0, "a row group is a whole number of register tiles");

// The products over a tile accumulate in Eigen's SIMD packets (pmadd: one fused multiply-add per packet),
// held in registers: plain loops over local arrays were kept in memory by the compiler. HS is the head size
// when known at compile time (a multiple of the packet width), else 0: plain loops for any head size.
namespace ei = Eigen::internal;
template <class T> using AttnPacket = typename ei::packet_traits<T>::type;
template <class T> constexpr int kAttnLanes = ei::unpacket_traits<AttnPacket<T>>::size;
/// Packets of one register-tile row a product holds at once: RT_ rows of them as accumulators, one row of
/// operand packets and a broadcast must stay in the vector registers. AVX-512 (and NEON) have 32: 4 packets,
/// 4 x 4 + 4 + 1 = 21 (the sizes measured on Zen 4); AVX2 has 16: 2 packets, 4 x 2 + 2 + 1 = 11 (4 would
/// take 21 and spill: on Zen 3 that made attention twice as slow, docs/PERFORMANCE.md "AMD EPYC Zen 3").
#if defined(__AVX512F__) || defined(__aarch64__)
constexpr int kAttnRowPackets = 4;
#else
constexpr int kAttnRowPackets = 2;
#endif

/// Packs the (Tn, hs) head slice x (rows of stride ld) as key tiles transposed: xt (ceil(Tn / Bk), hs, Bk),
/// tile t holding keys [t Bk, t Bk + Bk) (zero past Tn), so one tile's operand is aligned and contiguous.
/// With HS a whole number of packets, L keys by L head columns go at a time through a register transpose
/// (Eigen's ptranspose, L = the packet's lanes); the keys past the last whole L go one by one.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wignored-attributes"  // g++ on PacketBlock<__m128, ...>: Eigen's own headers silence it
#endif
template <class T, int HS>
void attn_pack_tiles(T* xt, const T* x, Eigen::Index ld, int Tn, int hs_) {
  const int hs = HS ? HS : hs_, nt = (Tn + BK_ - 1) / BK_;
  std::fill(xt + std::size_t(nt - 1) * hs * BK_, xt + std::size_t(nt) * hs * BK_, T(0));
  int j = 0;
  if constexpr (HS != 0 && HS % kAttnLanes<T> == 0) {
    using P = AttnPacket<T>;
    constexpr int L = kAttnLanes<T>;
    static_assert(BK_ % L == 0, "the key tile is a whole number of packets");
    for (; j + L <= Tn; j += L) {
      T* tile = xt + std::size_t(j / BK_) * HS * BK_ + j % BK_;  // column j % Bk of tile j / Bk: packet-aligned
      for (int d0 = 0; d0 < HS; d0 += L) {
        ei::PacketBlock<P, L> blk;  // rows j .. j + L - 1, columns d0 .. d0 + L - 1 of x; transposed in registers
        for (int i = 0; i < L; ++i) blk.packet[i] = ei::ploadu<P>(x + (j + i) * ld + d0);
        ei::ptranspose(blk);
        for (int i = 0; i < L; ++i) ei::pstore(tile + (d0 + i) * BK_, blk.packet[i]);
      }
    }
  }
  for (; j < Tn; ++j) {  // rows of x read once, in order
    T* col = xt + std::size_t(j / BK_) * hs * BK_ + j % BK_;
    for (int d = 0; d < hs; ++d) col[d * BK_] = x[j * ld + d];
  }
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

/// Columns of hs a product over keys handles at once: kAttnRowPackets packets (AVX-512: 256 bytes).
template <class T, int HS> constexpr int kAttnChunk = HS < kAttnRowPackets * kAttnLanes<T> ? HS : kAttnRowPackets * kAttnLanes<T>;

/// c (RT, NP L; rows of stride ldc) = a (RT, hs) . bt (hs, Bk)[:, :NP L]   (bt: one packed key tile; NP = Bk / L
/// packets for a whole tile, half of them for the first half of the tile)
template <class T, int HS, int NP = BK_ / kAttnLanes<T>>
void attn_rows_dot_tile(T* c, int ldc, const T* a, const T* bt, int hs_) {
  using P = AttnPacket<T>;
  constexpr int L = kAttnLanes<T>;
  static_assert(BK_ % L == 0 && NP * L <= BK_, "the key tile is a whole number of packets");
  const int hs = HS ? HS : hs_;
  P acc[RT_][NP];
  for (int r = 0; r < RT_; ++r)
    for (int k = 0; k < NP; ++k) acc[r][k] = ei::pset1<P>(T(0));
  for (int d = 0; d < hs; ++d) {
    P b[NP];
    for (int k = 0; k < NP; ++k) b[k] = ei::pload<P>(bt + d * BK_ + k * L);
    for (int r = 0; r < RT_; ++r) {
      const P ar = ei::pset1<P>(a[r * hs + d]);
      for (int k = 0; k < NP; ++k) acc[r][k] = ei::pmadd(ar, b[k], acc[r][k]);
    }
  }
  for (int r = 0; r < RT_; ++r)
    for (int k = 0; k < NP; ++k) ei::pstoreu(c + r * ldc + k * L, acc[r][k]);
}

/// c (RT, hs) += p (RT, nj; rows of stride ldp) . x (nj rows of stride ldx)
template <class T, int HS>
void attn_tile_times_rows(T* c, const T* p, int ldp, const T* x, Eigen::Index ldx, int nj, int hs_) {
  if constexpr (HS == 0) {
    const int hs = hs_;
    for (int j = 0; j < nj; ++j)
      for (int r = 0; r < RT_; ++r)
        for (int d = 0; d < hs; ++d) c[r * hs + d] += p[r * ldp + j] * x[j * ldx + d];
  } else {
    using P = AttnPacket<T>;
    constexpr int L = kAttnLanes<T>, C = kAttnChunk<T, HS>, NP = C / L;
    static_assert(HS % C == 0 && C % L == 0, "the head is a whole number of chunks of packets");
    for (int d0 = 0; d0 < HS; d0 += C) {
      P acc[RT_][NP];
      for (int r = 0; r < RT_; ++r)
        for (int k = 0; k < NP; ++k) acc[r][k] = ei::ploadu<P>(c + r * HS + d0 + k * L);
      for (int j = 0; j < nj; ++j) {
        P xj[NP];
        for (int k = 0; k < NP; ++k) xj[k] = ei::ploadu<P>(x + j * ldx + d0 + k * L);
        for (int r = 0; r < RT_; ++r) {
          const P pr = ei::pset1<P>(p[r * ldp + j]);
          for (int k = 0; k < NP; ++k) acc[r][k] = ei::pmadd(pr, xj[k], acc[r][k]);
        }
      }
      for (int r = 0; r < RT_; ++r)
        for (int k = 0; k < NP; ++k) ei::pstoreu(c + r * HS + d0 + k * L, acc[r][k]);
    }
  }
}

/// c (nj rows of stride ldc) += p^T (nj, nr) . a (nr, hs), with p (nr, nj; rows of stride ldp), kAttnKeyGroup
/// keys at a time (nj <= Bk): the accumulators stay in registers over the group's rows, c is read and
/// written once per group. Causality: row r sees key j only from r >= j + kr (kr: key 0's position minus
/// row 0's), so the rows before that, whose p is zero, are skipped for each group of keys.
constexpr int kAttnKeyGroup = 4;
template <class T, int HS>
void attn_tile_t_times_rows(T* c, Eigen::Index ldc, const T* p, int ldp, const T* a, int nr, int nj, int kr, int hs_) {
  if constexpr (HS == 0) {
    const int hs = hs_;
    for (int j = 0; j < nj; ++j)
      for (int r = std::max(0, j + kr); r < nr; ++r)
        for (int d = 0; d < hs; ++d) c[j * ldc + d] += p[r * ldp + j] * a[r * hs + d];
  } else {
    using P = AttnPacket<T>;
    constexpr int L = kAttnLanes<T>, C = kAttnChunk<T, HS>, NP = C / L, G = kAttnKeyGroup;
    static_assert(BK_ % G == 0, "the key tile is a whole number of key groups");
    for (int j0 = 0; j0 < nj; j0 += G) {
      const int ng = std::min(G, nj - j0), rb = std::max(0, j0 + kr);
      for (int d0 = 0; d0 < HS; d0 += C) {
        P acc[G][NP];
        for (int g = 0; g < G; ++g)
          for (int k = 0; k < NP; ++k) acc[g][k] = ei::pset1<P>(T(0));
        for (int r = rb; r < nr; ++r) {
          P ar[NP];
          for (int k = 0; k < NP; ++k) ar[k] = ei::ploadu<P>(a + r * HS + d0 + k * L);
          for (int g = 0; g < G; ++g) {
            const P pg = ei::pset1<P>(p[r * ldp + j0 + g]);  // within the tile's row: j0 + g < Bk
            for (int k = 0; k < NP; ++k) acc[g][k] = ei::pmadd(pg, ar[k], acc[g][k]);
          }
        }
        for (int g = 0; g < G; ++g)  // g compile-time (acc stays in registers), the tail's keys skipped
          if (g < ng)
            for (int k = 0; k < NP; ++k) {
              T* cj = c + (j0 + g) * ldc + d0 + k * L;
              ei::pstoreu(cj, ei::padd(ei::ploadu<P>(cj), acc[g][k]));
            }
      }
    }
  }
}

/// One group of query rows i0 .. i0 + R - 1 of a (b, h): the rows that exist (nr <= R, the rest are zero),
/// their scaled queries qs (R, hs) = q / sqrt(hs), and the keys [j0, j1) they see, in whole tiles from j0.
template <class T, int R>
struct AttnRows {
  int nr, j0, j1, lo[R], hi[R];  // row r's window in the group's key range: [lo[r], hi[r]) (empty past T)
  AttnRows(T* qs, const T* q, Eigen::Index ldq, const int* fb, int i0, int Tn, int hs, T scale) {
    nr = std::min(R, Tn - i0);
    j0 = fb[i0] / BK_ * BK_, j1 = i0 + nr;
    for (int r = 0; r < R; ++r) {
      lo[r] = r < nr ? fb[i0 + r] - j0 : 0, hi[r] = r < nr ? i0 + r + 1 - j0 : 0;
      auto qr = vec(qs + r * hs, hs);
      if (r < nr) qr = scale * cvec(q + (i0 + r) * ldq, hs);
      else qr.setZero();
    }
  }
  /// Keys from j0 the scores cover: whole key tiles, but the last only as far as the half that holds key
  /// j1 - 1 (the diagonal's tile is half past the rows' last key whenever that key is in its first half).
  int width() const { return (j1 - j0 + BK_ / 2 - 1) / (BK_ / 2) * (BK_ / 2); }
  int row_tiles() const { return (nr + RT_ - 1) / RT_; }  // register tiles of RT rows holding the nr rows
};

/// s (R, width; rows of stride lds) = a (R, hs) . the key tiles from rows.j0 (xt: packed, attn_pack_tiles),
/// for the register tiles that hold rows; a last half tile computes half the packets. A tile wider than
/// kAttnRowPackets packets (AVX2: 4 of 8 floats) goes in pieces of that many.
template <class T, int HS, int R>
void attn_rows_dot_tiles(T* s, int lds, const T* a, const T* xt, const AttnRows<T, R>& rows, int hs) {
  constexpr int L = kAttnLanes<T>, NP = BK_ / L, NF = std::min(NP, kAttnRowPackets), NH = std::min(NP / 2, kAttnRowPackets);
  static_assert(NP % 2 == 0 && NP % NF == 0 && (NP / 2) % NH == 0, "half a key tile is a whole number of pieces of packets");
  const int full = rows.width() / BK_, half = rows.width() % BK_ != 0;
  for (int rt = 0; rt < rows.row_tiles(); ++rt) {
    T* srt = s + rt * RT_ * lds;
    const T* art = a + rt * RT_ * hs;
    for (int t = 0; t < full; ++t)
      for (int k0 = 0; k0 < NP; k0 += NF)
        attn_rows_dot_tile<T, HS, NF>(srt + t * BK_ + k0 * L, lds, art, xt + std::size_t(rows.j0 + t * BK_) * hs + k0 * L, hs);
    if (half)
      for (int k0 = 0; k0 < NP / 2; k0 += NH)
        attn_rows_dot_tile<T, HS, NH>(srt + full * BK_ + k0 * L, lds, art, xt + std::size_t(rows.j0 + full * BK_) * hs + k0 * L, hs);
  }
}

/// p = exp(s - shift) over row r's window, 0 elsewhere in the group's width (p, s: one row, 64-byte aligned;
/// the exp runs over the whole width, whole packets, and what lies outside the window is then zeroed);
/// returns the sum of the row's p
template <class T, int R>
T attn_exp_window(T* p, const T* s, const AttnRows<T, R>& rows, int r, T shift) {
  using Row = Eigen::Array<T, 1, Eigen::Dynamic>;
  const int lo = rows.lo[r], hi = rows.hi[r], n = rows.width();
  Eigen::Map<Row, Eigen::Aligned64>(p, n) = vexp(Eigen::Map<const Row, Eigen::Aligned64>(s, n) - shift);
  std::fill(p, p + lo, T(0));
  std::fill(p + hi, p + n, T(0));
  return Eigen::Map<const Row, Eigen::Aligned64>(p, n).sum();
}

/// Per-thread scratch of the kernels below (slot: which buffer), n elements zeroed as a fresh buffer would
/// be; its memory grows to the largest call seen and is kept, so a step of a shape seen before allocates
/// nothing (tests/model/test_no_alloc.cpp).
template <class T> AlignedVector<T>& attn_scratch(int slot, std::size_t n) {
  thread_local AlignedVector<T> bufs[7];
  bufs[slot].assign(n, T(0));
  return bufs[slot];
}

template <class T, int HS>
void attention_forward_hs(RowMapS<T> out, T* lse, CRowMapS<T> q, CRowMapS<T> k, CRowMapS<T> v, const int* first, const AttnShape& s) {
  const int Tn = s.T, NH = s.NH, group = NH / s.NKV, hs = HS ? HS : s.hs, nt = (Tn + BK_ - 1) / BK_, lds = nt * BK_;
  const T scale = T(1) / std::sqrt(T(hs));
  // KT (T / Bk, hs, Bk); qs, o (R, hs); the group's scores and probabilities sp (R, T rounded up to Bk)
  constexpr int R = kAttnRowsForward;
  AlignedVector<T>&kt = attn_scratch<T>(0, std::size_t(nt) * hs * BK_), &qs = attn_scratch<T>(1, R * hs), &o = attn_scratch<T>(2, R * hs),
                 &sp = attn_scratch<T>(3, std::size_t(R) * lds);
  for (int b = 0; b < s.B; ++b) {
    const int* fb = first + std::size_t(b) * Tn;
    const std::size_t r0 = std::size_t(b) * Tn;
    for (int kh = 0; kh < s.NKV; ++kh) {
      attn_pack_tiles<T, HS>(kt.data(), k.data() + r0 * k.outerStride() + kh * hs, k.outerStride(), Tn, hs);
      for (int h = kh * group; h < (kh + 1) * group; ++h)
        for (int i0 = 0; i0 < Tn; i0 += R) {
          const AttnRows<T, R> rows(qs.data(), q.data() + r0 * q.outerStride() + h * hs, q.outerStride(), fb, i0, Tn, hs, scale);
          attn_rows_dot_tiles<T, HS>(sp.data(), lds, qs.data(), kt.data(), rows, hs);
          T m[R], l[R];
          for (int r = 0; r < R; ++r) {  // softmax numerators in place; a row has at least itself: l >= 1
            T* sr = sp.data() + r * lds;
            m[r] = r < rows.nr ? cvec(sr + rows.lo[r], rows.hi[r] - rows.lo[r]).maxCoeff() : T(0);
            l[r] = attn_exp_window(sr, sr, rows, r, m[r]);
          }
          std::fill(o.begin(), o.end(), T(0));
          const int nk = rows.j1 - rows.j0;
          for (int rt = 0; rt < rows.row_tiles(); ++rt)
            for (int t = 0; t * BK_ < nk; ++t)
              attn_tile_times_rows<T, HS>(o.data() + rt * RT_ * hs, sp.data() + rt * RT_ * lds + t * BK_, lds,
                                          v.data() + (r0 + rows.j0 + t * BK_) * v.outerStride() + kh * hs, v.outerStride(),
                                          std::min(BK_, nk - t * BK_), hs);
          for (int r = 0; r < rows.nr; ++r) {
            vec(out.data() + (r0 + i0 + r) * out.outerStride() + h * hs, hs) = cvec(o.data() + r * hs, hs) / l[r];
            lse[(std::size_t(b) * NH + h) * Tn + i0 + r] = m[r] + std::log(l[r]);
          }
        }
    }
  }
}

template <class T, int HS>
void attention_backward_hs(RowMapS<T> dq, RowMapS<T> dk, RowMapS<T> dv, T* Dt, CRowMapS<T> dout, CRowMapS<T> out, const T* lse, CRowMapS<T> q,
                           CRowMapS<T> k, CRowMapS<T> v, const int* first, const AttnShape& s) {
  const int Tn = s.T, NH = s.NH, group = NH / s.NKV, hs = HS ? HS : s.hs, nt = (Tn + BK_ - 1) / BK_, lds = nt * BK_;
  const T scale = T(1) / std::sqrt(T(hs));
  // KT, VT (T / Bk, hs, Bk); qs, dor, dqa (R, hs): scaled q rows, dO rows, dq accumulators;
  // p, ds (R, T rounded up to Bk): the group's probabilities and dP, then dS, in place
  constexpr int R = kAttnRowsBackward;
  AlignedVector<T>&kt = attn_scratch<T>(0, std::size_t(nt) * hs * BK_), &vt = attn_scratch<T>(1, std::size_t(nt) * hs * BK_),
                 &qs = attn_scratch<T>(2, R * hs), &dor = attn_scratch<T>(3, R * hs), &dqa = attn_scratch<T>(4, R * hs);
  AlignedVector<T>&p = attn_scratch<T>(5, std::size_t(R) * lds), &ds = attn_scratch<T>(6, std::size_t(R) * lds);
  for (int b = 0; b < s.B; ++b) {
    const int* fb = first + std::size_t(b) * Tn;
    const std::size_t r0 = std::size_t(b) * Tn;
    for (int h = 0; h < NH; ++h)  // Dt (B, NH, T) = rowsum(dO * O)
      for (int i = 0; i < Tn; ++i)
        Dt[(std::size_t(b) * NH + h) * Tn + i] = cvec(dout.data() + (r0 + i) * dout.outerStride() + h * hs, hs)
                                                     .dot(cvec(out.data() + (r0 + i) * out.outerStride() + h * hs, hs));
    for (int kh = 0; kh < s.NKV; ++kh) {
      attn_pack_tiles<T, HS>(kt.data(), k.data() + r0 * k.outerStride() + kh * hs, k.outerStride(), Tn, hs);
      attn_pack_tiles<T, HS>(vt.data(), v.data() + r0 * v.outerStride() + kh * hs, v.outerStride(), Tn, hs);
      const T* kh_rows = k.data() + r0 * k.outerStride() + kh * hs;  // (T, hs), stride k.outerStride()
      T* dkh = dk.data() + r0 * dk.outerStride() + kh * hs;          // (T, hs), stride dk.outerStride()
      T* dvh = dv.data() + r0 * dv.outerStride() + kh * hs;          // (T, hs), stride dv.outerStride()
      for (int h = kh * group; h < (kh + 1) * group; ++h) {
        const T* lh = lse + (std::size_t(b) * NH + h) * Tn;  // (T)
        const T* Dh = Dt + (std::size_t(b) * NH + h) * Tn;   // (T)
        for (int i0 = 0; i0 < Tn; i0 += R) {
          const AttnRows<T, R> rows(qs.data(), q.data() + r0 * q.outerStride() + h * hs, q.outerStride(), fb, i0, Tn, hs, scale);
          for (int r = 0; r < R; ++r) {
            auto g = vec(dor.data() + r * hs, hs);
            if (r < rows.nr) g = cvec(dout.data() + (r0 + i0 + r) * dout.outerStride() + h * hs, hs);
            else g.setZero();
          }
          attn_rows_dot_tiles<T, HS>(p.data(), lds, qs.data(), kt.data(), rows, hs);
          attn_rows_dot_tiles<T, HS>(ds.data(), lds, dor.data(), vt.data(), rows, hs);  // dP
          const int n = rows.width();
          for (int r = 0; r < R; ++r) {
            T* pr = p.data() + r * lds;
            attn_exp_window(pr, pr, rows, r, r < rows.nr ? lh[i0 + r] : T(0));
            auto dsr = Eigen::Map<Eigen::Array<T, 1, Eigen::Dynamic>>(ds.data() + r * lds, n);
            dsr = Eigen::Map<const Eigen::Array<T, 1, Eigen::Dynamic>>(pr, n) * (dsr - (r < rows.nr ? Dh[i0 + r] : T(0)));
          }
          std::fill(dqa.begin(), dqa.end(), T(0));
          const int nk = rows.j1 - rows.j0;
          for (int t = 0; t * BK_ < nk; ++t) {  // causal: a register tile of rows reads keys up to its last row only
            const int j = rows.j0 + t * BK_, nj = std::min(BK_, nk - t * BK_);
            for (int rt = 0; rt < rows.row_tiles(); ++rt) {
              const int njr = std::min(nj, i0 + (rt + 1) * RT_ - j);
              if (njr > 0)
                attn_tile_times_rows<T, HS>(dqa.data() + rt * RT_ * hs, ds.data() + rt * RT_ * lds + t * BK_, lds, kh_rows + j * k.outerStride(),
                                            k.outerStride(), njr, hs);
            }
            attn_tile_t_times_rows<T, HS>(dkh + j * dk.outerStride(), dk.outerStride(), ds.data() + t * BK_, lds, qs.data(), rows.nr, nj, j - i0, hs);
            attn_tile_t_times_rows<T, HS>(dvh + j * dv.outerStride(), dv.outerStride(), p.data() + t * BK_, lds, dor.data(), rows.nr, nj, j - i0, hs);
          }
          for (int r = 0; r < rows.nr; ++r)
            vec(dq.data() + (r0 + i0 + r) * dq.outerStride() + h * hs, hs) += scale * cvec(dqa.data() + r * hs, hs);
        }
      }
    }
  }
}

}  // namespace detail

/// \brief out (B*T, NH*hs) = attention(q (B*T, NH*hs), k, v (B*T, NKV*hs)); lse (B, NH, T) = the logsumexp
/// of each query row's scaled scores over its window (the state backward reads).
template <class T>
void attention_forward(RowMapS<T> out, T* lse, CRowMapS<T> q, CRowMapS<T> k, CRowMapS<T> v, const int* first, const AttnShape& s) {
  const int B = s.B, Tn = s.T, NH = s.NH, NKV = s.NKV, hs = s.hs;
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
  switch (hs) {
    case 16: return detail::attention_forward_hs<T, 16>(out, lse, q, k, v, first, s);
    case 32: return detail::attention_forward_hs<T, 32>(out, lse, q, k, v, first, s);
    case 64: return detail::attention_forward_hs<T, 64>(out, lse, q, k, v, first, s);
    case 128: return detail::attention_forward_hs<T, 128>(out, lse, q, k, v, first, s);
    default: return detail::attention_forward_hs<T, 0>(out, lse, q, k, v, first, s);
  }
}

/// \brief Accumulates dq, dk, dv from dout; needs out, lse and the q, k, v of the same forward.
/// Dt: (B, NH, T) scratch, overwritten with rowsum(dout * out).
template <class T>
void attention_backward(RowMapS<T> dq, RowMapS<T> dk, RowMapS<T> dv, T* Dt, CRowMapS<T> dout, CRowMapS<T> out, const T* lse, CRowMapS<T> q,
                        CRowMapS<T> k, CRowMapS<T> v, const int* first, const AttnShape& s) {
  FBT_ASSERT(s.NKV > 0 && s.NH % s.NKV == 0, "attention_backward: NKV must divide NH");
  FBT_ASSERT(q.rows() == Eigen::Index(s.B) * s.T && q.cols() == Eigen::Index(s.NH) * s.hs && k.cols() == Eigen::Index(s.NKV) * s.hs &&
                 v.cols() == k.cols() && k.rows() == q.rows() && v.rows() == q.rows() && dq.rows() == q.rows() && dq.cols() == q.cols() &&
                 dk.rows() == k.rows() && dk.cols() == k.cols() && dv.rows() == v.rows() && dv.cols() == v.cols() && dout.rows() == q.rows() &&
                 dout.cols() == q.cols() && out.rows() == q.rows() && out.cols() == q.cols(),
             "attention_backward: shape mismatch");
  switch (s.hs) {
    case 16: return detail::attention_backward_hs<T, 16>(dq, dk, dv, Dt, dout, out, lse, q, k, v, first, s);
    case 32: return detail::attention_backward_hs<T, 32>(dq, dk, dv, Dt, dout, out, lse, q, k, v, first, s);
    case 64: return detail::attention_backward_hs<T, 64>(dq, dk, dv, Dt, dout, out, lse, q, k, v, first, s);
    case 128: return detail::attention_backward_hs<T, 128>(dq, dk, dv, Dt, dout, out, lse, q, k, v, first, s);
    default: return detail::attention_backward_hs<T, 0>(dq, dk, dv, Dt, dout, out, lse, q, k, v, first, s);
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
    p = vexp((p.array() - mx) * scale).matrix();
    p /= p.sum();
    vec(out + h * hs, hs).noalias() = csmat(Vc + kh * hs, len1, hs, KD).transpose() * p;
  }
}

// The kernels above for float and double are compiled once in src/kernels.cpp (the fbt::kernels library)
// when FBT_COMPILED_KERNELS is defined (fbt::kernels defines it); otherwise they are header-only templates.
#define FBT_OPS_ATTENTION_INSTANTIATE(EXTERN, T) \
  EXTERN template void attention_forward<T>(RowMapS<T>, T*, CRowMapS<T>, CRowMapS<T>, CRowMapS<T>, const int*, const AttnShape&); \
  EXTERN template void attention_backward<T>(RowMapS<T>, RowMapS<T>, RowMapS<T>, T*, CRowMapS<T>, CRowMapS<T>, const T*, CRowMapS<T>, CRowMapS<T>, CRowMapS<T>, const int*, const AttnShape&); \
  EXTERN template void attention_decode<T>(T*, T*, const T*, const T*, const T*, int, int, int, int);
#ifdef FBT_COMPILED_KERNELS
FBT_OPS_ATTENTION_INSTANTIATE(extern, float)
FBT_OPS_ATTENTION_INSTANTIATE(extern, double)
#endif

}  // namespace fbt
