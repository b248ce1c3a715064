// fbt/layers/any_piece.hpp: a fuser or a block erased at its slot: AnyFuser<T> and AnyBlock<T> hold any
// piece that meets the fuser contract (layers/fuser.hpp) or the block contract (layers/contract.hpp)
// behind a small virtual interface, and are themselves a fuser and a block. So Model<T> (model/model.hpp,
// whose slots they are) is one type per scalar whatever pieces a config names, and the step, the decoder,
// the trainer and every `fbt` command are compiled once for it (mlpack's layers, CTranslate2's models).
//
//   AnyFuser<float> f = GluFuser<float>(args);          // any fuser type, by value
//   std::vector<AnyBlock<float>> stack{DecoderBlock<float>(spec), GatedBlock<float>(spec)};   // a mixed stack
//   const GluFuser<float>* g = f.get_if<GluFuser<float>>();                        // typed access, or null
//
// The piece's own code runs with Be = AnyBackend<T> (backend/any.hpp): its template members are instantiated
// once, in the adapter, and run on every backend; the contract checks run there, at compile time, with the
// messages that name a missing member. Its caches are the piece's own Cache types, held by an ErasedCache
// that the layout makes (once per shape: a step allocates nothing). A call costs one virtual call per layer
// and pass, and one per backend operation inside the piece (docs/PERFORMANCE.md, "Erased pieces").
// The adapters that implement the interfaces for a piece type, and the registries of the pieces a program
// knows by name, are in model/pieces.hpp (they build a piece from a config).
#pragma once

#include <memory>
#include <string>
#include <type_traits>
#include <typeinfo>
#include <utility>

#include "../backend/any.hpp"
#include "../core/options.hpp"
#include "contract.hpp"

namespace fbt {

struct ModelConfig;  // model/config.hpp: what record() writes a fuser's options into

/// \brief One cache of an erased piece: an object of the piece's own Cache type (made by the piece's alloc),
/// copied by value (a copy is a copy of the pointers it holds into the workspace).
class ErasedCache {
 public:
  ErasedCache() = default;
  ErasedCache(const ErasedCache& o) : p_(o.p_ ? o.p_->clone() : nullptr) {}
  ErasedCache& operator=(const ErasedCache& o) {
    if (this != &o) p_.reset(o.p_ ? o.p_->clone() : nullptr);
    return *this;
  }
  ErasedCache(ErasedCache&&) noexcept = default;
  ErasedCache& operator=(ErasedCache&&) noexcept = default;
  /// A fresh C (value-initialised) in place of what was held; what the piece's alloc fills.
  template <class C> C& emplace() {
    auto* h = new Holder<C>();
    p_.reset(h);
    return h->c;
  }
  /// The C the piece's alloc made (unchecked: only the piece's own adapter asks, with its own type).
  template <class C> C& get() { return static_cast<Holder<C>*>(p_.get())->c; }
  template <class C> const C& get() const { return static_cast<const Holder<C>*>(p_.get())->c; }
  bool empty() const { return !p_; }

