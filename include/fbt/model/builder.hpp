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
//   config_block<B>(cfg, l, opts) block l of the stack a config describes (ConfigBlock<B>; for the block
//                                 slot, the type `block` or layer_blocks[l] names: model/pieces.hpp)
// The fusers and blocks a program knows by name are in model/pieces.hpp (the registries).
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

/// \brief Block l of the stack config c describes, given B's resolved block_options: a B made from
/// layer_spec(c, l) (BlockConfig). The block slot AnyBlock<T> specializes it (model/pieces.hpp: the type the
/// config names for that layer, `block` or layer_blocks[l], from the registry).
template <class B> struct ConfigBlock {
  static B make(const ModelConfig& c, int l, const OptionValues& bo) {
    LayerSpec s = layer_spec(c, l);
    s.options = bo;
    return BlockConfig<B>::make(s);
  }
};
template <class B> B config_block(const ModelConfig& c, int l, const OptionValues& bo) { return ConfigBlock<B>::make(c, l, bo); }

}  // namespace fbt
