// tests/io/test_checkpoint.cpp: model checkpoints and training state (fbt/io/checkpoint.hpp; spec 8-9).
//
// save_model / load_model round-trip every parameter bit for bit (float as F32, double as F64, every
// fuser); a baseline checkpoint holds exactly the Hugging Face Qwen3 names and shapes; loading refuses
// wrong shapes, missing, unknown and non-finite tensors, a wrong or missing config, and a tied model's
// lm_head unless it equals the embedding; an untied lm_head round-trips; BF16/F64 data converts.
// The training state restores the AdamW moments and step bit for bit and returns the trainer's
// metadata; corrupt or mismatched state files are refused. Saves are atomic (no .tmp left, replace).
// Compatibility: the checkpoints in tests/fixtures/v1 were written by fbt before the composable-layers
// redesign (tests/fixtures/v1/README.md): each loads, computes the losses and greedy decodes
// recorded with it, and saves back byte for byte; its training run resumes as the old code continued it.
// Hostile files: a small file whose config claims a huge model is refused before anything
// of that size is allocated, naming the file and the field; "format" must be present; deep nesting
// and huge values in the config are bounded errors; FIFOs and devices are refused; a loaded model
// holds no gradient or optimizer buffers, and decoding it allocates none.
#include <gtest/gtest.h>

#include <fbt/decode/decoder.hpp>
#include <fbt/io/checkpoint.hpp>
#include <fbt/train/trainer.hpp>

#include <cctype>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <iterator>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include <sys/stat.h>
#include <unistd.h>

namespace fs = std::filesystem;
using nlohmann::json;

#include "common/io_test.hpp"

