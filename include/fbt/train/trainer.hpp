// fbt/train/trainer.hpp: the training loop: schedule, AdamW, clipping, LR schedule, gradient
// accumulation, evaluation, JSONL logs, checkpoints and exact resume, for any model type M (a built-in
// fuser or a user's: fbt::with_model picks the type a config names).
//
// One optimizer step: the scheduler draws K, lambda and the prefixes (spec 3); grad_accum micro-batches
// each run multipass_step with gradients scaled by 1/grad_accum; the global norm is clipped; AdamW
// applies the LR schedule's rate (or, with optimizer muon / normuon, AdamW the Adam group's and Muon /
// NorMuon the matrices' matrix_lr times the same schedule multiplier: train/muon.hpp). Every random draw comes from two Rngs (data, schedule) whose states
// are saved with the checkpoint, so `N steps` and `N/2 + save + resume + N/2` give the same weights bit
// for bit. A non-finite loss or gradient stops training with a message naming the step and the pass.
// A program watches the run step by step through on_step (e.g. fbt's Python callback), which may stop it.
// Files in out_dir: train.jsonl (every step), eval.jsonl (every evaluation), checkpoint/model.safetensors
// (weights, Qwen3 names, config in the metadata) and checkpoint/train_state.safetensors (AdamW moments,
// step, NorMuon's row moments, RNG states, token counters, the optimizer's name, the run's config), each
// written to a temporary name and renamed.
// Backends: Trainer<M> trains on the CPU (threads, MPI); Trainer<M, Be> on any other backend Be (a GPU's,
// or check/host_backend.hpp's stand-in) runs the same loop with the weights and the optimizer state in
// Be's memory (model/backend_model.hpp, train/backend_optimizer.hpp): the step, clipping, the built-in
// optimizers, the evaluation and the decoder run there; a registered optimizer without a backend step
// runs on the host (download, step, upload); checkpoints download first (sync_host).
#pragma once

#include <algorithm>
#include <cstring>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <memory>
#include <random>
#include <sstream>

#include "../data/dataset.hpp"
#include "../data/sft_dataset.hpp"
#include "../data/token_dataset.hpp"
#include "../data/tasks.hpp"
#include "../io/checkpoint.hpp"
#include "../io/hf.hpp"
#include "../model/parallel_step.hpp"
#include "backend_optimizer.hpp"
#include "optimizer.hpp"
#include "clip.hpp"
#include "evaluate.hpp"
#include "lr_schedule.hpp"
#include "run_plan.hpp"
#include "memory.hpp"
#include "run_dir.hpp"
#include "config.hpp"
#include "reports.hpp"
#include "run_data.hpp"
#include "train_memory.hpp"
#include "train_state.hpp"
#include "../dist/distributed_step.hpp"

