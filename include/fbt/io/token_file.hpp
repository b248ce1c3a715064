// fbt/io/token_file.hpp: pre-tokenized data files: a flat array of token ids, memory-mapped.
//
// Formats (docs/file-formats.md, "Token files"):
//   * `.bin`: raw little-endian unsigned integers, no header: uint16 (nanoGPT's prepare.py writes
//     np.uint16 arrays with tofile) or uint32 (vocabularies over 65,536 ids); the element type is not in
//     the file, so the caller says which (TokenFileOptions::dtype, "auto" = uint16 as nanoGPT);
//   * `.npy`: a 1-d NumPy array of int32, int64, uint16 or uint32 (little-endian; io/npy.hpp's strict
//     header parser). Its dtype is in the header: a dtype the caller names must agree with it.
// The file is mapped, not copied (detail::MappedFile): a 10 GB corpus costs the pages training touches.
// The ids are checked against the vocabulary (check_vocab: the whole file, in chunks on several threads,
// each chunk's pages released once read; or check_vocab_range: the elements of one window), so a bad id
// is reported with the file, its element index and byte offset, and the id, never as an out-of-range
// embedding row later. Every other failure (no file, FIFO, empty, a byte length that is not
// a whole number of elements, an npy of another shape or dtype, a big-endian npy) is an fbt::Error naming
// the file and what was expected.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <limits>
#include <sstream>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "../config.hpp"
#include "mapped_file.hpp"
#include "npy.hpp"

namespace fbt {

/// The element type of a token file.
enum class TokenDtype { u16, u32, i32, i64 };

inline const char* token_dtype_name(TokenDtype d) {
  switch (d) {
    case TokenDtype::u16: return "uint16";
    case TokenDtype::u32: return "uint32";
    case TokenDtype::i32: return "int32";
    case TokenDtype::i64: return "int64";
  }
  return "?";
}
inline int token_dtype_bytes(TokenDtype d) { return d == TokenDtype::u16 ? 2 : d == TokenDtype::i64 ? 8 : 4; }

/// Whether a data path names a token file (its extension is .bin or .npy) rather than text.
inline bool is_token_file_path(const std::string& p) {
  auto ends = [&](const char* e) { const std::size_t n = std::strlen(e); return p.size() > n && p.compare(p.size() - n, n, e) == 0; };
  return ends(".bin") || ends(".npy");
}

/// The largest token file read: 2^32 tokens of 8 bytes (windows are drawn with 32-bit sampling).
inline constexpr std::uint64_t kMaxTokenFileBytes = (std::uint64_t(1) << 35) + 65536;

/// \brief A token file's ids: a read-only view of the mapped elements.
class TokenFile {
 public:
  /// \brief Opens `path`. \param dtype "auto", "uint16", "uint32", "int32" or "int64": for a .bin, the
  /// element type ("auto" = uint16, nanoGPT's); for a .npy, "auto" or the header's own dtype.
  /// Throws fbt::Error naming the file for every problem listed in the file comment.
  static TokenFile open(const std::string& path, const std::string& dtype = "auto") {
    const std::string who = "fbt: token file";
    auto fail = [&](const std::string& why) -> void { throw Error(who + " '" + path + "': " + why); };
    if (dtype != "auto" && dtype != "uint16" && dtype != "uint32" && dtype != "int32" && dtype != "int64")
      throw Error("fbt: token_dtype: expected auto, uint16, uint32, int32 or int64, got \"" + detail::excerpt(dtype) + "\"");
    TokenFile f;
    f.path_ = path;
    f.map_ = detail::MappedFile::open(path, kMaxTokenFileBytes, who, "a token file (2^32 tokens)");
    const std::uint64_t size = f.map_.size();
    if (size == 0) fail("is empty (0 bytes; expected token ids)");
    std::uint64_t off = 0;
    const bool npy = path.size() > 4 && path.compare(path.size() - 4, 4, ".npy") == 0;
    if (npy) {
      std::istringstream in(std::string(f.map_.data(), std::size_t(std::min<std::uint64_t>(size, detail::kNpyMaxHeader + 16))));
      const detail::NpyHeader h = detail::read_npy_header(in, path, size);
      if (h.shape.size() != 1) fail("holds an array of shape " + detail::shape_str(h.shape) + "; expected a 1-d array of token ids");
      const std::string& d = h.descr;
      if (d == "<u2" || d == "|u2") f.dtype_ = TokenDtype::u16;
      else if (d == "<u4") f.dtype_ = TokenDtype::u32;
      else if (d == "<i4") f.dtype_ = TokenDtype::i32;
      else if (d == "<i8") f.dtype_ = TokenDtype::i64;
      else if (!d.empty() && d[0] == '>') fail("is big-endian (dtype '" + detail::excerpt(d) + "'); expected little-endian int32, int64, uint16 or uint32");
      else fail("has dtype '" + detail::excerpt(d) + "'; expected int32 ('<i4'), int64 ('<i8'), uint16 ('<u2') or uint32 ('<u4')");
      if (dtype != "auto" && dtype != token_dtype_name(f.dtype_))
        fail(std::string("holds ") + token_dtype_name(f.dtype_) + " ids, but token_dtype is " + dtype + " (a .npy names its own dtype: leave token_dtype auto)");
      off = h.data_offset;
      const std::uint64_t need = std::uint64_t(h.shape[0]) * std::uint64_t(token_dtype_bytes(f.dtype_));
      if (h.shape[0] < 0 || size - off != need)
        fail("its header promises " + std::to_string(h.shape[0]) + " " + token_dtype_name(f.dtype_) + " ids (" + std::to_string(need) +
             " bytes) but " + std::to_string(size - off) + " bytes of data follow it (truncated or trailing bytes)");
      if (h.shape[0] == 0) fail("is empty (a 0-length array; expected token ids)");
    } else {
      f.dtype_ = dtype == "uint32" ? TokenDtype::u32 : dtype == "int32" ? TokenDtype::i32 : dtype == "int64" ? TokenDtype::i64 : TokenDtype::u16;
      const int eb = token_dtype_bytes(f.dtype_);
      if (size % std::uint64_t(eb) != 0)
        fail("is " + std::to_string(size) + " bytes, not a whole number of " + std::to_string(eb) + "-byte " + token_dtype_name(f.dtype_) +
             " ids (token_dtype " + dtype + (dtype == "auto" ? ": uint16, as nanoGPT writes" : "") + "; truncated, or another element type?)");
    }
    f.data_ = f.map_.data() + off;
    f.offset_ = off;
    f.n_ = (size - off) / std::uint64_t(token_dtype_bytes(f.dtype_));
    return f;
  }

