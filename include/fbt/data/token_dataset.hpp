// fbt/data/token_dataset.hpp: a pre-tokenized corpus (io/token_file.hpp) as a training data source.
//
// The ids come from a tokenizer that is not fbt's (a Hugging Face model's, say; scripts/fbt_tokenize.py writes
// such files), so the vocabulary is the model's (TokenDatasetOptions::vocab_size) and every id is checked
// against it: when the file is opened (vocab_check "full", the default), or in each window as it is read
// (vocab_check "windows", for a corpus whose full scan would cost more than the run wants to wait). Documents are packed as nanoGPT packs them: one stream, with a
// separator id between documents (doc_sep; -1 = none, the stream is one document). As for a text file
// (dataset.hpp): training windows of T+1 tokens start at uniform random offsets of the train split
// (rng.below), evaluation cuts the validation split into windows at stride T, and doc_start is 1 at
// position 0 and at every separator, so document masking (doc_attention) and the feedback reset at a
// document start work as they do for bytes. Validation is a second file (val_path), or the tail of the
// file: the last val_fraction of its tokens, the cut moved forward to the next separator when there is one
// (so the validation split starts at a document).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "../config.hpp"
#include "../core/rng.hpp"
#include "../io/token_file.hpp"
#include "dataset.hpp"

namespace fbt {

/// \brief Options of TokenFileDataset (the training config's data fields: token_dtype, doc_sep_id,
/// val_data, val_fraction, seq_len, vocab_size).
struct TokenDatasetOptions {
  std::string dtype = "auto";  ///< a .bin's element type: auto (= uint16) | uint16 | uint32 | int32 | int64; a .npy's own
  int doc_sep = -1;            ///< the document separator id, -1 = none (the stream is one document)
  int vocab_size = 0;          ///< every id must be in [0, vocab_size) (> 0)
  std::string val_path;        ///< a validation token file; empty = the tail of the training file (val_fraction)
  double val_fraction = 0.1;   ///< without val_path: share of the tokens held out (in (0, 1))
  int seq_len = 0;             ///< T the trainer will use (0 = not known: only T = 1 is checked); each split needs T+1 tokens
  /// When the ids are checked against the vocabulary: "full", every id of both splits when the data is
  /// opened (TokenFile::check_vocab: chunked, on several threads, at memory speed for a file in the page
  /// cache, at disk speed otherwise); "windows", the ids of each window when it is read (sample_batch,
  /// eval_window), so opening costs nothing and a bad id stops the run at the step that reads it.
  std::string vocab_check = "full";
};

/// \brief Training and validation windows from a token file (and an optional validation token file).
class TokenFileDataset : public DataSource {
 public:
  /// \brief Opens and checks `path` (and o.val_path). Throws fbt::Error naming the file and the problem:
  /// the file errors of TokenFile::open, an id outside [0, vocab_size) (with its offset; with vocab_check
  /// "windows", sample_batch or eval_window throws it when it reads the window that holds the id), a
  /// separator outside the vocabulary, a split too short for a window of T+1 tokens, another vocab_check.
  static TokenFileDataset open(const std::string& path, const TokenDatasetOptions& o) {
    if (o.vocab_size < 1) throw Error("fbt: token data '" + path + "': vocab_size must be >= 1, got " + std::to_string(o.vocab_size));
    if (o.doc_sep < -1 || o.doc_sep >= o.vocab_size)
      throw Error("fbt: token data '" + path + "': doc_sep_id " + std::to_string(o.doc_sep) + " is outside the vocabulary [0, " +
                  std::to_string(o.vocab_size) + ") (-1 = no separator)");
    if (o.val_path.empty() && !(o.val_fraction > 0 && o.val_fraction < 1))
      throw Error("fbt: token data '" + path + "': val_fraction must be in (0, 1) without a validation file (val_data), got " +
                  detail::fmt_double(o.val_fraction));
    if (o.vocab_check != "full" && o.vocab_check != "windows")
      throw Error("fbt: token data '" + path + "': vocab_check must be full or windows, got \"" + detail::excerpt(o.vocab_check) + "\"");
    const bool full = o.vocab_check == "full";
    TokenFileDataset d;
    d.opts_ = o;
    d.checked_ = full;
    d.train_ = std::make_shared<TokenFile>(TokenFile::open(path, o.dtype));
    if (full) d.train_->check_vocab(o.vocab_size);
    const std::uint64_t T = std::uint64_t(std::max(1, o.seq_len)), need = T + 1;
    if (!o.val_path.empty()) {
      d.val_ = std::make_shared<TokenFile>(TokenFile::open(o.val_path, o.dtype));
      if (full) d.val_->check_vocab(o.vocab_size);
      d.train_end_ = d.train_->size();
      d.val_begin_ = 0, d.val_end_ = d.val_->size();
    } else {
      d.val_ = d.train_;
      const std::uint64_t n = d.train_->size();
      std::uint64_t cut = std::uint64_t(std::floor((1.0 - o.val_fraction) * double(n)));
      if (o.doc_sep >= 0) {  // move the cut forward to a separator, if one leaves a whole window on each side
        std::uint64_t c = cut;
        while (c < n && (*d.train_)[c] != o.doc_sep) ++c;
        if (c < n && n - c >= need) cut = c, d.cut_at_sep_ = true;
      }
      d.train_end_ = cut, d.val_begin_ = cut, d.val_end_ = n;
    }
    const std::string for_what = " for seq_len " + std::to_string(T) + " (a window is T+1 tokens)";
    if (d.train_end_ < need)
      throw Error("fbt: token data '" + path + "': the training split holds " + std::to_string(d.train_end_) + " tokens; needs at least " +
                  std::to_string(need) + for_what);
    if (d.val_end_ - d.val_begin_ < need)
      throw Error("fbt: token data '" + (o.val_path.empty() ? path : o.val_path) + "': the validation split holds " +
                  std::to_string(d.val_end_ - d.val_begin_) + " tokens; needs at least " + std::to_string(need) + for_what +
                  (o.val_path.empty() ? " (raise val_fraction, or give val_data)" : ""));
    if (d.train_end_ - T > 0xFFFFFFFFull)
      throw Error("fbt: token data '" + path + "': the training split holds " + std::to_string(d.train_end_) + " tokens, over the 2^32 windows can start at");
    return d;
  }

