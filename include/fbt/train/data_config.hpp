// fbt/train/data_config.hpp: what a config's data field names (a reasoning, running-state or probing
// task, a token file, prompt/response lines, a text file) and the checks of the data fields.
#pragma once

#include <algorithm>
#include <cmath>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "../data/tasks.hpp"
#include "../io/token_file.hpp"
#include "config_values.hpp"
#include "train_config.hpp"

namespace fbt {

/// \brief The reasoning task a config's data names ("task:<name>"; not a running-state task).
inline TaskConfig task_config(const TrainConfig& c) {
  TaskConfig t{c.data.rfind("task:", 0) == 0 ? c.data.substr(5) : c.data, c.task_difficulty, c.p_full, c.p_compressed, c.p_answer};
  t.trace_tag = c.trace_tag;
  t.train_min_difficulty = std::max(c.task_min_difficulty, 0), t.train_max_difficulty = std::max(c.task_max_difficulty, 0);  // -1 -> 0 (= difficulty)
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
  const bool ranged = c.task_min_difficulty != -1 || c.task_max_difficulty != -1;
  if (ranged && c.data.rfind("task:", 0) != 0)
    fail(c.task_min_difficulty != -1 ? "task_min_difficulty" : "task_max_difficulty",
         "applies to task:<name> data (a reasoning or probing task), not to the file " + detail::quote_value(c.data));
  if (ranged && is_state_task_data(c))
    fail(c.task_min_difficulty != -1 ? "task_min_difficulty" : "task_max_difficulty",
         "a running-state task's difficulty is its modulus / k / depth cap, not a length: use task_length (got " + std::to_string(c.task_min_difficulty) +
             ", " + std::to_string(c.task_max_difficulty) + ")");
  const int lo_d = c.task_min_difficulty == -1 ? c.task_difficulty : c.task_min_difficulty,
            hi_d = c.task_max_difficulty == -1 ? c.task_difficulty : c.task_max_difficulty;
  if (ranged && lo_d > hi_d)
    fail("task_min_difficulty", "is " + std::to_string(lo_d) + ", above task_max_difficulty " + std::to_string(hi_d) + " (-1 = task_difficulty " +
                                    std::to_string(c.task_difficulty) + ")");
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
    for (const auto& [field, v] : {std::pair<const char*, int>{"task_difficulty", c.task_difficulty}, {"task_min_difficulty", lo_d}, {"task_max_difficulty", hi_d}})
      if (v < lo || v > hi)
        fail(field, "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "] for task " + name + " (" +
                        (name == "latest_write" ? "writes per register" : "null lines") + ")" + (std::string(field) == "task_difficulty" ? "" : " or -1") +
                        ", got " + std::to_string(v));
  } else if (c.data.rfind("task:", 0) == 0) {
    const std::string name = c.data.substr(5);
    const std::vector<std::string> known = builtin_task_names();
    if (std::find(known.begin(), known.end(), name) == known.end())
      fail("data", "unknown task " + detail::quote_value(name) + " (known: " + detail::join(known, ", ") + ")");
    TaskConfig t{c.data.substr(5), c.task_difficulty, c.p_full, c.p_compressed, c.p_answer};
    const int dmax = max_task_difficulty(t.name);
    for (const auto& [field, v] : {std::pair<const char*, int>{"task_difficulty", c.task_difficulty}, {"task_min_difficulty", lo_d}, {"task_max_difficulty", hi_d}})
      if (dmax > 0 && (v < 1 || v > dmax))
        fail(field, "must be in [1, " + std::to_string(dmax) + "] for task " + t.name + " (" + task_difficulty_unit(t.name) + ")" +
                        (std::string(field) == "task_difficulty" ? "" : " or -1") + ", got " + std::to_string(v));
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

}  // namespace fbt
