// The probing tasks (data/probe_tasks.hpp): every label is recomputed here from the prompt text alone (a
// small interpreter of the three templates), the counts and the group structure are the paper's
// (PROBING.md 1.1-1.3), labels are balanced inside every group, the answer never appears in the prompt,
// and the training documents carry the right answer after the final ':'.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <sstream>

#include "fbt/data/probe_tasks.hpp"
#include "common/errors.hpp"

namespace test_data_probe_tasks {

using namespace fbt;
using fbt_test::contains;
using fbt_test::error_of;

std::vector<std::string> lines_of(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string l;
  while (std::getline(ss, l)) out.push_back(l);
  return out;
}

/// The label a prompt's program leaves, by interpreting it line by line; also counts the null updates.
std::string interpret(const std::string& task, const std::string& prompt, int* nulls = nullptr) {
  std::map<std::string, std::string> var;
  std::string query;
  int n = 0;
  const std::vector<std::string> ls = lines_of(prompt);
  for (std::size_t i = 0; i + 1 < ls.size(); ++i) {
    const std::string& l = ls[i];
    if (l == "scratch += 0") { ++n; continue; }
    const auto x = l.find(" ^= ");
    if (x != std::string::npos) { var[l.substr(0, x)] = std::to_string(std::stoi(var[l.substr(0, x)]) ^ std::stoi(l.substr(x + 4))); continue; }
    const auto e = l.find(" = ");
    EXPECT_NE(e, std::string::npos) << l;
    if (l.substr(0, e) == "query") query = l.substr(e + 3);
    else var[l.substr(0, e)] = l.substr(e + 3);
  }
  if (nulls) *nulls = n;
  if (task == "completion") return var["required"] == var["completed"] ? "done" : "more";
  if (task == "delayed_memory") return var["state"] == "1" ? "one" : "zero";
  return var[query] == "1" ? "one" : "zero";
}

void check_common(const std::string& task, const std::vector<ProbeItem>& items) {
  std::map<int, std::map<std::string, int>> per_group;  // group -> label -> count
  for (const ProbeItem& it : items) {
    ASSERT_FALSE(it.text.empty());
    EXPECT_EQ(it.text.back(), ':') << "the final ':' is the probe position";
    EXPECT_EQ(it.position, -1);
    EXPECT_EQ(interpret(task, it.text), it.label) << it.text;
    EXPECT_EQ(it.text.find(it.label), std::string::npos) << "the answer appears in the prompt: " << it.text;
    ++per_group[it.group][it.label];
  }
  for (const auto& g : per_group) {
    ASSERT_EQ(g.second.size(), 2u) << "group " << g.first;
    EXPECT_EQ(g.second.begin()->second, std::next(g.second.begin())->second) << "group " << g.first << " is not label-balanced";
  }
}

TEST(ProbeTasks, CompletionTrackingFollowsTheTemplateAndCounts) {
  const std::vector<ProbeItem> items = probe_task_items("completion");
  ASSERT_EQ(items.size(), 1600u);  // 80 groups x 4 assignments x 5 values of N
  check_common("completion", items);
  std::set<std::pair<int, int>> pairs;
  for (const ProbeItem& it : items) {
    int n = 0;
    interpret("completion", it.text, &n);
    EXPECT_EQ(it.setting, "N=" + std::to_string(n));
    const auto ls = lines_of(it.text);
    EXPECT_EQ(ls.back(), "Status:");
    EXPECT_EQ(ls[0].rfind("required = ", 0), 0u);
    EXPECT_EQ(ls[1].rfind("completed = ", 0), 0u);
    EXPECT_EQ(ls[2].rfind("scratch = ", 0), 0u);
  }
  std::map<int, std::set<std::string>> group_texts;
  for (const ProbeItem& it : items) group_texts[it.group].insert(it.text);
  EXPECT_EQ(group_texts.size(), 80u);
  for (const auto& g : group_texts) EXPECT_EQ(g.second.size(), 20u);  // 4 assignments x 5 N, all distinct
  EXPECT_EQ(items[0].text, "required = " + lines_of(items[0].text)[0].substr(11) + "\ncompleted = " + lines_of(items[0].text)[1].substr(12) +
                               "\nscratch = " + lines_of(items[0].text)[2].substr(10) + "\nStatus:");  // N = 0 first
}

TEST(ProbeTasks, DelayedMemoryEnumeratesThe128ScratchContexts) {
  const std::vector<ProbeItem> items = probe_task_items("delayed_memory");
  ASSERT_EQ(items.size(), 1280u);  // 128 contexts x 2 states x 5 N
  check_common("delayed_memory", items);
  std::set<std::string> contexts;
  for (const ProbeItem& it : items) {
    const auto ls = lines_of(it.text);  // the context: the scratch line and the 6 ^= lines after the state line
    contexts.insert(ls[1] + "|" + ls[2] + ls[3] + ls[4] + ls[5] + ls[6] + ls[7]);
    EXPECT_EQ(ls[0].rfind("state = ", 0), 0u);
    EXPECT_EQ(lines_of(it.text).back(), "# final state:");
    EXPECT_EQ(std::count(it.text.begin(), it.text.end(), '^'), 6);
  }
  EXPECT_EQ(contexts.size(), 128u);
}

TEST(ProbeTasks, LatestWriteHasEveryRegisterWrittenWTimesAndOneQueryEach) {
  for (int m : {1, 2, 4, 8}) {  // the register-count sweep: 16 assignments
    ProbeTaskOptions o;
    o.registers = m, o.writes = 16 / m;
    const std::vector<ProbeItem> items = probe_task_items("latest_write", o);
    ASSERT_EQ(items.size(), std::size_t(256 * m)) << "m " << m;  // 128 groups x (schedule + complement) x m queries
    check_common("latest_write", items);
    for (const ProbeItem& it : items) {
      int nulls = 0;
      interpret("latest_write", it.text, &nulls);
      EXPECT_EQ(nulls, 8);
      for (int r = 0; r < m; ++r) {
        const std::string w = "r" + std::to_string(r) + " = ";
        int count = 0;
        for (std::size_t at = it.text.find(w); at != std::string::npos; at = it.text.find(w, at + 1)) ++count;
        EXPECT_EQ(count, 16 / m);
      }
      EXPECT_EQ(it.text.size(), items[0].text.size()) << "every prompt of a setting has one length";
    }
  }
  ProbeTaskOptions o;
  o.writes = 8;
  EXPECT_EQ(probe_task_items("latest_write", o).size(), 2048u);  // the overwrite sweep: m = 8, 128 groups
  ProbeTaskOptions bad;
  bad.registers = 11;
  EXPECT_THROW(probe_task_items("latest_write", bad), Error);
  EXPECT_THROW(probe_task_items("nonsense"), Error);
  bad = {}, bad.null_lines = {-1};
  EXPECT_THROW(probe_task_items("completion", bad), Error);
}

TEST(ProbeTasks, TrainingDocumentsEndWithTheRightAnswer) {
  for (const std::string& name : probe_task_names()) {
    const ProbeTaskDataset ds(name, name == "latest_write" ? 2 : 3);
    std::vector<int> tok, tgt;
    std::vector<std::uint8_t> fl;
    Rng rng(3);
    ds.sample_batch(rng, 2, 400, tok, tgt, fl);
    EXPECT_EQ(tok[0], kSep);
    Rng r2(4);
    for (int i = 0; i < 50; ++i) {
      const std::vector<int> d = ds.document(r2);
      const std::string text = ByteTokenizer::decode(std::vector<int>(d.begin() + 1, d.end()));
      const auto colon = text.rfind(':');  // the answer follows the final ':' at once: it is predicted there
      ASSERT_NE(colon, std::string::npos) << text;
      EXPECT_EQ(text.back(), '\n');
      EXPECT_EQ(interpret(name, text.substr(0, colon + 1)), text.substr(colon + 1, text.size() - colon - 2)) << text;
    }
    EXPECT_GT(ds.num_eval_windows(256), 0);
  }
  EXPECT_THROW(ProbeTaskDataset("latest_write", 0), Error);
  EXPECT_THROW(ProbeTaskDataset("completion", 2000), Error);
}

TEST(ProbeTasks, AMixOverWritesDrawsEachDocumentsWritesFromTheRange) {
  // latest_write trained on W = 1..3 writes per register: 8 x W write lines per document, every W drawn
  const ProbeTaskDataset ds("latest_write", 2, 1, 3);
  EXPECT_TRUE(contains(ds.describe(), "trained on 1..3"));
  Rng rng(11);
  std::map<int, int> seen;
  for (int i = 0; i < 300; ++i) {
    const std::vector<int> d = ds.document(rng);
    const std::string text = ByteTokenizer::decode(std::vector<int>(d.begin() + 1, d.end()));
    int writes = 0;
    for (const std::string& l : lines_of(text)) writes += l[0] == 'r';  // "r3 = 1"
    ASSERT_EQ(writes % 8, 0) << text;
    ++seen[writes / 8];
    const auto colon = text.rfind(':');
    EXPECT_EQ(interpret("latest_write", text.substr(0, colon + 1)), text.substr(colon + 1, text.size() - colon - 2)) << text;
  }
  EXPECT_EQ(seen.size(), 3u);
  for (const auto& [w, n] : seen) EXPECT_GT(n, 50) << "W = " << w;
  // without a range: the same documents as before (no extra draw)
  Rng a(4), b(4);
  EXPECT_EQ(ProbeTaskDataset("completion", 8).document(a), ProbeTaskDataset("completion", 8, 8, 8).document(b));
  EXPECT_TRUE(contains(error_of([] { ProbeTaskDataset("latest_write", 2, 0, 2); }), "task_min_difficulty must be in [1, "));
  EXPECT_TRUE(contains(error_of([] { ProbeTaskDataset("completion", 8, 9, 4); }), "task_min_difficulty (9) is above task_max_difficulty (4)"));
  EXPECT_NO_THROW(ProbeTaskDataset("completion", 8, 0, 32));  // 0 null lines is a document
}

TEST(ProbeTasks, RunningSumItemsAreLabelledWithTheTasksOwnState) {
  // the label is recomputed from the text: the digits' sum mod m, and the task's own process (StateProcess)
  // stepped over the symbols; items of a group are prefixes of one document (the task's own generator)
  ProbeTaskOptions o;
  o.difficulty = 7, o.groups = 40, o.prefix_symbols = {3, 12, 24};
  const std::vector<ProbeItem> items = probe_task_items("running_sum", o);
  ASSERT_EQ(items.size(), 120u);
  const StateProcess proc(StateTaskConfig{"running_sum", 7, 0.5, 24});
  Rng rng(o.seed);
  std::set<std::string> labels;
  for (std::size_t i = 0; i < items.size(); ++i) {
    const ProbeItem& it = items[i];
    const int t = o.prefix_symbols[i % 3];
    EXPECT_EQ(int(it.text.size()), t);
    EXPECT_EQ(it.setting, "t=" + std::to_string(t));
    EXPECT_EQ(it.group, int(i / 3));
    EXPECT_EQ(it.position, -1);
    int sum = 0, s = 0;
    for (char ch : it.text) {
      ASSERT_TRUE(ch >= '0' && ch <= '6') << it.text;
      sum += ch - '0', s = proc.next(s, proc.symbol_index(ch));
    }
    EXPECT_EQ(it.label, std::to_string(sum % 7)) << it.text;
    EXPECT_EQ(it.label, std::to_string(s));
    if (i % 3 == 0) {  // the group's document, drawn as the task draws its training documents
      const StateDocument d = generate_state_document(proc, rng);
      EXPECT_EQ(d.text().substr(0, 24), items[i + 2].text);  // text(): the symbols and the newline (kSep decodes to nothing)
      EXPECT_EQ(items[i + 1].text, items[i + 2].text.substr(0, 12));
      EXPECT_EQ(std::to_string(d.states[3]), it.label);
    }
    labels.insert(it.label);
  }
  EXPECT_EQ(labels.size(), 7u) << "every residue occurs";
  // the other running-state tasks: the label is the process's state after the prefix
  for (const std::string name : {"permutation", "brackets"}) {
    ProbeTaskOptions p;
    p.difficulty = name == "permutation" ? 3 : 4, p.groups = 10;
    const StateProcess pr(StateTaskConfig{name, p.difficulty, 0.5, 32});
    for (const ProbeItem& it : probe_task_items(name, p)) {
      int s = 0;
      for (char ch : it.text) s = pr.next(s, pr.symbol_index(ch));
      EXPECT_EQ(it.label, std::to_string(s)) << name << " " << it.text;
    }
  }
  ProbeTaskOptions bad;
  bad.difficulty = 11;
  EXPECT_THROW(probe_task_items("running_sum", bad), Error);
  bad = {}, bad.prefix_symbols = {0};
  EXPECT_THROW(probe_task_items("running_sum", bad), Error);
  bad = {}, bad.reveal = 1.5;
  EXPECT_THROW(probe_task_items("running_sum", bad), Error);
}

}  // namespace test_data_probe_tasks
