// tests/io/test_safetensors.cpp: the safetensors reader and writer (fbt/io/safetensors.hpp; spec 8-9).
//
// Round trips of F32/F64 tensors and metadata; the golden bytes of a one-tensor file (header length,
// header JSON, space padding to 8 bytes, little-endian data), as the reference writer produces them;
// atomic replacement; and every refusal rule, each on a hand-made or hand-corrupted file, each an
// fbt::Error naming the file and the tensor or field. If python3 has safetensors and numpy, files are
// also exchanged with it (skipped otherwise; nothing is required).
// Hostile files: deep nesting (150 KB of '[') is an error naming the byte, never a stack
// overflow; error text quotes bounded excerpts of 20 MB values; an 80,000-entry header parses (in
// linear time); a zero dimension cannot hide an overflowing shape; FIFOs, devices and directories are
// refused before they are opened; the data section is memory-mapped, or read, to the same bytes.
#include <gtest/gtest.h>

#include <fbt/io/safetensors.hpp>

#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
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
using nlohmann::json;

#include "common/io_test.hpp"

// The file's own namespace: with FBT_TEST_UNITY an area's test files share one translation unit.
namespace test_io_safetensors {

using fbt_test::read_bytes;

namespace {

class Safetensors : public fbt_test::TempDirTest {};

void write_bytes(const std::string& p, const std::string& b) {
  std::ofstream out(p, std::ios::binary);
  out.write(b.data(), std::streamsize(b.size()));
}
std::string le64(std::uint64_t n) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = char((n >> (8 * i)) & 0xff);
  return s;
}
// A file from header text and data bytes; the length field is the header's unless `len` is given.
std::string make_file(const std::string& header, const std::string& data, std::uint64_t len = ~std::uint64_t(0)) {
  return le64(len == ~std::uint64_t(0) ? header.size() : len) + header + data;
}
template <class T> std::string raw(std::initializer_list<T> v) {
  return std::string(reinterpret_cast<const char*>(&*v.begin()), v.size() * sizeof(T));
}
std::string entry(const char* dtype, const char* shape, int b, int e) {
  return std::string("{\"dtype\":\"") + dtype + "\",\"shape\":" + shape + ",\"data_offsets\":[" + std::to_string(b) + "," +
         std::to_string(e) + "]}";
}

TEST_F(Safetensors, RoundTripKeepsTensorsAndMetadata) {
  const std::vector<float> w = {1.5f, -2.25f, 3e-8f, 4e30f, -0.0f, 6.0f};  // (2, 3)
  const std::vector<double> b = {1.0 / 3.0, -1e-300, 2.5, 7.0};            // (4)
  const float s = 42.0f;                                                   // ()
  const std::map<std::string, std::string> meta = {{"format", "pt"}, {"note", "quotes \" and \\ and \xc3\xbcnicode"}, {"empty", ""}};
  const std::string p = path("rt.safetensors");
  fbt::save_safetensors(p,
                        {{"w", "F32", {2, 3}, w.data()}, {"b", "F64", {4}, b.data()}, {"s", "F32", {}, &s}, {"z", "F64", {0, 3}, nullptr}},
                        meta);
  EXPECT_FALSE(fs::exists(p + ".tmp"));

  const fbt::SafetensorsFile f = fbt::read_safetensors(p);
  EXPECT_EQ(f.path, p);
  EXPECT_EQ(f.metadata, meta);
  ASSERT_EQ(f.tensors.size(), 4u);
  // In data order, which is the order given.
  EXPECT_EQ(f.tensors[0].name, "w");
  EXPECT_EQ(f.tensors[1].name, "b");
  EXPECT_EQ(f.tensors[2].name, "s");
  EXPECT_EQ(f.tensors[3].name, "z");
  const auto* ew = f.find("w");
  const auto* eb = f.find("b");
  const auto* es = f.find("s");
  const auto* ez = f.find("z");
  ASSERT_TRUE(ew && eb && es && ez);
  EXPECT_EQ(f.find("nope"), nullptr);
  EXPECT_EQ(ew->dtype, "F32");
  EXPECT_EQ(ew->shape, (fbt::Shape{2, 3}));
  EXPECT_EQ(ew->begin, 0u);
  EXPECT_EQ(ew->end, 24u);
  EXPECT_EQ(eb->dtype, "F64");
  EXPECT_EQ(eb->shape, (fbt::Shape{4}));
  EXPECT_EQ(es->shape, fbt::Shape{});
  EXPECT_EQ(ez->shape, (fbt::Shape{0, 3}));
  EXPECT_EQ(ez->nbytes(), 0u);
  EXPECT_EQ(std::memcmp(f.bytes(*ew), w.data(), 24), 0);  // bit for bit, -0.0 included
  EXPECT_EQ(std::memcmp(f.bytes(*eb), b.data(), 32), 0);
  EXPECT_EQ(std::memcmp(f.bytes(*es), &s, 4), 0);
  EXPECT_EQ(f.data.size(), 24u + 32u + 4u);

  // No metadata, no tensors: still a valid file.
  fbt::save_safetensors(path("empty.safetensors"), {});
  const auto e = fbt::read_safetensors(path("empty.safetensors"));
  EXPECT_TRUE(e.tensors.empty());
  EXPECT_TRUE(e.metadata.empty());
}

TEST_F(Safetensors, GoldenBytesOfOneTensor) {
  const float a[2] = {1.0f, 2.0f};
  const std::string p = path("golden.safetensors");
  fbt::save_safetensors(p, {{"a", "F32", {2}, a}}, {});
  const std::string b = read_bytes(p);
  // 54 bytes of JSON padded with 2 spaces to 56 = 0x38: what the reference writer produces.
  ASSERT_EQ(b.size(), 8u + 56u + 8u);
  EXPECT_EQ(b.substr(0, 8), std::string("\x38\0\0\0\0\0\0\0", 8));
  const std::string header = b.substr(8, 56);
  EXPECT_EQ(header, R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}  )");
  EXPECT_EQ(json::parse(header), json::parse(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})"));
  EXPECT_EQ(b.substr(64), std::string("\x00\x00\x80\x3f\x00\x00\x00\x40", 8));  // 1.0f, 2.0f little-endian

