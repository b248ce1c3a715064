// fbt/data/sft_dataset.hpp: prompt/response examples (io/sft_jsonl.hpp) as a training data source for
// supervised fine-tuning with a loss mask (docs/training.md, "Fine-tuning on prompt/response data").
//
// Each example is one document: [sep] prompt response, where sep is kSep for text (the byte tokenizer's
// document start) and doc_sep_id for ids (-1: no separator token; the document still starts there).
// Packing: a window of T+1 tokens starts at a document and takes whole documents in order (cyclically over
// the training examples) until it is full; the last one is cut. doc_start is 1 at each document's first
// token, so document masking (doc_attention masked) keeps attention inside an example and the feedback
// restarts there, as for any packed data.
// The loss mask: the target of position t (token t+1) counts only when token t+1 is a response token, or
// is the separator that follows a response (so the model learns where a response ends); every other target
// (the prompt, the separator before it) is -1, which the loss ignores, so prompt tokens get no gradient.
// Training windows start at a uniform random example (rng.below), so the batch depends on the Rng alone (a
// resumed run draws the same batches). Validation is the last val_fraction of the examples (at least one)
// or a second file; its windows pack the examples in order, each whole (unless longer than a window), the
// rest of the last window padded (padding: targets -1), so every validation example is scored once.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "../io/sft_jsonl.hpp"
#include "dataset.hpp"

namespace fbt {

/// Options of SftDataset (the training config's data fields).
struct SftDatasetOptions {
  int vocab_size = ByteTokenizer::kVocabSize;  ///< the model's vocabulary (ids must be in [0, vocab_size))
  int doc_sep = -1;                            ///< id form: the separator before each example (-1 = none); text: kSep
  std::string val_path;                        ///< a validation JSONL file; empty = the last val_fraction of the examples
  double val_fraction = 0.1;                   ///< without val_path: share of the examples held out (at least one)
  bool mask_prompt = true;                     ///< false: every target counts, the prompt's too (the unmasked control)
};

class SftDataset : public DataSource {
 public:
  /// Reads `path` (and o.val_path) and splits it. Throws fbt::Error naming the file (and line).
  static SftDataset open(const std::string& path, const SftDatasetOptions& o) {
    SftFile train = read_sft_jsonl(path, o.vocab_size), val;
    if (!o.val_path.empty()) {
      val = read_sft_jsonl(o.val_path, o.vocab_size);
      if (val.ids != train.ids) throw Error("fbt: sft data '" + o.val_path + "': " + (val.ids ? "token ids" : "text") + ", but '" + path + "' is " + (train.ids ? "token ids" : "text"));
    } else {
      if (!(o.val_fraction > 0 && o.val_fraction < 1))
        throw Error("fbt: sft data '" + path + "': val_fraction must be in (0, 1) without a validation file (val_data), got " + detail::fmt_double(o.val_fraction));
      const std::size_t n = train.examples.size();
      if (n < 2) throw Error("fbt: sft data '" + path + "': 1 example; needs at least 2 (one to train on, one to validate) or a validation file (val_data)");
      const std::size_t nv = std::min(n - 1, std::max<std::size_t>(1, std::size_t(std::lround(o.val_fraction * double(n)))));
      val.path = path, val.ids = train.ids;
      val.examples.assign(train.examples.end() - std::ptrdiff_t(nv), train.examples.end());
      train.examples.resize(n - nv);
    }
    if (!train.ids && o.vocab_size != ByteTokenizer::kVocabSize)
      throw Error("fbt: sft data '" + path + "': text examples are bytes (the byte tokenizer's " + std::to_string(ByteTokenizer::kVocabSize) +
                  " ids), but the model's vocabulary has " + std::to_string(o.vocab_size) + ": give token-id arrays of its tokenizer");
    if (!train.ids && o.doc_sep >= 0 && o.doc_sep != kSep)
      throw Error("fbt: sft data '" + path + "': text examples start with the byte tokenizer's separator; doc_sep_id " + std::to_string(o.doc_sep) + " applies to token ids only");
    if (o.doc_sep >= o.vocab_size)
      throw Error("fbt: sft data '" + path + "': doc_sep_id " + std::to_string(o.doc_sep) + " is outside the vocabulary [0, " + std::to_string(o.vocab_size) + ")");
    SftDataset d;
    d.path_ = path, d.val_path_ = o.val_path, d.ids_ = train.ids, d.vocab_ = o.vocab_size, d.mask_ = o.mask_prompt;
    d.sep_ = train.ids ? o.doc_sep : kSep;
    d.train_ = pack(train.examples, d.sep_);
    d.val_ = pack(val.examples, d.sep_);
    return d;
  }

