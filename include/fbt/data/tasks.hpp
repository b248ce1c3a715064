// fbt/data/tasks.hpp: synthetic reasoning tasks with mixed-verbosity solutions (spec section 7), the
// library's built-in default data.
//
// Each example is one document: kSep + prompt + solution. The prompt ends with "?\n". The solution is
//     <trace> "\n" "#### " <answer> "\n"        (full and compressed levels)
//     "#### " <answer> "\n"                     (answer level)
// so the answer is the text between the first "#### " and the next '\n' (the end marker). Tasks, with
// difficulty d (at 1x; evaluation at m x the training length uses d * m):
//   addition        two d-digit numbers (leading digit 1..9).       prompt "472+359=?\n"
//     full        columns from the right, "a+b[+1]=s cK" joined by "; " ("+1" = incoming carry, K = carry out)
//                   "2+9=11 c1; 7+5+1=13 c1; 4+3+1=8 c0\n#### 831\n"
//     compressed  column sums only:  "11 13 8\n#### 831\n"
//     answer      "#### 831\n"
//   state_tracking  registers A-D holding digits 0..9, d operations, then a question about one register.
//                   ops: "X=v" (set), "X=Y" (copy), "X+=Y" (add mod 10), "swap X Y"   (X != Y)
//                   prompt "A=1 B=4 C=0 D=7; C+=B; swap A C; B=A; D=5; B?\n"
//     full        every op with the state after it (the digits of A B C D):
//                   "C+=B -> 1447; swap A C -> 4417; B=A -> 4417; D=5 -> 4415\n#### 4\n"
//     compressed  the state after every 2nd op and after the last:  "4417 4415\n#### 4\n"
//     answer      "#### 4\n"
//   multihop        three chains of d copy links (names: a letter and a digit, all distinct; the three
//                   roots hold distinct digits), all 3(d+1) assignments shuffled; the question names the
//                   end of chain 0 (the other two are distractors).  d = 3:
//                   prompt "e3=c1; a3=y1; k9=n6; p5=i7; n6=7; i1=5; y1=e3; i7=i1; c1=2; r2=p5; u5=p8; p8=k9; a3?\n"
//     full        the hops from the question back to the value:  "a3=y1; y1=e3; e3=c1; c1=2\n#### 2\n"
//     compressed  the names only:  "a3 y1 e3 c1\n#### 2\n"
//     answer      "#### 2\n"
// A training stream draws the level of each example with probabilities p_full, p_compressed, p_answer
// (default 1/3 each). Training loss is taken at every position, prompt included (the task text is
// ordinary language-model data; accuracy is measured separately with eval_examples + check_answer).
//
// Trace tag (TaskConfig::trace_tag, default false = the prompts above, byte for byte): the prompt states
// the level its solution uses, as a word between the "?" and the newline:
//     "472+359=? full\n"   "472+359=? compressed\n"   "472+359=? answer\n"
// so a model can be asked for a level, and evaluation (eval_examples_at_levels, train/task_eval.hpp)
// reports accuracy and trace length per requested level on the same problems.
//
// The running-state tasks (running_sum, permutation, brackets) are another family with their own data
// source: state_tasks.hpp; the probing tasks (completion, delayed_memory, latest_write) a third: probe_tasks.hpp.
// builtin_task_names() lists all three families.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "../config.hpp"
#include "../core/rng.hpp"
#include "../detail/input.hpp"
#include "dataset.hpp"
#include "probe_tasks.hpp"
#include "state_tasks.hpp"
#include "tokenizer.hpp"

namespace fbt {

inline constexpr const char* kAnswerMarker = "#### ";  ///< the answer follows this marker
inline constexpr char kEndMarker = '\n';               ///< and ends at the next newline

/// \brief One task and its verbosity mix. validate() throws fbt::Error naming the bad field.
struct TaskConfig {
  std::string name = "addition";  ///< "addition" | "state_tracking" | "multihop"
  int difficulty = 4;             ///< digits | operations | hops (>= 1)
  double p_full = 1.0 / 3;        ///< probability of a full step-by-step trace
  double p_compressed = 1.0 / 3;  ///< probability of a compressed trace
  double p_answer = 1.0 / 3;      ///< probability of the answer alone
  bool trace_tag = false;         ///< the prompt names the level of its solution ("...? full\n")
  /// Training on mixed lengths: TaskDataset draws each training and validation example's difficulty
  /// uniformly from [train_min_difficulty, train_max_difficulty] (0 = difficulty). Evaluation at m x the
  /// training length (eval_examples) always uses difficulty x m, so one nominal difficulty names the 1x.
  int train_min_difficulty = 0;
  int train_max_difficulty = 0;