  // With metadata: "__metadata__" comes first, the padding still makes the data start 8-aligned.
  fbt::save_safetensors(p, {{"a", "F32", {2}, a}}, {{"format", "pt"}});
  const std::string m = read_bytes(p);
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | std::uint8_t(m[i]);
  EXPECT_EQ(n % 8, 0u);
  EXPECT_EQ(n, 88u);  // 85 bytes of JSON + 3 spaces
  EXPECT_EQ(m.substr(8, std::size_t(n)), R"({"__metadata__":{"format":"pt"},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}   )");
  EXPECT_EQ(m.size(), 8 + n + 8);
}

TEST_F(Safetensors, SavingReplacesAtomically) {
  const std::string p = path("x.safetensors");
  const double one = 1, two = 2;
  fbt::save_safetensors(p, {{"x", "F64", {1}, &one}});
  fbt::save_safetensors(p, {{"y", "F64", {1}, &two}});  // over an existing file
  EXPECT_FALSE(fs::exists(p + ".tmp"));
  auto f = fbt::read_safetensors(p);
  ASSERT_EQ(f.tensors.size(), 1u);
  EXPECT_EQ(f.tensors[0].name, "y");

  // A refused save leaves the old file as it was and no temporary behind.
  const std::string before = read_bytes(p);
  EXPECT_FBT_ERROR(fbt::save_safetensors(p, {{"y", "F64", {1}, &two}, {"y", "F64", {1}, &one}}), p, "\"y\"", "duplicate");
  EXPECT_EQ(read_bytes(p), before);
  EXPECT_FALSE(fs::exists(p + ".tmp"));

  // An unwritable destination is an fbt::Error naming it.
  const std::string nodir = path("no/such/dir/x.safetensors");
  EXPECT_FBT_ERROR(fbt::save_safetensors(nodir, {{"x", "F64", {1}, &one}}), nodir);
}

