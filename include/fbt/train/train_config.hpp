// fbt/train/train_config.hpp: everything a training run is configured by (TrainConfig), and the
// z-loss it schedules.
//
// The files around it, one idea each:
//   train/config_values.hpp   the grammar of a value's text (integers, reals, booleans, lists): flags, config
//                             files and records all read values through it
//   train/config_fields.hpp   the table of fields (name = flag = JSON key, help, reader, writer, which a
//                             resume may change) and set_config_field(s)
//   train/presets.hpp         the v1 and paper recipes
//   train/data_config.hpp     what the data field names (a task, a token file, SFT lines, a text) and its checks
//   train/config_file.hpp     JSON: records, config files, make_train_config (preset, init_from, file, flags)
//   train/config_validate.hpp validate(TrainConfig): every rule of a run's config
// Model fields keep the Hugging Face Qwen3 names (spec section 9), the schedule fields the spec's knob names
// (section 3). train/config.hpp includes all of them.
#pragma once

#include <cstdint>
#include <string>

#include "../core/options.hpp"
#include "../model/config.hpp"
#include "lr_schedule.hpp"
#include "schedule.hpp"

namespace fbt {

struct TrainConfig {
  std::string preset = "v1";  ///< the recipe the fields started from: v1 | paper (train_presets(); recorded with the run)
  ModelConfig model;
  ScheduleConfig schedule;
  // data
  std::string data = "task:addition";  ///< "task:<name>", a token file (.bin or .npy: token_dataset.hpp) or a text file path
  int task_difficulty = 3;
  /// Training on mixed lengths (reasoning and probing tasks): each training and validation document draws
  /// its difficulty uniformly from [task_min_difficulty, task_max_difficulty] (-1 = task_difficulty);
  /// evaluation at m x the training length stays task_difficulty x m.
  int task_min_difficulty = -1, task_max_difficulty = -1;
  double p_full = 1.0 / 3, p_compressed = 1.0 / 3, p_answer = 1.0 / 3;
  bool trace_tag = false;    ///< reasoning tasks: the prompt states the level of its solution (tasks.hpp)
  int task_length = 32;      ///< running-state tasks: symbols per document (state_tasks.hpp)
  double task_reveal = 0.5;  ///< running-state tasks: probability of a state-revealing symbol
  std::string doc_split = "blank_line";
  double val_fraction = 0.1;
  // token files (data ending in .bin or .npy): ids of the model's vocabulary (model.vocab_size)
  std::string token_dtype = "auto";  ///< a .bin's element type: auto (= uint16, nanoGPT's) | uint16 | uint32 | int32 | int64; a .npy names its own
  int doc_sep_id = -1;               ///< the id that separates (and starts) documents in a token file; -1 = none
  std::string val_data;              ///< a validation token file; empty = the last val_fraction of the data file
  std::string vocab_check = "full";  ///< token files: full | windows (when ids are checked against the vocabulary: data/token_dataset.hpp)
  /// nanochat's window pattern: letters S (sliding_attention) and L (full_attention) tiled over the layers,
  /// the last layer always L (as nanochat); sets model.layer_types (apply_window_pattern). "" = layer_types as given.
  std::string window_pattern;
  // optimisation
  int batch_size = 16, seq_len = 128, grad_accum = 1;
  long steps = 1000;
  std::string lr_schedule = "cosine";
  double lr = 3e-3, min_lr = 3e-4, wsd_decay_frac = 0.2;
  long warmup_steps = 50;
  double weight_decay = 0.1, beta1 = 0.9, beta2 = 0.95, adam_eps = 1e-8, grad_clip = 1.0;
  double cooldown_z_loss = 0;  ///< z-loss coefficient from the start of the wsd decay on (the paper: 1e-5); 0 = model.z_loss throughout
  // the matrix optimizer (train/muon.hpp): with muon or normuon the matrices train at matrix_lr and every
  // other tensor by AdamW at lr; adamw trains every tensor by AdamW
  std::string optimizer = "adamw";  ///< adamw | muon | normuon | a registered optimizer's name (train/optimizer.hpp)
  Options optimizer_options;        ///< the optimizer's own options (its declare_options), e.g. {"momentum": 0.9}
  double matrix_lr = 1e-2, matrix_weight_decay = 0.01, muon_momentum = 0.95, normuon_beta2 = 0.95;
  int ns_steps = 5;
  std::uint64_t seed = 1;
  int threads = 1;  ///< a step's batch rows split across threads (model/parallel_step.hpp)
  /// fp32 | bf16: the precision of the model's matrix products in the step and the evaluation (bf16
  /// operands, fp32 sums: ops/gemm_bf16.hpp); weights, optimizer state, norms, softmax and loss stay fp32
  std::string precision = "fp32";
  /// a checkpoint (fbt, or a Hugging Face directory) whose weights the run starts from: every tensor of the
  /// model it also has is loaded (the stack), the others (the feedback fuser and N_in) are initialised as
  /// the config says; the optimizer starts fresh. The stack's sizes come from the checkpoint (init_from_stack).
  std::string init_from;
  /// none | mpi: data parallelism over the ranks of `mpirun -np N` (dist/distributed_step.hpp); not recorded:
  /// a setting of the machine, like max_memory_gb (the same seed gives the same run whatever N is)
  std::string distributed = "none";
  int dist_check_every = 100;  ///< with mpi: compare the parameters' hash across ranks every this many steps (0 = only at the end)
  bool dist_overlap = true;    ///< with mpi: reduce the blocks' gradients in buckets while the backward runs (same bits as after it)
  double dist_bucket_mb = 0.25;  ///< with mpi and overlap: a bucket's least size (MB, 1e6 bytes; small buckets start sooner)
  // evaluation and output
  int eval_every = 200, eval_windows = 32, seq_eval_windows = 2, monitor_passes = 30;  ///< seq_eval_windows: 0 = off, -1 = all
  int checkpoint_every = 0;  ///< 0 = only at the end
  std::string out_dir = "runs/default";
  bool progress = true;
  // resources (not recorded in the checkpoint: a setting of the machine, not of the run)
  double max_memory_gb = 0;  ///< refuse a run whose memory estimate exceeds this (GB, 1e9 bytes); 0 = the available memory (MemAvailable)
};

/// \brief The z-loss coefficient of step `step` of a run of config c whose LR schedule is lr:
/// cooldown_z_loss from the wsd decay's first step on when set (the paper: 1e-5 in the cooldown), else
/// the model's z_loss.
inline double scheduled_z_loss(const TrainConfig& c, const LrSchedule& lr, long step) {
  return c.cooldown_z_loss > 0 && step >= lr.wsd_decay_start() ? c.cooldown_z_loss : c.model.z_loss;
}

}  // namespace fbt
