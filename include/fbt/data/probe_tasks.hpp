// fbt/data/probe_tasks.hpp: the paper's probing tasks (arXiv:2608.08888 section 4.4 and App. F; the
// spec of record is PROBING.md, our choices are listed in docs/spec.md "Probing tasks"). Each prompt is
// a short program whose last line ends at a final ':' (the probe position); the label is the state the
// program leaves, which never appears in the prompt:
//
//   completion      required = a / completed = b / scratch = c / N x "scratch += 0" / "Status:"
//                   label done iff a == b, else more
//   delayed_memory  state = s / scratch = c0 / J x "scratch ^= b_j" / N x "scratch += 0" / "# final state:"
//                   label zero or one (= s)
//   latest_write    m*W lines "r{i} = {v}" / scratch = c / 8 x "scratch += 0" / "query = r{q}" / "Value:"
//                   label zero or one: the last value written to r{q}
//
// Lines are joined by '\n', with single spaces around '=', '+=' and '^='; nothing follows the final ':'.
// Probe items come in groups that differ only in the field that sets the label, so labels are balanced
// by construction (and a probe's folds hold out whole groups):
//   completion      a group = one unordered pair {a, b} (a != b, from 0..19) and one c in 0..9; it holds
//                   the four assignments (a,a) (a,b) (b,a) (b,b) at each N of the sweep
//   delayed_memory  a group = one scratch context (c0 in {0, 1} and J = 6 bits: 128 contexts, enumerated);
//                   it holds s = 0 and s = 1 at each N
//   latest_write    a group = one random write schedule over r0..r(m-1) (each register W times, in a random
//                   order, fair bits), its complement (every value flipped) and one query per register:
//                   2m prompts
// As training data ("task:NAME", ProbeTaskDataset) a document is kSep + prompt + label + "\n" (no space:
// the label's first byte is predicted at the final ':', the probe position, as the paper's " done" token
// is predicted there by its tokenizer): one random item, N = task_difficulty null lines (completion, delayed_memory) or W = task_difficulty writes per
// register with m = 8 registers (latest_write).
//
// The running-state tasks (data/state_tasks.hpp: running_sum, permutation, brackets) give probe items too
// (state_probe_items; `fbt probe --task running_sum`), though they are not App. F tasks and train as their
// own data: a group = one document drawn by the task's process (modulus / k / depth cap = o.difficulty,
// reveal q = o.reveal); its items are the document's first t symbols for each t of o.prefix_symbols
// (kSep + t symbol bytes, no '\n'), probed at the last symbol, labelled with the hidden state s_t after it
// (the state index as a decimal string: for running_sum the sum of the t digits mod m). The state is what
// the next symbol is drawn from, so it is what a model that predicts well must hold at that position.
#pragma once

#include <algorithm>
#include <cstdint>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "../config.hpp"
#include "../core/rng.hpp"
#include "../detail/input.hpp"
#include "dataset.hpp"
#include "state_tasks.hpp"
#include "tokenizer.hpp"

