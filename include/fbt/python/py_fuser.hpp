// fbt/python/py_fuser.hpp: a fuser written in Python, for prototyping (docs/python.md, "A fuser in Python").
//
//   class AddFuser:                                   # u = e + s W^T
//       name = "pyadd"                                # the config's `fuser` value
//       options = {"scale": 1.0}                      # optional: its options and their defaults (fuser_options)
//       def __init__(self, hidden_size, options): self.D = hidden_size
//       def parameters(self): return {"w.weight": ((self.D, self.D), "zeros")}   # under model.feedback.
//       def forward(self, params, s, e): return e + s @ params["w.weight"].T, None          # (u, ctx)
//       def backward(self, params, ctx, s, e, du): return du @ params["w.weight"], du, {"w.weight": du.T @ s}
//   fbt.register_fuser(AddFuser)                      # then Model, train, Decoder, checkpoints know "pyadd"
//
// PyFuser implements AnyFuser<float>'s interface (layers/any_piece.hpp) by calling the class: forward and backward
// get numpy views of the step's own buffers (s, e, du: (N, D) float32, read-only; params: {name: array} views of
// the weights), with the GIL taken only inside the call; their results are copied into the step's buffers (u) or
// added to them (ds, de, the parameters' gradients), so a Python fuser trains, decodes and checkpoints through the
// same slot as a C++ one. ctx is whatever forward returns for backward, kept per pass. Each shape, dtype and name
// is checked, and an error names the fuser, the method and what was expected. The backward's contract is the C++
// one: ds is dropped when the pass is detached; None for ds, de or a parameter's gradient means zero.
// A Python fuser runs on the CPU (host memory); on another backend it is refused. fbt.check_fuser(cls) (python/
// fbt/__init__.py) checks a class's backward against central differences before it is used.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nanobind/stl/string.h>

#include "../model/pieces.hpp"
#include "common.hpp"

namespace fbt {
namespace python {

namespace detail {

/// A reference to a Python object that a C++ object keeps (a class, an instance, a pass's ctx), released under
/// the GIL whichever thread drops it last.
struct PyObjectRef {
  PyObject* p = nullptr;
  explicit PyObjectRef(nb::object o) : p(o.release().ptr()) {}
  PyObjectRef(const PyObjectRef&) = delete;
  PyObjectRef& operator=(const PyObjectRef&) = delete;
  ~PyObjectRef() {
    if (p && Py_IsInitialized()) {
      nb::gil_scoped_acquire gil;
      Py_DECREF(p);
    }
  }
  nb::object get() const { return nb::borrow(p); }
};
}  // namespace detail

/// What a registered Python fuser class declares (shared by every instance the registry makes; never released
/// without the GIL).
struct PyFuserClass {
  std::shared_ptr<detail::PyObjectRef> cls;  ///< the class
  std::string name;                          ///< cls.name
  OptionList options;                        ///< from cls.options (the default values give the types)
};

namespace detail {
struct PyFuserCache {
  std::shared_ptr<PyObjectRef> ctx;  ///< this pass's ctx (copies share it: a copy needs no GIL)
};

/// A read-only (rows, cols) float32 view of a step buffer, valid during the call.
inline nb::ndarray<nb::numpy, const float> view(const float* p, int rows, int cols) {
  const std::size_t shape[2] = {std::size_t(rows), std::size_t(cols)};
  return nb::ndarray<nb::numpy, const float>(p, 2, shape, nb::handle());
}

}  // namespace detail

/// \brief AnyFuser<float>'s interface over a Python class (see the file comment).
class PyFuser final : public AnyFuser<float>::Impl {
 public:
  struct Param {
    std::string name;
    Shape shape;
    Init init = Init::Zeros;
    double std = 0.0;
    std::size_t offset = 0, size = 0;
  };

