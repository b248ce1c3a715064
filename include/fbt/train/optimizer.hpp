// fbt/train/optimizer.hpp: optimizers as types with a written contract, like the fuser; the trainer
// runs the one its config names (knob optimizer), built-in or a program's own.
//
// An optimizer type O has
//   static constexpr const char* name = "...";           the config's `optimizer` value
//   static void declare_options(OptionList&)              optional: its options (optimizer_options)
//   explicit O(const OptimizerArgs&)                      the run's hyper-parameters and its options
//   template <class T> double step(ParamStore<T>& ps, const OptimizerStep& s)
//                                                         one update of ps.values() from ps.grads() (already
//                                                         clipped); increments ps.step; returns a second
//                                                         rate to log as matrix_lr (0: none). May return void.
//   template <class T> void init(ParamStore<T>& ps)       optional: called once before the first step or a
//                                                         resume's load (e.g. allocate ps.row_moments())
//   template <class T> void state(ParamStore<T>& ps, std::vector<StateTensor<T>>& out)
//                                                         optional: state tensors of its own, saved in the
//                                                         checkpoint's train_state as "opt.<name>" and restored
//                                                         bit for bit on resume
//   template <class T> double step(BackendUpdates<T>& u, const OptimizerStep& s)
//                                                         optional: the same update on a backend that is not
//                                                         the CPU's (Trainer<M, Be>), through the library's
//                                                         updates there (u: AdamW, grouped Muon / NorMuon).
//                                                         Without it, such a trainer downloads the weights and
//                                                         the state, runs step(ParamStore&) on the host and
//                                                         uploads them again (correct, slower)
// Every optimizer may keep its per-parameter state in ps.adam_m() / ps.adam_v() (two buffers of the
// parameters' size, saved and restored with the checkpoint, as AdamW's moments) and ps.step.
// The built-in ones: adamw (every tensor), muon and normuon (the matrices; AdamW for the rest: muon.hpp).
// A program adds its own with register_optimizer<O>() (fbt::cli_main does it for the types it is given).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <typeinfo>
#include <vector>

#include "../core/queued.hpp"
#include "../core/options.hpp"
#include "../core/params.hpp"
#include "adamw.hpp"
#include "muon.hpp"