namespace fbt {

/// The probing task names ("task:<name>" in a training config, `fbt probe --task NAME`).
inline const std::vector<std::string>& probe_task_names() {
  static const std::vector<std::string> names = {"completion", "delayed_memory", "latest_write"};
  return names;
}
inline bool is_probe_task(const std::string& name) {
  const auto& n = probe_task_names();
  return std::find(n.begin(), n.end(), name) != n.end();
}

/// One probe item: a prompt, its label, the probe position (token index in ByteTokenizer::encode_document
/// of the text; -1 = the last token, the final ':') and its group (whole groups are held out together).
struct ProbeItem {
  std::string text;
  std::string label;
  int group = 0;
  int position = -1;
  std::string setting;  ///< what varies in a sweep, e.g. "N=8" or "m=8 W=2" (reported per setting)
};

/// \brief How many probe items to make. Defaults: the paper's (PROBING.md 1.1-1.3).
struct ProbeTaskOptions {
  std::vector<int> null_lines = {0, 8, 32, 128, 256};  ///< N sweep (completion, delayed_memory)
  int groups = 0;          ///< 0: the paper's (completion 80, delayed_memory 128, latest_write 128)
  int registers = 8;       ///< m (latest_write)
  int writes = 2;          ///< W, writes per register (latest_write)
  int latest_null_lines = 8;  ///< null updates after the writes (latest_write)
  std::uint64_t seed = 1;
  // the running-state tasks (state_probe_items)
  std::vector<int> prefix_symbols = {8, 16, 32};  ///< t sweep: symbols read before the probe
  int difficulty = 5;   ///< modulus m (running_sum) | k of S_k (permutation) | depth cap (brackets)
  double reveal = 0.5;  ///< q, as task_reveal
};

namespace detail {

constexpr int kMemoryBits = 6;          // J: scratch ^= lines of delayed_memory (2 x 2^6 = 128 contexts)
constexpr int kCompletionValues = 20;   // a, b drawn from 0..19 (single digits give only 45 pairs)
constexpr int kMaxProbeNullLines = 1024;
constexpr int kMaxProbeRegisters = 10;  // r0..r9: the register digit is one byte
constexpr int kMaxProbeWrites = 64;

inline std::string null_lines(int n) {
  std::string s;
  for (int i = 0; i < n; ++i) s += "scratch += 0\n";
  return s;
}
inline std::string bit_label(int b) { return b ? "one" : "zero"; }

inline std::string completion_prompt(int required, int completed, int c, int N) {
  return "required = " + std::to_string(required) + "\ncompleted = " + std::to_string(completed) + "\nscratch = " + std::to_string(c) +
         "\n" + null_lines(N) + "Status:";
}
inline std::string memory_prompt(int s, int c0, const std::vector<int>& bits, int N) {
  std::string p = "state = " + std::to_string(s) + "\nscratch = " + std::to_string(c0) + "\n";
  for (int b : bits) p += "scratch ^= " + std::to_string(b) + "\n";
  return p + null_lines(N) + "# final state:";
}
/// schedule: (register, value) writes in order.
inline std::string latest_write_prompt(const std::vector<std::pair<int, int>>& schedule, int c, int nulls, int q) {
  std::string p;
  for (const auto& w : schedule) p += "r" + std::to_string(w.first) + " = " + std::to_string(w.second) + "\n";
  p += "scratch = " + std::to_string(c) + "\n" + null_lines(nulls);
  return p + "query = r" + std::to_string(q) + "\nValue:";
}
/// A random write schedule: each of m registers W times, in a uniformly random order (Fisher-Yates), fair bits.
inline std::vector<std::pair<int, int>> draw_schedule(int m, int W, Rng& rng) {
  std::vector<std::pair<int, int>> s;
  for (int r = 0; r < m; ++r)
    for (int k = 0; k < W; ++k) s.push_back({r, 0});
  for (std::size_t i = s.size(); i > 1; --i) std::swap(s[i - 1], s[rng.below(i)]);
  for (auto& w : s) w.second = int(rng.below(2));
  return s;
}

inline void check_probe_options(const std::string& name, const ProbeTaskOptions& o) {
  if (!is_probe_task(name) && !is_state_task(name))
    throw Error("fbt: unknown probe task '" + excerpt(name) + "' (known: completion, delayed_memory, latest_write, running_sum, permutation, brackets)");
  if (is_state_task(name)) {
    StateTaskConfig{name, o.difficulty, o.reveal, 1}.validate();
    if (o.prefix_symbols.empty()) throw Error("fbt: ProbeTaskOptions.prefix_symbols is empty");
    for (int t : o.prefix_symbols)
      if (t < 1 || t > kMaxStateTaskLength)
        throw Error("fbt: ProbeTaskOptions.prefix_symbols: " + std::to_string(t) + " is outside [1, " + std::to_string(kMaxStateTaskLength) + "]");
    if (o.groups < 0 || o.groups > 100000) throw Error("fbt: ProbeTaskOptions.groups must be in [0, 100000] (0 = 128 documents), got " + std::to_string(o.groups));
    return;
  }
  if (o.null_lines.empty()) throw Error("fbt: ProbeTaskOptions.null_lines is empty");
  for (int n : o.null_lines)
    if (n < 0 || n > kMaxProbeNullLines)
      throw Error("fbt: ProbeTaskOptions.null_lines: " + std::to_string(n) + " is outside [0, " + std::to_string(kMaxProbeNullLines) + "]");
  if (o.groups < 0 || o.groups > 100000) throw Error("fbt: ProbeTaskOptions.groups must be in [0, 100000] (0 = the paper's), got " + std::to_string(o.groups));
  if (name == "completion" && o.groups > kCompletionValues * (kCompletionValues - 1) / 2)
    throw Error("fbt: ProbeTaskOptions.groups: completion has at most 190 pairs from 0..19, got " + std::to_string(o.groups));
  if (name == "delayed_memory" && o.groups > 2 << kMemoryBits)
    throw Error("fbt: ProbeTaskOptions.groups: delayed_memory has 128 scratch contexts, got " + std::to_string(o.groups));
  if (o.registers < 1 || o.registers > kMaxProbeRegisters)
    throw Error("fbt: ProbeTaskOptions.registers must be in [1, " + std::to_string(kMaxProbeRegisters) + "], got " + std::to_string(o.registers));
  if (o.writes < 1 || o.writes > kMaxProbeWrites)
    throw Error("fbt: ProbeTaskOptions.writes must be in [1, " + std::to_string(kMaxProbeWrites) + "], got " + std::to_string(o.writes));
  if (o.latest_null_lines < 0 || o.latest_null_lines > kMaxProbeNullLines)
    throw Error("fbt: ProbeTaskOptions.latest_null_lines must be in [0, " + std::to_string(kMaxProbeNullLines) + "], got " +
                std::to_string(o.latest_null_lines));
}

}  // namespace detail

/// \brief Probe items of a running-state task (running_sum, permutation, brackets; see the file comment):
/// o.groups documents (0 = 128) of max(o.prefix_symbols) symbols drawn from Rng(o.seed), each probed after
/// every t of o.prefix_symbols symbols with the label s_t; setting "t=<t>".
inline std::vector<ProbeItem> state_probe_items(const std::string& name, const ProbeTaskOptions& o = {}) {
  detail::check_probe_options(name, o);
  FBT_ASSERT(is_state_task(name), "state_probe_items: " + name + " is not a running-state task");
  const int G = o.groups ? o.groups : 128, len = *std::max_element(o.prefix_symbols.begin(), o.prefix_symbols.end());
  const StateProcess proc(StateTaskConfig{name, o.difficulty, o.reveal, len});
  Rng rng(o.seed);
  std::vector<ProbeItem> out;
  for (int g = 0; g < G; ++g) {
    const StateDocument d = generate_state_document(proc, rng);  // tokens kSep, x_1..x_len, '\n'; states s_0..s_len
    for (int t : o.prefix_symbols)
      out.push_back({ByteTokenizer::decode(std::vector<int>(d.tokens.begin() + 1, d.tokens.begin() + 1 + t)), std::to_string(d.states[t]), g, -1,
                     "t=" + std::to_string(t)});
  }
  return out;
}

/// \brief The probe items of a task (deterministic in o.seed), group by group; see the file comment.
inline std::vector<ProbeItem> probe_task_items(const std::string& name, const ProbeTaskOptions& o = {}) {
  if (is_state_task(name)) return state_probe_items(name, o);
  detail::check_probe_options(name, o);
  Rng rng(o.seed);
  std::vector<ProbeItem> out;
  if (name == "completion") {
    const int G = o.groups ? o.groups : 80;
    std::vector<std::pair<int, int>> pairs;  // every unordered pair, then the first G of a shuffle
    for (int a = 0; a < detail::kCompletionValues; ++a)
      for (int b = a + 1; b < detail::kCompletionValues; ++b) pairs.push_back({a, b});
    for (std::size_t i = pairs.size(); i > 1; --i) std::swap(pairs[i - 1], pairs[rng.below(i)]);
    for (int g = 0; g < G; ++g) {
      const int a = pairs[g].first, b = pairs[g].second, c = int(rng.below(10));
      for (int N : o.null_lines)
        for (const auto& rc : std::vector<std::pair<int, int>>{{a, a}, {a, b}, {b, a}, {b, b}})
          out.push_back({detail::completion_prompt(rc.first, rc.second, c, N), rc.first == rc.second ? "done" : "more", g, -1, "N=" + std::to_string(N)});
    }
  } else if (name == "delayed_memory") {
    const int all = 2 << detail::kMemoryBits, G = o.groups ? o.groups : all;
    std::vector<int> ctx(all);  // context id: bit J = c0, bits 0..J-1 = the ^= bits (first line = bit J-1)
    for (int i = 0; i < all; ++i) ctx[i] = i;
    if (G < all)
      for (std::size_t i = ctx.size(); i > 1; --i) std::swap(ctx[i - 1], ctx[rng.below(i)]);
    for (int g = 0; g < G; ++g) {
      const int c0 = (ctx[g] >> detail::kMemoryBits) & 1;
      std::vector<int> bits;
      for (int j = detail::kMemoryBits - 1; j >= 0; --j) bits.push_back((ctx[g] >> j) & 1);
      for (int N : o.null_lines)
        for (int s : {0, 1}) out.push_back({detail::memory_prompt(s, c0, bits, N), detail::bit_label(s), g, -1, "N=" + std::to_string(N)});
    }
  } else {
    const int G = o.groups ? o.groups : 128, m = o.registers, W = o.writes;
    const std::string setting = "m=" + std::to_string(m) + " W=" + std::to_string(W);
    for (int g = 0; g < G; ++g) {
      std::vector<std::pair<int, int>> s = detail::draw_schedule(m, W, rng);
      const int c = int(rng.below(10));
      for (int flip : {0, 1}) {
        std::vector<int> last(m, 0);
        for (auto& w : s) w.second ^= flip, last[w.first] = w.second;
        for (int q = 0; q < m; ++q) out.push_back({detail::latest_write_prompt(s, c, o.latest_null_lines, q), detail::bit_label(last[q]), g, -1, setting});
        for (auto& w : s) w.second ^= flip;  // back to the drawn schedule
      }
    }
  }
  return out;
}

/// \brief One random training item of a probe task: N = d null lines (completion, delayed_memory) or
/// W = d writes per register over 8 registers (latest_write); {prompt, label}.
inline std::pair<std::string, std::string> probe_task_example(const std::string& name, int d, Rng& rng) {
  if (name == "completion") {
    const int a = int(rng.below(detail::kCompletionValues));
    const int b = (a + 1 + int(rng.below(detail::kCompletionValues - 1))) % detail::kCompletionValues;  // b != a
    const int pick = int(rng.below(4)), c = int(rng.below(10));
    const int req = pick < 2 ? a : b, comp = pick % 2 == 0 ? a : b;
    return {detail::completion_prompt(req, comp, c, d), req == comp ? "done" : "more"};
  }
  if (name == "delayed_memory") {
    const int s = int(rng.below(2)), c0 = int(rng.below(2));
    std::vector<int> bits;
    for (int j = 0; j < detail::kMemoryBits; ++j) bits.push_back(int(rng.below(2)));
    return {detail::memory_prompt(s, c0, bits, d), detail::bit_label(s)};
  }
  FBT_ASSERT(name == "latest_write", "probe_task_example: unknown task " + name);
  const int m = 8;
  const std::vector<std::pair<int, int>> s = detail::draw_schedule(m, d, rng);
  const int c = int(rng.below(10)), q = int(rng.below(m));
  int last = 0;
  for (const auto& w : s)
    if (w.first == q) last = w.second;
  return {detail::latest_write_prompt(s, c, 8, q), detail::bit_label(last)};
}

/// Largest task_difficulty of a probe task (null lines, or writes per register).
inline int max_probe_task_difficulty(const std::string& name) { return name == "latest_write" ? detail::kMaxProbeWrites : detail::kMaxProbeNullLines; }

/// \brief A probe task as training data: documents kSep + prompt + label + "\n", packed like
/// TaskDataset (every row and validation window starts at a document; the validation set is 512 items
/// from a fixed seed).
class ProbeTaskDataset : public DataSource {
 public:
  /// Documents at d = difficulty; with a training range [min_d, max_d] (-1 = difficulty), each document
  /// (validation included) draws its d uniformly from it: a mix over writes or null lines.
  ProbeTaskDataset(std::string name, int difficulty, int min_d = -1, int max_d = -1)
      : name_(std::move(name)), d_(difficulty), lo_(min_d < 0 ? difficulty : min_d), hi_(max_d < 0 ? difficulty : max_d) {
    if (!is_probe_task(name_)) throw Error("fbt: ProbeTaskDataset: unknown probe task '" + detail::excerpt(name_) + "'");
    const int lo = name_ == "latest_write" ? 1 : 0, hi = max_probe_task_difficulty(name_);
    for (const auto& [field, v] : {std::pair<const char*, int>{"task_difficulty", d_}, {"task_min_difficulty", lo_}, {"task_max_difficulty", hi_}})
      if (v < lo || v > hi)
        throw Error(std::string("fbt: ") + field + " must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "] for task " + name_ + " (" +
                    (name_ == "latest_write" ? "writes per register" : "null lines") + "), got " + std::to_string(v));
    if (lo_ > hi_)
      throw Error("fbt: task_min_difficulty (" + std::to_string(lo_) + ") is above task_max_difficulty (" + std::to_string(hi_) + ") for task " + name_);
    Rng rng(0x5eedFB7'0000'7A5Cull);
    ex_off_.push_back(0);
    for (int i = 0; i < 512; ++i) {
      const std::vector<int> t = document(rng);
      val_.insert(val_.end(), t.begin(), t.end());
      ex_off_.push_back(val_.size());
    }
  }
  std::vector<int> document(Rng& rng) const {
    const int d = lo_ == d_ && hi_ == d_ ? d_ : lo_ + int(rng.below(std::uint32_t(hi_ - lo_ + 1)));  // no extra draw without a range
    const auto ex = probe_task_example(name_, d, rng);
    return ByteTokenizer::encode_document(ex.first + ex.second + "\n");
  }
  void sample_batch(Rng& rng, int B, int T, std::vector<int>& tokens, std::vector<int>& targets, std::vector<std::uint8_t>& doc_start) const override {
    FBT_ASSERT(B >= 1 && T >= 1, "sample_batch: B and T must be >= 1");
    tokens.resize(std::size_t(B) * T), targets.resize(std::size_t(B) * T), doc_start.resize(std::size_t(B) * T);
    std::vector<int> row;
    for (int b = 0; b < B; ++b) {
      row.clear();
      while (row.size() < std::size_t(T) + 1) {
        const std::vector<int> t = document(rng);
        row.insert(row.end(), t.begin(), t.end());
      }
      const std::size_t o = std::size_t(b) * T;
      detail::fill_window(row.data(), T, tokens.data() + o, targets.data() + o, doc_start.data() + o);
    }
  }
  int num_eval_windows(int T) const override { return static_cast<int>(detail::packed_window_starts(ex_off_, T).size()); }
  void eval_window(int i, int T, std::vector<int>& tokens, std::vector<int>& targets, std::vector<std::uint8_t>& doc_start) const override {
    const std::vector<std::size_t> starts = detail::packed_window_starts(ex_off_, T);
    FBT_ASSERT(i >= 0 && i < int(starts.size()), "eval_window: index " + std::to_string(i) + " out of range for T=" + std::to_string(T));
    tokens.resize(T), targets.resize(T), doc_start.resize(T);
    detail::fill_window(val_.data() + starts[i], T, tokens.data(), targets.data(), doc_start.data());
  }
  std::string describe() const override {
    std::ostringstream os;
    os << "probe task " << name_ << " (" << (name_ == "latest_write" ? "writes per register " : "null lines ") << d_;
    if (lo_ != d_ || hi_ != d_) os << ", trained on " << lo_ << ".." << hi_ << " uniformly";
    os << "), validation 512 items = "
       << val_.size() << " tokens";
    return os.str();
  }

 private:
  std::string name_;
  int d_, lo_, hi_;  // the difficulty, and the range documents draw theirs from
  std::vector<int> val_;
  std::vector<std::size_t> ex_off_;
};

}  // namespace fbt