  PyFuser(std::shared_ptr<const PyFuserClass> cls, const FuserArgs& args) : cls_(std::move(cls)), D_(args.hidden_size), options_(args.options) {
    nb::gil_scoped_acquire gil;
    nb::dict opts;
    for (const auto& kv : options_.values()) {
      const OptionValue& v = kv.second;
      if (v.kind == OptionValue::Bool) opts[kv.first.c_str()] = v.b;
      else if (v.kind == OptionValue::Int) opts[kv.first.c_str()] = v.i;
      else if (v.kind == OptionValue::Real) opts[kv.first.c_str()] = v.r;
      else opts[kv.first.c_str()] = v.s;
    }
    obj_ = std::make_shared<detail::PyObjectRef>(call("__init__", [&] { return cls_->cls->get()(D_, opts); }));
    nb::object decl = call("parameters", [&] { return obj_->get().attr("parameters")(); });
    if (!nb::isinstance<nb::dict>(decl)) fail("parameters", "expected a dict {name: (shape, init)}");
    for (auto item : nb::borrow<nb::dict>(decl)) {
      Param p;
      p.name = nb::cast<std::string>(nb::str(item.first));
      if (p.name.empty() || p.name.find_first_of(" \t\n\"") != std::string::npos) fail("parameters", "a parameter name \"" + fbt::detail::excerpt(p.name) + "\" is empty or holds spaces or quotes");
      nb::object spec = nb::borrow(item.second);
      try {
        nb::tuple t = nb::cast<nb::tuple>(spec);
        if (t.size() != 2) throw std::runtime_error("");
        for (auto d : nb::cast<nb::tuple>(t[0])) {
          const long long n = nb::cast<long long>(d);
          if (n < 1 || n > (1ll << 30)) throw std::runtime_error("");
          p.shape.push_back(int(n));
        }
        if (p.shape.empty() || p.shape.size() > 2) throw std::runtime_error("");
        nb::object init = t[1];
        std::string kind;
        if (nb::isinstance<nb::str>(init)) kind = nb::cast<std::string>(init);
        else {
          nb::tuple it = nb::cast<nb::tuple>(init);
          kind = nb::cast<std::string>(it[0]), p.std = nb::cast<double>(it[1]);
        }
        if (kind == "zeros") p.init = Init::Zeros;
        else if (kind == "ones") p.init = Init::Ones;
        else if (kind == "identity" && p.shape.size() == 2 && p.shape[0] == p.shape[1]) p.init = Init::Identity;
        else if (kind == "normal" && p.std >= 0) p.init = Init::Normal;
        else throw std::runtime_error("");
      } catch (const std::exception&) {
        fail("parameters", "parameter \"" + p.name + "\": expected (shape, init) with shape a tuple of 1 or 2 positive ints and init \"zeros\", "
                           "\"ones\", \"identity\" (square) or (\"normal\", std)");
      }
      params_.push_back(std::move(p));
    }
  }

