// fbt/train/run_plan.hpp: a run's draws, step by step, without its model: the batches its data source gives, the
// pass plan (K, lambda, prefixes) and the rates (learning rate, the matrices' rate under muon / normuon, the
// scheduled z-loss). The generators are seeded and the schedules built by the functions below, which the trainer
// (train/trainer.hpp) uses too, and each step consumes the draws in the trainer's order:
//   plan (sched_rng: K, prefixes)  ->  grad_accum x [batch (data_rng), the step's jitter seeds (sched_rng)]
// so RunPlan lists what `fbt train` with the same config trains on (fbt.data in Python; tests/train/test_run_plan.cpp
// compares it with a run). One process: a distributed run splits each batch's rows over its ranks.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "../core/rng.hpp"
#include "../model/multipass.hpp"
#include "config.hpp"
#include "lr_schedule.hpp"
#include "run_data.hpp"
#include "schedule.hpp"

namespace fbt {

/// The seed of a run's data generator (batches) and of its schedule generator (K, prefixes, jitter).
inline std::uint64_t run_data_seed(const TrainConfig& c) { return c.seed * 0x9E3779B97F4A7C15ull + 1; }
inline std::uint64_t run_schedule_seed(const TrainConfig& c) { return c.seed * 0x9E3779B97F4A7C15ull + 2; }
/// The run's learning-rate schedule (lr_schedule, lr, min_lr, warmup_steps capped at steps, wsd_decay_frac).
inline LrSchedule run_lr_schedule(const TrainConfig& c) {
  return make_lr_schedule(c.lr_schedule, c.lr, c.min_lr, std::min(c.warmup_steps, c.steps), c.steps, c.wsd_decay_frac);
}
/// The matrices' rate of a step whose rate is `lr`: matrix_lr times the schedule's multiplier lr / cfg.lr under
/// muon / normuon; 0 under adamw (one rate).
inline double run_matrix_lr(const TrainConfig& c, double lr) {
  return c.optimizer == "muon" || c.optimizer == "normuon" ? c.matrix_lr * (lr / c.lr) : 0.0;
}

/// One step of a run as the trainer will take it.
struct PlannedStep {
  long step = 0;
  int K = 1;                   ///< passes
  double lambda = 1.0;         ///< the fed-back passes' weight (lambda / (K-1) each)
  double lr = 0, matrix_lr = 0, z_loss = 0;
  std::vector<int> prefix;     ///< (K, B) plain positions per pass and sequence (row 0 unused)
  std::vector<int> tokens, targets;    ///< (grad_accum, B, T) the micro-batches (with_batches)
  std::vector<std::uint8_t> doc_start; ///< (grad_accum, B, T)
};

/// \brief The run a config describes, step by step (see the file's comment).
class RunPlan {
 public:
  /// The config as the trainer takes it (validated; a relative data path made absolute) and its data source.
  explicit RunPlan(const TrainConfig& c)
      : cfg_(prepared(c)), data_(make_data_source(cfg_)), sched_(cfg_.schedule, cfg_.steps), lr_(run_lr_schedule(cfg_)),
        data_rng_(run_data_seed(cfg_)), sched_rng_(run_schedule_seed(cfg_)) {}

  const TrainConfig& config() const { return cfg_; }
  const DataSource& data() const { return *data_; }
  long step() const { return step_; }  ///< the next step next() returns
  bool done() const { return step_ >= cfg_.steps; }

  /// The next step (throws once the run's steps are listed); with_batches false skips copying the tokens (the
  /// batches are still drawn: the data generator stays in step).
  PlannedStep next(bool with_batches = true) {
    if (done()) throw Error("RunPlan: the run has " + std::to_string(cfg_.steps) + " steps, all listed");
    PlannedStep s;
    const int B = cfg_.batch_size, T = cfg_.seq_len;
    PassPlan p;
    sched_.plan(step_, B, T, sched_rng_, p);
    s.step = step_, s.K = p.K, s.lambda = p.lambda, s.prefix = p.prefix;
    s.z_loss = scheduled_z_loss(cfg_, lr_, step_);
    std::vector<int> tok, tgt;
    std::vector<std::uint8_t> ds;
    for (int a = 0; a < cfg_.grad_accum; ++a) {
      data_->sample_batch(data_rng_, B, T, tok, tgt, ds);
      skip_step_draws(sched_rng_, p.K, cfg_.schedule.sigma);
      if (with_batches) {
        s.tokens.insert(s.tokens.end(), tok.begin(), tok.end());
        s.targets.insert(s.targets.end(), tgt.begin(), tgt.end());
        s.doc_start.insert(s.doc_start.end(), ds.begin(), ds.end());
      }
    }
    s.lr = lr_.lr(step_);
    s.matrix_lr = run_matrix_lr(cfg_, s.lr);
    ++step_;
    return s;
  }

 private:
  static TrainConfig prepared(const TrainConfig& c) {
    validate(c);
    TrainConfig r = c;
    resolve_data_path(r);
    return r;
  }
  TrainConfig cfg_;
  std::unique_ptr<DataSource> data_;
  MultiPassScheduler sched_;
  LrSchedule lr_;
  Rng data_rng_, sched_rng_;
  long step_ = 0;
};

}  // namespace fbt