namespace fbt {

template <class M, class Be = CpuBackend<typename M::Scalar>> class Trainer {
 public:
  using T = typename M::Scalar;
  using Backend = Be;
  /// The CPU path trains the model's own buffers (threads, MPI); any other backend through BackendModel.
  static constexpr bool on_cpu = std::is_same<Be, CpuBackend<T>>::value;
  TrainConfig cfg;
  std::unique_ptr<DataSource> data;
  M model;
  MultiPassScheduler sched;
  LrSchedule lr_sched;
  std::unique_ptr<AnyOptimizer<T>> optimizer;  ///< the one cfg.optimizer names (train/optimizer.hpp: built-in or registered)
  Rng data_rng, sched_rng;
  long step = 0;               ///< optimizer steps taken
  double tokens = 0;           ///< training tokens seen
  double compute_tokens = 0;   ///< tokens x passes (token-equivalent compute)
  std::atomic<long>* progress_counter = nullptr;  ///< if set, run() stores `step` here after every step (for a watcher thread)
  /// \brief If set, run() calls it after every step with the step's report (on every rank), before the
  /// step's evaluation and checkpoint. Returning false stops the run as a stop signal does: this step's
  /// checkpoint is written, stopped_by_observer is set and run() returns (resume() continues from there).
  /// An exception it throws leaves run() at once (the checkpoint is the last one written).
  std::function<bool(const StepReport&)> on_step;
  /// Called after every evaluation of run() with the line eval.jsonl gets (on rank 0).
  std::function<void(const nlohmann::json&)> on_eval;
  bool stopped_by_observer = false;  ///< run() returned because on_step returned false

  /// \brief Trains on a data source of the program's own (not the one cfg.data names). Its describe() is
  /// recorded with every checkpoint, and resume() asks for the same source again (an explicit argument):
  /// a mismatch is an error, never a silent swap.
  Trainer(const TrainConfig& c, std::unique_ptr<DataSource> d) : Trainer(c, std::move(d), true) {}
  /// Trains on the data source cfg.data names (make_data_source).
  explicit Trainer(const TrainConfig& c) : Trainer(c, make_data_source(prepared(c)), false) {}

 private:
  Trainer(const TrainConfig& c, std::unique_ptr<DataSource> d, bool own)
      : cfg(prepared(c)), data(std::move(d)), model(cfg.model, cfg.seed), sched(cfg.schedule, cfg.steps),
        lr_sched(run_lr_schedule(cfg)), data_rng(run_data_seed(cfg)), sched_rng(run_schedule_seed(cfg)) {  // as a RunPlan (run_plan.hpp)
    FBT_ASSERT(data, "Trainer needs a data source");
    if (own) {
      data_describe_ = data->describe();
      if (data_describe_.empty()) data_describe_ = "a data source of the program's own";
    } else {
      data_identity_ = data_identity(cfg);  // the files it reads: recorded with each checkpoint, compared on resume
    }
    if (cfg.precision == "bf16" && !std::is_same<T, float>::value)
      throw Error("invalid training config: precision: bf16 needs a float model (this Trainer's scalar is not float)");
    if (!on_cpu && cfg.precision != "fp32")
      throw Error("invalid training config: precision " + cfg.precision + " is the CPU backend's (this run's backend is " + Be::name +
                  "; train with --device cpu or precision fp32)");
    if (!on_cpu && cfg.threads > 1)  // the CPU's parallel step: another backend would ignore it
      throw Error("invalid training config: threads " + std::to_string(cfg.threads) + " splits a step over CPU threads (this run's backend is " + Be::name +
                  "; train with --device cpu, or threads 1)");
    if (!on_cpu && cfg.distributed != "none")
      throw Error("invalid training config: distributed " + cfg.distributed + " is data-parallel training on the CPU backend (this run's backend is " +
                  Be::name + "; train with --device cpu, or distributed none)");
    if (data->num_eval_windows(cfg.seq_len) < 1)
      throw Error("data " + cfg.data + ": the validation split holds no window of " + std::to_string(cfg.seq_len + 1) +
                  " tokens (evaluation needs one; raise val_fraction or lower seq_len)");
    optimizer = OptimizerRegistry::global().make<T>(cfg.optimizer, optimizer_args(cfg), cfg.optimizer_options);
    optimizer->init(model.params);  // e.g. NorMuon's row moments, allocated (zero) now: a checkpoint at step 0 holds them
    // the exact workspaces, now that the model exists and before any is allocated (the first step does it);
    // on another backend they live in its memory, not the host's
    const double step = double(step_bytes()), ev = double(eval_bytes());
    if (on_cpu)
      check_memory("this training run", step + ev,
                 "step workspace " + detail::fmt_bytes(step) + " for batch_size " + std::to_string(cfg.batch_size) + " x seq_len " +
                     std::to_string(cfg.seq_len) + " with K_max " + std::to_string(model.feedback() ? cfg.schedule.K_max : 1) +
                     (cfg.threads > 1 ? " on " + std::to_string(cfg.threads) + " threads" : std::string()) + ", evaluation workspace " +
                     detail::fmt_bytes(ev) + "; the " + detail::fmt_bytes(double(model.params.size()) * 4 * sizeof(T)) +
                     " of parameters and AdamW state are already allocated",
                 cfg.max_memory_gb > 0 ? std::max(cfg.max_memory_gb - double(model.params.size()) * 4 * sizeof(T) / 1e9, 1e-9) : 0,
                 "lower batch_size, seq_len, K_max or threads, or use detach or grad_passes");
    if (on_cpu && cfg.threads > 1) par_ = std::make_unique<ParallelStepper<M>>(model, cfg.threads);
    if (!cfg.init_from.empty()) {  // the stack's weights from a checkpoint; the feedback tensors as initialised
      const std::vector<std::string> fresh = init_from_checkpoint(model, cfg.init_from);
      init_note_ = "initialised from " + cfg.init_from + ": " + std::to_string(model.params.specs().size() - fresh.size()) + " tensors loaded, " +
                   std::to_string(fresh.size()) + " new (" + (fresh.empty() ? std::string("none") : "model.feedback.*") + "), optimizer fresh";
    }
    const int sep = data->doc_sep();
    if constexpr (on_cpu) {
      dec_ = std::make_unique<Decoder<M, Be>>(model, sep);
    } else {  // the weights and the optimizer state on the backend, uploaded from the host model now
      dev_ = std::make_unique<BackendModel<M, Be>>(model);
      dev_opt_ = std::make_unique<BackendOptimizer<M, Be>>(*dev_);
      dec_ = std::make_unique<Decoder<M, Be>>(*dev_, sep);
    }
  }

 public:

  /// \brief Trains data-parallel over `comm` (dist/comm.hpp; e.g. an MpiComm under mpirun): every rank runs
  /// this trainer with the same config (so the same batches and schedule), takes its share of each batch's
  /// rows, and the gradients are summed over the ranks before clipping and the optimizer step. Rank 0 alone
  /// prints, logs, evaluates and writes checkpoints; an error on any rank stops every rank with its message.
  /// Call before the first step (also after resume()). comm must outlive the trainer.
  void set_communicator(Communicator& comm) {
    if (!on_cpu && comm.size() > 1)
      throw Error(std::string("data-parallel training (distributed) runs on the CPU backend; this run's backend is ") + Be::name);
    if (comm.size() > 1 && cfg.batch_size < comm.size())
      throw Error("invalid training config: batch_size " + std::to_string(cfg.batch_size) + " is below the " + std::to_string(comm.size()) +
                  " ranks (each rank takes at least one row of every batch)");
    comm_ = &comm;
    DistOptions d;
    d.overlap = cfg.dist_overlap, d.bucket_bytes = std::size_t(std::max(1.0, cfg.dist_bucket_mb * 1e6));
    if constexpr (on_cpu)
      if (comm.size() > 1) dist_ = std::make_unique<DistributedStepper<M>>(model, comm, cfg.threads, d), par_.reset();
  }
  const Communicator& communicator() const { return *comm_; }

  /// \brief Collective: throws on every rank (naming the step and the ranks) unless every rank holds
  /// parameters bit-identical to rank 0's. A no-op on one process.
  void check_same_parameters() {
    if (comm_->size() == 1) return;
    std::uint64_t h = 1469598103934665603ull;  // FNV-1a over the parameter bytes
    const auto* b = reinterpret_cast<const unsigned char*>(model.params.values());
    for (std::size_t i = 0, n = model.params.size() * sizeof(T); i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
    std::string root = std::to_string(h);
    comm_->broadcast(root, 0);
    comm_->agree(root == std::to_string(h), "its parameters differ from rank 0's at step " + std::to_string(step) + " (hash " +
                                                std::to_string(h) + " against " + root + "): the ranks have diverged");
  }

  /// Bytes the largest step of this run will need (spec 3: the library says so before it runs).
  std::size_t step_bytes() const {
    StepOptions o;
    o.K = model.feedback() ? cfg.schedule.K_max : 1, o.detach = cfg.schedule.detach, o.grad_passes = cfg.schedule.grad_passes;
    // with threads, each share's workspace plus a gradient buffer per extra thread (model/parallel_step.hpp)
    const int rows = (cfg.batch_size + cfg.threads - 1) / cfg.threads;
    return std::size_t(std::min(cfg.threads, cfg.batch_size)) * step_workspace_bytes(model, rows, cfg.seq_len, o) +
           std::size_t(std::min(cfg.threads, cfg.batch_size) - 1) * model.params.size() * sizeof(T);
  }

  /// Bytes the evaluation's workspace will need (8 validation windows at a time, K_max passes, forward only).
  std::size_t eval_bytes() const {
    StepOptions o;
    o.K = model.feedback() ? std::max(cfg.schedule.K_max, 1) : 1, o.backward = false;
    return step_workspace_bytes(model, 8, cfg.seq_len, o);
  }

  /// \brief One optimizer step. Throws fbt::Error naming the step (and pass) on a non-finite loss or gradient.
  StepReport train_step() {
    const auto t0 = std::chrono::steady_clock::now();
    const int B = cfg.batch_size, Tn = cfg.seq_len;
    sched.plan(step, B, Tn, sched_rng, plan_);
    StepOptions o;
    o.K = plan_.K, o.lambda = plan_.lambda, o.sigma = cfg.schedule.sigma, o.detach = cfg.schedule.detach;
    o.grad_passes = cfg.schedule.grad_passes, o.prefix = plan_.prefix.data(), o.rng = &sched_rng, o.grad_scale = 1.0 / cfg.grad_accum;
    StepReport r;
    r.step = step, r.K = plan_.K, r.loss.assign(plan_.K, 0.0);
    model.opts.z_loss = z_loss_at(step);
    if constexpr (on_cpu) model.params.zero_grad();
    else dev_->zero_grad();
    {
      const ScopedMatmulPrecision mp(parse_precision(cfg.precision));  // the forward and backward products only; the optimizer is fp32
      for (int a = 0; a < cfg.grad_accum; ++a) {
        data->sample_batch(data_rng, B, Tn, tok_, tgt_, ds_);
        if (std::none_of(tgt_.begin(), tgt_.end(), [](int t) { return t >= 0; }))  // loss 0 and no gradient: nothing to learn
          throw Error("training stopped at step " + std::to_string(step) + ": the batch has no target (every one of its " + std::to_string(tgt_.size()) +
                      " targets is masked: " + data->describe() + "); a longer seq_len keeps more of each example");
        try {
          const Batch batch{B, Tn, tok_.data(), tgt_.data(), ds_.data()};
          if constexpr (!on_cpu) dev_->multipass_step(batch, o, st_);
          else if (dist_) {  // this rank's rows; the last micro-batch sums the gradients over the ranks
            dist_->step(batch, o, st_, a == cfg.grad_accum - 1);
            r.comm_seconds += dist_->exposed_seconds();
          }
          else if (par_) par_->step(batch, o, st_);
          else multipass_step(model, ws_, batch, o, st_);
        } catch (const Error& e) {
          throw Error("training stopped at step " + std::to_string(step) + ": " + e.what());
        }
        for (int j = 0; j < plan_.K; ++j) r.loss[j] += st_.loss[j] / cfg.grad_accum;
      }
    }
    if constexpr (on_cpu) r.grad_norm = clip_grad_norm(model.params, cfg.grad_clip);
    else r.grad_norm = dev_opt_->clip_grad_norm(cfg.grad_clip);
    if (!std::isfinite(r.grad_norm)) throw Error("training stopped at step " + std::to_string(step) + ": non-finite gradient norm (" + std::to_string(r.grad_norm) + ") with K = " + std::to_string(plan_.K));
    r.lr = lr_sched.lr(step);
    const auto t_opt = std::chrono::steady_clock::now();
    r.matrix_lr = optimizer_step(OptimizerStep{step, r.lr, r.lr / cfg.lr});
    r.optimizer_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_opt).count();
    ++step;
    tokens += double(B) * Tn * cfg.grad_accum;
    compute_tokens += double(B) * Tn * cfg.grad_accum * plan_.K;
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    last_state_rms_ = st_.state_rms, last_gate_mean_ = st_.gate_mean, last_gate_std_ = st_.gate_std, last_ratio_ = st_.feedback_ratio;
    return r;
  }

  /// The z-loss coefficient of step `step` (scheduled_z_loss: cooldown_z_loss from the wsd decay on).
  double z_loss_at(long step) const { return scheduled_z_loss(cfg, lr_sched, step); }

  /// \brief Per-pass validation losses, the sequential-exact losses, the contraction monitor, the data's
  /// optimal loss beside them (when known) and all of them by position within a document.
  EvalReport evaluate() {
    const ScopedMatmulPrecision mp(parse_precision(cfg.precision));  // the run's precision (bf16 runs evaluate in bf16)
    model.opts.z_loss = cfg.model.z_loss;  // validation losses use the model's own z-loss (the cooldown's is a training term)
    EvalReport e;
    e.step = step, e.tokens = tokens;
    const int K = model.feedback() ? std::max(cfg.schedule.K_max, 1) : 1;
    const int Tn = cfg.seq_len;
    std::vector<PositionSums> pass_pos;
    PositionSums pos;
    e.val_loss = evaluate_passes(backend(), model, weights(), eval_ws_, *data, Tn, K, cfg.eval_windows, 8, &pass_pos);
    LossByPosition& bp = e.by_position;
    bp.count = pass_pos[0].count;
    for (const auto& p : pass_pos) bp.pass.push_back(p.mean());
    const int nw = detail::parallel_eval_windows(*data, Tn, cfg.eval_windows);
    if (optimal_by_position(*data, Tn, nw, pos)) bp.optimal = pos.mean(), e.optimal_loss = data->mean_optimal_loss(Tn, nw);
    if (cfg.seq_eval_windows != 0) {  // -1: every validation window
      e.seq_loss_standard = sequential_loss(*dec_, *data, Tn, cfg.seq_eval_windows, DecodeModeSpec{}, &pos);
      bp.seq_count = pos.count, bp.seq_standard = pos.mean();
      if (model.feedback()) {
        e.seq_loss_soft = sequential_loss(*dec_, *data, Tn, cfg.seq_eval_windows, DecodeModeSpec::parse("soft"), &pos);
        bp.seq_soft = pos.mean();
      }
      const int ns = detail::sequential_eval_windows(*data, Tn, cfg.seq_eval_windows);
      if (optimal_by_position(*data, Tn, ns, pos)) bp.seq_optimal = pos.mean(), e.seq_optimal_loss = data->mean_optimal_loss(Tn, ns);
    }
    if (model.feedback() && cfg.monitor_passes > 0) {
      const int nb = std::min(4, data->num_eval_windows(cfg.seq_len));
      std::vector<int> tok, tgt, rt, rg;
      std::vector<std::uint8_t> ds, rd;
      for (int i = 0; i < nb; ++i) {
        data->eval_window(i, cfg.seq_len, rt, rg, rd);
        tok.insert(tok.end(), rt.begin(), rt.end()), tgt.insert(tgt.end(), rg.begin(), rg.end()), ds.insert(ds.end(), rd.begin(), rd.end());
      }
      e.contraction = contraction_monitor(backend(), model, weights(), eval_ws_, Batch{nb, cfg.seq_len, tok.data(), tgt.data(), ds.data()}, cfg.monitor_passes);
    }
    return e;
  }

  /// \brief Writes dir/model.safetensors and dir/train_state.safetensors as one unit: both go to dir.tmp,
  /// then dir.tmp replaces dir (the previous checkpoint is kept as dir.old until the new one is in place).
  /// The temporary directory is dir.tmp.<pid>.<n>, this save's own; one of a process that no longer
  /// exists (a killed run) is removed, as is dir.tmp of older versions.
  /// On another backend than the CPU's the host model is refreshed from it first (sync_host).
  void save_checkpoint(const std::string& dir) const {
    namespace fs = std::filesystem;
    sync_host();
    static std::atomic<unsigned long> saves{0};  // dir.tmp.<pid>.<n>: two runs of one process never share a temporary directory
    const std::string tmp = dir + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(saves++), old = dir + ".old";
    remove_stale_checkpoint_temps(dir);
    fs::remove_all(tmp);
    fs::create_directories(tmp);
    auto meta = model_metadata(model.cfg);  // the model file: weights + config (+ the step, to pair it with the state)
    meta["step"] = std::to_string(step);
    save_safetensors(tmp + "/model.safetensors", model_tensors(model), meta);
    std::map<std::string, std::string> extra{{"trainer_step", std::to_string(step)}, {"tokens", detail::num(tokens)},
                                             {"compute_tokens", detail::num(compute_tokens)}, {"data_rng", data_rng.state()},
                                             {"sched_rng", sched_rng.state()}, {"train_config", to_json(cfg).dump()},
                                             {"optimizer", cfg.optimizer}};
    if (!data_describe_.empty()) extra["data_source"] = data_describe_;
    if (!data_identity_.empty()) extra["data_identity"] = data_identity_;
    extra["weights_hash"] = weights_hash(model.params);  // pairs this state with the weights saved beside it
    // how the run was distributed when this was written (any N gives the same run: a record, not a check)
    extra["distributed"] = comm_->size() > 1 ? std::string(comm_->name()) + " over " + std::to_string(comm_->size()) + " ranks" : std::string("none");
    save_train_state(tmp + "/train_state.safetensors", model.params, extra, optimizer_state_refs());
    fs::remove_all(old);
    if (fs::exists(dir)) fs::rename(dir, old);
    fs::rename(tmp, dir);
    fs::remove_all(old);
  }

  /// \brief Rebuilds a trainer from a checkpoint directory: same config, weights, moments, RNG states and counters.
  /// `override` may change fields that do not alter the run's math (steps, eval/checkpoint cadence, out_dir, progress).
  ///
  /// Every field of the training state is checked before it is used, and a bad one is refused with an
  /// fbt::Error naming the file and the field: trainer_step (an integer in [0, the run's steps], equal to
  /// AdamW's step and to model.safetensors' step), tokens (step x batch_size x seq_len x grad_accum exactly),
  /// compute_tokens (between tokens and tokens x K_max), data_rng and sched_rng (generator states as
  /// Rng::state writes them), optimizer (the run's optimizer; absent in states from before it, which are
  /// AdamW's), and the run's config (validate()).
  /// `data`: the program's own data source, when the run was trained on one (Trainer(cfg, source)); it
  /// must be the same source (its describe() is compared with the checkpoint's record), and a run trained
  /// on its own source cannot resume without it (nor a run on cfg.data with one): both refused, naming both.
  static std::unique_ptr<Trainer> resume(const std::string& dir, const std::function<void(TrainConfig&)>& override = {},
                                         std::unique_ptr<DataSource> data = nullptr) {
    const std::string st_path = dir + "/train_state.safetensors", m_path = dir + "/model.safetensors";
    const std::string where = "training state '" + st_path + "'";
    TrainConfig c = read_train_config(dir);
    try {
      validate(c);
    } catch (const Error& e) {
      throw Error(where + " (train_config): " + e.what());
    }
    const long run_steps = c.steps;
    detail::require_regular_file(m_path, "checkpoint");
    const SafetensorsFile f = read_safetensors(st_path);
    auto meta = [&](const char* k) -> std::string {
      auto it = f.metadata.find(k);
      if (it == f.metadata.end()) throw Error(where + ": metadata field \"" + k + "\" is missing");
      return it->second;
    };
    auto field_fail = [&](const char* k, const std::string& v, const std::string& why) {
      throw Error(where + ": field \"" + k + "\" is " + detail::quote_value(v) + ": " + why);
    };
    const std::string step_s = meta("trainer_step"), tokens_s = meta("tokens"), compute_s = meta("compute_tokens");
    long step = 0;
    double tokens = 0, compute = 0;
    try {
      step = detail::parse_long("trainer_step", step_s);
      tokens = detail::parse_double("tokens", tokens_s);
      compute = detail::parse_double("compute_tokens", compute_s);
    } catch (const Error& e) {
      throw Error(where + ": " + e.what());
    }
    if (step < 0 || step > run_steps)
      field_fail("trainer_step", step_s, "expected an integer in [0, " + std::to_string(run_steps) + "] (the run's steps)");
    const double per_step = double(c.batch_size) * c.seq_len * c.grad_accum;
    if (tokens != double(step) * per_step)
      field_fail("tokens", tokens_s, "expected trainer_step x batch_size x seq_len x grad_accum = " + detail::num(double(step) * per_step));
    const int k_max = fuser_registry<T>().info(c.model.fuser).feedback ? c.schedule.K_max : 1;
    if (!(compute >= tokens && compute <= tokens * k_max))
      field_fail("compute_tokens", compute_s, "expected a number in [tokens, tokens x K_max] = [" + detail::num(tokens) + ", " + detail::num(tokens * k_max) + "]");
    const std::string data_rng = meta("data_rng"), sched_rng = meta("sched_rng");
    detail::check_rng_state(data_rng, where, "data_rng");
    detail::check_rng_state(sched_rng, where, "sched_rng");
    if (override) override(c);
    auto opt = f.metadata.find("optimizer");
    const std::string opt_s = opt == f.metadata.end() ? std::string("adamw") : opt->second;
    if (!OptimizerRegistry::global().known(opt_s)) field_fail("optimizer", opt_s, "expected one of the optimizers this program knows: " + OptimizerRegistry::global().names());
    auto ds = f.metadata.find("data_source");
    if (ds != f.metadata.end() && !data)
      throw Error("checkpoint '" + dir + "': the run trained on a data source of its program's own (" + detail::excerpt(ds->second, 200) +
                  "), not on its config's data: resume it with the same source (Trainer::resume(dir, override, source))");
    if (ds == f.metadata.end() && data)
      throw Error("checkpoint '" + dir + "': resume was given a data source (" + detail::excerpt(data->describe(), 200) +
                  "), but the run trained on its config's data (" + detail::excerpt(c.data, 200) + "): resume it without one");
    if (ds != f.metadata.end() && data && data->describe() != ds->second)
      throw Error("checkpoint '" + dir + "': resume was given the data source " + detail::excerpt(data->describe(), 200) + ", but the run trained on " +
                  detail::excerpt(ds->second, 200) + ": resume it with the same source");
    if (opt_s != c.optimizer)
      field_fail("optimizer", opt_s, "the state of another optimizer than the run's (optimizer " + detail::quote_value(c.optimizer) + ")");
    if (c.steps < step)
      throw Error("fbt train --resume: steps " + std::to_string(c.steps) + " is below the checkpoint's step " + std::to_string(step) +
                  " in '" + dir + "' (a run cannot go back; give steps >= " + std::to_string(step) + ")");
    TrainConfig built = c;
    built.init_from.clear();  // the checkpoint holds the weights: its run's starting point is not read again
    auto t = data ? std::make_unique<Trainer>(built, std::move(data)) : std::make_unique<Trainer>(built);
    t->cfg.init_from = c.init_from;
    load_model_into(m_path, t->model);
    load_train_state(st_path, t->model.params, t->optimizer_state_refs());
    t->upload_state();
    if (t->model.params.step != step)
      throw Error(where + ": field \"step\" (AdamW's step, " + std::to_string(t->model.params.step) + ") differs from \"trainer_step\" (" +
                  std::to_string(step) + ")");
    t->step = step;
    t->tokens = tokens;
    t->compute_tokens = compute;
    t->data_rng.set_state(data_rng);
    t->sched_rng.set_state(sched_rng);
    const SafetensorsFile mf = read_safetensors(m_path);
    auto it = mf.metadata.find("step");
    if (it == mf.metadata.end() || it->second != std::to_string(t->step))
      throw Error("checkpoint '" + dir + "': model.safetensors (step " + (it == mf.metadata.end() ? std::string("?") : detail::excerpt(it->second)) +
                  ") and train_state.safetensors (step " + std::to_string(t->step) + ") are from different steps");
    // the pair of files and the data must be the run's: a model.safetensors from another save of the same shape,
    // or a data file changed since, would resume silently into another run
    if (auto wh = f.metadata.find("weights_hash"); wh != f.metadata.end() && wh->second != weights_hash(t->model.params))
      throw Error("checkpoint '" + dir + "': model.safetensors is not the file its train_state.safetensors was saved with (weights hash " +
                  weights_hash(t->model.params) + ", the state records " + detail::excerpt(wh->second) + "): both files must come from one save");
    if (auto di = f.metadata.find("data_identity"); di != f.metadata.end() && !t->data_identity_.empty() && di->second != t->data_identity_)
      throw Error("checkpoint '" + dir + "': the run's data changed since it was saved (then " + detail::excerpt(di->second, 300) + "; now " +
                  detail::excerpt(t->data_identity_, 300) + "): resume needs the data it trained on");
    return t;
  }

  /// \brief Trains until cfg.steps, evaluating, logging and checkpointing on the way. `out` gets the
  /// progress line and evaluation summaries.
  ///
  /// out_dir is created and locked for the run (lock_run_dir: a second process on the same out_dir is
  /// refused naming the holder). When stop_signal() is set (install_stop_handlers: SIGTERM, SIGINT), the
  /// step under way is finished, a checkpoint written, stopped_by set to the signal and run() returns:
  /// resume() continues from there bit-identically.
  void run(std::FILE* out = stderr) {
    // data-parallel: rank 0 alone prints, logs, evaluates and writes checkpoints (set_communicator)
    const bool lead = comm_->rank() == 0;
    if (!lead) out = nullptr;
    std::ofstream log, elog;
    std::string setup_error;
    std::shared_ptr<void> run_claim;  // released however run() ends
    if (lead) {
      try {
        prepare_out_dir(cfg.out_dir);
        run_lock_ = lock_run_dir(cfg.out_dir);  // held from here: the check below cannot race another run's start
        run_claim = run_lock_->claim();         // and this run is its one user in this process until run() returns
        if (step == 0 && std::filesystem::exists(cfg.out_dir + "/checkpoint"))
          throw Error("out_dir '" + cfg.out_dir + "' already holds a run (checkpoint/): resume it with --resume " + cfg.out_dir +
                      "/checkpoint, or choose another out_dir");
        log.open(cfg.out_dir + "/train.jsonl", std::ios::app), elog.open(cfg.out_dir + "/eval.jsonl", std::ios::app);
        if (!log || !elog) setup_error = "cannot write logs in '" + cfg.out_dir + "'";
      } catch (const std::exception& e) {
        setup_error = e.what();
      }
    }
    comm_->agree(setup_error.empty(), setup_error);
    if (out && comm_->size() > 1)
      std::fprintf(out, "fbt train: data-parallel over %d ranks (%s), %d thread(s) each; rank 0 logs\n", comm_->size(), comm_->name(), cfg.threads);
    if (out && !init_note_.empty() && step == 0) std::fprintf(out, "fbt train: %s\n", init_note_.c_str());
    if (out)
      std::fprintf(out, "fbt train: %zu parameters, fuser %s, data %s\n  step workspace %.1f MB (K_max %d%s), %ld steps of %d x %d x %d tokens, mean passes %.3f\n",
                   model.params.size(), cfg.model.fuser.c_str(), data->describe().c_str(), step_bytes() / 1e6,
                   model.feedback() ? cfg.schedule.K_max : 1, cfg.schedule.detach ? ", detached" : "", cfg.steps, cfg.batch_size,
                   cfg.seq_len, cfg.grad_accum, sched.mean_passes());
    if (out && !on_cpu) std::fprintf(out, "  backend %s: the step, the optimizer, the evaluation and the decoder run there\n", Be::name);
    if (out && cfg.precision == "bf16")
      std::fprintf(out, "  precision bf16: matrix products with bf16 operands and fp32 sums (%s); weights, optimizer, norms, loss fp32\n",
                   gemm_bf16_impl(256, 256, 256).c_str());
    const detail::EvalStopWatch eval_watch;  // from here a stop signal also interrupts an evaluation, at a window boundary
    bool final_eval_interrupted = false;
    const auto t0 = std::chrono::steady_clock::now();
    const double tok0 = tokens;
    double step_s = 0, opt_s = 0, comm_s = 0;  // this process's steps: their time, the optimizer's and the exposed communication's part
    long n_steps = 0;
    while (step < cfg.steps) {
      StepReport r = train_step();
      step_s += r.seconds, opt_s += r.optimizer_seconds, comm_s += r.comm_seconds, ++n_steps;
      if (progress_counter) progress_counter->store(step);
      const double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      const double tps = (tokens - tok0) / std::max(el, 1e-9), eta = (cfg.steps - step) * double(cfg.batch_size) * cfg.seq_len * cfg.grad_accum / std::max(tps, 1e-9);
      nlohmann::json j{{"step", r.step}, {"tokens", tokens}, {"compute_tokens", compute_tokens}, {"K", r.K}, {"loss", r.loss},
                       {"lr", r.lr}, {"grad_norm", r.grad_norm}, {"tok_s", double(cfg.batch_size) * cfg.seq_len * cfg.grad_accum / r.seconds},
                       {"optimizer_seconds", r.optimizer_seconds}};
      if (r.matrix_lr != 0) j["matrix_lr"] = r.matrix_lr;
      if (dist_) j["comm_seconds"] = r.comm_seconds;
      if (r.K > 1) j["state_rms"] = last_state_rms_, j["gate_mean"] = last_gate_mean_, j["gate_std"] = last_gate_std_, j["feedback_ratio"] = last_ratio_;
      if (lead) log << j.dump() << "\n";
      r.record = std::move(j);
      if (out && cfg.progress) {
        std::fprintf(out, "\rstep %ld/%ld | %.3gM tok | %.0f tok/s | ETA %s | K=%d loss", step, cfg.steps, tokens / 1e6, tps, fmt_time(eta).c_str(), r.K);
        for (double l : r.loss) std::fprintf(out, " %.4f", l);
        std::fprintf(out, " | lr %.2e   ", r.lr);
        std::fflush(out);
      }
      const bool last = step == cfg.steps;
      const bool observer_go_on = !on_step || on_step(r);
      if (comm_->size() > 1 && ((cfg.dist_check_every > 0 && step % cfg.dist_check_every == 0) || last)) check_same_parameters();
      bool eval_interrupted = false;
      if (lead && ((cfg.eval_every > 0 && step % cfg.eval_every == 0) || last)) {
        EvalReport e;
        try {
          e = evaluate();  // a stop signal interrupts it at a window boundary (EvalStopWatch below)
        } catch (const EvalInterrupted& x) {
          eval_interrupted = true;
          if (out) std::fprintf(out, "%s  eval @ step %ld: %s; not recorded\n", cfg.progress ? "\n" : "", step, x.what());
        }
      if (!eval_interrupted) {
        nlohmann::json ej = eval_losses_json(e);
        ej["step"] = e.step, ej["tokens"] = e.tokens, ej["compute_tokens"] = compute_tokens;
        elog << ej.dump() << std::endl;
        if (on_eval) on_eval(ej);
        if (out) {
          std::fprintf(out, "\n  eval @ step %ld: val loss per pass", step);
          for (double l : e.val_loss) std::fprintf(out, " %.4f", l);
          if (!std::isnan(e.optimal_loss)) std::fprintf(out, " (optimum %.4f)", e.optimal_loss);
          if (!std::isnan(e.seq_loss_soft)) std::fprintf(out, " | sequential (soft) %.4f", e.seq_loss_soft);
          if (!std::isnan(e.seq_loss_standard)) std::fprintf(out, " | sequential (standard) %.4f", e.seq_loss_standard);
          if (!std::isnan(e.seq_optimal_loss)) std::fprintf(out, " (optimum %.4f)", e.seq_optimal_loss);
          if (!e.contraction.loss.empty())
            std::fprintf(out, " | contraction L(k=%zu) %.4f, delta %.2e", e.contraction.loss.size(), e.contraction.loss.back(), e.contraction.delta.back());
          std::fprintf(out, "\n");
        }
      }
      }
      final_eval_interrupted = last && eval_interrupted;
      // a stop signal (SIGTERM, SIGINT) or the observer's false: this step is done; a checkpoint of it,
      // then return. Every rank stops at the same step (the signal may reach the ranks at different times).
      double stops[2] = {double(stop_signal().load()), observer_go_on ? 0.0 : 1.0};  // (signal, observer)
      if (comm_->size() > 1) comm_->allreduce_sum(stops, 2);
      const bool stop = stops[0] != 0 || stops[1] != 0;
      if ((cfg.checkpoint_every > 0 && step % cfg.checkpoint_every == 0) || last || stop) {
        std::string err;
        if (lead) {
          try {
            save_checkpoint(cfg.out_dir + "/checkpoint");
          } catch (const std::exception& e) {
            err = e.what();
          }
        }
        comm_->agree(err.empty(), err);  // every rank stops when rank 0 cannot write the checkpoint
      }
      if (lead) log.flush();
      if (stops[0] != 0) stopped_by = stop_signal().load() != 0 ? stop_signal().load() : SIGTERM;
      if (stops[1] != 0) stopped_by_observer = true;
      if (stop && !last) {
        if (out)
          std::fprintf(out, "%sfbt train: %s: stopped after step %ld of %ld; checkpoint in %s/checkpoint (continue with --resume %s/checkpoint)\n",
                       cfg.progress ? "\n" : "", stops[0] != 0 ? signal_name(stopped_by).c_str() : "the step observer", step, cfg.steps,
                       cfg.out_dir.c_str(), cfg.out_dir.c_str());
        return;
      }
    }
    if (out && n_steps > 0 && step_s > 0)
      std::fprintf(out, "  optimizer %s: %.1f%% of the step time (%.3g ms of %.3g ms per step)\n", cfg.optimizer.c_str(), 100.0 * opt_s / step_s,
                   1e3 * opt_s / double(n_steps), 1e3 * step_s / double(n_steps));
    if (out && dist_ && n_steps > 0 && step_s > 0)
      std::fprintf(out, "  communication not hidden by the backward: %.1f%% of the step time (%.3g ms per step; overlap %s, %d bucket(s))\n",
                   100.0 * comm_s / step_s, 1e3 * comm_s / double(n_steps), cfg.dist_overlap && dist_->can_overlap() ? "on" : "off",
                   dist_->buckets_used());
    if (out) std::fprintf(out, "  %.3gM training tokens, %.3gM token-equivalent compute (%.3fx), checkpoint in %s/checkpoint\n", tokens / 1e6,
                          compute_tokens / 1e6, compute_tokens / std::max(tokens, 1.0), cfg.out_dir.c_str());
    if (stopped_by != 0) {  // the signal came during the last step or the final evaluation: the run is complete, not stopped
      if (out)
        std::fprintf(out, "fbt train: %s after the last step (%ld of %ld): the run is complete, checkpoint in %s/checkpoint%s\n",
                     signal_name(stopped_by).c_str(), step, cfg.steps, cfg.out_dir.c_str(),
                     final_eval_interrupted ? "; its final evaluation was interrupted (fbt eval --checkpoint <it> gives it)" : "");
      stopped_by = 0;  // exit status 0: a scheduler must not run a finished run again
    }
  }

  /// The decoder over the trained weights (on the trainer's backend).
  Decoder<M, Be>& decoder() { return *dec_; }

  /// The backend the step and the evaluation run on, and the weights there.
  Be& backend() {
    if constexpr (on_cpu) return cpu_be_;
    else return dev_->backend();
  }
  Weights<T> weights() {
    if constexpr (on_cpu) return model.weights();
    else return dev_->weights();
  }

  /// \brief On another backend than the CPU's: the backend's weights, gradients and optimizer state -> the
  /// host model (train_step leaves them there; run() and save_checkpoint call this). A no-op on the CPU.
  /// The host model is a mirror of the backend's state, so this is callable on a const trainer.
  void sync_host() const {
    if constexpr (!on_cpu) dev_->download(), dev_opt_->download();
  }
  /// \brief The host model's weights and optimizer state -> the backend (after they were changed or loaded
  /// on the host). A no-op on the CPU.
  void upload_state() {
    if constexpr (!on_cpu) dev_->upload(), dev_opt_->upload();
  }

  /// The stop signal that ended run() early (stop_signal(): SIGTERM, SIGINT) after a checkpoint; 0 when
  /// run() trained to cfg.steps.
  int stopped_by = 0;

  /// \brief Removes the temporary directories dir.tmp.<pid> of processes that no longer exist (a save
  /// killed half-way) and dir.tmp (the name older versions used). Another live process's is left alone.
  static void remove_stale_checkpoint_temps(const std::string& dir) {
    namespace fs = std::filesystem;
    std::error_code ec;
    const fs::path d(dir);
    const fs::path parent = d.has_parent_path() ? d.parent_path() : fs::path(".");
    const std::string prefix = d.filename().string() + ".tmp.";
    fs::remove_all(dir + ".tmp", ec);
    for (fs::directory_iterator it(parent, ec), end; !ec && it != end; it.increment(ec)) {
      const std::string name = it->path().filename().string();
      if (name.rfind(prefix, 0) != 0) continue;
      const std::string rest = name.substr(prefix.size()), id = rest.substr(0, rest.find('.'));  // <pid> or <pid>.<n>
      if (id.empty() || id.size() > 10 || id.find_first_not_of("0123456789") != std::string::npos) continue;
      const long pid = std::stol(id);
      if (pid == long(::getpid())) continue;
      if (::kill(pid_t(pid), 0) == 0 || errno != ESRCH) continue;  // alive (or not ours to judge)
      std::error_code ec2;
      fs::remove_all(it->path(), ec2);
    }
  }

 private:
  /// The config a trainer runs: its memory estimate checked before anything is allocated (so a config
  /// far too large is refused with its estimate, not with a size it overflows), then every field
  /// validated, then a relative data path made absolute (resolve_data_path).
  static TrainConfig prepared(const TrainConfig& c) {
    check_train_memory(c);
    validate(c);
    TrainConfig r = c;
    resolve_data_path(r);
    return r;
  }
  static std::string fmt_time(double s) {
    char b[32];
    if (!std::isfinite(s)) return "?";
    if (s < 60) std::snprintf(b, sizeof b, "%.0fs", s);
    else if (s < 3600) std::snprintf(b, sizeof b, "%dm%02ds", int(s) / 60, int(s) % 60);
    else std::snprintf(b, sizeof b, "%dh%02dm", int(s) / 3600, (int(s) % 3600) / 60);
    return b;
  }

  /// The optimizer's own state tensors as the train state writes and reads them ("opt.<name>").
  std::vector<TensorRef> optimizer_state_refs() const {
    std::vector<TensorRef> r;
    for (const auto& s : optimizer->state(const_cast<ParamStore<T>&>(model.params))) r.push_back({"opt." + s.name, safetensors_dtype<T>(), s.shape, s.data});
    return r;
  }
  /// The optimizer's update of the (clipped) gradients: on the CPU the host store's; on another backend its
  /// backend step there, or, for an optimizer without one, on the host between a download and an upload.
  double optimizer_step(const OptimizerStep& s) {
    if constexpr (on_cpu) {
      return optimizer->step(model.params, s);
    } else {
      if (optimizer->has_backend_step()) return optimizer->step(static_cast<BackendUpdates<T>&>(*dev_opt_), s);
      sync_host();
      const double r = optimizer->step(model.params, s);
      upload_state();
      return r;
    }
  }
  static OptimizerArgs optimizer_args(const TrainConfig& c) {
    OptimizerArgs a;
    a.lr = c.lr, a.beta1 = c.beta1, a.beta2 = c.beta2, a.eps = c.adam_eps, a.weight_decay = c.weight_decay;
    a.matrix_lr = c.matrix_lr, a.matrix_weight_decay = c.matrix_weight_decay, a.muon_momentum = c.muon_momentum;
    a.normuon_beta2 = c.normuon_beta2, a.ns_steps = c.ns_steps;
    return a;
  }

  CpuBackend<T> cpu_be_;                          // on_cpu: the evaluation's backend object (it holds no state)
  std::unique_ptr<BackendModel<M, Be>> dev_;      // !on_cpu: the weights and gradients on Be
  std::unique_ptr<BackendOptimizer<M, Be>> dev_opt_;  // !on_cpu: the optimizer state on Be
  std::unique_ptr<Decoder<M, Be>> dec_;
  std::string data_describe_;  // a program's own data source (Trainer(cfg, source)): recorded, checked on resume
  std::string data_identity_;  // the data files' identity (data_identity): recorded, checked on resume

  /// A 64-bit hash of the weights (their bytes, 8 at a time), as hex: written beside the optimizer state, so a
  /// resume notices a model.safetensors that is not the one saved with it.
  static std::string weights_hash(const ParamStore<T>& ps) {
    const auto* b = reinterpret_cast<const unsigned char*>(ps.values());
    const std::size_t n = ps.size() * sizeof(T);
    std::uint64_t h = 1469598103934665603ull;
    for (std::size_t i = 0; i < n; i += 8) {
      std::uint64_t w = 0;
      std::memcpy(&w, b + i, std::min<std::size_t>(8, n - i));
      h = (h ^ w) * 1099511628211ull;
      h ^= h >> 29;
    }
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
    return hex;
  }
  std::unique_ptr<ParallelStepper<M>> par_;
  LocalComm local_comm_;
  Communicator* comm_ = &local_comm_;
  std::unique_ptr<DistributedStepper<M>> dist_;
  std::shared_ptr<RunDirLock> run_lock_;  // out_dir's lock, from run() on
  std::string init_note_;  // what init_from loaded (printed by run)  // with more than one rank (set_communicator)
  Workspace<M> ws_;
  Workspace<M, Be> eval_ws_;
  StepStats st_;
  PassPlan plan_;
  std::vector<int> tok_, tgt_;
  std::vector<std::uint8_t> ds_;
  std::vector<double> last_state_rms_, last_gate_mean_, last_gate_std_, last_ratio_;
};

}  // namespace fbt
