// fbt/model/model.hpp: the full-bandwidth transformer as a composition of layers (spec sections 1-2).
//
//   Model<T>: an Embedding, a stack of blocks (which may differ in sizes and types), the final norm, the LM
//   head (tied or lm_head.weight), and, for a full-bandwidth model, the layer-0 input (N_in and the fuser:
//   FusedInput, layers/fused_input.hpp, a member); plus the ModelOptions (where the fed-back state is tapped,
//   which inputs N_in sees, ...). The fuser and the blocks sit in their slots (AnyFuser<T>, AnyBlock<T>,
//   layers/any_piece.hpp), made by name from the registries (model/pieces.hpp), so Model<T> is one type.
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
#include "pieces.hpp"

namespace fbt {

namespace detail {
/// The contract checks of concrete pieces (layers/contract.hpp); a slot (AnyFuser, AnyBlock) checks the piece
/// it is given in its adapter (model/pieces.hpp).
template <class F, class B, class Be> constexpr bool check_slot() {
  if constexpr (!is_any_fuser<F>::value) static_assert(check_fuser<F, Be>(), "");
  if constexpr (!is_any_block<B>::value) static_assert(check_block<B, Be>(), "");
  return true;
}
}  // namespace detail

/// \brief The model. F and B are the types of its fuser and blocks: by default their slots, AnyFuser<T> and
/// AnyBlock<T> (layers/any_piece.hpp), so Model<T> is one type whatever pieces a config names (the registries
/// of model/pieces.hpp build them by name) and everything written over a model is compiled once for it. A
/// program may name concrete types (Model<T, GluFuser<T>, DecoderBlock<T>>) to compose a model whose pieces
/// it reads directly; the same code runs it.
template <class T, class F = AnyFuser<T>, class B = AnyBlock<T>> class Model {
 public:
  using Input = FusedInput<T, F>;
  using Scalar = T;
  using Fuser = F;
  using Block = B;
  /// Whether a model of this type can feed back at all (false only for a NoFuser model); feedback() says
  /// whether this one does.
  static constexpr bool may_feed_back = Input::may_feed_back;
  static constexpr bool erased = is_any_fuser<F>::value;
  static_assert(std::is_same<typename F::Scalar, T>::value, "fbt::Model: the fuser's Scalar must be the model's T");
  static_assert(std::is_same<typename B::Scalar, T>::value, "fbt::Model: the block's Scalar must be the model's T");
  static_assert(detail::check_slot<F, B, CpuBackend<T>>(), "");  // a concrete piece's contract (a slot's adapter checks its own)

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
  /// initialises its parameters from seed. With concrete F, B: cfg.fuser and cfg.block must be theirs.
  explicit Model(const ModelConfig& c, std::uint64_t seed = 0) : Model(checked(c), TypeTag<void>{}, seed) {}

  /// \brief Composes a model from its parts (a program's own blocks, fuser and options) and
  /// initialises its parameters from seed. cfg is then derived from the parts (describe_model). The blocks
  /// and the fuser may be of any types the slots take (Model<T>: any block and fuser types).
  Model(Embedding<T> e, std::vector<B> bl, F f, ModelOptions o, std::uint64_t seed = 0)
      : embed(std::move(e)), blocks(std::move(bl)), opts(o), input_(std::move(f)) {
    assemble(seed);
    cfg = describe_model(*this);
  }
  template <class Bx, class Fx, class = std::enable_if_t<!std::is_same<Bx, B>::value || !std::is_same<Fx, F>::value>>
  Model(Embedding<T> e, const std::vector<Bx>& bl, Fx f, ModelOptions o, std::uint64_t seed = 0)
      : Model(std::move(e), std::vector<B>(bl.begin(), bl.end()), F(std::move(f)), o, seed) {}

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
    r.fuser_options = fuser_options_of(c).values();
    r.glu_init = "default", r.gated_add_alpha = 0.1;
    r.block_options = block_options_of(c).values();
    return r;
  }

  /// Whether the model feeds the top state back (false for a baseline, fuser "none").
  bool feedback() const { return input_.feedback(); }
  /// Offset of the LM head's weight (V, D): the embedding when tied.
  std::size_t head_offset() const { return opts.tie_word_embeddings ? embed.w : lm_head; }
  /// The parameters as the CPU backend sees them (the store's own buffers).
  Weights<T> weights() { return host_weights(params); }
  Weights<T> weights() const { return host_weights(params); }

  /// The layer-0 input (N_in and the fuser, with its input_norm flags), as one layer.
  const Input& input() const { return input_; }
  /// The fuser (in its slot: AnyFuser<T>::get_if<F>() reads it as its own type).
  const F& fuser() const { return input_.fuser; }