  PyFuser* clone() const override { return new PyFuser(*this); }
  const char* name() const override { return cls_->name.c_str(); }
  const std::type_info& type() const override { return typeid(PyFuser); }
  const void* target() const override { return this; }
  void* target() override { return this; }
  bool feedback() const override { return true; }
  void record(ModelConfig& c) const override { c.fuser_options = options_.values(); }
  void declare(const ParamRegistry<float>& r) override {
    for (auto& p : params_) p.offset = r.add(p.name, p.shape, p.init, p.std), p.size = r.store().spec(r.prefix() + p.name).size;
  }
  void alloc(const AnyBackend<float>& be, Carver<float>&, Carver<float>&, ErasedCache& c, int, bool) const override {
    require_host(be);
    c.emplace<detail::PyFuserCache>();
  }
  void forward(AnyBackend<float>& be, const Weights<float>& w, ErasedCache& c, const float* s, const float* e, const float*, float* u, int N) const override {
    require_host(be);
    nb::gil_scoped_acquire gil;
    nb::object r = call("forward", [&] { return obj_->get().attr("forward")(params(w.value), detail::view(s, N, D_), detail::view(e, N, D_)); });
    nb::tuple t = as_tuple(r, 2, "forward", "(u, ctx)");
    copy_out("forward", "u", t[0], u, std::size_t(N) * D_, N, D_, /*add=*/false);
    c.get<detail::PyFuserCache>().ctx = std::make_shared<detail::PyObjectRef>(nb::borrow(t[1]));
  }
  void backward(AnyBackend<float>& be, const Weights<float>& w, const ErasedCache& c, const float* s, const float* e, const float*, const float* du, float* ds,
                float* de, float*, int N) const override {
    require_host(be);
    nb::gil_scoped_acquire gil;
    const auto& ctx = c.get<detail::PyFuserCache>().ctx;
    nb::object r = call("backward", [&] {
      return obj_->get().attr("backward")(params(w.value), ctx ? ctx->get() : nb::none(), detail::view(s, N, D_), detail::view(e, N, D_), detail::view(du, N, D_));
    });
    nb::tuple t = as_tuple(r, 3, "backward", "(ds, de, dparams)");
    if (ds) copy_out("backward", "ds", t[0], ds, std::size_t(N) * D_, N, D_, true);
    copy_out("backward", "de", t[1], de, std::size_t(N) * D_, N, D_, true);
    if (t[2].is_none()) return;
    if (!nb::isinstance<nb::dict>(t[2])) fail("backward", "dparams: expected a dict {name: gradient}");
    for (auto item : nb::borrow<nb::dict>(t[2])) {
      const std::string n = nb::cast<std::string>(nb::str(item.first));
      const Param* p = find(n);
      if (!p) fail("backward", "dparams: \"" + fbt::detail::excerpt(n) + "\" is not one of its parameters");
      copy_out("backward", "dparams[\"" + n + "\"]", nb::borrow(item.second), w.grad + p->offset, p->size, p->shape[0], p->shape.size() > 1 ? p->shape[1] : 1,
               true);
    }
  }
  int pre_width() const override { return 0; }
  void alloc_pre(const AnyBackend<float>&, Carver<float>&, Carver<float>&, ErasedCache&, int, bool) const override {}
  void pre_forward(AnyBackend<float>&, const Weights<float>&, ErasedCache&, const float*, float*, int) const override {}
  void pre_backward(AnyBackend<float>&, const Weights<float>&, const ErasedCache&, const float*, const float*, float*, int) const override {}
  FuserStats diagnostics(AnyBackend<float>&, const Weights<float>&, const ErasedCache&, const FuserPass<float>&) const override { return {}; }

 private:
  [[noreturn]] void fail(const char* method, const std::string& why) const {
    throw Error("Python fuser \"" + cls_->name + "\", " + method + ": " + why);
  }
  static void require_host(const AnyBackend<float>& be) {
    const std::string b = be.backend_name();
    if (b != "cpu" && b != "host") throw Error("a fuser written in Python runs on the CPU, not on backend \"" + b + "\"");
  }
  /// fn() with a Python exception turned into an fbt::Error naming the fuser and the method (its type and message).
  template <class Fn> nb::object call(const char* method, Fn&& fn) const {
    try {
      return fn();
    } catch (nb::python_error& e) {
      fail(method, fbt::detail::excerpt(e.what(), 1000));
    }
  }
  nb::tuple as_tuple(const nb::object& r, std::size_t n, const char* method, const char* what) const {
    if (!nb::isinstance<nb::tuple>(r) || nb::len(r) != n) fail(method, std::string("expected a tuple ") + what);
    return nb::borrow<nb::tuple>(r);
  }
  /// The result x (any array-like) as float32 (rows, cols), copied into dst or added to it; None adds nothing.
  void copy_out(const char* method, const std::string& what, nb::handle x, float* dst, std::size_t n, int rows, int cols, bool add) const {
    if (x.is_none()) {
      if (!add) fail(method, what + ": expected an array, got None");
      return;
    }
    nb::object a = nb::module_::import_("numpy").attr("ascontiguousarray")(x, "float32");
    nb::ndarray<const float, nb::c_contig> v;
    if (!nb::try_cast(a, v)) fail(method, what + ": expected a float array");
    const std::size_t got = v.size();
    if (got != n || (v.ndim() == 2 && (v.shape(0) != std::size_t(rows) || v.shape(1) != std::size_t(cols))))
      fail(method, what + ": expected shape (" + std::to_string(rows) + (cols > 1 || v.ndim() == 2 ? ", " + std::to_string(cols) : std::string()) + "), got " +
                       std::to_string(got) + " elements");
    const float* p = v.data();
    for (std::size_t i = 0; i < n; ++i) {
      if (!std::isfinite(p[i])) fail(method, what + ": a non-finite value (" + std::to_string(p[i]) + ") at element " + std::to_string(i));
      dst[i] = add ? dst[i] + p[i] : p[i];
    }
  }
  /// {name: writable (shape) float32 view} of the weights.
  nb::dict params(const float* base) const {
    nb::dict d;
    for (const auto& p : params_) {
      std::vector<std::size_t> shape(p.shape.begin(), p.shape.end());
      d[p.name.c_str()] = nb::ndarray<nb::numpy, const float>(base + p.offset, shape.size(), shape.data(), nb::handle());
    }
    return d;
  }
  const Param* find(const std::string& n) const {
    for (const auto& p : params_)
      if (p.name == n) return &p;
    return nullptr;
  }

