// A training step allocates nothing once its workspace is laid out ("no allocation inside a
// step"; first touch of a fresh page costs ~12 us here). Two detectors, both armed only around the
// second step of a shape:
//   - Eigen's own: EIGEN_RUNTIME_NO_MALLOC + set_is_malloc_allowed(false) makes every Eigen heap
//     allocation (temporaries, GEMM blocking buffers) fail eigen_assert, redefined here to throw;
//   - the global operator new and delete (plain and aligned: fbt's AlignedVector uses the aligned one),
//     counted.
// The counted step runs twice: with Eigen's float products (ScopedFp32Eigen), where nothing at all may
// be allocated; and with the products the backend picks, where in a build with oneDNN on an AVX-512 CPU
// the float products run oneDNN's kernel (ops/gemm_dnnl.hpp), whose execute() makes a few bookkeeping
// allocations of its own per call: there everything allocated must be freed within the step.
#define EIGEN_RUNTIME_NO_MALLOC
#include <stdexcept>
#define eigen_assert(x) \
  do {                  \
    if (!(x)) throw std::runtime_error("Eigen assertion (heap allocation?): " #x); \
  } while (0)

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <new>

#include "common/tiny_model.hpp"

static std::atomic<long> g_news{0}, g_deletes{0};
static std::atomic<bool> g_counting{false};
void* operator new(std::size_t n) {
  if (g_counting) ++g_news;
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept {
  if (g_counting && p) ++g_deletes;
  std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
  if (g_counting && p) ++g_deletes;
  std::free(p);
}
// the aligned forms too: fbt's AlignedVector (64-byte aligned) allocates through them
void* operator new(std::size_t n, std::align_val_t al) {
  if (g_counting) ++g_news;
  const std::size_t a = std::size_t(al), size = (std::max<std::size_t>(n, 1) + a - 1) / a * a;  // aligned_alloc wants a multiple
  if (void* p = std::aligned_alloc(a, size)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p, std::align_val_t) noexcept {
  if (g_counting && p) ++g_deletes;
  std::free(p);
}
void operator delete(void* p, std::size_t, std::align_val_t) noexcept {
  if (g_counting && p) ++g_deletes;
  std::free(p);
}

using namespace fbt;

namespace {

template <class M> void expect_no_alloc(const ModelConfig& cfg, StepOptions o, int B, int Tn);

template <class T> void expect_step_allocates_nothing(const ModelConfig& cfg, StepOptions o, int B, int Tn) {
  with_model<T>(cfg, [&](auto tag) { expect_no_alloc<typename decltype(tag)::type>(cfg, o, B, Tn); });
}

template <class M> void expect_no_alloc(const ModelConfig& cfg, StepOptions o, int B, int Tn) {
  M m(cfg, 1);
  fbt_test::TinyBatch tb = fbt_test::tiny_batch(B, Tn, cfg.vocab_size, 2);
  tb.doc_start[Tn / 2] = 1;
  std::vector<int> prefix(std::size_t(o.K) * B, 3);
  Rng rng(3);
  o.prefix = prefix.data(), o.rng = &rng;
  Workspace<M> w;
  StepStats st;
  m.params.zero_grad();
  multipass_step(m, w, tb.batch(true), o, st);  // lays out the workspace (and makes the products' primitives)
  auto counted_step = [&] {
    g_news = 0, g_deletes = 0;
    g_counting = true;
    Eigen::internal::set_is_malloc_allowed(false);
    try {
      multipass_step(m, w, tb.batch(true), o, st);
    } catch (...) {
      Eigen::internal::set_is_malloc_allowed(true);
      g_counting = false;
      throw;
    }
    Eigen::internal::set_is_malloc_allowed(true);
    g_counting = false;
  };
  {
    ScopedFp32Eigen eigen;
    multipass_step(m, w, tb.batch(true), o, st);  // Eigen's packing buffers for these shapes
    counted_step();
  }
  EXPECT_EQ(g_news.load(), 0) << "operator new calls inside a step (Eigen's float products)";
  counted_step();
  EXPECT_EQ(g_news.load(), g_deletes.load()) << "memory allocated inside a step and kept (" << gemm_f32_impl(64, 128, 128) << ")";
}

TEST(NoAlloc, EigenDetectorIsArmed) {
  Eigen::internal::set_is_malloc_allowed(false);
  EXPECT_THROW({ Eigen::MatrixXf big(300, 300); (void)big; }, std::runtime_error);
  Eigen::internal::set_is_malloc_allowed(true);
}

TEST(NoAlloc, KPassTrainStepAllocatesNothing) {
  ModelConfig cfg;  // the default small config: D 128, L 4, SwiGLU 384, V 257
  StepOptions o;
  o.K = 3, o.sigma = 0.02;
  EXPECT_NO_THROW(expect_step_allocates_nothing<float>(cfg, o, 4, 64));
  o.detach = true;
  EXPECT_NO_THROW(expect_step_allocates_nothing<float>(cfg, o, 4, 64));
  o.detach = false, o.grad_passes = 1;
  EXPECT_NO_THROW(expect_step_allocates_nothing<float>(cfg, o, 4, 64));
  cfg.fuser = "gated_add";
  o.grad_passes = 0;
  EXPECT_NO_THROW(expect_step_allocates_nothing<float>(cfg, o, 4, 64));
  cfg.fuser = "concat";
  EXPECT_NO_THROW(expect_step_allocates_nothing<float>(cfg, o, 4, 64));
  cfg.fuser = "glu", cfg.feedback_source = "layer", cfg.feedback_layer = 1;  // a middle-layer tap
  cfg.layer_intermediate_size = {384, 128, 256, 384};                        // and blocks of different widths
  EXPECT_NO_THROW(expect_step_allocates_nothing<float>(cfg, o, 4, 64));
}

TEST(NoAlloc, FloatStepAtBenchmarkShapesAllocatesNothing) {
  ModelConfig cfg;  // bench_e2e's tiny config (head size 32, T 128: the attention kernel's hs = 32 path), fewer rows
  cfg.hidden_size = 128, cfg.num_hidden_layers = 2, cfg.num_attention_heads = 4, cfg.num_key_value_heads = 4, cfg.intermediate_size = 384;
  StepOptions o;
  o.K = 3, o.sigma = 0.02;
  EXPECT_NO_THROW(expect_step_allocates_nothing<float>(cfg, o, 2, 128));
}

TEST(NoAlloc, BaselineAndForwardOnlyAllocateNothing) {
  ModelConfig cfg;
  cfg.fuser = "none";
  StepOptions o;
  EXPECT_NO_THROW(expect_step_allocates_nothing<float>(cfg, o, 4, 64));
  o.backward = false;
  EXPECT_NO_THROW(expect_step_allocates_nothing<double>(cfg, o, 2, 32));
}

}  // namespace
