// tests/common/token_files.hpp: writes token files (io/token_file.hpp) byte by byte, independently of the
// reader: raw little-endian .bin files of 2, 4 or 8-byte elements, and 1-d .npy files with a given descr.
#pragma once

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

namespace fbt_test {

/// The little-endian bytes of each value, `width` bytes each (two's complement for negatives).
inline std::string le_bytes(const std::vector<std::int64_t>& ids, int width) {
  std::string s;
  for (std::int64_t v : ids) {
    const std::uint64_t u = static_cast<std::uint64_t>(v);
    for (int k = 0; k < width; ++k) s += char((u >> (8 * k)) & 0xff);
  }
  return s;
}

inline void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary);
  f << bytes;
}

/// A raw .bin token file of `width`-byte elements.
inline void write_token_bin(const std::string& path, const std::vector<std::int64_t>& ids, int width = 2) {
  write_file(path, le_bytes(ids, width));
}

/// The bytes of a version 1.0 .npy file: preamble, header dict (padded to 64 bytes), then `data`.
inline std::string npy_bytes(const std::string& descr, const std::string& shape, const std::string& data) {
  std::string d = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  while ((10 + d.size() + 1) % 64 != 0) d += ' ';
  d += '\n';
  std::string s = "\x93NUMPY";
  s += char(1), s += char(0), s += char(d.size() & 0xff), s += char(d.size() >> 8);
  return s + d + data;
}

/// A 1-d .npy token file: descr "<u2", "<u4", "<i4" or "<i8" (the element width follows from it).
inline void write_token_npy(const std::string& path, const std::string& descr, const std::vector<std::int64_t>& ids) {
  const int width = descr.back() - '0';
  write_file(path, npy_bytes(descr, "(" + std::to_string(ids.size()) + ",)", le_bytes(ids, width)));
}

}  // namespace fbt_test