TEST_F(Safetensors, WriterRefusesBadTensors) {
  const std::string p = path("w.safetensors");
  const float x[4] = {};
  EXPECT_FBT_ERROR(fbt::save_safetensors(p, {{"t", "F31", {4}, x}}), p, "\"t\"", "F31");
  EXPECT_FBT_ERROR(fbt::save_safetensors(p, {{"t", "F32", {-4}, x}}), p, "\"t\"", "shape");
  EXPECT_FBT_ERROR(fbt::save_safetensors(p, {{"t", "F32", {4}, nullptr}}), p, "\"t\"", "null");
  EXPECT_FBT_ERROR(fbt::save_safetensors(p, {{"__metadata__", "F32", {4}, x}}), p, "__metadata__", "reserved");
  EXPECT_FBT_ERROR(fbt::save_safetensors(p, {{"t", "F32", {4}, x}}, {{"k", "\xff\xfe"}}), p, "UTF-8");
  EXPECT_FALSE(fs::exists(p));
  EXPECT_FALSE(fs::exists(p + ".tmp"));
}

// ---- refusals: each file is made by hand (or corrupted), each error names the file and the culprit ----

TEST_F(Safetensors, RefusesShortFilesAndBadHeaderLengths) {
  const std::string p = path("bad.safetensors");
  write_bytes(p, std::string("\x10\0\0\0\0", 5));  // shorter than the length field
  EXPECT_FBT_ERROR(fbt::read_safetensors(p), p, "8-byte header length");
  write_bytes(p, "");
  EXPECT_FBT_ERROR(fbt::read_safetensors(p), p, "header length");

  const std::string h = "{\"a\":" + entry("F32", "[2]", 0, 8) + "}";
  write_bytes(p, make_file(h, raw<float>({1, 2}), 200000000));  // 200 MB
  EXPECT_FBT_ERROR(fbt::read_safetensors(p), p, "header length", "100 MB");
  write_bytes(p, make_file(h, raw<float>({1, 2}), 0xffffffffffffffffull - 1));
  EXPECT_FBT_ERROR(fbt::read_safetensors(p), p, "header length", "100 MB");
  write_bytes(p, make_file(h, raw<float>({1, 2}), 1000));  // beyond the end of the file
  EXPECT_FBT_ERROR(fbt::read_safetensors(p), p, "header length", "beyond the end");

  const std::string missing = path("missing.safetensors");
  EXPECT_FBT_ERROR(fbt::read_safetensors(missing), missing, "cannot open");
}

TEST_F(Safetensors, RefusesTruncatedFiles) {
  const std::string p = path("t.safetensors");
  const float a[2] = {1, 2}, b[3] = {3, 4, 5};
  fbt::save_safetensors(p, {{"a", "F32", {2}, a}, {"b", "F32", {3}, b}}, {{"format", "pt"}});
  const std::string good = read_bytes(p);
  write_bytes(p, good.substr(0, good.size() - 3));  // cut inside b's data
  EXPECT_FBT_ERROR(fbt::read_safetensors(p), p, "\"b\"", "out of range");
  write_bytes(p, good.substr(0, 30));  // cut inside the header
  EXPECT_FBT_ERROR(fbt::read_safetensors(p), p, "header length", "beyond the end");
}

TEST_F(Safetensors, RefusesCorruptHeaderBytes) {
  const std::string p = path("c.safetensors");
  const float a[2] = {1, 2};
  fbt::save_safetensors(p, {{"a", "F32", {2}, a}});
  const std::string good = read_bytes(p);

  std::string b = good;
  b[8] = '[';  // the header's first byte
  write_bytes(p, b);
  EXPECT_FBT_ERROR(fbt::read_safetensors(p), p, "header", "'{'");
  b[8] = ' ';  // leading space: the reference refuses it too
  write_bytes(p, b);
  EXPECT_FBT_ERROR(fbt::read_safetensors(p), p, "header", "'{'");

  b = good;
  b[8 + good.substr(8).find(':')] = ';';  // {"a";{...
  write_bytes(p, b);
  EXPECT_FBT_ERROR(fbt::read_safetensors(p), p, "header", "invalid JSON");

  b = good;
  b[8 + 54] = '}';  // the padding: one brace too many
  write_bytes(p, b);
  EXPECT_FBT_ERROR(fbt::read_safetensors(p), p, "header", "invalid JSON");

  b = good;
  b[8 + good.substr(8).find("F32")] = 'X';  // "F32" -> "X32"
  write_bytes(p, b);
  EXPECT_FBT_ERROR(fbt::read_safetensors(p), p, "\"a\"", "unknown dtype");

  b = good;
  b[8 + good.substr(8).find("[0,8]") + 3] = '9';  // data_offsets [0,9]
  write_bytes(p, b);
  EXPECT_FBT_ERROR(fbt::read_safetensors(p), p, "\"a\"", "data_offsets");
}