  void sample_batch(Rng& rng, int B, int T, std::vector<int>& tokens, std::vector<int>& targets, std::vector<std::uint8_t>& doc_start) const override {
    FBT_ASSERT(B >= 1 && T >= 1, "sample_batch: B and T must be >= 1 (got B=" + std::to_string(B) + ", T=" + std::to_string(T) + ")");
    tokens.resize(std::size_t(B) * T), targets.resize(std::size_t(B) * T), doc_start.resize(std::size_t(B) * T);
    const std::size_t n = train_.off.size() - 1;
    for (int b = 0; b < B; ++b) {
      std::size_t d = rng.below(std::uint32_t(n));
      Window w;
      while (int(w.id.size()) < T + 1) append_doc(train_, d, w, T + 1), d = (d + 1) % n;
      const std::size_t o = std::size_t(b) * T;
      fill(w, T, tokens.data() + o, targets.data() + o, doc_start.data() + o);
    }
  }

  int num_eval_windows(int T) const override { return int(eval_starts(T).size()) - 1; }

  void eval_window(int i, int T, std::vector<int>& tokens, std::vector<int>& targets, std::vector<std::uint8_t>& doc_start) const override {
    const std::vector<std::size_t> s = eval_starts(T);
    FBT_ASSERT(i >= 0 && i + 1 < int(s.size()), "eval_window: index " + std::to_string(i) + " out of range [0, " + std::to_string(s.size() - 1) + ") for T=" + std::to_string(T));
    Window w;
    for (std::size_t d = s[std::size_t(i)]; d < s[std::size_t(i) + 1]; ++d) append_doc(val_, d, w, T + 1);
    while (int(w.id.size()) < T + 1) w.id.push_back(sep_ >= 0 ? sep_ : 0), w.resp.push_back(kPad), w.start.push_back(1);
    tokens.resize(T), targets.resize(T), doc_start.resize(T);
    fill(w, T, tokens.data(), targets.data(), doc_start.data());
  }

  std::string describe() const override {
    std::ostringstream os;
    os << "sft data '" << path_ << "' (" << (ids_ ? "token ids, vocabulary " + std::to_string(vocab_) : std::string("text, bytes")) << ", separator "
       << (sep_ >= 0 ? std::to_string(sep_) : std::string("none")) << "): train " << train_.off.size() - 1 << " examples (" << train_.id.size()
       << " tokens, " << train_.responses << " response tokens), validation " << val_.off.size() - 1 << " examples"
       << (val_path_.empty() ? " (the last of the file)" : " ('" + val_path_ + "')") << (mask_ ? "; the loss counts response tokens only" : "; unmasked: every token counts")
       << cut_note_;
    return os.str();
  }

  /// \brief Refuses, before step 1, windows of `T` tokens in which nothing is trained or scored: when every
  /// training example (or every validation example) has its prompt cut there (its first counted target lies
  /// past token T), naming how many were cut and the seq_len they need. When only some are cut, describe()
  /// says how many (their windows train on the examples that follow them).
  void check_seq_len(int T) {
    auto check = [&](const Docs& d, const char* which, const std::string& file) -> std::size_t {
      const std::size_t n = d.off.size() - 1;
      std::size_t cut = 0, need_min = 0, need_max = 0;
      for (std::size_t k = 0; k < n; ++k) {
        const std::size_t p = first_target(d, k);  // the token index (within its document) of the first counted target
        if (p > std::size_t(T)) {
          need_min = cut == 0 ? p : std::min(need_min, p), need_max = std::max(need_max, p);
          ++cut;
        }
      }
      if (n > 0 && cut == n)
        throw Error("fbt: sft data '" + file + "': every " + which + " example (" + std::to_string(n) + ") has its prompt cut at seq_len " +
                    std::to_string(T) + ": no response token is within the window, so nothing would be " +
                    (std::string(which) == "training" ? "trained" : "scored") + " (they need seq_len >= " + std::to_string(need_min) +
                    (need_max > need_min ? " to " + std::to_string(need_max) : std::string()) + ")");
      return cut;
    };
    const std::size_t cut = check(train_, "training", path_);
    check(val_, "validation", val_path_.empty() ? path_ : val_path_);
    cut_note_.clear();
    if (cut > 0)
      cut_note_ = "; " + std::to_string(cut) + " of " + std::to_string(train_examples()) + " training examples have no response token within seq_len " +
                  std::to_string(T);
  }