namespace fbt {

/// The run's optimizer hyper-parameters (TrainConfig's optimizer fields) and the optimizer's own options.
struct OptimizerArgs {
  double lr = 3e-4;                  ///< peak learning rate (each step's comes in OptimizerStep)
  double beta1 = 0.9, beta2 = 0.95, eps = 1e-8, weight_decay = 0.1;
  double matrix_lr = 0.01;           ///< muon / normuon: the matrices' peak rate
  double matrix_weight_decay = 0.01;
  double muon_momentum = 0.95, normuon_beta2 = 0.95;
  int ns_steps = 5;
  OptionValues options{};            ///< optimizer_options, resolved against the type's declare_options
};

/// One step's rates: the schedule's lr and its multiplier (lr / peak lr), and the step (0-based).
struct OptimizerStep {
  long step = 0;
  double lr = 0;
  double lr_scale = 1;
};

/// A state tensor of an optimizer's own: its name (saved as "opt.<name>"), shape and buffer.
template <class T> struct StateTensor {
  std::string name;
  Shape shape;
  T* data = nullptr;
};

/// The optimizer updates the library runs on a backend's weights and state (train/backend_optimizer.hpp's
/// BackendOptimizer implements them): what an optimizer's backend step calls.
template <class T> struct BackendUpdates {
  virtual ~BackendUpdates() = default;
  /// AdamW on every tensor at lr (adamw.hpp).
  virtual void adamw_update(const AdamWConfig& cfg, double lr) = 0;
  /// The matrices by Muon / NorMuon at matrix_lr, the rest by AdamW at lr (muon.hpp).
  virtual void grouped_update(const AdamWConfig& adam, double lr, const MuonConfig& muon, double matrix_lr) = 0;
};

/// The trainer's view of an optimizer (type-erased: chosen by name at run time).
template <class T> struct AnyOptimizer {
  virtual ~AnyOptimizer() = default;
  virtual const char* name() const = 0;
  virtual void init(ParamStore<T>&) = 0;
  virtual double step(ParamStore<T>&, const OptimizerStep&) = 0;
  virtual std::vector<StateTensor<T>> state(ParamStore<T>&) = 0;
  /// Whether the type has a step on a backend (step(BackendUpdates&)); the default throws.
  virtual bool has_backend_step() const = 0;
  virtual double step(BackendUpdates<T>&, const OptimizerStep&) = 0;
};

namespace detail {
template <class O, class T, class = void> struct opt_has_init : std::false_type {};
template <class O, class T> struct opt_has_init<O, T, std::void_t<decltype(std::declval<O&>().init(std::declval<ParamStore<T>&>()))>> : std::true_type {};
template <class O, class T, class = void> struct opt_has_state : std::false_type {};
template <class O, class T>
struct opt_has_state<O, T, std::void_t<decltype(std::declval<O&>().state(std::declval<ParamStore<T>&>(), std::declval<std::vector<StateTensor<T>>&>()))>>
    : std::true_type {};
template <class O, class T, class = void> struct opt_has_backend_step : std::false_type {};
template <class O, class T>
struct opt_has_backend_step<O, T, std::void_t<decltype(std::declval<O&>().step(std::declval<BackendUpdates<T>&>(), std::declval<const OptimizerStep&>()))>>
    : std::true_type {};

template <class O, class T> struct OptimizerAdapter final : AnyOptimizer<T> {
  O o;
  explicit OptimizerAdapter(const OptimizerArgs& a) : o(a) {}
  const char* name() const override { return O::name; }
  void init(ParamStore<T>& ps) override {
    if constexpr (opt_has_init<O, T>::value) o.init(ps);
  }
  double step(ParamStore<T>& ps, const OptimizerStep& s) override {
    if constexpr (std::is_void<decltype(o.step(ps, s))>::value) {
      o.step(ps, s);
      return 0.0;
    } else {
      return double(o.step(ps, s));
    }
  }
  std::vector<StateTensor<T>> state(ParamStore<T>& ps) override {
    std::vector<StateTensor<T>> r;
    if constexpr (opt_has_state<O, T>::value) o.state(ps, r);
    return r;
  }
  bool has_backend_step() const override { return opt_has_backend_step<O, T>::value; }
  double step(BackendUpdates<T>& u, const OptimizerStep& s) override {
    if constexpr (!opt_has_backend_step<O, T>::value) {
      throw Error(std::string("optimizer ") + O::name + " has no step on a backend (step(BackendUpdates<T>&, const OptimizerStep&))");
    } else if constexpr (std::is_void<decltype(o.step(u, s))>::value) {
      o.step(u, s);
      return 0.0;
    } else {
      return double(o.step(u, s));
    }
  }
};
}  // namespace detail

// ---- the built-in optimizers ---------------------------------------------------------------------

/// adamw: AdamW on every tensor at the scheduled lr (adamw.hpp).
struct AdamWOptimizer {
  static constexpr const char* name = "adamw";
  AdamWConfig cfg;
  explicit AdamWOptimizer(const OptimizerArgs& a) { cfg.lr = a.lr, cfg.beta1 = a.beta1, cfg.beta2 = a.beta2, cfg.eps = a.eps, cfg.weight_decay = a.weight_decay; }
  template <class T> double step(ParamStore<T>& ps, const OptimizerStep& s) {
    adamw_update(ps, cfg, s.lr);
    return 0.0;
  }
  template <class T> double step(BackendUpdates<T>& u, const OptimizerStep& s) {
    u.adamw_update(cfg, s.lr);
    return 0.0;
  }
};

/// muon / normuon: the matrices by Muon or NorMuon at matrix_lr x the schedule's multiplier, AdamW for
/// the rest at the scheduled lr (muon.hpp). NorMuon's row moments are allocated at init (a checkpoint at
/// step 0 holds them).
template <MuonVariant V> struct MuonFamilyOptimizer {
  static constexpr const char* name = V == MuonVariant::Muon ? "muon" : "normuon";
  AdamWConfig adam;
  MuonConfig muon;
  double matrix_lr = 0.01;
  explicit MuonFamilyOptimizer(const OptimizerArgs& a) {
    adam.lr = a.lr, adam.beta1 = a.beta1, adam.beta2 = a.beta2, adam.eps = a.eps, adam.weight_decay = a.weight_decay;
    muon.variant = V, muon.momentum = a.muon_momentum, muon.beta2 = a.normuon_beta2, muon.ns_steps = a.ns_steps;
    muon.weight_decay = a.matrix_weight_decay, matrix_lr = a.matrix_lr;
  }
  template <class T> void init(ParamStore<T>& ps) {
    if (V == MuonVariant::NorMuon) (void)ps.row_moments();
  }
  template <class T> double step(ParamStore<T>& ps, const OptimizerStep& s) {
    const double mlr = matrix_lr * s.lr_scale;  // the same schedule multiplier, on the matrices' peak
    grouped_update(ps, adam, s.lr, muon, mlr, workspace<T>());
    return mlr;
  }
  template <class T> double step(BackendUpdates<T>& u, const OptimizerStep& s) {
    const double mlr = matrix_lr * s.lr_scale;
    u.grouped_update(adam, s.lr, muon, mlr);
    return mlr;
  }

 private:
  template <class T> MuonWorkspace<CpuBackend<T>>& workspace() {
    if constexpr (std::is_same<T, float>::value) return ws_f_;
    else return ws_d_;
  }
  MuonWorkspace<CpuBackend<float>> ws_f_;
  MuonWorkspace<CpuBackend<double>> ws_d_;
};
using MuonOptimizer = MuonFamilyOptimizer<MuonVariant::Muon>;
using NorMuonOptimizer = MuonFamilyOptimizer<MuonVariant::NorMuon>;

/// \brief The optimizers a program knows, by name: the built-in ones, and what register_optimizer<O>() adds.
class OptimizerRegistry {
 public:
  static OptimizerRegistry& global() {
    static OptimizerRegistry r;
    std::lock_guard<std::mutex> g(r.queue_mu_);
    detail::run_queued(r, r.applied_);  // FBT_REGISTER_OPTIMIZER of files loaded since (core/queued.hpp)
    return r;
  }
  template <class O> void add() {
    std::lock_guard<std::mutex> g(mu_);
    const std::string n = O::name;
    if (n.empty() || n.size() > 64) throw Error("optimizer name \"" + n + "\" must hold 1 to 64 bytes");
    auto it = e_.find(n);
    if (it != e_.end()) {
      if (it->second.type == typeid(O).name()) return;
      throw Error("two optimizers are named \"" + n + "\": give each its own static name");
    }
    Entry e;
    e.type = typeid(O).name();
    e.options = declared_options<O>();
    e.make_f = [](const OptimizerArgs& a) -> std::unique_ptr<AnyOptimizer<float>> { return std::make_unique<detail::OptimizerAdapter<O, float>>(a); };
    e.make_d = [](const OptimizerArgs& a) -> std::unique_ptr<AnyOptimizer<double>> { return std::make_unique<detail::OptimizerAdapter<O, double>>(a); };
    e_[n] = std::move(e);
  }
  bool known(const std::string& n) const {
    std::lock_guard<std::mutex> g(mu_);
    return e_.count(n) > 0;
  }
  std::string names() const {
    std::lock_guard<std::mutex> g(mu_);
    std::string r;
    for (const auto& kv : e_) r += (r.empty() ? "" : ", ") + kv.first;
    return r;
  }
  /// The options optimizer `n` declares (an unknown name: refused with the list).
  OptionList options(const std::string& n) const { return entry(n).options; }
  /// \brief An optimizer `n` for a T store; `given` (optimizer_options) resolved against its declaration.
  template <class T> std::unique_ptr<AnyOptimizer<T>> make(const std::string& n, OptimizerArgs a, const Options& given) const {
    const Entry e = entry(n);
    a.options = OptionValues::resolve(e.options, given, "optimizer_options", "optimizer \"" + n + "\"");
    if constexpr (std::is_same<T, float>::value) return e.make_f(a);
    else return e.make_d(a);
  }

