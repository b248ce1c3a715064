// tests/fuzz/fuzz_common.hpp: what fbt's libFuzzer harnesses share (docs/fuzzing.md).
//
// fbt's readers take paths, so each harness writes its input to a file in a per-process directory
// (under $FBT_FUZZ_TMPDIR, else /dev/shm, else the system temp directory) made once in
// LLVMFuzzerInitialize and overwritten per input. The directory is removed at a normal exit; one left
// by a crashed process (libFuzzer exits with _Exit) is removed by the next harness that starts.
//
// The verdict: an fbt::Error is the expected refusal of a bad file and passes. Everything else is a
// finding for libFuzzer to report and save: another exception (finding() names its type), a crash, a
// sanitizer report, a broken invariant (FBT_FUZZ_CHECK), and, through libFuzzer's own limits, a
// timeout or an allocation over -rss_limit_mb / -malloc_limit_mb.
// Optional, for the bounded error text the readers promise: FBT_FUZZ_MAX_ERROR_BYTES=N in
// the environment also makes an fbt::Error message longer than N bytes, or one holding a line break,
// a finding.
#pragma once

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <string>
#include <typeinfo>

#include <signal.h>
#include <unistd.h>

#if defined(__has_include)
#if __has_include(<cxxabi.h>)
#include <cxxabi.h>
#define FBT_FUZZ_HAS_CXXABI 1
#endif
#endif

#include "fbt/config.hpp"

namespace fbt_fuzz {

/// \brief Reports a finding on stderr and aborts, so libFuzzer saves the input as a crash artifact.
[[noreturn]] inline void finding(const std::string& what) {
  std::fprintf(stderr, "\n==fbt-fuzz== FINDING: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

#define FBT_FUZZ_CHECK(cond, msg)                                                                   \
  do {                                                                                              \
    if (!(cond)) ::fbt_fuzz::finding(std::string("invariant `" #cond "` broken: ") + (msg));       \
  } while (0)

inline std::string type_name(const std::type_info& t) {
#ifdef FBT_FUZZ_HAS_CXXABI
  int st = 0;
  char* d = abi::__cxa_demangle(t.name(), nullptr, nullptr, &st);
  if (st == 0 && d) {
    std::string r = d;
    std::free(d);
    return r;
  }
#endif
  return t.name();
}

/// The directory this process writes its inputs to (made by init()).
inline std::string& work_dir() {
  static std::string d;
  return d;
}

inline void remove_work_dir() {
  std::error_code ec;
  if (!work_dir().empty()) std::filesystem::remove_all(work_dir(), ec);
}

/// \brief Makes <base>/fbt-fuzz-<harness>-<pid>/ (returned) after removing those of dead processes.
inline std::string init(const char* harness) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path base;
  if (const char* e = std::getenv("FBT_FUZZ_TMPDIR"); e && *e) base = e;
  else if (fs::is_directory("/dev/shm", ec) && ::access("/dev/shm", W_OK) == 0) base = "/dev/shm";
  else base = fs::temp_directory_path(ec);
  const std::string prefix = "fbt-fuzz-";
  for (fs::directory_iterator it(base, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string n = it->path().filename().string();
    if (n.rfind(prefix, 0) != 0) continue;
    const std::size_t dash = n.rfind('-');
    char* stop = nullptr;
    const long pid = std::strtol(n.c_str() + dash + 1, &stop, 10);
    if (pid > 0 && *stop == 0 && ::kill(pid_t(pid), 0) != 0 && errno == ESRCH) {
      std::error_code ec2;
      fs::remove_all(it->path(), ec2);
    }
  }
  const fs::path dir = base / (prefix + harness + "-" + std::to_string(::getpid()));
  fs::create_directories(dir, ec);
  if (ec) {
    std::fprintf(stderr, "fbt fuzz: cannot create %s: %s\n", dir.c_str(), ec.message().c_str());
    std::exit(1);
  }
  work_dir() = dir.string();
  std::atexit(remove_work_dir);
  return work_dir();
}

/// \brief Writes the bytes to `path` (replacing it); any failure ends the run (not a finding).
inline void write_file(const std::string& path, const void* data, std::size_t n) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f || (n && std::fwrite(data, 1, n, f) != n) || std::fclose(f) != 0) {
    std::fprintf(stderr, "fbt fuzz: cannot write %s: %s\n", path.c_str(), std::strerror(errno));
    std::exit(1);
  }
}

/// \brief The message of an accepted refusal; with FBT_FUZZ_MAX_ERROR_BYTES set, checks its length
/// and that it is one line.
inline void refused(const fbt::Error& e) {
  static const long max_bytes = [] {
    const char* v = std::getenv("FBT_FUZZ_MAX_ERROR_BYTES");
    return v && *v ? std::strtol(v, nullptr, 10) : 0L;
  }();
  if (max_bytes <= 0) return;
  const std::string m = e.what();
  if (long(m.size()) > max_bytes)
    finding("fbt::Error message of " + std::to_string(m.size()) + " bytes (FBT_FUZZ_MAX_ERROR_BYTES " + std::to_string(max_bytes) +
            "): " + m.substr(0, 300) + "...");
  if (m.find('\n') != std::string::npos || m.find('\r') != std::string::npos)
    finding("fbt::Error message holds a line break: " + m.substr(0, 300));
}

/// The message of the last refusal attempt() caught (its first 500 bytes).
inline std::string& last_refusal() {
  static std::string m;
  return m;
}

/// \brief A finding about a call that should have succeeded but refused: names the refusal too.
[[noreturn]] inline void refusal_finding(const std::string& what) { finding(what + " (it said: " + last_refusal() + ")"); }

/// \brief Runs fn: an fbt::Error is a refusal (returns false); any other exception is a finding.
template <class Fn> bool attempt(Fn&& fn) {
  try {
    fn();
    return true;
  } catch (const fbt::Error& e) {
    last_refusal() = std::string(e.what()).substr(0, 500);
    refused(e);
    return false;
  } catch (const std::exception& e) {
    finding("exception other than fbt::Error: " + type_name(typeid(e)) + ": " + std::string(e.what()).substr(0, 1000));
  } catch (...) {
    finding("exception other than fbt::Error (not a std::exception)");
  }
}

}  // namespace fbt_fuzz
