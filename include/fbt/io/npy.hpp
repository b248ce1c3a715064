// fbt/io/npy.hpp: read and write NumPy .npy files (activation dumps, test fixtures) via xtensor.
//
// The .npy format (numpy.lib.format, "NEP 1"): 6-byte magic "\x93NUMPY", 2 version bytes, a
// little-endian header length (2 bytes in v1.0, 4 in v2.0), an ASCII Python dict such as
// {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), } padded with spaces and ending in '\n',
// then the raw data. xt::dump_npy writes; load_npy reads the file itself, with a strict parser of the
// header dict (exactly the three keys, nothing after a value but a separator, nothing after the '}'
// but spaces and the newline), because xtensor's reader (0.24.3 to at least 0.27) reports errors as
// bare std::runtime_error without the file name, does not notice truncated data, mis-decodes header
// lengths whose low byte is >= 0x80 (it sign-extends a char), and parses the dict leniently, so it can
// see another shape in the same bytes; xtensor only transposes a Fortran-order array. Before anything is allocated, load_npy checks (docs/file-formats.md):
// the path is a regular file of at most 1 TiB (no FIFO, device or directory); the header length is at
// most 65,536 bytes and within the file; the shape has at most 64 dimensions and the product of its
// non-zero dimensions times the element size fits in 2^62 (so no size or stride overflows, even for
// (0, 2^62, 2^62)); the data is exactly the bytes the shape needs. Every failure is an fbt::Error
// naming the file, quoting at most a bounded excerpt of the header.
// Writes go to `path + ".tmp"` and are renamed into place, so a crash never leaves half a file.
#pragma once

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <limits>
#include <new>
#include <string>
#include <type_traits>

#include "../config.hpp"
#include "../core/tensor.hpp"
#include "../detail/input.hpp"
#include "../detail/xtensor_compat.hpp"
#include "../xt/views.hpp"

