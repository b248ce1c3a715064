// fbt/io/safetensors.hpp: a strict, bounded reader and an atomic writer for the safetensors format
// (spec 8, 9).
//
// Layout (huggingface/safetensors): an 8-byte little-endian header length N; N bytes of JSON,
//   {"__metadata__": {str: str}, name: {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}, ...}
// padded with spaces to a multiple of 8 bytes (as the reference writer does); then the data section,
// each tensor's bytes row-major and little-endian at [begin, end) relative to the section's start.
// The writer lays tensors out in the order given and renames `path + ".tmp"` into place.
// The reader opens only a regular file (detail::regular_file_size: no FIFO, device or directory),
// memory-maps it read-only (io/mapped_file.hpp; a plain read where mapping is unavailable), and
// parses the header in linear time with bounded depth (detail::parse_json_strict). It refuses
// everything spec section 9 lists and the limits of docs/file-formats.md: a header over 100 MB, not
// starting with '{', nested deeper than 64 levels or with duplicate keys; more than 1,048,576 tensors;
// a shape of more than 64 dimensions or whose byte size overflows; offsets that do not tile the data
// section exactly; bad dtype/shape fields; non-string metadata. Each refusal is one fbt::Error line
// naming the file and the tensor or field, quoting at most a bounded excerpt of the file's text.
// Interpreting the tensors (names, shapes against a config, conversion, finiteness) is
// io/checkpoint.hpp's job.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <new>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

#include "../config.hpp"
#include "../core/tensor.hpp"
#include "../detail/input.hpp"
#include "json.hpp"
#include "mapped_file.hpp"

#if defined(__BYTE_ORDER__) && defined(__ORDER_LITTLE_ENDIAN__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "fbt/io/safetensors.hpp copies tensor bytes as they are: it needs a little-endian host"
#endif

namespace fbt {

/// \brief One tensor to write: a view of row-major memory that the caller owns.
struct TensorRef {
  std::string name;   ///< e.g. "model.embed_tokens.weight"; unique, not "__metadata__"
  std::string dtype;  ///< safetensors dtype: "F32" (float), "F64" (double), or any other known one
  Shape shape;        ///< outermost axis first; {} is a scalar
  const void* data;   ///< numel(shape) * safetensors_dtype_size(dtype) bytes
};

/// \brief One header entry of a file that read_safetensors accepted.
struct SafetensorsEntry {
  std::string name;
  std::string dtype;
  Shape shape;
  std::uint64_t begin = 0, end = 0;  ///< byte range in SafetensorsFile::data
  std::uint64_t nbytes() const { return end - begin; }
};

/// \brief The data section of a file read_safetensors accepted: a read-only view into the mapped (or,
/// where mapping is unavailable, read) file, shared by copies.
class SafetensorsData {
 public:
  const char* data() const { return file_.data() + offset_; }
  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  /// True when the bytes are a memory mapping of the file (io/mapped_file.hpp).
  bool mapped() const { return file_.mapped(); }
  /// Drops the pages of bytes [begin, begin + n) from memory (a mapping only; see MappedFile::release).
  void release(std::uint64_t begin, std::uint64_t n) const { file_.release(offset_ + begin, n); }

  detail::MappedFile file_;   ///< the whole file (filled by the reader)
  std::uint64_t offset_ = 0;  ///< where the data section starts in it (8 + header length)
  std::size_t size_ = 0;      ///< its length
};

/// \brief A whole safetensors file, validated: entries, metadata and the data section.
struct SafetensorsFile {
  std::string path;                             ///< the file it was read from (for error messages)
  std::vector<SafetensorsEntry> tensors;        ///< in data order (sorted by begin)
  std::map<std::string, std::string> metadata;  ///< "__metadata__" ({} when absent)
  SafetensorsData data;                         ///< the data section, data.size() == last end
  /// \brief The entry called `name`, or nullptr.
  const SafetensorsEntry* find(const std::string& name) const {
    auto it = index_.find(name);
    return it == index_.end() ? nullptr : &tensors[it->second];
  }
  /// \brief The first byte of an entry's data (e.nbytes() bytes, little-endian, row-major).
  const char* bytes(const SafetensorsEntry& e) const { return data.data() + e.begin; }
  /// \brief Hints that an entry's bytes are done with: a mapped file drops their pages from memory.
  void release(const SafetensorsEntry& e) const { data.release(e.begin, e.nbytes()); }

