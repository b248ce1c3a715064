// fbt/model/config.hpp: the model configuration (Hugging Face Qwen3 field names + the feedback knobs),
// and the one place where its string knobs are read.
//
// Field names follow the Qwen3 config researchers already read (spec section 9); the feedback knobs are
// the spec's (section 2). A config is what the CLI, a JSON file and a checkpoint's metadata hold; the
// builder (model/builder.hpp) turns it into a typed model, and the knob readers below (parse_tap,
// parse_input_norm, parse_gate_norm, parse_in_norm_init, parse_block_norm, parse_doc_attention)
// are the only code that compares its strings.
// Heterogeneous stacks: the per-layer lists (layer_*) override the uniform sizes when not empty.
// validate() refuses a bad config with an fbt::Error that names the field and the rule it breaks:
// every size is bounded (ModelLimits, written down in docs/file-formats.md), so is the parameter count
// and the RoPE table, and every real must be finite and in range, so that a config from a file can
// never ask for an allocation, an integer product or a forward that fbt cannot represent.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "../config.hpp"
#include "../core/options.hpp"
#include "../detail/input.hpp"

namespace fbt {

/// Where the fed-back state is taken (spec 2, knob feedback_source): the final norm's output, or the
/// output of block `layer` (the last block's output is the "pre_final_norm" residual).
struct FeedbackTap {
  int layer = -1;  ///< -1: the final norm; else the block whose output is fed back (0-based)
  static FeedbackTap final_norm() { return FeedbackTap{-1}; }
  static FeedbackTap layer_output(int l) { return FeedbackTap{l}; }
  bool is_final_norm() const { return layer < 0; }
};

/// Which layer-0 inputs of a full-bandwidth model go through N_in (knob input_norm).
enum class InputNorm {
  All,             ///< "all": plain and fused inputs, in every pass
  FusedOnly,       ///< "fused_only": fused inputs only; plain inputs are the raw embeddings
  FeedbackPasses,  ///< "feedback_passes": every input of a fed-back pass, none of pass 1 (the paper's App. C listing)
};

/// The model-level norm choices of the paper's recipe (spec section 10), one knob each.
enum class GateNorm {
  Separate,  ///< "separate": the fuser normalises e with its own gain (gate_norm.weight)
  Shared,    ///< "shared": the fuser's gate-side norm is N_in itself (the paper's one input_rmsnorm_1)
};

struct ModelConfig {
  // --- base decoder (spec section 1) ---
  int vocab_size = 257;               ///< byte vocabulary + document separator
  int hidden_size = 128;              ///< D
  int num_hidden_layers = 4;          ///< L
  int num_attention_heads = 4;        ///< NH
  int num_key_value_heads = 4;        ///< NKV, divides NH
  int head_dim = 0;                   ///< hs; 0 = hidden_size / num_attention_heads
  int intermediate_size = 384;        ///< SwiGLU hidden size F
  int max_position_embeddings = 4096; ///< size of the RoPE table
  double rope_theta = 10000.0;
  double rms_norm_eps = 1e-6;         ///< one eps for every norm
  bool tie_word_embeddings = true;
  bool qk_norm = true;                ///< Qwen3 per-head RMSNorm on q and k
  double initializer_range = 0.02;    ///< std of the normal init
  double z_loss = 0.0;                ///< z-loss coefficient (0 = off)
  std::string doc_attention = "masked";  ///< "masked": attention stays inside a document; "causal": crosses
  // --- heterogeneous stacks: per-layer sizes (empty = the uniform value for every layer) ---
  std::vector<int> layer_intermediate_size;    ///< (L) SwiGLU hidden size of each block
  std::vector<int> layer_num_attention_heads;  ///< (L) query heads of each block
  std::vector<int> layer_num_key_value_heads;  ///< (L) key/value heads of each block
  // --- sliding-window attention (Hugging Face Qwen3's layer_types; spec section 9) ---
  int sliding_window = 0;                 ///< W: a sliding_attention layer's query sees its last W positions (0 = none)
  std::vector<std::string> layer_types;   ///< (L) full_attention | sliding_attention; empty = every layer full_attention
  // --- latent feedback (spec section 2) ---
  std::string fuser = "glu";          ///< none | glu | gated_add | concat | a user fuser's name
  Options fuser_options;              ///< the fuser's own options (core/options.hpp), e.g. {"rank": 8}; checked against its declaration
  std::string block = "decoder";      ///< the block type: decoder (the built-in pre-norm block) | a user block's name
  Options block_options;              ///< the block type's own options (as fuser_options); a mixed stack's as "<type>.<key>"
  std::vector<std::string> layer_blocks;  ///< (L) a mixed stack (block "mixed"): each layer's block type; empty = `block` everywhere
  std::string feedback_source = "post_final_norm";  ///< post_final_norm | pre_final_norm | layer
  int feedback_layer = -1;            ///< feedback_source "layer": the block whose output is fed back (0-based)
  std::string input_norm = "all";     ///< all | fused_only | feedback_passes
  std::string gate_norm = "separate"; ///< separate | shared (the fuser's gate_norm is N_in)
  std::string in_norm_init = "one";   ///< N_in's gain at init: one | embedding (= initializer_range, the embeddings' rms)
  std::string block_norm = "pre";     ///< pre | sandwich (an RMSNorm also on each attention and MLP output, before the add)
  // legacy spellings of two built-in fusers' options (configs and checkpoints from before fuser_options):
  // glu_init is fuser_options.init of glu, gated_add_alpha fuser_options.alpha of gated_add. A value other
  // than the default here is folded into fuser_options when the fuser is built (fuser_options_given()).
  std::string glu_init = "default";   ///< default (W_U = I, W_G ~ N(0, 1e-6/D)) | fan_in | identity_both
  double gated_add_alpha = 0.1;       ///< alpha of the gated_add fuser (a config scalar, not a tensor)

