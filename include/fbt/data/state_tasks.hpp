// fbt/data/state_tasks.hpp: running-state tasks, documents made by a hidden-state process whose optimal
// loss is known in closed form at every token (data on which carried state must help).
//
// A document is kSep + L symbols + '\n' (L = task_length). A hidden state starts at a fixed s_0 and each
// symbol x_t is drawn from the state before it, s_{t-1}:
//   forced     when the state allows one symbol only (brackets at depth 0 and at the cap);
//   otherwise  with probability q (task_reveal) the state-revealing symbol f(s_{t-1}), else a uniform
//              symbol of the alphabet A (the two draws may give the same symbol);
// then s_t = g(s_{t-1}, x_t). The tasks (d = task_difficulty):
//   running_sum  A = the digits '0'..'m-1' (m = d, 2..10; m = 2 is parity); s = the sum mod m, s_0 = 0;
//                f(s) = the digit s.
//   permutation  A = S_k (k = d, 3 or 4), each permutation a letter: 'a', 'b', ... in the lexicographic
//                order of its one-line notation ('a' = the identity); s = the running product
//                x_1 x_2 ... x_t, where (p q)[i] = q[p[i]] (p acts first), s_0 = the identity; f(s) = s.
//   brackets     A = '(' ')'; s = the depth in [0, D] (D = d, 2..64), s_0 = 0; '(' is forced at depth 0,
//                ')' at depth D; f(s) = '(' below the middle (2s < D), ')' from it on.
// Documents of 24 symbols from Rng(1), q = 0.5:  running_sum m = 5  "022431243121330401122231",
// permutation k = 3  "deaddebcacfeedcbdfbaceba",  brackets D = 3  "()(())(())((()())(())()(".
//
// Optimal loss. The state is a function of s_0 (fixed) and the earlier symbols of the document, so a
// Bayes-optimal predictor knows s_{t-1} exactly and predicts x_t with the mixture
//     q delta_{f(s)} + (1 - q) U(A),
// whose entropy is the conditional entropy of x_t given every earlier token:
//     H(q, n) = -p log p - (n - 1) r log r,   r = (1 - q) / n,  p = q + r,  n = |A|        (nats)
// for a drawn symbol, 0 for a forced one, 0 for the final '\n' (the length is fixed) and 0 for the kSep
// that opens the next document. The gap log n - H(q, n) between a uniform guess and the optimum is what
// knowing the state is worth per drawn symbol; at q = 0.5: parity 0.13 nats, m = 5 0.38, m = 10 0.63,
// S_3 0.44, S_4 0.98, brackets 0.13.
//
// The default q = 0.5 keeps both halves of the process busy: half the drawn symbols are uniform and move
// the state unpredictably, half reveal it, so the state changes all the time and is tested all the time.
// Near q = 1 the state barely moves (a running sum that reveals itself doubles, parity sticks at 0) and a
// short context predicts well; near q = 0 nothing is predictable at all.
//
// StateTaskDataset packs documents like TaskDataset (tasks.hpp): every training row and every validation
// window starts at a document start and takes whole documents until it holds T+1 tokens. So every earlier
// token of a target's document is inside the window, and the closed form is the optimum of what the model
// sees (a window starting mid-document would hide the state).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "../config.hpp"
#include "../core/rng.hpp"
#include "../detail/input.hpp"
#include "dataset.hpp"
#include "tokenizer.hpp"

namespace fbt {

/// Largest task_length (symbols per document): a document (L + 2 tokens) stays about the size of the
/// default max_position_embeddings, and the validation set (512 documents) a few MB.
inline constexpr int kMaxStateTaskLength = 4096;

/// The running-state task names ("task:<name>" in a training config).
inline const std::vector<std::string>& state_task_names() {
  static const std::vector<std::string> names = {"running_sum", "permutation", "brackets"};
  return names;
}
inline bool is_state_task(const std::string& name) {
  const auto& n = state_task_names();
  return std::find(n.begin(), n.end(), name) != n.end();
}

/// \brief One running-state task. validate() throws fbt::Error naming the training-config field
/// (task_difficulty, task_reveal, task_length: difficulty, reveal, length here) and the value.
struct StateTaskConfig {
  std::string name = "running_sum";  ///< "running_sum" | "permutation" | "brackets"
  int difficulty = 5;                ///< the modulus m (2..10) | k of S_k (3, 4) | the depth cap D (2..64)
  double reveal = 0.5;               ///< q: probability that a drawn symbol is the state-revealing one, in [0, 1]
  int length = 32;                   ///< L: symbols per document, in [1, kMaxStateTaskLength]

