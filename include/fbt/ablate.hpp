// fbt/ablate.hpp: `fbt ablate`, a grid of training runs, a program built on the library's trainer: feedback depth, schedule, fuser, detach /
// grad_passes, prefix mixing, noise ... over a text file or a built-in task, each run with a fixed token
// budget and a seed from a fixed list.
//
// A grid is a base TrainConfig and three lists whose product is the set of runs:
//
//   runs  (a list of field -> value maps; default one empty map)  x  vary (field -> values, every
//   combination)  x  seeds
//
// Any TrainConfig field (fbt train --help) may appear in `runs` or `vary`, plus `tokens`: the run's token
// budget (steps = round(tokens / (batch_size x seq_len x grad_accum))). A run of a baseline (fuser none)
// is made single-pass (feedback_start 1, pass_mix 1:1, K_max 1), the only schedule a baseline has. A
// `preset` in a run's overrides (e.g. vary preset: [v1, paper]) is where that run starts: the preset,
// then the base's own fields, then the run's other overrides; result.json records it (config.preset).
//
// Layout of out_dir:  <run name>/{train.jsonl, eval.jsonl, checkpoint/, result.json},  summary.csv.
// A run's name is its overrides, e.g. `fuser=glu+pass_mix=2_0.75_3_0.25+seed=1`. Resumable: a run
// whose result.json exists is skipped (after checking it was made with the same config); a run with a
// checkpoint but no result continues from it (checkpoints are written at every evaluation); anything
// else in its directory is removed and the run starts afresh. result.json and summary.csv are written to
// a temporary name and renamed. A run that stops (e.g. a non-finite loss) records status "failed" and
// its error; the grid goes on.
#pragma once

#include <algorithm>
#include <atomic>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <mutex>
#include <numeric>
#include <set>
#include <sstream>
#include <thread>
#include <vector>

#include <time.h>
#include <unistd.h>

#include "fbt/train/task_eval.hpp"
#include "fbt/train/trainer.hpp"

