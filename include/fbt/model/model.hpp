// fbt/model/model.hpp: the full-bandwidth transformer as a composition of layers (spec sections 1-2).
//
//   Model<T, Fuser, Block>: an Embedding, a stack of Blocks (which may differ in sizes), the final norm,
//   the LM head (tied or lm_head.weight), and, for a full-bandwidth model, the layer-0 input (N_in and the
//   Fuser: FusedInput, layers/fused_input.hpp, the model's base); plus the ModelOptions (where the fed-back state is tapped, which inputs N_in sees, ...).
// The stack takes layer-0 input vectors X (N, D), not token ids:
//   baseline (NoFuser):      X = E[x]
//   full-bandwidth:          X_t = N_in(Fuse(s_{t-1}, e_t)) where fed back, N_in(e_t) where plain
//                            (input_norm fused_only: e_t where plain; feedback_passes: e_t in pass 1,
//                            N_in(e_t) on the plain rows of a fed-back pass, as the paper's App. C listing)
//   H = FinalNorm(Stack(X)),  logits = H E^T (tied) or H W_lm^T,  loss = mean CE
// A model is made from a ModelConfig (the builder, model/builder.hpp) or composed from parts by a
// program; either way it registers every tensor under its checkpoint name (Hugging Face Qwen3 names,
// model.feedback.* for the feedback tensors) in one ParamStore and keeps a ModelConfig describing
// itself for the checkpoint. Model::plan(cfg) lists the tensors a config implies without allocating
// them (what a loader checks a file against first). Layers own only offsets; activations live in a Workspace (model/pass.hpp)
// and run on a backend (backend/), so the same model trains and decodes on the CPU or a GPU.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "../backend/cpu.hpp"
#include "../layers/contract.hpp"
#include "../layers/embedding.hpp"
#include "../layers/fused_input.hpp"
#include "builder.hpp"