  void sample_batch(Rng& rng, int B, int T, std::vector<int>& tokens, std::vector<int>& targets,
                    std::vector<std::uint8_t>& doc_start) const override {
    FBT_ASSERT(B >= 1 && T >= 1, "sample_batch: B and T must be >= 1 (got B=" + std::to_string(B) + ", T=" + std::to_string(T) + ")");
    FBT_ASSERT(train_end_ >= std::uint64_t(T) + 1, "token data '" + train_->path() + "': the training split holds " + std::to_string(train_end_) +
                                                       " tokens; a window for T=" + std::to_string(T) + " needs " + std::to_string(T + 1));
    const std::uint64_t n_starts = train_end_ - std::uint64_t(T);
    tokens.resize(std::size_t(B) * T), targets.resize(std::size_t(B) * T), doc_start.resize(std::size_t(B) * T);
    std::vector<int> w(std::size_t(T) + 1);  // (T+1) one window's ids
    for (int b = 0; b < B; ++b) {
      const std::uint64_t s = rng.below(static_cast<std::uint32_t>(n_starts));
      if (!checked_) train_->check_vocab_range(s, s + std::uint64_t(T) + 1, opts_.vocab_size);
      train_->copy(s, std::uint64_t(T) + 1, w.data());
      const std::size_t o = std::size_t(b) * T;
      detail::fill_window(w.data(), T, tokens.data() + o, targets.data() + o, doc_start.data() + o, opts_.doc_sep);
    }
  }

  int num_eval_windows(int T) const override { return detail::stream_num_windows(std::size_t(val_end_ - val_begin_), T); }

  void eval_window(int i, int T, std::vector<int>& tokens, std::vector<int>& targets, std::vector<std::uint8_t>& doc_start) const override {
    const int n = num_eval_windows(T);
    FBT_ASSERT(i >= 0 && i < n, "eval_window: index " + std::to_string(i) + " out of range [0, " + std::to_string(n) + ") for T=" + std::to_string(T));
    std::vector<int> w(std::size_t(T) + 1);
    const std::uint64_t b = val_begin_ + std::uint64_t(i) * std::uint64_t(T);
    if (!checked_) val_->check_vocab_range(b, b + std::uint64_t(T) + 1, opts_.vocab_size);
    val_->copy(b, std::uint64_t(T) + 1, w.data());
    tokens.resize(T), targets.resize(T), doc_start.resize(T);
    detail::fill_window(w.data(), T, tokens.data(), targets.data(), doc_start.data(), opts_.doc_sep);
  }

  std::string describe() const override {
    std::ostringstream os;
    os << "token file '" << train_->path() << "' (" << token_dtype_name(train_->dtype()) << ", vocabulary " << opts_.vocab_size << ", separator "
       << (opts_.doc_sep >= 0 ? std::to_string(opts_.doc_sep) : std::string("none")) << "): train " << train_end_ << " tokens, validation "
       << (val_end_ - val_begin_) << " tokens";
    if (!opts_.val_path.empty()) os << " (file '" << val_->path() << "')";
    else os << " (the last " << detail::fmt_double(opts_.val_fraction) << " of the file" << (cut_at_sep_ ? ", from a separator" : "") << ")";
    return os.str();
  }

  int vocab_size() const override { return opts_.vocab_size; }
  int doc_sep() const override { return opts_.doc_sep; }

  std::uint64_t train_tokens() const { return train_end_; }
  std::uint64_t val_tokens() const { return val_end_ - val_begin_; }
  /// Validation token i (0 <= i < val_tokens()).
  int val_token(std::uint64_t i) const {
    if (!checked_) val_->check_vocab_range(val_begin_ + i, val_begin_ + i + 1, opts_.vocab_size);
    return (*val_)[val_begin_ + i];
  }
  /// Training token i (0 <= i < train_tokens()).
  int train_token(std::uint64_t i) const {
    if (!checked_) train_->check_vocab_range(i, i + 1, opts_.vocab_size);
    return (*train_)[i];
  }

 private:
  TokenFileDataset() = default;
  TokenDatasetOptions opts_;
  std::shared_ptr<TokenFile> train_, val_;  // val_ == train_ when validation is the file's tail
  std::uint64_t train_end_ = 0, val_begin_ = 0, val_end_ = 0;  // train = train_[0, train_end_), val = val_[val_begin_, val_end_)
  bool cut_at_sep_ = false;
  bool checked_ = true;  // every id checked when opened (vocab_check full); else each window's when read
};

}  // namespace fbt
