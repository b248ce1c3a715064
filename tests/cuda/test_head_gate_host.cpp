// tests/cuda/test_head_gate_host.cpp: the per-head gated attention (fbt/layers/head_gate.hpp: a stage
// override built from backend ops: sigmoid, scale_groups and their backward) on the host stand-in of the
// CUDA backend (fbt/check/host_backend.hpp: the CUDA kernels' contracts, logsumexp attention, NaN-filled
// fresh memory) against the CPU backend, both in float, from the same weights and input.
// Checks: forward y, dx and every parameter gradient within 1e-4 relative (the fp32 tolerance the GPU is
// held to; errors max |host - cpu| / max |cpu| per tensor), the decoding step likewise, and that the
// work ran on the stand-in. The FD check of the layer in double: tests/layers/test_head_gate.cpp.
#include <gtest/gtest.h>

#include "common/layer_harness.hpp"
#include "common/stage_rig.hpp"
#include "fbt/layers/contract.hpp"
#include "fbt/layers/head_gate.hpp"
#include "fbt/check/host_backend.hpp"

// The file's own namespace: with FBT_TEST_UNITY an area's test files share one translation unit.
namespace test_cuda_head_gate_host {

using namespace fbt;
using namespace fbt_test;
using fbt::check::HostBackend;

// the stand-in provides the ops the gated attention calls (layers/contract.hpp), checked at compile time
static_assert(check_attention<HeadGatedAttention<float>, HostBackend>());

namespace {

constexpr int B = 2, Tn = 6, N = B * Tn, D = 16, NH = 4, NKV = 2, hs = 8, KD = NKV * hs;
constexpr double kTol = 1e-4;

AttentionSpec spec() {
  AttentionSpec s;
  s.hidden_size = D, s.num_heads = NH, s.num_kv_heads = NKV, s.head_dim = hs, s.rope_theta = 100.0, s.max_positions = 16;
  return s;
}

/// max |a - b| / max |b| (a NaN in a, e.g. an element never written, gives +inf).
double rel(const float* a, const float* b, std::size_t n) {
  double d = 0, s = 1e-30;
  for (std::size_t i = 0; i < n; ++i) {
    if (!std::isfinite(a[i])) return INFINITY;
    d = std::max(d, std::abs(double(a[i]) - double(b[i]))), s = std::max(s, std::abs(double(b[i])));
  }
  return d / s;
}

/// The gated attention layer on backend Be: forward, backward and one decoding step of each row.
template <class Be> struct GatedRun {
  HeadGatedAttention<float> layer{spec()};
  HeadGatedAttention<float>::Cache c{};
  HeadGatedAttention<float>::DecodeCache dc{};
  StageRig<float, Be> r{"self_attn.", [&](const ParamRegistry<float>& reg) { layer.declare(reg); },
                        [&](Carver<float>& keep, Carver<float>& temp) {
                          layer.alloc(Be{}, keep, temp, c, B, Tn, true);
                          layer.alloc_decode(Be{}, keep, dc, B);
                        }};
  PassTables tabs = pass_tables(B, Tn, {{4}, {}});
  std::vector<float> y = std::vector<float>(N * D, 0.f), dx = std::vector<float>(N * D, 0.f), yd = std::vector<float>(B * D, 0.f);
  std::vector<float> kc = std::vector<float>(B * Tn * KD, 0.f), vc = std::vector<float>(B * Tn * KD, 0.f);

  void run(const std::vector<float>& x, const std::vector<float>& dy, const std::vector<float>& xd) {
    const PassShape s{B, Tn, tabs.pos.data(), tabs.first.data()};
    r.ps.zero_grad();
    layer.forward(r.be, r.w(), c, x.data(), y.data(), s);
    layer.backward(r.be, r.w(), c, dy.data(), dx.data(), x.data(), s);
    // a decoding step at position Tn - 1 of each row, over the keys and values the forward made before it
    float* kcp[B] = {kc.data(), kc.data() + Tn * KD};
    float* vcp[B] = {vc.data(), vc.data() + Tn * KD};
    const auto kv = layer.kv(c);
    for (int b = 0; b < B; ++b) std::copy_n(kv.first + b * Tn * KD, (Tn - 1) * KD, kcp[b]), std::copy_n(kv.second + b * Tn * KD, (Tn - 1) * KD, vcp[b]);
    const int pos[B] = {Tn - 1, Tn - 1}, len1[B] = {Tn, Tn};
    DecodeStep<float> st;
    st.R = B, st.pos = pos, st.len1 = len1, st.max_len1 = Tn, st.kc = kcp, st.vc = vcp;
    layer.decode(r.be, r.w(), dc, xd.data(), yd.data(), st);
  }
};

TEST(HeadGateHost, ForwardBackwardAndDecodeMatchCpu) {
  GatedRun<CpuBackend<float>> cpu;
  GatedRun<HostBackend> host;
  randomize_store(cpu.r.ps, 1);
  copy_values(host.r.ps, cpu.r.ps);
  const auto x = cast_vec<float>(randn_vec(N * D, 2)), dy = cast_vec<float>(randn_vec(N * D, 3)), xd = cast_vec<float>(randn_vec(B * D, 4));
  cpu.run(x, dy, xd);
  host.run(x, dy, xd);
  EXPECT_GT(host.r.be.launches, 10);
  const double ey = rel(host.y.data(), cpu.y.data(), cpu.y.size()), edx = rel(host.dx.data(), cpu.dx.data(), cpu.dx.size());
  const double edec = rel(host.yd.data(), cpu.yd.data(), cpu.yd.size());
  std::printf("  host vs cpu (float): y %.3g  dx %.3g  decode %.3g\n", ey, edx, edec);
  EXPECT_LT(ey, kTol);
  EXPECT_LT(edx, kTol);
  EXPECT_LT(edec, kTol);
  for (const auto& s : cpu.r.ps.specs()) {
    const double e = rel(host.r.ps.grads() + s.offset, cpu.r.ps.grads() + s.offset, s.size);
    std::printf("  %-34s grad %.3g\n", s.name.c_str(), e);
    EXPECT_LT(e, kTol) << s.name;
  }
}

}  // namespace

}  // namespace test_cuda_head_gate_host
