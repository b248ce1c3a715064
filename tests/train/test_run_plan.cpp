// RunPlan (train/run_plan.hpp: a run's draws without its model, what fbt.data lists):
//   - skip_step_draws advances a generator exactly as multipass_step's jitter draws do (sigma > 0 and 0, K 1..3)
//   - a RunPlan of a config lists the K, lambda, learning rate and the matrices' rate of every step a Trainer of the
//     same config takes (grad_accum 2, jitter, uniform prefixes, normuon, the cooldown z-loss), and the Trainer's
//     batches: its step-0 loss is the model's loss on the plan's step-0 micro-batches
//   - a config it cannot run is refused as the trainer refuses it; past the last step, next() throws
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "../common/io_test.hpp"
#include "../common/tiny_model.hpp"
#include "fbt/train/trainer.hpp"

namespace test_train_run_plan {

using namespace fbt;

TrainConfig tiny(const std::string& out) {
  TrainConfig c;
  c.model.hidden_size = 32, c.model.num_hidden_layers = 2, c.model.num_attention_heads = 2, c.model.num_key_value_heads = 1;
  c.model.intermediate_size = 64, c.model.max_position_embeddings = 64;
  c.data = "task:addition", c.task_difficulty = 2;
  c.batch_size = 3, c.seq_len = 32, c.steps = 9, c.warmup_steps = 2, c.grad_accum = 2;
  c.schedule.feedback_start = 0.2, c.schedule.pass_mix = {{2, 0.5}, {3, 0.5}}, c.schedule.sigma = 0.05, c.schedule.prefix = "uniform";
  c.optimizer = "normuon", c.lr_schedule = "wsd", c.cooldown_z_loss = 1e-4;
  c.eval_every = 0, c.eval_windows = 1, c.seq_eval_windows = 0, c.monitor_passes = 0, c.progress = false, c.out_dir = out;
  return c;
}

TEST(RunPlan, SkipStepDrawsIsWhatTheStepDraws) {
  Model<float> m(fbt_test::tiny_config("glu"), 3);
  const fbt_test::TinyBatch tb = fbt_test::tiny_batch(2, 7, m.V, 4);
  for (double sigma : {0.0, 0.1})
    for (int K = 1; K <= 3; ++K) {
      Rng used(99), skipped(99);
      StepOptions o;
      o.K = K, o.sigma = sigma, o.rng = &used;
      Workspace<Model<float>> ws;
      (void)multipass_step(m, ws, tb.batch(), o);
      skip_step_draws(skipped, K, sigma);
      EXPECT_EQ(used.state(), skipped.state()) << "K " << K << " sigma " << sigma;
    }
}

TEST(RunPlan, ListsWhatTheTrainerTakes) {
  const TrainConfig c = tiny(testing::TempDir() + "fbt_run_plan_" + std::to_string(::getpid()));
  RunPlan plan(c);
  Trainer<Model<float>> t(c);
  Model<float> fresh(plan.config().model, plan.config().seed);  // the trainer's initial weights
  bool several_k = false;
  for (long s = 0; s < c.steps; ++s) {
    const PlannedStep p = plan.next();
    ASSERT_EQ(p.tokens.size(), std::size_t(2 * 3 * 32));
    if (s == 0) {  // plain (feedback from 20%): the loss of the initial model on the listed micro-batches
      ASSERT_EQ(p.K, 1);
      double loss = 0;
      for (int a = 0; a < 2; ++a) {
        const std::size_t off = std::size_t(a) * 3 * 32;
        const Batch b{3, 32, p.tokens.data() + off, p.targets.data() + off, p.doc_start.data() + off};
        StepOptions o;
        o.backward = false;
        Workspace<Model<float>> ws;
        loss += multipass_step(fresh, ws, b, o).loss[0] / 2;
      }
      const StepReport r = t.train_step();
      EXPECT_NEAR(r.loss[0], loss, 1e-6 * loss);
      EXPECT_EQ(r.K, 1);
      continue;
    }
    const StepReport r = t.train_step();
    EXPECT_EQ(r.K, p.K) << "step " << s;
    several_k = several_k || p.K != 1;
    EXPECT_DOUBLE_EQ(r.lr, p.lr) << "step " << s;
    EXPECT_DOUBLE_EQ(r.matrix_lr, p.matrix_lr) << "step " << s;
    EXPECT_EQ(p.prefix.size(), std::size_t(p.K) * 3);
    if (s == c.steps - 1) EXPECT_EQ(p.z_loss, 1e-4) << "the cooldown's z-loss";
  }
  EXPECT_TRUE(several_k);
  EXPECT_TRUE(plan.done());
  EXPECT_FBT_ERROR(plan.next(), "all listed");
  TrainConfig bad = c;
  bad.batch_size = 0;
  EXPECT_FBT_ERROR(RunPlan{bad}, "batch_size");
}

}  // namespace test_train_run_plan