TEST_F(Safetensors, RefusesDuplicateKeys) {
  const std::string p = path("d.safetensors");
  const std::string e = entry("F32", "[2]", 0, 8);
  write_bytes(p, make_file("{\"a\":" + e + ",\"a\":" + e + "}", raw<float>({1, 2})));
  EXPECT_FBT_ERROR(fbt::read_safetensors(p), p, "duplicate key \"a\"");
  write_bytes(p, make_file(R"({"a":{"dtype":"F32","dtype":"F64","shape":[2],"data_offsets":[0,8]}})", raw<float>({1, 2})));
  EXPECT_FBT_ERROR(fbt::read_safetensors(p), p, "duplicate key \"dtype\"", "\"a\"");
  write_bytes(p, make_file(R"({"__metadata__":{"k":"1","k":"2"},"a":)" + e + "}", raw<float>({1, 2})));
  EXPECT_FBT_ERROR(fbt::read_safetensors(p), p, "duplicate key \"k\"", "__metadata__");
  write_bytes(p, make_file(R"({"__metadata__":{},"__metadata__":{},"a":)" + e + "}", raw<float>({1, 2})));
  EXPECT_FBT_ERROR(fbt::read_safetensors(p), p, "duplicate key \"__metadata__\"");
}

TEST_F(Safetensors, RefusesBadEntries) {
  const std::string p = path("e.safetensors");
  const std::string d8 = raw<float>({1, 2});
  struct Case {
    std::string entry, data;
    std::vector<std::string> parts;  // besides the path and "a"
  };
  const Case cases[] = {
      {R"({"shape":[2],"data_offsets":[0,8]})", d8, {"missing field \"dtype\""}},
      {R"({"dtype":"F32","data_offsets":[0,8]})", d8, {"missing field \"shape\""}},
      {R"({"dtype":"F32","shape":[2]})", d8, {"missing field \"data_offsets\""}},
      {R"({"dtype":"F32","shape":[2],"data_offsets":[0,8],"extra":1})", d8, {"unknown field \"extra\""}},
      {R"(5)", d8, {"entry must be an object"}},
      {R"({"dtype":5,"shape":[2],"data_offsets":[0,8]})", d8, {"\"dtype\""}},
      {R"({"dtype":"F31","shape":[2],"data_offsets":[0,8]})", d8, {"unknown dtype \"F31\""}},
      {R"({"dtype":"F32","shape":"2","data_offsets":[0,8]})", d8, {"\"shape\""}},
      {R"({"dtype":"F32","shape":[2.0],"data_offsets":[0,8]})", d8, {"\"shape\""}},
      {R"({"dtype":"F32","shape":[-2],"data_offsets":[0,8]})", d8, {"\"shape\"", "negative"}},
      {R"({"dtype":"F32","shape":[2],"data_offsets":[0]})", d8, {"\"data_offsets\""}},
      {R"({"dtype":"F32","shape":[2],"data_offsets":[0,8.0]})", d8, {"\"data_offsets\""}},
      {R"({"dtype":"F32","shape":[2],"data_offsets":[-8,0]})", d8, {"\"data_offsets\""}},
      {R"({"dtype":"F32","shape":[2],"data_offsets":"0,8"})", d8, {"\"data_offsets\""}},
      {R"({"dtype":"F32","shape":[2],"data_offsets":[8,0]})", d8, {"\"data_offsets\"", "begin > end"}},
      {R"({"dtype":"F32","shape":[3],"data_offsets":[0,8]})", d8, {"\"data_offsets\"", "needs 12"}},      // size != numel * 4
      {R"({"dtype":"F64","shape":[2],"data_offsets":[0,8]})", d8, {"\"data_offsets\"", "needs 16"}},      // dtype size counts
      {R"({"dtype":"F32","shape":[2],"data_offsets":[0,8]})", d8.substr(0, 4), {"out of range"}},        // data too short
      {R"({"dtype":"F32","shape":[2],"data_offsets":[8,16]})", d8 + d8, {"gap of 8 bytes"}},              // does not start at 0
      {R"({"dtype":"F32","shape":[2],"data_offsets":[0,8]})", d8 + "abcd", {"4 trailing bytes"}},        // bytes after the last
  };
  for (const auto& c : cases) {
    write_bytes(p, make_file("{\"a\":" + c.entry + "}", c.data));
    try {
      fbt::read_safetensors(p);
      ADD_FAILURE() << "accepted entry " << c.entry;
    } catch (const fbt::Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(p), std::string::npos) << msg;
      EXPECT_NE(msg.find("\"a\""), std::string::npos) << msg;
      for (const auto& part : c.parts) EXPECT_NE(msg.find(part), std::string::npos) << "\"" << msg << "\" lacks \"" << part << "\"";
    }
  }
}

