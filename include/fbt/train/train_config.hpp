// fbt/train/train_config.hpp: everything a training run is configured by, with one table of fields.
//
// The table gives each field its name, help text and how to read it from a string, so the `fbt` command's
// flags (--name value), its config file (a JSON object of the same names) and the checkpoint's record of
// the run all use one vocabulary. Model fields keep the Hugging Face Qwen3 names (spec section 9), the
// schedule fields the spec's knob names (section 3).
#pragma once

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "../data/tasks.hpp"
#include "../detail/input.hpp"
#include "../io/config_json.hpp"
#include "../io/json.hpp"
#include "../io/token_file.hpp"
#include "../core/precision.hpp"
#include "lr_schedule.hpp"
#include "optimizer.hpp"
#include "schedule.hpp"

namespace fbt {

struct TrainConfig {
  std::string preset = "v1";  ///< the recipe the fields started from: v1 | paper (train_presets(); recorded with the run)
  ModelConfig model;
  ScheduleConfig schedule;
  // data
  std::string data = "task:addition";  ///< "task:<name>", a token file (.bin or .npy: token_dataset.hpp) or a text file path
  int task_difficulty = 3;
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
};

namespace detail {

/// `"v"` as an error message quotes an option's value: bounded (detail::excerpt), so a 20 MB value
/// gives a short line.
inline std::string quote_value(const std::string& v) { return "\"" + excerpt(v) + "\""; }

/// True when `v` holds only the characters of a decimal number ("-12", "1e6", "0.5"): no spaces,
/// hex, "inf" or "nan", which strtod would otherwise accept.
inline bool decimal_chars(const std::string& v) {
  if (v.empty()) return false;
  for (char ch : v)
    if (!((ch >= '0' && ch <= '9') || ch == '+' || ch == '-' || ch == '.' || ch == 'e' || ch == 'E')) return false;
  return true;
}

/// \brief The whole of `v` as an integer of type I, range-checked against I (no wrap, no truncation).
///
/// Accepts decimal digits with an optional sign, and a whole number written as a real ("1e6", "64.0"),
/// so `--steps 1e5` works. Refuses, naming field `f` and the value: anything else ("12abc", "1.5", "",
/// " 3", "0x10", "inf") with "expected an integer", and a value outside I with "is out of range
/// (expected an integer in [min, max])".
/// `label` starts the error message: "config field steps" (parse_integer) or "--passes" (the CLI's own options).
template <class I> I parse_integer_as(const std::string& label, const std::string& v) {
  static_assert(std::is_integral<I>::value, "parse_integer: I must be an integer type");
  using Lim = std::numeric_limits<I>;
  const auto out_of_range = [&] {
    return Error(label + ": " + quote_value(v) + " is out of range (expected an integer in [" + std::to_string(Lim::min()) + ", " +
                 std::to_string(Lim::max()) + "])");
  };
  const auto not_integer = [&] { return Error(label + ": expected an integer, got " + quote_value(v)); };
  if (!decimal_chars(v)) throw not_integer();
  const bool negative = v[0] == '-';
  char* end = nullptr;
  errno = 0;
  if constexpr (std::is_unsigned<I>::value) {
    if (!negative) {  // strtoull would wrap "-1" to 2^64 - 1
      const unsigned long long x = std::strtoull(v.c_str(), &end, 10);
      if (*end == 0) {
        if (errno == ERANGE || x > static_cast<unsigned long long>(Lim::max())) throw out_of_range();
        return static_cast<I>(x);
      }
    }
  } else {
    const long long x = std::strtoll(v.c_str(), &end, 10);
    if (*end == 0) {
      if (errno == ERANGE || x < static_cast<long long>(Lim::min()) || x > static_cast<long long>(Lim::max())) throw out_of_range();
      return static_cast<I>(x);
    }
  }
  // not plain digits: a whole number written as a real?
  errno = 0;
  const double d = std::strtod(v.c_str(), &end);
  if (*end != 0 || end == v.c_str()) throw not_integer();
  if (!std::isfinite(d)) throw out_of_range();  // 1e999
  if (d != std::floor(d)) throw not_integer();
  // double(max) + 1 is exact for every integer type (2^31, 2^63, 2^64), so this is the exact range test
  if (!(d >= static_cast<double>(Lim::min()) && d < static_cast<double>(Lim::max()) + 1.0)) throw out_of_range();
  return static_cast<I>(d);
}
template <class I> I parse_integer(const std::string& f, const std::string& v) { return parse_integer_as<I>("config field " + f, v); }

/// \brief The whole of `v` as a long (see parse_integer).
inline long parse_long(const std::string& f, const std::string& v) { return parse_integer<long>(f, v); }
/// \brief The whole of `v` as an int (see parse_integer): "4294967312" is out of range, not 16.
inline int parse_int(const std::string& f, const std::string& v) { return parse_integer<int>(f, v); }

/// \brief The whole of `v` as a finite real. Refuses, naming field `f` and the value, anything that is
/// not a decimal number ("0.5junk", "", "0x1p3") and a non-finite one ("inf", "nan", "1e999").
inline double parse_double_as(const std::string& label, const std::string& v) {
  char* end = nullptr;
  const double x = std::strtod(v.c_str(), &end);
  const bool whole = !v.empty() && end != v.c_str() && *end == 0;
  if (whole && !std::isfinite(x)) throw Error(label + ": expected a finite number, got " + quote_value(v));
  if (!whole || !decimal_chars(v)) throw Error(label + ": expected a number, got " + quote_value(v));
  return x;
}
inline double parse_double(const std::string& f, const std::string& v) { return parse_double_as("config field " + f, v); }
inline bool parse_bool(const std::string& f, const std::string& v) {
  if (v == "true" || v == "1" || v == "on") return true;
  if (v == "false" || v == "0" || v == "off") return false;
  throw Error("config field " + f + ": expected true or false, got " + quote_value(v));
}
/// "256,128,256" -> {256, 128, 256}; "" -> {} (a field of per-layer sizes).
inline std::vector<int> parse_int_list(const std::string& f, const std::string& v) {
  std::vector<int> out;
  if (v.empty()) return out;
  std::size_t i = 0;
  while (i <= v.size()) {
    const std::size_t j = std::min(v.find(',', i), v.size());
    out.push_back(parse_int(f, v.substr(i, j - i)));
    i = j + 1;
  }
  return out;
}
/// "decoder,gated_attn" -> {"decoder", "gated_attn"} ("" = none); an empty name is refused naming the field.
inline std::vector<std::string> parse_name_list(const std::string& f, const std::string& v) {
  std::vector<std::string> r;
  if (v.empty()) return r;
  std::size_t a = 0;
  while (true) {
    const std::size_t b = v.find(',', a);
    const std::string n = v.substr(a, b == std::string::npos ? std::string::npos : b - a);
    if (n.empty()) throw Error(f + ": an empty name in " + quote_value(v) + " (expected names separated by commas)");
    r.push_back(n);
    if (b == std::string::npos) return r;
    a = b + 1;
  }
}
inline std::string format_name_list(const std::vector<std::string>& v) {
  std::string r;
  for (const auto& n : v) r += (r.empty() ? "" : ",") + n;
  return r;
}
inline std::string format_int_list(const std::vector<int>& v) {
  std::string s;
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s;
}
/// The shortest decimal text that reads back as exactly x (15 digits when they suffice, else 17).
inline std::string num(double x) {
  for (int prec : {15, 17}) {
    std::ostringstream os;
    os.precision(prec);
    os << x;
    if (prec == 17 || std::strtod(os.str().c_str(), nullptr) == x) return os.str();
  }
  return {};
}
}  // namespace detail

/// \brief The presets: each a list of (field, value) that `preset` applies before any other field. Both
/// set the same fields, so switching presets leaves nothing of the other behind.
///   v1:    fbt's first defaults (input norm on every input, a separate gate norm, pre-norm blocks, AdamW
///          lr 3e-3 with cosine decay, feedback from 75% of the steps with 2:0.88,3:0.12), so v1's results
///          stay reproducible.
///   paper: the paper's recipe as published (spec section 10): pass 1 on the raw embedding and the one
///          input norm on every row of a fed-back pass and on the gate side; sandwich block norms; NorMuon
///          (lr 1e-2, wd 0.01) for matrices and Adam (lr 5e-4, no wd) for the rest; warmup-stable-decay, 200
///          warmup steps and a 25% cooldown to zero with z-loss 1e-5; the 75/22/3 pass mix. Where the paper
///          is silent, this preset's choice: feedback starts at 50% of the steps, in the stable phase a
///          quarter of the run before the cooldown (paper_200b's whole-run 75/22/3 then means 1:0.5,
///          2:0.44, 3:0.06 from there); N_in's gain starts at 1 (PyTorch's RMSNorm default); the GLU init is
///          the spec's (W_U = I, W_G ~ N(0, 1e-6/D)).
inline const std::vector<std::pair<std::string, std::vector<std::pair<std::string, std::string>>>>& train_presets() {
  static const std::vector<std::pair<std::string, std::vector<std::pair<std::string, std::string>>>> p = {
      {"v1",
       {{"input_norm", "all"}, {"gate_norm", "separate"}, {"in_norm_init", "one"}, {"block_norm", "pre"}, {"glu_init", "default"},
        {"z_loss", "0"}, {"cooldown_z_loss", "0"}, {"lr_schedule", "cosine"}, {"lr", "0.003"}, {"min_lr", "0.0003"}, {"warmup_steps", "50"},
        {"wsd_decay_frac", "0.2"}, {"weight_decay", "0.1"}, {"optimizer", "adamw"}, {"matrix_lr", "0.01"}, {"matrix_weight_decay", "0.01"},
        {"sigma", "0.02"}, {"lambda", "1"}, {"K_max", "3"}, {"feedback_start", "0.75"}, {"pass_mix", "2:0.88,3:0.12"}}},
      {"paper",
       {{"input_norm", "feedback_passes"}, {"gate_norm", "shared"}, {"in_norm_init", "one"}, {"block_norm", "sandwich"}, {"glu_init", "default"},
        {"z_loss", "0"}, {"cooldown_z_loss", "1e-05"}, {"lr_schedule", "wsd"}, {"lr", "0.0005"}, {"min_lr", "0"}, {"warmup_steps", "200"},
        {"wsd_decay_frac", "0.25"}, {"weight_decay", "0"}, {"optimizer", "normuon"}, {"matrix_lr", "0.01"}, {"matrix_weight_decay", "0.01"},
        {"sigma", "0.02"}, {"lambda", "1"}, {"K_max", "3"}, {"feedback_start", "0.5"}, {"pass_mix", "paper_200b"}}},
  };
  return p;
}

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
    return v;
  }();
  return f;
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
/// field is set (the pattern and the number of layers may come in either order).
inline void apply_window_pattern(TrainConfig& c) {
  if (c.window_pattern.empty() || c.model.num_hidden_layers <= 0 || c.model.num_hidden_layers > ModelLimits::max_hidden_layers) return;
  c.model.layer_types = window_pattern_layer_types(c.window_pattern, c.model.num_hidden_layers);
}