  void validate() const;
  /// The training range [lo, hi] with 0s resolved to difficulty.
  int train_lo() const { return train_min_difficulty ? train_min_difficulty : difficulty; }
  int train_hi() const { return train_max_difficulty ? train_max_difficulty : difficulty; }
};

/// \brief One generated example. The document is kSep + prompt + solution (see text(), tokens()).
struct Example {
  std::string prompt;    ///< the question, ending with "?\n"
  std::string solution;  ///< [trace "\n"] "#### " answer "\n"
  std::string answer;    ///< the answer alone, e.g. "831"
  std::string level;     ///< "full" | "compressed" | "answer"

  std::string text() const { return prompt + solution; }
  std::vector<int> tokens() const { return ByteTokenizer::encode_document(prompt + solution); }
};

/// The task names generate() knows.
inline const std::vector<std::string>& task_names() {
  static const std::vector<std::string> names = {"addition", "state_tracking", "multihop"};
  return names;
}
/// Every built-in task name ("task:<name>"): the reasoning tasks above, then the running-state tasks
/// (state_tasks.hpp, data source StateTaskDataset).
inline std::vector<std::string> builtin_task_names() {
  std::vector<std::string> n = task_names();
  n.insert(n.end(), state_task_names().begin(), state_task_names().end());
  n.insert(n.end(), probe_task_names().begin(), probe_task_names().end());
  return n;
}
/// The verbosity levels, in the order of TaskConfig's probabilities.
inline const std::vector<std::string>& verbosity_levels() {
  static const std::vector<std::string> levels = {"full", "compressed", "answer"};
  return levels;
}

/// \brief The largest difficulty (at 1x) of a built-in task: addition 1000 digits, state_tracking 500
/// operations, multihop 85 hops (its 260 distinct names make 3 chains of at most 86). The first two keep
/// a whole example (prompt and full trace) within 16 KiB, four times the default max_position_embeddings:
/// beyond it a model never sees a whole solution, and the fixed validation set (512 examples) alone would
/// take hundreds of MB. 0 for an unknown name. Evaluation at m x the length allows difficulty x m up to
/// 64 x this bound.
inline int max_task_difficulty(const std::string& name) {
  if (name == "addition") return 1000;
  if (name == "state_tracking") return 500;
  if (name == "multihop") return 85;
  return 0;
}
/// What a task's difficulty counts ("digits", "operations", "hops").
inline const char* task_difficulty_unit(const std::string& name) {
  return name == "addition" ? "digits" : name == "state_tracking" ? "operations" : "hops";
}

namespace detail {

/// One problem at every verbosity: the traces exclude the "\n#### answer\n" tail.
struct TaskProblem {
  std::string prompt, full, compressed, answer;
};

constexpr int kMultihopChains = 3;     // chain 0 is asked about, the others are distractors
constexpr int kMultihopNames = 26 * 10;  // "a0".."z9"
constexpr int kMultihopMaxHops = kMultihopNames / kMultihopChains - 1;  // 85
constexpr int kMaxLengthMult = 64;  // the largest length multiplier the difficulty bounds allow for

inline std::string join(const std::vector<std::string>& parts, const char* sep) {
  std::string out;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    if (i) out += sep;
    out += parts[i];
  }
  return out;
}

inline TaskProblem make_addition(int d, Rng& rng) {
  std::string a(d, '0'), b(d, '0');
  for (std::string* x : {&a, &b})
    for (int i = 0; i < d; ++i) (*x)[i] = char('0' + (i == 0 ? 1 + rng.below(9) : rng.below(10)));
  TaskProblem p;
  p.prompt = a + "+" + b + "=?\n";
  std::vector<std::string> steps, sums;
  std::string rev;  // answer digits, least significant first
  int carry = 0;
  for (int i = d - 1; i >= 0; --i) {
    const int x = a[i] - '0', y = b[i] - '0', s = x + y + carry;
    steps.push_back(std::to_string(x) + "+" + std::to_string(y) + (carry ? "+1" : "") + "=" +
                    std::to_string(s) + " c" + std::to_string(s / 10));
    sums.push_back(std::to_string(s));
    rev.push_back(char('0' + s % 10));
    carry = s / 10;
  }
  if (carry) rev.push_back('1');
  p.answer.assign(rev.rbegin(), rev.rend());
  p.full = join(steps, "; ");
  p.compressed = join(sums, " ");
  return p;
}

inline TaskProblem make_state_tracking(int steps, Rng& rng) {
  int reg[4];
  for (int& r : reg) r = static_cast<int>(rng.below(10));
  auto name = [](int r) { return std::string(1, char('A' + r)); };
  auto state = [&reg] {
    std::string s(4, '0');
    for (int r = 0; r < 4; ++r) s[r] = char('0' + reg[r]);
    return s;
  };
  TaskProblem p;
  p.prompt = "A=" + std::to_string(reg[0]) + " B=" + std::to_string(reg[1]) + " C=" + std::to_string(reg[2]) +
             " D=" + std::to_string(reg[3]);
  std::vector<std::string> full, comp;
  for (int i = 1; i <= steps; ++i) {
    const int kind = static_cast<int>(rng.below(4));
    const int x = static_cast<int>(rng.below(4));
    std::string op;
    if (kind == 0) {  // set
      const int v = static_cast<int>(rng.below(10));
      reg[x] = v;
      op = name(x) + "=" + std::to_string(v);
    } else {
      const int y = (x + 1 + static_cast<int>(rng.below(3))) % 4;  // any register but x
      if (kind == 1) {
        reg[x] = reg[y];
        op = name(x) + "=" + name(y);
      } else if (kind == 2) {
        reg[x] = (reg[x] + reg[y]) % 10;
        op = name(x) + "+=" + name(y);
      } else {
        std::swap(reg[x], reg[y]);
        op = "swap " + name(x) + " " + name(y);
      }
    }
    p.prompt += "; " + op;
    full.push_back(op + " -> " + state());
    if (i % 2 == 0 || i == steps) comp.push_back(state());
  }
  const int q = static_cast<int>(rng.below(4));
  p.prompt += "; " + name(q) + "?\n";
  p.answer = std::to_string(reg[q]);
  p.full = join(full, "; ");
  p.compressed = join(comp, " ");
  return p;
}

inline TaskProblem make_multihop(int hops, Rng& rng) {
  const int per = hops + 1, need = kMultihopChains * per;
  // Distinct names: a partial Fisher-Yates shuffle of "a0".."z9".
  std::vector<std::string> pool(kMultihopNames);
  for (int i = 0; i < kMultihopNames; ++i) pool[i] = std::string{char('a' + i / 10), char('0' + i % 10)};
  for (int i = 0; i < need; ++i) std::swap(pool[i], pool[i + rng.below(std::uint32_t(kMultihopNames - i))]);
  // Distinct root values, one per chain.
  int vals[10] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
  for (int i = 0; i < kMultihopChains; ++i) std::swap(vals[i], vals[i + rng.below(std::uint32_t(10 - i))]);
  // Chain c: names pool[c*per + k], k = 0..hops; k = 0 holds the value, k copies k - 1.
  auto nm = [&](int c, int k) -> const std::string& { return pool[std::size_t(c) * per + k]; };
  std::vector<std::string> assigns;
  for (int c = 0; c < kMultihopChains; ++c) {
    assigns.push_back(nm(c, 0) + "=" + std::to_string(vals[c]));
    for (int k = 1; k <= hops; ++k) assigns.push_back(nm(c, k) + "=" + nm(c, k - 1));
  }
  for (int i = static_cast<int>(assigns.size()) - 1; i > 0; --i)
    std::swap(assigns[i], assigns[rng.below(std::uint32_t(i + 1))]);
  TaskProblem p;
  p.prompt = join(assigns, "; ") + "; " + nm(0, hops) + "?\n";
  std::vector<std::string> full, comp;
  for (int k = hops; k >= 1; --k) full.push_back(nm(0, k) + "=" + nm(0, k - 1));
  full.push_back(nm(0, 0) + "=" + std::to_string(vals[0]));
  for (int k = hops; k >= 0; --k) comp.push_back(nm(0, k));
  p.answer = std::to_string(vals[0]);
  p.full = join(full, "; ");
  p.compressed = join(comp, " ");
  return p;
}

inline void check_length_mult(int length_mult) {
  if (length_mult < 1) throw Error("fbt: length_mult must be >= 1 (got " + std::to_string(length_mult) + ")");
}

/// difficulty * length_mult, validated against the task's limit.
inline int effective_difficulty(const TaskConfig& cfg, int length_mult) {
  cfg.validate();
  check_length_mult(length_mult);
  const long d = long(cfg.difficulty) * length_mult;
  if (cfg.name == "multihop" && d > kMultihopMaxHops)
    throw Error("fbt: TaskConfig.difficulty: multihop supports at most " + std::to_string(kMultihopMaxHops) +
                " hops (distinct names); got " + std::to_string(cfg.difficulty) + " x length_mult " +
                std::to_string(length_mult));
  const long dmax = long(max_task_difficulty(cfg.name)) * kMaxLengthMult;
  if (d > dmax)
    throw Error("fbt: TaskConfig.difficulty x length_mult = " + std::to_string(cfg.difficulty) + " x " + std::to_string(length_mult) + " = " +
                std::to_string(d) + " is over " + std::to_string(dmax) + " (" + std::to_string(kMaxLengthMult) + " x the largest " + cfg.name +
                " difficulty)");
  return static_cast<int>(d);
}

inline TaskProblem make_problem(const TaskConfig& cfg, Rng& rng, int length_mult) {
  const int d = effective_difficulty(cfg, length_mult);
  if (cfg.name == "addition") return make_addition(d, rng);
  if (cfg.name == "state_tracking") return make_state_tracking(d, rng);
  return make_multihop(d, rng);
}

/// The prompt with its level stated (trace_tag): "...?\n" becomes "...? <level>\n".
inline std::string tag_prompt(const std::string& prompt, const std::string& level) {
  FBT_ASSERT(!prompt.empty() && prompt.back() == '\n', "tag_prompt: a prompt ends with a newline");
  return prompt.substr(0, prompt.size() - 1) + " " + level + "\n";
}

inline Example render(TaskProblem&& p, const std::string& level, bool trace_tag) {
  Example ex;
  std::string tail = std::string(kAnswerMarker) + p.answer + kEndMarker;
  if (level == "full") ex.solution = p.full + "\n" + tail;
  else if (level == "compressed") ex.solution = p.compressed + "\n" + tail;
  else if (level == "answer") ex.solution = tail;
  else throw Error("fbt: unknown verbosity level '" + level + "' (known: full, compressed, answer)");
  ex.prompt = trace_tag ? tag_prompt(p.prompt, level) : std::move(p.prompt);
  ex.answer = std::move(p.answer);
  ex.level = level;
  return ex;
}

/// Draws a level from the mix (one uniform draw); never returns a level of probability 0.
inline const std::string& draw_level(const TaskConfig& cfg, Rng& rng) {
  const auto& lv = verbosity_levels();
  const double p[3] = {cfg.p_full, cfg.p_compressed, cfg.p_answer};
  const double u = rng.uniform() * (p[0] + p[1] + p[2]);
  double acc = 0;
  int last = 0;
  for (int i = 0; i < 3; ++i) {
    if (p[i] <= 0) continue;
    acc += p[i];
    last = i;
    if (u < acc) return lv[i];
  }
  return lv[last];  // u == sum by rounding
}

inline std::string fmt_prob(double x) {
  std::ostringstream os;
  os.precision(3);
  os << x;
  return os.str();
}

}  // namespace detail

