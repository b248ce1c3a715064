// fbt/model/builder.hpp: ModelConfig <-> the typed model's parts: the one place that maps a config
// (from the CLI, a JSON file or a checkpoint) to layers, a fuser and the model's options, and back.
//
//   layer_spec(cfg, l)            the sizes of block l (heterogeneous stacks: the per-layer lists)
//   model_options(cfg)            the tap, the input norm (which inputs, its gain, shared as the gate norm),
//                                 document masking, tying, eps, z-loss
//   FuserConfig<F>::make(cfg)     a fuser from the config, its fuser_options resolved against its
//                                 declare_options; ::record(f, cfg) writes its options back. One path
//                                 for the built-in fusers and a user's (who may specialize it).
//   BlockConfig<B>::make(spec)    a block from a LayerSpec; ::record(b) its LayerSpec (B(LayerSpec) and
//                                 b.layer_spec() by default)
//   config_block<B>(cfg, l, opts) block l of the stack a config describes (a MixedBlock: the type
//                                 layer_blocks[l] names, with its own options; MixedConfig)
//   TypeList, BuiltinFusers<T>, BuiltinBlocks<T>, NamedTypes<List>::visit(name, kind, fn): the fusers and
//                                 blocks a program knows, and fn(TypeTag<X>{}) for the one a config names:
//                                 how a program that reads a config picks the type once (model/model.hpp
//                                 with_model; the `fbt` command and cli_main<Extra...> in fbt/cli.hpp).
// Describing a composed model as a config is in model/model.hpp (describe_model).
#pragma once

#include <cmath>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "../layers/block.hpp"
#include "../layers/concat_fuser.hpp"
#include "../layers/gated_add_fuser.hpp"
#include "../layers/glu_fuser.hpp"
#include "../layers/mixed_block.hpp"
#include "config.hpp"