/// \brief Sets several fields, `preset` first (whatever its place), then the others in order: a preset is
/// where a config starts, and the fields given with it change it. Then window_pattern is applied.
template <class Range> void set_config_fields(TrainConfig& c, const Range& fields) {
  for (const auto& kv : fields)
    if (kv.first == "preset") set_config_field(c, kv.first, kv.second);
  for (const auto& kv : fields)
    if (kv.first != "preset") set_config_field(c, kv.first, kv.second);
  apply_window_pattern(c);
}

/// \brief The z-loss coefficient of step `step` of a run of config c whose LR schedule is lr:
/// cooldown_z_loss from the wsd decay's first step on when set (the paper: 1e-5 in the cooldown), else
/// the model's z_loss.
inline double scheduled_z_loss(const TrainConfig& c, const LrSchedule& lr, long step) {
  return c.cooldown_z_loss > 0 && step >= lr.wsd_decay_start() ? c.cooldown_z_loss : c.model.z_loss;
}

/// \brief A baseline (fuser none) trains single-pass: its schedule is made so (feedback_start 1, pass_mix
/// 1:1, K_max 1), whatever the preset or the defaults say, as `fbt ablate` always did.
inline void make_baseline_single_pass(TrainConfig& c) {
  if (!c.model.feedback()) c.schedule.make_single_pass();
}

