// fbt/data/dataset.hpp: the data-source interface and a byte-level text dataset.
//
// DataSource is what the trainer consumes: random training windows from a caller-owned Rng, and
// fixed evaluation windows. Sampling depends on nothing but that Rng, so a trainer that saves the
// Rng state (Rng::state) saves the data position, and a resumed run draws the same batches
// (spec section 8). Windows hold T+1 tokens: tokens = the first T, targets = the last T (position t
// predicts token t+1, spec section 9). doc_start is 1 at position 0 and wherever the token is kSep
// (tokenizer.hpp: every document is kSep + its bytes). Evaluation cuts the validation stream into
// windows of T+1 tokens at stride T, so each validation target is scored exactly once; the last
// partial window (fewer than T+1 tokens left) is dropped. (The generated tasks, tasks.hpp and
// state_tasks.hpp, pack whole documents into windows instead: detail::packed_window_starts.) A source
// whose data comes from a known process also gives each validation target's optimal loss
// (eval_window_optimal), which evaluation prints beside every loss.
#pragma once

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "../config.hpp"
#include "../core/rng.hpp"
#include "../detail/input.hpp"
#include "tokenizer.hpp"

namespace fbt {

/// \brief What the trainer reads batches from (TextDataset, TaskDataset).
///
/// Every output vector is resized by the callee: sample_batch to B*T, eval_window to T (row-major
/// (B, T)). Tokens are byte-tokenizer ids (vocab_size() = 257, separator kSep) except for a token file
/// (token_dataset.hpp), whose ids and separator are its tokenizer's.
struct DataSource {
  /// \brief B random training windows. Depends only on `rng` (and advances it): same state, same batch.
  virtual void sample_batch(Rng& rng, int B, int T, std::vector<int>& tokens, std::vector<int>& targets,
                            std::vector<std::uint8_t>& doc_start) const = 0;
  /// \brief Number of validation windows of T+1 tokens at stride T (the last partial window is dropped).
  virtual int num_eval_windows(int T) const = 0;
  /// \brief Validation window i (0 <= i < num_eval_windows(T)): one row of T tokens.
  virtual void eval_window(int i, int T, std::vector<int>& tokens, std::vector<int>& targets,
                           std::vector<std::uint8_t>& doc_start) const = 0;
  /// \brief The optimal loss (nats) of each of the T targets of validation window i: the conditional
  /// entropy of the target token given every earlier token under the process that made the data
  /// (state_tasks.hpp). Returns false, with T NaNs, when the data has no known optimum (text files, the
  /// reasoning tasks of tasks.hpp).
  virtual bool eval_window_optimal(int i, int T, std::vector<double>& optimal) const {
    (void)i;
    optimal.assign(std::size_t(std::max(T, 0)), std::numeric_limits<double>::quiet_NaN());
    return false;
  }
  /// \brief The mean optimal loss over the targets of validation windows 0..n-1 (the windows an evaluation
  /// of n windows uses); NaN when the data has no known optimum.
  double mean_optimal_loss(int T, int n) const {
    std::vector<double> opt;
    double sum = 0;
    long count = 0;
    for (int i = 0; i < n; ++i) {
      if (!eval_window_optimal(i, T, opt)) return std::numeric_limits<double>::quiet_NaN();
      for (double v : opt) sum += v;
      count += long(opt.size());
    }
    return count > 0 ? sum / double(count) : std::numeric_limits<double>::quiet_NaN();
  }
  /// \brief One line for logs: source, sizes, split.
  virtual std::string describe() const = 0;
  /// The vocabulary the ids come from (bytes: 257; a token file: the model's).
  virtual int vocab_size() const { return ByteTokenizer::kVocabSize; }
  /// The id that starts a document (doc_start is 1 there), or -1 when documents are not marked (bytes: kSep).
  virtual int doc_sep() const { return kSep; }
  virtual ~DataSource() = default;
};

namespace detail {

/// Copies one window w[0..T] (T+1 tokens) into row outputs: tokens = w[0..T), targets = w[1..T],
/// doc_start = 1 at t = 0 and where the token is the separator `sep` (kSep for bytes; -1: none).
inline void fill_window(const int* w, int T, int* tokens, int* targets, std::uint8_t* doc_start, int sep = kSep) {
  for (int t = 0; t < T; ++t) {
    tokens[t] = w[t];
    targets[t] = w[t + 1];
    doc_start[t] = (t == 0 || w[t] == sep) ? 1 : 0;
  }
}

/// floor((V - 1) / T): windows of T+1 tokens at stride T that fit in a stream of V tokens.
inline int stream_num_windows(std::size_t V, int T) {
  FBT_ASSERT(T >= 1, "num_eval_windows: T must be >= 1 (got " + std::to_string(T) + ")");
  if (V < 2) return 0;
  return static_cast<int>((V - 1) / static_cast<std::size_t>(T));
}

inline void stream_window(const std::vector<int>& stream, int i, int T, std::vector<int>& tokens,
                          std::vector<int>& targets, std::vector<std::uint8_t>& doc_start) {
  const int n = stream_num_windows(stream.size(), T);
  FBT_ASSERT(i >= 0 && i < n, "eval_window: index " + std::to_string(i) + " out of range [0, " +
                                  std::to_string(n) + ") for T=" + std::to_string(T));
  tokens.resize(T), targets.resize(T), doc_start.resize(T);
  fill_window(stream.data() + std::size_t(i) * T, T, tokens.data(), targets.data(), doc_start.data());
}

/// Offsets (into a stream of documents starting at doc_off[j], doc_off.back() = the end) of windows of
/// T+1 tokens, each starting at a document and taking whole documents until it holds T+1 tokens (the rest
/// of the document it cuts is dropped); a last window that cannot be filled is dropped.
inline std::vector<std::size_t> packed_window_starts(const std::vector<std::size_t>& doc_off, int T) {
  FBT_ASSERT(T >= 1, "num_eval_windows: T must be >= 1 (got " + std::to_string(T) + ")");
  std::vector<std::size_t> starts;
  const std::size_t n = doc_off.empty() ? 0 : doc_off.size() - 1, need = std::size_t(T) + 1;
  for (std::size_t s = 0; s < n;) {
    std::size_t j = s;  // the last document the window takes (cut or exactly filled)
    while (j < n && doc_off[j + 1] - doc_off[s] < need) ++j;
    if (j == n) break;  // too few tokens left for a whole window
    starts.push_back(doc_off[s]);
    s = j + 1;
  }
  return starts;
}

inline std::string fmt_double(double x) {
  std::ostringstream os;
  os << x;
  return os.str();
}

}  // namespace detail

/// The default limit on a text file's size (TextDatasetOptions::max_bytes): 1 GiB. Its tokens take 4
/// bytes each, and training draws window starts with 32-bit sampling.
inline constexpr std::uint64_t kMaxTextFileBytes = std::uint64_t(1) << 30;

/// \brief Options of TextDataset (validated by from_file / from_string; errors name the field).
struct TextDatasetOptions {
  /// "blank_line": paragraphs separated by one or more blank lines (empty or only spaces, tabs, '\r')
  /// are documents, each keeping its lines' own bytes and newlines; "none": the whole text is one document.
  std::string doc_split = "blank_line";
  /// Fraction of the documents, taken from the end at a document boundary, held out for validation
  /// (at least one document when > 0, never all). A single-document text is split at token
  /// floor((1 - val_fraction) * N) instead. 0 = no validation split. Must be in [0, 1).
  double val_fraction = 0.1;
  /// T the trainer will use (0 = not known; then only T = 1 is checked here, and sample_batch /
  /// eval_window check their T). Each split must hold at least T+1 tokens.
  int seq_len = 0;
  /// from_file: the largest file it reads, in bytes; a larger one is refused before it is opened.
  std::uint64_t max_bytes = kMaxTextFileBytes;
};

/// \brief A text file as one stream of byte tokens, documents separated by kSep, split into train and
/// validation at a document boundary.
///
/// Training windows start at uniform random offsets of the train stream (rng.below), so they may start
/// mid-document and may span documents; doc_start marks each kSep (and position 0).
class TextDataset : public DataSource {
 public:
  /// \brief Reads `path`. Throws fbt::Error naming the file and the reason: "cannot open", "is a
  /// directory", "not a regular file" (a FIFO or device such as /dev/zero: checked before opening, which
  /// would block or never end), "over the ...-byte limit" (opts.max_bytes), "cannot read", "is empty",
  /// "holds N tokens; needs at least M for T=... and a validation split of ...".
  static TextDataset from_file(const std::string& path, const TextDatasetOptions& opts = {}) {
    const std::uint64_t size = detail::regular_file_size(path, opts.max_bytes, "fbt: text file", "a text file (TextDatasetOptions::max_bytes)");
    std::FILE* f = std::fopen(path.c_str(), "rb");
    if (!f) throw Error("fbt: cannot open text file '" + path + "': " + std::strerror(errno));
    std::string text;
    text.reserve(std::size_t(size));
    char buf[1 << 16];
    std::size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) {
      text.append(buf, n);
      if (text.size() > opts.max_bytes) break;  // the file grew since it was measured
    }
    const bool failed = std::ferror(f) != 0;
    const int err = errno;
    std::fclose(f);
    if (failed) throw Error("fbt: cannot read text file '" + path + "': " + std::strerror(err));
    if (text.size() > opts.max_bytes)
      throw Error("fbt: text file: '" + path + "': grew over the " + std::to_string(opts.max_bytes) + "-byte limit while being read");
    return TextDataset(text, opts, "text file '" + path + "'");
  }