namespace fbt {

/// Largest task_examples of a grid (greedy examples per decoding mode and length).
inline constexpr int kMaxTaskExamples = 1000000;
/// Largest token budget of a run (1e15): its step count must stay a long and its cadence an int.
inline constexpr double kMaxTokens = 1e15;

struct AblationGrid {
  TrainConfig base;
  /// The base's fields as given (the grid file's "base" object, then the command line's fields), without
  /// their preset: what a run whose overrides name another preset applies on top of that preset.
  nlohmann::json base_fields = nlohmann::json::object();
  std::vector<std::vector<std::pair<std::string, std::string>>> runs;  ///< explicit runs (field, value) ...; empty = one run of base
  std::vector<std::pair<std::string, std::vector<std::string>>> vary;  ///< every combination of these fields' values
  std::vector<std::uint64_t> seeds{1};
  double tokens = 0;        ///< default token budget of a run (0: base.steps decides)
  int evals = 10;           ///< evaluations (and checkpoints) per run, evenly spaced; eval_every = ceil(steps / evals)
  int task_examples = 100;  ///< reasoning tasks: greedy examples per decoding mode (and per requested level with trace_tag) at the end of a run (0 = none)
  std::vector<int> task_lengths{1, 2, 4};  ///< ... at these multiples of the training problem length (difficulty x m)
  /// ... in these decoding modes (registered policies, decode/policy.hpp; a program's own join by name).
  /// Empty: standard, and soft, fused(1), fused(2) for a full-bandwidth model. A mode that feeds back is
  /// skipped on a baseline.
  std::vector<std::string> task_modes;
  int decode_timing = 1;    ///< 1: measure decode ms/token (standard, and soft for a full-bandwidth model)
  std::string out_dir = "runs/ablate";
  int jobs = 1;             ///< runs trained at the same time (each with its own `threads`)
};

struct AblationRun {
  std::string name;                                          ///< directory name under out_dir
  std::vector<std::pair<std::string, std::string>> overrides;  ///< what distinguishes it (incl. tokens, seed)
  TrainConfig cfg;                                           ///< the effective config (out_dir set)
  std::vector<std::string> overridden;  ///< values the run asked for that its effective config does not use, said why
  std::string same_as;                  ///< the earlier run whose effective config this one's equals ("" = none): trained once
};

namespace detail {
/// A directory-safe rendering of a value: [A-Za-z0-9.-] kept, anything else '_'.
inline std::string safe_name(const std::string& s) {
  std::string o;
  for (char c : s) o += (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-') ? c : '_';
  return o;
}
inline std::string json_scalar(const nlohmann::json& v, const std::string& where) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
  if (v.is_number_unsigned()) return std::to_string(v.get<unsigned long long>());
  if (v.is_number_integer()) return std::to_string(v.get<long long>());
  if (v.is_number()) return num(v.get<double>());
  throw Error(where + ": expected a string, number or boolean, got " + std::string(v.type_name()));
}
inline double parse_tokens(const std::string& v, const std::string& where) {
  char* end = nullptr;
  const double x = std::strtod(v.c_str(), &end);
  if (v.empty() || *end != 0 || !decimal_chars(v) || !(x > 0) || !std::isfinite(x) || x > kMaxTokens)
    throw Error(where + ": tokens must be a positive number of at most 1e15, got " + quote_value(v));
  return x;
}
}  // namespace detail

/// \brief Reads a grid file: {"base": {field: value}, "runs": [{field: value}], "vary": {field: [values]},
/// "seeds": [n], "tokens": n, "evals": n, "task_examples": n, "task_lengths": [m],
/// "decode_timing": 0|1, "out_dir": s, "jobs": n}.
/// Every key is optional; an unknown key or field is refused naming the file and the key.
inline AblationGrid load_ablation_grid(const std::string& path, AblationGrid g = {}) {
  const nlohmann::json j = read_json_file(path, "grid file");
  const std::string where = "grid file '" + path + "'";
  if (!j.is_object()) throw Error(where + ": must hold one JSON object");
  // an integer key's value, range-checked (no wrap): [lo, hi]
  auto integer = [&](const nlohmann::json& v, const std::string& key, long long lo, long long hi) {
    const std::string text = v.is_number_unsigned() ? std::to_string(v.get<unsigned long long>())
                             : v.is_number_integer() ? std::to_string(v.get<long long>()) : std::string();
    if (text.empty()) throw Error(where + ": " + key + " must be an integer, got " + std::string(v.type_name()));
    const long long x = detail::parse_integer_as<long long>(where + ": " + key, text);
    if (x < lo || x > hi) throw Error(where + ": " + key + " must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " + text);
    return x;
  };
  auto seed = [&](const nlohmann::json& v) {
    if (!v.is_number_integer() || (!v.is_number_unsigned() && v.get<long long>() < 0))
      throw Error(where + ": seeds must be an integer in [0, 2^64 - 1], got " + (v.is_number() ? v.dump() : std::string(v.type_name())));
    return v.is_number_unsigned() ? std::uint64_t(v.get<unsigned long long>()) : std::uint64_t(v.get<long long>());
  };
  const long long imax = std::numeric_limits<int>::max();
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& k = it.key();
    const nlohmann::json& v = it.value();
    if (k == "base") {
      apply_json(g.base, v, where + " (base)", true);
      for (auto f = v.begin(); f != v.end(); ++f)
        if (f.key() != "preset") g.base_fields[f.key()] = f.value();
    } else if (k == "runs") {
      if (!v.is_array()) throw Error(where + ": runs must be a list of objects");
      g.runs.clear();
      for (std::size_t i = 0; i < v.size(); ++i) {
        const std::string w = where + " (runs[" + std::to_string(i) + "])";
        if (!v[i].is_object()) throw Error(w + ": must be an object of field: value");
        std::vector<std::pair<std::string, std::string>> r;
        for (auto f2 = v[i].begin(); f2 != v[i].end(); ++f2) {
          detail::check_config_value_type(f2.key(), f2.value(), w);
          r.push_back({f2.key(), detail::json_scalar(f2.value(), w + " field " + detail::excerpt(f2.key()))});
        }
        g.runs.push_back(r);
      }
    } else if (k == "vary") {
      if (!v.is_object()) throw Error(where + ": vary must be an object of field: [values]");
      for (auto f2 = v.begin(); f2 != v.end(); ++f2) {
        const std::string w = where + " (vary." + detail::excerpt(f2.key()) + ")";
        if (!f2->is_array() || f2->empty()) throw Error(w + ": must be a non-empty list of values");
        std::vector<std::string> vals;
        for (const auto& x : *f2) {
          detail::check_config_value_type(f2.key(), x, w);
          vals.push_back(detail::json_scalar(x, w));
        }
        g.vary.push_back({f2.key(), vals});
      }
    } else if (k == "seeds") {
      if (!v.is_array() || v.empty()) throw Error(where + ": seeds must be a non-empty list of integers");
      g.seeds.clear();
      for (const auto& s : v) g.seeds.push_back(seed(s));
    } else if (k == "tokens") {
      g.tokens = detail::parse_tokens(detail::json_scalar(v, where + " tokens"), where);
    } else if (k == "evals") {
      g.evals = int(integer(v, k, 1, imax));
    } else if (k == "task_examples") {
      g.task_examples = int(integer(v, k, 0, kMaxTaskExamples));
    } else if (k == "task_lengths") {
      if (!v.is_array() || v.empty()) throw Error(where + ": task_lengths must be a non-empty list of integers");
      g.task_lengths.clear();
      for (const auto& x : v) g.task_lengths.push_back(int(integer(x, "task_lengths", 1, detail::kMaxLengthMult)));
    } else if (k == "task_modes") {
      if (!v.is_array() || v.empty()) throw Error(where + ": task_modes must be a non-empty list of decoding modes");
      g.task_modes.clear();
      for (const auto& x : v) {
        if (!x.is_string()) throw Error(where + ": task_modes must be strings (decoding modes), got " + std::string(x.type_name()));
        g.task_modes.push_back(x.get<std::string>());
      }
    } else if (k == "decode_timing") {
      g.decode_timing = int(integer(v, k, 0, 1));
    } else if (k == "jobs") {
      g.jobs = int(integer(v, k, 1, 64));
    } else if (k == "out_dir") {
      if (!v.is_string()) throw Error(where + ": out_dir must be a string");
      g.out_dir = v.get<std::string>();
    } else if (k == "comment") {
      // free text for the reader of the file
    } else {
      throw Error(where + ": unknown key \"" + detail::excerpt(k) + "\" (known: base, runs, vary, seeds, tokens, evals, task_examples, task_lengths, task_modes, decode_timing, jobs, out_dir, comment)");
    }
  }
  return g;
}