/// Largest config or grid file read (bytes): they hold a few dozen fields.
inline constexpr std::uint64_t kMaxConfigFileBytes = std::uint64_t(1) << 20;

/// \brief The reasoning task a config's data names ("task:<name>"; not a running-state task).
inline TaskConfig task_config(const TrainConfig& c) {
  TaskConfig t{c.data.rfind("task:", 0) == 0 ? c.data.substr(5) : c.data, c.task_difficulty, c.p_full, c.p_compressed, c.p_answer};
  t.trace_tag = c.trace_tag;
  return t;
}
/// \brief The running-state task a config's data names ("task:running_sum" ...).
inline StateTaskConfig state_task_config(const TrainConfig& c) {
  return StateTaskConfig{c.data.rfind("task:", 0) == 0 ? c.data.substr(5) : c.data, c.task_difficulty, c.task_reveal, c.task_length};
}
/// Whether a config's data is a running-state task ("task:running_sum" ...).
inline bool is_state_task_data(const TrainConfig& c) { return c.data.rfind("task:", 0) == 0 && is_state_task(c.data.substr(5)); }
/// Whether a config's data is a probing task ("task:completion" ...: data/probe_tasks.hpp).
inline bool is_probe_task_data(const TrainConfig& c) { return c.data.rfind("task:", 0) == 0 && is_probe_task(c.data.substr(5)); }
/// Whether a config's data is a token file (a path ending in .bin or .npy: io/token_file.hpp).
inline bool is_token_data(const TrainConfig& c) { return c.data.rfind("task:", 0) != 0 && is_token_file_path(c.data); }
/// Whether a path names prompt/response data for fine-tuning (a file ending in .jsonl: io/sft_jsonl.hpp).
inline bool is_sft_path(const std::string& p) { return p.size() > 6 && p.compare(p.size() - 6, 6, ".jsonl") == 0; }
/// Whether a config's data is prompt/response data (SFT: data/sft_dataset.hpp; the loss counts responses only).
inline bool is_sft_data(const TrainConfig& c) { return c.data.rfind("task:", 0) != 0 && is_sft_path(c.data); }