TEST_F(Safetensors, RefusesOffsetsThatDoNotTile) {
  const std::string p = path("o.safetensors");
  const std::string d12 = raw<float>({1, 2, 3}), d20 = raw<float>({1, 2, 3, 4, 5});
  // Overlap: b starts inside a.
  write_bytes(p, make_file("{\"a\":" + entry("F32", "[2]", 0, 8) + ",\"b\":" + entry("F32", "[2]", 4, 12) + "}", d12));
  EXPECT_FBT_ERROR(fbt::read_safetensors(p), p, "\"b\"", "overlap", "\"a\"");
  // The same tensor bytes claimed twice.
  write_bytes(p, make_file("{\"a\":" + entry("F32", "[2]", 0, 8) + ",\"b\":" + entry("F32", "[2]", 0, 8) + "}", d12));
  EXPECT_FBT_ERROR(fbt::read_safetensors(p), p, "overlap", "\"a\"", "\"b\"");
  // Gap between a and b.
  write_bytes(p, make_file("{\"a\":" + entry("F32", "[2]", 0, 8) + ",\"b\":" + entry("F32", "[2]", 12, 20) + "}", d20));
  EXPECT_FBT_ERROR(fbt::read_safetensors(p), p, "\"b\"", "gap of 4 bytes", "\"a\"");
  // Trailing bytes after the last tensor.
  write_bytes(p, make_file("{\"a\":" + entry("F32", "[2]", 0, 8) + "}", d12));
  EXPECT_FBT_ERROR(fbt::read_safetensors(p), p, "trailing bytes", "\"a\"");
  // Out of range: b ends past the data.
  write_bytes(p, make_file("{\"a\":" + entry("F32", "[2]", 0, 8) + ",\"b\":" + entry("F32", "[2]", 8, 16) + "}", d12));
  EXPECT_FBT_ERROR(fbt::read_safetensors(p), p, "\"b\"", "out of range");
  // Data with no tensors at all is trailing bytes too.
  write_bytes(p, make_file("{}", d12));
  EXPECT_FBT_ERROR(fbt::read_safetensors(p), p, "trailing bytes");
  // Out-of-order entries that do tile are fine (the header order is free).
  write_bytes(p, make_file("{\"b\":" + entry("F32", "[1]", 8, 12) + ",\"a\":" + entry("F32", "[2]", 0, 8) + "}", d12));
  const auto f = fbt::read_safetensors(p);
  ASSERT_EQ(f.tensors.size(), 2u);
  EXPECT_EQ(f.tensors[0].name, "a");
  EXPECT_EQ(f.find("b")->begin, 8u);
}

TEST_F(Safetensors, RefusesNonStringMetadata) {
  const std::string p = path("m.safetensors");
  const std::string tail = ",\"a\":" + entry("F32", "[2]", 0, 8) + "}";
  const std::string d8 = raw<float>({1, 2});
  write_bytes(p, make_file(R"({"__metadata__":{"format":"pt","step":1})" + tail, d8));
  EXPECT_FBT_ERROR(fbt::read_safetensors(p), p, "__metadata__", "\"step\"", "string");
  write_bytes(p, make_file(R"({"__metadata__":{"config":{"hidden_size":8}})" + tail, d8));
  EXPECT_FBT_ERROR(fbt::read_safetensors(p), p, "__metadata__", "\"config\"", "string");
  write_bytes(p, make_file(R"({"__metadata__":["pt"])" + tail, d8));
  EXPECT_FBT_ERROR(fbt::read_safetensors(p), p, "__metadata__");
  write_bytes(p, make_file(R"({"__metadata__":{"format":"pt"})" + tail, d8));  // the good one
  EXPECT_EQ(fbt::read_safetensors(p).metadata.at("format"), "pt");
}