inline void TaskConfig::validate() const {
  bool known = false;
  for (const auto& n : task_names()) known = known || n == name;
  if (!known)
    throw Error("fbt: TaskConfig.name: unknown task '" + detail::excerpt(name) + "' (known: " + detail::join(task_names(), ", ") + ")");
  if (difficulty < 1 || difficulty > max_task_difficulty(name))
    throw Error("fbt: TaskConfig.difficulty must be in [1, " + std::to_string(max_task_difficulty(name)) + "] for task " + name + " (" +
                task_difficulty_unit(name) + "), got " + std::to_string(difficulty));
  const char* names[3] = {"p_full", "p_compressed", "p_answer"};
  const double p[3] = {p_full, p_compressed, p_answer};
  for (int i = 0; i < 3; ++i)
    if (!(p[i] >= 0) || !std::isfinite(p[i]))
      throw Error(std::string("fbt: TaskConfig.") + names[i] + " must be finite and >= 0 (got " +
                  detail::fmt_double(p[i]) + ")");
  if (p[0] + p[1] + p[2] <= 0) throw Error("fbt: TaskConfig.p_full + p_compressed + p_answer must be > 0 (all are 0)");
  for (const auto& [field, v] : {std::pair<const char*, int>{"train_min_difficulty", train_min_difficulty}, {"train_max_difficulty", train_max_difficulty}})
    if (v != 0 && (v < 1 || v > max_task_difficulty(name)))
      throw Error(std::string("fbt: TaskConfig.") + field + " must be 0 (= difficulty) or in [1, " + std::to_string(max_task_difficulty(name)) +
                  "] for task " + name + ", got " + std::to_string(v));
  if (train_lo() > train_hi())
    throw Error("fbt: TaskConfig.train_min_difficulty (" + std::to_string(train_lo()) + ") is above train_max_difficulty (" +
                std::to_string(train_hi()) + ") (0 = difficulty " + std::to_string(difficulty) + ")");
}