  void validate() const {
    if (!is_state_task(name))
      throw Error("fbt: StateTaskConfig.name: unknown running-state task '" + detail::excerpt(name) + "' (known: running_sum, permutation, brackets)");
    int lo = 2, hi = 10;
    const char* what = "the modulus m";
    if (name == "permutation") lo = 3, hi = 4, what = "k of the permutation group S_k";
    if (name == "brackets") lo = 2, hi = 64, what = "the depth cap";
    if (difficulty < lo || difficulty > hi)
      throw Error("fbt: task_difficulty: must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "] for task " + name + " (" + what +
                  "), got " + std::to_string(difficulty));
    if (!(reveal >= 0.0 && reveal <= 1.0))
      throw Error("fbt: task_reveal: must be in [0, 1] for task " + name + " (the probability of a state-revealing symbol), got " +
                  detail::fmt_double(reveal));
    if (length < 1 || length > kMaxStateTaskLength)
      throw Error("fbt: task_length: must be in [1, " + std::to_string(kMaxStateTaskLength) + "] for task " + name + " (symbols per document), got " +
                  std::to_string(length));
  }
};

/// \brief H(q, n) = -p log p - (n - 1) r log r with r = (1 - q)/n, p = q + r: the entropy (nats) of the
/// mixture q delta + (1 - q) uniform over n symbols (0 log 0 = 0).
inline double reveal_mixture_entropy(double q, int n) {
  const double r = (1.0 - q) / n, p = q + r;
  double h = p > 0 ? -p * std::log(p) : 0.0;
  if (r > 0) h -= (n - 1) * r * std::log(r);
  return h;
}

/// \brief The hidden-state process of a task as tables: states 0..S-1 (0 = s_0), symbols 0..n-1.
///
/// next(s, a) is g, reveal(s) is f, forced(s) the only symbol possible at s (or -1); prob(s, a) is the
/// Bayes-optimal predictor (the oracle) and entropy(s) its entropy, the optimal loss of a symbol drawn at s.
class StateProcess {
 public:
  explicit StateProcess(const StateTaskConfig& c) : cfg_(c) {
    cfg_.validate();
    const int d = c.difficulty;
    if (c.name == "running_sum") {
      n_ = S_ = d;
      for (int s = 0; s < S_; ++s) {
        reveal_.push_back(s);  // the digit s
        forced_.push_back(-1);
        for (int a = 0; a < n_; ++a) next_.push_back((s + a) % d);
        symbols_.push_back(char('0' + s));
      }
    } else if (c.name == "permutation") {
      // every permutation of 0..k-1 in lexicographic order; index 0 is the identity
      std::vector<std::vector<int>> perms;
      std::vector<int> p(d);
      for (int i = 0; i < d; ++i) p[i] = i;
      do perms.push_back(p);
      while (std::next_permutation(p.begin(), p.end()));
      n_ = S_ = int(perms.size());
      auto index_of = [&](const std::vector<int>& q) { return int(std::lower_bound(perms.begin(), perms.end(), q) - perms.begin()); };
      std::vector<int> r(d);
      for (int s = 0; s < S_; ++s) {
        reveal_.push_back(s);
        forced_.push_back(-1);
        for (int a = 0; a < n_; ++a) {
          for (int i = 0; i < d; ++i) r[i] = perms[a][perms[s][i]];  // (s a)[i] = a[s[i]]: s acts first
          next_.push_back(index_of(r));
        }
        symbols_.push_back(char('a' + s));
      }
    } else {  // brackets: depth 0..D, symbol 0 = '(', 1 = ')'
      n_ = 2, S_ = d + 1;
      for (int s = 0; s < S_; ++s) {
        reveal_.push_back(2 * s < d ? 0 : 1);
        forced_.push_back(s == 0 ? 0 : s == d ? 1 : -1);
        next_.push_back(s < d ? s + 1 : -1);  // -1: impossible (never drawn)
        next_.push_back(s > 0 ? s - 1 : -1);
      }
      symbols_ = {'(', ')'};
    }
    entropy_drawn_ = reveal_mixture_entropy(c.reveal, n_);
  }

