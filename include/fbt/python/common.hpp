// fbt/python/common.hpp: what the Python bindings share (docs/python.md): nanobind, fbt::Error as ValueError,
// the conversion of a `tokens` argument (numpy int arrays, lists, bytes/str, __dlpack__ objects) into a
// (B, T) batch of ids, Ctrl-C between the steps of a long call, and the parts registry of the extension.
//
// Conversion rules (tokens_arg): an int32 C-contiguous array is read in place (no copy); another integer
// dtype is copied into int32 with each id checked (the library computes on int); a float, bool or complex
// dtype is a TypeError; a non-contiguous array is a ValueError (a silent copy would hide a slow path: pass
// np.ascontiguousarray); rank 1 is one sequence (B = 1), rank 2 is (B, T); every id must be in [0, V).
// str and bytes are encoded as one document by the byte tokenizer (kSep, then the bytes: what `fbt logits
// --text` reads), which needs a byte-level model (V = 257).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "../data/tokenizer.hpp"
#include "../model/pass.hpp"

namespace fbt {
namespace python {

namespace nb = nanobind;
using namespace nanobind::literals;

// ------------------------------------------------------------------------------------------ errors

/// Raises ValueError(msg) in Python (nanobind translates the exception).
[[noreturn]] inline void value_error(const std::string& msg) { throw nb::value_error(msg.c_str()); }
/// Raises TypeError(msg) in Python.
[[noreturn]] inline void type_error(const std::string& msg) { throw nb::type_error(msg.c_str()); }

/// fbt::Error (a refused config, file, option) reaches Python as ValueError with the library's message.
inline void register_error_translator() {
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const Error& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    }
  });
}

/// \brief Between the steps of a long call that runs without the GIL: every 20 ms at most, takes the GIL for a
/// moment and raises KeyboardInterrupt (nb::python_error) when Ctrl-C was pressed since the last check. Python
/// runs signal handlers in the main thread only, so in another thread it does nothing (and never waits for the
/// GIL, which a busy Python thread may hold for its 5 ms switch interval).
class InterruptCheck {
 public:
  /// Made while the GIL is held (in the binding, before it releases the GIL).
  InterruptCheck() : main_(PyGILState_Check() && nb::module_::import_("threading").attr("current_thread")().is(
                                                       nb::module_::import_("threading").attr("main_thread")())) {}
  void operator()() {
    if (!main_) return;
    const auto now = std::chrono::steady_clock::now();
    if (now - last_ < std::chrono::milliseconds(20)) return;
    last_ = now;
    nb::gil_scoped_acquire g;
    if (PyErr_CheckSignals() != 0) throw nb::python_error();
  }

 private:
  bool main_;
  std::chrono::steady_clock::time_point last_ = std::chrono::steady_clock::now();
};

// ------------------------------------------------------------------------------------------ tokens

/// A (B, T) batch of token ids: in place (a caller's int32 array, kept alive by `keep`) or copied (`own`).
struct TokenBatch {
  int B = 0, T = 0;
  const int* ids = nullptr;  ///< (B, T) row-major
  std::vector<int> own;      ///< the copy, when one was needed
  nb::object keep;           ///< the array read in place
  bool copied = false;       ///< true when the ids were converted (not int32 / a list / text)
  TokenBatch() = default;
  TokenBatch(TokenBatch&&) = default;  // a moved vector keeps its buffer, so ids stays valid; a copy would not
  TokenBatch(const TokenBatch&) = delete;
};

/// The type name of a Python object, for messages.
inline std::string py_type_name(nb::handle h) { return nb::cast<std::string>(nb::str(nb::handle(reinterpret_cast<PyObject*>(Py_TYPE(h.ptr()))).attr("__name__"))); }