/// \brief The data fields of a config (data, task_difficulty, p_*, trace_tag, task_length, task_reveal,
/// doc_split, val_fraction): what `fbt eval` checks of a checkpoint's data settings. Throws fbt::Error
/// naming the field and the value.
inline void validate_data(const TrainConfig& c) {
  auto fail = [](const std::string& f, const std::string& why) { throw Error("invalid training config: " + f + ": " + why); };
  if (c.data.empty()) fail("data", "is empty (give task:<name> or a text file)");
  const char* pn[3] = {"p_full", "p_compressed", "p_answer"};
  const double pv[3] = {c.p_full, c.p_compressed, c.p_answer};
  for (int i = 0; i < 3; ++i)
    if (!std::isfinite(pv[i]) || pv[i] < 0) fail(pn[i], "must be finite and >= 0, got " + detail::num(pv[i]));
  if (c.task_length < 1 || c.task_length > kMaxStateTaskLength)
    fail("task_length", "must be in [1, " + std::to_string(kMaxStateTaskLength) + "] (symbols per document), got " + std::to_string(c.task_length));
  if (!(c.task_reveal >= 0 && c.task_reveal <= 1)) fail("task_reveal", "must be finite and in [0, 1], got " + detail::num(c.task_reveal));
  if (is_state_task_data(c)) {
    try {
      state_task_config(c).validate();
    } catch (const Error& e) {
      const std::string m = e.what();
      throw Error("invalid training config: " + (m.rfind("fbt: ", 0) == 0 ? m.substr(5) : m));
    }
  } else if (is_probe_task_data(c)) {
    const std::string name = c.data.substr(5);
    const int lo = name == "latest_write" ? 1 : 0, hi = max_probe_task_difficulty(name);
    if (c.task_difficulty < lo || c.task_difficulty > hi)
      fail("task_difficulty", "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "] for task " + name + " (" +
                                  (name == "latest_write" ? "writes per register" : "null lines") + "), got " + std::to_string(c.task_difficulty));
  } else if (c.data.rfind("task:", 0) == 0) {
    const std::string name = c.data.substr(5);
    const std::vector<std::string> known = builtin_task_names();
    if (std::find(known.begin(), known.end(), name) == known.end())
      fail("data", "unknown task " + detail::quote_value(name) + " (known: " + detail::join(known, ", ") + ")");
    TaskConfig t{c.data.substr(5), c.task_difficulty, c.p_full, c.p_compressed, c.p_answer};
    const int dmax = max_task_difficulty(t.name);
    if (dmax > 0 && (c.task_difficulty < 1 || c.task_difficulty > dmax))
      fail("task_difficulty", "must be in [1, " + std::to_string(dmax) + "] for task " + t.name + " (" + task_difficulty_unit(t.name) + "), got " +
                                  std::to_string(c.task_difficulty));
    t.validate();
  }
  if (c.doc_split != "blank_line" && c.doc_split != "none")
    fail("doc_split", "expected blank_line or none, got " + detail::quote_value(c.doc_split));
  if (!(c.val_fraction >= 0 && c.val_fraction < 1)) fail("val_fraction", "must be in [0, 1), got " + detail::num(c.val_fraction));
  if (c.vocab_check != "full" && c.vocab_check != "windows")
    fail("vocab_check", "expected full or windows, got " + detail::quote_value(c.vocab_check));
  const char* dtypes[] = {"auto", "uint16", "uint32", "int32", "int64"};
  if (std::find(std::begin(dtypes), std::end(dtypes), c.token_dtype) == std::end(dtypes))
    fail("token_dtype", "expected auto, uint16, uint32, int32 or int64, got " + detail::quote_value(c.token_dtype));
  if (is_token_data(c)) {
    if (c.doc_sep_id < -1 || c.doc_sep_id >= c.model.vocab_size)
      fail("doc_sep_id", std::to_string(c.doc_sep_id) + " is outside the vocabulary [0, " + std::to_string(c.model.vocab_size) + ") (-1 = none)");
    if (c.val_data.empty() && !(c.val_fraction > 0)) fail("val_fraction", "is 0 and val_data is empty: token data needs a validation file or a share of its tokens");
    if (!c.val_data.empty() && !is_token_file_path(c.val_data))
      fail("val_data", detail::quote_value(c.val_data) + " is not a token file (expected a path ending in .bin or .npy)");
  } else if (is_sft_data(c)) {
    if (c.doc_sep_id < -1 || c.doc_sep_id >= c.model.vocab_size)
      fail("doc_sep_id", std::to_string(c.doc_sep_id) + " is outside the vocabulary [0, " + std::to_string(c.model.vocab_size) + ") (-1 = none)");
    if (c.val_data.empty() && !(c.val_fraction > 0)) fail("val_fraction", "is 0 and val_data is empty: sft data needs a validation file or a share of its examples");
    if (!c.val_data.empty() && !is_sft_path(c.val_data))
      fail("val_data", detail::quote_value(c.val_data) + " is not sft data (expected a path ending in .jsonl, as data)");
  } else {
    if (!c.val_data.empty()) fail("val_data", "is set, but data " + detail::quote_value(c.data) + " is not a token file (.bin, .npy): only token data takes a validation file");
    if (c.doc_sep_id != -1) fail("doc_sep_id", "is set, but data " + detail::quote_value(c.data) + " is not a token file (.bin, .npy): bytes use their own separator");
  }
}