  const StateTaskConfig& config() const { return cfg_; }
  int alphabet_size() const { return n_; }  ///< n = |A|
  int num_states() const { return S_; }
  char symbol(int a) const { return symbols_[std::size_t(a)]; }  ///< the byte of symbol a
  /// The symbol of byte c, or -1 when c is not in the alphabet.
  int symbol_index(int c) const {
    for (int a = 0; a < n_; ++a)
      if (static_cast<unsigned char>(symbols_[std::size_t(a)]) == c) return a;
    return -1;
  }
  int next(int s, int a) const { return next_[std::size_t(s) * n_ + a]; }  ///< g(s, a); -1 when a cannot follow s
  int reveal(int s) const { return reveal_[std::size_t(s)]; }             ///< f(s)
  int forced(int s) const { return forced_[std::size_t(s)]; }             ///< the only possible symbol at s, or -1
  /// The Bayes-optimal predictive probability of symbol a at state s.
  double prob(int s, int a) const {
    if (forced(s) >= 0) return a == forced(s) ? 1.0 : 0.0;
    return (a == reveal(s) ? cfg_.reveal : 0.0) + (1.0 - cfg_.reveal) / n_;
  }
  /// The optimal loss (nats) of the symbol drawn at state s: 0 when forced, else H(q, n).
  double entropy(int s) const { return forced(s) >= 0 ? 0.0 : entropy_drawn_; }

 private:
  StateTaskConfig cfg_;
  int n_ = 0, S_ = 0;
  std::vector<int> next_;     // (S, n) g
  std::vector<int> reveal_;   // (S) f
  std::vector<int> forced_;   // (S) forced symbol or -1
  std::vector<char> symbols_; // (n) bytes
  double entropy_drawn_ = 0;  // H(q, n)
};

/// \brief One document and what the process knows about it.
struct StateDocument {
  std::vector<int> tokens;     ///< (L+2) kSep, the L symbols' bytes, '\n'
  std::vector<double> optimal; ///< (L+2) optimal loss of each token given every earlier one (0 for kSep and '\n')
  std::vector<int> states;     ///< (L+1) s_0, then the state after each symbol
  std::string text() const { return ByteTokenizer::decode(tokens); }
};

/// \brief Draws one document from `rng`: per symbol, nothing when forced, else one uniform in [0, 1)
/// (reveal when < q) and, when not revealing, one rng.below(n).
inline StateDocument generate_state_document(const StateProcess& p, Rng& rng) {
  const StateTaskConfig& c = p.config();
  StateDocument d;
  d.tokens.reserve(std::size_t(c.length) + 2), d.optimal.reserve(std::size_t(c.length) + 2), d.states.reserve(std::size_t(c.length) + 1);
  d.tokens.push_back(kSep), d.optimal.push_back(0.0);  // the next document's kSep is certain after '\n'
  int s = 0;
  d.states.push_back(s);
  for (int t = 0; t < c.length; ++t) {
    int a = p.forced(s);
    if (a < 0) a = rng.uniform() < c.reveal ? p.reveal(s) : int(rng.below(std::uint32_t(p.alphabet_size())));
    d.tokens.push_back(static_cast<unsigned char>(p.symbol(a)));
    d.optimal.push_back(p.entropy(s));
    s = p.next(s, a);
    d.states.push_back(s);
  }
  d.tokens.push_back('\n'), d.optimal.push_back(0.0);  // the length is fixed: '\n' is certain
  return d;
}

/// \brief The optimal loss of each token of the document whose symbols are `symbols` (its text without the
/// kSep and the '\n'), aligned with its L+2 tokens: the state is tracked from s_0 through the symbols.
/// Throws fbt::Error on a byte outside the alphabet or a symbol its state does not allow.
inline std::vector<double> state_document_optimal(const StateProcess& p, const std::string& symbols) {
  std::vector<double> opt{0.0};  // kSep
  int s = 0;
  for (std::size_t t = 0; t < symbols.size(); ++t) {
    const int a = p.symbol_index(static_cast<unsigned char>(symbols[t]));
    if (a < 0 || p.next(s, a) < 0)
      throw Error("fbt: task " + p.config().name + ": symbol " + std::to_string(t) + " ('" + std::string(1, symbols[t]) + "') " +
                  (a < 0 ? "is not in the alphabet" : "cannot follow the state before it"));
    opt.push_back(p.entropy(s));
    s = p.next(s, a);
  }
  opt.push_back(0.0);  // '\n'
  return opt;
}

/// \brief Options of StateTaskDataset.
struct StateTaskDatasetOptions {
  int val_documents = 512;                          ///< size of the fixed validation set (>= 0)
  std::uint64_t val_seed = 0x5eedFB7'0000'57A7ull;  ///< its seed (fixed; unrelated to training seeds)
};

/// \brief Documents of a running-state task, generated on the fly, with their optimal loss.
///
/// Training row b: documents drawn from the caller's Rng are appended until the row holds T+1 tokens; the
/// window is the first T+1. Validation: val_documents documents from Rng(val_seed), packed into windows the
/// same way (detail::packed_window_starts). eval_window_optimal gives each validation target's optimal loss.
class StateTaskDataset : public DataSource {
 public:
  explicit StateTaskDataset(const StateTaskConfig& cfg, StateTaskDatasetOptions opts = {}) : proc_(cfg), opts_(opts) {
    if (opts_.val_documents < 0)
      throw Error("fbt: StateTaskDatasetOptions.val_documents must be >= 0 (got " + std::to_string(opts_.val_documents) + ")");
    Rng rng(opts_.val_seed);
    doc_off_.push_back(0);
    for (int i = 0; i < opts_.val_documents; ++i) {
      const StateDocument d = generate_state_document(proc_, rng);
      val_.insert(val_.end(), d.tokens.begin(), d.tokens.end());
      val_opt_.insert(val_opt_.end(), d.optimal.begin(), d.optimal.end());
      doc_off_.push_back(val_.size());
    }
  }

