// fbt/detail/input.hpp: the two guards every reader of an outside file uses.
//
// regular_file_size() stats a path before anything opens it, so a directory, a FIFO (which would block
// the open forever), /dev/zero (which never ends) or a file over the caller's size limit is refused with
// one line naming the file, instead of blocking, reading without bound or failing with a library
// message. excerpt() bounds what an error message quotes from the input: a value from a 20 MB file is
// shown as its first bytes and its length, never whole, and a byte that is not printable UTF-8 as \xNN.
// Both are std + POSIX only, so data/ and io/ headers can share them.
#pragma once

#include <cstdint>
#include <algorithm>
#include <string>

#include <sys/stat.h>

#include "../config.hpp"

namespace fbt {
namespace detail {

/// Length of the well-formed UTF-8 sequence of a printable character at s[i] (1 for printable ASCII),
/// or 0: a control character (C0, DEL, C1), a stray or missing continuation byte, an overlong form, a
/// surrogate, a code point over U+10FFFF, or a sequence cut off at `n`.
inline std::size_t utf8_printable_len(const std::string& s, std::size_t i, std::size_t n) {
  const unsigned char c = static_cast<unsigned char>(s[i]);
  if (c < 0x80) return (c < 0x20 || c == 0x7f) ? 0 : 1;
  std::size_t len = 0;
  std::uint32_t cp = 0, min = 0;
  if (c >= 0xc2 && c <= 0xdf) len = 2, cp = c & 0x1fu, min = 0x80;
  else if (c >= 0xe0 && c <= 0xef) len = 3, cp = c & 0x0fu, min = 0x800;
  else if (c >= 0xf0 && c <= 0xf4) len = 4, cp = c & 0x07u, min = 0x10000;
  else return 0;  // a continuation byte, 0xc0/0xc1 (always overlong) or 0xf5-0xff
  if (i + len > n) return 0;
  for (std::size_t k = 1; k < len; ++k) {
    const unsigned char d = static_cast<unsigned char>(s[i + k]);
    if ((d & 0xc0u) != 0x80u) return 0;
    cp = (cp << 6) | (d & 0x3fu);
  }
  if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff) || (cp >= 0x80 && cp <= 0x9f)) return 0;
  return len;
}

/// \brief `s` as an error message may quote it: at most `max_chars` bytes of output, then "... (N bytes)".
/// Printable ASCII and well-formed UTF-8 characters are kept; every other byte (control characters,
/// bytes that are not valid UTF-8) is shown escaped as \xNN, so a hostile value can neither break the
/// one-line message nor put raw bytes on a terminal. The bound counts the output (an escaped byte is 4):
/// a value of control bytes is no longer than a printable one (it could reach 4x the bound).
inline std::string excerpt(const std::string& s, std::size_t max_chars = 64) {
  static const char hex[] = "0123456789abcdef";
  std::string r;
  r.reserve(std::min(s.size(), max_chars) + 24);
  std::size_t i = 0;
  while (i < s.size()) {
    const std::size_t len = utf8_printable_len(s, i, s.size());
    if (r.size() + (len > 0 ? len : 4) > max_chars) break;  // a character or an escape is kept whole or not at all
    if (len > 0) {
      r.append(s, i, len);
      i += len;
      continue;
    }
    const unsigned char c = static_cast<unsigned char>(s[i++]);
    r += "\\x";
    r += hex[c >> 4];
    r += hex[c & 15];
  }
  if (i < s.size()) r += "... (" + std::to_string(s.size()) + " bytes)";
  return r;
}

/// \brief The size of `path` after checking that it is a regular file of at most `max_bytes` bytes.
/// \param who names the caller in errors, e.g. "fbt::read_safetensors" or "--data"
/// \param what names the kind of file in the size error, e.g. "a checkpoint"
/// Throws fbt::Error "<who>: '<path>': ..." when the path does not exist, is a directory, FIFO, socket
/// or device, or is larger than max_bytes. Call it before opening: opening a FIFO for reading blocks.
inline std::uint64_t regular_file_size(const std::string& path, std::uint64_t max_bytes, const std::string& who,
                                       const std::string& what = "this kind of file") {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) throw Error(who + ": '" + path + "': cannot open file (no such file or no permission)");
  if (S_ISDIR(st.st_mode)) throw Error(who + ": '" + path + "': is a directory, expected a file");
  if (!S_ISREG(st.st_mode))
    throw Error(who + ": '" + path + "': not a regular file (a FIFO, socket or device); fbt reads only regular files");
  const std::uint64_t size = std::uint64_t(st.st_size);
  if (size > max_bytes)
    throw Error(who + ": '" + path + "': file is " + std::to_string(size) + " bytes, over the " + std::to_string(max_bytes) +
                "-byte limit for " + what);
  return size;
}

}  // namespace detail
}  // namespace fbt