  int vocab_size() const override { return ids_ ? vocab_ : ByteTokenizer::kVocabSize; }
  int doc_sep() const override { return sep_; }
  bool ids() const { return ids_; }
  std::size_t train_examples() const { return train_.off.size() - 1; }
  std::size_t val_examples() const { return val_.off.size() - 1; }

 private:
  /// Documents in one stream: id, whether each is a response token, and where each document starts.
  struct Docs {
    std::vector<int> id;
    std::vector<std::uint8_t> resp;  ///< 1 response token, 0 separator or prompt
    std::vector<std::size_t> off{0};  ///< (documents + 1) document d = [off[d], off[d+1])
    std::size_t responses = 0;
  };
  /// A window being built: T+1 tokens with their flags.
  struct Window {
    std::vector<int> id;
    std::vector<std::uint8_t> resp, start;  ///< resp: as in Docs, or kPad (a validation window's padding)
  };
  static constexpr std::uint8_t kPad = 2;

  static Docs pack(const std::vector<SftExample>& ex, int sep) {
    Docs d;
    for (const SftExample& e : ex) {
      if (sep >= 0) d.id.push_back(sep), d.resp.push_back(0);
      for (int t : e.prompt) d.id.push_back(t), d.resp.push_back(0);
      for (int t : e.response) d.id.push_back(t), d.resp.push_back(1);
      d.responses += e.response.size();
      d.off.push_back(d.id.size());
    }
    return d;
  }

  /// The index, within document k, of the first token whose target counts (the first response token; with
  /// the mask off, the token after the first).
  std::size_t first_target(const Docs& docs, std::size_t k) const {
    if (!mask_) return 1;
    for (std::size_t j = docs.off[k]; j < docs.off[k + 1]; ++j)
      if (docs.resp[j] == 1) return j - docs.off[k];
    return docs.off[k + 1] - docs.off[k];
  }

  /// Appends document k of `docs` to `w`, at most up to `cap` tokens in all.
  static void append_doc(const Docs& docs, std::size_t k, Window& w, int cap) {
    for (std::size_t j = docs.off[k]; j < docs.off[k + 1] && int(w.id.size()) < cap; ++j) {
      w.id.push_back(docs.id[j]), w.resp.push_back(docs.resp[j]);
      w.start.push_back(j == docs.off[k] ? 1 : 0);
    }
  }

  /// One row from a window of T+1 tokens: the masked targets (see the file comment).
  void fill(const Window& w, int T, int* tokens, int* targets, std::uint8_t* doc_start) const {
    for (int t = 0; t < T; ++t) {
      tokens[t] = w.id[std::size_t(t)];
      doc_start[t] = (t == 0 || w.start[std::size_t(t)]) ? 1 : 0;
      const std::size_t j = std::size_t(t) + 1;
      const bool end_of_response = sep_ >= 0 && w.start[j] && w.id[j] == sep_ && w.resp[j - 1] == 1;
      const bool counts = mask_ ? w.resp[j] == 1 || end_of_response : w.resp[j] != kPad && w.resp[t] != kPad;
      targets[t] = counts ? w.id[j] : -1;
    }
  }

  /// Validation windows of T+1 tokens: window i packs examples [s[i], s[i+1]) whole, in order (an example
  /// longer than a window alone, cut). Returns (windows + 1) example indices.
  std::vector<std::size_t> eval_starts(int T) const {
    FBT_ASSERT(T >= 1, "num_eval_windows: T must be >= 1 (got " + std::to_string(T) + ")");
    std::vector<std::size_t> s{0};
    const std::size_t n = val_.off.size() - 1;
    std::size_t used = 0;  // tokens in the current window
    for (std::size_t d = 0; d < n; ++d) {
      const std::size_t len = val_.off[d + 1] - val_.off[d];
      if (used > 0 && used + len > std::size_t(T) + 1) s.push_back(d), used = 0;
      used += len;
    }
    if (n > 0) s.push_back(n);
    return s;
  }

  SftDataset() = default;
  std::string path_, val_path_;
  bool ids_ = false, mask_ = true;
  int vocab_ = 0, sep_ = -1;
  Docs train_, val_;
  std::string cut_note_;  ///< check_seq_len's count of the training examples cut before their response
};

}  // namespace fbt
