// fbt/layers/mixed_block.hpp: a stack of mixed block types. MixedBlock<T, Bs...> is, per layer, one of the
// block types Bs (a std::variant), and is itself a block (the contract of layers/contract.hpp): every call
// is passed on to the layer's own block with that block's own cache. So Model<T, F, MixedBlock<T, A, G>>
// runs a stack such as A, A, G, A through the K-pass step, the decoder, checkpoints and the trainer, none of
// which knows the stack is mixed (nanoGPT's `for block in self.transformer.h`, with blocks that differ).
//
// A config names the types per layer with `layer_blocks` (["decoder", "gated", "decoder"]); the model
// builder (model/builder.hpp, BlockConfig<MixedBlock>) makes each layer's block from its LayerSpec and its
// type's block_options, given in a mixed config under "<type name>.<key>". with_model (model/model.hpp)
// chooses MixedBlock over the block list when layer_blocks is set. Tensor names are each block's own
// (model.layers.{i}.*), so a mixed checkpoint holds just the tensors of its layers.
#pragma once

#include <cstddef>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>

#include "../core/options.hpp"
#include "contract.hpp"

namespace fbt {

template <class T, class... Bs> struct MixedBlock {
  static_assert(sizeof...(Bs) >= 1, "fbt::MixedBlock: needs at least one block type");
  static_assert((std::is_same<typename Bs::Scalar, T>::value && ...), "fbt::MixedBlock: every block type's Scalar must be T");
  using Scalar = T;
  /// The config's `block` value of a mixed stack; the per-layer types are in layer_blocks.
  static constexpr const char* name = "mixed";

  std::variant<Bs...> block;  ///< this layer's block

  /// One pass's activations: the layer's block's own Cache (alternative i for block type i).
  struct Cache {
    std::variant<typename Bs::Cache...> c;
  };
  /// One decoding step's buffers: the layer's block's own DecodeCache.
  struct DecodeCache {
    std::variant<typename Bs::DecodeCache...> c;
  };

  MixedBlock() = default;
  /// A layer of block type X (one of Bs).
  template <class X, class = std::enable_if_t<(std::is_same<std::decay_t<X>, Bs>::value || ...)>>
  MixedBlock(X b) : block(std::move(b)) {}  // NOLINT: implicit, so a std::vector<MixedBlock> is built from blocks

  /// The options of a mixed stack: each type's own, scoped "<type name>.<key>" (block_options of a config).
  static void declare_options(OptionList& o) { (add_scoped<Bs>(o), ...); }
  /// This layer's block's options (when its type has an options() member), scoped as declare_options says.
  Options options() const {
    Options r;
    std::visit(
        [&](const auto& b) {
          using X = std::decay_t<decltype(b)>;
          if constexpr (has_options<X>::value)
            for (const auto& kv : Options(b.options())) r[std::string(X::name) + "." + kv.first] = kv.second;
        },
        block);
    return r;
  }

  /// The layer's block type's name (its entry of layer_blocks).
  std::string type_name() const {
    return std::visit([](const auto& b) { return std::string(std::decay_t<decltype(b)>::name); }, block);
  }
  /// The layer's block as type X, or null when it is another type.
  template <class X> const X* get_if() const { return std::get_if<X>(&block); }

  void declare(const ParamRegistry<T>& r) {
    std::visit([&](auto& b) { b.declare(r); }, block);
  }
  template <class Be> void alloc(const Be& be, Carver<T>& keep, Carver<T>& temp, Cache& c, int B, int Tn, bool grad) const {
    with_index([&](auto I) { std::get<I>(block).alloc(be, keep, temp, c.c.template emplace<I>(), B, Tn, grad); });
  }
  /// out (N, D) = the layer's block(x).
  template <class Be> void forward(Be& be, const Weights<T>& w, Cache& c, const T* x, T* out, const PassShape& s) const {
    with_index([&](auto I) { std::get<I>(block).forward(be, w, std::get<I>(c.c), x, out, s); });
  }
  /// dx (N, D): d out on entry, d x on exit; the block's parameter gradients accumulate.
  template <class Be> void backward(Be& be, const Weights<T>& w, const Cache& c, T* dx, const T* x, const PassShape& s) const {
    with_index([&](auto I) { std::get<I>(block).backward(be, w, std::get<I>(c.c), dx, x, s); });
  }
  int kv_width() const {
    return std::visit([](const auto& b) { return int(b.kv_width()); }, block);
  }
  std::pair<const T*, const T*> kv(const Cache& c) const {
    std::pair<const T*, const T*> r{nullptr, nullptr};
    with_index([&](auto I) { r = std::get<I>(block).kv(std::get<I>(c.c)); });
    return r;
  }
  template <class Be> void alloc_decode(const Be& be, Carver<T>& a, DecodeCache& c, int R) const {
    with_index([&](auto I) { std::get<I>(block).alloc_decode(be, a, c.c.template emplace<I>(), R); });
  }
  /// x (R, D) <- the layer's block(x), one KV-cached decoding step.
  template <class Be> void decode(Be& be, const Weights<T>& w, const DecodeCache& c, T* x, const DecodeStep<T>& st) const {
    with_index([&](auto I) { std::get<I>(block).decode(be, w, std::get<I>(c.c), x, st); });
  }
  /// The layer's sizes (its block's own).
  LayerSpec layer_spec() const {
    return std::visit([](const auto& b) { return LayerSpec(b.layer_spec()); }, block);
  }

 private:
  template <class X, class = void> struct has_options : std::false_type {};
  template <class X> struct has_options<X, std::void_t<decltype(Options(std::declval<const X&>().options()))>> : std::true_type {};
  template <class X> static void add_scoped(OptionList& o) {
    const OptionList own = declared_options<X>();  // a named list: a range over a temporary's member would dangle
    for (OptionSpec sp : own.specs()) {
      sp.name = std::string(X::name) + "." + sp.name;
      o.add(sp);
    }
  }
  /// fn(std::integral_constant<size_t, i>) for i = the index of this layer's block type: the same index picks
  /// the block and its caches (two types may share a cache type, so the caches are chosen by index).
  template <class Fn> void with_index(Fn&& fn) const { with_index(fn, std::index_sequence_for<Bs...>{}); }
  template <class Fn, std::size_t... I> void with_index(Fn& fn, std::index_sequence<I...>) const {
    const std::size_t k = block.index();
    ((k == I ? (fn(std::integral_constant<std::size_t, I>{}), 0) : 0), ...);
  }
};

template <class B> struct is_mixed_block : std::false_type {};
template <class T, class... Bs> struct is_mixed_block<MixedBlock<T, Bs...>> : std::true_type {};

}  // namespace fbt
