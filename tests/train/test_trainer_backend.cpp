// The trainer over another backend than the CPU's (Trainer<M, Be>, train/trainer.hpp), run on the host
// stand-in of the CUDA backend (check/host_backend.hpp: the CUDA kernels' algorithms, NaN-filled fresh
// memory): the same losses as the CPU trainer over 20 steps within float tolerance, the same evaluation,
// a resume bit-identical on the same backend, a registered optimizer without a backend step (run on
// the host between a download and an upload), and the refusals (bf16 products, data-parallel).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "fbt/check/host_backend.hpp"
#include "fbt/train/trainer.hpp"

// The file's own namespace: with FBT_TEST_UNITY an area's test files share one translation unit.
namespace test_train_trainer_backend {

using namespace fbt;
using Host = check::HostBackend;

namespace {

std::string temp_dir(const std::string& name) {
  const std::string d = testing::TempDir() + "fbt_trainer_backend_" + name + "_" + std::to_string(::getpid());
  std::filesystem::remove_all(d);
  return d;
}

TrainConfig tiny(const std::string& out, const std::string& optimizer = "adamw") {
  TrainConfig c;
  c.model.hidden_size = 32, c.model.num_hidden_layers = 2, c.model.num_attention_heads = 2, c.model.num_key_value_heads = 1;
  c.model.intermediate_size = 64, c.model.max_position_embeddings = 64;
  c.data = "task:addition", c.task_difficulty = 2;
  c.batch_size = 4, c.seq_len = 32, c.steps = 20, c.warmup_steps = 2, c.grad_accum = 2;
  c.schedule.feedback_start = 0.25, c.schedule.pass_mix = {{2, 0.6}, {3, 0.4}}, c.schedule.sigma = 0.02;
  c.optimizer = optimizer;
  c.eval_every = 0, c.eval_windows = 2, c.seq_eval_windows = 1, c.monitor_passes = 3, c.progress = false, c.out_dir = out;
  return c;
}

bool same_bits(const ParamStore<float>& a, const ParamStore<float>& b) {
  return a.size() == b.size() && std::memcmp(a.values(), b.values(), a.size() * sizeof(float)) == 0 &&
         std::memcmp(a.adam_m(), b.adam_m(), a.size() * sizeof(float)) == 0 && std::memcmp(a.adam_v(), b.adam_v(), a.size() * sizeof(float)) == 0 &&
         a.step == b.step;
}

// Float on two backends whose kernels sum in different orders (and whose attention keeps a different
// state): the per-pass losses of 20 steps agree to this relative tolerance (measured: 1.6e-8 at worst,
// printed by the test; a step that skipped the optimizer or clipping on the backend is off by 1e-2 or more).
constexpr double kLossTol = 1e-5;

/// AdamW written as a program's own optimizer, without a backend step: the trainer runs it on the host.
struct HostOnlyAdamW {
  static constexpr const char* name = "host_only_adamw";
  AdamWConfig cfg;
  explicit HostOnlyAdamW(const OptimizerArgs& a) { cfg.lr = a.lr, cfg.beta1 = a.beta1, cfg.beta2 = a.beta2, cfg.eps = a.eps, cfg.weight_decay = a.weight_decay; }
  template <class T> void step(ParamStore<T>& ps, const OptimizerStep& s) { adamw_update(ps, cfg, s.lr); }
};

}  // namespace

TEST(TrainerBackend, HostStandInTrainsLikeTheCpuFor20Steps) {
  const std::string dir = temp_dir("losses");
  for (const char* opt : {"adamw", "normuon"}) {
    SCOPED_TRACE(opt);
    Trainer<Model<float>> cpu(tiny(dir + "/cpu", opt));
    Trainer<Model<float>, Host> host(tiny(dir + "/host", opt));
    int fed_back = 0;
    double worst = 0;
    for (int i = 0; i < 20; ++i) {
      const StepReport a = cpu.train_step(), b = host.train_step();
      ASSERT_EQ(a.K, b.K) << "step " << i;
      fed_back += a.K > 1;
      for (int j = 0; j < a.K; ++j) {
        EXPECT_NEAR(b.loss[j], a.loss[j], kLossTol * a.loss[j]) << "step " << i << " pass " << j + 1;
        worst = std::max(worst, std::fabs(b.loss[j] - a.loss[j]) / a.loss[j]);
      }
      EXPECT_NEAR(b.grad_norm, a.grad_norm, kLossTol * a.grad_norm) << "step " << i;
      EXPECT_EQ(a.matrix_lr, b.matrix_lr);
    }
    EXPECT_GT(fed_back, 0) << "the run must exercise the fed-back passes";
    std::printf("[ %s: host stand-in vs CPU, 20 steps: worst relative loss difference %.2e ]\n", opt, worst);
    // the evaluation (parallel passes, sequential decoding, contraction monitor) ran on the stand-in
    const long launches = host.backend().launches;
    const EvalReport ec = cpu.evaluate(), eh = host.evaluate();
    EXPECT_GT(host.backend().launches, launches);
    ASSERT_EQ(ec.val_loss.size(), eh.val_loss.size());
    for (std::size_t k = 0; k < ec.val_loss.size(); ++k) EXPECT_NEAR(eh.val_loss[k], ec.val_loss[k], kLossTol * ec.val_loss[k]) << "pass " << k + 1;
    EXPECT_NEAR(eh.seq_loss_soft, ec.seq_loss_soft, kLossTol * ec.seq_loss_soft);
    EXPECT_NEAR(eh.seq_loss_standard, ec.seq_loss_standard, kLossTol * ec.seq_loss_standard);
    ASSERT_EQ(ec.contraction.loss.size(), eh.contraction.loss.size());
    for (std::size_t k = 0; k < ec.contraction.loss.size(); ++k) EXPECT_NEAR(eh.contraction.loss[k], ec.contraction.loss[k], kLossTol * ec.contraction.loss[k]);
    // the host model is a mirror: after sync_host it holds the backend's weights (close to the CPU run's)
    host.sync_host();
    EXPECT_EQ(host.model.params.step, 20);
    double diff = 0, scale = 0;
    for (std::size_t i = 0; i < cpu.model.params.size(); ++i)
      diff = std::max(diff, std::fabs(double(host.model.params.values()[i]) - cpu.model.params.values()[i])),
      scale = std::max(scale, std::fabs(double(cpu.model.params.values()[i])));
    EXPECT_LT(diff, 1e-2 * scale);
    EXPECT_GT(diff, 0.0) << "the host mirror must hold the stand-in's own weights, not the CPU run's";
  }
  std::filesystem::remove_all(dir);
}

TEST(TrainerBackend, ResumeOnTheSameBackendIsBitIdentical) {
  const std::string dir = temp_dir("resume");
  TrainConfig c = tiny(dir + "/a", "normuon");
  c.steps = 8;
  Trainer<Model<float>, Host> straight(c);
  for (int i = 0; i < 8; ++i) straight.train_step();
  straight.sync_host();

  c.out_dir = dir + "/b";
  Trainer<Model<float>, Host> first(c);
  for (int i = 0; i < 4; ++i) first.train_step();
  first.save_checkpoint(dir + "/b/checkpoint");
  auto resumed = Trainer<Model<float>, Host>::resume(dir + "/b/checkpoint");
  EXPECT_EQ(resumed->step, 4);
  for (int i = 0; i < 4; ++i) resumed->train_step();
  resumed->sync_host();
  EXPECT_TRUE(same_bits(straight.model.params, resumed->model.params)) << "N steps vs N/2 + save + resume + N/2";
  ASSERT_TRUE(straight.model.params.has_row_moments() && resumed->model.params.has_row_moments());
  EXPECT_EQ(std::memcmp(straight.model.params.row_moments(), resumed->model.params.row_moments(),
                        straight.model.params.row_moments_size() * sizeof(float)),
            0);
  first.sync_host();
  EXPECT_FALSE(same_bits(first.model.params, resumed->model.params));  // and the resumed run did train
  std::filesystem::remove_all(dir);
}

TEST(TrainerBackend, AnOptimizerWithoutABackendStepRunsOnTheHost) {
  register_optimizer<HostOnlyAdamW>();
  const std::string dir = temp_dir("host_opt");
  Trainer<Model<float>> cpu(tiny(dir + "/cpu", "adamw"));
  Trainer<Model<float>, Host> host(tiny(dir + "/host", "host_only_adamw"));
  EXPECT_FALSE(host.optimizer->has_backend_step());
  EXPECT_TRUE(cpu.optimizer->has_backend_step());  // the built-in ones have one
  for (int i = 0; i < 10; ++i) {
    const StepReport a = cpu.train_step(), b = host.train_step();
    ASSERT_EQ(a.K, b.K);
    for (int j = 0; j < a.K; ++j) EXPECT_NEAR(b.loss[j], a.loss[j], kLossTol * a.loss[j]) << "step " << i << " pass " << j + 1;
  }
  std::filesystem::remove_all(dir);
}

TEST(TrainerBackend, RefusesTheCpuOnlyOptions) {
  const std::string dir = temp_dir("refuse");
  TrainConfig c = tiny(dir + "/a");
  c.precision = "bf16";
  try {
    Trainer<Model<float>, Host> t(c);
    FAIL() << "precision bf16 on the host stand-in must be refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("precision bf16 is the CPU backend's"), std::string::npos) << e.what();
  }
  std::filesystem::remove_all(dir);
}

}  // namespace test_train_trainer_backend