inline nlohmann::json to_json(const TrainConfig& c) {
  nlohmann::json j = nlohmann::json::object();
  static const TrainConfig defaults;
  for (const auto& f : train_config_fields())
    if (f.recorded && !(f.omit_default && f.get(c) == f.get(defaults))) j[f.name] = f.get(c);
  return j;
}

namespace detail {
/// \brief Refuses (fbt::Error "<where>: field <key> must be ..., got <type> <value>") a JSON value of a config
/// file whose type is not its field's (ConfigField::kind): a number for an integer or real field, true or
/// false for a boolean, an array (or its text) for a per-layer list, a string for a text field, an object (or its text)
/// for a piece's options. A key that is not a field of the table (fuser.NAME, ...) is not checked here.
inline void check_config_value_type(const std::string& key, const nlohmann::json& v, const std::string& where) {
  using K = ConfigField::Kind;
  for (const auto& f : train_config_fields()) {
    if (f.name != key) continue;
    const char* want = nullptr;
    if ((f.kind == K::integer || f.kind == K::real) && !v.is_number()) want = "a number";
    if (f.kind == K::boolean && !v.is_boolean()) want = "true or false";
    if (f.kind == K::int_list && !v.is_array() && !v.is_string()) want = "an array of integers (or their text, \"256,128\")";
    if (f.kind == K::name_list && !v.is_array() && !v.is_string()) want = "an array of strings (or their text, \"a,b\")";
    if (f.kind == K::text && !v.is_string()) want = "a string";
    if (f.kind == K::object && !v.is_object() && !v.is_string()) want = "a JSON object";
    if (want)
      throw Error(where + ": field " + excerpt(key) + " must be " + want + ", got " + v.type_name() + " " + json_brief(v));
    return;
  }
}
}  // namespace detail