TEST_F(Safetensors, ReadsOtherDtypesAndConvertsFloats) {
  // A reference file may hold BF16 / F16 / integer tensors: the reader accepts every known dtype.
  const std::string p = path("bf.safetensors");
  const std::uint16_t bf[3] = {0x3f80, 0xc040, 0x0000};  // 1.0, -3.0, 0.0 in bfloat16
  const std::uint16_t hf[3] = {0x3c00, 0xc200, 0x0001};  // 1.0, -3.0, 2^-24 in IEEE half
  const std::int64_t ids[2] = {7, -1};
  fbt::save_safetensors(p, {{"bf", "BF16", {3}, bf}, {"hf", "F16", {3}, hf}, {"ids", "I64", {2}, ids}});
  const auto f = fbt::read_safetensors(p);
  double out[3];
  fbt::detail::st_convert(f.find("bf")->dtype, f.bytes(*f.find("bf")), 3, out);
  EXPECT_EQ(out[0], 1.0);
  EXPECT_EQ(out[1], -3.0);
  EXPECT_EQ(out[2], 0.0);
  fbt::detail::st_convert(f.find("hf")->dtype, f.bytes(*f.find("hf")), 3, out);
  EXPECT_EQ(out[0], 1.0);
  EXPECT_EQ(out[1], -3.0);
  EXPECT_EQ(out[2], std::ldexp(1.0, -24));
  EXPECT_EQ(f.find("ids")->nbytes(), 16u);
}