/// \brief A fresh example: draws the problem (at difficulty * length_mult), then its level from the mix.
inline Example generate(const TaskConfig& cfg, Rng& rng, int length_mult = 1) {
  detail::TaskProblem p = detail::make_problem(cfg, rng, length_mult);
  return detail::render(std::move(p), detail::draw_level(cfg, rng), cfg.trace_tag);
}

/// \brief A training example: as generate, at a difficulty drawn uniformly from the training range
/// [train_lo(), train_hi()] (one extra draw, before the problem's, only when the range is not the single
/// difficulty: a config without a range draws the same examples as generate).
inline Example generate_training(const TaskConfig& cfg, Rng& rng) {
  const int lo = cfg.train_lo(), hi = cfg.train_hi();
  if (lo == cfg.difficulty && hi == cfg.difficulty) return generate(cfg, rng);
  TaskConfig at = cfg;
  at.difficulty = lo + static_cast<int>(rng.below(std::uint32_t(hi - lo + 1)));
  at.train_min_difficulty = at.train_max_difficulty = 0;
  return generate(at, rng);
}

/// \brief As generate, at a fixed level ("full" | "compressed" | "answer"); draws the same problem as
/// generate would from the same Rng state, and no level.
inline Example generate_at(const TaskConfig& cfg, Rng& rng, const std::string& level, int length_mult = 1) {
  detail::TaskProblem p = detail::make_problem(cfg, rng, length_mult);
  return detail::render(std::move(p), level, cfg.trace_tag);
}