/// \brief The runs of a grid, in order (runs x vary x seeds), with their effective configs. Every config
/// is validated here, so a bad value is refused before any run starts.
inline std::vector<AblationRun> expand_grid(const AblationGrid& g) {
  if (g.seeds.empty()) throw Error("ablate: the seed list is empty");
  if (g.evals < 1) throw Error("ablate: evals must be >= 1 (got " + std::to_string(g.evals) + ")");
  if (g.jobs < 1 || g.jobs > 64) throw Error("ablate: jobs must be in [1, 64] (got " + std::to_string(g.jobs) + ")");
  if (g.task_examples < 0 || g.task_examples > kMaxTaskExamples)
    throw Error("ablate: task_examples must be in [0, " + std::to_string(kMaxTaskExamples) + "] (got " + std::to_string(g.task_examples) + ")");
  if (g.decode_timing != 0 && g.decode_timing != 1) throw Error("ablate: decode_timing must be 0 or 1 (got " + std::to_string(g.decode_timing) + ")");
  if (!(g.tokens >= 0 && g.tokens <= kMaxTokens)) throw Error("ablate: tokens must be in [0, 1e15] (got " + detail::num(g.tokens) + ")");
  for (const auto& md : g.task_modes) {
    try {
      (void)DecodeModeSpec::parse(md);  // a mode this program knows, refused before any run starts
    } catch (const Error& e) {
      throw Error(std::string("ablate: task_modes: ") + e.what());
    }
  }
  for (int m : g.task_lengths)
    if (m < 1 || m > detail::kMaxLengthMult)
      throw Error("ablate: task_lengths must be in [1, " + std::to_string(detail::kMaxLengthMult) + "] (got " + std::to_string(m) + ")");
  std::vector<std::vector<std::pair<std::string, std::string>>> combos = g.runs.empty() ? decltype(combos){{}} : g.runs;
  for (const auto& ax : g.vary) {
    decltype(combos) next;
    for (const auto& c : combos)
      for (const auto& v : ax.second) {
        auto c2 = c;
        c2.push_back({ax.first, v});
        next.push_back(c2);
      }
    combos.swap(next);
  }
  std::vector<AblationRun> out;
  std::set<std::string> names;
  std::map<std::string, std::string> by_config;  // effective config (without out_dir) -> the first run that has it
  std::map<std::string, bool> option_used;         // "fuser.alpha" -> whether some run's piece declares it
  std::map<std::string, std::set<std::string>> declared;  // "fuser" -> the options the grid's fusers declare
  for (const auto& c : combos)
    for (std::uint64_t seed : g.seeds) {
      AblationRun r;
      r.cfg = g.base;
      for (const auto& kv : c)
        if (kv.first == "preset") {  // a run of another preset: that preset, then the base's own fields, then the run's
          r.cfg = TrainConfig{};
          try {
            apply_preset(r.cfg, kv.second);
            apply_json(r.cfg, g.base_fields, "ablate base");
          } catch (const Error& e) {
            throw Error("ablate run {preset=" + detail::excerpt(kv.second) + "}: " + e.what());
          }
        }
      double tokens = g.tokens;
      std::string name;
      for (const auto& kv : c) {
        const std::string where = "ablate run {" + detail::excerpt(kv.first) + "=" + detail::excerpt(kv.second) + "}";
        if (kv.first == "tokens") tokens = detail::parse_tokens(kv.second, where);
        else if (kv.first == "seed" || kv.first == "out_dir") throw Error(where + ": " + kv.first + " is set by the grid (seeds, out_dir), not per run");
        else if (kv.first == "preset") {
          // applied first, above
        } else {
          try {
            set_config_field(r.cfg, kv.first, kv.second);
          } catch (const Error& e) {
            throw Error(where + ": " + e.what());
          }
        }
        r.overrides.push_back(kv);
        name += (name.empty() ? "" : "+") + detail::safe_name(kv.first) + "=" + detail::safe_name(kv.second);
      }
      {  // a run may vary window_pattern, num_hidden_layers or layer_types: the layers again (as make_train_config)
        bool types_given = false, pattern_given = false;
        for (const auto& kv : c) types_given = types_given || kv.first == "layer_types", pattern_given = pattern_given || kv.first == "window_pattern";
        if (types_given && !pattern_given) r.cfg.window_pattern.clear();  // the run's own layer list replaces the base's pattern
        try {
          apply_window_pattern(r.cfg, types_given);
        } catch (const Error& e) {
          throw Error("ablate run " + name + ": " + e.what());
        }
      }
      r.cfg.seed = seed;
      r.overrides.push_back({"seed", std::to_string(seed)});
      name += (name.empty() ? "" : "+") + std::string("seed=") + std::to_string(seed);
      {  // a baseline trains single-pass: say which of the run's schedule values that overrides
        const TrainConfig before = r.cfg;
        make_baseline_single_pass(r.cfg);
        for (const char* f : {"feedback_start", "pass_mix", "K_max"})
          for (const auto& kv : c)
            if (kv.first == f) {
              std::string was, now;
              for (const auto& cf : train_config_fields())
                if (cf.name == f) was = cf.get(before), now = cf.get(r.cfg);
              if (was != now) r.overridden.push_back(kv.first + "=" + kv.second + " (fuser none trains single-pass: " + f + " " + now + ")");
            }
      }
      if (tokens > 0) {
        const double per_step = double(r.cfg.batch_size) * r.cfg.seq_len * r.cfg.grad_accum;
        r.cfg.steps = std::max(1L, long(std::llround(tokens / per_step)));
      }
      const long every = r.cfg.steps / g.evals + (r.cfg.steps % g.evals != 0);  // ceil(steps / evals), without overflow
      if (every > std::numeric_limits<int>::max())
        throw Error("ablate run " + name + ": steps " + std::to_string(r.cfg.steps) + " / evals " + std::to_string(g.evals) +
                    " is over the largest eval_every (" + std::to_string(std::numeric_limits<int>::max()) + "); raise evals");
      r.cfg.eval_every = int(every);
      r.cfg.checkpoint_every = r.cfg.eval_every;
      r.cfg.progress = false;
      r.cfg.out_dir = g.out_dir + "/" + name;
      r.name = name;
      resolve_data_path(r.cfg);  // as the trainer records it: a relative text path made absolute
      try {
        // a fuser and block this program has; options the run's fuser or block does not declare (from
        // another axis, e.g. fuser.rank on a glu run) are dropped and said so
        with_model<float>(r.cfg.model, [&](auto tag) {
          using M = typename decltype(tag)::type;
          auto prune = [&](Options& o, const OptionList& decl, const char* piece, const char* type) {
            for (const auto& sp : decl.specs()) declared[piece].insert(sp.name);
            for (const auto& kv : o) option_used[std::string(piece) + "." + kv.first] |= decl.find(kv.first) != nullptr;
            for (auto it = o.begin(); it != o.end();)
              if (!decl.find(it->first)) {
                r.overridden.push_back(std::string(piece) + "." + it->first + "=" + it->second.str() + " (" + piece + " " + type +
                                       " has no such option)");
                it = o.erase(it);
              } else ++it;
          };
          prune(r.cfg.model.fuser_options, fuser_registry<float>().info(r.cfg.model.fuser).options, "fuser", r.cfg.model.fuser.c_str());
          prune(r.cfg.model.block_options, detail::erased_block_option_list<float>(r.cfg.model), "block", r.cfg.model.block.c_str());
          (void)M::normalized(r.cfg.model);  // the options' types and ranges
        });
        validate(r.cfg);
        // the final task evaluation fits the model's positions at every length (checked before the run trains)
        if (r.cfg.data.rfind("task:", 0) == 0 && !is_state_task_data(r.cfg) && !is_probe_task_data(r.cfg) && g.task_examples > 0)
          for (int m : g.task_lengths) check_eval_length(task_config(r.cfg), m, r.cfg.model.max_position_embeddings);
      } catch (const Error& e) {
        throw Error("ablate run " + name + ": " + e.what());
      }
      if (!names.insert(name).second) throw Error("ablate: two runs have the same name " + name + " (a value repeated in the grid?)");
      nlohmann::json key = to_json(r.cfg);
      key.erase("out_dir");
      auto [it, fresh] = by_config.emplace(key.dump(), name);
      if (!fresh) r.same_as = it->second;
      out.push_back(std::move(r));
    }
  // an option that no run's piece declares is a typo (or the wrong piece), not an axis another piece ignores
  for (const auto& [key, used] : option_used)
    if (!used) {
      const std::string piece = key.substr(0, key.find('.'));
      std::string names;
      for (const auto& n : declared[piece]) names += (names.empty() ? "" : ", ") + n;
      throw Error("ablate: option " + detail::excerpt(key) + " is declared by no run's " + piece + " (the grid's " + piece + "s declare " +
                  (names.empty() ? std::string("none") : names) + "): a typo?");
    }
  return out;
}

