// fbt/train/run_data.hpp: the data a run's config names, as the trainer's DataSource (a built-in task,
// a token file, prompt/response lines or a text file), and the data path made absolute for the run's record.
#pragma once

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

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
  if (is_probe_task_data(c)) return std::make_unique<ProbeTaskDataset>(c.data.substr(5), c.task_difficulty, c.task_min_difficulty, c.task_max_difficulty);
  if (c.data.rfind("task:", 0) == 0) return std::make_unique<TaskDataset>(task_config(c));
  if (is_sft_data(c)) {  // prompt/response examples: the loss counts response tokens only
    SftDatasetOptions o;
    o.vocab_size = c.model.vocab_size, o.doc_sep = c.doc_sep_id, o.val_path = c.val_data, o.val_fraction = c.val_fraction;
    auto d = std::make_unique<SftDataset>(SftDataset::open(c.data, o));
    d->check_seq_len(c.seq_len);  // refused before step 1 when no example has a target within the window
    return d;
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

/// \brief A file's identity, as a resumed run checks it: its size and a 64-bit FNV-1a hash of its bytes (every
/// byte up to 64 MiB; above, 64 blocks of 64 KiB spread evenly over it, the first and the last included, and
/// said "sampled"). "" when the file cannot be read.
inline std::string file_identity(const std::string& path) {
  std::error_code ec;
  const std::uintmax_t size = std::filesystem::file_size(path, ec);
  std::ifstream f(path, std::ios::binary);
  if (ec || !f) return "";
  std::uint64_t h = 1469598103934665603ull;  // FNV-1a 64
  std::vector<char> buf(std::size_t(1) << 16);
  auto mix = [&](std::streamsize n) {
    for (std::streamsize i = 0; i < n; ++i) h = (h ^ std::uint64_t(static_cast<unsigned char>(buf[std::size_t(i)]))) * 1099511628211ull;
  };
  const bool whole = size <= (std::uintmax_t(64) << 20);
  if (whole) {
    while (f.read(buf.data(), std::streamsize(buf.size())) || f.gcount() > 0) mix(f.gcount());
  } else {
    for (std::uintmax_t b = 0; b < 64; ++b) {
      f.clear();
      f.seekg(std::streamoff((size - buf.size()) * b / 63));
      f.read(buf.data(), std::streamsize(buf.size()));
      mix(f.gcount());
    }
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return "size " + std::to_string(size) + ", fnv1a64 " + hex + (whole ? "" : " (sampled)");
}

/// \brief The identity of the files a run's data comes from (`data`, and `val_data` when given), recorded with
/// every checkpoint and compared on resume; "" for a built-in task (generated, nothing to check).
inline std::string data_identity(const TrainConfig& c) {
  if (c.data.rfind("task:", 0) == 0) return "";
  std::string s = "'" + c.data + "': " + file_identity(c.data);
  if (!c.val_data.empty()) s += "; '" + c.val_data + "': " + file_identity(c.val_data);
  return s;
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