/// \brief The answer in generated text: the characters between the first "#### " and the next '\n',
/// spaces and '\r' trimmed. Empty when there is no marker or no end marker after it.
inline std::optional<std::string> parse_answer(const std::string& generated) {
  const std::size_t m = generated.find(kAnswerMarker);
  if (m == std::string::npos) return std::nullopt;
  const std::size_t a = m + std::char_traits<char>::length(kAnswerMarker);
  const std::size_t e = generated.find(kEndMarker, a);
  if (e == std::string::npos) return std::nullopt;
  std::size_t lo = a, hi = e;
  while (lo < hi && (generated[lo] == ' ' || generated[lo] == '\r')) ++lo;
  while (hi > lo && (generated[hi - 1] == ' ' || generated[hi - 1] == '\r')) --hi;
  return generated.substr(lo, hi - lo);
}

/// \brief True when the generated text holds a complete answer line (a decoding loop's stop test).
inline bool solution_complete(const std::string& generated) { return parse_answer(generated).has_value(); }

/// \brief Whether `generated_solution` (the model's text after the prompt) states ex.answer exactly.
/// Garbage, a missing marker or a missing end marker count as wrong.
inline bool check_answer(const TaskConfig& cfg, const Example& ex, const std::string& generated_solution) {
  (void)cfg;  // every task uses the same answer format
  const std::optional<std::string> a = parse_answer(generated_solution);
  return a.has_value() && *a == ex.answer;
}

/// \brief Tokens (= bytes) of a generated solution up to and including the end marker after the answer;
/// the whole length when the solution never completes.
inline int trace_length(const std::string& generated_solution) {
  const std::size_t m = generated_solution.find(kAnswerMarker);
  if (m != std::string::npos) {
    const std::size_t e = generated_solution.find(kEndMarker, m + std::char_traits<char>::length(kAnswerMarker));
    if (e != std::string::npos) return static_cast<int>(e + 1);
  }
  return static_cast<int>(generated_solution.size());
}