namespace fbt {

/// The model's layer-0 input (N_in and the fuser, layers/fused_input.hpp) is its base: m.in_norm and m.fuser
/// name its parts, m.input() the layer as a whole.
template <class T, class F = GluFuser<T>, class B = DecoderBlock<T>> class Model : public FusedInput<T, F> {
 public:
  using Input = FusedInput<T, F>;
  using Input::fuser;
  using Input::in_norm;
  using Scalar = T;
  using Fuser = F;
  using Block = B;
  static constexpr bool has_feedback = Input::has_feedback;
  static_assert(std::is_same<typename F::Scalar, T>::value, "fbt::Model: the fuser's Scalar must be the model's T");
  static_assert(std::is_same<typename B::Scalar, T>::value, "fbt::Model: the block's Scalar must be the model's T");
  static_assert(check_block<B, CpuBackend<T>>(), "");
  static_assert(check_fuser<F, CpuBackend<T>>(), "");

  ModelConfig cfg;          ///< what this model is, as a checkpoint records it
  ParamStore<T> params;     ///< every tensor, under its checkpoint name
  Embedding<T> embed;       ///< model.embed_tokens
  std::vector<B> blocks;    ///< model.layers.{i}
  RMSNorm<T> final_norm;    ///< model.norm
  ModelOptions opts;
  int D = 0, V = 0, L = 0;
  std::size_t lm_head = 0;  ///< offset of lm_head.weight (untied models)
  std::vector<int> windows; ///< (L) each block's sliding window (0: full attention), from its LayerSpec
  int window = 0;           ///< the stack's one sliding window W (0: none); every sliding block uses it

  /// \brief Builds the model a config describes (validated; strings read by the builder) and
  /// initialises its parameters from seed. cfg.fuser must be this type's fuser (Fuser::name).
  explicit Model(const ModelConfig& c, std::uint64_t seed = 0) : Model(checked(c), TypeTag<void>{}, seed) {}

  /// \brief Composes a model from its parts (a program's own blocks, fuser and options) and
  /// initialises its parameters from seed. cfg is then derived from the parts (describe_model).
  Model(Embedding<T> e, std::vector<B> bl, F f, ModelOptions o, std::uint64_t seed = 0)
      : Input(std::move(f)), embed(std::move(e)), blocks(std::move(bl)), opts(o) {
    assemble(seed);
    cfg = describe_model(*this);
  }

  /// \brief The tensors (names, shapes, offsets) and the constant tables a config implies for this model
  /// type, found by declaring the model into a store in planning mode: nothing of the parameters'
  /// or the tables' size is allocated. What load_model compares with a file before it builds the model.
  /// Validates the config and its fuser as the constructor does.
  static ParamLayout plan(const ModelConfig& c) {
    Model m(checked(c), PlanTag{});
    return m.params.layout();
  }

  /// \brief The config as a model of this type records it: head_dim resolved, the fuser's and the block's
  /// options resolved (every declared one, defaults filled in) and the legacy glu_init / gated_add_alpha
  /// folded into fuser_options. Two configs that build the same model normalise to the same config.
  static ModelConfig normalized(const ModelConfig& c) {
    ModelConfig r = c;
    r.head_dim = c.hs();
    if constexpr (has_feedback) r.fuser_options = resolve_options<F>(c.fuser_options_given(), "fuser_options", "fuser").values();
    r.glu_init = "default", r.gated_add_alpha = 0.1;
    r.block_options = resolve_options<B>(c.block_options, "block_options", "block").values();
    return r;
  }

  bool feedback() const { return has_feedback; }
  /// Offset of the LM head's weight (V, D): the embedding when tied.
  std::size_t head_offset() const { return opts.tie_word_embeddings ? embed.w : lm_head; }
  /// The parameters as the CPU backend sees them (the store's own buffers).
  Weights<T> weights() { return host_weights(params); }
  Weights<T> weights() const { return host_weights(params); }

  /// The layer-0 input (N_in and the fuser, with its input_norm flags), as one layer.
  const Input& input() const { return *this; }

 private:
  static const ModelConfig& checked(const ModelConfig& c) {
    c.validate();
    if (c.fuser != F::name)
      throw Error("fbt::Model: the config's fuser is \"" + c.fuser + "\" but this model type's fuser is \"" + F::name +
                  "\" (choose the type with fbt::with_model, or set fuser to \"" + F::name + "\")");
    if (c.block != B::name)
      throw Error("fbt::Model: the config's block is \"" + c.block + "\" but this model type's block is \"" + B::name +
                  "\" (choose the type with fbt::with_model, or set block to \"" + B::name + "\")");
    return c;
  }
  struct PlanTag {};
  Model(const ModelConfig& c, TypeTag<void>, std::uint64_t seed) : Model(c, PlanTag{}, false) { assemble(seed); }
  /// The parts a config describes; when planning, the store only records the layout (see plan()).
  Model(const ModelConfig& c, PlanTag, bool planning = true)
      : Input(FuserConfig<F>::make(c)), cfg(c), embed(c.vocab_size, c.hidden_size, c.initializer_range), opts(model_options(c)) {
    cfg = normalized(c);
    const OptionValues bo = resolve_options<B>(c.block_options, "block_options", "block");
    blocks.reserve(std::size_t(c.num_hidden_layers));
    for (int l = 0; l < c.num_hidden_layers; ++l) blocks.push_back(config_block<B>(c, l, bo));
    if (planning) {
      params.plan_only();
      declare_all();
    }
  }
  /// Declares every tensor, then allocates the values and initialises them.
  void assemble(std::uint64_t seed) {
    declare_all();
    params.finalize();
    params.init(seed);
  }
  /// Declares every tensor in checkpoint order (embedding, layers, final norm, head, feedback).
  void declare_all() {
    D = embed.D, V = embed.V, L = int(blocks.size());
    FBT_ASSERT(L >= 1, "fbt::Model: the stack needs at least one block");
    FBT_ASSERT(opts.tap.is_final_norm() || opts.tap.layer < L,
               "fbt::Model: the feedback tap is block " + std::to_string(opts.tap.layer) + " of a " + std::to_string(L) + "-block stack");
    windows.assign(std::size_t(L), 0), window = 0;
    for (int l = 0; l < L; ++l) {
      const int W = BlockConfig<B>::record(blocks[l]).sliding_window;
      FBT_ASSERT(W >= 0 && (W == 0 || window == 0 || W == window), "fbt::Model: block " + std::to_string(l) + " has sliding window " + std::to_string(W) +
                                                                       " but an earlier block has " + std::to_string(window) +
                                                                       " (one sliding_window per model, as Hugging Face's config)");
      windows[l] = W;
      if (W > 0) window = W;
    }
    const ParamRegistry<T> root(params), model = root.scope("model");
    embed.declare(model.scope("embed_tokens"));
    for (int l = 0; l < L; ++l) blocks[l].declare(model.scope("layers").scope(std::to_string(l)));
    final_norm = RMSNorm<T>(D, opts.rms_norm_eps);
    final_norm.declare(model.scope("norm"));
    if (!opts.tie_word_embeddings) lm_head = root.add("lm_head.weight", {V, D}, Init::Normal, embed.init_std);
    Input::norm_plain = opts.input_norm == InputNorm::All;
    Input::norm_plain_when_fed = opts.input_norm != InputNorm::FusedOnly;
    Input::declare(model.scope("feedback"), D, opts.rms_norm_eps, opts.in_norm_gain, opts.gate_norm == GateNorm::Shared);
  }
};

/// \brief The config that describes a model built from parts: sizes from its layers (per-layer lists
/// when the blocks differ), its options' knobs, its fuser's name and options.
template <class M> ModelConfig describe_model(const M& m) {
  using B = typename M::Block;
  ModelConfig c;
  const LayerSpec s0 = BlockConfig<B>::record(m.blocks[0]);
  c.vocab_size = m.embed.V, c.hidden_size = m.embed.D, c.num_hidden_layers = int(m.blocks.size());
  c.num_attention_heads = s0.num_attention_heads, c.num_key_value_heads = s0.num_key_value_heads, c.head_dim = s0.head_dim;
  c.intermediate_size = s0.intermediate_size, c.qk_norm = s0.qk_norm, c.rope_theta = s0.rope_theta;
  c.max_position_embeddings = m.opts.max_position_embeddings, c.rms_norm_eps = m.opts.rms_norm_eps;
  c.tie_word_embeddings = m.opts.tie_word_embeddings, c.initializer_range = m.embed.init_std, c.z_loss = m.opts.z_loss;
  c.doc_attention = m.opts.doc_masked ? "masked" : "causal";
  bool uniform = true;
  for (const auto& b : m.blocks) {
    const LayerSpec s = BlockConfig<B>::record(b);
    FBT_ASSERT(s.hidden_size == c.hidden_size, "describe_model: a block's width differs from the embedding's");
    FBT_ASSERT(s.head_dim == s0.head_dim && s.qk_norm == s0.qk_norm && s.rope_theta == s0.rope_theta && s.rms_norm_eps == c.rms_norm_eps &&
                   s.sandwich == s0.sandwich,
               "describe_model: blocks may differ in heads and MLP width only (head_dim, qk_norm, rope_theta, eps and block_norm are per model)");
    FBT_ASSERT(s.max_position_embeddings >= c.max_position_embeddings, "describe_model: a block's RoPE table is shorter than the model's positions");
    uniform = uniform && s.num_attention_heads == s0.num_attention_heads && s.num_key_value_heads == s0.num_key_value_heads &&
              s.intermediate_size == s0.intermediate_size;
  }
  if (!uniform)
    for (const auto& b : m.blocks) {
      const LayerSpec s = BlockConfig<B>::record(b);
      c.layer_intermediate_size.push_back(s.intermediate_size);
      c.layer_num_attention_heads.push_back(s.num_attention_heads);
      c.layer_num_key_value_heads.push_back(s.num_key_value_heads);
    }
  c.sliding_window = m.window;
  if (m.window > 0)
    for (int w : m.windows) c.layer_types.push_back(w > 0 ? "sliding_attention" : "full_attention");
  c.fuser = M::Fuser::name;
  c.block = B::name;
  if constexpr (is_mixed_block<B>::value) {  // a mixed stack: each layer's type, and each type's options (scoped "<type>.<key>")
    for (const auto& b : m.blocks) {
      c.layer_blocks.push_back(b.type_name());
      for (const auto& kv : b.options()) {
        const auto it = c.block_options.find(kv.first);
        FBT_ASSERT(it == c.block_options.end() || it->second == kv.second,
                   "describe_model: two layers of one block type differ in option " + kv.first + " (a mixed stack's options are per type)");
        c.block_options[kv.first] = kv.second;
      }
    }
  } else if constexpr (detail::has_options_member<B>::value) {
    c.block_options = m.blocks[0].options();
  }
  const auto tap = describe_tap(m.opts.tap, c.num_hidden_layers);
  c.feedback_source = tap.first, c.feedback_layer = tap.second;
  c.input_norm = input_norm_name(m.opts.input_norm);
  c.gate_norm = gate_norm_name(m.opts.gate_norm);
  FBT_ASSERT(m.opts.in_norm_gain == 1.0 || m.opts.in_norm_gain == m.embed.init_std,
             "describe_model: N_in's initial gain is 1 or the embedding's init std (knob in_norm_init), not " + std::to_string(m.opts.in_norm_gain));
  c.in_norm_init = m.opts.in_norm_gain == 1.0 ? "one" : "embedding";
  c.block_norm = s0.sandwich ? "sandwich" : "pre";
  FuserConfig<typename M::Fuser>::record(m.fuser, c);
  return c;
}

/// \brief fn(TypeTag<Model<T, F, B>>{}) with F the fuser and B the block the config names, looked up in
/// the lists Fusers and Blocks (TypeList, model/builder.hpp; by default the library's own): the one
/// run-time choice of a model type, for programs that read a config (the `fbt` command, cli_main<Extra...>).
/// A config with layer_blocks (a mixed stack) gets B = MixedBlock over the Blocks list, when it holds more
/// than one type. An unknown name is refused with the names the lists hold.
template <class T, class Fusers = BuiltinFusers<T>, class Blocks = BuiltinBlocks<T>, class Fn> decltype(auto) with_model(const ModelConfig& c, Fn&& fn) {
  if (!c.layer_blocks.empty()) {
    if constexpr (MixedOf<T, Blocks>::size >= 2) {
      return NamedTypes<Fusers>::visit(c.fuser, "fuser", [&](auto ft) -> decltype(auto) {
        return fn(TypeTag<Model<T, typename decltype(ft)::type, typename MixedOf<T, Blocks>::type>>{});
      });
    } else {
      throw Error("layer_blocks: a mixed stack needs a program that knows more than one block type (this one knows: " +
                  detail::config_quote(c.block == "mixed" ? std::string(NamedTypes<Blocks>::names().front()) : c.block) +
                  "); add yours with fbt::cli_main<Yours...> (fbt/cli.hpp) or in fbt::with_model's block list");
    }
  }
  return NamedTypes<Fusers>::visit(c.fuser, "fuser", [&](auto ft) -> decltype(auto) {
    return NamedTypes<Blocks>::visit(c.block, "block", [&](auto bt) -> decltype(auto) {
      return fn(TypeTag<Model<T, typename decltype(ft)::type, typename decltype(bt)::type>>{});
    });
  });
}

}  // namespace fbt