namespace detail {
/// Whether a result's recorded config is `cfg`'s. A record from before text paths were stored absolute
/// is compared after resolving its data path the same way (against the current directory).
inline bool same_run_config(const nlohmann::json& stored, const TrainConfig& cfg) {
  const nlohmann::json want = to_json(cfg);
  if (stored == want) return true;
  try {
    TrainConfig t;
    apply_json(t, stored, "result");
    resolve_data_path(t);
    return to_json(t) == want;
  } catch (const std::exception&) {
    return false;
  }
}
}  // namespace detail

/// \brief The result of one run as written to result.json (also read back for the summary).
struct AblationResult {
  nlohmann::json j;  ///< name, overrides, status, steps, tokens, compute_tokens, seconds, final evaluation, tasks, decode, config
};

namespace detail {
inline void write_text_atomic(const std::string& path, const std::string& text) {
  AtomicFile f(path, "ablate");
  f.write(text);
  f.commit();
}
inline std::string csv_cell(const nlohmann::json& v) {
  if (v.is_null()) return "";
  if (v.is_number()) {
    std::ostringstream os;
    os.precision(7);
    os << v.get<double>();
    return os.str();
  }
  std::string s = v.is_string() ? v.get<std::string>() : v.dump();
  if (s.find_first_of(",\"\n") != std::string::npos) {
    std::string q = "\"";
    for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
    return q + "\"";
  }
  return s;
}
}  // namespace detail

