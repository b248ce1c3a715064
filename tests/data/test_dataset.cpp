// fbt::TextDataset: document split, train/validation split at a document boundary, training windows
// (targets shifted by one, doc_start at kSep), evaluation windows at stride T, determinism, and the
// refusals of missing, empty and too-short files.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include <sys/stat.h>
#include <unistd.h>

#include "fbt/data/dataset.hpp"
#include "common/errors.hpp"

// The file's own namespace: with FBT_TEST_UNITY an area's test files share one translation unit.
namespace test_data_dataset {

using namespace fbt;
using fbt_test::error_of;
using fbt_test::contains;

namespace {

// A file under gtest's temp dir, removed at scope exit.
struct TempFile {
  std::string path;
  explicit TempFile(const std::string& stem, const std::string& content) {
    path = ::testing::TempDir() + "fbt_data_" + stem + "_" +
           std::to_string(std::chrono::steady_clock::now().time_since_epoch().count()) + ".txt";
    std::ofstream f(path, std::ios::binary);
    f << content;
  }
  ~TempFile() { std::remove(path.c_str()); }
};

// n paragraphs of pseudo-random words, separated by 1..3 blank lines (some with spaces / "\r").
std::string make_corpus(int n, std::vector<std::string>& docs) {
  Rng rng(11);
  std::string text;
  const char* seps[] = {"\n", "\n\n", "  \n\r\n"};
  for (int d = 0; d < n; ++d) {
    std::string doc;
    const int lines = 1 + rng.below(3);
    for (int l = 0; l < lines; ++l) {
      const int words = 1 + rng.below(8);
      for (int w = 0; w < words; ++w) {
        if (w) doc += ' ';
        const int len = 1 + rng.below(6);
        for (int c = 0; c < len; ++c) doc += char('a' + rng.below(26));
      }
      doc += '\n';
    }
    docs.push_back(doc);
    text += doc;
    if (d + 1 < n) text += seps[rng.below(3)];
  }
  return text;
}

std::vector<int> encode_docs(const std::vector<std::string>& docs, std::size_t lo, std::size_t hi) {
  std::vector<int> out;
  for (std::size_t i = lo; i < hi; ++i) {
    const std::vector<int> t = ByteTokenizer::encode_document(docs[i]);
    out.insert(out.end(), t.begin(), t.end());
  }
  return out;
}

}  // namespace

TEST(TextDataset, SplitsParagraphsAtBlankLines) {
  const std::string text = "aaa\nxx\n\nbb\n\n\n  \t\ncccc\n \r\ndd";
  const std::vector<std::string> docs = TextDataset::split_documents(text, "blank_line");
  ASSERT_EQ(docs.size(), 4u);
  EXPECT_EQ(docs[0], "aaa\nxx\n");
  EXPECT_EQ(docs[1], "bb\n");
  EXPECT_EQ(docs[2], "cccc\n");
  EXPECT_EQ(docs[3], "dd");  // the last line keeps its missing newline
  EXPECT_EQ(TextDataset::split_documents(text, "none"), std::vector<std::string>{text});
  EXPECT_TRUE(TextDataset::split_documents("\n\n \n", "blank_line").empty());
}

TEST(TextDataset, ValidationIsTheLastDocumentsAtABoundary) {
  std::vector<std::string> docs;
  const std::string text = make_corpus(50, docs);
  TempFile f("split", text);
  TextDatasetOptions o;
  o.seq_len = 8;
  const TextDataset ds = TextDataset::from_file(f.path, o);
  EXPECT_EQ(ds.num_documents(), 50);
  EXPECT_EQ(ds.num_val_documents(), 5);  // round(0.1 * 50)
  EXPECT_EQ(ds.train_stream(), encode_docs(docs, 0, 45));
  EXPECT_EQ(ds.val_stream(), encode_docs(docs, 45, 50));
  EXPECT_EQ(ds.val_stream().front(), kSep);
  long expect = 0;  // one separator + the bytes per document; the blank lines between are gone
  for (const auto& d : docs) expect += 1 + long(d.size());
  EXPECT_EQ(ds.train_tokens() + ds.val_tokens(), expect);
  EXPECT_TRUE(contains(ds.describe(), f.path)) << ds.describe();
}

TEST(TextDataset, FromStringMatchesFromFile) {
  std::vector<std::string> docs;
  const std::string text = make_corpus(20, docs);
  TempFile f("same", text);
  const TextDataset a = TextDataset::from_file(f.path), b = TextDataset::from_string(text);
  EXPECT_EQ(a.train_stream(), b.train_stream());
  EXPECT_EQ(a.val_stream(), b.val_stream());
  EXPECT_EQ(b.num_val_documents(), 2);
}

TEST(TextDataset, SingleDocumentSplitsAtTheTokenLevel) {
  const std::string text(999, 'x');  // one document: 1000 tokens
  TextDatasetOptions o;
  o.doc_split = "none";
  o.val_fraction = 0.25;
  const TextDataset ds = TextDataset::from_string(text, o);
  EXPECT_EQ(ds.num_documents(), 1);
  EXPECT_EQ(ds.num_val_documents(), 0);
  EXPECT_EQ(ds.train_tokens(), 750);
  EXPECT_EQ(ds.val_tokens(), 250);
  EXPECT_EQ(ds.train_stream().front(), kSep);
  EXPECT_EQ(ds.val_stream().front(), 'x');
  o.val_fraction = 0.0;
  const TextDataset all = TextDataset::from_string(text, o);
  EXPECT_EQ(all.train_tokens(), 1000);
  EXPECT_EQ(all.val_tokens(), 0);
  EXPECT_EQ(all.num_eval_windows(16), 0);
}

TEST(TextDataset, WindowsAreSlicesOfTrainWithTargetsShiftedAndDocStartAtSep) {
  std::vector<std::string> docs;
  const TextDataset ds = TextDataset::from_string(make_corpus(60, docs));
  const DataSource& src = ds;  // used through the trainer's interface
  const int B = 16, T = 40;
  std::vector<int> tok, tgt;
  std::vector<std::uint8_t> ds_flags;
  Rng rng(5);
  int seps = 0;
  for (int rep = 0; rep < 5; ++rep) {
    src.sample_batch(rng, B, T, tok, tgt, ds_flags);
    ASSERT_EQ(tok.size(), std::size_t(B * T));
    ASSERT_EQ(tgt.size(), std::size_t(B * T));
    ASSERT_EQ(ds_flags.size(), std::size_t(B * T));
    for (int b = 0; b < B; ++b) {
      std::vector<int> w(tok.begin() + b * T, tok.begin() + (b + 1) * T);
      w.push_back(tgt[b * T + T - 1]);
      for (int t = 0; t + 1 < T; ++t) EXPECT_EQ(tgt[b * T + t], tok[b * T + t + 1]);
      const auto& tr = ds.train_stream();
      EXPECT_NE(std::search(tr.begin(), tr.end(), w.begin(), w.end()), tr.end()) << "row " << b;
      for (int t = 0; t < T; ++t) {
        const bool sep = tok[b * T + t] == kSep;
        seps += sep;
        EXPECT_EQ(ds_flags[b * T + t], (t == 0 || sep) ? 1 : 0) << b << "," << t;
      }
    }
  }
  EXPECT_GT(seps, 0);  // the windows do cross documents
}

TEST(TextDataset, SamplingDependsOnlyOnTheRngState) {
  std::vector<std::string> docs;
  const TextDataset ds = TextDataset::from_string(make_corpus(30, docs));
  std::vector<int> t1, g1, t2, g2, t3, g3;
  std::vector<std::uint8_t> d1, d2, d3;
  Rng a(42), b(42), c(43);
  ds.sample_batch(a, 4, 32, t1, g1, d1);
  ds.sample_batch(b, 4, 32, t2, g2, d2);
  ds.sample_batch(c, 4, 32, t3, g3, d3);
  EXPECT_EQ(t1, t2);
  EXPECT_EQ(g1, g2);
  EXPECT_EQ(d1, d2);
  EXPECT_NE(t1, t3);
  // Resume: a saved state reproduces the next batch.
  const std::string st = a.state();
  ds.sample_batch(a, 4, 32, t1, g1, d1);
  Rng r(0);
  r.set_state(st);
  ds.sample_batch(r, 4, 32, t2, g2, d2);
  EXPECT_EQ(t1, t2);
}

TEST(TextDataset, EvalWindowsCoverValidationAtStrideT) {
  std::vector<std::string> docs;
  TextDatasetOptions o;
  o.val_fraction = 0.3;
  const TextDataset ds = TextDataset::from_string(make_corpus(40, docs), o);
  const std::vector<int>& val = ds.val_stream();
  for (int T : {1, 7, 32, int(val.size()) - 1}) {
    const int n = ds.num_eval_windows(T);
    EXPECT_EQ(n, int((val.size() - 1) / T));
    EXPECT_LT(int(val.size()) - 1 - n * T, T);  // only a partial window is dropped
    std::vector<int> tok, tgt;
    std::vector<std::uint8_t> fl;
    std::vector<int> covered;  // every target, in order
    for (int i = 0; i < n; ++i) {
      ds.eval_window(i, T, tok, tgt, fl);
      ASSERT_EQ(tok.size(), std::size_t(T));
      for (int t = 0; t < T; ++t) {
        EXPECT_EQ(tok[t], val[std::size_t(i) * T + t]);
        EXPECT_EQ(fl[t], (t == 0 || tok[t] == kSep) ? 1 : 0);
        covered.push_back(tgt[t]);
      }
    }
    EXPECT_EQ(covered, std::vector<int>(val.begin() + 1, val.begin() + 1 + std::size_t(n) * T)) << "T=" << T;
  }
  std::vector<int> tok, tgt;
  std::vector<std::uint8_t> fl;
  EXPECT_THROW(ds.eval_window(ds.num_eval_windows(8), 8, tok, tgt, fl), Error);
}

TEST(TextDataset, RefusesMissingEmptyAndTooShortFiles) {
  const std::string missing = ::testing::TempDir() + "fbt_data_no_such_file.txt";
  std::string e = error_of([&] { TextDataset::from_file(missing); });
  EXPECT_TRUE(contains(e, missing) && contains(e, "cannot open")) << e;

  TempFile empty("empty", "");
  e = error_of([&] { TextDataset::from_file(empty.path); });
  EXPECT_TRUE(contains(e, empty.path) && contains(e, "is empty")) << e;

  TempFile blank("blank", "\n\n  \n");
  e = error_of([&] { TextDataset::from_file(blank.path); });
  EXPECT_TRUE(contains(e, blank.path) && contains(e, "is empty")) << e;

  TempFile shortf("short", "hello world\n\nsecond paragraph\n");  // 13 + 18 = 31 tokens
  TextDatasetOptions o;
  o.seq_len = 64;
  e = error_of([&] { TextDataset::from_file(shortf.path, o); });
  EXPECT_TRUE(contains(e, shortf.path) && contains(e, "holds 31 tokens; needs at least 130 for T=64") &&
              contains(e, "validation split of 0.1"))
      << e;
  // Long enough in total, but the train split (the first document) is too short for a window.
  o.seq_len = 13;
  e = error_of([&] { TextDataset::from_file(shortf.path, o); });
  EXPECT_TRUE(contains(e, shortf.path) && contains(e, "holds 31 tokens (train 13, validation 18)") &&
              contains(e, "needs at least 14"))
      << e;
  o.seq_len = 12;
  EXPECT_NO_THROW(TextDataset::from_file(shortf.path, o));
}

TEST(TextDataset, ReadsOnlyRegularFilesOfBoundedSize) {
  // /dev/zero was read without limit and a FIFO blocked the open forever: both are refused before opening
  std::string e = error_of([] { TextDataset::from_file("/dev/zero"); });
  EXPECT_TRUE(contains(e, "/dev/zero") && contains(e, "not a regular file")) << e;
  const std::string fifo = ::testing::TempDir() + "fbt_data_fifo_" + std::to_string(::getpid());
  std::remove(fifo.c_str());
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  e = error_of([&] { TextDataset::from_file(fifo); });
  std::remove(fifo.c_str());
  EXPECT_TRUE(contains(e, fifo) && contains(e, "not a regular file")) << e;
  e = error_of([] { TextDataset::from_file(::testing::TempDir()); });
  EXPECT_TRUE(contains(e, "is a directory")) << e;
  std::vector<std::string> docs;
  TempFile f("limit", make_corpus(50, docs));
  TextDatasetOptions o;
  o.max_bytes = 100;
  e = error_of([&] { TextDataset::from_file(f.path, o); });
  EXPECT_TRUE(contains(e, f.path) && contains(e, "over the 100-byte limit")) << e;
  o.max_bytes = kMaxTextFileBytes;
  EXPECT_EQ(TextDataset::from_file(f.path, o).num_documents(), 50);
}

TEST(TextDataset, RefusesBadOptionsNamingTheField) {
  TextDatasetOptions o;
  o.val_fraction = 1.0;
  EXPECT_TRUE(contains(error_of([&] { TextDataset::from_string("abc", o); }), "val_fraction"));
  o = {};
  o.doc_split = "sentences";
  EXPECT_TRUE(contains(error_of([&] { TextDataset::from_string("abc", o); }), "doc_split"));
  o = {};
  o.val_fraction = 0;
  const TextDataset ds = TextDataset::from_string("abc", o);
  std::vector<int> tok, tgt;
  std::vector<std::uint8_t> fl;
  Rng rng(1);
  EXPECT_NO_THROW(ds.sample_batch(rng, 2, 3, tok, tgt, fl));  // 4 tokens: exactly one window
  EXPECT_TRUE(contains(error_of([&] { ds.sample_batch(rng, 2, 4, tok, tgt, fl); }), "train split holds 4"));
}

}  // namespace test_data_dataset