  int hs() const { return head_dim > 0 ? head_dim : hidden_size / num_attention_heads; }
  bool feedback() const { return fuser != "none"; }
  bool uniform() const { return layer_intermediate_size.empty() && layer_num_attention_heads.empty() && layer_num_key_value_heads.empty(); }
  int layer_intermediate(int l) const { return layer_intermediate_size.empty() ? intermediate_size : layer_intermediate_size[l]; }
  int layer_heads(int l) const { return layer_num_attention_heads.empty() ? num_attention_heads : layer_num_attention_heads[l]; }
  int layer_kv_heads(int l) const { return layer_num_key_value_heads.empty() ? num_key_value_heads : layer_num_key_value_heads[l]; }
  /// The attention window of layer l: sliding_window on a sliding_attention layer, else 0 (full attention).
  int layer_window(int l) const { return !layer_types.empty() && layer_types[std::size_t(l)] == "sliding_attention" ? sliding_window : 0; }

  /// \brief The number of parameters the built-in layers declare for this config: embedding, blocks,
  /// final norm, lm_head when untied, and N_in plus the fuser's tensors for the built-in fusers (a
  /// user fuser's own tensors are not counted). Exact for every built-in model type; no overflow for a
  /// config within ModelLimits' per-field bounds (validate() checks those first).
  inline std::uint64_t parameter_count() const;

  /// Throws fbt::Error naming the field and the broken rule.
  inline void validate() const;