// Exchange files with the Python reference implementation when it is installed (it usually is not).
TEST_F(Safetensors, InteropWithPythonSafetensorsIfInstalled) {
  if (std::system("python3 -c 'import safetensors.numpy, numpy' >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "python3 with safetensors and numpy not installed";
  const std::string ours = path("ours.safetensors"), theirs = path("theirs.safetensors");
  const float w[6] = {1, 2, 3, 4, 5, 6};
  fbt::save_safetensors(ours, {{"w", "F32", {2, 3}, w}}, {{"format", "pt"}});
  const std::string script =
      "import numpy as np, safetensors.numpy as st\n"
      "d = st.load_file('" + ours + "')\n"
      "assert d['w'].shape == (2, 3) and d['w'].dtype == np.float32, d\n"
      "assert (d['w'] == np.arange(1, 7, dtype=np.float32).reshape(2, 3)).all()\n"
      "st.save_file({'x': np.array([[0.5, -1.5]], dtype=np.float64), 'y': np.zeros(3, np.float32)}, '" + theirs +
      "', metadata={'format': 'pt'})\n";
  write_bytes(path("interop.py"), script);
  ASSERT_EQ(std::system(("python3 '" + path("interop.py") + "'").c_str()), 0);
  const auto f = fbt::read_safetensors(theirs);
  ASSERT_NE(f.find("x"), nullptr);
  EXPECT_EQ(f.find("x")->shape, (fbt::Shape{1, 2}));
  double x[2];
  std::memcpy(x, f.bytes(*f.find("x")), 16);
  EXPECT_EQ(x[0], 0.5);
  EXPECT_EQ(x[1], -1.5);
  EXPECT_EQ(f.metadata.at("format"), "pt");
}

// ---- hostile files ----------------------------------------------------------------------

// Deep nesting anywhere in the header (a tensor entry, __metadata__, a value nlohmann would recurse
// into when printing it) is refused by the depth limit with the byte where it goes too deep.
TEST_F(Safetensors, DeepNestingIsAnErrorNotACrash) {
  const std::string p = path("deep.safetensors");
  const std::string deep(150000, '[');  // 150 KB of '[' (unclosed: the limit fires first)
  const std::string closed = std::string(75000, '[') + std::string(75000, ']');  // well-formed: the old error path dump()ed it
  const std::string d8 = raw<float>({1, 2});
  for (const std::string& h : {"{\"a\":{\"dtype\":\"F32\",\"shape\":" + deep + "}}",
                               "{\"a\":{\"dtype\":\"F32\",\"shape\":" + closed + ",\"data_offsets\":[0,8]}}",
                               "{\"__metadata__\":{\"format\":" + closed + "},\"a\":" + entry("F32", "[2]", 0, 8) + "}",
                               "{\"a\":" + closed + "}",
                               "{\"__metadata__\":{\"format\":" + deep + "}}",
                               "{\"a\":" + std::string(70, '[') + std::string(70, ']') + "}",  // closed, still too deep
                               "{\"__metadata__\":" + deep + "}"}) {
    write_bytes(p, make_file(h, d8));
    EXPECT_FBT_ERROR(fbt::read_safetensors(p), p, "nesting deeper than 64 levels at byte");
  }
  // 63 levels inside the header object are fine for the parser (the entry is then refused by its rules).
  write_bytes(p, make_file("{\"a\":" + std::string(63, '[') + std::string(63, ']') + "}", d8));
  EXPECT_FBT_ERROR(fbt::read_safetensors(p), p, "\"a\"", "entry must be an object");
}

// Error text quotes at most an excerpt: a 20 MB value or name gives a short line, not a 20 MB one.
TEST_F(Safetensors, ErrorTextIsBounded) {
  const std::string p = path("big.safetensors");
  const std::string d8 = raw<float>({1, 2});
  const std::string big(20000000, 'x');
  std::string zeros = "[0";
  for (int i = 0; i < 4000000; ++i) zeros += ",0";
  zeros += "]";
  struct Case {
    std::string header;
    std::vector<std::string> parts;
  };
  const Case cases[] = {
      {"{\"a\":{\"dtype\":\"" + big + "\",\"shape\":[2],\"data_offsets\":[0,8]}}", {"\"a\"", "string of 20000000 bytes", "limit"}},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":" + zeros + ",\"data_offsets\":[0,8]}}", {"\"a\"", "\"shape\"", "4000001"}},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":" + zeros + "}}", {"\"a\"", "\"data_offsets\"", "4000001 elements"}},
      {"{\"__metadata__\":{\"format\":" + zeros + "},\"a\":" + entry("F32", "[2]", 0, 8) + "}", {"__metadata__", "\"format\"", "array"}},
      {"{\"" + std::string(100000, 'k') + "\":" + entry("F32", "[2]", 0, 8) + "}", {"key of 100000 bytes", "limit"}},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8],\"" + std::string(1000, 'z') + "\":1}}", {"\"a\"", "unknown field", "1000 bytes"}},
      {"{\"a\":{\"dtype\":\"" + std::string(3000000, 'F') + "\",\"shape\":[2],\"data_offsets\":[0,8]}}", {"\"a\"", "unknown dtype", "3000000 bytes"}},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},\"b\":\"" + big, {"invalid JSON"}},  // unterminated string
  };
  for (const auto& c : cases) {
    write_bytes(p, make_file(c.header, d8));
    try {
      fbt::read_safetensors(p);
      ADD_FAILURE() << "accepted a header of " << c.header.size() << " bytes";
    } catch (const fbt::Error& e) {
      const std::string msg = e.what();
      EXPECT_LT(msg.size(), 700u) << msg.substr(0, 700);
      EXPECT_EQ(msg.find('\n'), std::string::npos) << "one line";
      EXPECT_NE(msg.find(p), std::string::npos) << msg.substr(0, 700);
      for (const auto& part : c.parts) EXPECT_NE(msg.find(part), std::string::npos) << "\"" << msg.substr(0, 700) << "\" lacks \"" << part << "\"";
    }
  }
}

