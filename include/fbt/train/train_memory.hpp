// fbt/train/train_memory.hpp: what a run needs at least, from its config alone (parameters, optimizer
// state, the step's activations, the data), and the refusal of one that does not fit (train/memory.hpp's limit).
#pragma once

#include <string>

#include "../detail/input.hpp"
#include "config.hpp"
#include "memory.hpp"

namespace fbt {

namespace detail {
/// Parameters of a config, counted from its sizes before any model is built (the embedding, the head
/// when untied, each block's attention, MLP and norms, the final norm, and an upper bound for the
/// built-in fusers: 3 D x D matrices and their norms).
inline double estimate_param_count(const ModelConfig& c) {
  const double D = std::max(0, c.hidden_size), V = std::max(0, c.vocab_size), hs = std::max(0, c.num_attention_heads) > 0 ? std::max(0, c.hs()) : 0;
  double n = V * D * (c.tie_word_embeddings ? 1 : 2) + D;
  auto block = [&](double nh, double nkv, double F) { return D * hs * (2 * nh + 2 * nkv) + 3 * F * D + 2 * D + (c.qk_norm ? 2 * hs : 0); };
  const int L = std::max(0, c.num_hidden_layers);
  const std::size_t listed = std::max({c.layer_num_attention_heads.size(), c.layer_num_key_value_heads.size(), c.layer_intermediate_size.size()});
  const int looped = int(std::min<std::size_t>(std::size_t(L), listed));  // per-layer lists: at most their own length
  for (int l = 0; l < looped; ++l) {
    auto at = [l](const std::vector<int>& v, int def) { return double(std::max(0, std::size_t(l) < v.size() ? v[l] : def)); };
    n += block(at(c.layer_num_attention_heads, c.num_attention_heads), at(c.layer_num_key_value_heads, c.num_key_value_heads),
               at(c.layer_intermediate_size, c.intermediate_size));
  }
  n += double(L - looped) * block(std::max(0, c.num_attention_heads), std::max(0, c.num_key_value_heads), std::max(0, c.intermediate_size));
  if (c.feedback()) n += 3 * D * D + 4 * D;
  return n;
}
}  // namespace detail

/// What a run needs at least, from its config alone, before anything is allocated (bytes).
struct TrainMemoryEstimate {
  double params = 0;       ///< parameters, gradients and AdamW moments (and a gradient buffer per extra thread)
  double activations = 0;  ///< a lower bound of the step's workspace: the logits and four D-wide tensors per layer, per position
  double data = 0;         ///< a text file's bytes, its documents and its 4-byte tokens (7 bytes per byte); a token file is mapped: 0
  double total() const { return params + activations + data; }
};

/// \brief The estimate check_train_memory compares: a lower bound of what Trainer will allocate.
inline TrainMemoryEstimate estimate_train_memory(const TrainConfig& c) {
  TrainMemoryEstimate e;
  e.params = detail::estimate_param_count(c.model) * sizeof(float) * (4 + std::max(0, std::min(c.threads, c.batch_size) - 1));
  const double pos = double(std::max(0, c.batch_size)) * std::max(0, c.seq_len);
  e.activations = pos * (double(std::max(0, c.model.vocab_size)) + 4.0 * std::max(0, c.model.hidden_size) * std::max(0, c.model.num_hidden_layers)) *
                  sizeof(float);
  if (!c.data.empty() && c.data.rfind("task:", 0) != 0 && !is_token_data(c)) {
    std::error_code ec;
    const auto sz = std::filesystem::file_size(c.data, ec);
    if (!ec) e.data = 7.0 * double(sz);
  }
  return e;
}

/// \brief Refuses a run whose memory estimate (estimate_train_memory), made from the config alone before
/// anything is allocated, exceeds what it may use: TrainConfig::max_memory_gb, else MemAvailable (see
/// train/memory.hpp). The Trainer adds the exact step workspace once the model exists.
inline void check_train_memory(const TrainConfig& c) {
  const TrainMemoryEstimate e = estimate_train_memory(c);
  check_memory("this training run", e.total(),
               "parameters with gradients and AdamW state " + detail::fmt_bytes(e.params) + ", at least " + detail::fmt_bytes(e.activations) +
                   " of step activations for batch_size " + std::to_string(c.batch_size) + " x seq_len " + std::to_string(c.seq_len) +
                   (e.data > 0 ? ", data " + detail::fmt_bytes(e.data) : std::string()),
               c.max_memory_gb, "lower batch_size, seq_len or the model's size");
}

}  // namespace fbt