  /// Number of token ids.
  std::uint64_t size() const { return n_; }
  TokenDtype dtype() const { return dtype_; }
  const std::string& path() const { return path_; }
  /// Byte offset in the file of element i (the header's bytes, then i elements).
  std::uint64_t byte_offset(std::uint64_t i) const { return offset_ + i * std::uint64_t(token_dtype_bytes(dtype_)); }

  /// Element i as a signed 64-bit value (little-endian in the file; memcpy, as elements need not be aligned).
  std::int64_t raw(std::uint64_t i) const {
    const char* p = data_ + i * std::uint64_t(token_dtype_bytes(dtype_));
    unsigned char b[8];
    std::memcpy(b, p, std::size_t(token_dtype_bytes(dtype_)));
    switch (dtype_) {
      case TokenDtype::u16: return std::int64_t(b[0] | (b[1] << 8));
      case TokenDtype::u32: return std::int64_t(std::uint32_t(b[0]) | (std::uint32_t(b[1]) << 8) | (std::uint32_t(b[2]) << 16) | (std::uint32_t(b[3]) << 24));
      case TokenDtype::i32: {
        const std::uint32_t u = std::uint32_t(b[0]) | (std::uint32_t(b[1]) << 8) | (std::uint32_t(b[2]) << 16) | (std::uint32_t(b[3]) << 24);
        std::int32_t s;
        std::memcpy(&s, &u, 4);
        return s;
      }
      case TokenDtype::i64: {
        std::uint64_t u = 0;
        for (int k = 7; k >= 0; --k) u = (u << 8) | b[k];
        std::int64_t s;
        std::memcpy(&s, &u, 8);
        return s;
      }
    }
    return 0;
  }
  /// Element i as a token id (valid after check_vocab).
  int operator[](std::uint64_t i) const { return static_cast<int>(raw(i)); }

  /// \brief Copies elements [begin, begin + n) into out (n ints).
  void copy(std::uint64_t begin, std::uint64_t n, int* out) const {
    if (dtype_ == TokenDtype::u16) {  // the common case, without the switch per element
      const unsigned char* p = reinterpret_cast<const unsigned char*>(data_) + 2 * begin;
      for (std::uint64_t i = 0; i < n; ++i) out[i] = int(p[2 * i] | (p[2 * i + 1] << 8));
      return;
    }
    for (std::uint64_t i = 0; i < n; ++i) out[i] = (*this)[begin + i];
  }

  /// Ids per chunk of check_vocab's scan (8 MiB of uint16).
  static constexpr std::uint64_t kVocabScanChunk = std::uint64_t(1) << 22;

