// fbt::TokenFileDataset (data/token_dataset.hpp): windows hold the file's ids (targets shifted by one),
// doc_start is 1 at the separator id (or only at position 0 without one), the validation split is the
// file's tail (cut at a separator when there is one) or a second file, batches depend only on the Rng,
// a byte-tokenized file gives the very batches TextDataset gives for the same text, and bad settings are
// refused up front (an id outside the vocabulary, a separator outside it, a split too short).
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common/io_test.hpp"
#include "common/token_files.hpp"
#include "fbt/data/dataset.hpp"
#include "fbt/data/token_dataset.hpp"

namespace test_data_token_dataset {

using namespace fbt;
using namespace fbt_test;

class TokenDatasetTest : public TempDirTest {};

// n ids: documents of 3..9 ids in [1, 20) after a separator 0
std::vector<std::int64_t> docs_stream(int n) {
  Rng rng(5);
  std::vector<std::int64_t> v;
  while (int(v.size()) < n) {
    v.push_back(0);
    const int len = 3 + int(rng.below(7));
    for (int i = 0; i < len && int(v.size()) < n; ++i) v.push_back(1 + rng.below(19));
  }
  return v;
}

TokenDatasetOptions opts(int T, int sep = 0, int vocab = 20) {
  TokenDatasetOptions o;
  o.seq_len = T, o.doc_sep = sep, o.vocab_size = vocab, o.val_fraction = 0.25;
  return o;
}

TEST_F(TokenDatasetTest, WindowsHoldTheIdsAndMarkTheSeparator) {
  const auto ids = docs_stream(400);
  write_token_bin(path("a.bin"), ids);
  const TokenFileDataset d = TokenFileDataset::open(path("a.bin"), opts(16));
  EXPECT_EQ(d.vocab_size(), 20);
  EXPECT_EQ(d.doc_sep(), 0);
  EXPECT_EQ(d.train_tokens() + d.val_tokens(), 400u);
  Rng rng(3);
  std::vector<int> tok, tgt;
  std::vector<std::uint8_t> ds;
  d.sample_batch(rng, 4, 16, tok, tgt, ds);
  ASSERT_EQ(tok.size(), 64u);
  for (int b = 0; b < 4; ++b) {
    // find the window in the train split: its T+1 ids are a contiguous run
    bool found = false;
    for (std::uint64_t s = 0; s + 16 < d.train_tokens() && !found; ++s) {
      bool same = true;
      for (int t = 0; t < 16 && same; ++t) same = ids[s + t] == tok[b * 16 + t] && ids[s + t + 1] == tgt[b * 16 + t];
      found = same;
    }
    EXPECT_TRUE(found) << "row " << b << " is not a window of the train split";
    for (int t = 0; t < 16; ++t) EXPECT_EQ(ds[b * 16 + t], (t == 0 || tok[b * 16 + t] == 0) ? 1 : 0);
  }
  // without a separator only position 0 starts a document
  const TokenFileDataset n = TokenFileDataset::open(path("a.bin"), opts(16, -1));
  EXPECT_EQ(n.doc_sep(), -1);
  Rng r2(3);
  n.sample_batch(r2, 4, 16, tok, tgt, ds);
  for (int i = 0; i < 64; ++i) EXPECT_EQ(ds[i], i % 16 == 0 ? 1 : 0);
}

TEST_F(TokenDatasetTest, ValidationIsTheTailCutAtASeparator) {
  const auto ids = docs_stream(400);
  write_token_bin(path("a.bin"), ids);
  const TokenFileDataset d = TokenFileDataset::open(path("a.bin"), opts(16));
  const std::uint64_t cut = d.train_tokens();
  EXPECT_GE(cut, 300u);  // floor(0.75 * 400), moved forward to a separator
  EXPECT_EQ(ids[cut], 0);
  for (std::uint64_t i = 300; i < cut; ++i) EXPECT_NE(ids[i], 0) << "the cut passed a separator at " << i;
  EXPECT_EQ(d.val_token(0), 0);
  EXPECT_EQ(d.num_eval_windows(16), int((400 - cut - 1) / 16));
  std::vector<int> tok, tgt;
  std::vector<std::uint8_t> ds;
  d.eval_window(1, 16, tok, tgt, ds);  // stride T from the cut
  for (int t = 0; t < 16; ++t) {
    EXPECT_EQ(tok[t], ids[cut + 16 + t]);
    EXPECT_EQ(tgt[t], ids[cut + 17 + t]);
  }
  EXPECT_NE(d.describe().find("from a separator"), std::string::npos) << d.describe();
  // without a separator the cut is at the token
  const TokenFileDataset n = TokenFileDataset::open(path("a.bin"), opts(16, -1));
  EXPECT_EQ(n.train_tokens(), 300u);
}

TEST_F(TokenDatasetTest, ValidationFile) {
  write_token_bin(path("a.bin"), docs_stream(200));
  const auto v = docs_stream(50);
  write_token_npy(path("v.npy"), "<i4", v);
  TokenDatasetOptions o = opts(8);
  o.val_path = path("v.npy");
  const TokenFileDataset d = TokenFileDataset::open(path("a.bin"), o);
  EXPECT_EQ(d.train_tokens(), 200u);
  EXPECT_EQ(d.val_tokens(), 50u);
  EXPECT_EQ(d.num_eval_windows(8), 6);
  std::vector<int> tok, tgt;
  std::vector<std::uint8_t> ds;
  d.eval_window(5, 8, tok, tgt, ds);
  for (int t = 0; t < 8; ++t) EXPECT_EQ(tok[t], v[40 + t]);
  // an id outside the vocabulary in the validation file names that file
  write_token_npy(path("bad.npy"), "<i4", {0, 1, 2, 20, 3, 4, 5, 6, 7, 8});
  o.val_path = path("bad.npy");
  EXPECT_FBT_ERROR(TokenFileDataset::open(path("a.bin"), o), "bad.npy", "token 3", "is id 20, outside the vocabulary [0, 20)");
}

TEST_F(TokenDatasetTest, BatchesDependOnlyOnTheRng) {
  write_token_bin(path("a.bin"), docs_stream(300));
  const TokenFileDataset d = TokenFileDataset::open(path("a.bin"), opts(8));
  Rng a(9), b(9);
  std::vector<int> t1, g1, t2, g2;
  std::vector<std::uint8_t> d1, d2;
  d.sample_batch(a, 3, 8, t1, g1, d1);
  d.sample_batch(b, 3, 8, t2, g2, d2);
  EXPECT_EQ(t1, t2);
  EXPECT_EQ(g1, g2);
  EXPECT_EQ(a.state(), b.state());
}

// A text encoded by fbt's byte tokenizer and written as a token file (what scripts/fbt_tokenize.py --tokenizer
// bytes writes) trains on exactly the batches the text file gives.
TEST_F(TokenDatasetTest, ByteTokenFileGivesTextDatasetsBatches) {
  std::string text;
  for (int i = 0; i < 40; ++i) text += "paragraph " + std::to_string(i * 7919 % 1000) + " of the test corpus\n\n";
  TextDatasetOptions to;
  to.val_fraction = 0, to.seq_len = 24;
  const TextDataset td = TextDataset::from_string(text, to);
  std::vector<std::int64_t> ids(td.train_stream().begin(), td.train_stream().end());
  write_token_bin(path("bytes.bin"), ids);
  write_token_bin(path("val.bin"), std::vector<std::int64_t>(ids.begin(), ids.begin() + 100));
  TokenDatasetOptions o = opts(24, kSep, ByteTokenizer::kVocabSize);
  o.val_path = path("val.bin");
  const TokenFileDataset kd = TokenFileDataset::open(path("bytes.bin"), o);
  Rng a(4), b(4);
  std::vector<int> t1, g1, t2, g2;
  std::vector<std::uint8_t> d1, d2;
  for (int step = 0; step < 5; ++step) {
    td.sample_batch(a, 4, 24, t1, g1, d1);
    kd.sample_batch(b, 4, 24, t2, g2, d2);
    ASSERT_EQ(t1, t2);
    ASSERT_EQ(g1, g2);
    ASSERT_EQ(d1, d2);
  }
}

TEST_F(TokenDatasetTest, BadSettingsAreRefusedUpFront) {
  write_token_bin(path("a.bin"), docs_stream(100));
  EXPECT_FBT_ERROR(TokenFileDataset::open(path("a.bin"), opts(8, 0, 10)), "a.bin", "outside the vocabulary [0, 10)", "byte offset");
  EXPECT_FBT_ERROR(TokenFileDataset::open(path("a.bin"), opts(8, 25)), "doc_sep_id 25 is outside the vocabulary [0, 20)");
  EXPECT_FBT_ERROR(TokenFileDataset::open(path("a.bin"), opts(60)), "a.bin", "validation split holds 25 tokens; needs at least 61", "raise val_fraction");
  EXPECT_FBT_ERROR(TokenFileDataset::open(path("a.bin"), opts(200)), "a.bin", "training split holds 75 tokens; needs at least 201");
  TokenDatasetOptions o = opts(8);
  o.val_fraction = 0;
  EXPECT_FBT_ERROR(TokenFileDataset::open(path("a.bin"), o), "val_fraction must be in (0, 1) without a validation file");
}

// vocab_check "windows": opening reads no id, and each window is checked as it is read, so a bad id stops
// the batch or the evaluation window that holds it, named as the full check names it; windows without it
// are unchanged. An id over 2^32 (int64) is caught by its true value, not as its truncation to int.
TEST_F(TokenDatasetTest, WindowsModeChecksEachWindowAsItIsRead) {
  std::vector<std::int64_t> ids = docs_stream(400);
  ids[350] = 25;  // in the validation split (the last 100 ids, from a separator)
  write_token_bin(path("a.bin"), ids);
  TokenDatasetOptions o = opts(8);
  EXPECT_FBT_ERROR(TokenFileDataset::open(path("a.bin"), o), "a.bin", "token 350 (byte offset 700) is id 25");
  o.vocab_check = "windows";
  const TokenFileDataset d = TokenFileDataset::open(path("a.bin"), o);
  ASSERT_LE(d.train_tokens(), 350u);
  Rng rng(3);
  std::vector<int> tok, tgt;
  std::vector<std::uint8_t> ds;
  for (int i = 0; i < 50; ++i) d.sample_batch(rng, 4, 8, tok, tgt, ds);  // the training split is clean
  const std::uint64_t at = 350 - (400 - d.val_tokens());                 // the bad id's place in the validation split
  for (int w = 0; w < d.num_eval_windows(8); ++w) {
    const bool holds = at >= std::uint64_t(w) * 8 && at <= std::uint64_t(w) * 8 + 8;
    if (holds) EXPECT_FBT_ERROR(d.eval_window(w, 8, tok, tgt, ds), "a.bin", "token 350 (byte offset 700) is id 25, outside the vocabulary [0, 20)");
    else EXPECT_NO_THROW(d.eval_window(w, 8, tok, tgt, ds)) << "window " << w;
  }
  EXPECT_FBT_ERROR(d.val_token(at), "token 350 ");

  // in the training split, the batch that draws it stops
  ids = docs_stream(400);
  ids[40] = 20;
  write_token_bin(path("b.bin"), ids);
  const TokenFileDataset b = TokenFileDataset::open(path("b.bin"), o);
  Rng r2(4);
  EXPECT_FBT_ERROR(for (int i = 0; i < 200; ++i) b.sample_batch(r2, 4, 8, tok, tgt, ds), "b.bin", "token 40 (byte offset 80) is id 20");
  // an int64 id that truncates to a valid int
  write_token_npy(path("c.npy"), "<i8", {0, 1, 2, (std::int64_t(1) << 32) + 3, 4, 5, 6, 7, 8, 9, 10, 11});
  TokenDatasetOptions c = opts(2, 0, 20);
  c.vocab_check = "windows", c.val_fraction = 0.5;
  const TokenFileDataset cd = TokenFileDataset::open(path("c.npy"), c);
  EXPECT_FBT_ERROR(for (int i = 0; i < 100; ++i) cd.sample_batch(r2, 4, 2, tok, tgt, ds), "c.npy", "token 3 ", "is id 4294967299");
  o.vocab_check = "lazy";
  EXPECT_FBT_ERROR(TokenFileDataset::open(path("a.bin"), o), "vocab_check must be full or windows, got \"lazy\"");
}

}  // namespace test_data_token_dataset