/// \brief One flat row of summary.csv from a result: the overrides, then the figures.
inline std::vector<std::pair<std::string, nlohmann::json>> summary_row(const nlohmann::json& r) {
  std::vector<std::pair<std::string, nlohmann::json>> row{{"name", r.value("name", "")}};
  for (const auto& kv : r.at("overrides")) row.push_back({kv[0].get<std::string>(), kv[1]});
  for (const char* k : {"status", "steps", "tokens", "compute_tokens", "seconds"}) row.push_back({k, r.value(k, nlohmann::json())});
  if (r.contains("eval")) {
    const auto& e = r.at("eval");
    const auto& vl = e.at("val_loss");
    for (std::size_t k = 0; k < vl.size(); ++k) row.push_back({"val_loss_pass" + std::to_string(k + 1), vl[k]});
    for (const char* k : {"optimal_loss", "seq_loss_standard", "seq_loss_soft", "seq_optimal_loss"})
      if (e.contains(k)) row.push_back({k, e.at(k)});
    if (e.contains("contraction")) {
      const auto& c = e.at("contraction");
      const std::size_t n = c.at("loss").size();
      row.push_back({"contraction_L" + std::to_string(n), c.at("loss").back()});
      row.push_back({"contraction_delta" + std::to_string(n), c.at("delta").back()});
    }
  }
  if (r.contains("tasks"))
    for (auto it = r.at("tasks").begin(); it != r.at("tasks").end(); ++it) {
      row.push_back({"accuracy_" + it.key(), it->at("accuracy")});
      row.push_back({"median_trace_" + it.key(), it->at("median_trace")});
      if (it->contains("levels"))  // trace_tag: per requested level
        for (auto lv = it->at("levels").begin(); lv != it->at("levels").end(); ++lv) {
          row.push_back({"accuracy_" + it.key() + "_" + lv.key(), lv->at("accuracy")});
          row.push_back({"median_trace_" + it.key() + "_" + lv.key(), lv->at("median_trace")});
        }
    }
  if (r.contains("decode_ms_per_token"))
    for (auto it = r.at("decode_ms_per_token").begin(); it != r.at("decode_ms_per_token").end(); ++it) row.push_back({"decode_ms_" + it.key(), *it});
  if (r.contains("error")) row.push_back({"error", r.at("error")});
  if (r.contains("same_as")) row.push_back({"same_as", r.at("same_as")});
  return row;
}

/// \brief Writes out_dir/summary.csv from every finished run's result.json (columns: the union, in first-seen order).
inline void write_summary_csv(const std::string& out_dir, const std::vector<AblationRun>& runs) {
  std::vector<std::string> cols;
  std::vector<std::map<std::string, nlohmann::json>> rows;
  for (const auto& r : runs) {
    // a run whose effective config is an earlier run's is reported with that run's result, under its own name
    const std::string p = out_dir + "/" + (r.same_as.empty() ? r.name : r.same_as) + "/result.json";
    if (!std::filesystem::exists(p)) continue;
    nlohmann::json j;
    try {  // strict and bounded like every other reader (the file is ours, but a disk or a user may damage it)
      j = fbt::detail::parse_json_strict(fbt::detail::read_file_bytes(p, "ablate"), "'" + p + "'");
    } catch (const std::exception& e) {
      throw Error("ablate: '" + p + "' is not valid JSON (" + e.what() + "); remove it to rerun that run");
    }
    if (!r.same_as.empty()) {
      j["name"] = r.name, j["same_as"] = r.same_as;
      j["overrides"] = nlohmann::json::array();
      for (const auto& kv : r.overrides) j["overrides"].push_back({kv.first, kv.second});
      j["overridden"] = r.overridden;
      std::filesystem::create_directories(out_dir + "/" + r.name);
      detail::write_text_atomic(out_dir + "/" + r.name + "/result.json", j.dump(2) + "\n");
    }
    std::map<std::string, nlohmann::json> m;
    for (auto& kv : summary_row(j)) {
      if (std::find(cols.begin(), cols.end(), kv.first) == cols.end()) cols.push_back(kv.first);
      m[kv.first] = kv.second;
    }
    rows.push_back(m);
  }
  std::string s;
  for (std::size_t i = 0; i < cols.size(); ++i) s += (i ? "," : "") + cols[i];
  s += "\n";
  for (const auto& m : rows) {
    for (std::size_t i = 0; i < cols.size(); ++i) s += (i ? "," : "") + (m.count(cols[i]) ? detail::csv_cell(m.at(cols[i])) : std::string());
    s += "\n";
  }
  std::filesystem::create_directories(out_dir);
  detail::write_text_atomic(out_dir + "/summary.csv", s);
}

/// CPU seconds the calling thread has used (CLOCK_THREAD_CPUTIME_ID): a run's compute when it trains on its
/// own thread with threads 1, whatever else shares the machine; -1 where the clock is missing.
inline double thread_cpu_seconds() {
  timespec ts{};
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) return -1;
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

