// fbt/io/json.hpp: nlohmann_json for fbt's io/ headers, plus the file helpers they share.
//
// Only io/ headers include this (STYLE 2.1: core/ ops/ layers/ model/ train/ stay Eigen + std). It
// adds three things the JSON-based formats (safetensors headers, config files; spec sections 8-9) all
// need: a strict parse that refuses duplicate keys (nlohmann silently keeps the last one), reading a
// whole file, and AtomicFile, which writes `path + ".tmp"`, checks every write, flushes it to disk and
// renames it into place, so an interrupted save never leaves half a file under the real name.
// Every failure is an fbt::Error naming the file.
#pragma once

#if defined(__has_include)
#if __has_include(<nlohmann/json.hpp>)
#include <nlohmann/json.hpp>
#else
#error "fbt/io/json.hpp needs nlohmann_json (Debian: apt install nlohmann-json3-dev)"
#endif
#else
#include <nlohmann/json.hpp>
#endif

#include <cstdio>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#if defined(__unix__) || defined(__APPLE__)
#include <unistd.h>  // fsync, fileno
#define FBT_HAS_FSYNC 1
#else
#define FBT_HAS_FSYNC 0
#endif

#include "../config.hpp"

namespace fbt {
namespace detail {

/// \brief Parses `text` as JSON, refusing invalid JSON and duplicate keys in any object.
/// \param where names the source in errors, e.g. "'model.safetensors': header"
/// A duplicate is reported with its path, e.g. `duplicate key "dtype" in "a"`.
inline nlohmann::json parse_json_strict(const std::string& text, const std::string& where) {
  // One key set per open object (callback depth: the top-level object's keys arrive at depth 1),
  // plus the key that opened each nested value, so the error can say where the duplicate is.
  std::vector<std::set<std::string>> seen;
  std::vector<std::string> path;  // key of each open nested value; path[d-1] for keys at depth d+1
  std::string last_key;
  auto cb = [&](int depth, nlohmann::json::parse_event_t ev, nlohmann::json& parsed) {
    using E = nlohmann::json::parse_event_t;
    if (ev == E::object_start || ev == E::array_start) {
      seen.emplace_back();  // (an array's set stays empty: it keeps the stack in step with the depth)
      if (depth > 0) path.push_back(last_key);
    } else if (ev == E::object_end || ev == E::array_end) {
      if (!seen.empty()) seen.pop_back();
      if (!path.empty() && depth > 0) path.pop_back();
    } else if (ev == E::key) {
      const std::string k = parsed.get<std::string>();
      if (!seen.empty() && !seen.back().insert(k).second) {
        std::string in;
        for (const auto& p : path) in += (in.empty() ? "\"" : "\".\"") + p;
        throw Error(where + ": duplicate key \"" + k + "\"" + (in.empty() ? std::string(" at top level") : " in " + in + "\""));
      }
      last_key = k;
    }
    return true;
  };
  try {
    return nlohmann::json::parse(text, cb, /*allow_exceptions=*/true, /*ignore_comments=*/false);
  } catch (const nlohmann::json::exception& e) {
    throw Error(where + ": invalid JSON: " + e.what());
  }
}

/// \brief The whole file as bytes; throws fbt::Error naming `path` when it cannot be opened or read.
inline std::string read_file_bytes(const std::string& path, const char* fn) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(std::string("fbt::") + fn + ": '" + path + "': cannot open file");
  in.seekg(0, std::ios::end);
  const std::streamoff n = in.tellg();
  if (n < 0) throw Error(std::string("fbt::") + fn + ": '" + path + "': cannot determine the file size");
  in.seekg(0);
  std::string s(std::size_t(n), '\0');
  if (n > 0) in.read(&s[0], n);
  if (!in || in.gcount() != n) throw Error(std::string("fbt::") + fn + ": '" + path + "': read error");
  return s;
}

/// \brief A file written under `path + ".tmp"` and renamed to `path` by commit() (spec section 8).
///
/// Every write is checked; commit() flushes, fsyncs (POSIX) and renames. If commit() is never reached
/// (an error, an exception), the destructor removes the temporary file and `path` is untouched.
class AtomicFile {
 public:
  /// \brief Opens `path + ".tmp"` for writing (truncating a stale one). `fn` names the caller in errors.
  AtomicFile(std::string path, const char* fn) : path_(std::move(path)), tmp_(path_ + ".tmp"), fn_(fn) {
    f_ = std::fopen(tmp_.c_str(), "wb");
    if (!f_) fail("cannot open '" + tmp_ + "' for writing");
  }
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  ~AtomicFile() {
    if (f_) std::fclose(f_);
    if (!committed_) std::remove(tmp_.c_str());
  }
  /// \brief Appends n bytes; throws fbt::Error (naming the file) on a short write, e.g. a full disk.
  void write(const void* p, std::size_t n) {
    if (n == 0) return;
    if (std::fwrite(p, 1, n, f_) != n) fail("short write to '" + tmp_ + "' (disk full?)");
  }
  void write(const std::string& s) { write(s.data(), s.size()); }
  /// \brief Flushes and syncs the temporary file, then renames it over `path`.
  void commit() {
    if (std::fflush(f_) != 0) fail("cannot flush '" + tmp_ + "' (disk full?)");
#if FBT_HAS_FSYNC
    if (::fsync(::fileno(f_)) != 0) fail("cannot sync '" + tmp_ + "' to disk");
#endif
    const int rc = std::fclose(f_);
    f_ = nullptr;
    if (rc != 0) fail("cannot close '" + tmp_ + "'");
    if (std::rename(tmp_.c_str(), path_.c_str()) != 0) fail("cannot rename '" + tmp_ + "' into place");
    committed_ = true;
  }

 private:
  [[noreturn]] void fail(const std::string& what) { throw Error(std::string("fbt::") + fn_ + ": '" + path_ + "': " + what); }
  std::string path_, tmp_;
  const char* fn_;
  std::FILE* f_ = nullptr;
  bool committed_ = false;
};

}  // namespace detail
}  // namespace fbt
