// tests/cuda/test_engine_host.cpp: the library's K-pass step, optimizer and decoder over a host stand-in
// for the CUDA backend (fbt/check/host_backend.hpp: the CUDA kernels' contracts, logsumexp attention,
// NaN-filled fresh memory), through fbt::BackendModel and fbt::Decoder<M, HostBackend>, against the same
// code on the CPU backend: the whole step (losses, diagnostics, every gradient) for every fuser and
// chain knob, a middle-layer tap and a heterogeneous stack; AdamW, Muon / NorMuon and clipping; decoding in
// every mode.
// No GPU and no nvcc needed, so this runs in CI everywhere: it checks that the shared code works on a
// backend that is not the CPU's (no zero fill, results returned from reductions); tests/cuda/test_gpu.cu checks the CUDA kernels themselves where a GPU exists.
#include <gtest/gtest.h>

#include "engine_checks.hpp"
#include "fbt/check/host_backend.hpp"

// The file's own namespace: with FBT_TEST_UNITY an area's test files share one translation unit.
namespace test_cuda_engine_host {

using fbt::check::HostBackend;

// the stand-in provides what the built-in block and fusers call (layers/contract.hpp), checked at compile time
static_assert(fbt::check_block<fbt::DecoderBlock<float>, HostBackend>(), "");
static_assert(fbt::check_fuser<fbt::GluFuser<float>, HostBackend>() && fbt::check_fuser<fbt::GatedAddFuser<float>, HostBackend>() &&
                  fbt::check_fuser<fbt::ConcatFuser<float>, HostBackend>(),
              "");

namespace {
constexpr double kTol = 1e-4;  // the fp32 tolerance the GPU is held to
}

TEST(EngineHost, KPassStepMatchesCpuPath) {
  double worst = 0, worst_cpu = 0;
  for (bool big : {false, true})
    for (const auto& [cfg, sc] : fbt_test::step_cases(big)) {
      SCOPED_TRACE(fbt_test::describe(cfg, sc));
      double vs_cpu = 0;
      const auto w = fbt_test::compare_step<HostBackend>(cfg, sc, &vs_cpu);
      EXPECT_LT(w.err, kTol) << w.str();
      EXPECT_LT(vs_cpu, kTol) << w.str();
      worst = std::max(worst, w.err), worst_cpu = std::max(worst_cpu, vs_cpu);
    }
  std::printf("[ worst    ] K-pass step: %.3g against the CPU in double, %.3g against the CPU in float\n", worst, worst_cpu);
}

TEST(EngineHost, AdamWAndClipMatchCpuPath) {
  for (const char* f : {"glu", "gated_add", "concat", "none"}) {
    const auto w = fbt_test::compare_adamw<HostBackend>(fbt_test::tiny_config(f), 5);
    EXPECT_LT(w.err, kTol) << f << ": " << w.str();
  }
}

TEST(EngineHost, MuonAndNorMuonMatchCpuPath) {
  double worst = 0;
  for (auto v : {fbt::MuonVariant::NorMuon, fbt::MuonVariant::Muon})
    for (const char* f : {"glu", "gated_add", "concat", "none"}) {
      const auto w = fbt_test::compare_grouped<HostBackend>(fbt_test::tiny_config(f), v, 5);
      EXPECT_LT(w.err, kTol) << f << (v == fbt::MuonVariant::Muon ? " muon: " : " normuon: ") << w.str();
      worst = std::max(worst, w.err);
    }
  std::printf("[ worst    ] Muon / NorMuon, 3 grouped steps: %.3g against the CPU\n", worst);
}

TEST(EngineHost, DecodingMatchesCpuDecoderInEveryMode) {
  double worst = 0;
  auto check = [&](fbt::ModelConfig c, const char* mode) {
    c.vocab_size = 13;
    const auto w = fbt_test::compare_decode<HostBackend>(c, mode, 3);
    EXPECT_LT(w.err, kTol) << fbt_test::describe(c) << " " << mode << ": " << w.str();
    worst = std::max(worst, w.err);
  };
  for (const char* f : {"glu", "gated_add", "concat"})
    for (const char* mode : {"standard", "soft", "fused(1)", "fused(2)"}) {
      check(fbt_test::tiny_config(f), mode);
      check(fbt_test::layer_tap_config(f), mode);
      check(fbt_test::hetero_config(f), mode);
      check(fbt_test::window_config(f), mode);
    }
  check(fbt_test::tiny_config("none"), "standard");
  check(fbt_test::window_config("none"), "standard");
  check(fbt_test::hetero_config("none"), "standard");
  std::printf("[ worst    ] decoding: %.3g against the CPU decoder\n", worst);
}

TEST(EngineHost, RefusesTokensOutsideTheVocabulary) {
  using M = fbt::Model<float>;
  M m(fbt_test::tiny_config("glu"), 1);
  fbt::BackendModel<M, HostBackend> dm(m);
  auto tb = fbt_test::tiny_batch(1, 4, m.V, 2);
  tb.tokens[2] = m.V;
  fbt::StepOptions o;
  EXPECT_THROW(dm.multipass_step(tb.batch(), o), fbt::Error);
  tb.tokens[2] = -1;
  EXPECT_THROW(dm.multipass_step(tb.batch(), o), fbt::Error);
  tb.tokens[2] = 0, tb.targets[1] = m.V;
  EXPECT_THROW(dm.multipass_step(tb.batch(), o), fbt::Error);
  // and the decoder, at prefill and at a step
  fbt::Decoder<M, HostBackend> dec(dm);
  auto s = dec.new_sequence(8, fbt::DecodeModeSpec::parse("soft"));
  std::vector<float> logits(m.V);
  const int bad_prompt[2] = {1, m.V};
  EXPECT_THROW(dec.prefill(s, bad_prompt, 2, logits.data()), fbt::Error);
  auto s2 = dec.new_sequence(8, fbt::DecodeModeSpec::parse("soft"));
  const int prompt[2] = {1, 2}, bad = m.V + 3;
  dec.prefill(s2, prompt, 2, logits.data());
  auto* sp = &s2;
  EXPECT_THROW(dec.step(&sp, 1, &bad, logits.data()), fbt::Error);
}

TEST(EngineHost, WorkspaceSizeIsKnownBeforeTheStep) {
  using M = fbt::Model<float>;
  M m(fbt_test::tiny_config("glu"), 1);
  fbt::BackendModel<M, HostBackend> dm(m);
  auto opts = [](int K, bool detach) {
    fbt::StepOptions o;
    o.K = K, o.detach = detach;
    return o;
  };
  auto bytes = [&](int K, bool detach) { return dm.workspace_bytes(2, 16, opts(K, detach)); };
  // without detach every pass stays live until backward: each extra pass costs one pass's activations
  EXPECT_GT(bytes(3, false), bytes(2, false));
  EXPECT_EQ(bytes(4, false) - bytes(3, false), bytes(3, false) - bytes(2, false));
  // detached, one pass at a time
  EXPECT_EQ(bytes(4, true), bytes(2, true));
  EXPECT_LT(bytes(3, true), bytes(3, false));
  const fbt::StepOptions o1 = opts(1, false), o3 = opts(3, false), od = opts(3, true);
  // the bytes said before the step are the bytes the step lays out (on this backend's attention state)
  const auto tb = fbt_test::tiny_batch(2, 16, m.V, 3);
  for (const fbt::StepOptions& o : {o1, o3, od}) {
    fbt::Workspace<M, HostBackend> w;
    fbt::StepStats st;
    dm.multipass_step(w, tb.batch(), o, st);
    EXPECT_EQ(w.bytes(), dm.workspace_bytes(2, 16, o)) << "K=" << o.K << " detach=" << o.detach;
  }
  EXPECT_GT(dm.backend().launches, 0);  // the steps ran on the host stand-in
  EXPECT_EQ(dm.workspace_bytes(2, 16, o3), fbt::step_workspace_bytes(m, 2, 16, o3));  // both keep the logsumexp (B, NH, T)
}

}  // namespace test_cuda_engine_host