/// \brief Reads a config object: {"field": value, ...}. With `typed` (a file a person wrote: a config file,
/// a grid's base) each value must have its field's JSON type (detail::check_config_value_type: {"steps": "2"}
/// is refused); without it (the library's own records, which hold every value as text) strings are read
/// as the flags are.
inline void apply_json(TrainConfig& c, const nlohmann::json& j, const std::string& where, bool typed = false) {
  if (!j.is_object()) throw Error(where + ": a config file must hold one JSON object");
  if (typed)
    for (auto it = j.begin(); it != j.end(); ++it) detail::check_config_value_type(it.key(), it.value(), where);
  if (j.contains("preset")) {  // first: the other fields change the preset's
    if (!j["preset"].is_string()) throw Error(where + ": field preset must be a string, got " + std::string(j["preset"].type_name()));
    try {
      set_config_field(c, "preset", j["preset"].get<std::string>());
    } catch (const Error& e) {
      throw Error(where + ": " + e.what());
    }
  }
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string key = detail::excerpt(it.key());
    if (it.key() == "preset") continue;
    std::string v;
    if (it->is_string()) v = it->get<std::string>();
    else if (it->is_boolean()) v = it->get<bool>() ? "true" : "false";
    else if (it->is_number_unsigned()) v = std::to_string(it->get<unsigned long long>());  // 2^64 - 1 stays itself, not -1
    else if (it->is_number_integer()) v = std::to_string(it->get<long long>());
    else if (it->is_number()) v = detail::num(it->get<double>());
    else if (it->is_array()) {  // per-layer sizes: [256, 128] is "256,128"; per-layer names (layer_types, layer_blocks) likewise
      for (const auto& x : *it) {
        if (x.is_string() && (it.key() == "layer_blocks" || it.key() == "layer_types")) {
          v += (v.empty() ? "" : ",") + x.get<std::string>();
          continue;
        }
        if (!x.is_number_integer()) throw Error(where + ": field " + key + " must be an array of integers");
        v += (v.empty() ? "" : ",") + (x.is_number_unsigned() ? std::to_string(x.get<unsigned long long>()) : std::to_string(x.get<long long>()));
      }
    } else if (it->is_object() && (it.key() == "fuser_options" || it.key() == "block_options" || it.key() == "optimizer_options")) {
      v = it->dump();  // the piece's options: typed as the file gives them
    } else throw Error(where + ": field " + key + " must be a string, number, boolean or array of integers, got " + it->type_name());
    try {
      set_config_field(c, it.key(), v);
    } catch (const Error& e) {
      throw Error(where + ": " + e.what());
    }
  }
}

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

/// \brief Parses a JSON file; `what` names it in errors ("config file", "grid file", ...). The file must be
/// a regular file of at most kMaxConfigFileBytes; duplicate keys are refused (detail::parse_json_strict).
inline nlohmann::json read_json_file(const std::string& path, const std::string& what) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) throw Error("cannot open " + what + " '" + path + "'");
  detail::regular_file_size(path, kMaxConfigFileBytes, what, "a " + what);  // not a directory, FIFO or device, not huge
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error("cannot open " + what + " '" + path + "'");
  const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (f.bad()) throw Error("cannot read " + what + " '" + path + "'");
  return detail::parse_json_strict(text, what + " '" + path + "'");
}

