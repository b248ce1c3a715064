// fbt/io/safetensors.hpp: a strict reader and an atomic writer for the safetensors format (spec 8, 9).
//
// Layout (huggingface/safetensors): an 8-byte little-endian header length N; N bytes of JSON,
//   {"__metadata__": {str: str}, name: {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}, ...}
// padded with spaces to a multiple of 8 bytes (as the reference writer does); then the data section,
// each tensor's bytes row-major and little-endian at [begin, end) relative to the section's start.
// The writer lays tensors out in the order given and renames `path + ".tmp"` into place. The reader
// refuses everything spec section 9 lists (header over 100 MB or not starting with '{', duplicate
// keys, offsets that do not tile the data, bad dtype/shape fields, non-string metadata) with an
// fbt::Error naming the file and the tensor or field at fault. Interpreting the tensors (names,
// shapes against a config, conversion, finiteness) is io/checkpoint.hpp's job.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

#include "../config.hpp"
#include "../core/tensor.hpp"
#include "json.hpp"

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

/// \brief A whole safetensors file, validated: entries, metadata and the data section.
struct SafetensorsFile {
  std::string path;                             ///< the file it was read from (for error messages)
  std::vector<SafetensorsEntry> tensors;        ///< in data order (sorted by begin)
  std::map<std::string, std::string> metadata;  ///< "__metadata__" ({} when absent)
  std::vector<char> data;                       ///< the data section, data.size() == last end
  /// \brief The entry called `name`, or nullptr.
  const SafetensorsEntry* find(const std::string& name) const {
    auto it = index_.find(name);
    return it == index_.end() ? nullptr : &tensors[it->second];
  }
  /// \brief The first byte of an entry's data (e.nbytes() bytes, little-endian, row-major).
  const char* bytes(const SafetensorsEntry& e) const { return data.data() + e.begin; }

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

inline std::string st_shape_str(const Shape& s) {  // [2, 3]
  std::string r = "[";
  for (std::size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

/// numel(shape) * elem bytes, or false when a dimension is negative or the product overflows.
inline bool st_nbytes(const Shape& shape, std::size_t elem, std::uint64_t& out) {
  std::uint64_t n = elem;
  for (auto d : shape) {
    if (d < 0) return false;
    if (d != 0 && n > std::numeric_limits<std::uint64_t>::max() / std::uint64_t(d)) return false;
    n *= std::uint64_t(d);
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

/// \brief Reads and validates a whole safetensors file.
///
/// Refuses, with an fbt::Error naming the file and the tensor or field: a file shorter than 8 bytes;
/// a header length over 100 MB or beyond the end of the file; a header not starting with '{'; invalid
/// JSON or a duplicate key (at any depth); an entry that is not an object, lacks "dtype", "shape" or
/// "data_offsets", has another key, or has a field of the wrong type; an unknown dtype; a negative
/// dimension; data_offsets [begin, end] with end - begin != numel * dtype size; offsets out of the data
/// section; offsets that do not tile it exactly (gap, overlap, trailing bytes); "__metadata__" that is
/// not an object of strings.
inline SafetensorsFile read_safetensors(const std::string& path) {
  auto fail = [&](const std::string& what) -> void { throw Error("fbt::read_safetensors: '" + path + "': " + what); };
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot open file");
  in.seekg(0, std::ios::end);
  const std::streamoff fsize = in.tellg();
  if (fsize < 0) fail("cannot determine the file size");
  const std::uint64_t size = std::uint64_t(fsize);
  in.seekg(0);
  if (size < 8) fail("file is " + std::to_string(size) + " bytes, shorter than the 8-byte header length field");
  unsigned char lenb[8];
  in.read(reinterpret_cast<char*>(lenb), 8);
  if (!in) fail("read error in the header length field");
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | lenb[i];
  if (n > detail::kSafetensorsMaxHeader)
    fail("header length " + std::to_string(n) + " exceeds the 100 MB limit (corrupt header length field?)");
  if (n > size - 8)
    fail("header length " + std::to_string(n) + " runs beyond the end of the file (" + std::to_string(size) + " bytes; truncated?)");
  std::string header(std::size_t(n), '\0');
  if (n > 0) in.read(&header[0], std::streamsize(n));
  if (!in) fail("read error in the header");
  if (header.empty() || header[0] != '{') fail("header does not start with '{' (not a safetensors file?)");

  const nlohmann::json h = detail::parse_json_strict(header, "fbt::read_safetensors: '" + path + "': header");
  if (!h.is_object()) fail("header is not a JSON object");
  const std::uint64_t data_len = size - 8 - n;

  SafetensorsFile out;
  out.path = path;
  for (auto it = h.begin(); it != h.end(); ++it) {
    const std::string& name = it.key();
    const nlohmann::json& v = it.value();
    if (name == "__metadata__") {
      if (!v.is_object()) fail("field \"__metadata__\" must be an object of strings, got " + std::string(v.type_name()));
      for (auto m = v.begin(); m != v.end(); ++m) {
        if (!m.value().is_string())
          fail("__metadata__ field \"" + m.key() + "\": value must be a string, got " + m.value().type_name() + " " + m.value().dump());
        out.metadata[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    const std::string who = "tensor \"" + name + "\": ";
    if (!v.is_object()) fail(who + "entry must be an object, got " + v.type_name());
    for (auto f = v.begin(); f != v.end(); ++f)
      if (f.key() != "dtype" && f.key() != "shape" && f.key() != "data_offsets") fail(who + "unknown field \"" + f.key() + "\"");
    for (const char* f : {"dtype", "shape", "data_offsets"})
      if (!v.contains(f)) fail(who + "missing field \"" + f + "\"");
    SafetensorsEntry e;
    e.name = name;
    const auto& dt = v["dtype"];
    if (!dt.is_string()) fail(who + "field \"dtype\" must be a string, got " + dt.dump());
    e.dtype = dt.get<std::string>();
    const std::size_t elem = safetensors_dtype_size(e.dtype);
    if (elem == 0) fail(who + "field \"dtype\": unknown dtype \"" + e.dtype + "\"");
    const auto& sh = v["shape"];
    if (!sh.is_array()) fail(who + "field \"shape\" must be an array of integers, got " + sh.dump());
    for (const auto& d : sh) {
      if (!d.is_number_integer()) fail(who + "field \"shape\" must be an array of integers, got " + sh.dump());
      if (d.is_number_unsigned() ? d.get<std::uint64_t>() > std::uint64_t(std::numeric_limits<std::int64_t>::max())
                                 : d.get<std::int64_t>() < 0)
        fail(who + "field \"shape\" has a negative or huge dimension: " + sh.dump());
      e.shape.push_back(d.get<std::int64_t>());
    }
    const auto& of = v["data_offsets"];
    if (!of.is_array() || of.size() != 2 || !of[0].is_number_unsigned() || !of[1].is_number_unsigned())
      fail(who + "field \"data_offsets\" must be [begin, end] of non-negative integers, got " + of.dump());
    e.begin = of[0].get<std::uint64_t>(), e.end = of[1].get<std::uint64_t>();
    if (e.begin > e.end) fail(who + "field \"data_offsets\" " + of.dump() + " has begin > end");
    std::uint64_t nb = 0;
    if (!detail::st_nbytes(e.shape, elem, nb)) fail(who + "field \"shape\" " + sh.dump() + " is too large");
    if (e.end - e.begin != nb)
      fail(who + "field \"data_offsets\" " + of.dump() + " spans " + std::to_string(e.end - e.begin) + " bytes but shape " +
           detail::st_shape_str(e.shape) + " of " + e.dtype + " needs " + std::to_string(nb));
    if (e.end > data_len)
      fail(who + "field \"data_offsets\" " + of.dump() + " is out of range: the data section holds " + std::to_string(data_len) +
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
      fail("tensor \"" + e.name + "\": data_offsets [" + std::to_string(e.begin) + ", " + std::to_string(e.end) + "] overlap tensor \"" +
           prev + "\" (which ends at " + std::to_string(at) + ")");
    if (e.begin > at)
      fail("tensor \"" + e.name + "\": gap of " + std::to_string(e.begin - at) + " bytes before its data_offsets [" +
           std::to_string(e.begin) + ", " + std::to_string(e.end) + "] (" + (prev.empty() ? std::string("data starts at 0") : "tensor \"" + prev + "\" ends at " + std::to_string(at)) + ")");
    at = e.end;
    prev = e.name;
  }
  if (at != data_len)
    fail(std::to_string(data_len - at) + " trailing bytes after the last tensor" + (prev.empty() ? std::string() : " (\"" + prev + "\")") +
         ": the data section holds " + std::to_string(data_len) + " bytes but the tensors end at " + std::to_string(at));
  for (std::size_t i = 0; i < out.tensors.size(); ++i) out.index_[out.tensors[i].name] = i;

  out.data.resize(std::size_t(data_len));
  if (data_len > 0) in.read(out.data.data(), std::streamsize(data_len));
  if (!in) fail("read error in the data section");
  return out;
}

}  // namespace fbt