 private:
  static const ModelConfig& checked(const ModelConfig& c) {
    c.validate();
    if constexpr (!is_any_fuser<F>::value) {
      if (c.fuser != F::name)
        throw Error("fbt::Model: the config's fuser is \"" + c.fuser + "\" but this model type's fuser is \"" + F::name +
                    "\" (use fbt::Model<T>, whose fuser is the one the config names, or set fuser to \"" + F::name + "\")");
    }
    if constexpr (!is_any_block<B>::value) {
      if (c.block != B::name)
        throw Error("fbt::Model: the config's block is \"" + c.block + "\" but this model type's block is \"" + B::name +
                    "\" (use fbt::Model<T>, whose blocks are the ones the config names, or set block to \"" + B::name + "\")");
    }
    return c;
  }
  /// The fuser's options the config asks for, checked against its declaration and completed.
  static OptionValues fuser_options_of(const ModelConfig& c) {
    if constexpr (is_any_fuser<F>::value) {
      const PieceInfo i = fuser_registry<T>().info(c.fuser);
      return OptionValues::resolve(i.options, c.fuser_options_given(), "fuser_options", "fuser \"" + i.name + "\"");
    } else if constexpr (may_feed_back) {
      return resolve_options<F>(c.fuser_options_given(), "fuser_options", "fuser");
    } else {
      return OptionValues{};
    }
  }
  /// The block options the config asks for, checked and completed (a mixed stack's: every type it uses).
  static OptionValues block_options_of(const ModelConfig& c) {
    if constexpr (is_any_block<B>::value) return detail::erased_block_options<T>(c);
    else return resolve_options<B>(c.block_options, "block_options", "block");
  }
  static F make_fuser(const ModelConfig& c) {
    if constexpr (is_any_fuser<F>::value) return fuser_registry<T>().make(c.fuser, c);
    else return FuserConfig<F>::make(c);
  }
  struct PlanTag {};
  Model(const ModelConfig& c, TypeTag<void>, std::uint64_t seed) : Model(c, PlanTag{}, false) { assemble(seed); }
  /// The parts a config describes; when planning, the store only records the layout (see plan()).
  Model(const ModelConfig& c, PlanTag, bool planning = true)
      : cfg(c), embed(c.vocab_size, c.hidden_size, c.initializer_range), opts(model_options(c)), input_(make_fuser(c)) {
    cfg = normalized(c);
    const OptionValues bo = block_options_of(c);
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
    input_.norm_plain = opts.input_norm == InputNorm::All;
    input_.norm_plain_when_fed = opts.input_norm != InputNorm::FusedOnly;
    input_.declare(model.scope("feedback"), D, opts.rms_norm_eps, opts.in_norm_gain, opts.gate_norm == GateNorm::Shared);
  }

  Input input_;  ///< model.feedback.*: N_in and the fuser (the layer-0 input)
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
  c.fuser = fuser_name(m.fuser());
  if constexpr (is_any_block<B>::value) {  // erased blocks: one type (its name, its options) or a mixed stack
    bool one_type = true;
    for (const auto& b : m.blocks) one_type = one_type && b.type_name() == m.blocks[0].type_name();
    c.block = one_type ? m.blocks[0].type_name() : "mixed";
    if (one_type) c.block_options = m.blocks[0].options();
    else
      for (const auto& b : m.blocks) {
        c.layer_blocks.push_back(b.type_name());
        for (const auto& kv : b.options()) {
          const std::string key = b.type_name() + "." + kv.first;
          const auto it = c.block_options.find(key);
          FBT_ASSERT(it == c.block_options.end() || it->second == kv.second,
                     "describe_model: two layers of one block type differ in option " + key + " (a mixed stack's options are per type)");
          c.block_options[key] = kv.second;
        }
      }
  } else {
    c.block = B::name;
    if constexpr (detail::has_options_member<B>::value) c.block_options = m.blocks[0].options();
  }
  const auto tap = describe_tap(m.opts.tap, c.num_hidden_layers);
  c.feedback_source = tap.first, c.feedback_layer = tap.second;
  c.input_norm = input_norm_name(m.opts.input_norm);
  c.gate_norm = gate_norm_name(m.opts.gate_norm);
  FBT_ASSERT(m.opts.in_norm_gain == 1.0 || m.opts.in_norm_gain == m.embed.init_std,
             "describe_model: N_in's initial gain is 1 or the embedding's init std (knob in_norm_init), not " + std::to_string(m.opts.in_norm_gain));
  c.in_norm_init = m.opts.in_norm_gain == 1.0 ? "one" : "embedding";
  c.block_norm = s0.sandwich ? "sandwich" : "pre";
  FuserConfig<typename M::Fuser>::record(m.fuser(), c);
  return c;
}

/// \brief fn(TypeTag<Model<T>>{}) once the fuser and the block types the config names are known to this
/// program (the registries, model/pieces.hpp; an unknown name is refused with the names it knows). Model<T>
/// holds any of them, so there is one model type: what a program that reads a config builds.
template <class T, class Fn> decltype(auto) with_model(const ModelConfig& c, Fn&& fn) {
  (void)fuser_registry<T>().info(c.fuser);
  if (c.layer_blocks.empty()) (void)block_registry<T>().info(c.block);
  else (void)detail::erased_block_options<T>(c);
  return fn(TypeTag<Model<T>>{});
}

}  // namespace fbt