  /// \brief Checks every id against the vocabulary [0, vocab_size): throws fbt::Error naming the file, the
  /// first bad element's index and byte offset, and its id. \param what names the limit in the message.
  /// \param threads threads that scan (0: the machine's hardware threads, at most 8).
  /// The ids are scanned in chunks of kVocabScanChunk, each reduced to its smallest and largest id in a
  /// tight loop, the chunks shared among the threads; a chunk's pages of a mapping are released once it
  /// is scanned, so the scan keeps only the chunks in flight resident. Only the first chunk with a bad
  /// id is read again, id by id, for the message.
  void check_vocab(int vocab_size, const std::string& what = "vocab_size", int threads = 0) const {
    const std::uint64_t n_chunks = (n_ + kVocabScanChunk - 1) / kVocabScanChunk;
    std::atomic<std::uint64_t> next{0}, first_bad{n_chunks};
    auto scan = [&] {
      for (std::uint64_t c = next.fetch_add(1); c < n_chunks; c = next.fetch_add(1)) {
        if (c > first_bad.load()) continue;  // an earlier chunk is bad already: its id is the one reported
        const std::uint64_t b = c * kVocabScanChunk, e = std::min(n_, b + kVocabScanChunk);
        std::int64_t lo = 0, hi = 0;
        min_max(b, e, lo, hi);
        map_.release(byte_offset(b), byte_offset(e) - byte_offset(b));
        if (lo < 0 || hi >= vocab_size)
          for (std::uint64_t seen = first_bad.load(); c < seen && !first_bad.compare_exchange_weak(seen, c);) {
          }
      }
    };
    int nt = threads > 0 ? threads : int(std::min(8u, std::max(1u, std::thread::hardware_concurrency())));
    nt = int(std::min<std::uint64_t>(std::uint64_t(nt), std::max<std::uint64_t>(n_chunks, 1)));
    std::vector<std::thread> pool;
    for (int t = 1; t < nt; ++t) {
      try {
        pool.emplace_back(scan);
      } catch (const std::system_error&) {
        break;  // no more threads: those running, and this one, scan every chunk anyway
      }
    }
    scan();
    for (auto& t : pool) t.join();
    if (first_bad.load() == n_chunks) return;
    const std::uint64_t b = first_bad.load() * kVocabScanChunk;
    check_vocab_range(b, std::min(n_, b + kVocabScanChunk), vocab_size, what);
  }

  /// \brief check_vocab for elements [b, e) only (one window, read as training reads it), on this thread.
  void check_vocab_range(std::uint64_t b, std::uint64_t e, int vocab_size, const std::string& what = "vocab_size") const {
    if (e <= b) return;
    std::int64_t lo = 0, hi = 0;
    min_max(b, e, lo, hi);
    if (lo >= 0 && hi < vocab_size) return;
    for (std::uint64_t i = b; i < e; ++i) {
      const std::int64_t v = raw(i);
      if (v < 0 || v >= vocab_size)
        throw Error("fbt: token file '" + path_ + "': token " + std::to_string(i) + " (byte offset " + std::to_string(byte_offset(i)) + ") is id " +
                    std::to_string(v) + ", outside the vocabulary [0, " + std::to_string(vocab_size) + ") (" + what + ")");
    }
  }

  /// The largest id (the file is non-empty).
  std::int64_t max_id() const {
    std::int64_t lo = 0, hi = 0;
    min_max(0, n_, lo, hi);
    return hi;
  }

 private:
  /// The smallest and largest id of elements [b, e) (e > b).
  void min_max(std::uint64_t b, std::uint64_t e, std::int64_t& lo, std::int64_t& hi) const {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    switch (dtype_) {  // the file's little-endian elements are the host's: a loop the compiler vectorises
      case TokenDtype::u16: return min_max_as<std::uint16_t>(b, e, lo, hi);
      case TokenDtype::u32: return min_max_as<std::uint32_t>(b, e, lo, hi);
      case TokenDtype::i32: return min_max_as<std::int32_t>(b, e, lo, hi);
      case TokenDtype::i64: return min_max_as<std::int64_t>(b, e, lo, hi);
    }
#endif
    lo = std::numeric_limits<std::int64_t>::max(), hi = std::numeric_limits<std::int64_t>::min();
    for (std::uint64_t i = b; i < e; ++i) {
      const std::int64_t v = raw(i);
      lo = std::min(lo, v), hi = std::max(hi, v);
    }
  }
  template <class U> void min_max_as(std::uint64_t b, std::uint64_t e, std::int64_t& lo, std::int64_t& hi) const {
    const char* p = data_ + b * sizeof(U);
    U mn = std::numeric_limits<U>::max(), mx = std::numeric_limits<U>::min();
    for (std::uint64_t i = 0; i < e - b; ++i) {
      U v;
      std::memcpy(&v, p + i * sizeof(U), sizeof(U));  // elements need not be aligned
      mn = v < mn ? v : mn;
      mx = v > mx ? v : mx;
    }
    lo = std::int64_t(mn), hi = std::int64_t(mx);
  }

  std::string path_;
  detail::MappedFile map_;
  const char* data_ = nullptr;  // first element
  std::uint64_t offset_ = 0, n_ = 0;
  TokenDtype dtype_ = TokenDtype::u16;
};

}  // namespace fbt