  /// \brief The same from an in-memory string; errors name it as `name`.
  static TextDataset from_string(const std::string& text, const TextDatasetOptions& opts = {},
                                 const std::string& name = "<string>") {
    return TextDataset(text, opts, "text '" + name + "'");
  }

  void sample_batch(Rng& rng, int B, int T, std::vector<int>& tokens, std::vector<int>& targets,
                    std::vector<std::uint8_t>& doc_start) const override {
    FBT_ASSERT(B >= 1 && T >= 1, "sample_batch: B and T must be >= 1 (got B=" + std::to_string(B) +
                                     ", T=" + std::to_string(T) + ")");
    FBT_ASSERT(train_.size() >= std::size_t(T) + 1,
               what_ + ": the train split holds " + std::to_string(train_.size()) +
                   " tokens; a window for T=" + std::to_string(T) + " needs " + std::to_string(T + 1));
    const std::size_t n_starts = train_.size() - std::size_t(T);  // valid starts 0..N-T-1
    FBT_ASSERT(n_starts <= 0xFFFFFFFFull, what_ + ": train split too large for 32-bit sampling");
    tokens.resize(std::size_t(B) * T), targets.resize(std::size_t(B) * T), doc_start.resize(std::size_t(B) * T);
    for (int b = 0; b < B; ++b) {
      const std::size_t s = rng.below(static_cast<std::uint32_t>(n_starts));
      const std::size_t o = std::size_t(b) * T;
      detail::fill_window(train_.data() + s, T, tokens.data() + o, targets.data() + o, doc_start.data() + o);
    }
  }

