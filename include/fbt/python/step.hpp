// fbt/python/step.hpp: a training loop of one's own from Python (docs/python.md, "Custom loops"):
//   fbt.multipass_step(model, tokens, targets=None, K=1, ...)   one K-pass step (model/multipass.hpp, spec
//       section 3): the per-pass losses; the gradients ACCUMULATED into the model's gradient store
//   Model.named_grads(), Model.zero_grad()                         the gradients as zero-copy numpy views
//   fbt.AdamW(model, ...), fbt.NorMuon(model, ...)                 .step(lr=None), .zero_grad(): the optimizers
//       the trainer runs (train/optimizer.hpp's registry: the same update, the same state in the store)
//   fbt.clip_grad_norm(model, max_norm)                            train/clip.hpp
// A step's workspace (model/pass.hpp Workspace) is kept per model between calls, as the trainer keeps its
// own, so a repeated step of the same shape allocates nothing. Every call runs without the GIL.
// fbt._timing: the same step and the decoder timed in C++ alone (benchmarks/python_overhead.py compares).
#pragma once

#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>

#include "../python.hpp"
#include "../train/clip.hpp"
#include "../train/optimizer.hpp"

namespace fbt {
namespace python {

namespace detail {
/// A model's step workspace and jitter generator, kept between calls (one per live model).
struct StepState {
  std::weak_ptr<AnyModel> model;  ///< whose (an address alone could be reused by a later model)
  std::shared_ptr<void> ws;       ///< Workspace<M> of the model's type
  Rng rng{0};                     ///< the jitter's source (seed= re-seeds it)
};
inline std::map<const AnyModel*, StepState>& step_states() {  // touched with the GIL held only
  static std::map<const AnyModel*, StepState> s;
  return s;
}
/// The StepState of `am` (made on first use; those of models that no longer exist are dropped).
inline StepState& step_state(const std::shared_ptr<AnyModel>& am) {
  auto& s = step_states();
  for (auto it = s.begin(); it != s.end();) it = it->second.model.expired() ? s.erase(it) : std::next(it);
  StepState& st = s[am.get()];
  if (st.model.lock() != am) st = StepState{am, nullptr, Rng(0)};
  return st;
}

/// \brief Targets (B, T) of a step: ids in [-1, V) (-1: no loss at that position) as an integer array or
/// list of the tokens' shape (int32 C-contiguous is read in place; another integer dtype is copied), or by
/// default the next token of each row (the last position of a row gets -1).
struct Targets {
  const int* ids = nullptr;  ///< (B, T)
  std::vector<int> own;
  nb::object keep;
};
inline Targets targets_arg(nb::handle obj, const TokenBatch& tb, int V) {
  Targets t;
  const std::size_t n = std::size_t(tb.B) * tb.T;
  if (obj.is_none()) {
    t.own.assign(n, -1);
    for (std::size_t i = 0; i < n; ++i)
      if ((i + 1) % std::size_t(tb.T) != 0) t.own[i] = tb.ids[i + 1];
    t.ids = t.own.data();
    return t;
  }
  nb::module_ np = nb::module_::import_("numpy");
  nb::object arr = np.attr("asarray")(obj);
  const std::string kind = nb::cast<std::string>(arr.attr("dtype").attr("kind"));
  if (kind != "i" && kind != "u") type_error("targets: expected integer ids (-1 = no loss), got numpy kind '" + kind + "'");
  const std::vector<long> shape = nb::cast<std::vector<long>>(arr.attr("shape"));
  const bool shape_ok = (shape.size() == 2 && shape[0] == tb.B && shape[1] == tb.T) || (shape.size() == 1 && tb.B == 1 && shape[0] == tb.T);
  if (!shape_ok) value_error("targets: expected the tokens' shape (" + std::to_string(tb.B) + ", " + std::to_string(tb.T) + ")");
  if (!nb::cast<bool>(arr.attr("flags")["C_CONTIGUOUS"]))
    value_error("targets: the array is not C-contiguous (a view with strides); pass numpy.ascontiguousarray(targets)");
  if (n > 0) {
    const long long lo = nb::cast<long long>(arr.attr("min")()), hi = nb::cast<long long>(arr.attr("max")());
    if (lo < -1 || hi >= V)
      value_error("targets: ids must be in [-1, " + std::to_string(V) + ") (-1 = no loss), got values in [" + std::to_string(lo) + ", " +
                  std::to_string(hi) + "]");
  }
  if (nb::cast<std::string>(arr.attr("dtype").attr("str")) != "<i4") {
    arr = np.attr("ascontiguousarray")(arr, "dtype"_a = "int32");
    t.keep = arr;  // a copy: ours
  } else {
    t.keep = arr;  // the caller's buffer, read in place
  }
  t.ids = nb::cast<nb::ndarray<const int, nb::ndim<1>, nb::c_contig, nb::device::cpu>>(arr.attr("reshape")(-1)).data();
  return t;
}

/// \brief Per-pass plain-prefix lengths (K, B) of a step (row 0 unused): None (0), an int for every pass and
/// row, or a (K, B) integer array; each in [0, T].
inline std::vector<int> prefix_arg(nb::handle obj, int K, int B, int T) {
  if (obj.is_none()) return {};
  std::vector<int> p(std::size_t(K) * B, 0);
  if (nb::isinstance<nb::int_>(obj) && !nb::isinstance<nb::bool_>(obj)) {
    const long v = nb::cast<long>(obj);
    if (v < 0 || v > T) value_error("prefix: must be in [0, T = " + std::to_string(T) + "], got " + std::to_string(v));
    std::fill(p.begin(), p.end(), int(v));
    return p;
  }
  nb::object arr = nb::module_::import_("numpy").attr("asarray")(obj);
  const std::string kind = nb::cast<std::string>(arr.attr("dtype").attr("kind"));
  if (kind != "i" && kind != "u") type_error("prefix: expected an int or a (K, B) integer array, got numpy kind '" + kind + "'");
  const std::vector<long> shape = nb::cast<std::vector<long>>(arr.attr("shape"));
  if (!(shape.size() == 2 && shape[0] == K && shape[1] == B))
    value_error("prefix: expected shape (K, B) = (" + std::to_string(K) + ", " + std::to_string(B) + ")");
  const std::vector<long> v = nb::cast<std::vector<long>>(arr.attr("reshape")(-1).attr("tolist")());
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (v[i] < 0 || v[i] > T) value_error("prefix: entry " + std::to_string(i) + " is " + std::to_string(v[i]) + ", outside [0, T = " + std::to_string(T) + "]");
    p[i] = int(v[i]);
  }
  return p;
}

/// \brief One step of model type M with its kept workspace: what fbt.multipass_step and the timing entry run.
template <class M> void run_step(M& m, StepState& st, const Batch& b, StepOptions o, StepStats& stats) {
  if (!st.ws) st.ws = std::make_shared<Workspace<M>>();
  if (o.sigma > 0) o.rng = &st.rng;
  multipass_step(m, *static_cast<Workspace<M>*>(st.ws.get()), b, o, stats);
}

/// A step's arguments, converted and checked (with the GIL), for fbt.multipass_step and the timing entry.
struct StepArgs {
  explicit StepArgs(TokenBatch&& t) : tb(std::move(t)) {}
  TokenBatch tb;
  Targets tg;
  std::vector<std::uint8_t> ds;
  std::vector<int> prefix;
  StepOptions o;
  Batch batch() const { return Batch{tb.B, tb.T, tb.ids, tg.ids, ds.data()}; }
};
inline StepArgs step_args(const AnyModel& am, int sep, nb::handle tokens, nb::handle targets, int K, double lam, double sigma, bool detach,
                          int grad_passes, nb::handle prefix, nb::handle doc_starts, bool backward, double grad_scale) {
  StepArgs a(tokens_arg(tokens, "tokens", am.vocab()));
  if (a.tb.T > am.config().max_position_embeddings)
    value_error("tokens: " + std::to_string(a.tb.T) + " positions, more than the model's max_position_embeddings (" +
                std::to_string(am.config().max_position_embeddings) + ")");
  if (K < 1 || K > kMaxPasses) value_error("K: must be in [1, " + std::to_string(kMaxPasses) + "], got " + std::to_string(K));
  if (K > 1 && !am.has_feedback()) value_error("K: " + std::to_string(K) + " passes need a feedback fuser; this model's fuser is none (K = 1)");
  if (!(sigma >= 0) || !std::isfinite(sigma)) value_error("sigma: must be finite and >= 0, got " + std::to_string(sigma));
  if (!std::isfinite(lam)) value_error("lam: must be finite, got " + std::to_string(lam));
  if (grad_passes < 0) value_error("grad_passes: must be >= 0 (0 = every pass), got " + std::to_string(grad_passes));
  if (!std::isfinite(grad_scale)) value_error("grad_scale: must be finite");
  a.tg = targets_arg(targets, a.tb, am.vocab());
  a.ds = doc_starts_arg(doc_starts, a.tb, sep);
  a.prefix = prefix_arg(prefix, K, a.tb.B, a.tb.T);
  a.o.K = K, a.o.lambda = lam, a.o.sigma = sigma, a.o.detach = detach, a.o.grad_passes = grad_passes;
  a.o.prefix = a.prefix.empty() ? nullptr : a.prefix.data(), a.o.backward = backward, a.o.grad_scale = grad_scale;
  return a;
}

/// \brief An optimizer of the trainer's registry over a model's parameter store (fbt.AdamW, fbt.NorMuon).
struct PyOptimizer {
  std::shared_ptr<AnyModel> model;  ///< kept alive while the optimizer lives
  std::unique_ptr<AnyOptimizer<float>> opt;
  double lr = 0;  ///< the peak (default) rate; step(lr=x) runs at x, with lr_scale x / lr for the matrices' rate
  long calls = 0;
};
}  // namespace detail

/// \brief Adds multipass_step, Model.named_grads / zero_grad, AdamW, NorMuon, clip_grad_norm and _timing.
inline void bind_step(nb::module_& m) {
  using P = PyModel;
  using detail::PyOptimizer;
  auto model_arg = [](nb::handle h) -> P& {
    P* p = nullptr;
    if (!nb::try_cast<P*>(h, p, false) || p == nullptr) type_error("model: expected an fbt.Model, got " + py_type_name(h));
    return *p;
  };

  m.def(
      "multipass_step",
      [model_arg](nb::handle model, nb::handle tokens, nb::handle targets, int K, double lam, double sigma, bool detach, int grad_passes,
                  nb::handle prefix, nb::handle doc_starts, std::optional<std::uint64_t> seed, bool backward, double grad_scale) {
        P& pm = model_arg(model);
        detail::StepArgs a = detail::step_args(*pm.impl, pm.sep(), tokens, targets, K, lam, sigma, detach, grad_passes, prefix, doc_starts, backward, grad_scale);
        detail::StepState& st = detail::step_state(pm.impl);
        if (seed) st.rng = Rng(*seed);
        StepStats stats;
        {
          nb::gil_scoped_release nogil;
          visit_model(*pm.impl, [&](auto& typed) { detail::run_step(typed, st, a.batch(), a.o, stats); });
        }
        return stats.loss;
      },
      "model"_a, "tokens"_a, "targets"_a = nb::none(), "K"_a = 1, "lam"_a = 1.0, "sigma"_a = 0.0, "detach"_a = false, "grad_passes"_a = 0,
      "prefix"_a = nb::none(), "doc_starts"_a = nb::none(), "seed"_a = nb::none(), "backward"_a = true, "grad_scale"_a = 1.0,
      "multipass_step(model, tokens, targets=None, K=1, lam=1.0, sigma=0.0, detach=False, grad_passes=0, prefix=None,\n"
      "               doc_starts=None, seed=None, backward=True, grad_scale=1.0) -> list[float]\n\n"
      "One K-pass step of the training objective (spec section 3; the trainer's step): the loss of each pass\n"
      "(pass 1 first), and with backward=True the gradients of sum_j w_j loss_j (w_1 = 1, w_j = lam / (K-1))\n"
      "ACCUMULATED into the model's gradient store (Model.named_grads(); clear it with Model.zero_grad() or the\n"
      "optimizer's zero_grad()). tokens: (B, T) or (T,) ids (as Model.logits takes them); targets: ids of the\n"
      "same shape, -1 = no loss (default: the next token of each row); sigma: jitter of the carried state, from\n"
      "a generator kept with the model (seed= re-seeds it); prefix: plain positions per pass, an int or (K, B);\n"
      "detach / grad_passes: the trainer's knobs; grad_scale multiplies every gradient. Runs without the GIL.");

  nb::handle model_type = nb::type<P>();
  model_type.attr("named_grads") = nb::cpp_function(
      [](nb::handle self_h) {
        ParamStore<float>& ps = nb::cast<P&>(self_h).impl->params();
        return named_views(self_h, ps, ps.grads());
      },
      nb::is_method(), nb::name("named_grads"), nb::scope(model_type),
      "{name: array} of every parameter's gradient (the names of named_parameters): writable views of the model's\n"
      "own gradient store (no copy), valid while the model lives. multipass_step accumulates into them.");
  model_type.attr("zero_grad") = nb::cpp_function([](P& self) { self.impl->params().zero_grad(); }, nb::is_method(), nb::name("zero_grad"),
                                                  nb::scope(model_type), "Sets every gradient to zero.");

  nb::class_<PyOptimizer> opt(m, "Optimizer",
                              "An optimizer the trainer runs (train/optimizer.hpp), over a model's parameters: fbt.AdamW, fbt.NorMuon.\n"
                              "Its state (moments) lives in the model's parameter store, as in a training run.");
  opt.def(
         "step",
         [](PyOptimizer& o, std::optional<double> lr) {
           const double r = lr ? *lr : o.lr;
           if (!std::isfinite(r) || r < 0) value_error("lr: must be finite and >= 0, got " + std::to_string(r));
           nb::gil_scoped_release nogil;
           o.opt->step(o.model->params(), OptimizerStep{o.calls, r, o.lr > 0 ? r / o.lr : 1.0});
           ++o.calls;
         },
         "lr"_a = nb::none(),
         "One update from the accumulated gradients, at rate lr (default: the optimizer's lr; NorMuon's matrices move at\n"
         "matrix_lr x lr / the optimizer's lr, as the trainer's schedule does).")
      .def("zero_grad", [](PyOptimizer& o) { o.model->params().zero_grad(); }, "Sets the model's gradients to zero.")
      .def_prop_ro("name", [](const PyOptimizer& o) { return std::string(o.opt->name()); })
      .def_prop_ro("steps", [](const PyOptimizer& o) { return o.model->params().step; }, "updates made (the store's step counter)")
      .def_rw("lr", &PyOptimizer::lr, "the default rate of step()");

  auto make_opt = [model_arg](nb::handle model, const char* name, const OptimizerArgs& a) {
    P& pm = model_arg(model);
    PyOptimizer o;
    o.model = pm.impl, o.lr = a.lr;
    o.opt = OptimizerRegistry::global().make<float>(name, a, Options{});
    o.opt->init(o.model->params());
    return o;
  };
  auto check_betas = [](const std::pair<double, double>& b) {
    if (!(b.first >= 0 && b.first < 1) || !(b.second >= 0 && b.second < 1)) value_error("betas: each must be in [0, 1)");
  };
  // every setting checked when the optimizer is made, in the training config's ranges (train/config_validate.hpp),
  // not at its first step(): a ValueError naming the argument
  auto check_real = [](const char* name, double v, bool zero_ok, double hi = std::numeric_limits<double>::infinity()) {
    if (!(std::isfinite(v) && (zero_ok ? v >= 0 : v > 0) && v < hi))
      value_error(std::string(name) + ": must be a finite number " + (zero_ok ? ">= 0" : "> 0") + (std::isfinite(hi) ? " and < " + fbt::detail::num(hi) : std::string()) +
                  ", got " + fbt::detail::num(v));
  };
  m.def(
      "AdamW",
      [make_opt, check_betas, check_real](nb::handle model, double lr, std::pair<double, double> betas, double eps, double weight_decay) {
        check_betas(betas);
        check_real("lr", lr, false), check_real("eps", eps, false), check_real("weight_decay", weight_decay, true);
        OptimizerArgs a;
        a.lr = lr, a.beta1 = betas.first, a.beta2 = betas.second, a.eps = eps, a.weight_decay = weight_decay;
        return make_opt(model, "adamw", a);
      },
      "model"_a, "lr"_a = 3e-4, "betas"_a = std::make_pair(0.9, 0.95), "eps"_a = 1e-8, "weight_decay"_a = 0.1,
      "AdamW over every parameter (train/adamw.hpp; decay on matrices only), the trainer's `optimizer adamw`.");
  m.def(
      "NorMuon",
      [make_opt, check_betas, check_real](nb::handle model, double lr, double matrix_lr, std::pair<double, double> betas, double eps, double weight_decay,
                                          double matrix_weight_decay, double momentum, double beta2, int ns_steps) {
        check_betas(betas);
        check_real("lr", lr, false), check_real("matrix_lr", matrix_lr, false), check_real("eps", eps, false);
        check_real("weight_decay", weight_decay, true), check_real("matrix_weight_decay", matrix_weight_decay, true);
        check_real("momentum", momentum, true, 1.0), check_real("beta2", beta2, true, 1.0);
        if (ns_steps < 1 || ns_steps > 100) value_error("ns_steps: must be in [1, 100], got " + std::to_string(ns_steps));
        OptimizerArgs a;
        a.lr = lr, a.beta1 = betas.first, a.beta2 = betas.second, a.eps = eps, a.weight_decay = weight_decay;
        a.matrix_lr = matrix_lr, a.matrix_weight_decay = matrix_weight_decay, a.muon_momentum = momentum, a.normuon_beta2 = beta2, a.ns_steps = ns_steps;
        return make_opt(model, "normuon", a);
      },
      "model"_a, "lr"_a = 3e-4, "matrix_lr"_a = 0.01, "betas"_a = std::make_pair(0.9, 0.95), "eps"_a = 1e-8, "weight_decay"_a = 0.1,
      "matrix_weight_decay"_a = 0.01, "momentum"_a = 0.95, "beta2"_a = 0.95, "ns_steps"_a = 5,
      "NorMuon on the stack's matrices at matrix_lr and AdamW at lr on the rest (train/muon.hpp), the trainer's\n"
      "`optimizer normuon`.");
  m.def(
      "clip_grad_norm",
      [model_arg](nb::handle model, double max_norm) {
        P& pm = model_arg(model);
        // as the trainer's grad_clip, but "off" is not asked by calling it: a finite max_norm > 0
        if (!(std::isfinite(max_norm) && max_norm > 0)) value_error("max_norm: must be a finite number > 0, got " + fbt::detail::num(max_norm));
        nb::gil_scoped_release nogil;
        return clip_grad_norm(pm.impl->params(), max_norm);
      },
      "model"_a, "max_norm"_a,
      "Scales the gradients so that their global L2 norm is at most max_norm (train/clip.hpp); returns the norm before.");

  // the C++ alone, for benchmarks/python_overhead.py: the same step and decoder without Python between calls
  nb::module_ t = m.def_submodule("_timing", "C++-side timings of the calls the Python API makes (benchmarks/python_overhead.py).");
  t.def(
      "multipass_step",
      [model_arg](nb::handle model, nb::handle tokens, int K, int repeats) {
        P& pm = model_arg(model);
        detail::StepArgs a = detail::step_args(*pm.impl, pm.sep(), tokens, nb::none(), K, 1.0, 0.0, false, 0, nb::none(), nb::none(), true, 1.0);
        detail::StepState& st = detail::step_state(pm.impl);
        std::vector<double> s;
        std::vector<double> loss;
        {
          nb::gil_scoped_release nogil;
          visit_model(*pm.impl, [&](auto& typed) {
            StepStats stats;
            for (int i = 0; i < repeats; ++i) {
              const auto t0 = std::chrono::steady_clock::now();
              detail::run_step(typed, st, a.batch(), a.o, stats);
              s.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
            }
            loss = stats.loss;
          });
        }
        return std::make_pair(s, loss);
      },
      "model"_a, "tokens"_a, "K"_a, "repeats"_a,
      "(seconds of each of `repeats` calls, the last call's losses) of the step fbt.multipass_step(model, tokens, K=K) runs.");
  t.def(
      "generate",
      [model_arg](nb::handle model, nb::handle prompt, const std::string& mode, int max_new_tokens, int repeats) {
        P& pm = model_arg(model);
        TokenBatch tb = tokens_arg(prompt, "prompt", pm.impl->vocab(), 1);
        GenerateOptions o;
        o.mode = DecodeModeSpec::parse(mode), o.max_new_tokens = max_new_tokens, o.sampling.temperature = 0;  // greedy
        const std::vector<int> p(tb.ids, tb.ids + tb.T);
        std::vector<double> s;
        std::vector<int> out;
        {
          nb::gil_scoped_release nogil;
          visit_model(*pm.impl, [&](auto& typed) {
            Decoder<std::decay_t<decltype(typed)>> dec(typed, pm.sep());
            for (int i = 0; i < repeats; ++i) {
              const auto t0 = std::chrono::steady_clock::now();
              out = generate(dec, p, o);
              s.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
            }
          });
        }
        return std::make_pair(s, out);
      },
      "model"_a, "prompt"_a, "mode"_a, "max_new_tokens"_a, "repeats"_a,
      "(seconds of each of `repeats` greedy generations, the last one's tokens): decode/decoder.hpp's generate, the\n"
      "code `fbt sample` and fbt.Decoder.generate run, timed in C++.");
}

}  // namespace python
}  // namespace fbt
