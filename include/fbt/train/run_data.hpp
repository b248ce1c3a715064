// fbt/train/run_data.hpp: the data a run's config names, as the trainer's DataSource (a built-in task,
// a token file, prompt/response lines or a text file), and the data path made absolute for the run's record.
#pragma once

#include <filesystem>
#include <memory>
#include <string>

#include "../data/dataset.hpp"
#include "../data/sft_dataset.hpp"
#include "../data/tasks.hpp"
#include "../data/token_dataset.hpp"
#include "config.hpp"

namespace fbt {

/// The data source a config names: "task:<name>" (built-in, generated on the fly: a reasoning task of
/// tasks.hpp or a running-state task of state_tasks.hpp), a token file (.bin or .npy: token_dataset.hpp, ids
/// of the model's vocabulary), prompt/response data (.jsonl: sft_dataset.hpp) or a text file (bytes).
inline std::unique_ptr<DataSource> make_data_source(const TrainConfig& c) {
  if (is_state_task_data(c)) return std::make_unique<StateTaskDataset>(state_task_config(c));
  if (is_probe_task_data(c)) return std::make_unique<ProbeTaskDataset>(c.data.substr(5), c.task_difficulty);
  if (c.data.rfind("task:", 0) == 0) return std::make_unique<TaskDataset>(task_config(c));
  if (is_sft_data(c)) {  // prompt/response examples: the loss counts response tokens only
    SftDatasetOptions o;
    o.vocab_size = c.model.vocab_size, o.doc_sep = c.doc_sep_id, o.val_path = c.val_data, o.val_fraction = c.val_fraction;
    return std::make_unique<SftDataset>(SftDataset::open(c.data, o));
  }
  if (is_token_data(c)) {
    TokenDatasetOptions o;
    o.dtype = c.token_dtype, o.doc_sep = c.doc_sep_id, o.vocab_size = c.model.vocab_size, o.val_path = c.val_data;
    o.val_fraction = c.val_fraction, o.seq_len = c.seq_len, o.vocab_check = c.vocab_check;
    return std::make_unique<TokenFileDataset>(TokenFileDataset::open(c.data, o));
  }
  TextDatasetOptions o;
  o.doc_split = c.doc_split, o.val_fraction = c.val_fraction, o.seq_len = c.seq_len;
  return std::make_unique<TextDataset>(TextDataset::from_file(c.data, o));
}

/// \brief A config whose text-file `data` is a relative path gets it made absolute (against the current
/// directory), so the run's record names the file wherever eval or resume later run from. Task data
/// ("task:...") and absolute paths are unchanged.
inline void resolve_data_path(TrainConfig& c) {
  auto resolve = [](std::string& path) {
    const std::filesystem::path p(path);
    if (path.empty() || p.is_absolute()) return;
    std::error_code ec;
    const std::filesystem::path a = std::filesystem::absolute(p, ec);
    if (!ec) path = a.lexically_normal().string();
  };
  if (!c.data.empty() && c.data.rfind("task:", 0) != 0) resolve(c.data);
  resolve(c.val_data);
}

}  // namespace fbt
