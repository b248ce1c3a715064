// fbt/io/json.hpp: nlohmann_json for fbt's io/ headers, plus the file helpers they share.
//
// Only io/ headers include this (STYLE 2.1: core/ ops/ layers/ model/ train/ stay Eigen + std). It
// adds what the JSON-based formats (safetensors headers, config files; spec sections 8-9) all need:
//  * parse_json_strict: a linear-time, bounded parse through nlohmann's SAX interface (no callback
//    parser, whose end-of-object step rescans siblings). It refuses a NUL byte anywhere (nlohmann would end
//    the document there), invalid JSON, duplicate keys in any
//    object (checked against the object being built, O(log n) per key), nesting deeper than
//    JsonLimits::max_depth (found by a pre-scan that names the byte), keys and strings over their
//    length limits and documents with more values than max_values. The limits are in
//    docs/file-formats.md.
//  * json_brief: a bounded, one-line description of a value for error messages (never dump() of an
//    untrusted value: a 20 MB value quotes as its first bytes and its size).
//  * read_file_bytes: a whole regular file of bounded size (detail::regular_file_size first).
//  * AtomicFile: writes `path + ".tmp"`, checks every write, flushes it to disk and renames it into
//    place, so an interrupted save never leaves half a file under the real name.
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

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <new>
#include <string>
#include <utility>
#include <vector>

#if defined(__unix__) || defined(__APPLE__)
#include <unistd.h>  // fsync, fileno
#define FBT_HAS_FSYNC 1
#else
#define FBT_HAS_FSYNC 0
#endif

#include "../config.hpp"
#include "../detail/input.hpp"

namespace fbt {

/// \brief What parse_json_strict accepts (defaults: docs/file-formats.md, "JSON").
struct JsonLimits {
  std::size_t max_depth = 64;           ///< open arrays/objects at once (the top-level object is depth 1)
  std::size_t max_key = 65536;          ///< bytes in one object key (a tensor name)
  std::size_t max_string = 16u << 20;   ///< bytes in one string value (16 MiB)
  std::size_t max_values = 16u << 20;   ///< values in the whole document (16,777,216)
  std::string max_values_why;           ///< appended to the max_values refusal, in parentheses, when not empty
};

namespace detail {

/// \brief `v` as an error message may show it, in at most about `max_chars` characters, one line:
/// numbers, booleans and null as JSON; a string quoted through excerpt(); a short array of scalars
/// as JSON; any other array or object as "an array of N elements" / "an object of N keys". Never
/// recursive, so a deeply nested value cannot overflow the stack here (dump() would).
inline std::string json_brief(const nlohmann::json& v, std::size_t max_chars = 64) {
  switch (v.type()) {
    case nlohmann::json::value_t::string: return "\"" + excerpt(v.get_ref<const std::string&>(), max_chars) + "\"";
    case nlohmann::json::value_t::array: {
      bool flat = v.size() <= 8;
      if (flat)
        for (const auto& e : v) flat = flat && !e.is_structured() && !e.is_string();
      if (!flat) return "an array of " + std::to_string(v.size()) + " elements";
      return excerpt(v.dump(), max_chars);  // at most 8 numbers, booleans or nulls
    }
    case nlohmann::json::value_t::object: return "an object of " + std::to_string(v.size()) + " keys";
    default: return excerpt(v.dump(), max_chars);  // a number, true/false, null
  }
}

/// \brief Throws fbt::Error "<where>: nesting deeper than N levels at byte B" when the JSON text
/// [b, e) opens more than max_depth arrays/objects at once. One linear scan that skips strings;
/// run before the parser so that the error can name the byte (the SAX parser does not report offsets).
inline void json_check_depth(const char* b, const char* e, std::size_t max_depth, const std::string& where) {
  std::size_t depth = 0;
  bool in_str = false, esc = false;
  for (const char* p = b; p != e; ++p) {
    const char c = *p;
    if (in_str) {
      if (esc) esc = false;
      else if (c == '\\') esc = true;
      else if (c == '"') in_str = false;
    } else if (c == '"') {
      in_str = true;
    } else if (c == '{' || c == '[') {
      if (++depth > max_depth)
        throw Error(where + ": nesting deeper than " + std::to_string(max_depth) + " levels at byte " + std::to_string(p - b) +
                    " (fbt refuses JSON nested that deep)");
    } else if ((c == '}' || c == ']') && depth > 0) {
      --depth;
    }
  }
}

/// \brief The SAX handler behind parse_json_strict: builds the value like nlohmann's own DOM parser,
/// refusing duplicate keys and anything over the JsonLimits. On a refusal it records the reason and
/// returns false, which stops the parse.
class StrictJsonBuilder {
 public:
  using json = nlohmann::json;
  StrictJsonBuilder(json& root, const JsonLimits& lim) : root_(root), lim_(lim) {}