/// \brief A value that stands for a number as the Python bool, int or float it holds: a numpy scalar (np.int64,
/// np.float64, np.bool_: a 0-d value with a dtype and item()), anything else with __index__ (an int) or __float__
/// (a float); a bool, an int, a float, a string or anything else is returned as it is. What every number the
/// bindings read goes through, so that a sweep built with numpy (np.logspace, np.arange) passes its values as they are.
inline nb::object plain_number(nb::handle v) {
  if (nb::isinstance<nb::bool_>(v) || nb::isinstance<nb::str>(v) || nb::isinstance<nb::bytes>(v)) return nb::borrow(v);
  if (nb::hasattr(v, "dtype") && nb::hasattr(v, "shape")) {  // numpy: a 0-d value is its scalar, an array stays an array
    if (nb::len(nb::object(v.attr("shape"))) == 0 && nb::hasattr(v, "item")) return v.attr("item")();
    return nb::borrow(v);
  }
  if (PyLong_CheckExact(v.ptr()) || PyFloat_CheckExact(v.ptr())) return nb::borrow(v);
  if (nb::hasattr(v, "__index__")) return nb::module_::import_("operator").attr("index")(v);
  if (nb::isinstance<nb::float_>(v) || nb::hasattr(v, "__float__")) return nb::module_::import_("builtins").attr("float")(v);
  return nb::borrow(v);
}
/// json.dumps's default=: a numpy scalar (or another number-like value) as the Python number it holds; anything else
/// the TypeError json gives.
inline nb::object json_number(nb::handle v) {
  nb::object p = plain_number(v);
  if (p.ptr() == v.ptr()) throw nb::type_error(("Object of type " + py_type_name(v) + " is not JSON serializable").c_str());
  return p;
}

