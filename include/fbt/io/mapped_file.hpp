// fbt/io/mapped_file.hpp: the read-only bytes of a whole regular file, memory-mapped where POSIX allows.
//
// Checkpoint readers (io/safetensors.hpp) read tensors straight out of the file instead of copying the
// data section into a buffer first: MappedFile::open stats the path (detail::regular_file_size: no
// directory, FIFO, device or oversize file is ever opened), opens it without blocking, checks the
// open file again (fstat) and maps it PROT_READ / MAP_PRIVATE. Where mmap is unavailable or fails, the
// file is read into memory instead (the same bytes, one copy). Pages of a mapping count as resident
// only while touched; release() hands back the pages of a range the caller is done with, so a loader
// that converts tensor after tensor peaks near one copy of the parameters, not two.
// Caveat of any mapping: if another process truncates the file while it is mapped, reading the lost
// pages raises SIGBUS; fbt checks the size when it opens the file, not afterwards.
// Copies share the mapping (it is released with the last copy). Every failure is an fbt::Error naming
// the file.
#pragma once

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <memory>
#include <new>
#include <string>

#include "../config.hpp"
#include "../detail/input.hpp"

#if defined(__unix__) || defined(__APPLE__)
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#define FBT_HAS_MMAP 1
#else
#define FBT_HAS_MMAP 0
#endif

namespace fbt {
namespace detail {

class MappedFile {
 public:
  MappedFile() = default;

  /// \brief The bytes of `path`, a regular file of at most max_bytes bytes.
  /// \param who, what as for regular_file_size: "fbt::read_safetensors", "a safetensors file"
  /// \param allow_map false reads the file into memory even where it could be mapped (for tests)
  static MappedFile open(const std::string& path, std::uint64_t max_bytes, const std::string& who, const std::string& what,
                         bool allow_map = true) {
    auto fail = [&](const std::string& why) -> void { throw Error(who + ": '" + path + "': " + why); };
    std::uint64_t size = regular_file_size(path, max_bytes, who, what);  // refuses FIFOs etc. before the open
    MappedFile f;
#if FBT_HAS_MMAP
    int flags = O_RDONLY | O_NONBLOCK;  // (a FIFO swapped in after the stat must not block the open)
#ifdef O_CLOEXEC
    flags |= O_CLOEXEC;
#endif
    const int fd = ::open(path.c_str(), flags);
    if (fd < 0) fail("cannot open file");
    struct Closer {
      int fd;
      ~Closer() { ::close(fd); }
    } closer{fd};
    struct stat st;
    if (::fstat(fd, &st) != 0) fail("cannot stat the open file");
    if (!S_ISREG(st.st_mode)) fail("not a regular file (it changed since it was checked)");
    size = std::uint64_t(st.st_size);  // the open file's size is the one that counts
    if (size > max_bytes) fail("file is " + std::to_string(size) + " bytes, over the " + std::to_string(max_bytes) + "-byte limit for " + what);
    f.size_ = size;
    if (size == 0) return f;
    if (allow_map && size <= std::uint64_t(SIZE_MAX)) {
      void* p = ::mmap(nullptr, std::size_t(size), PROT_READ, MAP_PRIVATE, fd, 0);
      if (p != MAP_FAILED) {
        const std::size_t n = std::size_t(size);
        f.hold_ = std::shared_ptr<const char>(static_cast<const char*>(p), [n](const char* q) { ::munmap(const_cast<char*>(q), n); });
        f.data_ = static_cast<const char*>(p);
        f.mapped_ = true;
        return f;
      }
    }
    // no mapping: read the whole file (its size justifies the buffer)
    char* buf = alloc(path, size, who);
    f.hold_ = std::shared_ptr<const char>(buf, std::default_delete<const char[]>());
    f.data_ = buf;
    std::uint64_t got = 0;
    while (got < size) {
      const ssize_t r = ::read(fd, buf + got, std::size_t(std::min<std::uint64_t>(size - got, std::uint64_t(1) << 30)));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) fail("read error after " + std::to_string(got) + " of " + std::to_string(size) + " bytes (the file changed while being read?)");
      got += std::uint64_t(r);
    }
#else
    (void)allow_map;
    std::ifstream in(path, std::ios::binary);
    if (!in) fail("cannot open file");
    f.size_ = size;
    if (size == 0) return f;
    char* buf = alloc(path, size, who);
    f.hold_ = std::shared_ptr<const char>(buf, std::default_delete<const char[]>());
    f.data_ = buf;
    in.read(buf, std::streamsize(size));
    if (!in || std::uint64_t(in.gcount()) != size) fail("read error (the file changed while being read?)");
#endif
    return f;
  }

  const char* data() const { return data_ ? data_ : ""; }
  std::uint64_t size() const { return size_; }
  /// True when the bytes are a memory mapping of the file (false: a copy in memory).
  bool mapped() const { return mapped_; }

  /// \brief Hints that bytes [off, off + n) will not be read again soon: a mapping drops their whole
  /// pages from memory (reading them later faults them in from the file again); a copy is unchanged.
  void release(std::uint64_t off, std::uint64_t n) const {
#if FBT_HAS_MMAP
    if (!mapped_ || n == 0 || off >= size_) return;
    if (n > size_ - off) n = size_ - off;
    const std::uint64_t page = std::uint64_t(::sysconf(_SC_PAGESIZE));
    const std::uint64_t b = (off + page - 1) / page * page, e = (off + n) / page * page;  // whole pages inside the range
    if (e > b) ::madvise(const_cast<char*>(data_) + b, std::size_t(e - b), MADV_DONTNEED);
#else
    (void)off, (void)n;
#endif
  }

 private:
  static char* alloc(const std::string& path, std::uint64_t size, const std::string& who) {
    if (size > std::uint64_t(SIZE_MAX)) throw Error(who + ": '" + path + "': file of " + std::to_string(size) + " bytes does not fit in memory");
    try {
      return new char[std::size_t(size)];
    } catch (const std::bad_alloc&) {
      throw Error(who + ": '" + path + "': out of memory reading the file (" + std::to_string(size) + " bytes)");
    }
  }

  std::shared_ptr<const char> hold_;  // owns the mapping or the buffer
  const char* data_ = nullptr;
  std::uint64_t size_ = 0;
  bool mapped_ = false;
};

}  // namespace detail
}  // namespace fbt
