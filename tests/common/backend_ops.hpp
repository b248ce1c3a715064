// tests/common/backend_ops.hpp: one table of cases covering every op of the backend contract
// (backend/backend.hpp, checked by backend/contract.hpp), each run on any backend from host inputs,
// its outputs downloaded (ggml's test-backend-ops is the model).
//
//   for (const auto& c : fbt_test::op_cases<Be>()) { Be be; auto out = c.run(be); ... }
//
// op_cases<Be>() is the same list, in the same order, for every backend; a case draws its inputs from
// its own seed (doubles rounded to float, so every backend, double or float, starts from the same
// numbers), runs one op (or a forward and then its backward) and returns the outputs it checks, in
// double. Used by tests/ops/test_backend_ops.cpp (CPU double as the reference against CPU float and
// the host stand-in) and tests/cuda/test_gpu.cu (the CUDA backend against the same reference).
// Outputs that a backend overwrites start as whatever its fresh buffer holds (NaN on the host stand-in),
// so an element an op fails to write shows up as NaN.
#pragma once

#include <cmath>
#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <vector>

#include "fbt/backend/backend.hpp"
#include "fbt/core/rng.hpp"
#include "fbt/ops/rope.hpp"

namespace fbt_test {

/// One case: its name, the tolerance its float outputs are held to (relative to the largest reference
/// magnitude), and what it runs.
template <class Be> struct OpCase {
  std::string name;
  double tol = 2e-5;  ///< float against the double reference
  std::function<std::vector<std::vector<double>>(Be&)> run;
};

/// A case's buffers on a backend: inputs drawn from a seeded Rng (rounded to float), outputs downloaded.
template <class Be> class OpData {
 public:
  using T = typename Be::Scalar;
  OpData(Be& be, std::uint64_t seed) : be_(be), rng_(seed) {}

  /// (n) values uniform in [lo, hi), rounded to float, on the backend.
  T* in(std::size_t n, double lo = -1.0, double hi = 1.0) {
    std::vector<T> h(n);
    for (auto& x : h) x = T(float(rng_.uniform(lo, hi)));
    return put(h);
  }
  /// (n) fresh backend memory: what an op overwrites.
  T* out(std::size_t n) { return &bufs_.emplace_back(n).data()[0]; }
  T* put(const std::vector<T>& h) {
    auto& b = bufs_.emplace_back(h.size());
    be_.upload(b.data(), h.data(), h.size());
    return b.data();
  }
  const int* ints(const std::vector<int>& h) {
    auto& b = ibufs_.emplace_back(h.size());
    be_.upload(b.data(), h.data(), h.size());
    return b.data();
  }
  /// Backend copies of per-row pointers (attention_decode's caches, gather/scatter's rows).
  template <class P> P* const* ptrs(const std::vector<P*>& h) {
    auto& b = pbufs_.emplace_back(h.size());
    std::vector<void*> v;
    for (P* p : h) v.push_back(const_cast<void*>(static_cast<const void*>(p)));
    be_.upload(b.data(), v.data(), v.size());
    return reinterpret_cast<P* const*>(b.data());
  }
  /// A mask (R) with 1 and 0 alternating from `start`.
  T* mask(int R, int start = 0) {
    std::vector<T> h(std::size_t(R), T(0));
    for (int r = start; r < R; r += 2) h[std::size_t(r)] = T(1);
    return put(h);
  }
  std::vector<double> get(const T* p, std::size_t n) {
    std::vector<T> h(n);
    be_.download(h.data(), p, n);
    return std::vector<double>(h.begin(), h.end());
  }
  fbt::Rng& rng() { return rng_; }

 private:
  Be& be_;
  fbt::Rng rng_;
  std::deque<typename Be::template Buf<T>> bufs_;
  std::deque<typename Be::template Buf<int>> ibufs_;
  std::deque<typename Be::template Buf<void*>> pbufs_;
};

using Outs = std::vector<std::vector<double>>;

/// Every op of the contract, as cases. Shapes are small and odd-sized (no multiple of a tile).
template <class Be> std::vector<OpCase<Be>> op_cases() {
  using T = typename Be::Scalar;
  using D = OpData<Be>;
  std::vector<OpCase<Be>> c;
  auto add = [&](std::string name, std::function<Outs(Be&, D&)> f, double tol = 2e-5) {
    const std::uint64_t seed = 1000 + c.size();
    c.push_back({std::move(name), tol, [f, seed](Be& be) {
                   D d(be, seed);
                   return f(be, d);
                 }});
  };

  // ---- memory ----------------------------------------------------------------------------------
  add("copy", [](Be& be, D& d) {
    T *x = d.in(37), *y = d.out(37);
    be.copy(y, x, 37);
    return Outs{d.get(y, 37)};
  });
  add("zero", [](Be& be, D& d) {
    T* x = d.in(37);
    be.zero(x, 37);
    be.sync();
    return Outs{d.get(x, 37)};
  });

  // ---- products: every transposition, written and accumulated, a leading dimension wider than the row
  for (int tA = 0; tA < 2; ++tA)
    for (int tB = 0; tB < 2; ++tB)
      for (int acc = 0; acc < 2; ++acc)
        add(std::string("gemm ") + (tA ? "T" : "N") + (tB ? "T" : "N") + (acc ? " acc" : ""), [tA, tB, acc](Be& be, D& d) {
          const long M = 7, N = 5, K = 9, ldc = N + 3;
          T *A = d.in(std::size_t(M * K)), *B = d.in(std::size_t(K * N)), *C = acc ? d.in(std::size_t(M * ldc)) : d.out(std::size_t(M * ldc));
          be.gemm(C, ldc, A, tA ? M : K, tA, B, tB ? K : N, tB, M, N, K, acc);
          std::vector<double> all = d.get(C, std::size_t(M * ldc)), used;
          for (long i = 0; i < M; ++i)
            for (long j = 0; j < N; ++j) used.push_back(all[std::size_t(i * ldc + j)]);  // the columns past N are not the op's
          return Outs{used};
        });

  // ---- normalisation, rotation -------------------------------------------------------------------
  add("rmsnorm_forward", [](Be& be, D& d) {
    const int R = 5, C = 11;
    T *x = d.in(R * C), *w = d.in(C, 0.5, 1.5), *y = d.out(R * C), *rs = d.out(R);
    be.rmsnorm_forward(y, rs, x, w, R, C, T(1e-6));
    return Outs{d.get(y, R * C), d.get(rs, R)};
  });
  for (bool with_dw : {true, false})
    add(std::string("rmsnorm_backward") + (with_dw ? "" : " (dw null)"), [with_dw](Be& be, D& d) {
      const int R = 5, C = 11;
      T *x = d.in(R * C), *w = d.in(C, 0.5, 1.5), *y = d.out(R * C), *rs = d.out(R), *dy = d.in(R * C), *dx = d.in(R * C), *dw = d.in(C);
      be.rmsnorm_forward(y, rs, x, w, R, C, T(1e-6));
      be.rmsnorm_backward(dx, with_dw ? dw : nullptr, dy, x, w, rs, R, C);
      return Outs{d.get(dx, R * C), d.get(dw, C)};
    });
  auto rope_table = [](D& d, int max_pos, int hs) {
    std::vector<T> tab(std::size_t(max_pos) * hs);
    fbt::rope_fill(tab.data(), max_pos, hs, 10000.0);
    const T* p = d.put(tab);
    return fbt::RopeView<T>{p, p + std::size_t(max_pos) * (hs / 2), max_pos, hs / 2};
  };
  add("rope_forward", [rope_table](Be& be, D& d) {
    const int R = 6, NH = 3, hs = 8;
    const fbt::RopeView<T> tab = rope_table(d, 16, hs);
    const int* pos = d.ints({0, 3, 15, 7, 1, 9});
    T *x = d.in(R * NH * hs), *y = d.out(R * NH * hs);
    be.rope_forward(y, x, pos, tab, R, NH);
    return Outs{d.get(y, R * NH * hs)};
  });
  add("rope_backward", [rope_table](Be& be, D& d) {
    const int R = 6, NH = 3, hs = 8;
    const fbt::RopeView<T> tab = rope_table(d, 16, hs);
    const int* pos = d.ints({0, 3, 15, 7, 1, 9});
    T *dy = d.in(R * NH * hs), *dx = d.in(R * NH * hs);
    be.rope_backward(dx, dy, pos, tab, R, NH);
    return Outs{d.get(dx, R * NH * hs)};
  });

  // ---- attention: GQA (4 query heads on 2 kv heads), a document start inside the second row -------
  struct Att {
    int B = 2, Tn = 7, NH = 4, NKV = 2, hs = 8;
    std::vector<int> first() const {
      std::vector<int> f(std::size_t(B * Tn), 0);
      for (int t = 4; t < Tn; ++t) f[std::size_t(Tn + t)] = 4;  // row 1: a new document at position 4
      return f;
    }
  };
  add("attention_forward", [](Be& be, D& d) {
    const Att a;
    const std::size_t QN = std::size_t(a.B) * a.Tn * a.NH * a.hs, KN = std::size_t(a.B) * a.Tn * a.NKV * a.hs;
    T *q = d.in(QN), *k = d.in(KN), *v = d.in(KN), *o = d.out(QN), *st = d.out(be.attention_state_size(a.B, a.Tn, a.NH));
    be.attention_forward(o, st, q, k, v, d.ints(a.first()), a.B, a.Tn, a.NH, a.NKV, a.hs);
    return Outs{d.get(o, QN)};  // the state is each backend's own (probabilities, or the logsumexp)
  });
  add("attention_backward", [](Be& be, D& d) {
    const Att a;
    const std::size_t QN = std::size_t(a.B) * a.Tn * a.NH * a.hs, KN = std::size_t(a.B) * a.Tn * a.NKV * a.hs;
    const int* first = d.ints(a.first());
    T *q = d.in(QN), *k = d.in(KN), *v = d.in(KN), *o = d.out(QN), *st = d.out(be.attention_state_size(a.B, a.Tn, a.NH));
    T *dout = d.in(QN), *dq = d.in(QN), *dk = d.in(KN), *dv = d.in(KN), *scr = d.out(be.attention_scratch_size(a.B, a.Tn, a.NH));
    be.attention_forward(o, st, q, k, v, first, a.B, a.Tn, a.NH, a.NKV, a.hs);
    be.attention_backward(dq, dk, dv, scr, dout, o, st, q, k, v, first, a.B, a.Tn, a.NH, a.NKV, a.hs);
    return Outs{d.get(dq, QN), d.get(dk, KN), d.get(dv, KN)};
  });
  add("kv_append + attention_decode", [](Be& be, D& d) {
    const int R = 3, NH = 4, NKV = 2, hs = 8, KD = NKV * hs, cap = 9;
    const std::vector<int> len1 = {1, 5, 9};  // positions each row attends to, its new one included
    std::vector<T*> kc, vc;
    for (int r = 0; r < R; ++r) kc.push_back(d.in(std::size_t(cap) * KD)), vc.push_back(d.in(std::size_t(cap) * KD));
    T *k = d.in(std::size_t(R) * KD), *v = d.in(std::size_t(R) * KD), *q = d.in(std::size_t(R) * NH * hs), *o = d.out(std::size_t(R) * NH * hs);
    std::vector<int> pos;
    for (int n : len1) pos.push_back(n - 1);
    be.kv_append(d.ptrs(kc), d.ptrs(vc), k, v, d.ints(pos), R, KD);
    be.attention_decode(o, q, d.ptrs(std::vector<const T*>(kc.begin(), kc.end())), d.ptrs(std::vector<const T*>(vc.begin(), vc.end())),
                        d.ints(len1), 9, R, NH, NKV, hs);
    Outs r{d.get(o, std::size_t(R) * NH * hs)};
    for (int i = 0; i < R; ++i) r.push_back(d.get(kc[std::size_t(i)], std::size_t(cap) * KD)), r.push_back(d.get(vc[std::size_t(i)], std::size_t(cap) * KD));
    return r;
  });
  add("gather_rows", [](Be& be, D& d) {
    const int R = 5, C = 7;
    std::vector<const T*> src;
    for (int r = 0; r < R; ++r) src.push_back(d.in(C));
    T* y = d.out(std::size_t(R) * C);
    be.gather_rows(y, d.ptrs(src), d.mask(R, 1), R, C);
    return Outs{d.get(y, std::size_t(R) * C)};
  });
  add("scatter_rows", [](Be& be, D& d) {
    const int R = 5, C = 7;
    std::vector<T*> dst;
    for (int r = 0; r < R; ++r) dst.push_back(d.out(C));
    T* x = d.in(std::size_t(R) * C);
    be.scatter_rows(d.ptrs(dst), x, R, C);
    Outs o;
    for (T* p : dst) o.push_back(d.get(p, C));
    return o;
  });

  // ---- elementwise ---------------------------------------------------------------------------------
  const std::size_t n = 41;
  add("swiglu_forward", [n](Be& be, D& d) {
    T *g = d.in(n, -3, 3), *u = d.in(n), *h = d.out(n);
    be.swiglu_forward(h, g, u, n);
    return Outs{d.get(h, n)};
  });
  add("swiglu_backward", [n](Be& be, D& d) {
    T *g = d.in(n, -3, 3), *u = d.in(n), *dh = d.in(n), *dg = d.in(n), *du = d.in(n);
    be.swiglu_backward(dg, du, dh, g, u, n);
    return Outs{d.get(dg, n), d.get(du, n)};
  });
  add("sigmoid_gate_forward", [n](Be& be, D& d) {
    T *a = d.in(n), *z = d.in(n, -3, 3), *y = d.out(n);
    be.sigmoid_gate_forward(y, a, z, n);
    return Outs{d.get(y, n)};
  });
  for (int which = 0; which < 3; ++which)  // both, da only (dz null), dz only (da null)
    add(std::string("sigmoid_gate_backward") + (which == 1 ? " (dz null)" : which == 2 ? " (da null)" : ""), [n, which](Be& be, D& d) {
      T *a = d.in(n), *z = d.in(n, -3, 3), *dy = d.in(n), *da = d.in(n), *dz = d.in(n);
      be.sigmoid_gate_backward(which == 2 ? nullptr : da, which == 1 ? nullptr : dz, dy, a, z, n);
      return Outs{d.get(da, n), d.get(dz, n)};
    });
  add("mul", [n](Be& be, D& d) {
    T *a = d.in(n), *b = d.in(n), *y = d.out(n);
    be.mul(y, a, b, n);
    return Outs{d.get(y, n)};
  });
  add("mul (in place)", [n](Be& be, D& d) {
    T *a = d.in(n), *b = d.in(n);
    be.mul(a, a, b, n);
    return Outs{d.get(a, n)};
  });
  add("mul_add", [n](Be& be, D& d) {
    T *a = d.in(n), *b = d.in(n), *y = d.in(n);
    be.mul_add(y, a, b, n);
    return Outs{d.get(y, n)};
  });
  for (int which = 0; which < 3; ++which)  // both, da only (db null), db only (da null)
    add(std::string("mul_backward") + (which == 1 ? " (db null)" : which == 2 ? " (da null)" : ""), [n, which](Be& be, D& d) {
      T *a = d.in(n), *b = d.in(n), *dy = d.in(n), *da = d.in(n), *db = d.in(n);
      be.mul_backward(which == 2 ? nullptr : da, which == 1 ? nullptr : db, dy, a, b, n);
      return Outs{d.get(da, n), d.get(db, n)};
    });
  {
    const int R = 5, G = 3, C = 4;  // e.g. 5 rows of 3 heads of 4 channels
    add("scale_groups", [=](Be& be, D& d) {
      T *x = d.in(std::size_t(R) * G * C), *s = d.in(std::size_t(R) * G), *y = d.out(std::size_t(R) * G * C);
      be.scale_groups(y, x, s, R, G, C);
      return Outs{d.get(y, std::size_t(R) * G * C)};
    });
    add("scale_groups (in place)", [=](Be& be, D& d) {
      T *x = d.in(std::size_t(R) * G * C), *s = d.in(std::size_t(R) * G);
      be.scale_groups(x, x, s, R, G, C);
      return Outs{d.get(x, std::size_t(R) * G * C)};
    });
    for (int which = 0; which < 3; ++which)  // both, dx only (ds null), ds only (dx null)
      add(std::string("scale_groups_backward") + (which == 1 ? " (ds null)" : which == 2 ? " (dx null)" : ""), [=](Be& be, D& d) {
        const std::size_t NX = std::size_t(R) * G * C, NS = std::size_t(R) * G;
        T *x = d.in(NX), *s = d.in(NS), *dy = d.in(NX), *dx = d.in(NX), *ds = d.in(NS);
        be.scale_groups_backward(which == 2 ? nullptr : dx, which == 1 ? nullptr : ds, dy, x, s, R, G, C);
        return Outs{d.get(dx, NX), d.get(ds, NS)};
      });
  }
  add("sigmoid", [n](Be& be, D& d) {
    T *z = d.in(n, -3, 3), *y = d.out(n);
    be.sigmoid(y, z, n);
    return Outs{d.get(y, n)};
  });
  add("sigmoid_backward", [n](Be& be, D& d) {
    T *y = d.in(n, 0.05, 0.95), *dy = d.in(n), *dz = d.in(n);
    be.sigmoid_backward(dz, dy, y, n);
    return Outs{d.get(dz, n)};
  });
  for (double b : {0.0, 0.75})
    add(b == 0.0 ? "axpby (b = 0)" : "axpby", [n, b](Be& be, D& d) {
      T *x = d.in(n), *y = b == 0.0 ? d.out(n) : d.in(n);  // b = 0: y is written, never read
      be.axpby(y, T(-1.25), x, T(b), n);
      return Outs{d.get(y, n)};
    });
  add("add", [n](Be& be, D& d) {
    T *x = d.in(n), *y = d.in(n);
    be.add(y, x, n);
    return Outs{d.get(y, n)};
  });
  add("scale", [n](Be& be, D& d) {
    T* x = d.in(n);
    be.scale(x, 0.3, n);
    return Outs{d.get(x, n)};
  });
  // (the elementwise product, multiply-add and per-row / per-head broadcast scale: one row each here)
  add("copy_plain_rows", [](Be& be, D& d) {
    const int R = 5, C = 7;
    T *x = d.in(std::size_t(R) * C), *y = d.in(std::size_t(R) * C);
    be.copy_plain_rows(y, x, d.mask(R, 1), R, C);
    return Outs{d.get(y, std::size_t(R) * C)};
  });
  add("move_plain_rows", [](Be& be, D& d) {
    const int R = 5, C = 7;
    T *x = d.in(std::size_t(R) * C), *y = d.in(std::size_t(R) * C);
    be.move_plain_rows(y, x, d.mask(R, 1), R, C);
    return Outs{d.get(y, std::size_t(R) * C), d.get(x, std::size_t(R) * C)};
  });
  add("shift_right_forward", [](Be& be, D& d) {
    const int B = 2, Tn = 5, C = 6;
    T *x = d.in(std::size_t(B) * Tn * C), *y = d.out(std::size_t(B) * Tn * C);
    be.shift_right_forward(y, x, B, Tn, C);
    return Outs{d.get(y, std::size_t(B) * Tn * C)};
  });
  add("shift_right_backward", [](Be& be, D& d) {
    const int B = 2, Tn = 5, C = 6;
    T *dy = d.in(std::size_t(B) * Tn * C), *dx = d.in(std::size_t(B) * Tn * C);
    be.shift_right_backward(dx, dy, B, Tn, C);
    return Outs{d.get(dx, std::size_t(B) * Tn * C)};
  });
  add("embedding_forward", [](Be& be, D& d) {
    const int N = 6, V = 9, C = 5;
    T *E = d.in(std::size_t(V) * C), *y = d.out(std::size_t(N) * C);
    be.embedding_forward(y, d.ints({3, 0, 8, 3, 5, 1}), E, N, V, C);
    return Outs{d.get(y, std::size_t(N) * C)};
  });
  add("embedding_backward", [](Be& be, D& d) {
    const int N = 6, V = 9, C = 5;
    T *dE = d.in(std::size_t(V) * C), *dy = d.in(std::size_t(N) * C);
    be.embedding_backward(dE, dy, d.ints({3, 0, 8, 3, 5, 1}), N, V, C);  // token 3 twice: its gradients add up
    return Outs{d.get(dE, std::size_t(V) * C)};
  });
  add("bias_forward", [](Be& be, D& d) {
    const int R = 5, C = 7;
    T *b = d.in(C), *y = d.in(std::size_t(R) * C);
    be.bias_forward(y, b, R, C);
    return Outs{d.get(y, std::size_t(R) * C)};
  });
  add("bias_backward", [](Be& be, D& d) {
    const int R = 5, C = 7;
    T *db = d.in(C), *dy = d.in(std::size_t(R) * C);
    be.bias_backward(db, dy, R, C);
    return Outs{d.get(db, C)};
  });
  add("jitter_add", [](Be& be, D& d) {
    const int B = 3;
    const std::size_t L = 10;
    T *x = d.in(B * L), *y = d.out(B * L);
    be.jitter_add(y, x, 77, 5, B, L, 0.02);  // rows 5, 6, 7 of a larger batch
    return Outs{d.get(y, B * L)};
  });

  // ---- loss, optimizer, reductions (the reductions' results in double, returned) ------------------------
  add("softmax_xent_forward", [](Be& be, D& d) {
    const int N = 5, V = 13;
    T *logits = d.in(std::size_t(N) * V, -4, 4), *losses = d.out(N), *lse = d.out(N);
    const double sum = be.softmax_xent_forward(logits, losses, lse, d.ints({2, -1, 12, 0, 7}), N, V, 1e-3);  // a row without target
    return Outs{{sum}, d.get(logits, std::size_t(N) * V), d.get(losses, N), d.get(lse, N)};
  });
  add("softmax_xent_backward", [](Be& be, D& d) {
    const int N = 5, V = 13;
    T *logits = d.in(std::size_t(N) * V, -4, 4), *losses = d.out(N), *lse = d.out(N);
    const int* tg = d.ints({2, -1, 12, 0, 7});
    be.softmax_xent_forward(logits, losses, lse, tg, N, V, 1e-3);
    be.softmax_xent_backward(logits, lse, tg, N, V, 0.25, 1e-3);
    return Outs{d.get(logits, std::size_t(N) * V)};
  });
  add("adamw", [n](Be& be, D& d) {
    T *p = d.in(n), *g = d.in(n), *m = d.in(n, -0.1, 0.1), *v = d.in(n, 0.0, 0.01);
    fbt::AdamWRates<T> r{T(0.9), T(0.95), T(0.1), T(0.05), T(1 / (1 - 0.9 * 0.9)), T(1 / (1 - 0.95 * 0.95)), T(1e-8), T(1e-2)};
    be.adamw(p, g, m, v, n, r, T(0.1));
    return Outs{d.get(p, n), d.get(m, n), d.get(v, n)};
  });
  add("row_sumsq", [](Be& be, D& d) {
    const int R = 5, C = 9;
    T *x = d.in(std::size_t(R) * C), *y = d.out(R);
    be.row_sumsq(y, x, R, C);
    return Outs{d.get(y, R)};
  });
  add("row_div_sqrt", [](Be& be, D& d) {
    const int R = 5, C = 9;
    T *x = d.in(std::size_t(R) * C), *v = d.in(R, 0.1, 2.0);
    be.row_div_sqrt(x, v, R, C, T(1e-8));
    return Outs{d.get(x, std::size_t(R) * C)};
  });
  add("sum_squares", [n](Be& be, D& d) { return Outs{{be.sum_squares(d.in(n), n)}}; });
  add("masked_sumsq", [](Be& be, D& d) {
    const int R = 6, C = 7;
    return Outs{{be.masked_sumsq(d.in(std::size_t(R) * C), d.mask(R), R, C)}};
  });
  add("masked_diff_sumsq", [](Be& be, D& d) {
    const int R = 6, C = 7;
    T *a = d.in(std::size_t(R) * C), *b = d.in(std::size_t(R) * C);
    return Outs{{be.masked_diff_sumsq(a, b, d.mask(R), R, C)}};
  });
  add("masked_sigmoid_moments", [](Be& be, D& d) {
    const int R = 6, C = 7;
    const auto [s, ss] = be.masked_sigmoid_moments(d.in(std::size_t(R) * C, -3, 3), d.mask(R), R, C);
    return Outs{{s, ss}};
  });
  return c;
}

/// The largest relative difference of a case's outputs from the reference's (max |x - ref| / max |ref|
/// per output, the worst output); +inf when the shapes differ or an output is not finite.
inline double op_error(const Outs& x, const Outs& ref) {
  if (x.size() != ref.size()) return INFINITY;
  double worst = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (x[i].size() != ref[i].size()) return INFINITY;
    double num = 0, den = 0;
    for (std::size_t j = 0; j < x[i].size(); ++j) {
      if (!std::isfinite(x[i][j])) return INFINITY;
      num = std::max(num, std::fabs(x[i][j] - ref[i][j])), den = std::max(den, std::fabs(ref[i][j]));
    }
    worst = std::max(worst, num / std::max(den, 1e-30));
  }
  return worst;
}

}  // namespace fbt_test