  void sample_batch(Rng& rng, int B, int T, std::vector<int>& tokens, std::vector<int>& targets,
                    std::vector<std::uint8_t>& doc_start) const override {
    FBT_ASSERT(B >= 1 && T >= 1, "sample_batch: B and T must be >= 1 (got B=" + std::to_string(B) + ", T=" + std::to_string(T) + ")");
    tokens.resize(std::size_t(B) * T), targets.resize(std::size_t(B) * T), doc_start.resize(std::size_t(B) * T);
    std::vector<int> row;
    row.reserve(std::size_t(T) + 1 + std::size_t(proc_.config().length) + 2);
    for (int b = 0; b < B; ++b) {
      row.clear();
      while (row.size() < std::size_t(T) + 1) {
        const StateDocument d = generate_state_document(proc_, rng);
        row.insert(row.end(), d.tokens.begin(), d.tokens.end());
      }
      const std::size_t o = std::size_t(b) * T;
      detail::fill_window(row.data(), T, tokens.data() + o, targets.data() + o, doc_start.data() + o);
    }
  }

  int num_eval_windows(int T) const override { return static_cast<int>(detail::packed_window_starts(doc_off_, T).size()); }

  void eval_window(int i, int T, std::vector<int>& tokens, std::vector<int>& targets, std::vector<std::uint8_t>& doc_start) const override {
    const std::size_t s = window_start(i, T);
    tokens.resize(T), targets.resize(T), doc_start.resize(T);
    detail::fill_window(val_.data() + s, T, tokens.data(), targets.data(), doc_start.data());
  }

  /// Target t of window i is validation token start + t + 1: its optimal loss is that token's.
  bool eval_window_optimal(int i, int T, std::vector<double>& optimal) const override {
    const std::size_t s = window_start(i, T);
    optimal.assign(val_opt_.begin() + std::ptrdiff_t(s) + 1, val_opt_.begin() + std::ptrdiff_t(s) + 1 + T);
    return true;
  }

  std::string describe() const override {
    const StateTaskConfig& c = proc_.config();
    std::ostringstream os;
    os << "task " << c.name << " (difficulty " << c.difficulty << ", reveal " << c.reveal << ", " << c.length
       << " symbols per document; optimal loss per drawn symbol " << reveal_mixture_entropy(c.reveal, proc_.alphabet_size())
       << " nats, uniform " << std::log(double(proc_.alphabet_size())) << "), validation " << opts_.val_documents << " documents (seed "
       << opts_.val_seed << ") = " << val_.size() << " tokens";
    return os.str();
  }

  const StateProcess& process() const { return proc_; }
  const StateTaskConfig& config() const { return proc_.config(); }
  const std::vector<int>& val_stream() const { return val_; }
  const std::vector<double>& val_optimal() const { return val_opt_; }  ///< (N_val) optimal loss of each validation token
  /// Offsets in val_stream() of the validation windows of T+1 tokens.
  std::vector<std::size_t> eval_window_starts(int T) const { return detail::packed_window_starts(doc_off_, T); }

 private:
  std::size_t window_start(int i, int T) const {
    const std::vector<std::size_t> starts = detail::packed_window_starts(doc_off_, T);
    FBT_ASSERT(i >= 0 && i < int(starts.size()),
               "eval_window: index " + std::to_string(i) + " out of range [0, " + std::to_string(starts.size()) + ") for T=" + std::to_string(T));
    return starts[std::size_t(i)];
  }

  StateProcess proc_;
  StateTaskDatasetOptions opts_;
  std::vector<int> val_;              // (N_val) the validation documents as one token stream
  std::vector<double> val_opt_;       // (N_val) the optimal loss of each of its tokens
  std::vector<std::size_t> doc_off_;  // (val_documents + 1) where each document starts in val_ (and the end)
};

}  // namespace fbt
