// fbt synthetic tasks: every generated answer recomputed independently (integer arithmetic, a register
// interpreter, chain following), traces checked step by step, verbosity lengths, answer parsing,
// difficulty and length multiplier, refusals, and the TaskDataset batch interface.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "fbt/data/tasks.hpp"
#include "common/errors.hpp"

// The file's own namespace: with FBT_TEST_UNITY an area's test files share one translation unit.
namespace test_data_tasks {

using namespace fbt;
using fbt_test::error_of;
using fbt_test::contains;

namespace {

std::vector<std::string> split(const std::string& s, const std::string& sep) {
  std::vector<std::string> out;
  std::size_t pos = 0;
  while (true) {
    const std::size_t e = s.find(sep, pos);
    out.push_back(s.substr(pos, e == std::string::npos ? std::string::npos : e - pos));
    if (e == std::string::npos) return out;
    pos = e + sep.size();
  }
}

// The trace part of a solution ("" at the answer level), checking the tail format on the way.
std::string trace_of(const Example& ex) {
  const std::string tail = "#### " + ex.answer + "\n";
  EXPECT_GE(ex.solution.size(), tail.size());
  EXPECT_EQ(ex.solution.substr(ex.solution.size() - tail.size()), tail);
  if (ex.level == "answer") {
    EXPECT_EQ(ex.solution, tail);
    return "";
  }
  const std::string head = ex.solution.substr(0, ex.solution.size() - tail.size());
  EXPECT_FALSE(head.empty());
  EXPECT_EQ(head.back(), '\n');
  return head.substr(0, head.size() - 1);
}

TaskConfig task(const std::string& name, int difficulty) {
  TaskConfig c;
  c.name = name;
  c.difficulty = difficulty;
  return c;
}

// Decimal addition in base 1e9 limbs: a different algorithm from the generator's column walk.
std::string big_add(const std::string& a, const std::string& b) {
  auto limbs = [](const std::string& s) {
    std::vector<long long> v;
    for (int end = int(s.size()); end > 0; end -= 9) v.push_back(std::stoll(s.substr(std::max(0, end - 9), end - std::max(0, end - 9))));
    return v;
  };
  std::vector<long long> x = limbs(a), y = limbs(b), z;
  long long carry = 0;
  for (std::size_t i = 0; i < std::max(x.size(), y.size()) || carry; ++i) {
    const long long s = (i < x.size() ? x[i] : 0) + (i < y.size() ? y[i] : 0) + carry;
    z.push_back(s % 1000000000), carry = s / 1000000000;
  }
  std::ostringstream os;
  os << z.back();
  for (int i = int(z.size()) - 2; i >= 0; --i) {
    std::string l = std::to_string(z[i]);
    os << std::string(9 - l.size(), '0') << l;
  }
  return os.str();
}

}  // namespace

TEST(Tasks, AdditionAnswerIsTheSumAndTheTraceIsConsistent) {
  Rng rng(1);
  for (int d : {1, 2, 5, 9, 18, 40}) {
    const TaskConfig cfg = task("addition", d);
    for (int n = 0; n < 200; ++n) {
      const Example ex = generate(cfg, rng);
      ASSERT_EQ(ex.prompt.substr(ex.prompt.size() - 3), "=?\n");
      const std::vector<std::string> ab = split(ex.prompt.substr(0, ex.prompt.size() - 3), "+");
      ASSERT_EQ(ab.size(), 2u);
      ASSERT_EQ(int(ab[0].size()), d);
      ASSERT_EQ(int(ab[1].size()), d);
      ASSERT_NE(ab[0][0], '0');
      if (d <= 18) { EXPECT_EQ(ex.answer, std::to_string(std::stoll(ab[0]) + std::stoll(ab[1]))); }
      EXPECT_EQ(ex.answer, big_add(ab[0], ab[1]));
      const std::string tr = trace_of(ex);
      if (ex.level == "full") {  // "x+y[+1]=s cK" per column from the right
        const std::vector<std::string> steps = split(tr, "; ");
        ASSERT_EQ(int(steps.size()), d);
        int carry = 0;
        for (int i = 0; i < d; ++i) {
          const int x = ab[0][d - 1 - i] - '0', y = ab[1][d - 1 - i] - '0', s = x + y + carry;
          EXPECT_EQ(steps[i], std::to_string(x) + "+" + std::to_string(y) + (carry ? "+1" : "") + "=" +
                                  std::to_string(s) + " c" + std::to_string(s / 10));
          carry = s / 10;
        }
      } else if (ex.level == "compressed") {  // the column sums
        const std::vector<std::string> sums = split(tr, " ");
        ASSERT_EQ(int(sums.size()), d);
        std::string digits;
        int carry = 0;
        for (int i = 0; i < d; ++i) {
          const int s = std::stoi(sums[i]);
          EXPECT_EQ(s, (ab[0][d - 1 - i] - '0') + (ab[1][d - 1 - i] - '0') + carry);
          digits.insert(digits.begin(), char('0' + s % 10));
          carry = s / 10;
        }
        if (carry) digits.insert(digits.begin(), '1');
        EXPECT_EQ(digits, ex.answer);
      }
    }
  }
}

TEST(Tasks, StateTrackingMatchesAnInterpreter) {
  Rng rng(2);
  for (int steps : {1, 2, 3, 8, 25}) {
    const TaskConfig cfg = task("state_tracking", steps);
    for (int n = 0; n < 300; ++n) {
      const Example ex = generate(cfg, rng);
      ASSERT_EQ(ex.prompt.back(), '\n');
      const std::vector<std::string> parts = split(ex.prompt.substr(0, ex.prompt.size() - 1), "; ");
      ASSERT_EQ(int(parts.size()), steps + 2);  // init, ops, question
      int reg[4];
      const std::vector<std::string> init = split(parts[0], " ");
      ASSERT_EQ(init.size(), 4u);
      for (int r = 0; r < 4; ++r) {
        ASSERT_EQ(init[r].size(), 3u);
        ASSERT_EQ(init[r][0], 'A' + r);
        reg[r] = init[r][2] - '0';
      }
      std::vector<std::string> states;
      for (int i = 1; i <= steps; ++i) {
        const std::string& op = parts[i];
        auto R = [](char c) { return c - 'A'; };
        if (op.rfind("swap ", 0) == 0) {
          ASSERT_EQ(op.size(), 8u);
          std::swap(reg[R(op[5])], reg[R(op[7])]);
        } else if (op.size() == 4 && op.substr(1, 2) == "+=") {
          reg[R(op[0])] = (reg[R(op[0])] + reg[R(op[3])]) % 10;
        } else {
          ASSERT_EQ(op.size(), 3u) << op;
          ASSERT_EQ(op[1], '=');
          reg[R(op[0])] = (op[2] >= '0' && op[2] <= '9') ? op[2] - '0' : reg[R(op[2])];
        }
        std::string st;
        for (int r : reg) st += char('0' + r);
        states.push_back(st);
      }
      const std::string& q = parts.back();
      ASSERT_EQ(q.size(), 2u);
      ASSERT_EQ(q[1], '?');
      EXPECT_EQ(ex.answer, std::to_string(reg[q[0] - 'A']));
      const std::string tr = trace_of(ex);
      if (ex.level == "full") {
        const std::vector<std::string> items = split(tr, "; ");
        ASSERT_EQ(int(items.size()), steps);
        for (int i = 0; i < steps; ++i) EXPECT_EQ(items[i], parts[i + 1] + " -> " + states[i]);
      } else if (ex.level == "compressed") {
        std::vector<std::string> expect;
        for (int i = 1; i <= steps; ++i)
          if (i % 2 == 0 || i == steps) expect.push_back(states[i - 1]);
        EXPECT_EQ(split(tr, " "), expect);
      }
    }
  }
}

TEST(Tasks, MultihopAnswerFollowsTheChain) {
  Rng rng(3);
  int shuffled = 0, total = 0;
  for (int hops : {1, 2, 4, 16, 85}) {
    const TaskConfig cfg = task("multihop", hops);
    for (int n = 0; n < 100; ++n) {
      const Example ex = generate(cfg, rng);
      const std::vector<std::string> parts = split(ex.prompt.substr(0, ex.prompt.size() - 1), "; ");
      ASSERT_EQ(int(parts.size()), 3 * (hops + 1) + 1);
      std::map<std::string, std::string> rhs;
      std::map<std::string, int> line;
      for (int i = 0; i + 1 < int(parts.size()); ++i) {
        const std::vector<std::string> kv = split(parts[i], "=");
        ASSERT_EQ(kv.size(), 2u);
        ASSERT_TRUE(rhs.emplace(kv[0], kv[1]).second) << "name assigned twice: " << kv[0];
        line[kv[0]] = i;
      }
      std::string q = parts.back();
      ASSERT_EQ(q.back(), '?');
      q.pop_back();
      std::vector<std::string> chain{q};
      std::string v = q;
      std::vector<std::string> hops_seen;
      while (rhs.count(v)) {
        hops_seen.push_back(v + "=" + rhs[v]);
        v = rhs[v];
        chain.push_back(v);
        ASSERT_LE(int(chain.size()), hops + 2);
      }
      chain.pop_back();  // the value
      EXPECT_EQ(int(hops_seen.size()), hops + 1);
      EXPECT_EQ(ex.answer, v);
      // The chain's assignments do not appear in chain order in the text.
      bool ordered = true;
      for (std::size_t i = 0; i + 1 < chain.size(); ++i) ordered = ordered && line[chain[i]] > line[chain[i + 1]];
      shuffled += !ordered, ++total;
      // Distractor roots hold other values.
      int roots = 0;
      for (auto& kv : rhs)
        if (kv.second.size() == 1 && std::isdigit(static_cast<unsigned char>(kv.second[0]))) {
          ++roots;
          if (kv.first != chain.back()) { EXPECT_NE(kv.second, ex.answer); }
        }
      EXPECT_EQ(roots, 3);
      const std::string tr = trace_of(ex);
      if (ex.level == "full") {
        std::string expect;
        for (std::size_t i = 0; i < hops_seen.size(); ++i) expect += (i ? "; " : "") + hops_seen[i];
        EXPECT_EQ(tr, expect);
      } else if (ex.level == "compressed") {
        EXPECT_EQ(split(tr, " "), chain);
      }
    }
  }
  EXPECT_GT(shuffled, total * 3 / 4);
}

TEST(Tasks, VerbosityLevelsHaveDecreasingLengthAndFollowTheMix) {
  for (const std::string& name : task_names()) {
    const TaskConfig cfg = task(name, 6);
    double len[3] = {0, 0, 0};
    int count[3] = {0, 0, 0};
    Rng rng(4);
    const int n = 3000;
    for (int i = 0; i < n; ++i) {
      const Example ex = generate(cfg, rng);
      const int l = int(std::find(verbosity_levels().begin(), verbosity_levels().end(), ex.level) -
                        verbosity_levels().begin());
      ASSERT_LT(l, 3) << ex.level;
      len[l] += ex.solution.size(), ++count[l];
    }
    for (int l = 0; l < 3; ++l) {
      EXPECT_NEAR(count[l] / double(n), 1.0 / 3, 0.04) << name;  // ~4.6 standard errors
      len[l] /= count[l];
    }
    EXPECT_GT(len[0], 1.5 * len[1]) << name << ": full " << len[0] << " compressed " << len[1];
    EXPECT_GT(len[1], 1.5 * len[2]) << name << ": compressed " << len[1] << " answer " << len[2];
    // A one-level mix gives only that level; zero-probability levels never appear.
    TaskConfig only = cfg;
    only.p_full = 0, only.p_compressed = 0, only.p_answer = 2.5;
    for (int i = 0; i < 200; ++i) EXPECT_EQ(generate(only, rng).level, "answer");
    only.p_full = 1, only.p_answer = 0;
    for (int i = 0; i < 200; ++i) EXPECT_EQ(generate(only, rng).level, "full");
  }
}

TEST(Tasks, GenerateAtDrawsTheSameProblemAsGenerate) {
  for (const std::string& name : task_names()) {
    Rng a(9), b(9);
    const Example x = generate(task(name, 5), a);
    for (const std::string& lv : verbosity_levels()) {
      Rng c(9);
      const Example y = generate_at(task(name, 5), c, lv);
      EXPECT_EQ(y.prompt, x.prompt);
      EXPECT_EQ(y.answer, x.answer);
      EXPECT_EQ(y.level, lv);
      if (lv == x.level) { EXPECT_EQ(y.solution, x.solution); }
    }
    Rng d(9);
    EXPECT_THROW(generate_at(task(name, 5), d, "terse"), Error);
    (void)b;
  }
}

TEST(Tasks, CheckAnswerAcceptsTheTruthAndRejectsWrongAndGarbage) {
  Rng rng(5);
  for (const std::string& name : task_names()) {
    const TaskConfig cfg = task(name, 4);
    for (int i = 0; i < 50; ++i) {
      const Example ex = generate(cfg, rng);
      EXPECT_TRUE(check_answer(cfg, ex, ex.solution)) << ex.solution;
      EXPECT_TRUE(check_answer(cfg, ex, "noise ~~ \x01\xff\n#### " + ex.answer + "\n<more garbage after>"));
      EXPECT_TRUE(check_answer(cfg, ex, "#### " + ex.answer + " \r\n"));  // trailing spaces trimmed
      const std::string wrong = ex.answer == "1" ? "2" : "1";
      EXPECT_FALSE(check_answer(cfg, ex, "#### " + wrong + "\n"));
      EXPECT_FALSE(check_answer(cfg, ex, "#### " + ex.answer + "0\n"));
      EXPECT_FALSE(check_answer(cfg, ex, "#### " + ex.answer));   // no end marker: incomplete
      EXPECT_FALSE(check_answer(cfg, ex, ex.answer + "\n"));      // no answer marker
      EXPECT_FALSE(check_answer(cfg, ex, ""));
      EXPECT_FALSE(check_answer(cfg, ex, "### " + ex.answer + "\n"));
      EXPECT_FALSE(check_answer(cfg, ex, std::string("\0\0\xff####", 7)));
      // The first answer line counts.
      EXPECT_FALSE(check_answer(cfg, ex, "#### " + wrong + "\n#### " + ex.answer + "\n"));
    }
  }
  EXPECT_FALSE(solution_complete("1+2=3 c0\n#### 3"));
  EXPECT_TRUE(solution_complete("1+2=3 c0\n#### 3\n"));
  EXPECT_EQ(parse_answer("x\n####  42 \nyy").value_or("?"), "42");
}

TEST(Tasks, TraceLengthCountsBytesThroughTheEndMarker) {
  Rng rng(6);
  for (const std::string& name : task_names()) {
    for (int i = 0; i < 30; ++i) {
      const Example ex = generate(task(name, 3), rng);
      EXPECT_EQ(trace_length(ex.solution), int(ex.solution.size()));
      EXPECT_EQ(trace_length(ex.solution + "trailing junk\n#### 9\n"), int(ex.solution.size()));
    }
  }
  EXPECT_EQ(trace_length("#### 5\n"), 7);
  EXPECT_EQ(trace_length("never finishes"), 14);
  EXPECT_EQ(trace_length("#### 5"), 6);
  EXPECT_EQ(trace_length(""), 0);
}

TEST(Tasks, DifficultyAndLengthMultiplierScaleTheProblem) {
  // Problem size read off the prompt: digits, operations, assignments.
  auto size_of = [](const std::string& name, const Example& ex) {
    if (name == "addition") return int(ex.prompt.find('+'));
    return int(split(ex.prompt, "; ").size());
  };
  for (const std::string& name : task_names()) {
    std::vector<int> sizes;
    for (int d : {1, 2, 4, 8}) {
      const TaskConfig cfg = task(name, d);
      const std::vector<Example> a = eval_examples(cfg, 50, 77), b = eval_examples(cfg, 50, 77);
      const std::vector<Example> m2 = eval_examples(cfg, 50, 77, 2);
      ASSERT_EQ(a.size(), 50u);
      int mx = 0, mx_prompt = 0;
      for (int i = 0; i < 50; ++i) {
        EXPECT_EQ(a[i].prompt, b[i].prompt);  // deterministic in the seed
        EXPECT_EQ(a[i].solution, b[i].solution);
        EXPECT_EQ(size_of(name, a[i]), size_of(name, a[0]));
        EXPECT_EQ(size_of(name, m2[i]), size_of(name, eval_examples(task(name, 2 * d), 1, 1)[0]));
        Rng r(i);
        const Example f = generate_at(cfg, r, "full");
        mx = std::max(mx, int(f.solution.size()));
        mx_prompt = std::max(mx_prompt, int(f.prompt.size()));
      }
      EXPECT_LE(mx, max_solution_bytes(cfg)) << name << " d=" << d;
      EXPECT_GE(mx, max_solution_bytes(cfg) * 2 / 3) << name << " d=" << d;  // the bound is not loose
      EXPECT_LE(mx_prompt, max_prompt_bytes(cfg)) << name << " d=" << d;
      EXPECT_LT(max_solution_bytes(cfg), max_solution_bytes(cfg, 4));
      sizes.push_back(size_of(name, a[0]));
    }
    EXPECT_TRUE(std::is_sorted(sizes.begin(), sizes.end()) && sizes.front() < sizes.back()) << name;
  }
  EXPECT_NE(eval_examples(task("addition", 8), 1, 1)[0].prompt, eval_examples(task("addition", 8), 1, 2)[0].prompt);
}

TEST(Tasks, DifficultyIsBoundedPerTask) {
  // difficulty 100000 ran 30 s and took 2.5 GB building the validation set; each task now has a range
  Rng rng(0);
  for (const auto& nd : std::vector<std::pair<std::string, int>>{{"addition", 1000}, {"state_tracking", 500}, {"multihop", 85}}) {
    const std::string name = nd.first;
    const int dmax = nd.second;
    EXPECT_EQ(max_task_difficulty(name), dmax);
    EXPECT_NO_THROW(task(name, dmax).validate()) << name;
    const std::string e = error_of([&] { task(name, dmax + 1).validate(); });
    EXPECT_TRUE(contains(e, "TaskConfig.difficulty") && contains(e, "[1, " + std::to_string(dmax) + "]") &&
                contains(e, std::to_string(dmax + 1)))
        << e;
    EXPECT_TRUE(contains(error_of([&] { TaskDataset ds(task(name, 100000)); }), "TaskConfig.difficulty")) << name;
  }
  // the largest 1x problem fits the bound the docs give: a whole example within 16 KiB
  for (const std::string name : {"addition", "state_tracking"}) {
    const TaskConfig c = task(name, max_task_difficulty(name));
    EXPECT_LE(max_prompt_bytes(c) + max_solution_bytes(c), 16384) << name;
  }
  // evaluation at m x the length: difficulty x m up to 64 x the bound
  EXPECT_NO_THROW(generate(task("addition", 1000), rng, 2));
  EXPECT_TRUE(contains(error_of([&] { generate(task("addition", 1000), rng, 65); }), "length_mult"));
}

TEST(Tasks, RefusesUnknownTasksAndBadKnobsNamingTheField) {
  Rng rng(0);
  TaskConfig c = task("sorting", 3);
  EXPECT_TRUE(contains(error_of([&] { generate(c, rng); }), "TaskConfig.name"));
  EXPECT_TRUE(contains(error_of([&] { TaskDataset ds(c); }), "unknown task 'sorting'"));
  c = task("addition", 0);
  EXPECT_TRUE(contains(error_of([&] { generate(c, rng); }), "TaskConfig.difficulty"));
  c = task("addition", 3);
  c.p_compressed = -0.1;
  EXPECT_TRUE(contains(error_of([&] { c.validate(); }), "TaskConfig.p_compressed"));
  c.p_compressed = std::nan("");
  EXPECT_TRUE(contains(error_of([&] { c.validate(); }), "TaskConfig.p_compressed"));
  c.p_full = c.p_compressed = c.p_answer = 0;
  EXPECT_TRUE(contains(error_of([&] { c.validate(); }), "p_full + p_compressed + p_answer"));
  c = task("multihop", 30);
  EXPECT_NO_THROW(generate(c, rng, 2));
  EXPECT_TRUE(contains(error_of([&] { generate(c, rng, 4); }), "TaskConfig.difficulty"));
  EXPECT_TRUE(contains(error_of([&] { eval_examples(c, 4, 1, 0); }), "length_mult"));
  TaskDatasetOptions o;
  o.val_examples = -1;
  EXPECT_TRUE(contains(error_of([&] { TaskDataset ds(task("addition", 2), o); }), "val_examples"));
}

TEST(Tasks, TrainingOnMixedLengthsDrawsEveryDifficultyOfTheRangeAndEvaluationKeepsItsOwn) {
  // Without a range a training example is generate's, draw for draw (old runs' data unchanged).
  for (const std::string& name : task_names()) {
    Rng a(5), b(5);
    for (int i = 0; i < 20; ++i) EXPECT_EQ(generate_training(task(name, 3), a).text(), generate(task(name, 3), b).text()) << name;
  }
  // addition 3 trained on 1..6: the operands' digits cover the range, nothing outside it
  TaskConfig c = task("addition", 3);
  c.train_min_difficulty = 1, c.train_max_difficulty = 6;
  Rng rng(9);
  std::map<int, int> seen;
  for (int i = 0; i < 600; ++i) {
    const Example ex = generate_training(c, rng);
    const int digits = int(ex.prompt.find('+'));
    ++seen[digits];
    EXPECT_EQ(std::stoll(ex.answer), std::stoll(ex.prompt.substr(0, digits)) + std::stoll(ex.prompt.substr(digits + 1))) << ex.prompt;
  }
  ASSERT_EQ(seen.size(), 6u);
  EXPECT_EQ(seen.begin()->first, 1);
  EXPECT_EQ(seen.rbegin()->first, 6);
  for (const auto& [d, n] : seen) EXPECT_GT(n, 600 / 6 / 2) << "difficulty " << d << " drawn " << n << " times of 600";
  // the dataset's batches and validation set are drawn over the range; evaluation at m x is difficulty x m
  const TaskDataset ds(c);
  std::set<int> val_digits;
  for (const Example& ex : ds.val_examples()) val_digits.insert(int(ex.prompt.find('+')));
  EXPECT_EQ(val_digits, (std::set<int>{1, 2, 3, 4, 5, 6}));
  EXPECT_TRUE(contains(ds.describe(), "trained on 1..6"));
  std::vector<int> tok, tgt;
  std::vector<std::uint8_t> fl;
  Rng br(2);
  ds.sample_batch(br, 4, 512, tok, tgt, fl);  // rows fill (the row bound uses the largest difficulty)
  EXPECT_EQ(tok.size(), 4u * 512u);
  for (int m : {1, 2, 4})
    for (const Example& ex : eval_examples(c, 10, 3, m)) EXPECT_EQ(int(ex.prompt.find('+')), 3 * m);
  // a range above the nominal difficulty is allowed (train on 4..6, evaluate at 3 = 1x)
  c.train_min_difficulty = 4;
  EXPECT_NO_THROW(c.validate());
  // refusals name the field
  c.train_min_difficulty = 7;
  EXPECT_TRUE(contains(error_of([&] { c.validate(); }), "train_min_difficulty (7) is above train_max_difficulty (6)"));
  c.train_min_difficulty = 0, c.train_max_difficulty = 2;  // 0 = difficulty 3 > 2
  EXPECT_TRUE(contains(error_of([&] { c.validate(); }), "train_min_difficulty (3)"));
  c.train_max_difficulty = 1001;
  EXPECT_TRUE(contains(error_of([&] { c.validate(); }), "TaskConfig.train_max_difficulty must be 0 (= difficulty) or in [1, 1000]"));
  c.train_max_difficulty = -2;
  EXPECT_TRUE(contains(error_of([&] { c.validate(); }), "TaskConfig.train_max_difficulty"));
}

TEST(TaskDataset, BatchesPackDocumentsWithSepAndDocStart) {
  for (const std::string& name : task_names()) {
    const TaskConfig cfg = task(name, 3);
    const TaskDataset ds(cfg);
    const DataSource& src = ds;
    EXPECT_EQ(src.vocab_size(), 257);
    const int B = 8, T = 256;
    std::vector<int> tok, tgt;
    std::vector<std::uint8_t> fl;
    Rng rng(10);
    src.sample_batch(rng, B, T, tok, tgt, fl);
    ASSERT_EQ(tok.size(), std::size_t(B * T));
    for (int b = 0; b < B; ++b) {
      EXPECT_EQ(tok[b * T], kSep);  // every row starts at a document
      int docs = 0;
      for (int t = 0; t < T; ++t) {
        const int i = b * T + t;
        docs += tok[i] == kSep;
        EXPECT_EQ(fl[i], (t == 0 || tok[i] == kSep) ? 1 : 0);
        if (t + 1 < T) { EXPECT_EQ(tgt[i], tok[i + 1]); }
      }
      EXPECT_GE(docs, 2) << name;
      // Each complete document in the row is a well-formed example with a correct answer line.
      std::vector<int> row(tok.begin() + b * T, tok.begin() + (b + 1) * T);
      row.push_back(tgt[b * T + T - 1]);
      const std::vector<std::string> texts = split(ByteTokenizer::decode_visible(row), "\n<|sep|>\n");
      for (std::size_t k = 1; k + 1 < texts.size(); ++k) {  // [0] is empty, the last may be cut
        const std::size_t q = texts[k].find("?\n");
        ASSERT_NE(q, std::string::npos) << texts[k];
        EXPECT_TRUE(solution_complete(texts[k].substr(q + 2))) << texts[k];
        EXPECT_EQ(trace_length(texts[k].substr(q + 2)), int(texts[k].size() - q - 2));
      }
    }
    // Same Rng state, same batch; the validation set does not depend on any training Rng.
    std::vector<int> tok2, tgt2;
    std::vector<std::uint8_t> fl2;
    Rng again(10);
    src.sample_batch(again, B, T, tok2, tgt2, fl2);
    EXPECT_EQ(tok, tok2);
    EXPECT_EQ(tgt, tgt2);
    EXPECT_EQ(fl, fl2);
    const TaskDataset ds2(cfg);
    EXPECT_EQ(ds.val_stream(), ds2.val_stream());
    EXPECT_TRUE(contains(ds.describe(), name)) << ds.describe();
  }
}

TEST(TaskDataset, EvalWindowsArePackedLikeTrainingRows) {
  TaskDatasetOptions o;
  o.val_examples = 40;
  const TaskDataset ds(task("state_tracking", 4), o);
  ASSERT_EQ(ds.val_examples().size(), 40u);
  std::vector<int> expect;
  for (const Example& ex : ds.val_examples()) {
    const std::vector<int> t = ex.tokens();
    expect.insert(expect.end(), t.begin(), t.end());
  }
  EXPECT_EQ(ds.val_stream(), expect);
  // An independent packing, as sample_batch packs a training row: from example e, whole examples until
  // the row holds T+1 tokens; the window is its first T+1; the next row starts at the next example.
  const int T = 64;
  std::vector<std::vector<int>> rows;
  for (std::size_t e = 0; e < ds.val_examples().size();) {
    std::vector<int> row;
    while (row.size() < std::size_t(T) + 1 && e < ds.val_examples().size()) {
      const std::vector<int> t = ds.val_examples()[e++].tokens();
      row.insert(row.end(), t.begin(), t.end());
    }
    if (row.size() < std::size_t(T) + 1) break;
    row.resize(std::size_t(T) + 1);
    rows.push_back(row);
  }
  const int n = ds.num_eval_windows(T);
  ASSERT_EQ(n, int(rows.size()));
  ASSERT_GT(n, 5);
  std::vector<int> tok, tgt;
  std::vector<std::uint8_t> fl;
  for (int i = 0; i < n; ++i) {
    ds.eval_window(i, T, tok, tgt, fl);
    EXPECT_EQ(tok[0], kSep) << "window " << i << " starts at an example";
    for (int t = 0; t < T; ++t) {
      EXPECT_EQ(tok[t], rows[i][t]);
      EXPECT_EQ(tgt[t], rows[i][t + 1]);
      EXPECT_EQ(fl[t], (t == 0 || tok[t] == kSep) ? 1 : 0);
    }
  }
  EXPECT_THROW(ds.eval_window(n, T, tok, tgt, fl), Error);
  // A window longer than the whole set: none.
  EXPECT_EQ(ds.num_eval_windows(int(expect.size())), 0);
  // A different validation seed gives a different set.
  o.val_seed = 1;
  EXPECT_NE(TaskDataset(task("state_tracking", 4), o).val_stream(), expect);
}

TEST(Tasks, TraceTagOffIsTheUntaggedDataByteForByte) {
  // Rng(42), difficulty 2: the texts generated before trace_tag existed
  const char* golden[] = {
      "78+96=?\n14 17\n#### 174\n",
      "20+52=?\n#### 72\n",
      "37+46=?\n7+6=13 c1; 3+4+1=8 c0\n#### 83\n",
      "A=8 B=8 C=1 D=6; A=C; C=2; B?\n#### 8\n",
      "A=7 B=3 C=6 D=0; A+=D; swap B C; A?\n7630\n#### 7\n",
      "A=5 B=3 C=0 D=5; D=3; D+=A; D?\n#### 8\n",
      "m9=4; e5=m9; m2=7; d0=e5; v8=k1; t8=2; k1=m2; r5=t8; c5=r5; c5?\nc5 r5 t8\n#### 2\n",
      "l5=o2; k8=l5; b9=1; c8=4; f7=c8; o2=2; u9=q2; h2=f7; q2=b9; u9?\nu9=q2; q2=b9; b9=1\n#### 1\n",
      "i9=a8; i4=v0; d1=k5; c6=i4; k5=v4; v0=1; q8=i9; a8=7; v4=8; c6?\nc6 i4 v0\n#### 1\n"};
  int i = 0;
  for (const std::string& name : task_names()) {
    TaskConfig c = task(name, 2);
    EXPECT_FALSE(c.trace_tag);
    Rng rng(42);
    for (int k = 0; k < 3; ++k) EXPECT_EQ(generate(c, rng).text(), golden[i++]);
  }
}

TEST(Tasks, TraceTagStatesTheLevelInThePromptAndChangesNothingElse) {
  for (const std::string& name : task_names()) {
    TaskConfig plain = task(name, 3), tagged = plain;
    tagged.trace_tag = true;
    Rng a(9), b(9);
    for (int k = 0; k < 60; ++k) {
      const Example x = generate(plain, a), y = generate(tagged, b);
      ASSERT_EQ(x.level, y.level);
      EXPECT_EQ(y.prompt, x.prompt.substr(0, x.prompt.size() - 1) + " " + x.level + "\n");  // "472+359=? full\n"
      EXPECT_EQ(y.prompt.substr(y.prompt.size() - x.level.size() - 3), "? " + x.level + "\n");
      EXPECT_EQ(y.solution, x.solution);
      EXPECT_EQ(y.answer, x.answer);
      EXPECT_LE(int(y.prompt.size()), max_prompt_bytes(tagged)) << y.prompt;
    }
    EXPECT_EQ(a.state(), b.state()) << "the tag draws nothing";
    // eval_examples_at_levels: the same n problems at each level, in the order full, compressed, answer
    const int n = 7;
    const std::vector<Example> ex = eval_examples_at_levels(tagged, n, 123);
    ASSERT_EQ(int(ex.size()), 3 * n);
    for (int l = 0; l < 3; ++l)
      for (int k = 0; k < n; ++k) {
        const Example& e = ex[std::size_t(l) * n + k];
        EXPECT_EQ(e.level, verbosity_levels()[l]);
        EXPECT_EQ(e.answer, ex[std::size_t(k)].answer);
        EXPECT_EQ(e.prompt.substr(0, e.prompt.size() - e.level.size() - 1), ex[std::size_t(k)].prompt.substr(0, ex[std::size_t(k)].prompt.size() - 5));
        EXPECT_EQ(e.prompt.substr(e.prompt.size() - e.level.size() - 1), e.level + "\n");
      }
    // the dataset says so and its validation set asks for levels
    const TaskDataset ds(tagged);
    EXPECT_TRUE(contains(ds.describe(), "level stated in the prompt")) << ds.describe();
    for (const Example& e : ds.val_examples()) ASSERT_EQ(e.prompt.substr(e.prompt.size() - e.level.size() - 3), "? " + e.level + "\n");
  }
}

}  // namespace test_data_tasks
