// fbt/train/train_config.hpp: everything a training run is configured by, with one table of fields.
//
// The table gives each field its name, help text and how to read it from a string, so the `fbt` command's
// flags (--name value), its config file (a JSON object of the same names) and the checkpoint's record of
// the run all use one vocabulary. Model fields keep the Hugging Face Qwen3 names (spec section 9), the
// schedule fields the spec's knob names (section 3).
#pragma once

#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "../data/tasks.hpp"
#include "../io/config_json.hpp"
#include "../io/json.hpp"
#include "schedule.hpp"

namespace fbt {

struct TrainConfig {
  ModelConfig model;
  ScheduleConfig schedule;
  // data
  std::string data = "task:addition";  ///< "task:<addition|state_tracking|multihop>" or a text file path
  int task_difficulty = 3;
  double p_full = 1.0 / 3, p_compressed = 1.0 / 3, p_answer = 1.0 / 3;
  std::string doc_split = "blank_line";
  double val_fraction = 0.1;
  // optimisation
  int batch_size = 16, seq_len = 128, grad_accum = 1;
  long steps = 1000;
  std::string lr_schedule = "cosine";
  double lr = 3e-3, min_lr = 3e-4, wsd_decay_frac = 0.2;
  long warmup_steps = 50;
  double weight_decay = 0.1, beta1 = 0.9, beta2 = 0.95, adam_eps = 1e-8, grad_clip = 1.0;
  std::uint64_t seed = 1;
  int threads = 1;  ///< a step's batch rows split across threads (model/parallel_step.hpp)
  // evaluation and output
  int eval_every = 200, eval_windows = 32, seq_eval_windows = 2, monitor_passes = 30;
  int checkpoint_every = 0;  ///< 0 = only at the end
  std::string out_dir = "runs/default";
  bool progress = true;
};

/// One configurable field: its name, help, and string conversions.
struct ConfigField {
  std::string name, help;
  std::function<void(TrainConfig&, const std::string&)> set;
  std::function<std::string(const TrainConfig&)> get;
};

namespace detail {
inline long parse_long(const std::string& f, const std::string& v) {
  char* end = nullptr;
  const long x = std::strtol(v.c_str(), &end, 10);
  if (v.empty() || *end != 0) throw Error("config field " + f + ": expected an integer, got \"" + v + "\"");
  return x;
}
inline double parse_double(const std::string& f, const std::string& v) {
  char* end = nullptr;
  const double x = std::strtod(v.c_str(), &end);
  if (v.empty() || *end != 0) throw Error("config field " + f + ": expected a number, got \"" + v + "\"");
  return x;
}
inline bool parse_bool(const std::string& f, const std::string& v) {
  if (v == "true" || v == "1" || v == "on") return true;
  if (v == "false" || v == "0" || v == "off") return false;
  throw Error("config field " + f + ": expected true or false, got \"" + v + "\"");
}
/// "256,128,256" -> {256, 128, 256}; "" -> {} (a field of per-layer sizes).
inline std::vector<int> parse_int_list(const std::string& f, const std::string& v) {
  std::vector<int> out;
  if (v.empty()) return out;
  std::size_t i = 0;
  while (i <= v.size()) {
    const std::size_t j = std::min(v.find(',', i), v.size());
    out.push_back(int(parse_long(f, v.substr(i, j - i))));
    i = j + 1;
  }
  return out;
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

/// The table of every field (flag name = JSON key).
inline const std::vector<ConfigField>& train_config_fields() {
  using detail::num;
  using detail::parse_bool;
  using detail::parse_double;
  using detail::parse_long;
  static const std::vector<ConfigField> f = [] {
    std::vector<ConfigField> v;
    auto I = [&v](const char* n, const char* h, auto member) {  // int / long members of TrainConfig, ModelConfig or ScheduleConfig
      v.push_back({n, h, [=](TrainConfig& c, const std::string& s) { member(c) = decltype(+member(c))(parse_long(n, s)); },
                   [=](const TrainConfig& c) { return std::to_string(member(const_cast<TrainConfig&>(c))); }});
    };
    auto D = [&v](const char* n, const char* h, auto member) {
      v.push_back({n, h, [=](TrainConfig& c, const std::string& s) { member(c) = parse_double(n, s); },
                   [=](const TrainConfig& c) { return num(member(const_cast<TrainConfig&>(c))); }});
    };
    auto B = [&v](const char* n, const char* h, auto member) {
      v.push_back({n, h, [=](TrainConfig& c, const std::string& s) { member(c) = parse_bool(n, s); },
                   [=](const TrainConfig& c) { return std::string(member(const_cast<TrainConfig&>(c)) ? "true" : "false"); }});
    };
    auto L = [&v](const char* n, const char* h, auto member) {  // per-layer integer lists: "256,128,256" ("" = none)
      v.push_back({n, h, [=](TrainConfig& c, const std::string& s) { member(c) = detail::parse_int_list(n, s); },
                   [=](const TrainConfig& c) { return detail::format_int_list(member(const_cast<TrainConfig&>(c))); }});
    };
    auto S = [&v](const char* n, const char* h, auto member) {
      v.push_back({n, h, [=](TrainConfig& c, const std::string& s) { member(c) = s; },
                   [=](const TrainConfig& c) { return std::string(member(const_cast<TrainConfig&>(c))); }});
    };
#define FBT_M(x) [](TrainConfig& c) -> auto& { return c.model.x; }
#define FBT_S(x) [](TrainConfig& c) -> auto& { return c.schedule.x; }
#define FBT_T(x) [](TrainConfig& c) -> auto& { return c.x; }
    // data
    S("data", "task:addition | task:state_tracking | task:multihop | path of a text file", FBT_T(data));
    I("task_difficulty", "digits / operations / hops of the built-in task", FBT_T(task_difficulty));
    D("p_full", "share of full-trace solutions in the task data", FBT_T(p_full));
    D("p_compressed", "share of compressed-trace solutions", FBT_T(p_compressed));
    D("p_answer", "share of answer-only solutions", FBT_T(p_answer));
    S("doc_split", "text files: blank_line (paragraphs are documents) | none", FBT_T(doc_split));
    D("val_fraction", "text files: share of documents held out for validation", FBT_T(val_fraction));
    // model (Hugging Face Qwen3 names)
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
    S("fuser", "none (baseline) | glu | gated_add | concat", FBT_M(fuser));
    S("feedback_source", "post_final_norm | pre_final_norm | layer (then feedback_layer)", FBT_M(feedback_source));
    I("feedback_layer", "feedback_source layer: the block whose output is fed back (0-based; -1 otherwise)", FBT_M(feedback_layer));
    S("input_norm", "all | fused_only", FBT_M(input_norm));
    S("glu_init", "default | fan_in | identity_both", FBT_M(glu_init));
    D("gated_add_alpha", "alpha of the gated_add fuser", FBT_M(gated_add_alpha));
    // schedule (spec section 3)
    D("feedback_start", "fraction of the steps trained single-pass before feedback", FBT_S(feedback_start));
    v.push_back({"pass_mix", "P(K) after the start, e.g. 2:0.88,3:0.12",
                 [](TrainConfig& c, const std::string& s) { c.schedule.pass_mix = ScheduleConfig::parse_mix(s); },
                 [](const TrainConfig& c) { return ScheduleConfig::format_mix(c.schedule.pass_mix); }});
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
    I("seed", "seed of the init, the data and the schedule", FBT_T(seed));
    I("threads", "threads per training step (batch rows split across them)", FBT_T(threads));
    // evaluation and output
    I("eval_every", "steps between evaluations (0 = only at the end)", FBT_T(eval_every));
    I("eval_windows", "validation windows per evaluation", FBT_T(eval_windows));
    I("seq_eval_windows", "windows of the sequential-exact loss", FBT_T(seq_eval_windows));
    I("monitor_passes", "passes of the contraction monitor (0 = off)", FBT_T(monitor_passes));
    I("checkpoint_every", "steps between checkpoints (0 = only at the end)", FBT_T(checkpoint_every));
    S("out_dir", "where logs and checkpoints go", FBT_T(out_dir));
    B("progress", "print a live progress line", FBT_T(progress));
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
  throw Error("unknown config field \"" + name + "\" (see fbt train --help for the list)");
}

/// Throws fbt::Error naming the field.
inline void validate(const TrainConfig& c) {
  c.model.validate();
  c.schedule.validate();
  auto fail = [](const std::string& f, const std::string& why) { throw Error("invalid training config: " + f + ": " + why); };
  if (c.batch_size < 1) fail("batch_size", "must be >= 1");
  if (c.seq_len < 2) fail("seq_len", "must be >= 2");
  if (c.seq_len > c.model.max_position_embeddings) fail("seq_len", "exceeds max_position_embeddings");
  if (c.grad_accum < 1) fail("grad_accum", "must be >= 1");
  if (c.threads < 1 || c.threads > 256) fail("threads", "must be in [1, 256]");
  if (c.steps < 1) fail("steps", "must be >= 1");
  if (c.schedule.K_max > 1 && !c.model.feedback() && c.schedule.feedback_start < 1.0 && !(c.schedule.pass_mix.size() == 1 && c.schedule.pass_mix.count(1)))
    fail("fuser", "is none (a baseline), so the schedule must stay single-pass: set feedback_start 1 or pass_mix 1:1");
  if (!(c.lr > 0)) fail("lr", "must be > 0");
  if (c.eval_every < 0 || c.checkpoint_every < 0 || c.monitor_passes < 0) fail("eval_every/checkpoint_every/monitor_passes", "must be >= 0");
  if (c.data.rfind("task:", 0) == 0) {
    TaskConfig t{c.data.substr(5), c.task_difficulty, c.p_full, c.p_compressed, c.p_answer};
    t.validate();
  } else if (c.data.empty()) {
    fail("data", "is empty (give task:<name> or a text file)");
  }
}

inline nlohmann::json to_json(const TrainConfig& c) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& f : train_config_fields()) j[f.name] = f.get(c);
  j["vocab_size"] = std::to_string(c.model.vocab_size);
  return j;
}

/// \brief Reads a config object: {"field": value, ...} (values may be strings, numbers or booleans).
inline void apply_json(TrainConfig& c, const nlohmann::json& j, const std::string& where) {
  if (!j.is_object()) throw Error(where + ": a config file must hold one JSON object");
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it.key() == "vocab_size") continue;  // fixed by the byte tokenizer
    std::string v;
    if (it->is_string()) v = it->get<std::string>();
    else if (it->is_boolean()) v = it->get<bool>() ? "true" : "false";
    else if (it->is_number_integer()) v = std::to_string(it->get<long long>());
    else if (it->is_number()) v = detail::num(it->get<double>());
    else if (it->is_array()) {  // per-layer sizes: [256, 128] is "256,128"
      for (const auto& x : *it) {
        if (!x.is_number_integer()) throw Error(where + ": field " + it.key() + " must be an array of integers");
        v += (v.empty() ? "" : ",") + std::to_string(x.get<long long>());
      }
    } else throw Error(where + ": field " + it.key() + " must be a string, number, boolean or array of integers");
    try {
      set_config_field(c, it.key(), v);
    } catch (const Error& e) {
      throw Error(where + ": " + e.what());
    }
  }
}

/// \brief Parses a JSON file; `what` names it in errors ("config file", "grid file", ...).
inline nlohmann::json read_json_file(const std::string& path, const std::string& what) {
  std::ifstream f(path);
  if (!f) throw Error("cannot open " + what + " '" + path + "'");
  try {
    return nlohmann::json::parse(f);
  } catch (const std::exception& e) {
    throw Error(what + " '" + path + "' is not valid JSON: " + e.what());
  }
}

inline TrainConfig load_train_config_file(const std::string& path, TrainConfig base = {}) {
  apply_json(base, read_json_file(path, "config file"), "config file '" + path + "'");
  return base;
}

}  // namespace fbt