/// \brief The ids of argument `name`: see the header's rules. max_rank 1 refuses a batch (a prompt).
/// V: the vocabulary ids are checked against.
inline TokenBatch tokens_arg(nb::handle obj, const char* name, int V, int max_rank = 2) {
  const std::string arg = name;
  TokenBatch tb;
  auto text = [&](const std::string& bytes) -> TokenBatch {
    if (V != ByteTokenizer::kVocabSize)
      value_error(arg + ": text (str/bytes) is read by the byte tokenizer, which needs a model with vocab_size " + std::to_string(ByteTokenizer::kVocabSize) +
                  "; this model's is " + std::to_string(V) + ": pass token ids");
    tb.own = ByteTokenizer::encode_document(bytes);
    tb.B = 1, tb.T = int(tb.own.size()), tb.ids = tb.own.data(), tb.copied = true;
    return std::move(tb);
  };
  if (obj.is_none()) type_error(arg + ": expected token ids (a numpy int array, a list, bytes/str or a tensor), got None");
  if (nb::isinstance<nb::str>(obj)) return text(nb::cast<std::string>(obj));
  if (nb::isinstance<nb::bytes>(obj)) {
    nb::bytes b = nb::borrow<nb::bytes>(obj);
    return text(std::string(b.c_str(), b.size()));
  }
  nb::object arr = nb::borrow(obj);
  if (nb::isinstance<nb::list>(obj) || nb::isinstance<nb::tuple>(obj)) {  // through numpy: nested lists of ints
    nb::module_ np = nb::module_::import_("numpy");
    try {
      arr = np.attr("asarray")(obj);
    } catch (nb::python_error&) {
      type_error(arg + ": a list of token ids must be rectangular and hold integers");
    }
    const std::string kind = nb::cast<std::string>(arr.attr("dtype").attr("kind"));
    if (nb::cast<long>(arr.attr("size")) == 0) value_error(arg + ": no tokens (an empty list)");
    if (kind != "i" && kind != "u") type_error(arg + ": a list of token ids must hold integers, got elements of numpy kind '" + kind + "'");
    arr = np.attr("ascontiguousarray")(arr, "dtype"_a = "int32").attr("__array__")();
    tb.copied = true;
  }
  nb::ndarray<nb::ro, nb::device::cpu> a;
  if (!nb::try_cast(arr, a, false))
    type_error(arg + ": expected token ids as a numpy integer array, a list, bytes/str or a CPU tensor (__dlpack__), got " + py_type_name(obj));
  const auto dt = a.dtype();
  const bool is_int = dt.code == std::uint8_t(nb::dlpack::dtype_code::Int) || dt.code == std::uint8_t(nb::dlpack::dtype_code::UInt);
  if (!is_int || dt.lanes != 1)
    type_error(arg + ": token ids must have an integer dtype, got " +
               std::string(dt.code == std::uint8_t(nb::dlpack::dtype_code::Float) ? "a float" : dt.code == std::uint8_t(nb::dlpack::dtype_code::Bool) ? "a bool" : "a non-integer") +
               " dtype (" + std::to_string(dt.bits) + " bits)");
  const std::size_t nd = a.ndim();
  if (nd < 1 || int(nd) > max_rank)
    value_error(arg + ": expected " + (max_rank == 1 ? std::string("a 1-D sequence (T,)") : std::string("shape (T,) or (B, T)")) + ", got an array of rank " +
                std::to_string(nd));
  const std::int64_t B = nd == 2 ? std::int64_t(a.shape(0)) : 1, T = std::int64_t(a.shape(nd - 1));
  if (B < 1 || T < 1) value_error(arg + ": no tokens (shape with a zero extent)");
  if (B * T > std::int64_t(1) << 31) value_error(arg + ": more than 2^31 tokens");
  // C-contiguous in elements (a dimension of extent 1 may have any stride)
  std::int64_t expect = 1;
  for (std::size_t d = nd; d-- > 0;) {
    if (a.shape(d) != 1 && a.stride(d) != expect)
      value_error(arg + ": the array is not C-contiguous (a view with strides); pass numpy.ascontiguousarray(" + arg +
                  ") so that the copy is yours to see");
    expect *= std::int64_t(a.shape(d));
  }
  tb.B = int(B), tb.T = int(T);
  const std::size_t n = std::size_t(B * T);
  auto check = [&](long long id, std::size_t i) {
    if (id < 0 || id >= V)
      value_error(arg + ": id " + std::to_string(id) + " at index " + std::to_string(i) + " (row " + std::to_string(i / std::size_t(T)) + ", position " +
                  std::to_string(i % std::size_t(T)) + ") is outside the vocabulary [0, " + std::to_string(V) + ")");
  };
  if (dt.code == std::uint8_t(nb::dlpack::dtype_code::Int) && dt.bits == 32) {
    const int* p = static_cast<const int*>(a.data());
    for (std::size_t i = 0; i < n; ++i) check(p[i], i);
    tb.ids = p, tb.keep = arr;
    return tb;
  }
  tb.own.resize(n), tb.copied = true;
  const bool sgn = dt.code == std::uint8_t(nb::dlpack::dtype_code::Int);
  for (std::size_t i = 0; i < n; ++i) {
    long long v = 0;
    switch (dt.bits) {
      case 8: v = sgn ? static_cast<const std::int8_t*>(a.data())[i] : static_cast<const std::uint8_t*>(a.data())[i]; break;
      case 16: v = sgn ? static_cast<const std::int16_t*>(a.data())[i] : static_cast<const std::uint16_t*>(a.data())[i]; break;
      case 32: v = static_cast<const std::uint32_t*>(a.data())[i] > 0x7fffffffu ? -1 : static_cast<const std::int32_t*>(a.data())[i]; break;
      case 64: {
        const std::uint64_t u = static_cast<const std::uint64_t*>(a.data())[i];
        v = sgn ? static_cast<long long>(u) : (u > 0x7fffffffffffffffull ? -1 : static_cast<long long>(u));
        break;
      }
      default: type_error(arg + ": integer dtype of " + std::to_string(dt.bits) + " bits is not supported");
    }
    check(v, i);
    tb.own[i] = int(v);
  }
  tb.ids = tb.own.data();
  return tb;
}

