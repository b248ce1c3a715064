// tests/io/test_npy.cpp: fbt::save_npy / fbt::load_npy (xtensor's npy I/O behind fbt's checks).
//
// Round trips in float and double for 1-d, 2-d and 3-d shapes; the exact header bytes numpy expects;
// and the failures that must be an fbt::Error naming the file (missing, wrong dtype, truncated,
// not npy). Files with Fortran order and with long headers (which xtensor alone mis-reads) are built
// by hand. No numpy needed. Hostile files: a header length beyond the file or over the
// limit is refused before anything is allocated; a zero dimension cannot hide an overflowing shape;
// too many dimensions, FIFOs, devices and directories are refused.
#include <gtest/gtest.h>

#include <fbt/io/npy.hpp>

#include <cctype>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <iterator>
#include <string>
#include <vector>

#include <sys/stat.h>
#include <unistd.h>

namespace fs = std::filesystem;

#include "common/io_test.hpp"

// The file's own namespace: with FBT_TEST_UNITY an area's test files share one translation unit.
namespace test_io_npy {

using fbt_test::read_bytes;

namespace {

class Npy : public fbt_test::TempDirTest {};

// Writes a v1.0 .npy file with the given dict text and raw data, padded like numpy (total % 64 == 0).
void write_raw_npy(const std::string& p, std::string dict, const void* data, std::size_t nbytes) {
  dict += std::string(63 - (10 + dict.size()) % 64, ' ') + "\n";
  const auto len = std::uint16_t(dict.size());
  std::ofstream out(p, std::ios::binary);
  out.write("\x93NUMPY\x01\x00", 8);
  out.put(char(len & 0xff)).put(char(len >> 8));
  out << dict;
  out.write(static_cast<const char*>(data), std::streamsize(nbytes));
}

template <class T> class NpyRoundTrip : public Npy {};
using Scalars = ::testing::Types<float, double>;
TYPED_TEST_SUITE(NpyRoundTrip, Scalars);

TYPED_TEST(NpyRoundTrip, PreservesShapeAndValues) {
  using T = TypeParam;
  for (const fbt::Shape& shape : {fbt::Shape{7}, fbt::Shape{2, 3}, fbt::Shape{2, 3, 4}}) {
    std::vector<T> x(std::size_t(fbt::numel(shape)));
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = T(0.25) * T(i) - T(1) / T(3);
    const std::string p = this->path("x" + std::to_string(shape.size()) + ".npy");
    fbt::save_npy(p, x.data(), shape);
    EXPECT_FALSE(fs::exists(p + ".tmp"));

    auto [s, y] = fbt::load_npy<T>(p);
    EXPECT_EQ(s, shape);
    ASSERT_EQ(y.size(), x.size());
    for (std::size_t i = 0; i < x.size(); ++i) EXPECT_EQ(y[i], x[i]) << "element " << i;  // bit-exact
  }
}

TYPED_TEST(NpyRoundTrip, MatrixOverloadsSaveRowMajor) {
  using T = TypeParam;
  std::vector<T> buf = {1, 2, 3, 4, 5, 6};
  auto m = fbt::mat(buf.data(), 2, 3);  // (2, 3)
  fbt::save_npy(this->path("m.npy"), m);
  fbt::save_npy(this->path("cm.npy"), fbt::cmat(buf.data(), 3, 2));  // (3, 2)
  auto a = fbt::load_npy<T>(this->path("m.npy"));
  auto b = fbt::load_npy<T>(this->path("cm.npy"));
  EXPECT_EQ(a.shape, (fbt::Shape{2, 3}));
  EXPECT_EQ(b.shape, (fbt::Shape{3, 2}));
  EXPECT_EQ(std::vector<T>(a.data.begin(), a.data.end()), buf);
  EXPECT_EQ(fbt::cmat(b.data.data(), 3, 2)(2, 1), T(6));
}

TEST_F(Npy, HeaderBytesAreWhatNumpyExpects) {
  const float x[6] = {0, 1, 2, 3, 4, 5};
  const std::string p = path("h.npy");
  fbt::save_npy(p, x, {2, 3});
  const std::string b = read_bytes(p);
  ASSERT_GE(b.size(), 10u);
  EXPECT_EQ(b.substr(0, 6), "\x93NUMPY");
  EXPECT_EQ(b[6], '\x01');  // version 1.0
  EXPECT_EQ(b[7], '\x00');
  const std::size_t len = std::uint8_t(b[8]) | std::size_t(std::uint8_t(b[9])) << 8;  // little-endian
  const std::size_t offset = 10 + len;
  EXPECT_EQ(offset % 16, 0u) << "npy requires the data to start 16-byte aligned";
  ASSERT_EQ(b.size(), offset + 6 * sizeof(float));
  const std::string dict = b.substr(10, len);
  EXPECT_EQ(dict.rfind("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 0), 0u) << dict;
  EXPECT_EQ(dict.back(), '\n');
  EXPECT_EQ(dict.find_first_not_of(' ', dict.find('}') + 1), dict.size() - 1) << "padding must be spaces";
  EXPECT_EQ(std::memcmp(b.data() + offset, x, sizeof x), 0);

  fbt::save_npy(path("d.npy"), std::vector<double>(5).data(), {5});
  EXPECT_NE(read_bytes(path("d.npy")).find("{'descr': '<f8', 'fortran_order': False, 'shape': (5,), }"),
            std::string::npos);
}

TEST_F(Npy, SaveOverwritesAtomically) {
  const double a[2] = {1, 2}, b[3] = {3, 4, 5};
  const std::string p = path("o.npy");
  fbt::save_npy(p, a, {2});
  fbt::save_npy(p, b, {3});
  EXPECT_EQ(fbt::load_npy<double>(p).shape, fbt::Shape{3});
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 1);  // no .tmp left
}

TEST_F(Npy, MissingFileThrowsNamingIt) {
  const std::string p = path("does_not_exist.npy");
  EXPECT_FBT_ERROR(fbt::load_npy<float>(p), p, "cannot open", "'<f4'");
}

TEST_F(Npy, DtypeMismatchThrowsNamingFileAndBothDtypes) {
  const double x[4] = {1, 2, 3, 4};
  const std::string p = path("f64.npy");
  fbt::save_npy(p, x, {4});
  EXPECT_FBT_ERROR(fbt::load_npy<float>(p), p, "'<f8'", "'<f4'");
  EXPECT_EQ(fbt::load_npy<double>(p).data[3], 4.0);
}

TEST_F(Npy, TruncatedDataThrowsNamingFile) {
  std::vector<float> x(12, 1.0f);
  const std::string p = path("t.npy");
  fbt::save_npy(p, x.data(), {3, 4});
  fs::resize_file(p, fs::file_size(p) - 5);
  EXPECT_FBT_ERROR(fbt::load_npy<float>(p), p, "truncated", "(3, 4)");
}

TEST_F(Npy, TruncatedHeaderThrowsNamingFile) {
  const float x[3] = {1, 2, 3};
  const std::string p = path("th.npy");
  fbt::save_npy(p, x, {3});
  fs::resize_file(p, 40);  // inside the header dict
  EXPECT_FBT_ERROR(fbt::load_npy<float>(p), p, "truncated header");
  fs::resize_file(p, 4);  // inside the magic
  EXPECT_FBT_ERROR(fbt::load_npy<float>(p), p, "preamble");
}

TEST_F(Npy, NotAnNpyFileThrowsNamingFile) {
  const std::string p = path("text.npy");
  std::ofstream(p) << "hello, this is not a numpy file\n";
  EXPECT_FBT_ERROR(fbt::load_npy<float>(p), p, "magic");

  const float x[2] = {1, 2};
  const std::string q = path("badshape.npy");
  write_raw_npy(q, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, x), }", x, sizeof x);
  EXPECT_FBT_ERROR(fbt::load_npy<float>(q), q, "'shape'");
}

TEST_F(Npy, TrailingBytesThrow) {
  const float x[3] = {1, 2, 3};
  const std::string p = path("long.npy");
  write_raw_npy(p, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", x, sizeof x);
  EXPECT_FBT_ERROR(fbt::load_npy<float>(p), p, "(2,)", "8 data bytes", "holds 12");
}

TEST_F(Npy, FortranOrderFileLoadsRowMajor) {
  // numpy's np.save(p, a.T) for a C-order a writes fortran_order True: column-major data.
  const double colmajor[6] = {0, 3, 1, 4, 2, 5};  // the (2, 3) matrix [[0 1 2] [3 4 5]] by columns
  const std::string p = path("f.npy");
  write_raw_npy(p, "{'descr': '<f8', 'fortran_order': True, 'shape': (2, 3), }", colmajor, sizeof colmajor);
  auto [s, y] = fbt::load_npy<double>(p);
  EXPECT_EQ(s, (fbt::Shape{2, 3}));
  for (int i = 0; i < 6; ++i) EXPECT_EQ(y[std::size_t(i)], double(i));
}

TEST_F(Npy, LongHeaderRoundTrips) {
  // 30 axes push the header length to 182 = 0xB6, a low byte >= 0x80 that xtensor's reader
  // sign-extends; fbt reads such files itself. Shape (2, 1, 1, ..., 1, 3): 6 elements.
  fbt::Shape shape(30, 1);
  shape.front() = 2;
  shape.back() = 3;
  const float x[6] = {1, 2, 3, 4, 5, 6};
  const std::string p = path("deep.npy");
  fbt::save_npy(p, x, shape);
  const std::string b = read_bytes(p);
  ASSERT_GE(std::uint8_t(b[8]), 0x80) << "test no longer exercises the long-header path";
  auto [s, y] = fbt::load_npy<float>(p);
  EXPECT_EQ(s, shape);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(y[std::size_t(i)], x[i]);

  // The same with Fortran order: a long header and a transpose.
  const float colmajor[6] = {1, 4, 2, 5, 3, 6};
  std::string dict = "{'descr': '<f4', 'fortran_order': True, 'shape': (2, ";
  for (int i = 0; i < 28; ++i) dict += "1, ";
  dict += "3), }";
  write_raw_npy(path("deepf.npy"), dict, colmajor, sizeof colmajor);
  ASSERT_GE(std::uint8_t(read_bytes(path("deepf.npy"))[8]), 0x80);
  auto f = fbt::load_npy<float>(path("deepf.npy"));
  for (int i = 0; i < 6; ++i) EXPECT_EQ(f.data[std::size_t(i)], x[i]);
}

TEST_F(Npy, SaveIntoMissingDirectoryThrowsNamingFile) {
  const float x[1] = {1};
  const std::string p = path("no/such/dir/x.npy");
  EXPECT_FBT_ERROR(fbt::save_npy(p, x, {1}), p);
}

// ---- hostile files ----------------------------------------------------------------------

// A 13-byte v2.0 file announcing a 4 GiB header: refused by the header limit before anything is
// allocated (the old reader allocated and zeroed 4 GB first); one announcing more than the file holds
// is truncated.
TEST_F(Npy, HeaderLengthIsCheckedBeforeAllocating) {
  const std::string p = path("v2.npy");
  {
    std::ofstream out(p, std::ios::binary);
    out.write("\x93NUMPY\x02\x00\xff\xff\xff\xff{", 13);
  }
  ASSERT_EQ(fs::file_size(p), 13u);
  EXPECT_FBT_ERROR(fbt::load_npy<float>(p), p, "header length 4294967295", "65536-byte limit");
  {
    std::ofstream out(p, std::ios::binary);
    out.write("\x93NUMPY\x02\x00\x60\xea\x00\x00{", 13);  // 60000 bytes, under the limit, beyond the file
  }
  EXPECT_FBT_ERROR(fbt::load_npy<float>(p), p, "truncated header", "60000 bytes announced", "13 bytes");
}

// (0, 2^62, 2^62) has no data, but its strides overflow: refused, as is any shape whose non-zero
// dimensions multiply past 2^62 bytes, and a shape of more than 64 dimensions.
TEST_F(Npy, ShapesThatOverflowAreRefused) {
  const std::string p = path("zero.npy");
  write_raw_npy(p, "{'descr': '<f4', 'fortran_order': False, 'shape': (0, 4611686018427387904, 4611686018427387904), }", nullptr, 0);
  EXPECT_FBT_ERROR(fbt::load_npy<float>(p), p, "too large");
  write_raw_npy(p, "{'descr': '<f4', 'fortran_order': False, 'shape': (0, 2305843009213693952), }", nullptr, 0);  // 2^61 x 4 bytes = 2^63
  EXPECT_FBT_ERROR(fbt::load_npy<float>(p), p, "too large");
  write_raw_npy(p, "{'descr': '<f4', 'fortran_order': False, 'shape': (0, 3, 5), }", nullptr, 0);  // a real empty array
  EXPECT_EQ(fbt::load_npy<float>(p).shape, (fbt::Shape{0, 3, 5}));
  std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (";
  for (int i = 0; i < 65; ++i) dict += "1, ";
  dict += "), }";
  const float one = 1;
  write_raw_npy(p, dict, &one, 4);
  EXPECT_FBT_ERROR(fbt::load_npy<float>(p), p, "more than 64 dimensions");
}

// Fuzz findings: dicts with bytes after a value or after the closing '}'. fbt's old lenient
// parser read shape (2,) or (), then xt::load_npy parsed the same header its own way, found
// (0, 2^62, 2^62) and overflowed computing strides. The header is now parsed strictly, once.
TEST_F(Npy, HeaderWithBytesAfterAValueIsRefused) {
  const std::string p = path("junk.npy");
  const float two[2] = {1, 2};
  write_raw_npy(p, "{'descr': '<f4', 'fortran_order': False, 'shape':(2,)(0, 4611686018427387904, 4611686018427387904)( 5),}", two, 8);
  EXPECT_FBT_ERROR(fbt::load_npy<float>(p), p, "expected ',' or '}' after a value");
  const double one = 1;
  write_raw_npy(p, "{'descr': '<f8', 'fortran_order': False, 'shape': (), }          (0, 4611686018427387904, 4611686018427387904) }", &one, 8);
  EXPECT_FBT_ERROR(fbt::load_npy<double>(p), p, "bytes after the dict's closing '}'");
  write_raw_npy(p, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'shape': (2,), }", two, 8);
  EXPECT_FBT_ERROR(fbt::load_npy<float>(p), p, "'shape' twice");
  write_raw_npy(p, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'extra': 1, }", two, 8);
  EXPECT_FBT_ERROR(fbt::load_npy<float>(p), p, "unknown key 'extra'");
  write_raw_npy(p, "{'shape': (2,),'fortran_order':False,'descr':'<f4'}", two, 8);  // any order and spacing, no trailing comma
  EXPECT_EQ(fbt::load_npy<float>(p).data[1], 2.0f);
}

TEST_F(Npy, RefusesFifosDevicesAndDirectories) {
  const std::string fifo = path("fifo.npy");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_FBT_ERROR(fbt::load_npy<float>(fifo), fifo, "not a regular file");
  EXPECT_FBT_ERROR(fbt::load_npy<float>("/dev/zero"), "/dev/zero", "not a regular file");
  EXPECT_FBT_ERROR(fbt::load_npy<float>(dir_.string()), "is a directory");
}

}  // namespace

}  // namespace test_io_npy
