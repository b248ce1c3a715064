// fbt running-state tasks (data/state_tasks.hpp): generator determinism by seed, states recomputed by the
// test's own interpreters (sums, permutations as arrays built by Lehmer codes, a depth counter), the
// closed-form optimal loss against a brute-force enumeration of the process's random draws, an oracle
// predictor's measured cross-entropy against the optimum (Monte Carlo), the dataset's windows and their
// per-target optimum, and refusals naming the field.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "fbt/data/state_tasks.hpp"
#include "fbt/data/tasks.hpp"
#include "common/errors.hpp"

// The file's own namespace: with FBT_TEST_UNITY an area's test files share one translation unit.
namespace test_data_state_tasks {

using namespace fbt;
using fbt_test::error_of;
using fbt_test::contains;

namespace {

StateTaskConfig state_task(const std::string& name, int d, double q = 0.5, int L = 32) {
  StateTaskConfig c;
  c.name = name, c.difficulty = d, c.reveal = q, c.length = L;
  return c;
}

// The test's own model of each process: symbols as bytes, the state as a vector of ints.
//   running_sum: {sum mod m}; permutation: the one-line array of the running product; brackets: {depth}.
struct RefProcess {
  std::string name;
  int d = 0;
  double q = 0;
  std::vector<char> alphabet;                 // (n) bytes
  std::vector<std::vector<int>> perms;        // permutation: perms[i] = the permutation of letter 'a' + i