// 80,000 entries (a 5.9 MB header): the old callback parser rescanned siblings at every object's end
// (quadratic: ~53 s for this file); the SAX parser is linear. Not timed here, only made big enough
// that a quadratic parser would take minutes.
TEST_F(Safetensors, EightyThousandEntriesParse) {
  const int n = 80000;
  std::string h = "{\"__metadata__\":{\"format\":\"pt\"}";
  for (int i = 0; i < n; ++i) h += ",\"layer." + std::to_string(i) + ".w\":" + entry("F32", "[1]", 4 * i, 4 * i + 4);
  h += "}";
  std::string data(std::size_t(4) * n, '\0');
  for (int i = 0; i < n; ++i) {
    const float v = float(i);
    std::memcpy(&data[std::size_t(4) * i], &v, 4);
  }
  const std::string p = path("many.safetensors");
  write_bytes(p, make_file(h, data));
  const auto t0 = std::chrono::steady_clock::now();
  const auto f = fbt::read_safetensors(p);
  const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_EQ(f.tensors.size(), std::size_t(n));
  const auto* e = f.find("layer.76543.w");
  ASSERT_NE(e, nullptr);
  float v;
  std::memcpy(&v, f.bytes(*e), 4);
  EXPECT_EQ(v, 76543.0f);
  RecordProperty("parse_seconds", std::to_string(sec));
  std::printf("[ info ] read_safetensors of %d entries (%zu-byte header): %.3f s\n", n, h.size(), sec);
  // A duplicate among them is still found, by name.
  write_bytes(p, make_file(h.substr(0, h.size() - 1) + ",\"layer.40000.w\":" + entry("F32", "[1]", 0, 4) + "}", data));
  EXPECT_FBT_ERROR(fbt::read_safetensors(p), p, "duplicate key \"layer.40000.w\"", "at top level");
}

// A zero dimension makes the size 0 but must not let the other dimensions overflow a stride.
TEST_F(Safetensors, RefusesShapesThatOverflowBehindAZero) {
  const std::string p = path("zero.safetensors");
  write_bytes(p, make_file(R"({"a":{"dtype":"F32","shape":[0,4611686018427387904,4611686018427387904],"data_offsets":[0,0]}})", ""));
  EXPECT_FBT_ERROR(fbt::read_safetensors(p), p, "\"a\"", "\"shape\"", "too large");
  write_bytes(p, make_file(R"({"a":{"dtype":"F32","shape":[0,3,5],"data_offsets":[0,0]}})", ""));  // a real empty tensor is fine
  EXPECT_EQ(fbt::read_safetensors(p).find("a")->shape, (fbt::Shape{0, 3, 5}));
  std::string dims = "[1";
  for (int i = 0; i < 64; ++i) dims += ",1";
  write_bytes(p, make_file("{\"a\":{\"dtype\":\"F32\",\"shape\":" + dims + "],\"data_offsets\":[0,4]}}", raw<float>({1})));
  EXPECT_FBT_ERROR(fbt::read_safetensors(p), p, "\"a\"", "65 dimensions");
}

// Only regular files are opened: a FIFO would block the open forever, /dev/zero never ends.
TEST_F(Safetensors, RefusesFifosDevicesAndDirectories) {
  const std::string fifo = path("fifo.safetensors");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_FBT_ERROR(fbt::read_safetensors(fifo), fifo, "not a regular file");
  EXPECT_FBT_ERROR(fbt::read_safetensors("/dev/zero"), "/dev/zero", "not a regular file");
  EXPECT_FBT_ERROR(fbt::read_safetensors(dir_.string()), "is a directory");
}

// The data section is a view into the mapped file; reading instead gives the same bytes.
TEST_F(Safetensors, MappedAndReadFilesAgree) {
  const std::string p = path("m.safetensors");
  const std::vector<double> w = {1.0 / 3.0, -2.5, 7.0};
  const float s = 4.0f;
  fbt::save_safetensors(p, {{"w", "F64", {3}, w.data()}, {"s", "F32", {}, &s}}, {{"format", "pt"}});
  const auto m = fbt::read_safetensors(p);
  const auto r = fbt::read_safetensors(p, fbt::ReadMode::Read);
  EXPECT_TRUE(m.data.mapped()) << "POSIX maps the file";
  EXPECT_FALSE(r.data.mapped());
  ASSERT_EQ(m.data.size(), 28u);
  ASSERT_EQ(r.data.size(), 28u);
  EXPECT_EQ(std::memcmp(m.data.data(), r.data.data(), 28), 0);
  EXPECT_EQ(std::memcmp(m.bytes(*m.find("w")), w.data(), 24), 0);
  m.release(*m.find("w"));  // dropping the pages of a mapping: reading them again gives the same bytes
  EXPECT_EQ(std::memcmp(m.bytes(*m.find("w")), w.data(), 24), 0);
  const fbt::SafetensorsFile copy = m;  // copies share the mapping
  EXPECT_EQ(copy.bytes(*copy.find("s")), m.bytes(*m.find("s")));
}

}  // namespace

}  // namespace test_io_safetensors