  bool null() { return value(json(nullptr)); }
  bool boolean(bool v) { return value(json(v)); }
  bool number_integer(json::number_integer_t v) { return value(json(v)); }
  bool number_unsigned(json::number_unsigned_t v) { return value(json(v)); }
  bool number_float(json::number_float_t v, const json::string_t&) { return value(json(v)); }
  bool string(json::string_t& s) {
    if (s.size() > lim_.max_string)
      return fail("a string of " + std::to_string(s.size()) + " bytes" + at() + " is over the " + std::to_string(lim_.max_string) +
                  "-byte limit");
    return value(json(std::move(s)));
  }
  template <class B> bool binary(B&) { return fail("binary value" + at()); }  // (only binary formats produce these)
  bool start_object(std::size_t) { return open(json::value_t::object); }
  bool start_array(std::size_t) { return open(json::value_t::array); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }
  bool key(json::string_t& k) {
    if (k.size() > lim_.max_key)
      return fail("a key of " + std::to_string(k.size()) + " bytes (\"" + excerpt(k, 32) + "\")" + at() + " is over the " +
                  std::to_string(lim_.max_key) + "-byte limit");
    auto& obj = stack_.back()->get_ref<json::object_t&>();
    if (obj.find(k) != obj.end())  // the object being built is the key set of this object: O(log n), no rescans
      return fail("duplicate key \"" + excerpt(k, 128) + "\"" + (labels_.size() <= 1 ? std::string(" at top level") : " in " + path()));
    key_ = &obj[k];
    last_key_.assign(k, 0, std::min<std::size_t>(k.size(), 65));  // for the path in later errors (bounded copy)
    return true;
  }
  template <class E> bool parse_error(std::size_t, const std::string&, const E& ex) {
    // nlohmann's message quotes the last token, which may be a whole (huge) string: bound it
    return fail("invalid JSON: " + excerpt(ex.what(), 240));
  }

  const std::string& error() const { return error_; }

 private:
  bool fail(std::string why) {
    error_ = std::move(why);
    return false;
  }
  bool too_many_values() {
    return fail("more than " + std::to_string(lim_.max_values) + " values" + (lim_.max_values_why.empty() ? "" : " (" + lim_.max_values_why + ")"));
  }
  /// Places v where the parse is (the root, the next array element, or the value of the last key).
  json* put(json&& v) {
    if (stack_.empty()) {
      root_ = std::move(v);
      return &root_;
    }
    json& top = *stack_.back();
    if (top.is_array()) {
      auto& arr = top.get_ref<json::array_t&>();
      arr.push_back(std::move(v));
      return &arr.back();
    }
    *key_ = std::move(v);
    return key_;
  }
  bool value(json&& v) {
    if (++values_ > lim_.max_values) return too_many_values();
    put(std::move(v));
    return true;
  }
  bool open(json::value_t t) {
    if (stack_.size() + 1 > lim_.max_depth) return fail("nesting deeper than " + std::to_string(lim_.max_depth) + " levels" + at());
    if (++values_ > lim_.max_values) return too_many_values();
    std::string label;  // how this value is reached from its parent, for the path in errors
    if (!stack_.empty())
      label = stack_.back()->is_array() ? "[" + std::to_string(stack_.back()->size()) + "]" : "\"" + excerpt(last_key_, 64) + "\"";
    stack_.push_back(put(json(t)));  // (a parent's element does not move while its child is open: nothing is added to the parent)
    labels_.push_back(std::move(label));
    return true;
  }
  bool close() {
    stack_.pop_back();
    labels_.pop_back();
    return true;
  }
  std::string path() const {  // "a"."b"[3] for the innermost open value
    std::string r;
    for (std::size_t i = 1; i < labels_.size(); ++i) r += (r.empty() || labels_[i][0] == '[' ? "" : ".") + labels_[i];
    return r.size() > 240 ? excerpt(r, 240) : r;
  }
  std::string at() const { return labels_.size() <= 1 ? std::string() : " in " + path(); }