/// \brief Upper bound on the bytes of any solution (the full level is the longest) at difficulty * length_mult.
inline int max_solution_bytes(const TaskConfig& cfg, int length_mult = 1) {
  const int d = detail::effective_difficulty(cfg, length_mult);
  if (cfg.name == "addition") return 14 * d + 6;      // d x "9+9+1=19 c1" + "; " + "\n#### " + d+1 digits + "\n"
  if (cfg.name == "state_tracking") return 18 * d + 6;  // d x "swap A B -> 1234" + "; " + "\n#### 7\n"
  return 7 * d + 12;                                    // d x "ab=cd" + "ab=7" + "; " + "\n#### 7\n"
}

/// \brief Upper bound on the bytes of any prompt at difficulty * length_mult.
inline int max_prompt_bytes(const TaskConfig& cfg, int length_mult = 1) {
  const int d = detail::effective_difficulty(cfg, length_mult);
  const int tag = cfg.trace_tag ? 11 : 0;                      // " compressed"
  if (cfg.name == "addition") return 2 * d + 4 + tag;          // d + "+" + d + "=?\n"
  if (cfg.name == "state_tracking") return 10 * d + 20 + tag;  // "A=1 B=2 C=3 D=4" + d x "; swap A B" + "; A?\n"
  return 21 * (d + 1) + 4 + tag;                               // 3(d+1) x "ab=cd; " + "ab?\n"
}

/// \brief n examples from Rng(seed) at difficulty * length_mult, levels drawn from cfg's mix (the
/// evaluator uses prompt and answer; the reference solution is for teacher-forced loss or lengths).
inline std::vector<Example> eval_examples(const TaskConfig& cfg, int n, std::uint64_t seed, int length_mult = 1) {
  if (n < 0) throw Error("fbt: eval_examples: n must be >= 0 (got " + std::to_string(n) + ")");
  Rng rng(seed);
  std::vector<Example> out;
  out.reserve(n);
  for (int i = 0; i < n; ++i) out.push_back(generate(cfg, rng, length_mult));
  return out;
}

/// \brief The same n problems at every level (full, compressed, answer: n examples each, in that order):
/// each level's examples are generate_at from Rng(seed), so example i of every level is one problem. With
/// trace_tag each prompt asks for its level: what "shorter traces at equal accuracy" is measured on.
inline std::vector<Example> eval_examples_at_levels(const TaskConfig& cfg, int n, std::uint64_t seed, int length_mult = 1) {
  if (n < 0) throw Error("fbt: eval_examples_at_levels: n must be >= 0 (got " + std::to_string(n) + ")");
  std::vector<Example> out;
  out.reserve(std::size_t(n) * verbosity_levels().size());
  for (const std::string& level : verbosity_levels()) {
    Rng rng(seed);
    for (int i = 0; i < n; ++i) out.push_back(generate_at(cfg, rng, level, length_mult));
  }
  return out;
}

/// \brief Options of TaskDataset.
struct TaskDatasetOptions {
  int val_examples = 512;                         ///< size of the fixed validation set (>= 0)
  std::uint64_t val_seed = 0x5eedFB7'0000'7A5Cull;  ///< its seed (fixed; unrelated to training seeds)
};

/// \brief Examples generated on the fly, packed back to back (each a document: kSep + prompt + solution).
///
/// Training row b: examples drawn from the caller's Rng are appended until the row holds T+1 tokens;
/// the window is the first T+1 (so every row starts at a document start, and the last example of a
/// row is cut, its rest discarded). Loss is taken at every position, prompt included. Validation: a
/// fixed set of val_examples examples from Rng(val_seed), packed into windows exactly as training rows
/// are: each window starts at an example and takes whole examples until it holds T+1 tokens, the rest
/// of the example it cuts is dropped, and the next window starts at the following example (a last
/// window that cannot be filled is dropped). Training and validation windows so have one distribution;
/// cutting the stream at stride T instead would start almost every window in the middle of an example
/// whose question lies in the previous window.
class TaskDataset : public DataSource {
 public:
  explicit TaskDataset(TaskConfig cfg, TaskDatasetOptions opts = {}) : cfg_(std::move(cfg)), opts_(opts) {
    cfg_.validate();
    (void)detail::effective_difficulty(cfg_, 1);
    longest_ = cfg_;  // the longest training example's config: the row buffer's bound
    longest_.difficulty = std::max(cfg_.difficulty, cfg_.train_hi()), longest_.train_min_difficulty = longest_.train_max_difficulty = 0;
    if (opts_.val_examples < 0)
      throw Error("fbt: TaskDatasetOptions.val_examples must be >= 0 (got " + std::to_string(opts_.val_examples) + ")");
    {  // the validation set is drawn as training is (over the training range, if any)
      Rng rng(opts_.val_seed);
      for (int i = 0; i < opts_.val_examples; ++i) val_examples_.push_back(generate_training(cfg_, rng));
    }
    ex_off_.push_back(0);
    for (const Example& ex : val_examples_) {
      const std::vector<int> t = ex.tokens();
      val_.insert(val_.end(), t.begin(), t.end());
      ex_off_.push_back(val_.size());
    }
  }