namespace fbt {

/// What load_npy returns: the shape (outermost axis first) and the elements in row-major order.
template <class T> struct NpyArray {
  Shape shape;
  AlignedVector<T> data;  // (numel(shape))
};

namespace detail {

/// The parsed preamble and header of a .npy file.
struct NpyHeader {
  int version = 1;             ///< major version: 1 or 2
  std::string descr;           ///< dtype string, e.g. "<f4"
  bool fortran_order = false;  ///< true: data is column-major
  Shape shape;                 ///< outermost axis first
  std::uint64_t data_offset = 0;  ///< first data byte
};

/// \brief The dtype string for T, e.g. "<f4" for float, "|u1" for uint8_t. It is xtensor's own
/// builder, so this check and xt::load_npy's cast check always agree.
template <class T> std::string npy_descr() {
  return xt::detail::build_typestring<T>();
}

/// The limits load_npy enforces before it allocates (docs/file-formats.md).
constexpr std::uint64_t kNpyMaxFile = std::uint64_t(1) << 40;      ///< bytes of a whole file (1 TiB)
constexpr std::uint32_t kNpyMaxHeader = 65536;                    ///< bytes of the header dict
constexpr std::size_t kNpyMaxRank = 64;                           ///< dimensions (numpy 2's NPY_MAXDIMS)
constexpr std::uint64_t kNpyMaxElementBytes = std::uint64_t(1) << 62;  ///< product of the non-zero dimensions x element size

[[noreturn]] inline void npy_fail(const char* fn, const std::string& path, const std::string& what) {
  throw Error(std::string("fbt::") + fn + ": '" + path + "': " + what);
}

inline std::string shape_str(const Shape& s) {  // Python tuple syntax: (2, 3), (5,), ()
  std::string r = "(";
  for (std::size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + (s.size() == 1 ? ",)" : ")");
}

/// \brief Reads and validates the preamble and header dict; leaves `in` at the first data byte.
/// \param file_size the file's size: the header length is checked against it (and kNpyMaxHeader)
/// before the header is read, so a short file cannot announce a 4 GiB header.
/// Throws fbt::Error naming `path` for a short file, a bad magic, an unknown version, an oversized or
/// truncated header, or a bad dict.
inline NpyHeader read_npy_header(std::istream& in, const std::string& path, std::uint64_t file_size) {
  auto bad = [&](const std::string& what) { npy_fail("load_npy", path, what + " (expected a valid .npy file)"); };
  unsigned char pre[12];
  in.read(reinterpret_cast<char*>(pre), 8);
  if (in.gcount() != 8) bad("file is shorter than the 8-byte npy preamble");
  if (std::string(reinterpret_cast<char*>(pre), 6) != "\x93NUMPY") bad("no \\x93NUMPY magic, not an npy file");
  NpyHeader h;
  h.version = pre[6];
  if (!((pre[6] == 1 || pre[6] == 2) && pre[7] == 0))
    bad("unsupported npy version " + std::to_string(pre[6]) + "." + std::to_string(pre[7]) + " (fbt reads 1.0 and 2.0)");
  const int nlen = h.version == 1 ? 2 : 4;  // bytes of the little-endian header length
  in.read(reinterpret_cast<char*>(pre + 8), nlen);
  if (in.gcount() != nlen) bad("truncated before the header length");
  std::uint32_t len = 0;
  for (int i = nlen - 1; i >= 0; --i) len = (len << 8) | pre[8 + i];
  h.data_offset = std::uint64_t(8 + nlen) + len;
  if (len > kNpyMaxHeader)
    bad("header length " + std::to_string(len) + " is over the " + std::to_string(kNpyMaxHeader) + "-byte limit");
  if (h.data_offset > file_size)
    bad("truncated header (" + std::to_string(len) + " bytes announced, the file is " + std::to_string(file_size) + " bytes)");

  std::string dict(len, '\0');
  in.read(&dict[0], std::streamsize(len));
  if (std::uint32_t(in.gcount()) != len) bad("truncated header (" + std::to_string(len) + " bytes announced)");
  if (dict.empty() || dict.back() != '\n') bad("header does not end in a newline");

  // A strict parser of the dict: '{', then exactly the three keys, each once, in any order, with any
  // spacing, each followed by ',' or the closing '}', then only spaces before the final newline.
  // Nothing may follow a value but a separator: a lenient reading would see a different shape than
  // another reader of the same bytes (a fuzz finding: "'shape': (2,)(0, 2^62, 2^62)").
  std::size_t i = 0;
  auto skip = [&] {
    while (i < dict.size() && (dict[i] == ' ' || dict[i] == '\t')) ++i;
  };
  auto expect = [&](char c, const char* what) {
    skip();
    if (i >= dict.size() || dict[i] != c) bad(std::string("header dict: expected ") + what + " at byte " + std::to_string(i) + ": " + excerpt(dict, 128));
    ++i;
  };
  auto quoted = [&](const char* what) {
    skip();
    const char q = i < dict.size() ? dict[i] : 0;
    if (q != '\'' && q != '"') bad(std::string("header dict: expected ") + what + " (a quoted string) at byte " + std::to_string(i) + ": " + excerpt(dict, 128));
    const auto e = dict.find(q, i + 1);
    if (e == std::string::npos) bad(std::string("header dict: unterminated string at byte ") + std::to_string(i));
    std::string r = dict.substr(i + 1, e - i - 1);
    i = e + 1;
    return r;
  };
  bool seen_descr = false, seen_fortran = false, seen_shape = false;
  expect('{', "'{'");
  for (;;) {
    skip();
    if (i < dict.size() && dict[i] == '}') {
      ++i;
      break;
    }
    const std::string key = quoted("a key");
    expect(':', "':'");
    skip();
    if (key == "descr") {
      if (seen_descr) bad("header has the key 'descr' twice");
      seen_descr = true;
      h.descr = quoted("the 'descr' value");
    } else if (key == "fortran_order") {
      if (seen_fortran) bad("header has the key 'fortran_order' twice");
      seen_fortran = true;
      if (dict.compare(i, 4, "True") == 0) h.fortran_order = true, i += 4;
      else if (dict.compare(i, 5, "False") == 0) h.fortran_order = false, i += 5;
      else bad("header 'fortran_order' is neither True nor False");
    } else if (key == "shape") {
      if (seen_shape) bad("header has the key 'shape' twice");
      seen_shape = true;
      const auto e = dict.find(')', i);
      if (i >= dict.size() || dict[i] != '(' || e == std::string::npos) bad("header 'shape' is not a tuple");
      const std::string tuple = excerpt(dict.substr(i, e - i + 1), 128);
      for (std::size_t k = i + 1; k < e;) {  // "(2, 3)", "(5,)", "()"
        k = dict.find_first_not_of(' ', k);
        if (k >= e) break;
        std::int64_t d = 0;
        std::size_t j = k;
        for (; j < e && dict[j] >= '0' && dict[j] <= '9'; ++j) {
          if (d > (std::numeric_limits<std::int64_t>::max() - 9) / 10) bad("header 'shape' has a dimension too large");
          d = 10 * d + (dict[j] - '0');
        }
        if (j == k) bad("header 'shape' is not a tuple of non-negative integers: " + tuple);
        if (h.shape.size() == kNpyMaxRank) bad("header 'shape' has more than " + std::to_string(kNpyMaxRank) + " dimensions");
        h.shape.push_back(d);
        j = dict.find_first_not_of(' ', j);
        if (j < e && dict[j] != ',') bad("header 'shape' is not a tuple of non-negative integers: " + tuple);
        k = j + 1;
      }
      if (h.shape.size() == 1 && dict.substr(i, e - i + 1).find(',') == std::string::npos)
        bad("header 'shape' " + tuple + " is not a tuple (a 1-d shape is written (n,))");
      i = e + 1;
    } else {
      bad("header has an unknown key '" + excerpt(key, 32) + "' (expected descr, fortran_order, shape)");
    }
    skip();
    if (i < dict.size() && dict[i] == ',') {
      ++i;
      continue;
    }
    expect('}', "',' or '}' after a value");
    break;
  }
  if (!seen_descr) bad("header has no 'descr' key: " + excerpt(dict, 128));
  if (!seen_fortran) bad("header has no 'fortran_order' key: " + excerpt(dict, 128));
  if (!seen_shape) bad("header has no 'shape' key: " + excerpt(dict, 128));
  const auto rest = dict.find_first_not_of(' ', i);
  if (rest != dict.size() - 1) bad("header has bytes after the dict's closing '}' at byte " + std::to_string(i) + ": " + excerpt(dict.substr(i), 64));
  return h;
}

/// \brief Bytes of data a header promises, or max() when the shape is too large: the product of its
/// non-zero dimensions times sizeof(T) over kNpyMaxElementBytes (then a stride would overflow too,
/// even if a zero dimension makes the data empty).
template <class T> std::uint64_t npy_data_bytes(const Shape& shape) {
  const std::uint64_t over = std::numeric_limits<std::uint64_t>::max();
  std::uint64_t n = sizeof(T), nz = sizeof(T);
  for (auto d : shape) {
    if (d < 0) return over;
    if (d == 0) {
      n = 0;
      continue;
    }
    if (nz > kNpyMaxElementBytes / std::uint64_t(d)) return over;
    nz *= std::uint64_t(d);
    n *= std::uint64_t(d);  // n <= nz
  }
  return n;
}

inline std::uint64_t stream_size(std::istream& in) {
  in.clear();
  in.seekg(0, std::ios::end);
  return std::uint64_t(in.tellg());
}

}  // namespace detail

namespace detail {
template <class T> NpyArray<T> load_npy_impl(const std::string& path) {
  const std::string want = npy_descr<T>();
  // A regular file of bounded size, checked before it is opened (a FIFO would block the open).
  std::uint64_t file_bytes = 0;
  try {
    file_bytes = regular_file_size(path, kNpyMaxFile, "fbt::load_npy", "an .npy file");
  } catch (const Error& e) {
    throw Error(std::string(e.what()) + " (expected a .npy file of dtype '" + want + "')");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) npy_fail("load_npy", path, "cannot open file (expected a .npy file of dtype '" + want + "')");
  const NpyHeader h = read_npy_header(in, path, file_bytes);
  if (h.descr != want)
    npy_fail("load_npy", path, "file has dtype '" + excerpt(h.descr, 32) + "' but load_npy expects '" + want + "'");
  // Check the size ourselves: xtensor would read a truncated file without complaint.
  const std::uint64_t want_bytes = npy_data_bytes<T>(h.shape);
  if (want_bytes == std::numeric_limits<std::uint64_t>::max())
    npy_fail("load_npy", path, "header 'shape' " + excerpt(shape_str(h.shape), 128) + " of '" + want + "' is too large (its element count overflows)");
  const std::uint64_t have_bytes = file_bytes - h.data_offset;  // data_offset <= file_bytes: checked with the header
  if (have_bytes != want_bytes)
    npy_fail("load_npy", path, "header promises shape " + excerpt(shape_str(h.shape), 128) + " of '" + want + "' (" +
                                   std::to_string(want_bytes) + " data bytes) but the file holds " + std::to_string(have_bytes) +
                                   (have_bytes < want_bytes ? " (truncated)" : ""));

  NpyArray<T> out{h.shape, AlignedVector<T>(std::size_t(numel(h.shape)))};
  // The data is read here, never by xt::load_npy: that would parse the header a second time, its own
  // way, and could see another shape than the one checked above (a fuzz finding).
  in.clear();
  in.seekg(std::streamoff(h.data_offset));
  try {
    if (!h.fortran_order) {
      in.read(reinterpret_cast<char*>(out.data.data()), std::streamsize(want_bytes));
      if (!in) npy_fail("load_npy", path, "read error");
    } else {  // column-major in the file: read it, then let xtensor transpose it into our row-major buffer
      AlignedVector<T> raw(out.data.size());
      in.read(reinterpret_cast<char*>(raw.data()), std::streamsize(want_bytes));
      if (!in) npy_fail("load_npy", path, "read error");
      auto dst = xt_view(out.data.data(), h.shape);  // row-major view of our buffer
      dst = xt::adapt<xt::layout_type::dynamic>(raw.data(), raw.size(), xt::no_ownership(), to_xt_shape(h.shape),
                                                xt::layout_type::column_major);
    }
  } catch (const Error&) {
    throw;
  } catch (const std::exception& ex) {  // bad_alloc, ...
    npy_fail("load_npy", path, std::string("cannot read the data: ") + ex.what());
  }
  return out;
}
}  // namespace detail

/// \brief Loads a .npy file whose dtype is exactly T's (no conversion), in row-major order.
/// \tparam T float, double, or another arithmetic type (its descr, e.g. '<f4', must match the file's)
/// \return {shape, data}; a Fortran-order file is transposed into row-major order on load.
/// Throws fbt::Error naming `path` if the path is not a regular file (directory, FIFO, device) or is
/// over 1 TiB, the file is missing, not npy, of another dtype, truncated or has trailing bytes, its
/// header is over 65,536 bytes or runs past the end of the file, its shape has more than 64 dimensions
/// or is too large (see the file comment), or memory runs out. Nothing is allocated before these checks.
template <class T> NpyArray<T> load_npy(const std::string& path) {
  static_assert(std::is_arithmetic<T>::value, "load_npy<T>: T must be an arithmetic type");
  try {
    return detail::load_npy_impl<T>(path);
  } catch (const std::bad_alloc&) {
    detail::npy_fail("load_npy", path, "out of memory while reading the file");
  }
}

/// \brief Writes numel(shape) elements at `data`, row-major, as a C-order .npy file (atomic: tmp + rename).
/// \param path  destination; `path + ".tmp"` is written first and renamed over it
/// \param data  (numel(shape)) elements
/// \param shape outermost axis first, e.g. {B, T, C}
template <class T> void save_npy(const std::string& path, const T* data, const Shape& shape) {
  static_assert(std::is_arithmetic<T>::value, "save_npy: T must be an arithmetic type");
  const std::string tmp = path + ".tmp";
  try {
    xt::dump_npy(tmp, cxt_view(data, shape));
  } catch (const Error&) {
    throw;
  } catch (const std::exception& ex) {
    detail::npy_fail("save_npy", path, std::string("cannot write '") + tmp + "': " + ex.what());
  }
  // xt::dump_npy does not check its writes (e.g. a full disk): re-read the header and the size.
  bool ok = false;
  {
    std::ifstream in(tmp, std::ios::binary);
    if (in) {
      try {
        const std::uint64_t size = detail::stream_size(in);
        in.seekg(0);
        const auto h = detail::read_npy_header(in, tmp, size);
        ok = h.shape == shape && size == h.data_offset + detail::npy_data_bytes<T>(shape);
      } catch (const Error&) {
      }
    }
  }
  if (!ok) {
    std::remove(tmp.c_str());
    detail::npy_fail("save_npy", path, "short or failed write to '" + tmp + "' (disk full?)");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    detail::npy_fail("save_npy", path, "cannot rename '" + tmp + "' into place");
  }
}

/// \brief Saves a (rows, cols) row-major matrix as a 2-d .npy file.
template <class T> void save_npy(const std::string& path, CRowMap<T> m) {
  save_npy(path, m.data(), Shape{std::int64_t(m.rows()), std::int64_t(m.cols())});
}
/// \brief Saves a mutable (rows, cols) map (Eigen has no implicit RowMap -> CRowMap conversion).
template <class T> void save_npy(const std::string& path, const RowMap<T>& m) { save_npy(path, cview(m)); }

}  // namespace fbt
