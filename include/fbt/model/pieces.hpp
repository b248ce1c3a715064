// fbt/model/pieces.hpp: the fusers and blocks a program knows, by name, and the adapters that put one
// into its slot (AnyFuser<T> / AnyBlock<T>, layers/any_piece.hpp).
//
//   fbt::register_fuser<LowRankFuser<float>>();    // known to configs, `--fuser lowrank`, checkpoints ...
//   fbt::register_block<GatedBlock<float>>();      // ... and `--block gated_attn`, layer_blocks
//   FBT_REGISTER_FUSER(LowRankFuser)              // the same for float and double, when the file is loaded
//   FBT_REGISTER_BLOCK(GatedBlock)                  (a program's file, or a plugin's: fbt/plugin.hpp)
//
// A registry maps a name (the piece's static `name`, the config's value) to its declared options and a
// factory that makes the piece from a config (FuserConfig<F>::make, model/builder.hpp) or from a layer's
// sizes (BlockConfig<B>::make), so Model<T> (model/model.hpp) builds whatever a config names with nothing
// compiled per piece in the loop. The library's own pieces are registered first (none, glu, gated_add,
// concat; decoder); a second type under a taken name is refused, the same type again is a no-op. An
// unknown name is refused with the names this program knows and how to add one.
// The adapters (detail::FuserAdapter<F>, detail::BlockAdapter<B>) run the contract checks of
// layers/contract.hpp at compile time, with Be = AnyBackend<T>: the piece's code is compiled there, once.
#pragma once

#include <algorithm>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <typeinfo>
#include <utility>
#include <vector>

#include "../core/queued.hpp"
#include "../layers/any_piece.hpp"
#include "builder.hpp"