  void sample_batch(Rng& rng, int B, int T, std::vector<int>& tokens, std::vector<int>& targets,
                    std::vector<std::uint8_t>& doc_start) const override {
    FBT_ASSERT(B >= 1 && T >= 1, "sample_batch: B and T must be >= 1 (got B=" + std::to_string(B) +
                                     ", T=" + std::to_string(T) + ")");
    tokens.resize(std::size_t(B) * T), targets.resize(std::size_t(B) * T), doc_start.resize(std::size_t(B) * T);
    std::vector<int> row;
    row.reserve(std::size_t(T) + 1 + max_prompt_bytes(longest_) + max_solution_bytes(longest_) + 1);
    for (int b = 0; b < B; ++b) {
      row.clear();
      while (row.size() < std::size_t(T) + 1) {
        const std::vector<int> t = generate_training(cfg_, rng).tokens();
        row.insert(row.end(), t.begin(), t.end());
      }
      const std::size_t o = std::size_t(b) * T;
      detail::fill_window(row.data(), T, tokens.data() + o, targets.data() + o, doc_start.data() + o);
    }
  }

  int num_eval_windows(int T) const override { return static_cast<int>(eval_window_starts(T).size()); }

  void eval_window(int i, int T, std::vector<int>& tokens, std::vector<int>& targets,
                   std::vector<std::uint8_t>& doc_start) const override {
    const std::vector<std::size_t> starts = eval_window_starts(T);
    FBT_ASSERT(i >= 0 && i < int(starts.size()), "eval_window: index " + std::to_string(i) + " out of range [0, " +
                                                     std::to_string(starts.size()) + ") for T=" + std::to_string(T));
    tokens.resize(T), targets.resize(T), doc_start.resize(T);
    detail::fill_window(val_.data() + starts[i], T, tokens.data(), targets.data(), doc_start.data());
  }

  /// \brief Offsets in val_stream() of the validation windows of T+1 tokens, packed like training rows.
  std::vector<std::size_t> eval_window_starts(int T) const { return detail::packed_window_starts(ex_off_, T); }

  std::string describe() const override {
    std::ostringstream os;
    os << "task " << cfg_.name << " (difficulty " << cfg_.difficulty;
    if (cfg_.train_lo() != cfg_.difficulty || cfg_.train_hi() != cfg_.difficulty)
      os << ", trained on " << cfg_.train_lo() << ".." << cfg_.train_hi() << " uniformly";
    os << "; levels full/compressed/answer "
       << detail::fmt_prob(cfg_.p_full) << "/" << detail::fmt_prob(cfg_.p_compressed) << "/"
       << detail::fmt_prob(cfg_.p_answer) << (cfg_.trace_tag ? ", level stated in the prompt" : "") << "), validation " << val_examples_.size() << " examples (seed "
       << opts_.val_seed << ") = " << val_.size() << " tokens";
    return os.str();
  }

  const TaskConfig& config() const { return cfg_; }
  const std::vector<Example>& val_examples() const { return val_examples_; }
  const std::vector<int>& val_stream() const { return val_; }
  long val_tokens() const { return static_cast<long>(val_.size()); }

 private:
  TaskConfig cfg_;
  TaskConfig longest_;  // cfg_ at the largest training difficulty (bounds of a row's last example)
  TaskDatasetOptions opts_;
  std::vector<Example> val_examples_;
  std::vector<int> val_;  // (N_val) the validation examples as one token stream
  std::vector<std::size_t> ex_off_;  // (val_examples + 1) where each example starts in val_ (and the end)
};

}  // namespace fbt