  /// \brief The fuser's options as given: fuser_options, plus a legacy field (glu_init, gated_add_alpha)
  /// that differs from its default, for the built-in fuser it belongs to. Both given and different: refused.
  inline Options fuser_options_given() const;
};

/// \brief The bounds ModelConfig::validate() enforces (docs/file-formats.md, "Model config"): far above
/// any model fbt can train, low enough that no size product overflows and no file can ask for an
/// allocation that fails before its tensors are checked.
struct ModelLimits {
  static constexpr std::int64_t max_vocab_size = std::int64_t(1) << 24;           ///< 16,777,216
  static constexpr std::int64_t max_hidden_size = std::int64_t(1) << 16;          ///< 65,536
  static constexpr std::int64_t max_hidden_layers = 4096;
  static constexpr std::int64_t max_heads = 4096;                                 ///< query or key/value heads of a layer
  static constexpr std::int64_t max_head_dim = 4096;
  static constexpr std::int64_t max_intermediate_size = std::int64_t(1) << 20;    ///< 1,048,576
  static constexpr std::int64_t max_position_embeddings = std::int64_t(1) << 24;  ///< 16,777,216
  static constexpr std::uint64_t max_rope_table = std::uint64_t(1) << 28;         ///< max_position_embeddings x head_dim elements
  static constexpr std::uint64_t max_parameters = std::uint64_t(1) << 36;         ///< 68,719,476,736 (parameter_count())
};

namespace detail {
[[noreturn]] inline void config_fail(const std::string& field, const std::string& rule) {
  throw Error("invalid model config: " + field + ": " + rule);
}
/// A string value as a config error quotes it: detail::excerpt's rule (at most 64 characters, printable
/// UTF-8 kept, every other byte as \xNN), in double quotes.
inline std::string config_quote(const std::string& v) { return "\"" + excerpt(v) + "\""; }
/// A real as a config error shows it: shortest round-trip form, "inf", "nan".
inline std::string config_num(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  std::ostringstream o;
  o.precision(17);
  o << v;
  return o.str();
}
inline void config_one_of(const char* f, const std::string& v, std::initializer_list<const char*> ok) {
  std::string list;
  for (auto o : ok) {
    if (v == o) return;
    list += std::string(list.empty() ? "" : ", ") + o;
  }
  config_fail(f, "unknown value " + config_quote(v) + " (expected one of: " + list + ")");
}
}  // namespace detail

// ---- the knob readers: the only code that compares the config's strings ---------------------------

/// feedback_source (+ feedback_layer) -> the tap.
inline FeedbackTap parse_tap(const ModelConfig& c) {
  detail::config_one_of("feedback_source", c.feedback_source, {"post_final_norm", "pre_final_norm", "layer"});
  if (c.feedback_source == "post_final_norm") return FeedbackTap::final_norm();
  if (c.feedback_source == "pre_final_norm") return FeedbackTap::layer_output(c.num_hidden_layers - 1);
  if (c.feedback_layer < 0 || c.feedback_layer >= c.num_hidden_layers)
    detail::config_fail("feedback_layer", "feedback_source \"layer\" needs a block index in [0, " + std::to_string(c.num_hidden_layers) + "), got " +
                                              std::to_string(c.feedback_layer));
  return FeedbackTap::layer_output(c.feedback_layer);
}
/// The config's description of a tap: (feedback_source, feedback_layer).
inline std::pair<std::string, int> describe_tap(const FeedbackTap& t, int L) {
  if (t.is_final_norm()) return {"post_final_norm", -1};
  if (t.layer == L - 1) return {"pre_final_norm", -1};
  return {"layer", t.layer};
}
inline InputNorm parse_input_norm(const ModelConfig& c) {
  detail::config_one_of("input_norm", c.input_norm, {"all", "fused_only", "feedback_passes"});
  return c.input_norm == "all" ? InputNorm::All : c.input_norm == "fused_only" ? InputNorm::FusedOnly : InputNorm::FeedbackPasses;
}
inline const char* input_norm_name(InputNorm n) {
  return n == InputNorm::All ? "all" : n == InputNorm::FusedOnly ? "fused_only" : "feedback_passes";
}
inline GateNorm parse_gate_norm(const ModelConfig& c) {
  detail::config_one_of("gate_norm", c.gate_norm, {"separate", "shared"});
  return c.gate_norm == "shared" ? GateNorm::Shared : GateNorm::Separate;
}
inline const char* gate_norm_name(GateNorm g) { return g == GateNorm::Shared ? "shared" : "separate"; }
/// in_norm_init -> N_in's initial gain: 1, or initializer_range (so N_in's outputs start at the raw embeddings' rms).
inline double parse_in_norm_init(const ModelConfig& c) {
  detail::config_one_of("in_norm_init", c.in_norm_init, {"one", "embedding"});
  return c.in_norm_init == "one" ? 1.0 : c.initializer_range;
}
/// block_norm -> sandwich (true) or pre-norm.
inline bool parse_block_norm(const ModelConfig& c) {
  detail::config_one_of("block_norm", c.block_norm, {"pre", "sandwich"});
  return c.block_norm == "sandwich";
}
/// doc_attention -> masked (true) or causal.
inline bool parse_doc_attention(const ModelConfig& c) {
  detail::config_one_of("doc_attention", c.doc_attention, {"masked", "causal"});
  return c.doc_attention == "masked";
}

inline Options ModelConfig::fuser_options_given() const {
  Options o = fuser_options;
  auto fold = [&](const char* legacy, const char* key, const OptionValue& v, bool is_default) {
    if (is_default) return;
    auto it = o.find(key);
    if (it == o.end()) o[key] = v;
    else if (it->second.kind != OptionValue::Text && it->second != v)
      throw Error(std::string("invalid model config: ") + legacy + ": " + v.str() + " differs from fuser_options." + key + " (" + it->second.str() +
                  "); " + legacy + " is the legacy spelling of fuser_options." + key + ": give one of them");
  };
  if (fuser == "glu") fold("glu_init", "init", OptionValue::of_string(glu_init), glu_init == "default");
  if (fuser == "gated_add") fold("gated_add_alpha", "alpha", OptionValue::of_real(gated_add_alpha), gated_add_alpha == 0.1);
  return o;
}

inline std::uint64_t ModelConfig::parameter_count() const {
  using U = std::uint64_t;
  const U V = U(vocab_size), D = U(hidden_size), hd = U(hs());
  U n = V * D + D + (tie_word_embeddings ? 0 : V * D);  // embedding, final norm, lm_head
  for (int l = 0; l < num_hidden_layers; ++l) {
    const U nh = U(layer_heads(l)), nkv = U(layer_kv_heads(l)), f = U(layer_intermediate(l));
    n += 2 * nh * hd * D + 2 * nkv * hd * D + (qk_norm ? 2 * hd : 0) + 2 * D + 3 * f * D;  // q, o, k, v, q/k norms, 2 norms, MLP
    if (block_norm == "sandwich") n += 2 * D;  // the attention and MLP output norms
  }
  const U gate = gate_norm == "shared" ? 0 : D;  // a shared gate norm is N_in's gain
  if (fuser == "glu") n += D + 2 * D * D + gate;              // in_norm, w_u, w_g, gate_norm
  else if (fuser == "gated_add") n += D + 3 * D * D + 2 * D + gate;  // in_norm, w_g (D, 2D), w_g.bias, w_s, gate_norm, state_norm
  else if (fuser == "concat") n += D + 2 * D * D + D + gate;  // in_norm, w_c (D, 2D), gate_norm, state_norm
  else if (fuser != "none") n += D;                           // in_norm (a user fuser's own tensors are not counted)
  return n;
}

inline void ModelConfig::validate() const {
  using detail::config_fail;
  using L = ModelLimits;
  // Every size: > 0 and within its bound (so that no product below overflows).
  auto bounded = [&](const std::string& f, long long v, std::int64_t max) {
    if (v <= 0) config_fail(f, "must be > 0, got " + std::to_string(v));
    if (v > max) config_fail(f, "must be <= " + std::to_string(max) + " (fbt's limit, docs/file-formats.md), got " + std::to_string(v));
  };
  bounded("vocab_size", vocab_size, L::max_vocab_size);
  bounded("hidden_size", hidden_size, L::max_hidden_size);
  bounded("num_hidden_layers", num_hidden_layers, L::max_hidden_layers);
  bounded("num_attention_heads", num_attention_heads, L::max_heads);
  bounded("num_key_value_heads", num_key_value_heads, L::max_heads);
  bounded("intermediate_size", intermediate_size, L::max_intermediate_size);
  bounded("max_position_embeddings", max_position_embeddings, L::max_position_embeddings);
  if (head_dim < 0) config_fail("head_dim", "must be >= 0 (0 means hidden_size / num_attention_heads), got " + std::to_string(head_dim));
  if (head_dim > L::max_head_dim)
    config_fail("head_dim", "must be <= " + std::to_string(L::max_head_dim) + " (fbt's limit, docs/file-formats.md), got " + std::to_string(head_dim));
  if (head_dim == 0 && hidden_size % num_attention_heads != 0)
    config_fail("num_attention_heads", "must divide hidden_size (" + std::to_string(hidden_size) + "), got " + std::to_string(num_attention_heads));
  if (hs() % 2 != 0) config_fail("head_dim", "must be even for RoPE's rotate-half, got " + std::to_string(hs()));
  auto per_layer = [&](const char* f, const std::vector<int>& v, std::int64_t max) {
    if (!v.empty() && v.size() != std::size_t(num_hidden_layers))
      config_fail(f, "has " + std::to_string(v.size()) + " entries, expected one per layer (" + std::to_string(num_hidden_layers) + ") or none");
    for (std::size_t l = 0; l < v.size(); ++l) bounded(std::string(f) + "[" + std::to_string(l) + "]", v[l], max);
  };
  per_layer("layer_intermediate_size", layer_intermediate_size, L::max_intermediate_size);
  per_layer("layer_num_attention_heads", layer_num_attention_heads, L::max_heads);
  per_layer("layer_num_key_value_heads", layer_num_key_value_heads, L::max_heads);
  for (int l = 0; l < num_hidden_layers; ++l)
    if (layer_heads(l) % layer_kv_heads(l) != 0)
      config_fail(layer_num_key_value_heads.empty() ? std::string("num_key_value_heads") : "layer_num_key_value_heads[" + std::to_string(l) + "]",
                  "must divide " + (layer_num_attention_heads.empty() ? std::string("num_attention_heads") : "layer " + std::to_string(l) + "'s query heads") +
                      " (" + std::to_string(layer_heads(l)) + "), got " + std::to_string(layer_kv_heads(l)));
  if (sliding_window < 0 || sliding_window > L::max_position_embeddings)
    config_fail("sliding_window", "must be in [0, " + std::to_string(L::max_position_embeddings) + "] (0: no sliding window), got " +
                                      std::to_string(sliding_window));
  if (!layer_types.empty() && layer_types.size() != std::size_t(num_hidden_layers))
    config_fail("layer_types", "has " + std::to_string(layer_types.size()) + " entries, expected one per layer (" + std::to_string(num_hidden_layers) +
                                   ") or none");
  for (std::size_t l = 0; l < layer_types.size(); ++l) {
    const std::string f = "layer_types[" + std::to_string(l) + "]";
    detail::config_one_of(f.c_str(), layer_types[l], {"full_attention", "sliding_attention"});
    if (layer_types[l] == "sliding_attention" && sliding_window == 0)
      config_fail(f, "is \"sliding_attention\" but sliding_window is 0 (give the window, e.g. sliding_window 1024)");
  }
  if (sliding_window > 0 && std::find(layer_types.begin(), layer_types.end(), "sliding_attention") == layer_types.end())
    config_fail("sliding_window", "is " + std::to_string(sliding_window) + " but no layer is sliding_attention (layer_types " +
                                      (layer_types.empty() ? std::string("not given") : "all full_attention") +
                                      "): give the sliding layers (layer_types, or window_pattern e.g. SSSL) or sliding_window 0");
  // Reals: finite and in range (a NaN fails every comparison, so each test is written to catch it).
  using detail::config_num;
  if (!(std::isfinite(rope_theta) && rope_theta > 0)) config_fail("rope_theta", "must be a finite number > 0, got " + config_num(rope_theta));
  if (!(std::isfinite(rms_norm_eps) && rms_norm_eps > 0 && rms_norm_eps <= 1))
    config_fail("rms_norm_eps", "must be a finite number in (0, 1], got " + config_num(rms_norm_eps));
  if (!(std::isfinite(initializer_range) && initializer_range > 0))
    config_fail("initializer_range", "must be a finite number > 0, got " + config_num(initializer_range));
  if (!(std::isfinite(z_loss) && z_loss >= 0)) config_fail("z_loss", "must be a finite number >= 0, got " + config_num(z_loss));
  if (!std::isfinite(gated_add_alpha)) config_fail("gated_add_alpha", "must be a finite number, got " + config_num(gated_add_alpha));
  // What the sizes imply together.
  const std::uint64_t rope = std::uint64_t(max_position_embeddings) * std::uint64_t(hs());
  if (rope > L::max_rope_table)
    config_fail("max_position_embeddings", "max_position_embeddings x head_dim = " + std::to_string(max_position_embeddings) + " x " +
                                               std::to_string(hs()) + " = " + std::to_string(rope) + " RoPE table elements, over the limit of " +
                                               std::to_string(L::max_rope_table));
  const std::uint64_t np = parameter_count();
  if (np > L::max_parameters)
    config_fail("parameters", "the config implies " + std::to_string(np) + " parameters (vocab_size " + std::to_string(vocab_size) + ", hidden_size " +
                                  std::to_string(hidden_size) + ", num_hidden_layers " + std::to_string(num_hidden_layers) + ", intermediate_size " +
                                  std::to_string(intermediate_size) + "), over the limit of " + std::to_string(L::max_parameters));
  if (fuser.empty()) config_fail("fuser", "is empty (none, glu, gated_add, concat or a user fuser's name)");
  if (fuser.size() > 64) config_fail("fuser", "a name of " + std::to_string(fuser.size()) + " bytes is too long (at most 64): " + detail::config_quote(fuser));
  if (block.empty()) config_fail("block", "is empty (decoder or a user block's name)");
  if (block.size() > 64) config_fail("block", "a name of " + std::to_string(block.size()) + " bytes is too long (at most 64): " + detail::config_quote(block));
  if (!layer_blocks.empty() || block == "mixed") {  // a mixed stack (model/pieces.hpp, ConfigBlock<AnyBlock>): one block type per layer
    if (block != "mixed")
      config_fail("block", "is " + detail::config_quote(block) + " but layer_blocks is given: a mixed stack's block is \"mixed\"");
    if (layer_blocks.size() != std::size_t(num_hidden_layers))
      config_fail("layer_blocks", "has " + std::to_string(layer_blocks.size()) + " entries, expected one block type per layer (" +
                                      std::to_string(num_hidden_layers) + ")");
    for (std::size_t l = 0; l < layer_blocks.size(); ++l) {
      const std::string f = "layer_blocks[" + std::to_string(l) + "]";
      if (layer_blocks[l].empty() || layer_blocks[l].size() > 64 || layer_blocks[l] == "mixed")
        config_fail(f, "must name a block type (1 to 64 bytes, not \"mixed\"), got " + detail::config_quote(layer_blocks[l]));
    }
  }
  if (!feedback() && !fuser_options.empty()) config_fail("fuser_options", "are given, but the fuser is none (a baseline has no fuser)");
  parse_tap(*this);
  if (feedback_source != "layer" && feedback_layer != -1)
    config_fail("feedback_layer", "is set (" + std::to_string(feedback_layer) + ") but feedback_source is " + detail::config_quote(feedback_source) + ", not \"layer\"");
  parse_input_norm(*this);
  parse_gate_norm(*this);
  parse_in_norm_init(*this);
  parse_block_norm(*this);
  parse_doc_attention(*this);
  detail::config_one_of("glu_init", glu_init, {"default", "fan_in", "identity_both"});  // the glu fuser reads it (layers/glu_fuser.hpp)
}

}  // namespace fbt