namespace fbt {

namespace detail {

/// \brief AnyFuser's interface for fuser type F: each call runs F's own member (with Be = AnyBackend<T>).
/// A fuser without feedback (NoFuser) is never asked to run.
template <class F> class FuserAdapter final : public AnyFuser<typename F::Scalar>::Impl {
  using T = typename F::Scalar;
  using Ops = FuserOps<F>;
  static constexpr bool fb = fuser_is_feedback<F>::value;
  static_assert(check_fuser<F, AnyBackend<T>>(), "");

 public:
  F f;
  explicit FuserAdapter(F x) : f(std::move(x)) {}
  FuserAdapter* clone() const override { return new FuserAdapter(*this); }
  const char* name() const override { return F::name; }
  const std::type_info& type() const override { return typeid(F); }
  const void* target() const override { return &f; }
  void* target() override { return &f; }
  bool feedback() const override { return fb; }
  void record(ModelConfig& c) const override { FuserConfig<F>::record(f, c); }
  void declare(const ParamRegistry<T>& r) override {
    if constexpr (fb) f.declare(r);
    else (void)r;
  }
  void alloc(const AnyBackend<T>& be, Carver<T>& keep, Carver<T>& temp, ErasedCache& c, int N, bool grad) const override {
    if constexpr (fb) f.alloc(be, keep, temp, c.template emplace<typename F::Cache>(), N, grad);
    else (void)be, (void)keep, (void)temp, (void)c, (void)N, (void)grad;
  }
  void forward(AnyBackend<T>& be, const Weights<T>& w, ErasedCache& c, const T* s, const T* e, const T* pre, T* u, int N) const override {
    if constexpr (fb) f.forward(be, w, c.template get<typename F::Cache>(), s, e, pre, u, N);
    else no_feedback(be, w, c, s, e, pre, u, N);
  }
  void backward(AnyBackend<T>& be, const Weights<T>& w, const ErasedCache& c, const T* s, const T* e, const T* pre, const T* du, T* ds, T* de,
                T* dpre, int N) const override {
    if constexpr (fb) f.backward(be, w, c.template get<typename F::Cache>(), s, e, pre, du, ds, de, dpre, N);
    else no_feedback(be, w, c, s, e, pre, du, ds, de, dpre, N);
  }
  int pre_width() const override {
    if constexpr (fb) return Ops::pre_width(f);
    else return 0;
  }
  void alloc_pre(const AnyBackend<T>& be, Carver<T>& keep, Carver<T>& temp, ErasedCache& pc, int N, bool grad) const override {
    if constexpr (fb && Ops::has_pre) f.alloc_pre(be, keep, temp, pc.template emplace<typename Ops::PreCache>(), N, grad);
    else (void)be, (void)keep, (void)temp, (void)pc, (void)N, (void)grad;
  }
  void pre_forward(AnyBackend<T>& be, const Weights<T>& w, ErasedCache& pc, const T* e, T* pre, int N) const override {
    if constexpr (fb && Ops::has_pre) f.pre_forward(be, w, pc.template get<typename Ops::PreCache>(), e, pre, N);
    else (void)be, (void)w, (void)pc, (void)e, (void)pre, (void)N;
  }
  void pre_backward(AnyBackend<T>& be, const Weights<T>& w, const ErasedCache& pc, const T* e, const T* dpre, T* de, int N) const override {
    if constexpr (fb && Ops::has_pre) f.pre_backward(be, w, pc.template get<typename Ops::PreCache>(), e, dpre, de, N);
    else (void)be, (void)w, (void)pc, (void)e, (void)dpre, (void)de, (void)N;
  }
  FuserStats diagnostics(AnyBackend<T>& be, const Weights<T>& w, const ErasedCache& c, const FuserPass<T>& p) const override {
    if constexpr (fb) return Ops::diagnostics(f, be, w, c.template get<typename F::Cache>(), p);
    else return (void)be, (void)w, (void)c, (void)p, FuserStats{};
  }

 private:
  template <class... A> [[noreturn]] static void no_feedback(A&&...) {
    throw Error(std::string("fuser \"") + F::name + "\" has no feedback: a model with it runs plain passes only");
  }
};

/// \brief AnyBlock's interface for block type B: each call runs B's own member (with Be = AnyBackend<T>).
template <class B> class BlockAdapter final : public AnyBlock<typename B::Scalar>::Impl {
  using T = typename B::Scalar;
  static_assert(check_block<B, AnyBackend<T>>(), "");

 public:
  B b;
  Options built_with;  ///< the options it was made with (reported when B has no options() member)
  explicit BlockAdapter(B x, Options o = {}) : b(std::move(x)), built_with(std::move(o)) {}
  BlockAdapter* clone() const override { return new BlockAdapter(*this); }
  const char* name() const override { return B::name; }
  const std::type_info& type() const override { return typeid(B); }
  const void* target() const override { return &b; }
  void* target() override { return &b; }
  Options options() const override {
    if constexpr (has_options_member<B>::value) return Options(b.options());
    else return built_with;
  }
  LayerSpec layer_spec() const override { return BlockConfig<B>::record(b); }
  void declare(const ParamRegistry<T>& r) override { b.declare(r); }
  void alloc(const AnyBackend<T>& be, Carver<T>& keep, Carver<T>& temp, ErasedCache& c, int Bn, int Tn, bool grad) const override {
    b.alloc(be, keep, temp, c.template emplace<typename B::Cache>(), Bn, Tn, grad);
  }
  void forward(AnyBackend<T>& be, const Weights<T>& w, ErasedCache& c, const T* x, T* out, const PassShape& s) const override {
    b.forward(be, w, c.template get<typename B::Cache>(), x, out, s);
  }
  void backward(AnyBackend<T>& be, const Weights<T>& w, const ErasedCache& c, T* dx, const T* x, const PassShape& s) const override {
    b.backward(be, w, c.template get<typename B::Cache>(), dx, x, s);
  }
  int kv_width() const override { return int(b.kv_width()); }
  std::pair<const T*, const T*> kv(const ErasedCache& c) const override { return b.kv(c.template get<typename B::Cache>()); }
  void alloc_decode(const AnyBackend<T>& be, Carver<T>& a, ErasedCache& c, int R) const override {
    b.alloc_decode(be, a, c.template emplace<typename B::DecodeCache>(), R);
  }
  void decode(AnyBackend<T>& be, const Weights<T>& w, const ErasedCache& c, T* x, const DecodeStep<T>& st) const override {
    b.decode(be, w, c.template get<typename B::DecodeCache>(), x, st);
  }
};

}  // namespace detail

template <class T> AnyFuser<T>::AnyFuser() : impl_(new detail::FuserAdapter<NoFuser<T>>(NoFuser<T>{})) {}
template <class T>
template <class F, class>
AnyFuser<T>::AnyFuser(F f) : impl_(new detail::FuserAdapter<F>(std::move(f))) {
  static_assert(std::is_same<typename F::Scalar, T>::value, "fbt::AnyFuser<T>: the fuser's Scalar must be T");
}
template <class T>
template <class B, class>
AnyBlock<T>::AnyBlock(B b, Options built_with) : impl_(new detail::BlockAdapter<B>(std::move(b), std::move(built_with))) {
  static_assert(std::is_same<typename B::Scalar, T>::value, "fbt::AnyBlock<T>: the block's Scalar must be T");
}

/// A fuser's record into a config: the erased fuser's own (FuserConfig<F>::record of the type it holds).
template <class T> struct FuserConfig<AnyFuser<T>> {
  static void record(const AnyFuser<T>& f, ModelConfig& c) { f.record(c); }
};
/// A block's sizes as a config records them: the erased block's own (BlockConfig<B>::record of the type it holds).
template <class T> struct BlockConfig<AnyBlock<T>> {
  static LayerSpec record(const AnyBlock<T>& b) { return b.layer_spec(); }
};

// =============================================================================================== registries

/// What a registry knows of a piece type besides how to make it.
struct PieceInfo {
  std::string name;     ///< the config's value (the type's static name)
  std::string type;     ///< typeid name: the same type registered twice is a no-op
  std::string origin;   ///< where it came from: "" (the library or the program) or a plugin's file
  OptionList options;   ///< its declared options
  bool feedback = true; ///< a fuser: whether it feeds the state back (false for "none")
};

/// \brief The pieces of one slot a program knows, by name, in the order they were registered.
/// Any: AnyFuser<T> or AnyBlock<T>; Arg: what the factory reads (a ModelConfig for a fuser, a LayerSpec
/// with its options resolved for a block).
template <class Any, class Arg> class PieceRegistry {
 public:
  using Factory = std::function<Any(const Arg&)>;
  explicit PieceRegistry(const char* kind) : kind_(kind) {}
  PieceRegistry(const PieceRegistry&) = delete;
  PieceRegistry& operator=(const PieceRegistry&) = delete;

  /// \brief Adds a piece (a second type under a taken name is refused naming both origins; the same type again
  /// is a no-op). replace: a piece of the same name is replaced instead (a fuser written in Python, redefined in
  /// a notebook: fbt.register_fuser).
  void add(PieceInfo info, Factory make, bool replace = false) {
    if (info.name.empty() || info.name.size() > 64 || info.name == "mixed" || info.name.find_first_of(" \t\n\"'|,=()") != std::string::npos)
      throw Error(std::string(kind_) + " name " + detail::config_quote(info.name) +
                  " must hold 1 to 64 bytes without spaces, quotes or any of |,=() and not be \"mixed\"");
    std::lock_guard<std::mutex> g(mu_);
    for (auto& e : e_)
      if (e.info.name == info.name) {
        if (replace) {
          e = Entry{std::move(info), std::move(make)};
          return;
        }
        if (e.info.type == info.type) return;
        throw Error("two " + std::string(kind_) + " types are named \"" + info.name + "\" (" + origin_of(e.info) + " and " + origin_of(info) +
                    "): give each its own static name");
      }
    e_.push_back(Entry{std::move(info), std::move(make)});
  }
  /// Runs the registrations queued for this registry type that it has not run yet (FBT_REGISTER_FUSER and
  /// FBT_REGISTER_BLOCK of files loaded since: core/queued.hpp). The accessors call it on every use.
  PieceRegistry& catch_up() {
    std::lock_guard<std::mutex> g(queue_mu_);
    detail::run_queued(*this, applied_);
    return *this;
  }
  /// Records where piece `name` came from (a plugin's file: the loader, fbt/plugin.hpp).
  void set_origin(const std::string& name, const std::string& origin) {
    std::lock_guard<std::mutex> g(mu_);
    for (auto& e : e_)
      if (e.info.name == name) e.info.origin = origin;
  }
  bool known(const std::string& name) const {
    std::lock_guard<std::mutex> g(mu_);
    for (const auto& e : e_)
      if (e.info.name == name) return true;
    return false;
  }
  /// The names, in registration order (the library's own first).
  std::vector<std::string> names() const {
    std::lock_guard<std::mutex> g(mu_);
    std::vector<std::string> r;
    for (const auto& e : e_) r.push_back(e.info.name);
    return r;
  }
  std::string names_text() const {
    std::string r;
    for (const auto& n : names()) r += (r.empty() ? "" : ", ") + n;
    return r;
  }
  /// What is known of `name`; an unknown name is refused with the names this program knows.
  PieceInfo info(const std::string& name) const { return entry(name).info; }
  /// The piece `name` made from `arg`.
  Any make(const std::string& name, const Arg& arg) const { return entry(name).make(arg); }

 private:
  struct Entry {
    PieceInfo info;
    Factory make;
  };
  static std::string origin_of(const PieceInfo& i) { return i.origin.empty() ? "this program" : "plugin " + i.origin; }
  Entry entry(const std::string& name) const {
    {
      std::lock_guard<std::mutex> g(mu_);
      for (const auto& e : e_)
        if (e.info.name == name) return e;
    }
    throw Error("unknown " + std::string(kind_) + " " + detail::config_quote(name) + " (this program knows: " + names_text() + "; a " + kind_ +
                " of your own: fbt::register_" + kind_ + "<Yours>() or fbt::cli_main<Yours...> in your program, or a plugin built with " +
                "fbt_add_plugin and loaded with --plugin FILE or fbt.load_plugin(FILE)" +
                (std::string(kind_) == "fuser" ? ", or a fuser written in Python: fbt.register_fuser(cls))" : ")"));
  }
  const char* kind_;
  mutable std::mutex mu_;
  std::vector<Entry> e_;
  std::mutex queue_mu_;
  std::size_t applied_ = 0;
};

template <class T> using FuserRegistry = PieceRegistry<AnyFuser<T>, ModelConfig>;
template <class T> using BlockRegistry = PieceRegistry<AnyBlock<T>, LayerSpec>;

namespace detail {
template <class F> void add_fuser(FuserRegistry<typename F::Scalar>& r) {
  r.add(PieceInfo{F::name, typeid(F).name(), "", declared_options<F>(), fuser_is_feedback<F>::value},
        [](const ModelConfig& c) { return AnyFuser<typename F::Scalar>(FuserConfig<F>::make(c)); });
}
template <class B> void add_block(BlockRegistry<typename B::Scalar>& r) {
  r.add(PieceInfo{B::name, typeid(B).name(), "", declared_options<B>()},
        [](const LayerSpec& s) { return AnyBlock<typename B::Scalar>(BlockConfig<B>::make(s), s.options.values()); });
}
}  // namespace detail

/// \brief The fusers this program knows (T = float or double): the library's own, then what was registered.
template <class T> FuserRegistry<T>& fuser_registry() {
  static FuserRegistry<T>& r = *[] {
    auto* x = new FuserRegistry<T>("fuser");  // never destroyed: a plugin's factories may be asked during exit
    detail::add_fuser<NoFuser<T>>(*x), detail::add_fuser<GluFuser<T>>(*x), detail::add_fuser<GatedAddFuser<T>>(*x);
    detail::add_fuser<ConcatFuser<T>>(*x);
    return x;
  }();
  return r.catch_up();
}
/// \brief The blocks this program knows: the library's own decoder block, then what was registered.
template <class T> BlockRegistry<T>& block_registry() {
  static BlockRegistry<T>& r = *[] {
    auto* x = new BlockRegistry<T>("block");
    detail::add_block<DecoderBlock<T>>(*x);
    return x;
  }();
  return r.catch_up();
}

/// Makes fuser type F known by its name to every config reader, command and checkpoint of this program.
template <class F> void register_fuser() { detail::add_fuser<F>(fuser_registry<typename F::Scalar>()); }
/// Makes block type B known by its name (`block`, `layer_blocks`) to every config reader of this program.
template <class B> void register_block() { detail::add_block<B>(block_registry<typename B::Scalar>()); }

namespace detail {
/// The options the block types of a config declare: `block`'s own, or in a mixed stack (layer_blocks) each
/// used type's as "<type>.<key>" (used_types: those types). A type this program does not know is refused.
/// erased_block_options: the block_options a config asks for, checked against those declarations and
/// completed: `block`'s own, or in a mixed stack (layer_blocks) each used type's as "<type>.<key>". A key
/// scoped to a known type the stack does not use is dropped (a mixed stack's options once listed every type a
/// program knew).
template <class T> OptionList erased_block_option_list(const ModelConfig& c, std::vector<std::string>* used_types = nullptr) {
  const BlockRegistry<T>& reg = block_registry<T>();
  if (c.layer_blocks.empty()) {
    if (used_types) *used_types = {c.block};
    return reg.info(c.block).options;
  }
  OptionList scoped;
  std::vector<std::string> used;
  for (std::size_t l = 0; l < c.layer_blocks.size(); ++l) {
    const std::string& n = c.layer_blocks[l];
    if (std::find(used.begin(), used.end(), n) != used.end()) continue;
    if (!reg.known(n))
      throw Error("layer_blocks[" + std::to_string(l) + "] is " + config_quote(n) + ": unknown block (this program knows: " + reg.names_text() +
                  "; a block of your own: fbt::register_block<Yours>(), fbt::cli_main<Yours...>, or a plugin loaded with --plugin FILE)");
    used.push_back(n);
    const PieceInfo info = reg.info(n);  // a named copy: a range over a temporary's member would dangle
    for (OptionSpec sp : info.options.specs()) {
      sp.name = n + "." + sp.name;
      scoped.add(sp);
    }
  }
  if (used_types) *used_types = used;
  return scoped;
}
template <class T> OptionValues erased_block_options(const ModelConfig& c) {
  std::vector<std::string> used;
  const OptionList list = erased_block_option_list<T>(c, &used);
  if (c.layer_blocks.empty()) return OptionValues::resolve(list, c.block_options, "block_options", "block \"" + c.block + "\"");
  Options given;
  for (const auto& kv : c.block_options) {
    const std::string scope = kv.first.substr(0, kv.first.find('.'));
    if (kv.first.find('.') != std::string::npos && std::find(used.begin(), used.end(), scope) == used.end() && block_registry<T>().known(scope))
      continue;
    given.insert(kv);
  }
  std::string types;
  for (const auto& u : used) types += (types.empty() ? "" : ", ") + u;
  return OptionValues::resolve(list, given, "block_options", "the mixed stack (its block types: " + types + ")");
}
}  // namespace detail

/// Block l of an erased stack: the registered type the config names (layer_blocks[l] in a mixed stack),
/// made from layer_spec(c, l) with that type's options.
template <class T> struct ConfigBlock<AnyBlock<T>> {
  static AnyBlock<T> make(const ModelConfig& c, int l, const OptionValues& bo) {
    const bool mixed = !c.layer_blocks.empty();
    const std::string& type = mixed ? c.layer_blocks.at(std::size_t(l)) : c.block;
    LayerSpec s = layer_spec(c, l);
    if (!mixed) {
      s.options = bo;
    } else {
      const std::string scope = type + ".";
      Options own;
      for (const auto& kv : bo.values())
        if (kv.first.compare(0, scope.size(), scope) == 0) own[kv.first.substr(scope.size())] = kv.second;
      const PieceInfo i = block_registry<T>().info(type);
      s.options = OptionValues::resolve(i.options, own, "block_options." + type, "block \"" + type + "\"");
    }
    return block_registry<T>().make(type, s);
  }
};

#define FBT_PIECE_CAT_(a, b) a##b
#define FBT_PIECE_CAT(a, b) FBT_PIECE_CAT_(a, b)
/// Registers the fuser template F (F<float> and F<double>) when the file is loaded: in a program, before
/// the fusers are first looked up; in a plugin (fbt/plugin.hpp), into the program that loads it.
#define FBT_REGISTER_FUSER(F)                                                                                         \
  static const bool FBT_PIECE_CAT(fbt_registered_fuser_, __COUNTER__) [[maybe_unused]] =                           \
      (::fbt::detail::queue_registration<::fbt::FuserRegistry<float>>(&::fbt::detail::add_fuser<F<float>>),          \
       ::fbt::detail::queue_registration<::fbt::FuserRegistry<double>>(&::fbt::detail::add_fuser<F<double>>))
/// Registers the block template B (B<float> and B<double>) when the file is loaded, as FBT_REGISTER_FUSER.
#define FBT_REGISTER_BLOCK(B)                                                                                         \
  static const bool FBT_PIECE_CAT(fbt_registered_block_, __COUNTER__) [[maybe_unused]] =                           \
      (::fbt::detail::queue_registration<::fbt::BlockRegistry<float>>(&::fbt::detail::add_block<B<float>>),          \
       ::fbt::detail::queue_registration<::fbt::BlockRegistry<double>>(&::fbt::detail::add_block<B<double>>))

}  // namespace fbt