  RefProcess(const StateTaskConfig& c) : name(c.name), d(c.difficulty), q(c.reveal) {
    if (name == "running_sum")
      for (int a = 0; a < d; ++a) alphabet.push_back(char('0' + a));
    else if (name == "brackets")
      alphabet = {'(', ')'};
    else {
      // unrank i in 0..k!-1 by its Lehmer code: lexicographic order without next_permutation
      int fact = 1;
      for (int i = 2; i <= d; ++i) fact *= i;
      for (int i = 0; i < fact; ++i) {
        std::vector<int> pool(d), p;
        for (int j = 0; j < d; ++j) pool[j] = j;
        int r = i, f = fact;
        for (int j = d; j >= 1; --j) {
          f /= j;
          p.push_back(pool[r / f]);
          pool.erase(pool.begin() + r / f);
          r %= f;
        }
        perms.push_back(p);
        alphabet.push_back(char('a' + i));
      }
    }
  }
  int n() const { return int(alphabet.size()); }
  std::vector<int> initial() const {
    if (name != "permutation") return {0};
    std::vector<int> id(d);
    for (int i = 0; i < d; ++i) id[i] = i;
    return id;
  }
  int letter_of(const std::vector<int>& p) const {
    for (int i = 0; i < int(perms.size()); ++i)
      if (perms[i] == p) return i;
    return -1;
  }
  // the only possible byte at state s, or 0
  char forced(const std::vector<int>& s) const {
    if (name != "brackets") return 0;
    return s[0] == 0 ? '(' : s[0] == d ? ')' : 0;
  }
  char reveal(const std::vector<int>& s) const {
    if (name == "running_sum") return char('0' + s[0]);
    if (name == "brackets") return 2 * s[0] < d ? '(' : ')';
    return char('a' + letter_of(s));
  }
  std::vector<int> next(const std::vector<int>& s, char x) const {
    if (name == "running_sum") return {(s[0] + (x - '0')) % d};
    if (name == "brackets") return {s[0] + (x == '(' ? 1 : -1)};
    const std::vector<int>& a = perms[std::size_t(x - 'a')];
    std::vector<int> r(d);
    for (int i = 0; i < d; ++i) r[i] = a[s[i]];  // s acts first, then a
    return r;
  }
  // the predictive distribution of the next byte at state s, written from the definition
  double prob(const std::vector<int>& s, char x) const {
    if (const char f = forced(s)) return x == f ? 1.0 : 0.0;
    return (x == reveal(s) ? q : 0.0) + (1.0 - q) / n();
  }
};

// The symbols of a document's tokens (kSep, symbols, '\n'), checking the layout.
std::string symbols_of(const std::vector<int>& tokens, int L) {
  EXPECT_EQ(int(tokens.size()), L + 2);
  EXPECT_EQ(tokens.front(), kSep);
  EXPECT_EQ(tokens.back(), int('\n'));
  std::string s;
  for (int i = 1; i <= L; ++i) s += char(tokens[i]);
  return s;
}

}  // namespace

TEST(StateTasks, MixtureEntropyHasItsClosedFormValues) {
  // H(q, n) at hand-computed points (nats): parity at q = 0.5 is the binary entropy of 0.75
  EXPECT_NEAR(reveal_mixture_entropy(0.5, 2), -(0.75 * std::log(0.75) + 0.25 * std::log(0.25)), 1e-15);
  EXPECT_NEAR(reveal_mixture_entropy(0.0, 10), std::log(10.0), 1e-15);
  EXPECT_EQ(reveal_mixture_entropy(1.0, 6), 0.0);
  EXPECT_NEAR(reveal_mixture_entropy(0.5, 10), -(0.55 * std::log(0.55) + 9 * 0.05 * std::log(0.05)), 1e-15);
}

TEST(StateTasks, SameSeedSameDocumentsAnotherSeedOthers) {
  for (const std::string& name : state_task_names()) {
    const StateProcess p(state_task(name, name == "permutation" ? 4 : 5));
    Rng a(7), b(7), c(8);
    std::string da, db, dc;
    for (int i = 0; i < 20; ++i) {
      const StateDocument x = generate_state_document(p, a), y = generate_state_document(p, b);
      EXPECT_EQ(x.tokens, y.tokens);
      EXPECT_EQ(x.optimal, y.optimal);
      EXPECT_EQ(x.states, y.states);
      da += x.text(), db += y.text(), dc += generate_state_document(p, c).text();
    }
    EXPECT_EQ(da, db) << name;
    EXPECT_NE(da, dc) << name;
    // the dataset: the same training batches from the same Rng state, the same validation set
    const StateTaskDataset s1(state_task(name, 3)), s2(state_task(name, 3));
    EXPECT_EQ(s1.val_stream(), s2.val_stream());
    std::vector<int> t1, g1, t2, g2;
    std::vector<std::uint8_t> f1, f2;
    Rng r1(3), r2(3);
    s1.sample_batch(r1, 4, 50, t1, g1, f1);
    s2.sample_batch(r2, 4, 50, t2, g2, f2);
    EXPECT_EQ(t1, t2);
    EXPECT_EQ(g1, g2);
    EXPECT_EQ(r1.state(), r2.state());
  }
}

TEST(StateTasks, StatesFollowTheProcessDefinition) {
  Rng rng(11);
  for (const StateTaskConfig& c : {state_task("running_sum", 2), state_task("running_sum", 7), state_task("running_sum", 10),
                                   state_task("permutation", 3), state_task("permutation", 4), state_task("brackets", 2),
                                   state_task("brackets", 5), state_task("brackets", 64, 0.5, 300)}) {
    const StateProcess p(c);
    const RefProcess ref(c);
    ASSERT_EQ(p.alphabet_size(), ref.n()) << c.name;
    for (int a = 0; a < p.alphabet_size(); ++a) EXPECT_EQ(p.symbol(a), ref.alphabet[a]);
    long reveals = 0, drawn = 0;
    for (int i = 0; i < 200; ++i) {
      const StateDocument doc = generate_state_document(p, rng);
      const std::string sym = symbols_of(doc.tokens, c.length);
      ASSERT_EQ(int(doc.states.size()), c.length + 1);
      ASSERT_EQ(int(doc.optimal.size()), c.length + 2);
      std::vector<int> s = ref.initial();
      for (int t = 0; t < c.length; ++t) {
        const char x = sym[t];
        ASSERT_GT(ref.prob(s, x), 0.0) << c.name << ": '" << x << "' cannot follow its state";
        if (const char f = ref.forced(s)) {
          EXPECT_EQ(x, f);
        } else {
          ++drawn, reveals += x == ref.reveal(s);
        }
        s = ref.next(s, x);
        // the library's state index names the same state as the test's own
        if (c.name == "permutation") {
          EXPECT_EQ(doc.states[t + 1], ref.letter_of(s));
        } else {
          EXPECT_EQ(doc.states[t + 1], s[0]);
        }
      }
      if (c.name == "brackets") {
        for (int st : doc.states) ASSERT_TRUE(st >= 0 && st <= c.difficulty);
      }
      EXPECT_EQ(state_document_optimal(p, sym), doc.optimal) << "the optimum from the text alone is the generator's";
    }
    // a drawn symbol is the revealing one with probability q + (1 - q)/n: within 5 standard errors
    const double want = c.reveal + (1 - c.reveal) / ref.n(), se = std::sqrt(want * (1 - want) / drawn);
    EXPECT_NEAR(double(reveals) / drawn, want, 5 * se) << c.name << " " << c.difficulty;
  }
  // the letters of S_3 in lexicographic order: a = 012 (identity), b = 021, c = 102, d = 120, e = 201, f = 210;
  // b then d: 0 -> 0 -> 1, 1 -> 2 -> 0, 2 -> 1 -> 2: 102 = c
  const StateProcess s3(state_task("permutation", 3));
  EXPECT_EQ(s3.next(s3.symbol_index('b'), s3.symbol_index('d')), s3.symbol_index('c'));
  EXPECT_EQ(s3.next(0, s3.symbol_index('e')), s3.symbol_index('e'));
}

TEST(StateTasks, OptimalLossMatchesBruteForceEnumeration) {
  // Every sequence of the process's random draws (per symbol: reveal with weight q, or each uniform
  // symbol with weight (1 - q)/n; nothing at a forced state), run through the test's own process, gives
  // the exact distribution of documents. The entropy of the next symbol given each prefix, from ratios of
  // prefix probabilities, must equal the closed form at every position of every document.
  for (const StateTaskConfig& c : {state_task("running_sum", 2, 0.5, 5), state_task("running_sum", 3, 0.3, 4),
                                   state_task("running_sum", 4, 0.9, 3), state_task("permutation", 3, 0.5, 3),
                                   state_task("permutation", 4, 0.25, 2), state_task("brackets", 2, 0.5, 6),
                                   state_task("brackets", 3, 0.7, 6), state_task("running_sum", 3, 0.0, 3),
                                   state_task("running_sum", 3, 1.0, 3)}) {
    const RefProcess ref(c);
    std::map<std::string, double> prefix_p;  // P(prefix) for every prefix, "" included
    std::function<void(const std::vector<int>&, const std::string&, double)> walk = [&](const std::vector<int>& s, const std::string& pre, double w) {
      prefix_p[pre] += w;
      if (int(pre.size()) == c.length) return;
      if (const char f = ref.forced(s)) return walk(ref.next(s, f), pre + f, w);
      if (c.reveal > 0) walk(ref.next(s, ref.reveal(s)), pre + ref.reveal(s), w * c.reveal);
      if (c.reveal < 1)
        for (char x : ref.alphabet) walk(ref.next(s, x), pre + x, w * (1 - c.reveal) / ref.n());
    };
    walk(ref.initial(), "", 1.0);
    EXPECT_NEAR(prefix_p[""], 1.0, 1e-12);
    const StateProcess p(c);
    double expected_total = 0, closed_total = 0;  // sum over positions of E[H], two ways
    long documents = 0;
    for (const auto& kv : prefix_p) {
      if (int(kv.first.size()) != c.length) continue;
      ++documents;
      const std::vector<double> opt = state_document_optimal(p, kv.first);
      ASSERT_EQ(int(opt.size()), c.length + 2);
      EXPECT_EQ(opt.front(), 0.0);
      EXPECT_EQ(opt.back(), 0.0);
      for (int t = 0; t < c.length; ++t) {
        const std::string pre = kv.first.substr(0, t);
        double h = 0;
        for (char x : ref.alphabet) {
          auto it = prefix_p.find(pre + x);
          if (it == prefix_p.end() || it->second <= 0) continue;
          const double pr = it->second / prefix_p.at(pre);
          h -= pr * std::log(pr);
        }
        ASSERT_NEAR(opt[t + 1], h, 1e-12) << c.name << " m/k/D " << c.difficulty << " q " << c.reveal << " prefix '" << pre << "'";
        closed_total += kv.second * opt[t + 1];
      }
    }
    // the chain rule: the entropy of the whole document equals the expected sum of the per-token optima
    for (const auto& kv : prefix_p)
      if (int(kv.first.size()) == c.length) expected_total -= kv.second * std::log(kv.second);
    EXPECT_NEAR(closed_total, expected_total, 1e-12 * std::max(1.0, expected_total)) << c.name;
    EXPECT_GT(documents, 0);
  }
}

TEST(StateTasks, OracleCrossEntropyMatchesTheOptimum) {
  // The test's oracle tracks the state from the tokens itself and scores each token with its own
  // predictive distribution; its mean cross-entropy over sampled documents must equal the mean optimal
  // loss within 5 standard errors of the per-token difference (which has mean 0 under the process).
  for (const StateTaskConfig& c : {state_task("running_sum", 2), state_task("running_sum", 10, 0.3), state_task("permutation", 3),
                                   state_task("permutation", 4, 0.7), state_task("brackets", 4), state_task("brackets", 2, 0.9)}) {
    const RefProcess ref(c);
    const StateProcess p(c);
    Rng rng(2024);
    double sum = 0, sumsq = 0, opt_sum = 0;
    long n = 0;
    for (int i = 0; i < 2000; ++i) {
      const StateDocument doc = generate_state_document(p, rng);
      const std::string sym = symbols_of(doc.tokens, c.length);
      std::vector<int> s = ref.initial();
      for (int t = 0; t < c.length; ++t) {
        const double ce = -std::log(ref.prob(s, sym[t]));
        const double diff = ce - doc.optimal[t + 1];
        sum += diff, sumsq += diff * diff, opt_sum += doc.optimal[t + 1];
        ++n;
        s = ref.next(s, sym[t]);
      }
      // the '\n' and the next kSep are certain: the oracle's loss on them is 0, as is the optimum
      EXPECT_EQ(doc.optimal.back(), 0.0);
      EXPECT_EQ(doc.optimal.front(), 0.0);
    }
    const double mean = sum / n, se = std::sqrt((sumsq / n - mean * mean) / n);
    EXPECT_LT(std::abs(mean), 5 * se + 1e-12) << c.name << ": oracle CE - optimum = " << mean << " (se " << se << "), optimum "
                                              << opt_sum / n;
  }
}

TEST(StateTaskDataset, WindowsStartAtDocumentsAndCarryEachTargetsOptimum) {
  for (const std::string& name : state_task_names()) {
    for (int L : {5, 32, 200}) {
      StateTaskDatasetOptions o;
      o.val_documents = 64;
      const StateTaskDataset ds(state_task(name, 3, 0.5, L), o);
      const DataSource& src = ds;
      const RefProcess ref(ds.config());
      for (int T : {8, 40, 128}) {
        const int nw = src.num_eval_windows(T);
        ASSERT_GT(nw, 0) << name << " L " << L << " T " << T;
        std::vector<int> tok, tgt;
        std::vector<std::uint8_t> fl;
        std::vector<double> opt;
        double sum = 0;
        for (int i = 0; i < nw; ++i) {
          src.eval_window(i, T, tok, tgt, fl);
          ASSERT_EQ(tok[0], kSep) << "every window starts at a document";
          ASSERT_TRUE(src.eval_window_optimal(i, T, opt));
          ASSERT_EQ(int(opt.size()), T);
          // the oracle's entropy at each target, from the window's tokens alone
          std::vector<int> s = ref.initial();
          for (int t = 0; t < T; ++t) {
            if (tok[t] == kSep) s = ref.initial();
            double h = 0;
            if (tok[t] != '\n' && tgt[t] != kSep && tgt[t] != '\n') {
              for (char x : ref.alphabet) {
                const double pr = ref.prob(s, x);
                if (pr > 0) h -= pr * std::log(pr);
              }
            }
            EXPECT_NEAR(opt[t], h, 1e-12) << name << " window " << i << " t " << t;
            if (tgt[t] != kSep && tgt[t] != '\n') s = ref.next(s, char(tgt[t]));
            sum += opt[t];
          }
        }
        EXPECT_NEAR(src.mean_optimal_loss(T, nw), sum / (double(nw) * T), 1e-12);
        src.eval_window_optimal(0, T, opt);
        double first = 0;
        for (double v : opt) first += v;
        EXPECT_NEAR(src.mean_optimal_loss(T, 1), first / T, 1e-12);
      }
    }
  }
  // data without a known optimum: false and NaN
  const DataSource& text = TextDataset::from_string(std::string(400, 'x') + "\n\n" + std::string(400, 'y'));
  std::vector<double> opt;
  EXPECT_FALSE(text.eval_window_optimal(0, 16, opt));
  ASSERT_EQ(opt.size(), 16u);
  EXPECT_TRUE(std::isnan(opt[0]));
  EXPECT_TRUE(std::isnan(text.mean_optimal_loss(16, 2)));
  TaskConfig tc;
  tc.name = "addition", tc.difficulty = 2;
  const TaskDataset tasks(tc);
  EXPECT_FALSE(static_cast<const DataSource&>(tasks).eval_window_optimal(0, 16, opt));
  EXPECT_TRUE(std::isnan(static_cast<const DataSource&>(tasks).mean_optimal_loss(16, 2)));
}

TEST(StateTaskDataset, TrainingRowsArePackedDocuments) {
  const StateTaskDataset ds(state_task("permutation", 3, 0.5, 10));
  const DataSource& src = ds;
  EXPECT_EQ(src.vocab_size(), 257);
  std::vector<int> tok, tgt;
  std::vector<std::uint8_t> fl;
  Rng rng(5);
  const int B = 3, T = 40;
  src.sample_batch(rng, B, T, tok, tgt, fl);
  ASSERT_EQ(int(tok.size()), B * T);
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < T; ++t) {
      const int i = b * T + t;
      EXPECT_EQ(tok[i] == kSep, t % 12 == 0) << "documents of 10 symbols + kSep + '\\n' back to back from the row start";
      EXPECT_EQ(fl[i], t == 0 || tok[i] == kSep ? 1 : 0);
      if (t + 1 < T) {
        EXPECT_EQ(tgt[i], tok[i + 1]);
      }
    }
  EXPECT_TRUE(contains(src.describe(), "task permutation") && contains(src.describe(), "reveal 0.5")) << src.describe();
}