// The file's own namespace: with FBT_TEST_UNITY an area's test files share one translation unit.
namespace test_io_checkpoint {

using fbt_test::read_bytes;

namespace {

class Checkpoint : public fbt_test::TempDirTest {};

void write_bytes(const std::string& p, const std::string& b) {
  std::ofstream out(p, std::ios::binary);
  out.write(b.data(), std::streamsize(b.size()));
}

// The brief's tiny config: V 11, D 8, L 2, 2 heads sharing 1 kv head (head_dim 4), SwiGLU 12.
fbt::ModelConfig tiny(const std::string& fuser = "glu", bool tied = true) {
  fbt::ModelConfig c;
  c.vocab_size = 11, c.hidden_size = 8, c.num_hidden_layers = 2, c.num_attention_heads = 2, c.num_key_value_heads = 1;
  c.intermediate_size = 12, c.max_position_embeddings = 64, c.fuser = fuser, c.tie_word_embeddings = tied;
  return c;
}

// Every value away from its init (no identity, no ones), with awkward bits (1/3 is not exact in float).
template <class M> void randomize(M& m, std::uint64_t seed) {
  using T = typename M::Scalar;
  fbt::Rng rng(seed);
  T* p = m.params.values();
  for (std::size_t i = 0; i < m.params.size(); ++i) p[i] = T(rng.normal() / 3.0);
}

template <class T> bool same_bits(const T* a, const T* b, std::size_t n) { return std::memcmp(a, b, n * sizeof(T)) == 0; }

// The tensors and metadata of a model, with copies of the values that a test may corrupt.
template <class T> struct Parts {
  std::vector<fbt::TensorRef> refs;
  std::map<std::string, std::string> meta;
  std::vector<std::vector<T>> copies;
  template <class M> explicit Parts(const M& m) : refs(fbt::model_tensors(m)), meta(fbt::model_metadata(m.cfg)) {
    for (auto& r : refs) {
      const T* src = static_cast<const T*>(r.data);
      copies.emplace_back(src, src + fbt::numel(r.shape));
      r.data = copies.back().data();
    }
  }
  Parts(const Parts&) = delete;
  std::size_t at(const std::string& name) const {
    for (std::size_t i = 0; i < refs.size(); ++i)
      if (refs[i].name == name) return i;
    ADD_FAILURE() << "no tensor " << name;
    return 0;
  }
  void erase(const std::string& name) {
    const std::size_t i = at(name);
    refs.erase(refs.begin() + std::ptrdiff_t(i));
  }
};

template <class T> class CheckpointT : public Checkpoint {};
using Scalars = ::testing::Types<float, double>;
TYPED_TEST_SUITE(CheckpointT, Scalars);

TYPED_TEST(CheckpointT, SaveLoadIsBitIdenticalForEveryFuser) {
  using T = TypeParam;
  for (const char* fuser : {"glu", "none", "gated_add", "concat"}) fbt::with_model<T>(tiny(fuser), [&](auto tag) {
    using M = typename decltype(tag)::type;
    SCOPED_TRACE(fuser);
    M m(tiny(fuser), 1);
    randomize(m, 7);
    const std::string p = this->path(std::string(fuser) + ".safetensors");
    fbt::save_model(p, m);
    EXPECT_FALSE(fs::exists(p + ".tmp"));

    // The file: every tensor in T's dtype, the config as JSON under "config", format "pt".
    const auto f = fbt::read_safetensors(p);
    EXPECT_EQ(f.tensors.size(), m.params.specs().size());
    for (const auto& e : f.tensors) EXPECT_EQ(e.dtype, (std::is_same<T, float>::value ? "F32" : "F64")) << e.name;
    EXPECT_EQ(f.metadata.at("format"), "pt");
    EXPECT_EQ(json::parse(f.metadata.at("config")), fbt::to_json(m.cfg));

    const M r = fbt::load_model<M>(p);
    EXPECT_EQ(fbt::to_json(r.cfg), fbt::to_json(m.cfg));
    ASSERT_EQ(r.params.size(), m.params.size());
    for (const auto& s : m.params.specs()) {
      ASSERT_TRUE(r.params.has(s.name)) << s.name;
      EXPECT_EQ(r.params.spec(s.name).shape, s.shape) << s.name;
      EXPECT_TRUE(same_bits(r.params.value(s.name), m.params.value(s.name), s.size)) << s.name;
    }
    EXPECT_TRUE(same_bits(r.params.values(), m.params.values(), m.params.size()));

    M into(tiny(fuser), 99);  // another seed: every value must be overwritten
    fbt::load_model_into(p, into);
    EXPECT_TRUE(same_bits(into.params.values(), m.params.values(), m.params.size()));
  });
}

TEST_F(Checkpoint, BaselineHasExactlyTheQwen3Names) {
  fbt::Model<float, fbt::NoFuser<float>> m(tiny("none"), 1);
  const std::string p = path("qwen3.safetensors");
  fbt::save_model(p, m);
  const auto f = fbt::read_safetensors(p);
  std::set<std::string> names;
  for (const auto& e : f.tensors) names.insert(e.name);
  std::set<std::string> want = {"model.embed_tokens.weight", "model.norm.weight"};
  for (int l = 0; l < 2; ++l) {
    const std::string b = "model.layers." + std::to_string(l) + ".";
    for (const char* s : {"self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight", "self_attn.o_proj.weight",
                          "self_attn.q_norm.weight", "self_attn.k_norm.weight", "input_layernorm.weight",
                          "post_attention_layernorm.weight", "mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight"})
      want.insert(b + s);
  }
  EXPECT_EQ(names, want);
  // (out, in) as nn.Linear stores them: D 8, head_dim 4, 2 query heads, 1 kv head, F 12.
  EXPECT_EQ(f.find("model.embed_tokens.weight")->shape, (fbt::Shape{11, 8}));
  EXPECT_EQ(f.find("model.layers.0.self_attn.q_proj.weight")->shape, (fbt::Shape{8, 8}));
  EXPECT_EQ(f.find("model.layers.0.self_attn.k_proj.weight")->shape, (fbt::Shape{4, 8}));
  EXPECT_EQ(f.find("model.layers.0.self_attn.v_proj.weight")->shape, (fbt::Shape{4, 8}));
  EXPECT_EQ(f.find("model.layers.0.self_attn.o_proj.weight")->shape, (fbt::Shape{8, 8}));
  EXPECT_EQ(f.find("model.layers.0.self_attn.q_norm.weight")->shape, (fbt::Shape{4}));
  EXPECT_EQ(f.find("model.layers.1.mlp.gate_proj.weight")->shape, (fbt::Shape{12, 8}));
  EXPECT_EQ(f.find("model.layers.1.mlp.down_proj.weight")->shape, (fbt::Shape{8, 12}));
  EXPECT_EQ(f.find("model.norm.weight")->shape, (fbt::Shape{8}));
  const json cfg = json::parse(f.metadata.at("config"));
  EXPECT_EQ(cfg["architectures"], json::array({"Qwen3ForCausalLM"}));
  EXPECT_EQ(cfg["head_dim"], 4);

  // A glu model adds exactly the feedback tensors.
  fbt::Model<float> g(tiny("glu"), 1);
  fbt::save_model(p, g);
  std::set<std::string> extra;
  for (const auto& e : fbt::read_safetensors(p).tensors)
    if (!want.count(e.name)) extra.insert(e.name);
  EXPECT_EQ(extra, (std::set<std::string>{"model.feedback.in_norm.weight", "model.feedback.w_u.weight", "model.feedback.w_g.weight",
                                          "model.feedback.gate_norm.weight"}));
}

TEST_F(Checkpoint, UntiedModelRoundTripsLmHead) {
  fbt::Model<double> m(tiny("glu", /*tied=*/false), 2);
  randomize(m, 3);
  const std::string p = path("untied.safetensors");
  fbt::save_model(p, m);
  const auto f = fbt::read_safetensors(p);
  ASSERT_NE(f.find("lm_head.weight"), nullptr);
  EXPECT_EQ(f.find("lm_head.weight")->shape, (fbt::Shape{11, 8}));
  const auto r = fbt::load_model<fbt::Model<double>>(p);
  EXPECT_FALSE(r.cfg.tie_word_embeddings);
  EXPECT_TRUE(same_bits(r.params.value("lm_head.weight"), m.params.value("lm_head.weight"), 88));
  EXPECT_FALSE(same_bits(r.params.value("lm_head.weight"), r.params.value("model.embed_tokens.weight"), 88));

  // Without its lm_head the untied model is incomplete.
  Parts<double> parts(m);
  parts.erase("lm_head.weight");
  fbt::save_safetensors(p, parts.refs, parts.meta);
  EXPECT_FBT_ERROR(fbt::load_model<fbt::Model<double>>(p), p, "missing tensor \"lm_head.weight\"");
}

TEST_F(Checkpoint, TiedModelAcceptsOnlyAnEqualLmHead) {
  fbt::Model<float> m(tiny(), 1);
  randomize(m, 4);
  const std::string p = path("tied.safetensors");
  Parts<float> parts(m);
  const auto& emb = parts.copies[parts.at("model.embed_tokens.weight")];
  std::vector<float> head = emb;
  parts.refs.push_back({"lm_head.weight", "F32", {11, 8}, head.data()});
  fbt::save_safetensors(p, parts.refs, parts.meta);
  const auto r = fbt::load_model<fbt::Model<float>>(p);  // an exact copy is ignored
  EXPECT_TRUE(same_bits(r.params.values(), m.params.values(), m.params.size()));
  EXPECT_FALSE(r.params.has("lm_head.weight"));

  head[3 * 8 + 5] = std::nextafter(head[3 * 8 + 5], 1.0f);  // one ulp off
  fbt::save_safetensors(p, parts.refs, parts.meta);
  EXPECT_FBT_ERROR(fbt::load_model<fbt::Model<float>>(p), p, "lm_head.weight", "differs", "[3, 5]");

  head = emb;
  parts.refs.back().shape = {8, 11};
  fbt::save_safetensors(p, parts.refs, parts.meta);
  EXPECT_FBT_ERROR(fbt::load_model<fbt::Model<float>>(p), p, "lm_head.weight", "shape");
}

TEST_F(Checkpoint, RefusesWrongShapeMissingAndUnknownTensors) {
  fbt::Model<float> m(tiny(), 1);
  randomize(m, 5);
  const std::string p = path("bad.safetensors");
  const std::string k = "model.layers.0.self_attn.k_proj.weight";
  {
    Parts<float> parts(m);
    parts.refs[parts.at(k)].shape = {8, 4};  // same size, transposed
    fbt::save_safetensors(p, parts.refs, parts.meta);
    EXPECT_FBT_ERROR(fbt::load_model<fbt::Model<float>>(p), p, k, "[8, 4]", "expected [4, 8]");
  }
  {
    Parts<float> parts(m);
    parts.erase("model.layers.1.mlp.up_proj.weight");
    fbt::save_safetensors(p, parts.refs, parts.meta);
    EXPECT_FBT_ERROR(fbt::load_model<fbt::Model<float>>(p), p, "missing tensor", "model.layers.1.mlp.up_proj.weight");
  }
  {
    Parts<float> parts(m);
    const float bias[8] = {};
    parts.refs.push_back({"model.layers.0.self_attn.q_proj.bias", "F32", {8}, bias});
    fbt::save_safetensors(p, parts.refs, parts.meta);
    EXPECT_FBT_ERROR(fbt::load_model<fbt::Model<float>>(p), p, "unknown tensor", "model.layers.0.self_attn.q_proj.bias");
  }
  {
    Parts<float> parts(m);
    const std::int32_t ints[8] = {};
    parts.refs[parts.at("model.norm.weight")] = {"model.norm.weight", "I32", {8}, ints};
    fbt::save_safetensors(p, parts.refs, parts.meta);
    EXPECT_FBT_ERROR(fbt::load_model<fbt::Model<float>>(p), p, "model.norm.weight", "dtype I32");
  }
}

TEST_F(Checkpoint, RefusesNonFiniteValues) {
  fbt::Model<double> m(tiny(), 1);
  randomize(m, 6);
  const std::string p = path("nan.safetensors");
  const std::string w = "model.layers.1.mlp.down_proj.weight";  // (8, 12)
  for (double bad : {std::numeric_limits<double>::quiet_NaN(), -std::numeric_limits<double>::infinity()}) {
    Parts<double> parts(m);
    parts.copies[parts.at(w)][2 * 12 + 7] = bad;
    fbt::save_safetensors(p, parts.refs, parts.meta);
    EXPECT_FBT_ERROR(fbt::load_model<fbt::Model<double>>(p), p, w, "non-finite", "index 31 (= [2, 7])");
  }
  // A finite double that overflows float is refused when loading into Model<float>.
  Parts<double> parts(m);
  parts.copies[parts.at(w)][0] = 1e300;
  fbt::save_safetensors(p, parts.refs, parts.meta);
  EXPECT_FBT_ERROR(fbt::load_model<fbt::Model<float>>(p), p, w, "overflows F32", "index 0");
}

TEST_F(Checkpoint, RefusesMissingOrMismatchedConfig) {
  fbt::Model<float> m(tiny(), 1);
  const std::string p = path("cfg.safetensors");
  {
    Parts<float> parts(m);
    parts.meta.erase("config");
    fbt::save_safetensors(p, parts.refs, parts.meta);
    EXPECT_FBT_ERROR(fbt::load_model<fbt::Model<float>>(p), p, "\"config\"");
  }
  {
    Parts<float> parts(m);
    parts.meta["config"] = "{\"hidden_size\": 8,";
    fbt::save_safetensors(p, parts.refs, parts.meta);
    EXPECT_FBT_ERROR(fbt::load_model<fbt::Model<float>>(p), p, "\"config\"", "invalid JSON");
  }
  {
    Parts<float> parts(m);
    json c = fbt::to_json(m.cfg);
    c["num_key_value_heads"] = 3;
    parts.meta["config"] = c.dump();
    fbt::save_safetensors(p, parts.refs, parts.meta);
    EXPECT_FBT_ERROR(fbt::load_model<fbt::Model<float>>(p), p, "\"config\"", "num_key_value_heads");
  }
  {
    Parts<float> parts(m);
    json c = fbt::to_json(m.cfg);
    c["hidden_size"] = 16;  // the config no longer describes the tensors
    c["head_dim"] = 8;
    parts.meta["config"] = c.dump();
    fbt::save_safetensors(p, parts.refs, parts.meta);
    EXPECT_FBT_ERROR(fbt::load_model<fbt::Model<float>>(p), p, "model.embed_tokens.weight", "[11, 8]", "expected [11, 16]");
  }
  {
    Parts<float> parts(m);
    parts.meta["format"] = "fbt-train-state";
    fbt::save_safetensors(p, parts.refs, parts.meta);
    EXPECT_FBT_ERROR(fbt::load_model<fbt::Model<float>>(p), p, "\"format\"");
  }
  // load_model_into: the file's config must equal the model's; the model is left unchanged.
  fbt::save_model(p, m);
  fbt::ModelConfig other = tiny();
  other.num_hidden_layers = 3;
  fbt::Model<float> o(other, 2);
  const std::vector<float> before(o.params.values(), o.params.values() + o.params.size());
  EXPECT_FBT_ERROR(fbt::load_model_into(p, o), p, "num_hidden_layers", "2", "3");
  EXPECT_TRUE(same_bits(o.params.values(), before.data(), before.size()));
  // issue 47: a per-layer list that differs is shown whole (it read "an array of 2 elements in the file but an
  // array of 2 elements in the model")
  {
    fbt::ModelConfig la = tiny(), lb = tiny();
    la.layer_intermediate_size = {16, 8}, lb.layer_intermediate_size = {8, 16};
    fbt::Model<float> ma(la, 1), mb(lb, 1);
    fbt::save_model(p, ma);
    EXPECT_FBT_ERROR(fbt::load_model_into(p, mb), "layer_intermediate_size", "is [16,8] in the file but [8,16] in the model");
    fbt::save_model(p, m);
  }
  fbt::ModelConfig theta = tiny();
  theta.rope_theta = 5e5;
  fbt::Model<float> t(theta, 2);
  EXPECT_FBT_ERROR(fbt::load_model_into(p, t), p, "rope_theta");
  // a fuser's option is part of the model: another value is refused naming fuser_options
  fbt::ModelConfig ga = tiny();
  ga.fuser = "gated_add", ga.fuser_options = {{"alpha", fbt::OptionValue::of_real(0.3)}};
  fbt::Model<float, fbt::GatedAddFuser<float>> g3(ga, 1);
  fbt::save_model(p, g3);
  ga.fuser_options = {{"alpha", fbt::OptionValue::of_real(0.1)}};
  fbt::Model<float, fbt::GatedAddFuser<float>> g1(ga, 1);
  EXPECT_FBT_ERROR(fbt::load_model_into(p, g1), p, "fuser_options", "0.3", "0.1");
  // Issue 47: a config that records no fuser_options (nor a legacy key) loaded at the default alpha 0.1 (logits
  // 0.37 off a model trained at 0.5): refused by every reader, naming fuser_options and what the fuser declares
  {
    Parts<float> parts(g3);
    json cfg = json::parse(parts.meta.at("config"));
    ASSERT_TRUE(cfg.contains("fuser_options"));
    cfg.erase("fuser_options");
    parts.meta["config"] = cfg.dump();
    fbt::save_safetensors(p, parts.refs, parts.meta);
    EXPECT_FBT_ERROR(fbt::load_model<fbt::Model<float>>(p), p, "records no fuser_options", "fuser \"gated_add\" declares alpha");
    EXPECT_FBT_ERROR(fbt::load_model_into(p, g1), p, "records no fuser_options");
    cfg["gated_add_alpha"] = 0.3;  // a file from before fuser_options states the legacy key: its value is used
    parts.meta["config"] = cfg.dump();
    fbt::save_safetensors(p, parts.refs, parts.meta);
    EXPECT_EQ(fbt::load_model<fbt::Model<float>>(p).cfg.fuser_options.at("alpha").r, 0.3);
  }

  // A refused tensor also leaves a load_model_into target unchanged.
  Parts<float> parts(m);
  parts.copies[parts.at("model.norm.weight")][7] = std::numeric_limits<float>::quiet_NaN();
  fbt::save_safetensors(p, parts.refs, parts.meta);
  fbt::Model<float> same(tiny(), 3);
  const std::vector<float> keep(same.params.values(), same.params.values() + same.params.size());
  EXPECT_FBT_ERROR(fbt::load_model_into(p, same), p, "model.norm.weight", "non-finite");
  EXPECT_TRUE(same_bits(same.params.values(), keep.data(), keep.size()));
}

TEST_F(Checkpoint, ConvertsBf16AndOtherFloatWidths) {
  fbt::Model<float> m(tiny(), 1);
  randomize(m, 8);
  const std::string p = path("bf16.safetensors");
  // BF16: the top 16 bits of each float (truncation); loading must give exactly those values.
  Parts<float> parts(m);
  std::vector<std::vector<std::uint16_t>> bf;
  for (auto& r : parts.refs) {
    const float* src = static_cast<const float*>(r.data);
    std::vector<std::uint16_t> b(std::size_t(fbt::numel(r.shape)));
    for (std::size_t i = 0; i < b.size(); ++i) {
      std::uint32_t bits;
      std::memcpy(&bits, src + i, 4);
      b[i] = std::uint16_t(bits >> 16);
    }
    bf.push_back(std::move(b));
    r.dtype = "BF16";
    r.data = bf.back().data();
  }
  fbt::save_safetensors(p, parts.refs, parts.meta);
  const auto r = fbt::load_model<fbt::Model<float>>(p);
  for (std::size_t i = 0; i < m.params.size(); ++i) {
    std::uint32_t bits;
    std::memcpy(&bits, m.params.values() + i, 4);
    bits &= 0xffff0000u;
    float want;
    std::memcpy(&want, &bits, 4);
    ASSERT_EQ(r.params.values()[i], want) << "element " << i;
  }
  // F32 into Model<double> is exact; F64 into Model<float> rounds to nearest.
  fbt::save_model(p, m);
  const auto d = fbt::load_model<fbt::Model<double>>(p);
  for (std::size_t i = 0; i < m.params.size(); ++i) ASSERT_EQ(d.params.values()[i], double(m.params.values()[i]));
  fbt::Model<double> md(tiny(), 1);
  randomize(md, 9);
  fbt::save_model(p, md);
  const auto f = fbt::load_model<fbt::Model<float>>(p);
  for (std::size_t i = 0; i < md.params.size(); ++i) ASSERT_EQ(f.params.values()[i], float(md.params.values()[i]));
}

TEST_F(Checkpoint, SavingIsAtomic) {
  const std::string p = path("ckpt.safetensors");
  fbt::Model<float> a(tiny(), 1);
  fbt::Model<float, fbt::NoFuser<float>> b(tiny("none"), 2);
  randomize(a, 10);
  fbt::save_model(p, a);
  // An interrupted save leaves at most a stale .tmp: the real file is still the old, complete one.
  write_bytes(p + ".tmp", "half a file");
  EXPECT_TRUE(same_bits(fbt::load_model<fbt::Model<float>>(p).params.values(), a.params.values(), a.params.size()));
  // Saving over an existing file replaces it (and the stale temporary).
  fbt::save_model(p, b);
  EXPECT_FALSE(fs::exists(p + ".tmp"));
  using GluModel = fbt::Model<float, fbt::GluFuser<float>>;
  EXPECT_FBT_ERROR(fbt::load_model<GluModel>(p), p, "fuser is \"none\"", "\"glu\"");  // a glu type does not load a baseline
  const auto r = fbt::load_model<fbt::Model<float, fbt::NoFuser<float>>>(p);
  EXPECT_EQ(r.cfg.fuser, "none");
  EXPECT_TRUE(same_bits(r.params.values(), b.params.values(), b.params.size()));
}

// ---- training state ----

template <class T> void fill_moments(fbt::ParamStore<T>& ps, std::uint64_t seed) {
  fbt::Rng rng(seed);
  for (std::size_t i = 0; i < ps.size(); ++i) {
    ps.adam_m()[i] = T(rng.normal() / 7.0);
    ps.adam_v()[i] = T(std::abs(rng.normal()) / 11.0);
  }
}

TYPED_TEST(CheckpointT, TrainStateRoundTripsBitForBit) {
  using T = TypeParam;
  fbt::Model<T> m(tiny(), 1);
  fill_moments(m.params, 11);
  m.params.step = 1234;
  const std::map<std::string, std::string> extra = {{"schedule_step", "1234"}, {"rng", "5489 17 42"}, {"data_position", "987654321"}};
  const std::string p = this->path("train.safetensors");
  fbt::save_train_state(p, m.params, extra);
  EXPECT_FALSE(fs::exists(p + ".tmp"));

  const auto f = fbt::read_safetensors(p);
  EXPECT_EQ(f.tensors.size(), 2 * m.params.specs().size());
  ASSERT_NE(f.find("adam_m.model.embed_tokens.weight"), nullptr);
  ASSERT_NE(f.find("adam_v.model.feedback.w_u.weight"), nullptr);
  EXPECT_EQ(f.find("adam_v.model.feedback.w_u.weight")->dtype, fbt::safetensors_dtype<T>());

  fbt::Model<T> r(tiny(), 2);
  const auto meta = fbt::load_train_state(p, r.params);
  EXPECT_EQ(r.params.step, 1234);
  EXPECT_TRUE(same_bits(r.params.adam_m(), m.params.adam_m(), m.params.size()));
  EXPECT_TRUE(same_bits(r.params.adam_v(), m.params.adam_v(), m.params.size()));
  for (const auto& kv : extra) EXPECT_EQ(meta.at(kv.first), kv.second) << kv.first;
  EXPECT_EQ(meta.at("format"), "fbt-train-state");
  EXPECT_EQ(meta.at("step"), "1234");
  EXPECT_EQ(meta.size(), extra.size() + 2);
}

TEST_F(Checkpoint, CorruptOrMismatchedTrainStateIsRefused) {
  fbt::Model<float> m(tiny(), 1);
  fill_moments(m.params, 12);
  m.params.step = 7;
  const std::string p = path("state.safetensors");
  EXPECT_FBT_ERROR(fbt::save_train_state(p, m.params, {{"step", "8"}}), p, "\"step\"", "reserved");
  EXPECT_FALSE(fs::exists(p));
  fbt::save_train_state(p, m.params, {{"rng", "1"}});
  const std::string good = read_bytes(p);

  fbt::Model<float> r(tiny(), 2);
  const std::vector<float> m0(r.params.adam_m(), r.params.adam_m() + r.params.size());
  auto unchanged = [&] {
    EXPECT_EQ(r.params.step, 0);
    EXPECT_TRUE(same_bits(r.params.adam_m(), m0.data(), m0.size()));
  };

  write_bytes(p, good.substr(0, good.size() - 5));  // truncated
  EXPECT_FBT_ERROR(fbt::load_train_state(p, r.params), p, "out of range");
  unchanged();
  std::string flipped = good;
  flipped[8] = 'x';  // the header's '{'
  write_bytes(p, flipped);
  EXPECT_FBT_ERROR(fbt::load_train_state(p, r.params), p, "header");
  unchanged();

  // Rebuild the state's tensors by hand to corrupt them one way at a time.
  struct State {
    std::vector<fbt::TensorRef> refs;
    std::map<std::string, std::string> meta{{"format", "fbt-train-state"}, {"step", "7"}};
    std::vector<std::vector<float>> copies;
  };
  auto state = [&] {
    State s;
    s.copies.reserve(2 * m.params.specs().size());
    for (int k = 0; k < 2; ++k)
      for (const auto& sp : m.params.specs()) {
        const float* src = (k ? m.params.adam_v() : m.params.adam_m()) + sp.offset;
        s.copies.emplace_back(src, src + sp.size);
        s.refs.push_back({(k ? "adam_v." : "adam_m.") + sp.name, "F32", sp.shape, s.copies.back().data()});
      }
    return s;
  };
  const std::string vname = "adam_v.model.layers.0.mlp.up_proj.weight";
  auto index_of = [&](const State& s, const std::string& n) {
    for (std::size_t i = 0; i < s.refs.size(); ++i)
      if (s.refs[i].name == n) return i;
    return std::size_t(0);
  };
  {
    State s = state();
    fbt::save_safetensors(p, s.refs, s.meta);
    EXPECT_NO_THROW(fbt::load_train_state(p, r.params));  // the hand-made state is valid
    r.params.step = 0;
    std::copy(m0.begin(), m0.end(), r.params.adam_m());
  }
  {
    State s = state();
    s.meta.erase("format");
    fbt::save_safetensors(p, s.refs, s.meta);
    EXPECT_FBT_ERROR(fbt::load_train_state(p, r.params), p, "\"format\"");
  }
  {
    fbt::save_model(p, m);  // a model checkpoint is not a training state
    EXPECT_FBT_ERROR(fbt::load_train_state(p, r.params), p, "\"format\"", "\"pt\"");
  }
  {
    State s = state();
    s.meta["step"] = "12a";
    fbt::save_safetensors(p, s.refs, s.meta);
    EXPECT_FBT_ERROR(fbt::load_train_state(p, r.params), p, "\"step\"", "12a");
  }
  {
    State s = state();
    s.refs.erase(s.refs.begin() + std::ptrdiff_t(index_of(s, vname)));
    fbt::save_safetensors(p, s.refs, s.meta);
    EXPECT_FBT_ERROR(fbt::load_train_state(p, r.params), p, "missing tensor", vname);
  }
  {
    State s = state();
    const float x[8] = {};
    s.refs.push_back({"adam_m.model.layers.0.self_attn.q_proj.bias", "F32", {8}, x});
    fbt::save_safetensors(p, s.refs, s.meta);
    EXPECT_FBT_ERROR(fbt::load_train_state(p, r.params), p, "unknown tensor", "adam_m.model.layers.0.self_attn.q_proj.bias");
  }
  {
    State s = state();
    s.refs[index_of(s, vname)].shape = {8, 12};  // (12, 8) transposed
    fbt::save_safetensors(p, s.refs, s.meta);
    EXPECT_FBT_ERROR(fbt::load_train_state(p, r.params), p, vname, "[8, 12]", "[12, 8]");
  }
  {
    State s = state();
    s.copies[index_of(s, vname)][5] = -1.0f;
    fbt::save_safetensors(p, s.refs, s.meta);
    EXPECT_FBT_ERROR(fbt::load_train_state(p, r.params), p, vname, "negative second moment", "index 5");
  }
  {
    State s = state();
    s.copies[0][3] = std::numeric_limits<float>::infinity();
    fbt::save_safetensors(p, s.refs, s.meta);
    EXPECT_FBT_ERROR(fbt::load_train_state(p, r.params), p, s.refs[0].name, "non-finite");
  }
  // A double state does not restore a float store bit for bit: refused by dtype.
  fbt::Model<double> md(tiny(), 1);
  fbt::save_train_state(p, md.params);
  EXPECT_FBT_ERROR(fbt::load_train_state(p, r.params), p, "dtype F64", "expected F32");
  // A state of another architecture: the fuser's moments are unknown to a baseline store.
  fbt::Model<float, fbt::NoFuser<float>> base(tiny("none"), 1);
  fbt::save_train_state(p, m.params);
  EXPECT_FBT_ERROR(fbt::load_train_state(p, base.params), p, "unknown tensor", "model.feedback.");
  unchanged();
}

// ---- checkpoints written before the redesign (tests/fixtures/v1) ------------------------------------

std::string fixture(const std::string& name) { return std::string(FBT_TEST_SOURCE_DIR) + "/fixtures/v1/" + name; }

// Each v1 file loads into the model type its config names, computes the per-pass losses of the batch it
// was recorded with (relative 2e-6: float, the accumulation order may differ between compilers and
// CPUs), decodes greedily to the same tokens in every mode, and saves back to the same bytes.
TEST_F(Checkpoint, V1FilesLoadComputeAndSaveBackByteForByte) {
  const json expect = json::parse(read_bytes(fixture("expected.json")));
  for (const char* fuser : {"none", "glu", "gated_add", "concat"}) {
    SCOPED_TRACE(fuser);
    const std::string src = fixture(std::string("v1_") + fuser + ".safetensors");
    const fbt::ModelConfig cfg = fbt::read_model_config(src);
    EXPECT_EQ(cfg.fuser, fuser);
    fbt::with_model<float>(cfg, [&](auto tag) {
      using M = typename decltype(tag)::type;
      M m = fbt::load_model<M>(src);
      const std::string again = path(std::string("again_") + fuser + ".safetensors");
      fbt::save_model(again, m);
      // it saves back with the same tensor bytes; its config now records glu's init and gated_add's alpha
      // as fuser_options (the v1 file's glu_init / gated_add_alpha, their legacy spellings), the same model
      auto data_section = [](const std::string& bytes) {
        std::uint64_t n = 0;
        std::memcpy(&n, bytes.data(), 8);
        return bytes.substr(8 + n);
      };
      EXPECT_EQ(data_section(read_bytes(again)), data_section(read_bytes(src))) << "a v1 checkpoint's tensors save back byte for byte";
      EXPECT_EQ(fbt::to_json(fbt::read_model_config(again)), fbt::to_json(M::normalized(cfg)));
      if (std::string(fuser) == "glu") EXPECT_EQ(m.cfg.fuser_options.at("init").s, "default");
      if (std::string(fuser) == "gated_add") EXPECT_EQ(m.cfg.fuser_options.at("alpha").r, cfg.gated_add_alpha);
      // the batch of make_v1_fixtures: 2 rows of 12 tokens, a document start at row 1 position 5
      const int B = 2, T = 12;
      std::vector<int> tok(B * T), tgt(B * T);
      std::vector<std::uint8_t> ds(B * T, 0);
      fbt::Rng r2(3);
      for (int i = 0; i < B * T; ++i) tok[i] = int(r2.below(257)), tgt[i] = int(r2.below(257));
      ds[T + 5] = 1;
      fbt::Workspace<M> w;
      fbt::StepOptions o;
      o.K = m.feedback() ? 3 : 1, o.backward = false;
      const fbt::StepStats st = fbt::multipass_step(m, w, fbt::Batch{B, T, tok.data(), tgt.data(), ds.data()}, o);
      const auto& want = expect[fuser]["pass_loss"];
      ASSERT_EQ(int(want.size()), o.K);
      for (int j = 0; j < o.K; ++j) EXPECT_NEAR(st.loss[j], want[j].get<double>(), 2e-6 * want[j].get<double>()) << "pass " << j + 1;
      fbt::Decoder<M> dec(m, 256);
      for (const auto& kv : expect[fuser]["greedy"].items()) {
        fbt::GenerateOptions go;
        go.mode = fbt::DecodeModeSpec::parse(kv.key());
        go.max_new_tokens = 12;
        EXPECT_EQ(fbt::generate(dec, std::vector<int>{72, 101, 108, 108, 111, 44, 32}, go), kv.value().get<std::vector<int>>()) << kv.key();
      }
    });
  }
}

// A v1 training run (model + train_state with its train_config) resumes: steps 2 and 3 draw the same
// pass counts and give the losses the old code gave when it continued the same checkpoint (relative
// 1e-5: two float training steps, whose sums may be ordered differently on another CPU or compiler).
TEST_F(Checkpoint, V1TrainingRunResumes) {
  const std::string ck = path("run/checkpoint");
  fs::create_directories(path("run"));
  fs::copy(fixture("train_checkpoint"), ck, fs::copy_options::recursive);
  const fbt::TrainConfig c = fbt::read_train_config(ck);
  EXPECT_EQ(c.model.fuser, "glu");
  auto t = fbt::Trainer<fbt::Model<float>>::resume(ck, [&](fbt::TrainConfig& cc) { cc.steps = 4, cc.out_dir = path("run"); });
  EXPECT_EQ(t->step, 2);
  const json expect = json::parse(read_bytes(fixture("train_expected.json")))["steps"];
  for (int s = 2; s < 4; ++s) {
    const auto r = t->train_step();
    const json& e = expect[std::to_string(s)];
    EXPECT_EQ(r.K, e["K"].get<int>()) << "step " << s;
    ASSERT_EQ(r.loss.size(), e["loss"].size());
    for (std::size_t j = 0; j < r.loss.size(); ++j) EXPECT_NEAR(r.loss[j], e["loss"][j].get<double>(), 1e-5 * r.loss[j]) << "step " << s << " pass " << j + 1;
  }
}

// ---- hostile files ----------------------------------------------------------------------

// A header-only file (no tensors) whose config claims a huge model: each is refused in milliseconds by
// the config's bounds or by comparing the sizes the config implies with the file's data, before the
// model (or its RoPE table) is built. The old loader built the model first: 88 s and 3.6 GB before a
// bare std::bad_alloc for num_hidden_layers 1e6.
TEST_F(Checkpoint, SmallFileClaimingAHugeModelIsRefusedBeforeAllocating) {
  const std::string p = path("huge.safetensors");
  struct Case {
    const char* field;
    json value;
    std::vector<std::string> parts;
  };
  const Case cases[] = {
      {"num_hidden_layers", 1000000, {"num_hidden_layers", "<= 4096", "1000000"}},
      {"vocab_size", 2000000000, {"vocab_size", "<= 16777216", "2000000000"}},
      {"max_position_embeddings", 2000000000, {"max_position_embeddings", "2000000000"}},
      {"intermediate_size", 1000000, {"vocab_size 11", "intermediate_size 1000000", "parameters", "file holds 0"}},  // within bounds: the data check
      {"vocab_size", 1000000, {"vocab_size 1000000", "parameters", "bytes of tensor data"}},
      {"num_hidden_layers", 4000, {"num_hidden_layers 4000", "bytes of tensor data"}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.field);
    json cfg = fbt::to_json(tiny());
    cfg[c.field] = c.value;
    cfg["fuser_options"] = {{"init", "default"}};  // as a checkpoint records them (a config without them is refused)
    fbt::save_safetensors(p, {}, {{"format", "pt"}, {"config", cfg.dump()}});
    EXPECT_LT(read_bytes(p).size(), 1000u);
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_FBT_ERROR(fbt::load_model<fbt::Model<float>>(p), p, c.parts[0]);
    for (const auto& want : c.parts) EXPECT_FBT_ERROR(fbt::load_model<fbt::Model<float>>(p), want);
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 30.0) << "refused without building the model";
  }
  // A real model whose config asks for a RoPE table far larger than its parameters: refused before the
  // table is built (2^24 positions x head_dim 4 = 2^26 elements for a model of 1,248 parameters).
  fbt::Model<float> m(tiny(), 1);
  Parts<float> parts(m);
  json cfg = fbt::to_json(m.cfg);
  cfg["max_position_embeddings"] = 1 << 24;
  parts.meta["config"] = cfg.dump();
  fbt::save_safetensors(p, parts.refs, parts.meta);
  EXPECT_FBT_ERROR(fbt::load_model<fbt::Model<float>>(p), p, "max_position_embeddings 16777216", "RoPE");
}

// The config must state everything that changes the forward, and the file its format.
TEST_F(Checkpoint, RefusesMissingFormatAndIncompleteConfig) {
  fbt::Model<float> m(tiny(), 1);
  const std::string p = path("meta.safetensors");
  {
    Parts<float> parts(m);
    parts.meta.erase("format");
    fbt::save_safetensors(p, parts.refs, parts.meta);
    EXPECT_FBT_ERROR(fbt::load_model<fbt::Model<float>>(p), p, "\"format\"", "\"pt\"");
    EXPECT_FBT_ERROR(fbt::read_model_config(p), p, "\"format\"");
  }
  for (const char* k : {"rms_norm_eps", "rope_theta", "feedback_source", "input_norm", "qk_norm", "head_dim", "z_loss"}) {
    SCOPED_TRACE(k);
    Parts<float> parts(m);
    json cfg = fbt::to_json(m.cfg);
    cfg.erase(k);
    parts.meta["config"] = cfg.dump();
    fbt::save_safetensors(p, parts.refs, parts.meta);
    EXPECT_FBT_ERROR(fbt::load_model<fbt::Model<float>>(p), p, std::string("\"") + k + "\"", "missing");
  }
}

// Deep nesting and huge values inside the config string are bounded errors, not a crash or a huge line.
TEST_F(Checkpoint, HostileConfigValuesAreBoundedErrors) {
  const std::string p = path("cfg.safetensors");
  fbt::Model<float> m(tiny(), 1);
  const std::string deep = "{\"vocab_size\":" + std::string(150000, '[') + "}";
  json huge = fbt::to_json(m.cfg);
  huge["fuser"] = std::string(2000000, 'g');
  json nan_alpha = fbt::to_json(m.cfg);
  nan_alpha["gated_add_alpha"] = std::numeric_limits<double>::quiet_NaN();  // nlohmann writes null
  json inf_theta = fbt::to_json(m.cfg);
  const std::string inf_text = [&] {
    std::string t = inf_theta.dump();
    const auto at = t.find("\"rope_theta\":") + 13;
    return t.substr(0, at) + "1e400" + t.substr(t.find(',', at));
  }();
  struct Case {
    std::string config;
    std::vector<std::string> parts;
  };
  json well_formed = fbt::to_json(m.cfg);
  well_formed.erase("gated_add_alpha");
  std::string wf = well_formed.dump();
  wf = wf.substr(0, wf.size() - 1) + ",\"gated_add_alpha\":" + std::string(75000, '[') + std::string(75000, ']') + "}";
  const Case cases[] = {{deep, {"nesting deeper than 64 levels at byte"}},
                        {wf, {"nesting deeper than 64 levels at byte"}},
                        {huge.dump(), {"fuser", "2000000 bytes"}},
                        {nan_alpha.dump(), {"gated_add_alpha", "must be a number"}},
                        {inf_text, {"\"config\"", "number overflow", "1e400"}}};
  for (const auto& c : cases) {
    Parts<float> parts(m);
    parts.meta["config"] = c.config;
    fbt::save_safetensors(p, parts.refs, parts.meta);
    for (int k = 0; k < 2; ++k) {
      try {
        if (k == 0) fbt::read_model_config(p);
        else fbt::load_model<fbt::Model<float>>(p);
        ADD_FAILURE() << "accepted config " << c.config.substr(0, 200);
      } catch (const fbt::Error& e) {
        const std::string msg = e.what();
        EXPECT_LT(msg.size(), 600u) << msg.substr(0, 600);
        EXPECT_NE(msg.find(p), std::string::npos) << msg.substr(0, 600);
        for (const auto& part : c.parts) EXPECT_NE(msg.find(part), std::string::npos) << "\"" << msg.substr(0, 600) << "\" lacks \"" << part << "\"";
      }
    }
  }
}

TEST_F(Checkpoint, RefusesFifosAndDevices) {
  const std::string fifo = path("model.safetensors");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_FBT_ERROR(fbt::read_model_config(fifo), fifo, "not a regular file");
  EXPECT_FBT_ERROR(fbt::load_model<fbt::Model<float>>(fifo), fifo, "not a regular file");
  EXPECT_FBT_ERROR(fbt::load_model<fbt::Model<float>>("/dev/zero"), "/dev/zero", "not a regular file");
  fbt::Model<float> m(tiny(), 1);
  EXPECT_FBT_ERROR(fbt::load_model_into(fifo, m), fifo, "not a regular file");
  EXPECT_FBT_ERROR(fbt::load_train_state(fifo, m.params), fifo, "not a regular file");
}

// Inference loads only what inference needs: a loaded model holds its values and constants, no
// gradients and no AdamW moments, and decoding it (through the const model) allocates none. Training
// still gets them, zeroed, the first time it asks.
TEST_F(Checkpoint, LoadedModelHoldsNoTrainingBuffers) {
  fbt::Model<float> src(tiny(), 1);
  randomize(src, 21);
  const std::string p = path("infer.safetensors");
  fbt::save_model(p, src);
  auto m = fbt::load_model<fbt::Model<float>>(p);
  EXPECT_FALSE(m.params.has_grads());
  EXPECT_FALSE(m.params.has_moments());
  const std::size_t held = m.params.allocated_bytes();
  EXPECT_GE(held, (m.params.size() + m.params.constants_size()) * sizeof(float));
  EXPECT_LT(held, 2 * (m.params.size() + m.params.constants_size()) * sizeof(float)) << "values and constants only";
  fbt::Decoder<fbt::Model<float>> dec(m);
  fbt::GenerateOptions go;
  go.max_new_tokens = 5;
  EXPECT_EQ(fbt::generate(dec, std::vector<int>{1, 2, 3}, go).size(), 5u);
  EXPECT_FALSE(m.params.has_grads()) << "decoding allocated gradients";
  EXPECT_FALSE(m.params.has_moments());
  EXPECT_EQ(m.params.allocated_bytes(), held);
  // First use by training: zeroed buffers of the right size.
  const float* g = m.params.grads();
  EXPECT_TRUE(m.params.has_grads());
  for (std::size_t i = 0; i < m.params.size(); ++i) ASSERT_EQ(g[i], 0.0f);
  EXPECT_FALSE(m.params.has_moments());
  EXPECT_EQ(m.params.adam_v()[m.params.size() - 1], 0.0f);
  EXPECT_TRUE(m.params.has_moments());
  EXPECT_EQ(m.params.allocated_bytes(), held + 3 * m.params.size() * sizeof(float));
}

}  // namespace

}  // namespace test_io_checkpoint