/// \brief Trains (or resumes) one run and writes its result.json. `progress` gets the step after every step.
/// With comm (fbt ablate --distributed mpi; collective): the run trains over all of comm's ranks, and rank 0
/// alone evaluates it at the end and writes result.json (the other ranks return its training status).
inline nlohmann::json run_ablation(const AblationGrid& g, const AblationRun& run, std::atomic<long>* progress, Communicator* comm = nullptr) {
  namespace fs = std::filesystem;
  const std::string dir = g.out_dir + "/" + run.name, ck = dir + "/checkpoint";
  const auto t0 = std::chrono::steady_clock::now();
  const double cpu0 = thread_cpu_seconds();
  std::vector<double> cpu_by_rank;  // (ranks) with comm: each rank's CPU seconds of training; rank 0's then gets its evaluation
  double cpu_train_end = -1;        // rank's thread CPU clock when that was gathered
  nlohmann::json res{{"name", run.name}, {"config", to_json(run.cfg)}, {"steps", run.cfg.steps}};
  res["overrides"] = nlohmann::json::array();
  for (const auto& kv : run.overrides) res["overrides"].push_back({kv.first, kv.second});
  if (!run.overridden.empty()) res["overridden"] = run.overridden;
  // the run's model type, chosen once from its config
  with_model<float>(run.cfg.model, [&](auto tag) {
    using M = typename decltype(tag)::type;
    std::unique_ptr<Trainer<M>> t;
    try {
      if (fs::exists(ck + "/train_state.safetensors") || fs::exists(ck + ".old")) {
        t = Trainer<M>::resume(fs::exists(ck) ? ck : ck + ".old", [&](TrainConfig& c) { c.out_dir = dir, c.progress = false; });
        if (to_json(t->cfg) != to_json(run.cfg))
          throw Error("ablate: the checkpoint in '" + dir + "' was made with another config; remove that directory to rerun it");
      } else {
        if (!comm || comm->rank() == 0) fs::remove_all(dir);
        if (comm) comm->barrier();
        t = std::make_unique<Trainer<M>>(run.cfg);
      }
      if (comm) t->set_communicator(*comm);
      t->progress_counter = progress;
      if (progress) progress->store(t->step);
      if (t->step < t->cfg.steps) t->run(nullptr);
      if (comm && run.cfg.threads == 1) {  // every rank's training CPU time, gathered on every rank (collective)
        cpu_by_rank.assign(std::size_t(comm->size()), 0.0);
        cpu_by_rank[std::size_t(comm->rank())] = std::max(0.0, thread_cpu_seconds() - cpu0);
        comm->allreduce_sum(cpu_by_rank.data(), cpu_by_rank.size());
        cpu_train_end = thread_cpu_seconds();
      }
      if (comm && comm->rank() != 0) {  // rank 0 evaluates and writes the result
        res["status"] = "done";
        return;
      }
      const EvalReport e = t->evaluate();  // the final evaluation (the trainer logged it too; this copy goes to result.json)
      res["eval"] = eval_losses_json(e);
      auto& dec = t->decoder();
      const bool fb = t->model.feedback();
      if (run.cfg.data.rfind("task:", 0) == 0 && !is_state_task_data(run.cfg) && !is_probe_task_data(run.cfg) && g.task_examples > 0) {  // reasoning tasks: greedy answers
        const TaskConfig task = task_config(run.cfg);
        const std::vector<std::string> modes = task_eval_modes(fb, g.task_modes);
        for (const TaskEvalAtLength& at : evaluate_task_lengths(dec, task, modes, g.task_lengths, g.task_examples)) {
          const int m = at.length_mult;  // key "mode@mx" (the mode as the grid names it): accuracy and median trace at m times the training length
          for (std::size_t i = 0; i < modes.size(); ++i) {
            const TaskEvalResult& r = at.results[i];
            nlohmann::json tj = {{"mode", modes[i]}, {"length_mult", m}, {"accuracy", r.accuracy}, {"median_trace", r.median_trace}, {"completed", r.completed}, {"examples", r.examples}};
            for (const TaskLevelResult& l : r.levels)
              tj["levels"][l.level] = {{"accuracy", l.accuracy}, {"median_trace", l.median_trace}, {"completed", l.completed}, {"examples", l.examples}};
            res["tasks"][modes[i] + "@" + std::to_string(m) + "x"] = tj;
          }
          for (const ModePairTest& pt : at.paired)  // McNemar's exact test of every two modes
            res["paired"][std::to_string(m) + "x"].push_back({{"a", pt.a}, {"b", pt.b}, {"n", pt.test.n}, {"b_only", pt.test.b}, {"c_only", pt.test.c},
                                                              {"p_value", pt.test.p_value}});
        }
      }
      if (g.decode_timing) {
        res["decode_ms_per_token"]["standard"] = decode_ms_per_token(dec, DecodeModeSpec{}, 32, 96);
        if (fb) res["decode_ms_per_token"]["soft"] = decode_ms_per_token(dec, DecodeModeSpec::parse("soft"), 32, 96);
      }
      res["status"] = "done";
      res["tokens"] = t->tokens, res["compute_tokens"] = t->compute_tokens;
    } catch (const std::exception& e) {
      res["status"] = "failed";
      res["error"] = e.what();
      if (t) res["tokens"] = t->tokens, res["compute_tokens"] = t->compute_tokens;
    }
  });
  res["seconds"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // this invocation's CPU time on the run's thread: with threads 1 its compute even on a shared machine (seconds
  // is wall time; a resumed run counts this invocation only, in both). Over MPI ranks it is the sum over the
  // ranks (cpu_seconds_by_rank: each rank's, rank 0's with the final evaluation), the compute a cluster spent.
  if (run.cfg.threads == 1 && cpu0 >= 0) {
    if (!cpu_by_rank.empty() && cpu_train_end >= 0) {
      cpu_by_rank[0] += std::max(0.0, thread_cpu_seconds() - cpu_train_end);  // (only rank 0 writes the result)
      res["cpu_seconds_by_rank"] = cpu_by_rank;
      res["cpu_seconds"] = std::accumulate(cpu_by_rank.begin(), cpu_by_rank.end(), 0.0);
    } else {
      res["cpu_seconds"] = thread_cpu_seconds() - cpu0;
    }
  }
  if (comm) res["ranks"] = comm->size();
  if (comm && comm->rank() != 0) return res;
  fs::create_directories(dir);
  detail::write_text_atomic(dir + "/result.json", res.dump(2) + "\n");
  return res;
}

/// \brief Runs a whole grid: skips finished runs, resumes interrupted ones, `jobs` at a time; prints a
/// progress line across the grid to `out` (nullptr: silent) and rewrites summary.csv after every run.
/// Returns the number of failed runs.
namespace detail {
/// Says which runs are trained once for several names, and which values a run asked for but does not use.
inline void print_same_runs(const std::vector<AblationRun>& runs, std::FILE* out) {
  for (const auto& r : runs) {
    for (const auto& o : r.overridden) std::fprintf(out, "fbt ablate: run %s: %s\n", r.name.c_str(), o.c_str());
    if (!r.same_as.empty())
      std::fprintf(out, "fbt ablate: run %s is the same run as %s (the same effective config): trained once, reported under both names\n",
                   r.name.c_str(), r.same_as.c_str());
  }
}
/// The runs of a grid still to do (no result.json, or a damaged one); finished runs are checked to be what
/// this grid asks for (else an error names the file). Creates out_dir.
inline std::vector<int> pending_runs(const AblationGrid& g, const std::vector<AblationRun>& runs, long& total_steps, long& done_steps) {
  namespace fs = std::filesystem;
  fs::create_directories(g.out_dir);
  std::vector<int> todo;
  total_steps = 0, done_steps = 0;
  for (int i = 0; i < int(runs.size()); ++i) {
    if (!runs[i].same_as.empty()) continue;  // trained once, under the first name that asked for it
    total_steps += runs[i].cfg.steps;
    const std::string p = g.out_dir + "/" + runs[i].name + "/result.json";
    if (!fs::exists(p)) {
      todo.push_back(i);
      continue;
    }
    nlohmann::json j;
    try {
      j = fbt::detail::parse_json_strict(fbt::detail::read_file_bytes(p, "ablate"), "'" + p + "'");
    } catch (const std::exception&) {
      todo.push_back(i);  // a damaged result: run again
      continue;
    }
    if (!detail::same_run_config(j.value("config", nlohmann::json()), runs[i].cfg))
      throw Error("ablate: '" + p + "' was made with another config than this grid gives run " + runs[i].name +
                  " (the base or the budget changed?); remove that directory or choose another out_dir");
    done_steps += runs[i].cfg.steps;
  }
  return todo;
}
}  // namespace detail

inline int run_grid(const AblationGrid& g, std::FILE* out = stderr) {
  const std::vector<AblationRun> runs = expand_grid(g);
  if (out) detail::print_same_runs(runs, out);
  long total_steps = 0, done_steps = 0;
  const std::vector<int> todo = detail::pending_runs(g, runs, total_steps, done_steps);  // finished runs are skipped
  if (out)
    std::fprintf(out, "fbt ablate: %zu runs (%zu finished, %zu to do), %ld steps in all, %d at a time, results in %s\n", runs.size(),
                 runs.size() - todo.size(), todo.size(), total_steps, g.jobs, g.out_dir.c_str());
  const std::size_t n = todo.size();
  std::vector<std::atomic<long>> step(n);
  std::vector<std::atomic<int>> state(n);  // 0 waiting, 1 running, 2 done
  for (std::size_t i = 0; i < n; ++i) step[i].store(0), state[i].store(0);
  std::atomic<std::size_t> next{0};
  std::atomic<int> failed{0};
  std::mutex mu;
  std::vector<std::string> failures;
  auto worker = [&] {
    for (;;) {
      const std::size_t k = next.fetch_add(1);
      if (k >= n) return;
      state[k].store(1);
      const AblationRun& r = runs[todo[k]];
      const nlohmann::json res = run_ablation(g, r, &step[k]);
      state[k].store(2);
      std::lock_guard<std::mutex> lock(mu);
      if (res.value("status", "") != "done") {
        ++failed;
        failures.push_back(r.name + ": " + res.value("error", std::string("?")));
      }
      write_summary_csv(g.out_dir, runs);
    }
  };
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> pool;
  for (int j = 0; j < std::min<int>(g.jobs, int(n)); ++j) pool.emplace_back(worker);
  const bool tty = out && isatty(fileno(out));
  for (int tick = 0; n > 0; ++tick) {
    long s = done_steps;
    int finished = int(runs.size() - n);
    std::string running;
    bool all = true;
    for (std::size_t i = 0; i < n; ++i) {
      const int st = state[i].load();
      if (st == 2) ++finished, s += runs[todo[i]].cfg.steps;
      else {
        all = false;
        if (st == 1) {
          s += std::min(step[i].load(), runs[todo[i]].cfg.steps);
          running += (running.empty() ? "" : ", ") + runs[todo[i]].name + " " + std::to_string(step[i].load()) + "/" + std::to_string(runs[todo[i]].cfg.steps);
        }
      }
    }
    if (out && (tty || tick % 60 == 0 || all)) {  // live on a terminal, every 30 s in a log
      const double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      const double rate = (s - done_steps) / std::max(el, 1e-9);  // steps per second of this invocation
      char eta[32] = "";
      if (rate > 0) std::snprintf(eta, sizeof eta, ", ETA %.0f s", (total_steps - s) / rate);
      std::fprintf(out, "%sgrid %d/%zu runs | %.0f%% of steps | %.0f s%s | %s%s", tty ? "\r\033[K" : "", finished, runs.size(),
                   100.0 * s / std::max(total_steps, 1L), el, eta, running.empty() ? "-" : running.c_str(), tty ? "" : "\n");
      std::fflush(out);
    }
    if (all) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  for (auto& th : pool) th.join();
  write_summary_csv(g.out_dir, runs);
  if (out) {
    std::fprintf(out, "%ssummary: %s/summary.csv (%zu runs)\n", tty ? "\n" : "", g.out_dir.c_str(), runs.size());
    for (const auto& f : failures) std::fprintf(out, "  failed: %s\n", f.c_str());
  }
  return failed.load();
}

/// \brief Runs a grid data-parallel over `comm` (fbt ablate --distributed mpi; collective): the runs one
/// after another, each over all ranks (as fbt train --distributed mpi: every rank takes a share of every
/// batch's rows; results as one process's, to float rounding). One run at a time over all ranks, rather
/// than several runs side by side on subsets of ranks: a run's result then does not depend on how the
/// ranks were grouped, and a finished run frees every rank for the next. Rank 0 decides which runs are
/// left (its list goes to every rank), evaluates each run at its end, writes result.json and summary.csv
/// and prints a line per run to `out`; a run that fails during training fails on every rank, and the grid
/// goes on. Returns the number of failed runs (rank 0's count, on every rank).
inline int run_grid_distributed(const AblationGrid& g, Communicator& comm, std::FILE* out = stderr) {
  const bool lead = comm.rank() == 0;
  const std::vector<AblationRun> runs = expand_grid(g);
  if (lead && out) detail::print_same_runs(runs, out);
  long total_steps = 0, done_steps = 0;
  std::string todo_s, err;
  if (lead) {
    try {
      for (int i : detail::pending_runs(g, runs, total_steps, done_steps)) todo_s += std::to_string(i) + " ";
    } catch (const std::exception& e) {
      err = e.what();
    }
  }
  comm.agree(err.empty(), err);
  comm.broadcast(todo_s, 0);
  std::vector<int> todo;
  for (std::istringstream in(todo_s); in >> std::ws && !in.eof();) {
    int i = 0;
    in >> i;
    todo.push_back(i);
  }
  if (lead && out)
    std::fprintf(out, "fbt ablate: %zu runs (%zu finished, %zu to do), %ld steps in all, one at a time over %d ranks (%s), results in %s\n",
                 runs.size(), runs.size() - todo.size(), todo.size(), total_steps, comm.size(), comm.name(), g.out_dir.c_str());
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::string> failures;
  for (std::size_t k = 0; k < todo.size(); ++k) {
    const AblationRun& r = runs[std::size_t(todo[k])];
    const nlohmann::json res = run_ablation(g, r, nullptr, &comm);
    if (lead) {
      const bool ok = res.value("status", "") == "done";
      if (!ok) failures.push_back(r.name + ": " + res.value("error", std::string("?")));
      write_summary_csv(g.out_dir, runs);
      if (out) {
        std::fprintf(out, "run %zu/%zu %s: %s in %.1f s (%.0f s so far)\n", k + 1, todo.size(), r.name.c_str(), ok ? "done" : "FAILED",
                     res.value("seconds", 0.0), std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        std::fflush(out);
      }
    }
    comm.barrier();  // rank 0 has written the run's result before any rank starts the next
  }
  if (lead) {
    write_summary_csv(g.out_dir, runs);
    if (out) {
      std::fprintf(out, "summary: %s/summary.csv (%zu runs)\n", g.out_dir.c_str(), runs.size());
      for (const auto& f : failures) std::fprintf(out, "  failed: %s\n", f.c_str());
    }
  }
  std::string n = std::to_string(failures.size());
  comm.broadcast(n, 0);
  return std::stoi(n);
}

}  // namespace fbt