TEST(StateTasks, RefusalsNameTheField) {
  const std::pair<StateTaskConfig, std::string> bad[] = {
      {state_task("running_sum", 1), "task_difficulty"},  {state_task("running_sum", 11), "task_difficulty"},
      {state_task("permutation", 2), "task_difficulty"},  {state_task("permutation", 5), "task_difficulty"},
      {state_task("brackets", 1), "task_difficulty"},     {state_task("brackets", 65), "task_difficulty"},
      {state_task("running_sum", 3, -0.1), "task_reveal"}, {state_task("running_sum", 3, 1.5), "task_reveal"},
      {state_task("brackets", 3, std::nan("")), "task_reveal"}, {state_task("running_sum", 3, 0.5, 0), "task_length"},
      {state_task("running_sum", 3, 0.5, kMaxStateTaskLength + 1), "task_length"}, {state_task("sorting", 3), "StateTaskConfig.name"}};
  for (const auto& b : bad) {
    const std::string e = error_of([&] { b.first.validate(); });
    EXPECT_TRUE(contains(e, b.second)) << b.first.name << ": " << e;
    EXPECT_TRUE(contains(error_of([&] { StateTaskDataset ds(b.first); }), b.second));
  }
  EXPECT_TRUE(contains(error_of([&] { state_task("running_sum", 11).validate(); }), "[2, 10]"));
  EXPECT_TRUE(contains(error_of([&] { state_task("permutation", 5).validate(); }), "got 5"));
  EXPECT_NO_THROW(state_task("running_sum", 2, 0.0, 1).validate());
  EXPECT_NO_THROW(state_task("permutation", 4, 1.0, kMaxStateTaskLength).validate());
  EXPECT_TRUE(contains(error_of([&] { state_document_optimal(StateProcess(state_task("brackets", 2)), ")"); }), "cannot follow"));
  EXPECT_TRUE(contains(error_of([&] { state_document_optimal(StateProcess(state_task("running_sum", 3)), "05"); }), "not in the alphabet"));
  StateTaskDatasetOptions o;
  o.val_documents = -1;
  EXPECT_TRUE(contains(error_of([&] { StateTaskDataset ds(state_task("brackets", 3), o); }), "val_documents"));
}

}  // namespace test_data_state_tasks
