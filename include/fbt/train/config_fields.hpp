// fbt/train/config_fields.hpp: the table of every field of a TrainConfig: its name (the flag --name and
// the JSON key), help, reader (config_values.hpp's grammar), writer, JSON kind, whether a checkpoint records it
// and whether `fbt train --resume` may change it; set_config_field(s) and nanochat's window pattern.
#pragma once

#include <cstdlib>
#include <functional>
#include <string>
#include <type_traits>
#include <vector>

#include "../core/options.hpp"
#include "../io/config_json.hpp"
#include "../io/json.hpp"
#include "../core/precision.hpp"
#include "config_values.hpp"
#include "optimizer.hpp"
#include "presets.hpp"
#include "train_config.hpp"

namespace fbt {

inline void set_config_field(TrainConfig& c, const std::string& name, const std::string& value);

/// \brief Sets c.preset = name and the preset's fields (train_presets()); an unknown name is refused.
inline void apply_preset(TrainConfig& c, const std::string& name) {
  for (const auto& [n, fields] : train_presets())
    if (n == name) {
      for (const auto& [f, v] : fields) set_config_field(c, f, v);
      c.preset = name;
      return;
    }
  throw Error("config field preset: unknown preset " + detail::quote_value(name) + " (known: v1, paper)");
}

/// One configurable field: its name, help, and string conversions.
struct ConfigField {
  std::string name, help;
  std::function<void(TrainConfig&, const std::string&)> set;
  std::function<std::string(const TrainConfig&)> get;
  /// false: a setting of this invocation only (max_memory_gb), not part of the run: to_json leaves it
  /// out, so a checkpoint's record and an ablation's config comparison do not depend on it.
  bool recorded = true;
  /// true: to_json writes the field only when it differs from its default (fields added after runs were
  /// recorded: an older record and a newer one of the same run compare equal).
  bool omit_default = false;
  /// The JSON type a config file must give the field's value (apply_json with typed values): a number
  /// (integer / real), true or false (boolean), an array of integers (int_list), an array of strings
  /// (name_list), a JSON object or its text (object), a string (text). Flags are text and are read by
  /// `set` whatever the kind.
  enum class Kind { text, integer, real, boolean, int_list, object, name_list };
  Kind kind = Kind::text;
  /// true: `fbt train --resume` may change it (the run's length, cadence, output and the machine's settings):
  /// the run's math stays the same, so a resumed run is still the run it continues.
  bool resumable = false;
};

namespace detail {
/// A piece's options from the text of a JSON object ('{"rank": 8}'), typed as written; "" or "{}" = none.
inline Options parse_options_text(const char* field, const std::string& s) {
  if (s.empty()) return {};
  return options_from_json(parse_json_strict(s, std::string("config field ") + field), field, std::string("config field ") + field);
}
}  // namespace detail

/// The table of every field (flag name = JSON key).
inline const std::vector<ConfigField>& train_config_fields() {
  using detail::num;
  using detail::parse_bool;
  using detail::parse_double;
  static const std::vector<ConfigField> f = [] {
    std::vector<ConfigField> v;
    auto I = [&v](const char* n, const char* h, auto member) {  // int / long members of TrainConfig, ModelConfig or ScheduleConfig
      v.push_back({n, h, [=](TrainConfig& c, const std::string& s) { member(c) = detail::parse_integer<std::decay_t<decltype(member(c))>>(n, s); },
                   [=](const TrainConfig& c) { return std::to_string(member(const_cast<TrainConfig&>(c))); }});
      v.back().kind = ConfigField::Kind::integer;
    };
    auto D = [&v](const char* n, const char* h, auto member) {
      v.push_back({n, h, [=](TrainConfig& c, const std::string& s) { member(c) = parse_double(n, s); },
                   [=](const TrainConfig& c) { return num(member(const_cast<TrainConfig&>(c))); }});
      v.back().kind = ConfigField::Kind::real;
    };
    auto B = [&v](const char* n, const char* h, auto member) {
      v.push_back({n, h, [=](TrainConfig& c, const std::string& s) { member(c) = parse_bool(n, s); },
                   [=](const TrainConfig& c) { return std::string(member(const_cast<TrainConfig&>(c)) ? "true" : "false"); }});
      v.back().kind = ConfigField::Kind::boolean;
    };
    auto L = [&v](const char* n, const char* h, auto member) {  // per-layer integer lists: "256,128,256" ("" = none)
      v.push_back({n, h, [=](TrainConfig& c, const std::string& s) { member(c) = detail::parse_int_list(n, s); },
                   [=](const TrainConfig& c) { return detail::format_int_list(member(const_cast<TrainConfig&>(c))); }});
      v.back().kind = ConfigField::Kind::int_list;
    };
    auto S = [&v](const char* n, const char* h, auto member) {
      v.push_back({n, h, [=](TrainConfig& c, const std::string& s) { member(c) = s; },
                   [=](const TrainConfig& c) { return std::string(member(const_cast<TrainConfig&>(c))); }});
    };
#define FBT_M(x) [](TrainConfig& c) -> auto& { return c.model.x; }
#define FBT_S(x) [](TrainConfig& c) -> auto& { return c.schedule.x; }
#define FBT_T(x) [](TrainConfig& c) -> auto& { return c.x; }
    v.push_back({"preset", "the recipe the other fields start from: v1 (fbt's first defaults) | paper (arXiv:2608.08888 as published, spec 10); set first, whatever its place",
                 [](TrainConfig& c, const std::string& s) { apply_preset(c, s); }, [](const TrainConfig& c) { return c.preset; }});
    // data
    S("data", "task:addition | task:state_tracking | task:multihop | task:running_sum | task:permutation | task:brackets | path of a text file",
      FBT_T(data));
    I("task_difficulty", "digits / operations / hops of a reasoning task; modulus / k of S_k / depth cap of a running-state task; null lines / writes per register of a probing task", FBT_T(task_difficulty));
    I("task_min_difficulty", "reasoning and probing tasks: training documents draw their difficulty uniformly from [task_min_difficulty, task_max_difficulty]; -1 = task_difficulty (evaluation at m x stays task_difficulty x m)", FBT_T(task_min_difficulty));
    v.back().omit_default = true;
    I("task_max_difficulty", "reasoning and probing tasks: the top of the training difficulty range; -1 = task_difficulty", FBT_T(task_max_difficulty));
    v.back().omit_default = true;
    D("p_full", "share of full-trace solutions in the task data", FBT_T(p_full));
    D("p_compressed", "share of compressed-trace solutions", FBT_T(p_compressed));
    D("p_answer", "share of answer-only solutions", FBT_T(p_answer));
    B("trace_tag", "reasoning tasks: the prompt states the level of its solution (\"472+359=? full\")", FBT_T(trace_tag));
    I("task_length", "running-state tasks: symbols per document", FBT_T(task_length));
    D("task_reveal", "running-state tasks: probability that a drawn symbol reveals the state", FBT_T(task_reveal));
    S("doc_split", "text files: blank_line (paragraphs are documents) | none", FBT_T(doc_split));
    D("val_fraction", "text files: share of documents held out for validation; token files without val_data: share of the tokens", FBT_T(val_fraction));
    S("token_dtype", "token files: a .bin's element type: auto (uint16, as nanoGPT) | uint16 | uint32 | int32 | int64 (a .npy names its own)", FBT_T(token_dtype));
    I("doc_sep_id", "token files: the document separator id (documents are packed and masked at it); -1 = none", FBT_T(doc_sep_id));
    S("val_data", "token files: a validation token file (default: the last val_fraction of data)", FBT_T(val_data));
    S("vocab_check", "token files: full (every id checked against the vocabulary before step 1, chunked over threads) | windows (each window as it is read)",
      FBT_T(vocab_check));
    v.back().omit_default = true;
    // model (Hugging Face Qwen3 names)
    I("vocab_size", "vocabulary V: 257 (bytes) for text and tasks; a token file's tokenizer's for token data", FBT_M(vocab_size));
    I("hidden_size", "width D", FBT_M(hidden_size));
    I("num_hidden_layers", "layers L", FBT_M(num_hidden_layers));
    I("num_attention_heads", "query heads", FBT_M(num_attention_heads));
    I("num_key_value_heads", "key/value heads (divides the query heads)", FBT_M(num_key_value_heads));
    I("head_dim", "0 = hidden_size / num_attention_heads", FBT_M(head_dim));
    I("intermediate_size", "SwiGLU hidden size", FBT_M(intermediate_size));
    I("max_position_embeddings", "RoPE table size (longest sequence)", FBT_M(max_position_embeddings));
    D("rope_theta", "RoPE base", FBT_M(rope_theta));
    D("rms_norm_eps", "eps of every RMSNorm", FBT_M(rms_norm_eps));
    B("tie_word_embeddings", "tie the LM head to the embedding", FBT_M(tie_word_embeddings));
    B("qk_norm", "Qwen3 per-head RMSNorm on q and k", FBT_M(qk_norm));
    D("initializer_range", "std of the normal init", FBT_M(initializer_range));
    D("z_loss", "z-loss coefficient", FBT_M(z_loss));
    S("doc_attention", "masked (attention stays in a document) | causal", FBT_M(doc_attention));
    L("layer_intermediate_size", "per-layer SwiGLU sizes, e.g. 256,128 (empty: intermediate_size everywhere)", FBT_M(layer_intermediate_size));
    L("layer_num_attention_heads", "per-layer query heads (empty: num_attention_heads everywhere)", FBT_M(layer_num_attention_heads));
    L("layer_num_key_value_heads", "per-layer key/value heads (empty: num_key_value_heads everywhere)", FBT_M(layer_num_key_value_heads));
    I("sliding_window", "attention window W of the sliding_attention layers (0 = none; Hugging Face Qwen3's sliding_window)", FBT_M(sliding_window));
    v.back().omit_default = true;
    v.push_back({"layer_types", "per-layer attention, e.g. sliding_attention,full_attention (empty: every layer full_attention; HF Qwen3's layer_types)",
                 [](TrainConfig& c, const std::string& s) { c.model.layer_types = detail::parse_name_list("layer_types", s); },
                 [](const TrainConfig& c) { return detail::format_name_list(c.model.layer_types); }});
    v.back().omit_default = true;
    v.back().kind = ConfigField::Kind::name_list;
    S("window_pattern", "nanochat's: S (sliding) / L (full) tiled over the layers, the last layer always L, e.g. SSSL with --sliding_window 64; "
                        "sets layer_types ('' = layer_types as given)", FBT_T(window_pattern));
    v.back().omit_default = true;
    S("fuser", "none (baseline) | glu | gated_add | concat | a fuser of your own (a plugin loaded with --plugin FILE, or a command built with fbt::cli_main)", FBT_M(fuser));
    v.push_back({"fuser_options", "the fuser's own options as a JSON object, e.g. {\"rank\": 8}; one at a time: --fuser.NAME VALUE",
                 [](TrainConfig& c, const std::string& s) { c.model.fuser_options = detail::parse_options_text("fuser_options", s); },
                 [](const TrainConfig& c) { return options_to_json(c.model.fuser_options).dump(); }});
    v.back().omit_default = true;
    v.back().kind = ConfigField::Kind::object;
    S("block", "the block type: decoder | a block of your own (a plugin loaded with --plugin FILE, or a command built with fbt::cli_main)", FBT_M(block));
    v.back().omit_default = true;
    v.push_back({"layer_blocks", "a mixed stack: the block type of each layer, e.g. decoder,gated_attn,decoder (sets block \"mixed\"; the types "
                 "may come from a plugin (--plugin FILE) or a command built with fbt::cli_main<Yours...>; a type's options in block_options as \"TYPE.NAME\")",
                 [](TrainConfig& c, const std::string& s) {
                   c.model.layer_blocks = detail::parse_name_list("layer_blocks", s);
                   if (!c.model.layer_blocks.empty()) c.model.block = "mixed";
                 },
                 [](const TrainConfig& c) { return detail::format_name_list(c.model.layer_blocks); }});
    v.back().omit_default = true;
    v.back().kind = ConfigField::Kind::name_list;  // an array of names in a file, as layer_types (it was refused: "must be a string")
    v.push_back({"block_options", "the block's own options as a JSON object; one at a time: --block.NAME VALUE",
                 [](TrainConfig& c, const std::string& s) { c.model.block_options = detail::parse_options_text("block_options", s); },
                 [](const TrainConfig& c) { return options_to_json(c.model.block_options).dump(); }});
    v.back().omit_default = true;
    v.back().kind = ConfigField::Kind::object;
    S("feedback_source", "post_final_norm | pre_final_norm | layer (then feedback_layer)", FBT_M(feedback_source));
    I("feedback_layer", "feedback_source layer: the block whose output is fed back (0-based; -1 otherwise)", FBT_M(feedback_layer));
    S("input_norm", "all | fused_only | feedback_passes (none on pass 1, every row of a fed-back pass: the paper's listing)", FBT_M(input_norm));
    S("gate_norm", "separate | shared (the fuser's gate-side norm is N_in: the paper's one input_rmsnorm_1)", FBT_M(gate_norm));
    S("in_norm_init", "N_in's initial gain: one | embedding (initializer_range, the raw embeddings' rms)", FBT_M(in_norm_init));
    S("block_norm", "pre | sandwich (also an RMSNorm on each attention and MLP output, before the residual add)", FBT_M(block_norm));
    S("glu_init", "legacy spelling of fuser.init of glu: default | fan_in | identity_both", FBT_M(glu_init));
    D("gated_add_alpha", "legacy spelling of fuser.alpha of gated_add", FBT_M(gated_add_alpha));
    // schedule (spec section 3)
    D("feedback_start", "fraction of the steps trained single-pass before feedback", FBT_S(feedback_start));
    v.push_back({"pass_mix", std::string("P(K) after the start, e.g. 2:0.88,3:0.12, or the whole run's mix of one of the paper's runs: ") + pass_mix_preset_names(),
                 [](TrainConfig& c, const std::string& s) { c.schedule.set_mix_text(s); },
                 [](const TrainConfig& c) { return c.schedule.mix_text(); }});
    I("K_max", "largest K", FBT_S(K_max));
    D("lambda", "weight of the fed-back passes' mean loss", FBT_S(lambda));
    I("lambda_ramp", "steps of a 0 -> lambda ramp after the start", FBT_S(lambda_ramp));
    S("prefix", "uniform | none | a fixed number of plain positions", FBT_S(prefix));
    D("sigma", "jitter of the carried state", FBT_S(sigma));
    B("detach", "stop-gradient between passes", FBT_S(detach));
    I("grad_passes", "only the last g passes give gradient (0 = all)", FBT_S(grad_passes));
    // optimisation
    I("batch_size", "sequences per micro-batch", FBT_T(batch_size));
    I("seq_len", "tokens per sequence T", FBT_T(seq_len));
    I("grad_accum", "micro-batches per optimizer step", FBT_T(grad_accum));
    I("steps", "optimizer steps", FBT_T(steps));
    S("lr_schedule", "cosine | wsd | constant", FBT_T(lr_schedule));
    D("lr", "peak learning rate", FBT_T(lr));
    D("min_lr", "final learning rate", FBT_T(min_lr));
    I("warmup_steps", "linear warmup steps", FBT_T(warmup_steps));
    D("wsd_decay_frac", "wsd: share of the steps in the final decay", FBT_T(wsd_decay_frac));
    D("weight_decay", "AdamW decoupled weight decay (matrices only)", FBT_T(weight_decay));
    D("beta1", "AdamW beta1", FBT_T(beta1));
    D("beta2", "AdamW beta2", FBT_T(beta2));
    D("adam_eps", "AdamW eps", FBT_T(adam_eps));
    D("grad_clip", "clip the global gradient norm (0 = off)", FBT_T(grad_clip));
    D("cooldown_z_loss", "z-loss from the wsd decay's first step on (0 = z_loss throughout)", FBT_T(cooldown_z_loss));
    S("optimizer", "adamw (every tensor) | muon | normuon (the matrices; AdamW at lr for the rest) | an optimizer of your own", FBT_T(optimizer));
    v.push_back({"optimizer_options", "the optimizer's own options as a JSON object; one at a time: --optimizer.NAME VALUE",
                 [](TrainConfig& c, const std::string& s) { c.optimizer_options = detail::parse_options_text("optimizer_options", s); },
                 [](const TrainConfig& c) { return options_to_json(c.optimizer_options).dump(); }});
    v.back().omit_default = true;
    v.back().kind = ConfigField::Kind::object;
    D("matrix_lr", "muon/normuon: peak learning rate of the matrices (same schedule shape as lr)", FBT_T(matrix_lr));
    D("matrix_weight_decay", "muon/normuon: decoupled weight decay of the matrices (times their scheduled lr)", FBT_T(matrix_weight_decay));
    D("muon_momentum", "muon/normuon: momentum of the matrices", FBT_T(muon_momentum));
    D("normuon_beta2", "normuon: decay of the neuron-wise second moment", FBT_T(normuon_beta2));
    I("ns_steps", "muon/normuon: Newton-Schulz iterations", FBT_T(ns_steps));
    I("seed", "seed of the init, the data and the schedule", FBT_T(seed));
    I("threads", "threads per training step (batch rows split across them)", FBT_T(threads));
    S("init_from", "start from this checkpoint's weights (fbt checkpoint or Hugging Face directory): the stack is loaded and its sizes taken from it, "
                   "the feedback tensors initialised, the optimizer fresh ('' = from scratch)", FBT_T(init_from));
    S("precision", "fp32 | bf16: the model's matrix products (bf16 operands, fp32 sums, through oneDNN; master weights, optimizer, norms and loss stay fp32)",
      FBT_T(precision));
    // evaluation and output
    I("eval_every", "steps between evaluations (0 = only at the end)", FBT_T(eval_every));
    I("eval_windows", "validation windows per evaluation", FBT_T(eval_windows));
    I("seq_eval_windows", "windows of the sequential-exact loss (0 = off, -1 = all)", FBT_T(seq_eval_windows));
    I("monitor_passes", "passes of the contraction monitor (0 = off)", FBT_T(monitor_passes));
    I("checkpoint_every", "steps between checkpoints (0 = only at the end)", FBT_T(checkpoint_every));
    S("out_dir", "where logs and checkpoints go", FBT_T(out_dir));
    B("progress", "print a live progress line", FBT_T(progress));
    D("max_memory_gb", "refuse a run whose memory estimate exceeds this many GB (0 = MemAvailable of /proc/meminfo; a larger value overrides the check)",
      FBT_T(max_memory_gb));
    v.back().recorded = false;
    S("distributed", "none | mpi: data-parallel over the ranks of mpirun -np N (each rank a share of every batch's rows)", FBT_T(distributed));
    v.back().recorded = false;
    I("dist_check_every", "with mpi: steps between checks that every rank holds the same parameters (0 = at the end only)", FBT_T(dist_check_every));
    v.back().recorded = false;
    B("dist_overlap", "with mpi: reduce the gradients in buckets while the backward runs (false: one reduction after it; same result)",
      FBT_T(dist_overlap));
    v.back().recorded = false;
    D("dist_bucket_mb", "with mpi and dist_overlap: least size of a gradient bucket in MB", FBT_T(dist_bucket_mb));
    v.back().recorded = false;
#undef FBT_M
#undef FBT_S
#undef FBT_T
    for (const char* n : {"steps", "eval_every", "checkpoint_every", "out_dir", "progress", "eval_windows", "seq_eval_windows", "monitor_passes",
                          "max_memory_gb", "distributed", "dist_check_every", "dist_overlap", "dist_bucket_mb"})
      for (auto& x : v)
        if (x.name == n) x.resumable = true;
    return v;
  }();
  return f;
}

/// \brief Whether `fbt train --resume` may change field `name` (ConfigField::resumable).
inline bool resumable_field(const std::string& name) {
  for (const auto& f : train_config_fields())
    if (f.name == name) return f.resumable;
  return false;
}
/// The fields a resume may change, comma-separated (its refusal lists them).
inline std::string resumable_fields() {
  std::string s;
  for (const auto& f : train_config_fields())
    if (f.resumable) s += (s.empty() ? "" : ", ") + f.name;
  return s;
}

/// \brief Sets field `name` from a string; unknown names are refused with the list of known ones' source.
inline void set_config_field(TrainConfig& c, const std::string& name, const std::string& value) {
  for (const auto& f : train_config_fields())
    if (f.name == name) return f.set(c, value);
  // one option of the fuser or the block: fuser.rank 8 (text, read as the option's declared type when the
  // model is built)
  for (const char* piece : {"fuser", "block", "optimizer"}) {
    const std::string pre = std::string(piece) + ".";
    if (name.rfind(pre, 0) == 0) {
      const std::string key = name.substr(pre.size());
      if (key.empty() || key.size() > 64 || key.find('.') != std::string::npos)
        throw Error("config field " + detail::excerpt(name) + ": expected " + pre + "NAME with an option name of 1 to 64 bytes");
      Options& o = piece[0] == 'f' ? c.model.fuser_options : piece[0] == 'b' ? c.model.block_options : c.optimizer_options;
      o[key] = OptionValue::of_text(value);
      return;
    }
  }
  throw Error("unknown config field \"" + detail::excerpt(name) + "\" (see fbt train --help for the list)");
}

namespace detail {
/// Whether an option given as text (--fuser.alpha 0.5) has the value `v` (from a fuser_options object): numbers
/// compare as numbers (0.50 is 0.5), booleans and strings as written.
inline bool option_text_equals(const OptionValue& v, const std::string& text) {
  if (v.kind == OptionValue::Int || v.kind == OptionValue::Real) {
    char* end = nullptr;
    const double x = std::strtod(text.c_str(), &end);
    return !text.empty() && end == text.c_str() + text.size() && x == (v.kind == OptionValue::Int ? double(v.i) : v.r);
  }
  if (v.kind == OptionValue::Bool) return text == (v.b ? "true" : "false");
  return v.s == text;
}
}  // namespace detail

/// \brief Refuses one option given in two spellings with different values in one source (the flags, or one
/// file): {"fuser_options": {"alpha": 0.5}} and fuser.alpha 0.3 (which one won depended on their order).
/// `fields` holds (name, value as text) pairs, a *_options value being its JSON object's text.
template <class Range> void check_option_spellings(const Range& fields, const std::string& where) {
  for (const char* piece : {"fuser", "block", "optimizer"}) {
    const std::string whole = std::string(piece) + "_options", pre = std::string(piece) + ".";
    for (const auto& w : fields) {
      if (w.first != whole) continue;
      const Options o = detail::parse_options_text(whole.c_str(), w.second);
      for (const auto& one : fields) {
        if (one.first.rfind(pre, 0) != 0) continue;
        const auto it = o.find(one.first.substr(pre.size()));
        if (it != o.end() && !detail::option_text_equals(it->second, one.second))
          throw Error(where + "option " + detail::excerpt(one.first) + " is given twice with different values: " + detail::excerpt(one.second) +
                      " (" + detail::excerpt(one.first) + ") and " + detail::excerpt(it->second.str()) + " (" + whole + "): give one of them");
      }
    }
  }
}

/// \brief The layer types of nanochat's window pattern over L layers: letter l % |pattern| of the pattern
/// (S: sliding_attention, L: full_attention, either case), and the last layer full_attention whatever its
/// letter (nanochat gives the last layer the full context). Throws fbt::Error naming window_pattern.
inline std::vector<std::string> window_pattern_layer_types(const std::string& pattern, int L) {
  if (pattern.empty() || pattern.size() > 4096)
    throw Error("invalid training config: window_pattern: expected 1 to 4096 letters S and L, got " + detail::quote_value(pattern));
  for (char ch : pattern)
    if (ch != 'S' && ch != 's' && ch != 'L' && ch != 'l')
      throw Error("invalid training config: window_pattern: expected letters S (sliding_attention) and L (full_attention), got " +
                  detail::quote_value(pattern));
  std::vector<std::string> t;
  for (int l = 0; l < L; ++l) {
    const char ch = pattern[std::size_t(l) % pattern.size()];
    t.push_back(l + 1 < L && (ch == 'S' || ch == 's') ? "sliding_attention" : "full_attention");
  }
  return t;
}
/// \brief model.layer_types from window_pattern (when given), over model.num_hidden_layers: called once every
/// field is set (the pattern and the number of layers may come in either order). `layer_types_given`: the same
/// config also set layer_types itself (a flag, a file key, a grid run); two spellings of the layers that
/// disagree are refused, naming both, rather than the pattern silently winning.
inline void apply_window_pattern(TrainConfig& c, bool layer_types_given = false) {
  if (c.window_pattern.empty() || c.model.num_hidden_layers <= 0 || c.model.num_hidden_layers > ModelLimits::max_hidden_layers) return;
  std::vector<std::string> types = window_pattern_layer_types(c.window_pattern, c.model.num_hidden_layers);
  if (layer_types_given && c.model.layer_types != types)
    throw Error("invalid training config: window_pattern " + detail::quote_value(c.window_pattern) + " gives layer_types " +
                detail::format_name_list(types) + " but layer_types is given as " + detail::quote_value(detail::format_name_list(c.model.layer_types)) +
                ": give one of them");
  c.model.layer_types = std::move(types);
}

/// \brief Sets several fields, `preset` first (whatever its place), then the others in order: a preset is
/// where a config starts, and the fields given with it change it. Then window_pattern is applied.
template <class Range> void set_config_fields(TrainConfig& c, const Range& fields) {
  for (const auto& kv : fields)
    if (kv.first == "preset") set_config_field(c, kv.first, kv.second);
  check_option_spellings(fields, "invalid training config: ");
  bool layer_types_given = false;
  for (const auto& kv : fields)
    if (kv.first != "preset") set_config_field(c, kv.first, kv.second), layer_types_given = layer_types_given || kv.first == "layer_types";
  apply_window_pattern(c, layer_types_given);
}

}  // namespace fbt
