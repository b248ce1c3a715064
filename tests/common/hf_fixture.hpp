// tests/common/hf_fixture.hpp: writes a Hugging Face Qwen3 model directory the way transformers'
// save_pretrained lays it out, from a plain (fuser none) fbt model's weights, without going through
// fbt's own loader or exporter: config.json spelled out key by key as transformers 4.5x writes a
// Qwen3Config (or, with `new_style`, as newer transformers do: "dtype" and "rope_parameters"), and
// model.safetensors, or `shards` files model-0000i-of-0000N.safetensors with model.safetensors.index.json.
// Tensors are F32, BF16 (rounded to nearest even) or F16 (rounded to nearest even); a tied model
// omits lm_head.weight, as save_pretrained does.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "fbt/io/safetensors.hpp"
#include "fbt/ops/gemm_bf16.hpp"

namespace fbt_test {

struct HfFixtureOptions {
  std::string dtype = "F32";  ///< F32 | BF16 | F16
  int shards = 1;             ///< 1: model.safetensors; more: an index and that many shard files
  bool new_style = false;     ///< newer transformers' config keys ("dtype", "rope_parameters")
};

/// float -> IEEE half bits, rounded to nearest even (finite inputs within half's range, as weights are):
/// computed in double with frexp / nearbyint, independently of fbt's reader.
inline std::uint16_t hf_fixture_half(float f) {
  const double v = std::fabs(double(f));
  const std::uint16_t sign = std::signbit(f) ? 0x8000u : 0u;
  if (v < std::ldexp(1.0, -14)) return std::uint16_t(sign | std::uint16_t(std::nearbyint(v / std::ldexp(1.0, -24))));  // subnormal (or zero)
  int e = 0;
  const double m = std::frexp(v, &e);  // v = m 2^e, m in [0.5, 1)
  int exp = e - 1;                     // v = (2m) 2^(e-1), 2m in [1, 2)
  double q = std::nearbyint((2 * m - 1) * 1024);
  if (q == 1024) q = 0, ++exp;
  return std::uint16_t(sign | std::uint16_t((exp + 15) << 10) | std::uint16_t(q));
}
inline float hf_fixture_half_value(std::uint16_t h) {
  const int e = (h >> 10) & 31, q = h & 1023;
  const double v = e == 0 ? std::ldexp(double(q), -24) : std::ldexp(1.0 + q / 1024.0, e - 15);
  return float((h & 0x8000u) ? -v : v);
}

/// x as the file will hold it: rounded to the dtype and back.
inline float hf_fixture_round(float x, const std::string& dtype) {
  if (dtype == "BF16") return fbt::round_bf16(x);
  if (dtype == "F16") return hf_fixture_half_value(hf_fixture_half(x));
  return x;
}

/// The config.json transformers writes for a Qwen3ForCausalLM of `c`'s sizes.
inline std::string hf_fixture_config_json(const fbt::ModelConfig& c, const HfFixtureOptions& o) {
  std::string layer_types;
  for (int l = 0; l < c.num_hidden_layers; ++l) layer_types += std::string(l ? ", " : "") + "\"full_attention\"";
  const std::string torch_dtype = o.dtype == "F32" ? "float32" : o.dtype == "BF16" ? "bfloat16" : "float16";
  auto num = [](double v) {
    char b[64];
    std::snprintf(b, sizeof b, "%.17g", v);
    return std::string(b);
  };
  std::string s = "{\n";
  s += "  \"architectures\": [\n    \"Qwen3ForCausalLM\"\n  ],\n";
  s += "  \"attention_bias\": false,\n  \"attention_dropout\": 0.0,\n";
  s += "  \"bos_token_id\": 151643,\n  \"eos_token_id\": 151645,\n";
  s += "  \"head_dim\": " + std::to_string(c.hs()) + ",\n";
  s += "  \"hidden_act\": \"silu\",\n";
  s += "  \"hidden_size\": " + std::to_string(c.hidden_size) + ",\n";
  s += "  \"initializer_range\": 0.02,\n";
  s += "  \"intermediate_size\": " + std::to_string(c.intermediate_size) + ",\n";
  s += "  \"layer_types\": [" + layer_types + "],\n";
  s += "  \"max_position_embeddings\": " + std::to_string(c.max_position_embeddings) + ",\n";
  s += "  \"max_window_layers\": " + std::to_string(c.num_hidden_layers) + ",\n";
  s += "  \"model_type\": \"qwen3\",\n";
  s += "  \"num_attention_heads\": " + std::to_string(c.num_attention_heads) + ",\n";
  s += "  \"num_hidden_layers\": " + std::to_string(c.num_hidden_layers) + ",\n";
  s += "  \"num_key_value_heads\": " + std::to_string(c.num_key_value_heads) + ",\n";
  s += "  \"rms_norm_eps\": " + num(c.rms_norm_eps) + ",\n";
  if (o.new_style) {
    s += "  \"rope_parameters\": {\n    \"rope_theta\": " + num(c.rope_theta) + ",\n    \"rope_type\": \"default\"\n  },\n";
    s += "  \"dtype\": \"" + torch_dtype + "\",\n";
  } else {
    s += "  \"rope_scaling\": null,\n  \"rope_theta\": " + num(c.rope_theta) + ",\n";
    s += "  \"torch_dtype\": \"" + torch_dtype + "\",\n";
  }
  s += "  \"sliding_window\": null,\n";
  s += std::string("  \"tie_word_embeddings\": ") + (c.tie_word_embeddings ? "true" : "false") + ",\n";
  s += "  \"transformers_version\": \"4.55.0\",\n  \"use_cache\": true,\n  \"use_sliding_window\": false,\n";
  s += "  \"vocab_size\": " + std::to_string(c.vocab_size) + "\n}\n";
  return s;
}

/// Writes the directory `dir` for the plain model `m` (its tensors under their Qwen3 names).
template <class M> void write_hf_fixture(const std::string& dir, const M& m, const HfFixtureOptions& o = {}) {
  namespace fs = std::filesystem;
  fs::create_directories(dir);
  std::ofstream(fs::path(dir) / "config.json") << hf_fixture_config_json(m.cfg, o);
  // every tensor converted to the file's dtype
  std::vector<std::vector<std::uint8_t>> bytes;
  std::vector<fbt::TensorRef> refs;
  for (const auto& s : m.params.specs()) {
    const float* v = m.params.values() + s.offset;
    std::vector<std::uint8_t> b;
    if (o.dtype == "F32") {
      b.resize(s.size * 4);
      std::memcpy(b.data(), v, s.size * 4);
    } else {
      b.resize(s.size * 2);
      for (std::size_t i = 0; i < s.size; ++i) {
        std::uint16_t h;
        h = o.dtype == "BF16" ? fbt::float_to_bf16(v[i]) : hf_fixture_half(v[i]);
        std::memcpy(b.data() + 2 * i, &h, 2);
      }
    }
    bytes.push_back(std::move(b));
    refs.push_back({s.name, o.dtype, s.shape, nullptr});
  }
  for (std::size_t i = 0; i < refs.size(); ++i) refs[i].data = bytes[i].data();
  const std::map<std::string, std::string> meta{{"format", "pt"}};
  if (o.shards <= 1) {
    fbt::save_safetensors((fs::path(dir) / "model.safetensors").string(), refs, meta);
    return;
  }
  // shards: consecutive tensors, about equally many per shard, and the index naming each one's shard
  std::string weight_map;
  const int n = o.shards;
  for (int k = 0; k < n; ++k) {
    char name[64];
    std::snprintf(name, sizeof name, "model-%05d-of-%05d.safetensors", k + 1, n);
    std::vector<fbt::TensorRef> part;
    for (std::size_t i = refs.size() * std::size_t(k) / std::size_t(n); i < refs.size() * std::size_t(k + 1) / std::size_t(n); ++i) {
      part.push_back(refs[i]);
      weight_map += std::string(weight_map.empty() ? "" : ",\n") + "    \"" + refs[i].name + "\": \"" + name + "\"";
    }
    fbt::save_safetensors((fs::path(dir) / name).string(), part, meta);
  }
  std::ofstream(fs::path(dir) / "model.safetensors.index.json")
      << "{\n  \"metadata\": {\n    \"total_size\": " << m.params.size() * (o.dtype == "F32" ? 4 : 2) << "\n  },\n  \"weight_map\": {\n"
      << weight_map << "\n  }\n}\n";
}

}  // namespace fbt_test