namespace fbt {

/// Model-level choices that are not a layer's: what the builder reads from the config's knobs, or
/// what a program composing a model sets itself.
struct ModelOptions {
  FeedbackTap tap = FeedbackTap::final_norm();  ///< where the fed-back state is taken (spec 2)
  InputNorm input_norm = InputNorm::All;        ///< which layer-0 inputs N_in normalises
  GateNorm gate_norm = GateNorm::Separate;      ///< shared: the fuser's gate_norm is N_in (spec 10)
  double in_norm_gain = 1.0;                    ///< N_in's gain at init (knob in_norm_init)
  bool doc_masked = true;                       ///< attention and feedback stay inside a document
  bool tie_word_embeddings = true;              ///< the LM head is the embedding
  double rms_norm_eps = 1e-6;                   ///< the final norm and N_in
  double z_loss = 0.0;                          ///< z-loss coefficient
  int max_position_embeddings = 4096;           ///< the longest sequence a pass or a decoder may hold
};

inline ModelOptions model_options(const ModelConfig& c) {
  ModelOptions o;
  o.tap = parse_tap(c);
  o.input_norm = parse_input_norm(c);
  o.gate_norm = parse_gate_norm(c);
  o.in_norm_gain = parse_in_norm_init(c);
  o.doc_masked = parse_doc_attention(c);
  o.tie_word_embeddings = c.tie_word_embeddings;
  o.rms_norm_eps = c.rms_norm_eps;
  o.z_loss = c.z_loss;
  o.max_position_embeddings = c.max_position_embeddings;
  return o;
}

/// The sizes of block l of a config; o_proj and down_proj get the depth-scaled std / sqrt(2L).
inline LayerSpec layer_spec(const ModelConfig& c, int l) {
  LayerSpec s;
  s.hidden_size = c.hidden_size, s.num_attention_heads = c.layer_heads(l), s.num_key_value_heads = c.layer_kv_heads(l);
  s.head_dim = c.hs(), s.intermediate_size = c.layer_intermediate(l), s.qk_norm = c.qk_norm, s.rms_norm_eps = c.rms_norm_eps;
  s.rope_theta = c.rope_theta, s.max_position_embeddings = c.max_position_embeddings;
  s.init_std = c.initializer_range, s.out_std = c.initializer_range / std::sqrt(2.0 * c.num_hidden_layers);
  s.sandwich = parse_block_norm(c);
  s.sliding_window = c.layer_window(int(l));
  return s;
}

inline FuserArgs fuser_args(const ModelConfig& c) { return FuserArgs{c.hidden_size, c.rms_norm_eps, c.initializer_range, {}}; }

/// \brief The options of piece X (a fuser or a block) that `given` asks for, checked against X's declaration
/// (unknown key, type, range: an fbt::Error naming "<prefix>.<key>"), with the defaults filled in.
template <class X> OptionValues resolve_options(const Options& given, const char* prefix, const char* kind) {
  return OptionValues::resolve(declared_options<X>(), given, prefix, std::string(kind) + " \"" + X::name + "\"");
}

namespace detail {
template <class X, class = void> struct has_options_member : std::false_type {};
template <class X> struct has_options_member<X, std::void_t<decltype(Options(std::declval<const X&>().options()))>> : std::true_type {};
}  // namespace detail

/// \brief How a fuser type is made from a config and recorded back into one: the same path for the
/// built-in fusers and a user's. make: F(FuserArgs) with fuser_options (and a legacy glu_init /
/// gated_add_alpha, ModelConfig::fuser_options_given) resolved against F's declare_options. record: the
/// fuser's options() when it has that member (what a model composed from parts records), else nothing
/// (a model built from a config keeps the resolved options it was built with). A fuser may specialize it.
template <class F> struct FuserConfig {
  static F make(const ModelConfig& c) {
    FuserArgs a = fuser_args(c);
    a.options = resolve_options<F>(c.fuser_options_given(), "fuser_options", "fuser");
    return F(a);
  }
  static void record(const F& f, ModelConfig& c) {
    if constexpr (detail::has_options_member<F>::value) c.fuser_options = f.options();
  }
};

namespace detail {
template <class B, class = void> struct has_layer_spec : std::false_type {};
template <class B> struct has_layer_spec<B, std::void_t<decltype(LayerSpec(std::declval<const B&>().layer_spec()))>> : std::true_type {};
}  // namespace detail

/// How a block type is made from a LayerSpec (its options resolved in spec.options) and recorded back.
template <class B> struct BlockConfig {
  static B make(const LayerSpec& s) {
    static_assert(std::is_constructible<B, const LayerSpec&>::value,
                  "fbt: building a block from a config needs B(const fbt::LayerSpec&), or a specialization of fbt::BlockConfig<B>");
    return B(s);
  }
  static LayerSpec record(const B& b) {
    static_assert(detail::has_layer_spec<B>::value,
                  "fbt: recording a block in a config needs `fbt::LayerSpec layer_spec() const`, or a specialization of fbt::BlockConfig<B>");
    return b.layer_spec();
  }
};

/// \brief A block B built by hand with its options (checked against B::declare_options, defaults filled in).
template <class B> B make_block(LayerSpec s, const Options& given = {}) {
  s.options = resolve_options<B>(given, "block_options", "block");
  return BlockConfig<B>::make(s);
}

template <class X> struct TypeTag {
  using type = X;
};

namespace detail {
template <class... X> std::string type_names();
}

/// \brief How a layer of a mixed stack (layers/mixed_block.hpp) is made from a config: the type among Bs
/// that layer_blocks[l] names, from layer_spec(c, l), with that type's options: the keys "<type>.<key>" of
/// the stack's resolved block_options. A name none of Bs has is refused, naming the layer and the types.
template <class B> struct MixedConfig;
template <class T, class... Bs> struct MixedConfig<MixedBlock<T, Bs...>> {
  using Mixed = MixedBlock<T, Bs...>;
  static Mixed make(const ModelConfig& c, int l, const OptionValues& bo) {
    const std::string& want = c.layer_blocks.at(std::size_t(l));
    Mixed r;
    const bool found = ((want == Bs::name ? (r = Mixed(one<Bs>(c, l, bo)), true) : false) || ...);
    if (!found)
      throw Error("fbt::Model: layer_blocks[" + std::to_string(l) + "] is " + detail::config_quote(want) + ", but this mixed stack's block types are: " +
                  detail::type_names<Bs...>() + " (fbt::MixedBlock's list, or fbt::with_model's)");
    return r;
  }
  template <class X> static X one(const ModelConfig& c, int l, const OptionValues& bo) {
    LayerSpec s = layer_spec(c, l);
    const std::string scope = std::string(X::name) + ".";
    Options own;
    for (const auto& kv : bo.values())
      if (kv.first.compare(0, scope.size(), scope) == 0) own[kv.first.substr(scope.size())] = kv.second;
    s.options = resolve_options<X>(own, ("block_options." + std::string(X::name)).c_str(), "block");
    return BlockConfig<X>::make(s);
  }
};

/// \brief Block l of the stack config c describes, given B's resolved block_options: a B made from
/// layer_spec(c, l) (BlockConfig), or for a mixed stack the type layer_blocks[l] names (MixedConfig).
template <class B> B config_block(const ModelConfig& c, int l, const OptionValues& bo) {
  if constexpr (is_mixed_block<B>::value) {
    return MixedConfig<B>::make(c, l, bo);
  } else {
    LayerSpec s = layer_spec(c, l);
    s.options = bo;
    return BlockConfig<B>::make(s);
  }
}

/// A list of types (the fusers or blocks a program knows).
template <class... X> struct TypeList {};
template <class A, class B> struct Concat;
template <class... A, class... B> struct Concat<TypeList<A...>, TypeList<B...>> {
  using type = TypeList<A..., B...>;
};

/// The library's own fusers and blocks: what `fbt` knows; cli_main<Extra...> adds a program's.
template <class T> using BuiltinFusers = TypeList<NoFuser<T>, GluFuser<T>, GatedAddFuser<T>, ConcatFuser<T>>;
template <class T> using BuiltinBlocks = TypeList<DecoderBlock<T>>;

/// The mixed block over a list of block types (with_model's choice when a config sets layer_blocks).
template <class T, class List> struct MixedOf;
template <class T, class... X> struct MixedOf<T, TypeList<X...>> {
  using type = MixedBlock<T, X...>;
  static constexpr std::size_t size = sizeof...(X);
};

namespace detail {
template <class... X> std::string type_names() {
  std::string r;
  ((r += (r.empty() ? "" : ", ") + std::string(X::name)), ...);
  return r;
}
template <class... X> void check_unique_names(const char* kind) {
  const std::vector<std::string> n{std::string(X::name)...};
  for (std::size_t i = 0; i < n.size(); ++i)
    for (std::size_t j = i + 1; j < n.size(); ++j)
      FBT_ASSERT(n[i] != n[j], std::string("two ") + kind + " types are named \"" + n[i] + "\": give each its own static name");
}
template <class Fn, class X, class... Rest> decltype(auto) visit_named_impl(const std::string& name, Fn& fn, const std::string& all, const char* kind) {
  if (name == X::name) return fn(TypeTag<X>{});
  if constexpr (sizeof...(Rest) > 0) return visit_named_impl<Fn, Rest...>(name, fn, all, kind);
  else throw Error(std::string("unknown ") + kind + " " + config_quote(name) + " (this program knows: " + all + "; a " + kind +
                   " of your own goes into a command of your own, fbt::cli_main<Yours...> in fbt/cli.hpp, or into fbt::with_model's lists)");
}
}  // namespace detail

/// \brief fn(TypeTag<X>{}) for the type X of `List` whose static name is `name`; an unknown name is refused
/// with the list. kind ("fuser", "block") names what is looked up in the error.
template <class List> struct NamedTypes;
template <class... X> struct NamedTypes<TypeList<X...>> {
  template <class Fn> static decltype(auto) visit(const std::string& name, const char* kind, Fn&& fn) {
    static_assert(sizeof...(X) > 0, "fbt: an empty type list");
    detail::check_unique_names<X...>(kind);
    return detail::visit_named_impl<Fn, X...>(name, fn, detail::type_names<X...>(), kind);
  }
  static std::vector<std::string> names() { return {std::string(X::name)...}; }
};

}  // namespace fbt
