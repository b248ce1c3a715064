// fbt/model/builder.hpp: ModelConfig <-> the typed model's parts: the one place that maps a config
// (from the CLI, a JSON file or a checkpoint) to layers, a fuser and the model's options, and back.
//
//   layer_spec(cfg, l)            the sizes of block l (heterogeneous stacks: the per-layer lists)
//   model_options(cfg)            the tap, the input norm (which inputs, its gain, shared as the gate norm),
//                                 document masking, tying, eps, z-loss
//   FuserConfig<F>::make(cfg)     a fuser from the config; ::record(f, cfg) writes its options back.
//                                 The primary template builds F(FuserArgs) and records nothing; the
//                                 built-ins with options (glu_init, gated_add_alpha) specialize it, and
//                                 so may a user's fuser, from the user's own file.
//   BlockConfig<B>::make(spec)    a block from a LayerSpec; ::record(b) its LayerSpec (B(LayerSpec) and
//                                 b.layer_spec() by default)
//   visit_builtin_fuser<T>(name, fn)   calls fn(TypeTag<F>{}) for the built-in fuser called `name`: how a
//                                 program that reads a config (the `fbt` command) picks the type once.
// Describing a composed model as a config is in model/model.hpp (describe_model).
#pragma once

#include <cmath>
#include <string>
#include <type_traits>
#include <utility>

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
  return s;
}

inline FuserArgs fuser_args(const ModelConfig& c) { return FuserArgs{c.hidden_size, c.rms_norm_eps, c.initializer_range}; }

/// How a fuser type is made from a config and recorded back into one (see the file comment).
template <class F> struct FuserConfig {
  static F make(const ModelConfig& c) { return F(fuser_args(c)); }
  static void record(const F&, ModelConfig&) {}
};
template <class T> struct FuserConfig<GluFuser<T>> {
  static GluFuser<T> make(const ModelConfig& c) { return GluFuser<T>(fuser_args(c), parse_glu_init(c)); }
  static void record(const GluFuser<T>& f, ModelConfig& c) { c.glu_init = glu_init_name(f.init); }
};
template <class T> struct FuserConfig<GatedAddFuser<T>> {
  static GatedAddFuser<T> make(const ModelConfig& c) { return GatedAddFuser<T>(fuser_args(c), c.gated_add_alpha); }
  static void record(const GatedAddFuser<T>& f, ModelConfig& c) { c.gated_add_alpha = f.alpha_value; }
};

namespace detail {
template <class B, class = void> struct has_layer_spec : std::false_type {};
template <class B> struct has_layer_spec<B, std::void_t<decltype(LayerSpec(std::declval<const B&>().layer_spec()))>> : std::true_type {};
}  // namespace detail

/// How a block type is made from a LayerSpec and recorded back.
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

template <class X> struct TypeTag {
  using type = X;
};

/// \brief fn(TypeTag<F>{}) for the built-in fuser named `name` (none, glu, gated_add, concat); an unknown
/// name is refused with the list. The only run-time choice of a fuser type, made once by a program.
template <class T, class Fn> decltype(auto) visit_builtin_fuser(const std::string& name, Fn&& fn) {
  if (name == NoFuser<T>::name) return fn(TypeTag<NoFuser<T>>{});
  if (name == GluFuser<T>::name) return fn(TypeTag<GluFuser<T>>{});
  if (name == GatedAddFuser<T>::name) return fn(TypeTag<GatedAddFuser<T>>{});
  if (name == ConcatFuser<T>::name) return fn(TypeTag<ConcatFuser<T>>{});
  throw Error("unknown fuser \"" + name + "\" (the built-in ones are none, glu, gated_add, concat; a fuser of your own is used through "
              "the library, e.g. fbt::Model<float, MyFuser<float>>)");
}

}  // namespace fbt
