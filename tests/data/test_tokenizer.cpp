// fbt::ByteTokenizer: byte round trip, the document separator, refusal of out-of-range tokens.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "fbt/data/tokenizer.hpp"

// The file's own namespace: with FBT_TEST_UNITY an area's test files share one translation unit.
namespace test_data_tokenizer {

using namespace fbt;

TEST(ByteTokenizer, VocabularyIsBytesPlusSeparator) {
  EXPECT_EQ(ByteTokenizer::vocab_size(), 257);
  EXPECT_EQ(ByteTokenizer::kSep, 256);
  EXPECT_EQ(kSep, 256);
}

TEST(ByteTokenizer, RoundTripsEveryByte) {
  std::string all;
  for (int c = 0; c < 256; ++c) all.push_back(static_cast<char>(c));
  all += "hello, world\n\xc3\xa9";  // UTF-8 stays bytes
  const std::vector<int> t = ByteTokenizer::encode(all);
  ASSERT_EQ(t.size(), all.size());
  for (int c = 0; c < 256; ++c) EXPECT_EQ(t[c], c);  // bytes >= 128 map to 128..255, not negatives
  EXPECT_EQ(ByteTokenizer::decode(t), all);
  EXPECT_TRUE(ByteTokenizer::encode("").empty());
}

TEST(ByteTokenizer, DocumentStartsWithSeparator) {
  const std::vector<int> d = ByteTokenizer::encode_document("ab");
  ASSERT_EQ(d.size(), 3u);
  EXPECT_EQ(d[0], kSep);
  EXPECT_EQ(d[1], 'a');
  EXPECT_EQ(d[2], 'b');
  EXPECT_EQ(ByteTokenizer::encode_document(""), std::vector<int>{kSep});
}

TEST(ByteTokenizer, DecodeSkipsSeparatorDecodeVisibleMarksIt) {
  std::vector<int> t = ByteTokenizer::encode_document("one");
  const std::vector<int> two = ByteTokenizer::encode_document("two");
  t.insert(t.end(), two.begin(), two.end());
  EXPECT_EQ(ByteTokenizer::decode(t), "onetwo");
  EXPECT_EQ(ByteTokenizer::decode_visible(t), "\n<|sep|>\none\n<|sep|>\ntwo");
}

TEST(ByteTokenizer, RefusesTokensOutsideTheVocabulary) {
  for (int bad : {-1, 257, 1000}) {
    try {
      ByteTokenizer::decode(std::vector<int>{'a', bad});
      FAIL() << "token " << bad << " accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(std::to_string(bad)), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("position 1"), std::string::npos) << e.what();
    }
  }
}

}  // namespace test_data_tokenizer