  json& root_;
  JsonLimits lim_;
  std::vector<json*> stack_;         // the open arrays and objects, outermost first
  std::vector<std::string> labels_;  // how each open value is reached from its parent ("a", [3]); "" for the root
  json* key_ = nullptr;              // the value slot of the last key read
  std::string last_key_;             // that key's first bytes
  std::size_t values_ = 0;
  std::string error_;
};

/// \brief Parses the JSON text [b, e) strictly (see the file comment); `where` names the source in
/// errors, e.g. "fbt::read_safetensors: 'model.safetensors': header". Linear in the text's size.
/// A duplicate is reported with its path, e.g. `duplicate key "dtype" in "a"`.
inline nlohmann::json parse_json_strict(const char* b, const char* e, const std::string& where, const JsonLimits& lim = {}) {
  // nlohmann's lexer takes a NUL byte for the end of the input, so a document with one would be cut there and
  // whatever follows it ignored: JSON text has no NUL byte (RFC 8259: control characters only escaped)
  if (const void* z = std::memchr(b, 0, std::size_t(e - b)))
    throw Error(where + ": a NUL byte at offset " + std::to_string(static_cast<const char*>(z) - b) + " (JSON text holds none; what follows it would be ignored)");
  json_check_depth(b, e, lim.max_depth, where);
  nlohmann::json root;
  StrictJsonBuilder h(root, lim);
  bool ok = false;
  try {
    ok = nlohmann::json::sax_parse(b, e, &h);
  } catch (const nlohmann::json::exception& ex) {
    throw Error(where + ": invalid JSON: " + excerpt(ex.what(), 240));
  } catch (const std::bad_alloc&) {
    throw Error(where + ": out of memory while parsing " + std::to_string(e - b) + " bytes of JSON");
  }
  if (!ok) throw Error(where + ": " + (h.error().empty() ? std::string("invalid JSON") : h.error()));
  return root;
}

/// \brief parse_json_strict over a whole string.
inline nlohmann::json parse_json_strict(const std::string& text, const std::string& where, const JsonLimits& lim = {}) {
  return parse_json_strict(text.data(), text.data() + text.size(), where, lim);
}

/// The largest file read_file_bytes reads by default (a config or a text file given on a command line).
constexpr std::uint64_t kReadFileMaxBytes = std::uint64_t(1) << 30;

/// \brief The whole file as bytes, after regular_file_size (a directory, FIFO or device, or a file over
/// `max_bytes`, is refused before it is opened); throws fbt::Error naming `path` on any failure.
inline std::string read_file_bytes(const std::string& path, const char* fn, std::uint64_t max_bytes = kReadFileMaxBytes) {
  const std::string who = std::string("fbt::") + fn;
  const std::uint64_t n = regular_file_size(path, max_bytes, who, "this file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(who + ": '" + path + "': cannot open file");
  std::string s;
  try {
    s.resize(std::size_t(n));
  } catch (const std::bad_alloc&) {
    throw Error(who + ": '" + path + "': out of memory reading " + std::to_string(n) + " bytes");
  }
  if (n > 0) in.read(&s[0], std::streamsize(n));
  if (!in || std::uint64_t(in.gcount()) != n) throw Error(who + ": '" + path + "': read error (the file changed while being read?)");
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
  /// \brief Flushes and syncs what was written to the temporary file (so a full disk shows now, before
  /// commit); `path` is untouched.
  void sync() {
    if (std::fflush(f_) != 0) fail("cannot flush '" + tmp_ + "' (disk full?)");
#if FBT_HAS_FSYNC
    if (::fsync(::fileno(f_)) != 0) fail("cannot sync '" + tmp_ + "' to disk");
#endif
  }
  /// \brief Flushes and syncs the temporary file, then renames it over `path`.
  void commit() {
    sync();
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