inline TrainConfig load_train_config_file(const std::string& path, TrainConfig base = {}) {
  apply_json(base, read_json_file(path, "config file"), "config file '" + path + "'", true);
  return base;
}

/// \brief A run's config from an optional config file and (field, value) flags, in the order a reader
/// expects: the preset (the flags' if given, else the file's, else v1), then the file's fields, then the
/// flags'. A baseline (fuser none) is then made single-pass (make_baseline_single_pass).
/// \brief The model fields a run started from a checkpoint takes from it (--init_from): the stack's sizes and
/// its numerics (vocabulary, hidden size, layers, heads, head_dim, MLP width, per-layer lists, positions,
/// RoPE theta, norm eps, tied head, QK-norm, block norms, document attention). The feedback fields stay
/// the run's own.
inline void init_from_stack(ModelConfig& m, const ModelConfig& from) {
  m.vocab_size = from.vocab_size, m.hidden_size = from.hidden_size, m.num_hidden_layers = from.num_hidden_layers;
  m.num_attention_heads = from.num_attention_heads, m.num_key_value_heads = from.num_key_value_heads, m.head_dim = from.head_dim;
  m.intermediate_size = from.intermediate_size, m.layer_intermediate_size = from.layer_intermediate_size;
  m.layer_num_attention_heads = from.layer_num_attention_heads, m.layer_num_key_value_heads = from.layer_num_key_value_heads;
  m.max_position_embeddings = from.max_position_embeddings, m.rope_theta = from.rope_theta, m.rms_norm_eps = from.rms_norm_eps;
  m.tie_word_embeddings = from.tie_word_embeddings, m.qk_norm = from.qk_norm, m.block_norm = from.block_norm;
  m.doc_attention = from.doc_attention, m.sliding_window = from.sliding_window, m.layer_types = from.layer_types;
}

/// \brief A run's config (the other overload, below, without init_from); when the config names init_from, the stack fields of `read_config(init_from)` are set
/// after the preset and before the file's and the flags' fields (so an explicit flag still wins, and the
/// trainer then refuses a stack that does not match the checkpoint's tensors).
template <class Range>
TrainConfig make_train_config(const std::string& config_file, const Range& flags, const std::function<ModelConfig(const std::string&)>& read_config) {
  TrainConfig c;
  nlohmann::json file = nlohmann::json::object();
  if (!config_file.empty()) file = read_json_file(config_file, "config file");
  const std::string where = "config file '" + config_file + "'";
  std::string preset;
  for (const auto& kv : flags)
    if (kv.first == "preset") preset = kv.second;
  if (preset.empty() && file.is_object() && file.contains("preset")) {
    if (!file["preset"].is_string()) throw Error(where + ": field preset must be a string, got " + std::string(file["preset"].type_name()));
    preset = file["preset"].get<std::string>();
  }
  if (!preset.empty()) apply_preset(c, preset);
  if (file.is_object()) file.erase("preset");
  std::string init_from;
  if (file.is_object() && file.contains("init_from")) {
    detail::check_config_value_type("init_from", file["init_from"], where);
    init_from = file["init_from"].get<std::string>();
  }
  for (const auto& kv : flags)
    if (kv.first == "init_from") init_from = kv.second;
  if (!init_from.empty() && read_config) init_from_stack(c.model, read_config(init_from));
  if (!config_file.empty()) apply_json(c, file, where, true);
  for (const auto& kv : flags)
    if (kv.first != "preset") set_config_field(c, kv.first, kv.second);
  apply_window_pattern(c);
  make_baseline_single_pass(c);
  return c;
}

/// make_train_config without a checkpoint to start from (see above).
template <class Range> TrainConfig make_train_config(const std::string& config_file, const Range& flags) {
  return make_train_config(config_file, flags, std::function<ModelConfig(const std::string&)>());
}


}  // namespace fbt
