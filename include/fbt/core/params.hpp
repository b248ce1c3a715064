// fbt/core/params.hpp: the flat parameter store (llm.c's params_memory / grads_memory / m / v).
//
// One ParamSpec table {name, shape, offset} is the single source of truth for the layout, the
// initialisation, the weight-decay mask and the checkpoint tensor names (spec section 8: Hugging Face
// Qwen3 names, matrices stored (out, in) like nn.Linear). Four identically laid out buffers hold the
// values, the gradients and the two AdamW moments. Layers keep only offsets into it.
// A sixth, small buffer holds one value per row of each matrix (rank >= 2: its leading dimension, the
// output neurons of an (OC, C) weight), laid out in spec order (ParamSpec::row_offset): the neuron-wise
// second moment of NorMuon (train/muon.hpp). It is allocated, zeroed, only when asked for (row_moments()).
// finalize() allocates the values only. The gradients and the AdamW moments are allocated, zeroed,
// the first time anything asks for them (grads(), grad(), zero_grad(), adam_m(), adam_v(), const or
// not; thread-safe), so training sees exactly what it saw when finalize allocated all four, and a model
// that only runs forward (loaded for inference, decoded through a const model) never holds them.
// Constants (RoPE tables) live in a fifth buffer: computed at declare time, never trained or saved.
// A store in planning mode (plan_only()) records specs and constant sizes but allocates nothing: how
// a loader learns the tensors a config implies before building the model (Model::plan).
// Layers declare through a ParamRegistry, which scopes names (PyTorch's module prefixes): a layer says
// "q_proj.weight" and the model decides it is "model.layers.3.self_attn.q_proj.weight".
#pragma once

#include <atomic>
#include <functional>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "rng.hpp"
#include "tensor.hpp"