 private:
  struct Entry {
    std::string type;
    OptionList options;
    std::function<std::unique_ptr<AnyOptimizer<float>>(const OptimizerArgs&)> make_f;
    std::function<std::unique_ptr<AnyOptimizer<double>>(const OptimizerArgs&)> make_d;
  };
  OptimizerRegistry() { add<AdamWOptimizer>(), add<MuonOptimizer>(), add<NorMuonOptimizer>(); }
  Entry entry(const std::string& n) const {
    std::lock_guard<std::mutex> g(mu_);
    auto it = e_.find(n);
    if (it == e_.end()) {
      std::string r;
      for (const auto& kv : e_) r += (r.empty() ? "" : ", ") + kv.first;
      throw Error("unknown optimizer " + detail::option_quote(n) + " (known: " + r + ")");
    }
    return it->second;
  }
  mutable std::mutex mu_;
  std::map<std::string, Entry> e_;
  std::mutex queue_mu_;
  std::size_t applied_ = 0;
};

/// Makes optimizer type O known to the trainer (and so to `--optimizer`).
template <class O> void register_optimizer() { OptimizerRegistry::global().add<O>(); }
/// Registers optimizer type O when the file is loaded (a program's, or a plugin's: fbt/plugin.hpp).
#define FBT_REGISTER_OPTIMIZER(O)                                                                                     \
  static const bool FBT_OPTIMIZER_CAT(fbt_registered_optimizer_, __COUNTER__) [[maybe_unused]] =                   \
      ::fbt::detail::queue_registration<::fbt::OptimizerRegistry>(+[](::fbt::OptimizerRegistry& r) { r.add<O>(); })
#define FBT_OPTIMIZER_CAT_(a, b) a##b
#define FBT_OPTIMIZER_CAT(a, b) FBT_OPTIMIZER_CAT_(a, b)

}  // namespace fbt