  int num_eval_windows(int T) const override { return detail::stream_num_windows(val_.size(), T); }

  void eval_window(int i, int T, std::vector<int>& tokens, std::vector<int>& targets,
                   std::vector<std::uint8_t>& doc_start) const override {
    detail::stream_window(val_, i, T, tokens, targets, doc_start);
  }

  std::string describe() const override {
    std::ostringstream os;
    os << what_ << ": " << num_docs_ << " document(s) (doc_split " << opts_.doc_split << "), train "
       << train_.size() << " tokens, validation " << val_.size() << " tokens";
    if (num_val_docs_ > 0) os << " (last " << num_val_docs_ << " document(s))";
    else if (!val_.empty()) os << " (token-level split of the single document)";
    return os.str();
  }

  long train_tokens() const { return static_cast<long>(train_.size()); }
  long val_tokens() const { return static_cast<long>(val_.size()); }
  int num_documents() const { return num_docs_; }
  /// Documents in the validation split (0 when there is none or the single document was split by tokens).
  int num_val_documents() const { return num_val_docs_; }
  const std::vector<int>& train_stream() const { return train_; }
  const std::vector<int>& val_stream() const { return val_; }

  /// \brief Splits `text` into documents as doc_split says (exposed for tests and tools).
  static std::vector<std::string> split_documents(const std::string& text, const std::string& doc_split) {
    std::vector<std::string> docs;
    if (doc_split == "none") {
      if (!text.empty()) docs.push_back(text);
      return docs;
    }
    FBT_ASSERT(doc_split == "blank_line",
               "TextDatasetOptions.doc_split must be \"blank_line\" or \"none\" (got \"" + doc_split + "\")");
    std::string cur;
    std::size_t pos = 0;
    while (pos < text.size()) {
      std::size_t end = text.find('\n', pos);
      end = (end == std::string::npos) ? text.size() : end + 1;  // the line, with its '\n' if any
      bool blank = true;
      for (std::size_t i = pos; i < end && blank; ++i) {
        const char c = text[i];
        blank = (c == ' ' || c == '\t' || c == '\r' || c == '\n');
      }
      if (blank) {
        if (!cur.empty()) docs.push_back(cur), cur.clear();
      } else {
        cur.append(text, pos, end - pos);
      }
      pos = end;
    }
    if (!cur.empty()) docs.push_back(cur);
    return docs;
  }