namespace fbt {

/// How a parameter is initialised (spec sections 1, 2 and 9).
enum class Init {
  Normal,    ///< N(0, std^2)
  Zeros,     ///< all 0
  Ones,      ///< all 1 (norm gains)
  Identity,  ///< square matrix I
  ZeroIdentity,  ///< (D, 2D) matrix [0 | I] (the concat fuser)
  Constant,  ///< all init_std (a norm gain started at another value than 1: knob in_norm_init)
};

struct ParamSpec {
  std::string name;     ///< checkpoint name, e.g. "model.layers.0.self_attn.q_proj.weight"
  Shape shape;          ///< (OC, C) for matrices, (C) for gains and biases
  std::size_t offset;   ///< first element in the flat buffers
  std::size_t size;     ///< number of elements
  Init init;
  double init_std;      ///< for Init::Normal
  bool decay;           ///< AdamW weight decay applies (matrices only)
  std::size_t row_offset = 0;  ///< first element in the row-moment buffer (matrices: shape[0] of them; others: none)
};

namespace detail {
/// The lock taken by the first allocation of a store's gradients or moments (rare: once per buffer).
inline std::mutex& params_alloc_mutex() {
  static std::mutex m;
  return m;
}
/// An atomic flag that copies its value (so a ParamStore stays copyable and movable).
struct CopyableFlag {
  std::atomic<bool> v{false};
  CopyableFlag() = default;
  CopyableFlag(const CopyableFlag& o) : v(o.v.load(std::memory_order_acquire)) {}
  CopyableFlag& operator=(const CopyableFlag& o) {
    v.store(o.v.load(std::memory_order_acquire), std::memory_order_release);
    return *this;
  }
};
}  // namespace detail

/// \brief A config's parameter layout, as a store in planning mode records it (Model::plan).
struct ParamLayout {
  std::vector<ParamSpec> specs;  ///< every tensor, in declaration order
  std::size_t params = 0;        ///< elements over all tensors
  std::size_t constants = 0;     ///< elements of the constant tables (RoPE)
};

template <class T> class ParamStore {
 public:
  /// Register a tensor; returns its offset. Call before finalize().
  /// A name made an alias (alias()) returns its target's offset instead: no new tensor.
  std::size_t add(const std::string& name, Shape shape, Init init, double init_std = 0.0) {
    FBT_ASSERT(!finalized_, "ParamStore::add(\"" + name + "\") after finalize()");
    if (auto a = aliases_.find(name); a != aliases_.end()) {
      const ParamSpec& t = spec(a->second.target);
      FBT_ASSERT(t.shape == shape, "parameter \"" + name + "\" is an alias of \"" + t.name + "\" but has another shape");
      a->second.used = true;
      return t.offset;
    }
    FBT_ASSERT(index_.count(name) == 0, "duplicate parameter name \"" + name + "\"");
    for (auto d : shape) FBT_ASSERT(d > 0, "parameter \"" + name + "\" has a zero or negative dimension");
    ParamSpec s{name, shape, total_, std::size_t(numel(shape)), init, init_std, shape.size() >= 2, rows_total_};
    index_[name] = specs_.size();
    specs_.push_back(s);
    total_ += s.size;
    if (shape.size() >= 2) rows_total_ += std::size_t(shape[0]);  // one row moment per output neuron
    return s.offset;
  }
  /// \brief Makes `name` (a full name, declared later by a layer) share the tensor `target` (declared
  /// already): add(name) then returns target's offset, so both uses read one tensor and accumulate into
  /// one gradient, and the checkpoint holds target only (e.g. the paper's one input norm serving as the
  /// fuser's gate norm: knob gate_norm shared). alias_used(name) says whether a layer asked for it.
  void alias(const std::string& name, const std::string& target) {
    FBT_ASSERT(has(target), "ParamStore::alias: the target \"" + target + "\" is not declared");
    FBT_ASSERT(!has(name), "ParamStore::alias: \"" + name + "\" is already a tensor");
    aliases_[name] = Alias{target, false};
  }
  /// (name, target) of every alias a layer asked for.
  std::vector<std::pair<std::string, std::string>> used_aliases() const {
    std::vector<std::pair<std::string, std::string>> r;
    for (const auto& [name, a] : aliases_)
      if (a.used) r.emplace_back(name, a.target);
    return r;
  }
  bool alias_used(const std::string& name) const {
    auto a = aliases_.find(name);
    return a != aliases_.end() && a->second.used;
  }

  /// \brief Allocates the values, all zero. The gradients and the AdamW moments are allocated (zero)
  /// when first asked for (see the file comment); a second finalize() zeroes them all again.
  void finalize() {
    FBT_ASSERT(!planning_, "ParamStore::finalize on a store in planning mode (it only records a layout)");
    value_.assign(total_, T(0));
    {
      std::lock_guard<std::mutex> g(detail::params_alloc_mutex());
      grad_ = AlignedVector<T>(), m_ = AlignedVector<T>(), v_ = AlignedVector<T>(), row_v_ = AlignedVector<T>();
      grads_ready_.v.store(false), moments_ready_.v.store(false), rows_ready_.v.store(false);
    }
    finalized_ = true;
  }
  /// \brief Planning mode: add() and add_constant() record the layout (specs, sizes, offsets) but no
  /// buffer is allocated or filled, and finalize() is refused. Call on an empty store.
  void plan_only() {
    FBT_ASSERT(specs_.empty() && consts_total_ == 0 && !finalized_, "ParamStore::plan_only on a store already in use");
    planning_ = true;
  }
  bool planning() const { return planning_; }
  /// The layout recorded so far (specs, parameter and constant element counts).
  ParamLayout layout() const { return ParamLayout{specs_, total_, consts_total_}; }
  /// Seeded initialisation of every tensor in registration order.
  void init(std::uint64_t seed) {
    FBT_ASSERT(finalized_, "ParamStore::init before finalize()");
    Rng rng(seed);
    for (const auto& s : specs_) {
      T* p = value_.data() + s.offset;
      switch (s.init) {
        case Init::Normal:
          for (std::size_t i = 0; i < s.size; ++i) p[i] = T(rng.normal(0.0, s.init_std));
          break;
        case Init::Zeros: std::fill(p, p + s.size, T(0)); break;
        case Init::Ones: std::fill(p, p + s.size, T(1)); break;
        case Init::Constant: std::fill(p, p + s.size, T(s.init_std)); break;
        case Init::Identity: {
          FBT_ASSERT(s.shape.size() == 2 && s.shape[0] == s.shape[1], "Identity init needs a square matrix: " + s.name);
          std::fill(p, p + s.size, T(0));
          for (std::int64_t i = 0; i < s.shape[0]; ++i) p[i * s.shape[1] + i] = T(1);
          break;
        }
        case Init::ZeroIdentity: {
          FBT_ASSERT(s.shape.size() == 2 && s.shape[1] == 2 * s.shape[0], "[0 | I] init needs a (D, 2D) matrix: " + s.name);
          std::fill(p, p + s.size, T(0));
          for (std::int64_t i = 0; i < s.shape[0]; ++i) p[i * s.shape[1] + s.shape[0] + i] = T(1);
          break;
        }
      }
    }
  }
  /// Sets every gradient to 0 (allocating the gradient buffer on first use).
  void zero_grad() {
    ensure_grads();
    std::fill(grad_.begin(), grad_.end(), T(0));
  }

  /// \brief A constant table of n elements filled by fill(T*), shared by every caller with the same key
  /// (e.g. one RoPE table per head size); returns its offset in constants(). Allowed before and after
  /// finalize (constants are not parameters: no gradient, no optimizer state, not in a checkpoint).
  /// In planning mode only the size is recorded (fill is not called).
  std::size_t add_constant(const std::string& key, std::size_t n, const std::function<void(T*)>& fill) {
    auto it = const_index_.find(key);
    if (it != const_index_.end()) return it->second;
    const std::size_t off = consts_total_;
    consts_total_ += n;
    const_index_[key] = off;
    if (planning_) return off;
    consts_.resize(off + n);
    fill(consts_.data() + off);
    return off;
  }
  const T* constants() const { return consts_.data(); }
  std::size_t constants_size() const { return consts_total_; }

  std::size_t size() const { return total_; }
  const std::vector<ParamSpec>& specs() const { return specs_; }
  bool has(const std::string& name) const { return index_.count(name) != 0; }
  const ParamSpec& spec(const std::string& name) const {
    auto it = index_.find(name);
    FBT_ASSERT(it != index_.end(), "no parameter named \"" + name + "\"");
    return specs_[it->second];
  }
  T* value(const std::string& n) { return value_.data() + spec(n).offset; }
  const T* value(const std::string& n) const { return value_.data() + spec(n).offset; }
  T* grad(const std::string& n) { return grads() + spec(n).offset; }

  // The flat buffers (size()). The gradient and moment accessors allocate on first use (zeroed).
  T* values() { return value_.data(); }
  const T* values() const { return value_.data(); }
  T* grads() {
    ensure_grads();
    return grad_.data();
  }
  const T* grads() const {
    ensure_grads();
    return grad_.data();
  }
  T* adam_m() {
    ensure_moments();
    return m_.data();
  }
  const T* adam_m() const {
    ensure_moments();
    return m_.data();
  }
  T* adam_v() {
    ensure_moments();
    return v_.data();
  }
  const T* adam_v() const {
    ensure_moments();
    return v_.data();
  }
  /// \brief The row-moment buffer (row_moments_size(): one value per row of each matrix, at
  /// ParamSpec::row_offset), allocated zero on first use: NorMuon's neuron-wise second moment.
  T* row_moments() {
    ensure_row_moments();
    return row_v_.data();
  }
  const T* row_moments() const {
    ensure_row_moments();
    return row_v_.data();
  }
  /// Elements of the row-moment buffer: the sum of shape[0] over the tensors of rank >= 2.
  std::size_t row_moments_size() const { return rows_total_; }
  long step = 0;  ///< AdamW step counter t (number of updates applied)

  /// True once the gradient buffer exists (something asked for it since finalize()).
  bool has_grads() const { return grads_ready_.v.load(std::memory_order_acquire); }
  /// True once the AdamW moment buffers exist.
  bool has_moments() const { return moments_ready_.v.load(std::memory_order_acquire); }
  /// True once the row-moment buffer exists (a NorMuon step or a NorMuon state's load asked for it).
  bool has_row_moments() const { return rows_ready_.v.load(std::memory_order_acquire); }
  /// \brief Bytes the store holds: values, gradients and moments (when allocated) and constants.
  std::size_t allocated_bytes() const {
    std::size_t n = value_.capacity() + consts_.capacity();
    if (has_grads()) n += grad_.capacity();
    if (has_moments()) n += m_.capacity() + v_.capacity();
    if (has_row_moments()) n += row_v_.capacity();
    return n * sizeof(T);
  }

 private:
  std::vector<ParamSpec> specs_;
  std::unordered_map<std::string, std::size_t> index_;
  struct Alias {
    std::string target;
    bool used;
  };
  std::unordered_map<std::string, Alias> aliases_;  // name -> the tensor it shares (alias())
  /// Allocates the gradients (zero) once, under a lock; nothing before finalize() (the layout may grow).
  void ensure_grads() const {
    if (grads_ready_.v.load(std::memory_order_acquire) || !finalized_) return;
    std::lock_guard<std::mutex> g(detail::params_alloc_mutex());
    if (grads_ready_.v.load(std::memory_order_relaxed)) return;
    grad_.assign(total_, T(0));
    grads_ready_.v.store(true, std::memory_order_release);
  }
  /// Allocates both AdamW moments (zero) once, under a lock.
  void ensure_moments() const {
    if (moments_ready_.v.load(std::memory_order_acquire) || !finalized_) return;
    std::lock_guard<std::mutex> g(detail::params_alloc_mutex());
    if (moments_ready_.v.load(std::memory_order_relaxed)) return;
    m_.assign(total_, T(0));
    v_.assign(total_, T(0));
    moments_ready_.v.store(true, std::memory_order_release);
  }

  /// Allocates the row moments (zero) once, under a lock.
  void ensure_row_moments() const {
    if (rows_ready_.v.load(std::memory_order_acquire) || !finalized_) return;
    std::lock_guard<std::mutex> g(detail::params_alloc_mutex());
    if (rows_ready_.v.load(std::memory_order_relaxed)) return;
    row_v_.assign(rows_total_, T(0));
    rows_ready_.v.store(true, std::memory_order_release);
  }

  std::size_t total_ = 0;
  std::size_t rows_total_ = 0;    // elements of the row-moment buffer
  std::size_t consts_total_ = 0;  // elements of the constant tables (== consts_.size() unless planning)
  bool finalized_ = false;
  bool planning_ = false;
  AlignedVector<T> value_;
  mutable AlignedVector<T> grad_, m_, v_;  // allocated on first use (ensure_grads / ensure_moments)
  mutable AlignedVector<T> row_v_;         // allocated on first use (ensure_row_moments)
  mutable detail::CopyableFlag grads_ready_, moments_ready_, rows_ready_;
  AlignedVector<T> consts_;
  std::unordered_map<std::string, std::size_t> const_index_;
};

/// \brief Where a layer declares its parameters: a ParamStore and a name prefix (a scope).
///
/// `r.scope("self_attn").add("q_proj.weight", ...)` registers "<prefix>self_attn.q_proj.weight", so a
/// layer never builds checkpoint names itself and a user's layer or fuser lands under the scope the model
/// gives it (model.layers.{i}., model.feedback.).
template <class T> class ParamRegistry {
 public:
  explicit ParamRegistry(ParamStore<T>& ps, std::string prefix = "") : ps_(&ps), prefix_(std::move(prefix)) {}
  /// A registry for a sub-module: names get "<name>." appended to the prefix.
  ParamRegistry scope(const std::string& name) const { return ParamRegistry(*ps_, prefix_ + name + "."); }
  /// Registers "<prefix><name>"; returns its offset in the flat buffers.
  std::size_t add(const std::string& name, Shape shape, Init init, double init_std = 0.0) const {
    return ps_->add(prefix_ + name, std::move(shape), init, init_std);
  }
  /// A constant table shared by key (see ParamStore::add_constant); keys are global, not scoped.
  std::size_t constant(const std::string& key, std::size_t n, const std::function<void(T*)>& fill) const {
    return ps_->add_constant(key, n, fill);
  }
  const std::string& prefix() const { return prefix_; }
  ParamStore<T>& store() const { return *ps_; }

 private:
  ParamStore<T>* ps_;
  std::string prefix_;
};

}  // namespace fbt
