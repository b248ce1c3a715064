// fbt::TokenFile (io/token_file.hpp): every format reads back the ids written byte by byte (.bin uint16 and
// uint32 and the other widths named by token_dtype; .npy int32, int64, uint16, uint32), and every hostile
// file is refused with the file named and what was expected: odd byte length, empty, a 2-d or float or
// big-endian .npy, a truncated or padded .npy, a dtype that contradicts the header, and ids outside the
// vocabulary (with the element index, the byte offset and the id).
#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include <sys/stat.h>
#include <unistd.h>

#include "common/io_test.hpp"
#include "common/token_files.hpp"
#include "fbt/io/token_file.hpp"

namespace test_io_token_file {

using namespace fbt;
using namespace fbt_test;

class TokenFileTest : public TempDirTest {};

std::vector<int> all(const TokenFile& f) {
  std::vector<int> v(std::size_t(f.size()));
  f.copy(0, f.size(), v.data());
  return v;
}

const std::vector<std::int64_t> kIds = {256, 1, 2, 65535, 0, 300, 7};

TEST_F(TokenFileTest, BinUint16IsNanoGptsFormat) {
  write_token_bin(path("a.bin"), kIds, 2);
  const TokenFile f = TokenFile::open(path("a.bin"));  // auto = uint16
  EXPECT_EQ(f.dtype(), TokenDtype::u16);
  EXPECT_EQ(all(f), std::vector<int>(kIds.begin(), kIds.end()));
  EXPECT_EQ(f.max_id(), 65535);
  EXPECT_EQ(f.byte_offset(3), 6u);
}

TEST_F(TokenFileTest, BinOtherWidthsAsTokenDtypeSays) {
  const std::vector<std::int64_t> big = {70000, 0, 151643, 3};
  write_token_bin(path("a.bin"), big, 4);
  EXPECT_EQ(all(TokenFile::open(path("a.bin"), "uint32")), std::vector<int>({70000, 0, 151643, 3}));
  EXPECT_EQ(all(TokenFile::open(path("a.bin"), "int32")), std::vector<int>({70000, 0, 151643, 3}));
  write_token_bin(path("b.bin"), big, 8);
  EXPECT_EQ(all(TokenFile::open(path("b.bin"), "int64")), std::vector<int>({70000, 0, 151643, 3}));
  // the same 16 bytes read as uint16 are other ids: the element type is not in a .bin, so it must be given
  EXPECT_EQ(TokenFile::open(path("a.bin")).size(), 8u);
}

TEST_F(TokenFileTest, NpyEveryIntegerDtype) {
  for (const char* d : {"<u2", "<u4", "<i4", "<i8"}) {
    SCOPED_TRACE(d);
    write_token_npy(path("a.npy"), d, kIds);
    const TokenFile f = TokenFile::open(path("a.npy"));
    EXPECT_EQ(all(f), std::vector<int>(kIds.begin(), kIds.end()));
    const std::uint64_t header = read_bytes(path("a.npy")).size() - kIds.size() * std::uint64_t(d[2] - '0');
    EXPECT_EQ(header % 64, 0u) << "the fixture pads the header to a multiple of 64 bytes";
    EXPECT_EQ(f.byte_offset(0), header);
    EXPECT_EQ(f.byte_offset(2), header + 2 * std::uint64_t(d[2] - '0'));
  }
  write_token_npy(path("a.npy"), "<i4", kIds);
  EXPECT_EQ(TokenFile::open(path("a.npy"), "int32").size(), kIds.size());  // a dtype that agrees is accepted
}

TEST_F(TokenFileTest, OddByteLengthIsRefused) {
  write_file(path("odd.bin"), std::string(5, '\1'));
  EXPECT_FBT_ERROR(TokenFile::open(path("odd.bin")), "odd.bin", "is 5 bytes, not a whole number of 2-byte uint16 ids", "nanoGPT");
  write_file(path("six.bin"), std::string(6, '\1'));
  EXPECT_FBT_ERROR(TokenFile::open(path("six.bin"), "uint32"), "six.bin", "is 6 bytes, not a whole number of 4-byte uint32 ids");
}

TEST_F(TokenFileTest, EmptyFilesAreRefused) {
  write_file(path("e.bin"), "");
  EXPECT_FBT_ERROR(TokenFile::open(path("e.bin")), "e.bin", "is empty");
  write_file(path("e.npy"), npy_bytes("<u2", "(0,)", ""));
  EXPECT_FBT_ERROR(TokenFile::open(path("e.npy")), "e.npy", "is empty (a 0-length array");
}

TEST_F(TokenFileTest, NpyOfAnotherShapeOrDtypeIsRefused) {
  write_file(path("2d.npy"), npy_bytes("<i4", "(2, 2)", le_bytes({1, 2, 3, 4}, 4)));
  EXPECT_FBT_ERROR(TokenFile::open(path("2d.npy")), "2d.npy", "shape (2, 2)", "expected a 1-d array of token ids");
  write_file(path("f.npy"), npy_bytes("<f4", "(2,)", le_bytes({0, 0}, 4)));
  EXPECT_FBT_ERROR(TokenFile::open(path("f.npy")), "f.npy", "dtype '<f4'", "expected int32");
  write_file(path("be.npy"), npy_bytes(">i4", "(2,)", le_bytes({0, 0}, 4)));
  EXPECT_FBT_ERROR(TokenFile::open(path("be.npy")), "be.npy", "big-endian");
  write_token_npy(path("u4.npy"), "<u4", kIds);
  EXPECT_FBT_ERROR(TokenFile::open(path("u4.npy"), "uint16"), "u4.npy", "holds uint32 ids, but token_dtype is uint16");
  write_file(path("junk.npy"), "not an npy file at all");
  EXPECT_FBT_ERROR(TokenFile::open(path("junk.npy")), "junk.npy", "magic");
}

TEST_F(TokenFileTest, NpyTruncatedOrPaddedIsRefused) {
  write_file(path("short.npy"), npy_bytes("<i4", "(4,)", le_bytes({1, 2, 3}, 4)));
  EXPECT_FBT_ERROR(TokenFile::open(path("short.npy")), "short.npy", "promises 4 int32 ids (16 bytes) but 12 bytes of data follow");
  write_file(path("long.npy"), npy_bytes("<u2", "(2,)", le_bytes({1, 2, 3}, 2)));
  EXPECT_FBT_ERROR(TokenFile::open(path("long.npy")), "long.npy", "promises 2 uint16 ids (4 bytes) but 6 bytes");
}

TEST_F(TokenFileTest, IdsOutsideTheVocabularyAreNamedWithTheirOffset) {
  write_token_bin(path("a.bin"), kIds, 2);
  const TokenFile f = TokenFile::open(path("a.bin"));
  EXPECT_NO_THROW(f.check_vocab(65536));
  EXPECT_FBT_ERROR(f.check_vocab(257), "a.bin", "token 3 (byte offset 6) is id 65535, outside the vocabulary [0, 257)");
  write_token_npy(path("neg.npy"), "<i8", {5, 6, -1});
  EXPECT_FBT_ERROR(TokenFile::open(path("neg.npy")).check_vocab(10), "neg.npy", "token 2 (byte offset 144) is id -1");  // a 128-byte header, then 2 x 8 bytes
  write_token_npy(path("huge.npy"), "<i8", {std::int64_t(1) << 40});
  EXPECT_FBT_ERROR(TokenFile::open(path("huge.npy")).check_vocab(1 << 30), "id 1099511627776, outside");
}

// The scan is chunked and shared among threads: whichever thread finds a bad chunk first, the id
// reported is the first bad one of the file (here bad ids at the end of chunk 1 and the start of chunk 2,
// and at the last id), for every thread count and element type.
TEST_F(TokenFileTest, TheChunkedScanReportsTheFirstBadIdWhateverTheThreads) {
  const std::uint64_t C = TokenFile::kVocabScanChunk, n = 3 * C + 5;
  std::string bytes(std::size_t(2 * n), '\0');
  auto put = [&](std::uint64_t i, int v) { bytes[std::size_t(2 * i)] = char(v & 0xff), bytes[std::size_t(2 * i + 1)] = char(v >> 8); };
  for (std::uint64_t i = 0; i < n; ++i) put(i, int(i % 50));
  write_file(path("ok.bin"), bytes);
  put(2 * C - 1, 60), put(2 * C, 70);
  write_file(path("two.bin"), bytes);
  for (std::uint64_t i = 0; i < n; ++i) put(i, int(i % 50));
  put(n - 1, 99);
  write_file(path("last.bin"), bytes);
  bytes.clear();
  const TokenFile ok = TokenFile::open(path("ok.bin")), two = TokenFile::open(path("two.bin")), last = TokenFile::open(path("last.bin"));
  for (int threads : {1, 2, 3, 8}) {
    SCOPED_TRACE("threads " + std::to_string(threads));
    EXPECT_NO_THROW(ok.check_vocab(50, "vocab_size", threads));
    EXPECT_FBT_ERROR(two.check_vocab(50, "vocab_size", threads), "two.bin",
                     "token " + std::to_string(2 * C - 1) + " (byte offset " + std::to_string(2 * (2 * C - 1)) + ") is id 60, outside the vocabulary [0, 50)");
    EXPECT_FBT_ERROR(last.check_vocab(50, "vocab_size", threads), "token " + std::to_string(n - 1) + " ", "is id 99");
    EXPECT_NO_THROW(last.check_vocab(100, "vocab_size", threads));
  }
  EXPECT_EQ(last.max_id(), 99);
  // the other element types' fast paths: signed ids below 0, unsigned ones over the vocabulary
  write_token_npy(path("i4.npy"), "<i4", {3, 2, -5, 1});
  EXPECT_FBT_ERROR(TokenFile::open(path("i4.npy")).check_vocab(10), "i4.npy", "token 2 ", "is id -5");
  write_token_npy(path("u4.npy"), "<u4", {3, 4000000000, 1});
  EXPECT_FBT_ERROR(TokenFile::open(path("u4.npy")).check_vocab(10), "u4.npy", "token 1 ", "is id 4000000000");
  EXPECT_EQ(TokenFile::open(path("u4.npy")).max_id(), 4000000000);
}

/// Resident bytes of this process (/proc/self/statm), or -1 where /proc is not available.
long long resident_bytes() {
  std::ifstream in("/proc/self/statm");
  long long size = 0, resident = -1;
  if (!(in >> size >> resident)) return -1;
  return resident * ::sysconf(_SC_PAGESIZE);
}

// A scanned chunk's pages are handed back: checking a 128 MiB file leaves a few chunks resident, not the
// file (before, the scan kept every page of the mapping resident: a corpus cost its size in memory).
TEST_F(TokenFileTest, TheVocabularyScanReleasesThePagesItRead) {
  if (resident_bytes() < 0) GTEST_SKIP() << "no /proc/self/statm";
  const std::uint64_t n = std::uint64_t(64) << 20;  // 64 Mi uint16 ids, 128 MiB
  {
    std::string bytes(std::size_t(2 * n), '\0');
    for (std::uint64_t i = 0; i < n; ++i) bytes[std::size_t(2 * i)] = char(i % 200);
    write_file(path("big.bin"), bytes);
  }
  const TokenFile f = TokenFile::open(path("big.bin"));
  ASSERT_TRUE(f.size() == n);
  const long long before = resident_bytes();
  f.check_vocab(200, "vocab_size", 2);
  const long long grown = resident_bytes() - before;
  EXPECT_LT(grown, 48ll << 20) << "the scan left " << (grown >> 20) << " MiB of the 128 MiB file resident";
}

TEST_F(TokenFileTest, NotAFileIsRefused) {
  EXPECT_FBT_ERROR(TokenFile::open(path("missing.bin")), "missing.bin", "cannot open");
  EXPECT_FBT_ERROR(TokenFile::open(dir_.string()), "is a directory");
  ASSERT_EQ(::mkfifo(path("fifo.bin").c_str(), 0600), 0);
  EXPECT_FBT_ERROR(TokenFile::open(path("fifo.bin")), "fifo.bin", "not a regular file");
  write_token_bin(path("a.bin"), kIds, 2);
  EXPECT_FBT_ERROR(TokenFile::open(path("a.bin"), "float32"), "token_dtype", "float32");
}

TEST(TokenFilePath, ExtensionPicksTheFormat) {
  EXPECT_TRUE(is_token_file_path("data/train.bin"));
  EXPECT_TRUE(is_token_file_path("x.npy"));
  EXPECT_FALSE(is_token_file_path("corpus.txt"));
  EXPECT_FALSE(is_token_file_path(".bin"));
  EXPECT_FALSE(is_token_file_path("binary"));
}

}  // namespace test_io_token_file
