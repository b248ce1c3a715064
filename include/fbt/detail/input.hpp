// fbt/detail/input.hpp: the two guards every reader of an outside file uses (issue 11).
//
// regular_file_size() stats a path before anything opens it, so a directory, a FIFO (which would block
// the open forever), /dev/zero (which never ends) or a file over the caller's size limit is refused with
// one line naming the file, instead of blocking, reading without bound or failing with a library
// message. excerpt() bounds what an error message quotes from the input: a value from a 20 MB file is
// shown as its first bytes and its length, never whole. Both are std + POSIX only, so data/ and io/
// headers can share them.
#pragma once

#include <cstdint>
#include <string>

#include <sys/stat.h>

#include "../config.hpp"

namespace fbt {
namespace detail {

/// \brief `s` as an error message may quote it: at most `max_chars` bytes, then "... (N bytes)";
/// control characters are shown as '?', so a hostile value cannot break the one-line message.
inline std::string excerpt(const std::string& s, std::size_t max_chars = 64) {
  std::string r;
  const std::size_t n = s.size() < max_chars ? s.size() : max_chars;
  r.reserve(n + 24);
  for (std::size_t i = 0; i < n; ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    r += (c < 0x20 || c == 0x7f) ? '?' : char(c);
  }
  if (s.size() > max_chars) r += "... (" + std::to_string(s.size()) + " bytes)";
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