  std::map<std::string, std::size_t> index_;  ///< name -> position in tensors (filled by the reader)
};

/// \brief Bytes per element of a safetensors dtype ("F32" -> 4, "BF16" -> 2, ...), 0 if unknown.
inline std::size_t safetensors_dtype_size(const std::string& dtype) {
  static const std::map<std::string, std::size_t> sizes = {
      {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E5M2", 1}, {"F8_E4M3", 1}, {"I16", 2}, {"U16", 2}, {"F16", 2},
      {"BF16", 2}, {"I32", 4}, {"U32", 4}, {"F32", 4},     {"F64", 8},     {"I64", 8}, {"U64", 8}};
  auto it = sizes.find(dtype);
  return it == sizes.end() ? 0 : it->second;
}

/// \brief The safetensors dtype of T: "F32" for float, "F64" for double.
template <class T> inline const char* safetensors_dtype() {
  static_assert(std::is_same<T, float>::value || std::is_same<T, double>::value, "fbt stores float (F32) or double (F64)");
  return std::is_same<T, float>::value ? "F32" : "F64";
}

namespace detail {

/// The largest header read_safetensors accepts (the reference implementation's limit).
constexpr std::uint64_t kSafetensorsMaxHeader = 100000000;
/// The largest file read_safetensors opens (1 TiB; its data is mapped, not read).
constexpr std::uint64_t kSafetensorsMaxFile = std::uint64_t(1) << 40;
/// The most tensors one file may hold.
constexpr std::size_t kSafetensorsMaxTensors = std::size_t(1) << 20;
/// The most dimensions one tensor may have (numpy's NPY_MAXDIMS).
constexpr std::size_t kSafetensorsMaxRank = 64;

/// A tensor or key name as an error message quotes it (bounded, one line).
inline std::string st_name(const std::string& s) { return excerpt(s, 128); }

inline std::string st_shape_str(const Shape& s) {  // [2, 3]
  std::string r = "[";
  for (std::size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

/// numel(shape) * elem bytes, or false when a dimension is negative or the product of the non-zero
/// dimensions times elem exceeds 2^63 - 1 (so no stride or element count of the shape can overflow,
/// even when a zero dimension makes the size 0, e.g. (0, 2^62, 2^62)).
inline bool st_nbytes(const Shape& shape, std::size_t elem, std::uint64_t& out) {
  const std::uint64_t cap = std::uint64_t(std::numeric_limits<std::int64_t>::max());
  std::uint64_t n = elem, nz = elem;
  for (auto d : shape) {
    if (d < 0) return false;
    if (d == 0) {
      n = 0;
      continue;
    }
    if (nz > cap / std::uint64_t(d)) return false;
    nz *= std::uint64_t(d);
    n *= std::uint64_t(d);  // n <= nz
  }
  out = n;
  return true;
}

/// IEEE half -> double (exact).
inline double st_half_to_double(std::uint16_t h) {
  const int sign = h >> 15, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  double v;
  if (exp == 0) v = std::ldexp(double(mant), -24);  // zero or subnormal
  else if (exp == 31) v = mant ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  else v = std::ldexp(double(mant | 0x400), exp - 25);
  return sign ? -v : v;
}

/// \brief Element i of a floating-point tensor ("F64", "F32", "BF16", "F16") as a double (exact).
inline double st_float_at(const std::string& dtype, const char* p, std::size_t i) {
  if (dtype == "F32") {
    float f;
    std::memcpy(&f, p + 4 * i, 4);
    return f;
  }
  if (dtype == "F64") {
    double d;
    std::memcpy(&d, p + 8 * i, 8);
    return d;
  }
  std::uint16_t h;
  std::memcpy(&h, p + 2 * i, 2);
  if (dtype == "BF16") {  // the top half of an IEEE float
    const std::uint32_t bits = std::uint32_t(h) << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  }
  FBT_ASSERT(dtype == "F16", "st_float_at: not a floating-point dtype: " + dtype);
  return st_half_to_double(h);
}

/// \brief Converts n elements of a floating-point tensor ("F64", "F32", "BF16", "F16") to T.
/// Same dtype: a plain copy (bit for bit). Otherwise each element goes through double (exact for the
/// narrower types), then is rounded to T. Non-finite results are the caller's to check.
template <class T> void st_convert(const std::string& dtype, const char* src, std::size_t n, T* dst) {
  if (dtype == safetensors_dtype<T>()) {
    if (n) std::memcpy(dst, src, n * sizeof(T));
  } else if (dtype == "F32") {
    for (std::size_t i = 0; i < n; ++i) {
      float f;
      std::memcpy(&f, src + 4 * i, 4);
      dst[i] = T(f);
    }
  } else if (dtype == "F64") {
    for (std::size_t i = 0; i < n; ++i) {
      double d;
      std::memcpy(&d, src + 8 * i, 8);
      dst[i] = T(d);
    }
  } else if (dtype == "BF16") {
    for (std::size_t i = 0; i < n; ++i) {
      std::uint16_t h;
      std::memcpy(&h, src + 2 * i, 2);
      const std::uint32_t bits = std::uint32_t(h) << 16;
      float f;
      std::memcpy(&f, &bits, 4);
      dst[i] = T(f);
    }
  } else if (dtype == "F16") {
    for (std::size_t i = 0; i < n; ++i) {
      std::uint16_t h;
      std::memcpy(&h, src + 2 * i, 2);
      dst[i] = T(st_half_to_double(h));
    }
  } else {
    FBT_ASSERT(false, "st_convert: not a floating-point dtype: " + dtype);
  }
}

}  // namespace detail

/// \brief Writes tensors and metadata as a safetensors file (atomic: `path + ".tmp"`, then rename).
/// \param tensors laid out in this order; each data pointer must hold numel * dtype-size bytes
/// \param metadata written as "__metadata__" (omitted when empty)
///
/// The header is compact JSON, "__metadata__" first, then the tensors in order, each with "dtype",
/// "shape", "data_offsets", padded with spaces to a multiple of 8 bytes. Refuses (fbt::Error naming
/// the file and the tensor) a duplicate or reserved name, an unknown dtype, a negative dimension,
/// null data, a name or metadata string that is not UTF-8, and any failed write.
inline void save_safetensors(const std::string& path, const std::vector<TensorRef>& tensors,
                             const std::map<std::string, std::string>& metadata = {}) {
  auto fail = [&](const std::string& what) -> void { throw Error("fbt::save_safetensors: '" + path + "': " + what); };
  nlohmann::ordered_json h = nlohmann::ordered_json::object();
  if (!metadata.empty()) {
    auto& m = h["__metadata__"] = nlohmann::ordered_json::object();
    for (const auto& kv : metadata) m[kv.first] = kv.second;
  }
  std::uint64_t off = 0;
  std::vector<std::uint64_t> sizes;
  for (const auto& t : tensors) {
    const std::string who = "tensor \"" + t.name + "\": ";
    if (t.name == "__metadata__") fail(who + "the name is reserved for the metadata");
    if (h.contains(t.name)) fail(who + "duplicate tensor name");
    const std::size_t elem = safetensors_dtype_size(t.dtype);
    if (elem == 0) fail(who + "unknown dtype \"" + t.dtype + "\"");
    std::uint64_t nb = 0;
    if (!detail::st_nbytes(t.shape, elem, nb)) fail(who + "bad shape " + detail::st_shape_str(t.shape) + " (negative or too large)");
    if (nb > 0 && t.data == nullptr) fail(who + "null data for " + std::to_string(nb) + " bytes");
    h[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {off, off + nb}}};
    sizes.push_back(nb);
    off += nb;
  }
  std::string hs;
  try {
    hs = h.dump();
  } catch (const nlohmann::json::exception& e) {
    fail(std::string("a tensor name or metadata string is not valid UTF-8: ") + e.what());
  }
  hs.append((8 - hs.size() % 8) % 8, ' ');  // the data section starts 8-byte aligned
  unsigned char len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>(std::uint64_t(hs.size()) >> (8 * i));
  detail::AtomicFile f(path, "save_safetensors");
  f.write(len, 8);
  f.write(hs);
  for (std::size_t i = 0; i < tensors.size(); ++i) f.write(tensors[i].data, std::size_t(sizes[i]));
  f.commit();
}

namespace detail {

inline SafetensorsFile read_safetensors_impl(const std::string& path, bool allow_map) {
  const std::string who = "fbt::read_safetensors";
  auto fail = [&](const std::string& what) -> void { throw Error(who + ": '" + path + "': " + what); };
  SafetensorsFile out;
  out.path = path;
  // A regular file only (no FIFO, device, directory), mapped read-only: the data is never copied.
  MappedFile file = MappedFile::open(path, kSafetensorsMaxFile, who, "a safetensors file", allow_map);
  const std::uint64_t size = file.size();
  if (size < 8) fail("file is " + std::to_string(size) + " bytes, shorter than the 8-byte header length field");
  const unsigned char* lenb = reinterpret_cast<const unsigned char*>(file.data());
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | lenb[i];
  if (n > kSafetensorsMaxHeader)
    fail("header length " + std::to_string(n) + " exceeds the 100 MB limit (corrupt header length field?)");
  if (n > size - 8)
    fail("header length " + std::to_string(n) + " runs beyond the end of the file (" + std::to_string(size) + " bytes; truncated?)");
  const char* hb = file.data() + 8;
  if (n == 0 || hb[0] != '{') fail("header does not start with '{' (not a safetensors file?)");

  const nlohmann::json h = parse_json_strict(hb, hb + n, who + ": '" + path + "': header");
  if (!h.is_object()) fail("header is not a JSON object");
  const std::uint64_t data_len = size - 8 - n;
  const std::size_t ntensors = h.size() - (h.contains("__metadata__") ? 1 : 0);
  if (ntensors > kSafetensorsMaxTensors)
    fail("header lists " + std::to_string(ntensors) + " tensors, over the limit of " + std::to_string(kSafetensorsMaxTensors));
  out.tensors.reserve(ntensors);

  for (auto it = h.begin(); it != h.end(); ++it) {
    const std::string& name = it.key();
    const nlohmann::json& v = it.value();
    if (name == "__metadata__") {
      if (!v.is_object()) fail("field \"__metadata__\" must be an object of strings, got " + json_brief(v));
      for (auto m = v.begin(); m != v.end(); ++m) {
        if (!m.value().is_string())
          fail("__metadata__ field \"" + st_name(m.key()) + "\": value must be a string, got " + m.value().type_name() + " " +
               json_brief(m.value()));
        out.metadata[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    const std::string who_t = "tensor \"" + st_name(name) + "\": ";
    if (!v.is_object()) fail(who_t + "entry must be an object, got " + v.type_name());
    for (auto f = v.begin(); f != v.end(); ++f)
      if (f.key() != "dtype" && f.key() != "shape" && f.key() != "data_offsets") fail(who_t + "unknown field \"" + st_name(f.key()) + "\"");
    for (const char* f : {"dtype", "shape", "data_offsets"})
      if (!v.contains(f)) fail(who_t + "missing field \"" + f + "\"");
    SafetensorsEntry e;
    e.name = name;
    const auto& dt = *v.find("dtype");
    if (!dt.is_string()) fail(who_t + "field \"dtype\" must be a string, got " + json_brief(dt));
    e.dtype = dt.get<std::string>();
    const std::size_t elem = safetensors_dtype_size(e.dtype);
    if (elem == 0) fail(who_t + "field \"dtype\": unknown dtype \"" + excerpt(e.dtype, 32) + "\"");
    const auto& sh = *v.find("shape");
    if (!sh.is_array()) fail(who_t + "field \"shape\" must be an array of integers, got " + json_brief(sh));
    if (sh.size() > kSafetensorsMaxRank)
      fail(who_t + "field \"shape\" has " + std::to_string(sh.size()) + " dimensions, over the limit of " + std::to_string(kSafetensorsMaxRank));
    for (const auto& d : sh) {
      if (!d.is_number_integer()) fail(who_t + "field \"shape\" must be an array of integers, got " + json_brief(sh));
      if (d.is_number_unsigned() ? d.get<std::uint64_t>() > std::uint64_t(std::numeric_limits<std::int64_t>::max())
                                 : d.get<std::int64_t>() < 0)
        fail(who_t + "field \"shape\" has a negative or huge dimension: " + json_brief(sh));
      e.shape.push_back(d.get<std::int64_t>());
    }
    const auto& of = *v.find("data_offsets");
    if (!of.is_array() || of.size() != 2 || !of[0].is_number_unsigned() || !of[1].is_number_unsigned())
      fail(who_t + "field \"data_offsets\" must be [begin, end] of non-negative integers, got " + json_brief(of));
    e.begin = of[0].get<std::uint64_t>(), e.end = of[1].get<std::uint64_t>();
    const std::string offs = "[" + std::to_string(e.begin) + ", " + std::to_string(e.end) + "]";
    if (e.begin > e.end) fail(who_t + "field \"data_offsets\" " + offs + " has begin > end");
    std::uint64_t nb = 0;
    if (!st_nbytes(e.shape, elem, nb)) fail(who_t + "field \"shape\" " + json_brief(sh) + " is too large (its size overflows)");
    if (e.end - e.begin != nb)
      fail(who_t + "field \"data_offsets\" " + offs + " spans " + std::to_string(e.end - e.begin) + " bytes but shape " +
           excerpt(st_shape_str(e.shape), 128) + " of " + e.dtype + " needs " + std::to_string(nb));
    if (e.end > data_len)
      fail(who_t + "field \"data_offsets\" " + offs + " is out of range: the data section holds " + std::to_string(data_len) +
           " bytes (truncated file?)");
    out.tensors.push_back(std::move(e));
  }

  // The entries must tile [0, data_len) exactly, in order of begin.
  std::stable_sort(out.tensors.begin(), out.tensors.end(), [](const SafetensorsEntry& a, const SafetensorsEntry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  std::uint64_t at = 0;
  std::string prev;  // the tensor that ends at `at`
  for (const auto& e : out.tensors) {
    if (e.begin < at)
      fail("tensor \"" + st_name(e.name) + "\": data_offsets [" + std::to_string(e.begin) + ", " + std::to_string(e.end) +
           "] overlap tensor \"" + st_name(prev) + "\" (which ends at " + std::to_string(at) + ")");
    if (e.begin > at)
      fail("tensor \"" + st_name(e.name) + "\": gap of " + std::to_string(e.begin - at) + " bytes before its data_offsets [" +
           std::to_string(e.begin) + ", " + std::to_string(e.end) + "] (" +
           (prev.empty() ? std::string("data starts at 0") : "tensor \"" + st_name(prev) + "\" ends at " + std::to_string(at)) + ")");
    at = e.end;
    prev = e.name;
  }
  if (at != data_len)
    fail(std::to_string(data_len - at) + " trailing bytes after the last tensor" +
         (prev.empty() ? std::string() : " (\"" + st_name(prev) + "\")") + ": the data section holds " + std::to_string(data_len) +
         " bytes but the tensors end at " + std::to_string(at));
  for (std::size_t i = 0; i < out.tensors.size(); ++i) out.index_[out.tensors[i].name] = i;

  out.data.offset_ = 8 + n;
  out.data.size_ = std::size_t(data_len);
  out.data.file_ = std::move(file);
  return out;
}

}  // namespace detail

/// How read_safetensors gets at the bytes.
enum class ReadMode {
  Map,   ///< memory-map the file where POSIX allows (the default), else read it
  Read,  ///< read the whole file into memory
};

/// \brief Reads and validates a whole safetensors file; its data section is memory-mapped (ReadMode::Map,
/// where POSIX allows) or read into memory.
///
/// Refuses, with an fbt::Error naming the file and the tensor or field: a path that is not a regular
/// file (directory, FIFO, device) or is over 1 TiB; a file shorter than 8 bytes; a header length over
/// 100 MB or beyond the end of the file; a header not starting with '{'; invalid JSON, nesting deeper
/// than 64 levels, a key over 64 KiB or a string over 16 MiB, or a duplicate key (at any depth); more
/// than 1,048,576 tensors; an entry that is not an object, lacks "dtype", "shape" or "data_offsets",
/// has another key, or has a field of the wrong type; an unknown dtype; a negative dimension, more
/// than 64 dimensions, or a shape whose size overflows; data_offsets [begin, end] with end - begin !=
/// numel * dtype size; offsets out of the data section; offsets that do not tile it exactly (gap,
/// overlap, trailing bytes); "__metadata__" that is not an object of strings. Running out of memory is
/// an fbt::Error naming the file too.
inline SafetensorsFile read_safetensors(const std::string& path, ReadMode mode) {
  try {
    return detail::read_safetensors_impl(path, mode == ReadMode::Map);
  } catch (const std::bad_alloc&) {
    throw Error("fbt::read_safetensors: '" + path + "': out of memory while reading the file");
  }
}
/// \brief read_safetensors(path, ReadMode::Map).
inline SafetensorsFile read_safetensors(const std::string& path) { return read_safetensors(path, ReadMode::Map); }

}  // namespace fbt
