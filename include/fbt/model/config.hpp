// fbt/model/config.hpp: the model configuration (Hugging Face Qwen3 field names + the feedback knobs).
//
// Field names follow the Qwen3 config researchers already read (spec section 9); the feedback knobs are
// the spec's (section 2). validate() refuses a bad config with an fbt::Error that names the field and
// the rule it breaks.
#pragma once

#include <string>

#include "../config.hpp"

namespace fbt {

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
  // --- latent feedback (spec section 2) ---
  std::string fuser = "glu";          ///< none | glu | gated_add | concat
  std::string feedback_source = "post_final_norm";  ///< post_final_norm | pre_final_norm
  std::string input_norm = "all";     ///< all | fused_only
  std::string glu_init = "default";   ///< default (W_U = I, W_G ~ N(0, 1e-6/D)) | fan_in | identity_both
  double gated_add_alpha = 0.1;       ///< alpha of the gated_add fuser (a config scalar, not a tensor)

  int hs() const { return head_dim > 0 ? head_dim : hidden_size / num_attention_heads; }
  bool feedback() const { return fuser != "none"; }

  /// Throws fbt::Error naming the field and the broken rule.
  void validate() const {
    auto fail = [](const std::string& field, const std::string& rule) { throw Error("invalid model config: " + field + ": " + rule); };
    auto positive = [&](const char* f, long v) {
      if (v <= 0) fail(f, "must be > 0, got " + std::to_string(v));
    };
    positive("vocab_size", vocab_size);
    positive("hidden_size", hidden_size);
    positive("num_hidden_layers", num_hidden_layers);
    positive("num_attention_heads", num_attention_heads);
    positive("num_key_value_heads", num_key_value_heads);
    positive("intermediate_size", intermediate_size);
    positive("max_position_embeddings", max_position_embeddings);
    if (head_dim < 0) fail("head_dim", "must be >= 0 (0 means hidden_size / num_attention_heads), got " + std::to_string(head_dim));
    if (head_dim == 0 && hidden_size % num_attention_heads != 0)
      fail("num_attention_heads", "must divide hidden_size (" + std::to_string(hidden_size) + "), got " + std::to_string(num_attention_heads));
    if (num_attention_heads % num_key_value_heads != 0)
      fail("num_key_value_heads", "must divide num_attention_heads (" + std::to_string(num_attention_heads) + "), got " +
                                      std::to_string(num_key_value_heads));
    if (hs() % 2 != 0) fail("head_dim", "must be even for RoPE's rotate-half, got " + std::to_string(hs()));
    if (!(rope_theta > 0)) fail("rope_theta", "must be > 0");
    if (!(rms_norm_eps > 0)) fail("rms_norm_eps", "must be > 0");
    if (!(initializer_range > 0)) fail("initializer_range", "must be > 0");
    if (!(z_loss >= 0)) fail("z_loss", "must be >= 0");
    auto one_of = [&](const char* f, const std::string& v, std::initializer_list<const char*> ok) {
      std::string list;
      for (auto o : ok) {
        if (v == o) return;
        list += std::string(list.empty() ? "" : ", ") + o;
      }
      fail(f, "unknown value \"" + v + "\" (expected one of: " + list + ")");
    };
    one_of("fuser", fuser, {"none", "glu", "gated_add", "concat"});
    one_of("feedback_source", feedback_source, {"post_final_norm", "pre_final_norm"});
    one_of("input_norm", input_norm, {"all", "fused_only"});
    one_of("glu_init", glu_init, {"default", "fan_in", "identity_both"});
    one_of("doc_attention", doc_attention, {"masked", "causal"});
  }
};

}  // namespace fbt