  std::shared_ptr<const PyFuserClass> cls_;
  std::shared_ptr<detail::PyObjectRef> obj_;  ///< the instance (shared by copies: the model and its workspace's views)
  int D_ = 0;
  OptionValues options_;
  std::vector<Param> params_;
};

/// \brief Registers a fuser class written in Python (see the file comment) as a value of the config's `fuser`.
/// A class of a name already registered from Python replaces it (a notebook redefining it); a C++ fuser's name
/// is refused.
inline void register_py_fuser(nb::object cls) {
  auto c = std::make_shared<PyFuserClass>();
  c->cls = std::make_shared<detail::PyObjectRef>(cls);
  if (!nb::hasattr(cls, "name")) value_error("register_fuser: the class needs a `name` (its value of the config's fuser field)");
  c->name = nb::cast<std::string>(nb::str(cls.attr("name")));
  for (const char* m : {"parameters", "forward", "backward"})
    if (!nb::hasattr(cls, m)) value_error("register_fuser: the class " + c->name + " needs a method `" + m + "` (docs/python.md, \"A fuser in Python\")");
  if (nb::hasattr(cls, "options")) {
    nb::object o = cls.attr("options");
    if (!nb::isinstance<nb::dict>(o)) value_error("register_fuser: " + c->name + ".options must be a dict {name: default}");
    for (auto item : nb::borrow<nb::dict>(o)) {
      const std::string k = nb::cast<std::string>(nb::str(item.first));
      nb::handle v = item.second;
      if (nb::isinstance<nb::bool_>(v)) c->options.add_bool(k, nb::cast<bool>(v), "a Python fuser's option");
      else if (nb::isinstance<nb::int_>(v)) c->options.add_int(k, nb::cast<long long>(v), -(1ll << 53), 1ll << 53, "a Python fuser's option");
      else if (nb::isinstance<nb::float_>(v)) c->options.add_real(k, nb::cast<double>(v), -1e300, 1e300, "a Python fuser's option");
      else if (nb::isinstance<nb::str>(v)) c->options.add_string(k, nb::cast<std::string>(v), {}, "a Python fuser's option");
      else value_error("register_fuser: " + c->name + ".options[\"" + k + "\"]: a default must be a bool, int, float or str");
    }
  }
  FuserRegistry<float>& reg = fuser_registry<float>();
  const std::string type = "python:" + nb::cast<std::string>(nb::str(cls.attr("__qualname__")));
  if (reg.known(c->name) && reg.info(c->name).type.rfind("python:", 0) != 0)
    value_error("register_fuser: \"" + c->name + "\" is the name of a fuser of this program (" + reg.names_text() + "): give the class another name");
  std::shared_ptr<const PyFuserClass> shared = c;
  reg.add(PieceInfo{c->name, type, type, c->options, true},
          [shared](const ModelConfig& cfg) {
            FuserArgs a = fuser_args(cfg);
            a.options = OptionValues::resolve(shared->options, cfg.fuser_options_given(), "fuser_options", "fuser \"" + shared->name + "\"");
            return AnyFuser<float>(std::unique_ptr<AnyFuser<float>::Impl>(new PyFuser(shared, a)));
          },
          /*replace=*/true);
}

}  // namespace python
}  // namespace fbt
