// fbt/train/config_validate.hpp: every rule of a run's config, checked before anything is allocated:
// the model's and the schedule's own, the data's, each real and integer's range, the knobs' names, and that
// the run's records load back.
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "../core/precision.hpp"
#include "../data/tokenizer.hpp"
#include "../io/config_json.hpp"
#include "../io/json.hpp"
#include "config_fields.hpp"
#include "config_file.hpp"
#include "data_config.hpp"
#include "optimizer.hpp"
#include "train_config.hpp"

namespace fbt {

/// \brief Checks every field of a training config: finiteness and range of each real, range of each
/// integer, the names of the string knobs, the model config (ModelConfig::validate), the schedule
/// (ScheduleConfig::validate), the data (validate_data), and that the run's records load back, so a
/// checkpoint of this run is one that eval and resume accept. Throws fbt::Error naming the field, its
/// value and the rule.
inline void validate(const TrainConfig& c) {
  using detail::num;
  auto fail = [](const std::string& f, const std::string& why) { throw Error("invalid training config: " + f + ": " + why); };
  auto at_least = [&](const char* f, long long v, long long lo) {
    if (v < lo) fail(f, "must be >= " + std::to_string(lo) + ", got " + std::to_string(v));
  };
  auto real_in = [&](const char* f, double v, double lo, bool lo_open, double hi, bool hi_open, const char* range) {
    if (!std::isfinite(v) || (lo_open ? !(v > lo) : !(v >= lo)) || (hi_open ? !(v < hi) : !(v <= hi)))
      fail(f, std::string("must be finite and in ") + range + ", got " + num(v));
  };
  const double inf = std::numeric_limits<double>::infinity();
  // the model: its own rules, and every real finite (a non-finite one is written to JSON as null)
  c.model.validate();
  if (c.model.vocab_size != ByteTokenizer::kVocabSize && !is_token_data(c) && !is_sft_data(c))
    fail("vocab_size", "is " + std::to_string(c.model.vocab_size) + ", but data " + detail::quote_value(c.data) +
                           " is read as bytes: the byte tokenizer needs " + std::to_string(ByteTokenizer::kVocabSize) +
                           " (token files, .bin or .npy, take the vocabulary of their tokenizer)");
  const std::pair<const char*, double> model_reals[] = {{"rope_theta", c.model.rope_theta}, {"rms_norm_eps", c.model.rms_norm_eps},
                                                        {"initializer_range", c.model.initializer_range}, {"z_loss", c.model.z_loss},
                                                        {"gated_add_alpha", c.model.gated_add_alpha}};
  for (const auto& r : model_reals)
    if (!std::isfinite(r.second)) fail(r.first, "must be finite, got " + num(r.second));
  if (!c.window_pattern.empty() && c.model.num_hidden_layers <= ModelLimits::max_hidden_layers &&
      c.model.layer_types != window_pattern_layer_types(c.window_pattern, c.model.num_hidden_layers))
    fail("window_pattern", detail::quote_value(c.window_pattern) + " gives layer_types " +
                               detail::format_name_list(window_pattern_layer_types(c.window_pattern, c.model.num_hidden_layers)) +
                               " but layer_types is " + detail::quote_value(detail::format_name_list(c.model.layer_types)) +
                               " (give one of them, or call apply_window_pattern)");
  // the schedule
  c.schedule.validate();
  if (c.schedule.K_max > 1 && !c.model.feedback() && c.schedule.feedback_start < 1.0 && !(c.schedule.pass_mix.size() == 1 && c.schedule.pass_mix.count(1)))
    fail("fuser", "is none (a baseline), so the schedule must stay single-pass: set feedback_start 1 or pass_mix 1:1 (make_baseline_single_pass)");
  // the data
  validate_data(c);
  // optimisation
  at_least("batch_size", c.batch_size, 1);
  at_least("seq_len", c.seq_len, 2);
  if (c.seq_len > c.model.max_position_embeddings)
    fail("seq_len", std::to_string(c.seq_len) + " exceeds max_position_embeddings (" + std::to_string(c.model.max_position_embeddings) + ")");
  if (double(c.batch_size) * c.seq_len > double(std::numeric_limits<int>::max()))
    fail("batch_size", "batch_size x seq_len = " + num(double(c.batch_size) * c.seq_len) + " positions per micro-batch, over the " +
                           std::to_string(std::numeric_limits<int>::max()) + " a step can index");
  at_least("grad_accum", c.grad_accum, 1);
  at_least("steps", c.steps, 1);
  at_least("warmup_steps", c.warmup_steps, 0);
  if (c.threads < 1 || c.threads > 256) fail("threads", "must be in [1, 256], got " + std::to_string(c.threads));
  if (c.distributed != "none" && c.distributed != "mpi") fail("distributed", "expected none or mpi, got " + detail::quote_value(c.distributed));
  at_least("dist_check_every", c.dist_check_every, 0);
  if (!(c.dist_bucket_mb > 0 && c.dist_bucket_mb <= 1e5)) fail("dist_bucket_mb", "expected a size in (0, 1e5] MB, got " + detail::num(c.dist_bucket_mb));
  if (c.precision != "fp32" && c.precision != "bf16") fail("precision", "expected fp32 or bf16, got " + detail::quote_value(c.precision));
  if (c.precision == "bf16" && !bf16_available()) fail("precision", "bf16: " + bf16_unavailable_reason());
  real_in("lr", c.lr, 0, true, inf, true, "(0, inf)");
  real_in("min_lr", c.min_lr, 0, false, c.lr, false, "[0, lr]");
  real_in("wsd_decay_frac", c.wsd_decay_frac, 0, false, 1, false, "[0, 1]");
  real_in("weight_decay", c.weight_decay, 0, false, inf, true, "[0, inf)");
  real_in("beta1", c.beta1, 0, false, 1, true, "[0, 1)");
  real_in("beta2", c.beta2, 0, false, 1, true, "[0, 1)");
  real_in("adam_eps", c.adam_eps, 0, true, inf, true, "(0, inf)");
  real_in("grad_clip", c.grad_clip, 0, false, inf, true, "[0, inf) (0 = off)");
  if (!OptimizerRegistry::global().known(c.optimizer))
    fail("optimizer", "expected one of " + OptimizerRegistry::global().names() + ", got " + detail::quote_value(c.optimizer));
  try {
    OptionValues::resolve(OptimizerRegistry::global().options(c.optimizer), c.optimizer_options, "optimizer_options",
                          "optimizer \"" + c.optimizer + "\"");
  } catch (const Error& e) {
    fail("optimizer_options", e.what());
  }
  real_in("matrix_lr", c.matrix_lr, 0, true, inf, true, "(0, inf)");
  real_in("matrix_weight_decay", c.matrix_weight_decay, 0, false, inf, true, "[0, inf)");
  real_in("muon_momentum", c.muon_momentum, 0, false, 1, true, "[0, 1)");
  real_in("normuon_beta2", c.normuon_beta2, 0, false, 1, true, "[0, 1)");
  if (c.ns_steps < 1 || c.ns_steps > 100) fail("ns_steps", "must be in [1, 100], got " + std::to_string(c.ns_steps));
  (void)make_lr_schedule(c.lr_schedule, c.lr, c.min_lr, std::min(c.warmup_steps, c.steps), c.steps, c.wsd_decay_frac);  // names the bad field
  real_in("cooldown_z_loss", c.cooldown_z_loss, 0, false, inf, true, "[0, inf) (0 = off)");
  if (c.cooldown_z_loss > 0 && c.lr_schedule != "wsd")
    fail("cooldown_z_loss", "is " + num(c.cooldown_z_loss) + " but lr_schedule is " + detail::quote_value(c.lr_schedule) + ": only wsd has a cooldown");
  if (c.preset != "v1" && c.preset != "paper") fail("preset", "unknown preset " + detail::quote_value(c.preset) + " (known: v1, paper)");
  // evaluation, output, resources
  at_least("eval_every", c.eval_every, 0);
  at_least("eval_windows", c.eval_windows, 0);
  at_least("seq_eval_windows", c.seq_eval_windows, -1);
  at_least("monitor_passes", c.monitor_passes, 0);
  if (c.monitor_passes > kMaxPasses)
    fail("monitor_passes", "must be <= " + std::to_string(kMaxPasses) + ", got " + std::to_string(c.monitor_passes));
  at_least("checkpoint_every", c.checkpoint_every, 0);
  if (c.out_dir.empty()) fail("out_dir", "is empty");
  real_in("max_memory_gb", c.max_memory_gb, 0, false, inf, true, "[0, inf) (0 = the available memory)");
  // the records load back (checkpoint metadata: the model config and the training config)
  try {
    const std::string model_text = to_json(c.model).dump();
    const ModelConfig back = config_from_json(detail::parse_json_strict(model_text, "model config"), "model config");
    if (to_json(back) != to_json(c.model)) fail("model", "does not read back equal from its JSON record " + detail::quote_value(model_text));
    TrainConfig t;
    const std::string train_text = to_json(c).dump();
    apply_json(t, detail::parse_json_strict(train_text, "training config"), "training config");
    if (to_json(t) != to_json(c)) fail("config", "does not read back equal from its JSON record " + detail::quote_value(train_text));
  } catch (const nlohmann::json::exception& e) {  // dump() of a string that is not UTF-8
    fail("config", std::string("cannot be written as JSON (a string field that is not UTF-8?): ") + detail::excerpt(e.what(), 200));
  } catch (const Error& e) {
    fail("config", std::string("a checkpoint of it would not load: ") + e.what());
  }
}

}  // namespace fbt