 private:
  struct Base {
    virtual ~Base() = default;
    virtual Base* clone() const = 0;
  };
  template <class C> struct Holder final : Base {
    C c{};
    Base* clone() const override { return new Holder(*this); }
  };
  std::unique_ptr<Base> p_;
};

// =============================================================================================== fusers

/// \brief The fuser slot: any fuser, by value (layers/fuser.hpp's contract, which it meets itself). A
/// default AnyFuser is the baseline's NoFuser (fuser "none": no feedback).
template <class T> class AnyFuser {
 public:
  using Scalar = T;
  struct Cache {
    ErasedCache c;  ///< the fuser's own Cache
  };
  struct PreCache {
    ErasedCache c;  ///< the fuser's own PreCache (a fuser with a precompute)
  };

  /// The virtual interface an adapter (detail::FuserAdapter<F>) implements for fuser type F.
  struct Impl {
    virtual ~Impl() = default;
    virtual Impl* clone() const = 0;
    virtual const char* name() const = 0;
    virtual const std::type_info& type() const = 0;
    virtual const void* target() const = 0;
    virtual void* target() = 0;
    virtual bool feedback() const = 0;
    virtual void record(ModelConfig& c) const = 0;
    virtual void declare(const ParamRegistry<T>& r) = 0;
    virtual void alloc(const AnyBackend<T>& be, Carver<T>& keep, Carver<T>& temp, ErasedCache& c, int N, bool grad) const = 0;
    virtual void forward(AnyBackend<T>& be, const Weights<T>& w, ErasedCache& c, const T* s, const T* e, const T* pre, T* u, int N) const = 0;
    virtual void backward(AnyBackend<T>& be, const Weights<T>& w, const ErasedCache& c, const T* s, const T* e, const T* pre, const T* du, T* ds,
                          T* de, T* dpre, int N) const = 0;
    virtual int pre_width() const = 0;
    virtual void alloc_pre(const AnyBackend<T>& be, Carver<T>& keep, Carver<T>& temp, ErasedCache& pc, int N, bool grad) const = 0;
    virtual void pre_forward(AnyBackend<T>& be, const Weights<T>& w, ErasedCache& pc, const T* e, T* pre, int N) const = 0;
    virtual void pre_backward(AnyBackend<T>& be, const Weights<T>& w, const ErasedCache& pc, const T* e, const T* dpre, T* de, int N) const = 0;
    virtual FuserStats diagnostics(AnyBackend<T>& be, const Weights<T>& w, const ErasedCache& c, const FuserPass<T>& p) const = 0;
  };

  AnyFuser();
  /// Holds an implementation of the interface itself (a fuser that is no C++ type: one written in Python,
  /// fbt/python/py_fuser.hpp).
  explicit AnyFuser(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
  /// Holds fuser f (any type meeting the fuser contract with Scalar T).
  template <class F, class = std::enable_if_t<!std::is_same<std::decay_t<F>, AnyFuser>::value>> AnyFuser(F f);  // NOLINT: implicit, as a value
  AnyFuser(const AnyFuser& o) : impl_(o.impl_->clone()) {}
  AnyFuser& operator=(const AnyFuser& o) {
    if (this != &o) impl_.reset(o.impl_->clone());
    return *this;
  }
  AnyFuser(AnyFuser&&) noexcept = default;
  AnyFuser& operator=(AnyFuser&&) noexcept = default;

  /// The fuser's name (the config's `fuser` value).
  const char* type_name() const { return impl_->name(); }
  /// Whether it feeds the state back (false for the baseline's "none").
  bool feedback() const { return impl_->feedback(); }
  /// The fuser as type F, or null when it is another type.
  template <class F> const F* get_if() const { return impl_->type() == typeid(F) ? static_cast<const F*>(impl_->target()) : nullptr; }
  template <class F> F* get_if() { return impl_->type() == typeid(F) ? static_cast<F*>(impl_->target()) : nullptr; }

  // ---- the fuser contract (layers/fuser.hpp), each call passed on to the fuser ------------------------------
  void declare(const ParamRegistry<T>& r) { impl_->declare(r); }
  template <class Be> void alloc(const Be& be, Carver<T>& keep, Carver<T>& temp, Cache& c, int N, bool grad) const {
    with_any_backend(be, [&](const AnyBackend<T>& a) { impl_->alloc(a, keep, temp, c.c, N, grad); });
  }
  template <class Be> void forward(Be& be, const Weights<T>& w, Cache& c, const T* s, const T* e, const T* pre, T* u, int N) const {
    with_any_backend(be, [&](AnyBackend<T>& a) { impl_->forward(a, w, c.c, s, e, pre, u, N); });
  }
  template <class Be>
  void backward(Be& be, const Weights<T>& w, const Cache& c, const T* s, const T* e, const T* pre, const T* du, T* ds, T* de, T* dpre, int N) const {
    with_any_backend(be, [&](AnyBackend<T>& a) { impl_->backward(a, w, c.c, s, e, pre, du, ds, de, dpre, N); });
  }
  /// The precompute's width (0: the fuser has none; then the pre_* calls do nothing).
  int pre_width() const { return impl_->pre_width(); }
  template <class Be> void alloc_pre(const Be& be, Carver<T>& keep, Carver<T>& temp, PreCache& pc, int N, bool grad) const {
    with_any_backend(be, [&](const AnyBackend<T>& a) { impl_->alloc_pre(a, keep, temp, pc.c, N, grad); });
  }
  template <class Be> void pre_forward(Be& be, const Weights<T>& w, PreCache& pc, const T* e, T* pre, int N) const {
    with_any_backend(be, [&](AnyBackend<T>& a) { impl_->pre_forward(a, w, pc.c, e, pre, N); });
  }
  template <class Be> void pre_backward(Be& be, const Weights<T>& w, const PreCache& pc, const T* e, const T* dpre, T* de, int N) const {
    with_any_backend(be, [&](AnyBackend<T>& a) { impl_->pre_backward(a, w, pc.c, e, dpre, de, N); });
  }
  template <class Be> FuserStats diagnostics(Be& be, const Weights<T>& w, const Cache& c, const FuserPass<T>& p) const {
    return with_any_backend(be, [&](AnyBackend<T>& a) { return impl_->diagnostics(a, w, c.c, p); });
  }
  /// Writes the fuser's options into a config (FuserConfig<F>::record, model/builder.hpp).
  void record(ModelConfig& c) const { impl_->record(c); }

 private:
  std::unique_ptr<Impl> impl_;
};

// =============================================================================================== blocks

/// \brief The block slot: any block, by value (layers/contract.hpp's block contract, which it meets
/// itself). A stack of AnyBlock may mix block types layer by layer.
template <class T> class AnyBlock {
 public:
  using Scalar = T;
  struct Cache {
    ErasedCache c;  ///< the block's own Cache
  };
  struct DecodeCache {
    ErasedCache c;  ///< the block's own DecodeCache
  };

  /// The virtual interface an adapter (detail::BlockAdapter<B>) implements for block type B.
  struct Impl {
    virtual ~Impl() = default;
    virtual Impl* clone() const = 0;
    virtual const char* name() const = 0;
    virtual const std::type_info& type() const = 0;
    virtual const void* target() const = 0;
    virtual void* target() = 0;
    virtual Options options() const = 0;
    virtual LayerSpec layer_spec() const = 0;
    virtual void declare(const ParamRegistry<T>& r) = 0;
    virtual void alloc(const AnyBackend<T>& be, Carver<T>& keep, Carver<T>& temp, ErasedCache& c, int B, int Tn, bool grad) const = 0;
    virtual void forward(AnyBackend<T>& be, const Weights<T>& w, ErasedCache& c, const T* x, T* out, const PassShape& s) const = 0;
    virtual void backward(AnyBackend<T>& be, const Weights<T>& w, const ErasedCache& c, T* dx, const T* x, const PassShape& s) const = 0;
    virtual int kv_width() const = 0;
    virtual std::pair<const T*, const T*> kv(const ErasedCache& c) const = 0;
    virtual void alloc_decode(const AnyBackend<T>& be, Carver<T>& a, ErasedCache& c, int R) const = 0;
    virtual void decode(AnyBackend<T>& be, const Weights<T>& w, const ErasedCache& c, T* x, const DecodeStep<T>& st) const = 0;
  };

  AnyBlock() = default;
  /// Holds block b (any type meeting the block contract with Scalar T); built_with: the options it was made
  /// with, what options() reports when B has no options() member of its own.
  template <class B, class = std::enable_if_t<!std::is_same<std::decay_t<B>, AnyBlock>::value>>
  AnyBlock(B b, Options built_with = {});  // NOLINT: implicit, as a value
  AnyBlock(const AnyBlock& o) : impl_(o.impl_ ? o.impl_->clone() : nullptr) {}
  AnyBlock& operator=(const AnyBlock& o) {
    if (this != &o) impl_.reset(o.impl_ ? o.impl_->clone() : nullptr);
    return *this;
  }
  AnyBlock(AnyBlock&&) noexcept = default;
  AnyBlock& operator=(AnyBlock&&) noexcept = default;

  /// The block type's name (its value of the config's `block`, or of `layer_blocks` in a mixed stack).
  std::string type_name() const { return impl_->name(); }
  /// The block as type B, or null when it is another type.
  template <class B> const B* get_if() const { return impl_->type() == typeid(B) ? static_cast<const B*>(impl_->target()) : nullptr; }
  template <class B> B* get_if() { return impl_->type() == typeid(B) ? static_cast<B*>(impl_->target()) : nullptr; }
  /// The block's options (what its options() member gives; else the options it was built with).
  Options options() const { return impl_->options(); }
  /// The block's sizes, as a config records them.
  LayerSpec layer_spec() const { return impl_->layer_spec(); }

  // ---- the block contract (layers/contract.hpp), each call passed on to the block ---------------------------
  void declare(const ParamRegistry<T>& r) { impl_->declare(r); }
  template <class Be> void alloc(const Be& be, Carver<T>& keep, Carver<T>& temp, Cache& c, int B, int Tn, bool grad) const {
    with_any_backend(be, [&](const AnyBackend<T>& a) { impl_->alloc(a, keep, temp, c.c, B, Tn, grad); });
  }
  template <class Be> void forward(Be& be, const Weights<T>& w, Cache& c, const T* x, T* out, const PassShape& s) const {
    with_any_backend(be, [&](AnyBackend<T>& a) { impl_->forward(a, w, c.c, x, out, s); });
  }
  template <class Be> void backward(Be& be, const Weights<T>& w, const Cache& c, T* dx, const T* x, const PassShape& s) const {
    with_any_backend(be, [&](AnyBackend<T>& a) { impl_->backward(a, w, c.c, dx, x, s); });
  }
  int kv_width() const { return impl_->kv_width(); }
  std::pair<const T*, const T*> kv(const Cache& c) const { return impl_->kv(c.c); }
  template <class Be> void alloc_decode(const Be& be, Carver<T>& a, DecodeCache& c, int R) const {
    with_any_backend(be, [&](const AnyBackend<T>& ab) { impl_->alloc_decode(ab, a, c.c, R); });
  }
  template <class Be> void decode(Be& be, const Weights<T>& w, const DecodeCache& c, T* x, const DecodeStep<T>& st) const {
    with_any_backend(be, [&](AnyBackend<T>& a) { impl_->decode(a, w, c.c, x, st); });
  }

 private:
  std::unique_ptr<Impl> impl_;
};

template <class X> struct is_any_fuser : std::false_type {};
template <class T> struct is_any_fuser<AnyFuser<T>> : std::true_type {};
template <class X> struct is_any_block : std::false_type {};
template <class T> struct is_any_block<AnyBlock<T>> : std::true_type {};

}  // namespace fbt