 private:
  TextDataset(const std::string& text, const TextDatasetOptions& opts, std::string what)
      : what_(std::move(what)), opts_(opts) {
    const double f = opts.val_fraction;
    FBT_ASSERT(f >= 0.0 && f < 1.0,
               "TextDatasetOptions.val_fraction must be in [0, 1) (got " + detail::fmt_double(f) + ")");
    FBT_ASSERT(opts.seq_len >= 0,
               "TextDatasetOptions.seq_len must be >= 0 (got " + std::to_string(opts.seq_len) + ")");
    if (text.empty()) throw Error("fbt: " + what_ + " is empty");
    const std::vector<std::string> docs = split_documents(text, opts.doc_split);
    if (docs.empty()) throw Error("fbt: " + what_ + " is empty (it holds only blank lines)");
    num_docs_ = static_cast<int>(docs.size());

    // Documents from the end go to validation: k = max(1, round(f D)), at most D - 1.
    int k = 0;
    if (f > 0 && num_docs_ > 1)
      k = std::min(num_docs_ - 1, std::max(1, static_cast<int>(std::lround(f * num_docs_))));
    std::size_t total = 0;
    for (const auto& d : docs) total += d.size() + 1;
    train_.reserve(total);
    for (int i = 0; i < num_docs_; ++i) {
      std::vector<int>& dst = (i < num_docs_ - k) ? train_ : val_;
      const std::vector<int> enc = ByteTokenizer::encode_document(docs[i]);
      dst.insert(dst.end(), enc.begin(), enc.end());
    }
    num_val_docs_ = k;

    const int T = std::max(1, opts.seq_len);
    const std::size_t need_each = std::size_t(T) + 1;
    const std::size_t need_total = need_each * (f > 0 ? 2 : 1);
    const std::string for_what = "for T=" + std::to_string(T) + " and a validation split of " + detail::fmt_double(f);
    if (total < need_total)
      throw Error("fbt: " + what_ + " holds " + std::to_string(total) + " tokens; needs at least " +
                  std::to_string(need_total) + " " + for_what);
    if (f > 0 && num_docs_ == 1) {  // one document: split the stream itself
      const std::size_t cut = static_cast<std::size_t>(std::floor((1.0 - f) * double(total)));
      val_.assign(train_.begin() + cut, train_.end());
      train_.resize(cut);
    }
    if (train_.size() < need_each || (f > 0 && val_.size() < need_each))
      throw Error("fbt: " + what_ + " holds " + std::to_string(total) + " tokens (train " +
                  std::to_string(train_.size()) + ", validation " + std::to_string(val_.size()) +
                  "); needs at least " + std::to_string(need_each) + " in each split " + for_what);
  }

  std::string what_;             // "text file '<path>'" or "text '<name>'", for messages
  TextDatasetOptions opts_;
  std::vector<int> train_, val_;  // (N_train), (N_val) token streams, each document = kSep + bytes
  int num_docs_ = 0, num_val_docs_ = 0;
};

}  // namespace fbt