/// \brief Document starts (B, T) of a batch: the caller's `doc_starts` (bool or integer 0/1, C-contiguous),
/// or by default position 0 of each row and every id equal to sep (-1: none).
inline std::vector<std::uint8_t> doc_starts_arg(nb::handle obj, const TokenBatch& tb, int sep) {
  const std::size_t n = std::size_t(tb.B) * tb.T;
  std::vector<std::uint8_t> ds(n, 0);
  if (obj.is_none()) {
    for (std::size_t i = 0; i < n; ++i) ds[i] = (i % std::size_t(tb.T)) == 0 || tb.ids[i] == sep;
    return ds;
  }
  nb::object arr = nb::borrow(obj);
  if (nb::isinstance<nb::list>(obj) || nb::isinstance<nb::tuple>(obj)) arr = nb::module_::import_("numpy").attr("asarray")(obj, "dtype"_a = "uint8");
  nb::ndarray<nb::ro, nb::device::cpu> a;
  if (!nb::try_cast(arr, a, false)) type_error("doc_starts: expected a bool or integer array of the tokens' shape, got " + py_type_name(obj));
  const auto dt = a.dtype();
  if (dt.code == std::uint8_t(nb::dlpack::dtype_code::Float)) type_error("doc_starts: expected a bool or integer array (1 = a document starts), got a float dtype");
  const std::size_t nd = a.ndim();
  const bool shape_ok = (nd == 2 && int(a.shape(0)) == tb.B && int(a.shape(1)) == tb.T) || (nd == 1 && tb.B == 1 && int(a.shape(0)) == tb.T);
  if (!shape_ok) value_error("doc_starts: expected the tokens' shape (" + std::to_string(tb.B) + ", " + std::to_string(tb.T) + ")");
  nb::object c = nb::module_::import_("numpy").attr("ascontiguousarray")(arr, "dtype"_a = "uint8");
  nb::ndarray<nb::ro, nb::device::cpu> u = nb::cast<nb::ndarray<nb::ro, nb::device::cpu>>(c);
  std::memcpy(ds.data(), u.data(), n);
  for (std::size_t i = 0; i < n; ++i) {
    if (ds[i] > 1) value_error("doc_starts: values must be 0 or 1, got " + std::to_string(ds[i]) + " at index " + std::to_string(i));
    if (i % std::size_t(tb.T) == 0 && !ds[i]) value_error("doc_starts: position 0 of row " + std::to_string(i / std::size_t(tb.T)) + " must start a document (1)");
  }
  return ds;
}

/// \brief An array that owns a std::vector<T> moved into it (freed with the array): the library's result
/// buffer handed to numpy without a copy.
template <class T> nb::ndarray<nb::numpy, T> owned_array(std::vector<T>&& v, std::initializer_list<std::size_t> shape) {
  auto* heap = new std::vector<T>(std::move(v));
  nb::capsule owner(heap, [](void* p) noexcept { delete static_cast<std::vector<T>*>(p); });
  return nb::ndarray<nb::numpy, T>(heap->data(), shape, owner);
}

// ------------------------------------------------------------------------------------------- parts

/// One part of a module's bindings: a function that adds classes and functions to the module.
using PartFn = void (*)(nb::module_&);
/// The parts of this extension, registered by FBT_PYTHON_PART in any of its source files.
inline std::vector<std::pair<std::string, PartFn>>& parts() {
  static std::vector<std::pair<std::string, PartFn>> p;
  return p;
}
struct PartRegistrar {
  PartRegistrar(const char* name, PartFn f) { parts().emplace_back(name, f); }
};
/// Calls every registered part, in name order (the module's init; parts may rely on the model classes).
inline void bind_parts(nb::module_& m) {
  auto p = parts();
  std::sort(p.begin(), p.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (const auto& kv : p) kv.second(m);
}

}  // namespace python
}  // namespace fbt

/// \brief A part of the extension's bindings in a source file of its own:
///   FBT_PYTHON_PART(train, m) { m.def("train", ...); }
/// runs when the module is imported, after the model and decoder classes are bound.
#define FBT_PYTHON_PART(name, m)                                                                                             \
  static void fbt_python_part_##name(::nanobind::module_& m);                                                                \
  static const ::fbt::python::PartRegistrar fbt_python_part_registrar_##name(#name, &fbt_python_part_##name);                \
  static void fbt_python_part_##name(::nanobind::module_& m)
