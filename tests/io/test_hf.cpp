// tests/io/test_hf.cpp: Hugging Face model directories as checkpoints (fbt/io/hf.hpp).
//
// Directories written by tests/common/hf_fixture.hpp in exactly transformers' layout (config.json as a
// Qwen3Config writes it, model.safetensors or shards with model.safetensors.index.json) load into fbt
// models whose parameters are the written ones bit for bit (F32), or the originals rounded to the file's
// dtype (BF16, F16), and whose logits equal (bit for bit) those of the model they were written from
// (after the same rounding): tied and untied heads, GQA with head_dim != hidden / heads, single files and
// 3 shards, older and newer transformers' config keys. read_checkpoint_config / load_checkpoint take an
// fbt checkpoint file, an fbt checkpoint directory and a Hugging Face directory alike. Refused, naming
// the file and what is wrong: an architecture or model_type fbt does not implement, rope scaling,
// sliding-window layers, attention biases, dropout; a shard named by a path; a tensor in another shard
// than the index says, one missing from the index or from its shard; a directory without tensors.
// save_hf_dir (fbt export --hf): a baseline and a full-bandwidth model round-trip bit for bit (F32) or as
// their bf16 rounding; the plain part of a full-bandwidth model computes its pass-1 logits, with N_in
// folded into the embedding when pass 1 reads N_in(e) (the head then untied); a stack a Qwen3ForCausalLM
// cannot hold is refused by name for the plain export and written as the remote-code model (FbtForCausalLM,
// with its Python files) otherwise, and a config.json whose Qwen3 keys contradict its fbt_config is refused.
#include <gtest/gtest.h>

#include <fbt/data/tokenizer.hpp>
#include <fbt/io/hf.hpp>
#include <fbt/train/evaluate.hpp>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "common/hf_fixture.hpp"
#include "common/io_test.hpp"
#include "common/tiny_model.hpp"

namespace test_io_hf {

namespace fs = std::filesystem;
using namespace fbt_test;
using M = fbt::Model<float, fbt::NoFuser<float>>;

namespace {

/// A plain Qwen3-shaped model: GQA (4 query heads on 2 key/value heads) and head_dim 6 != 16 / 4.
fbt::ModelConfig plain_config(bool tied) {
  fbt::ModelConfig c;
  c.vocab_size = 37, c.hidden_size = 16, c.num_hidden_layers = 2, c.num_attention_heads = 4, c.num_key_value_heads = 2;
  c.head_dim = 6, c.intermediate_size = 24, c.max_position_embeddings = 64, c.rope_theta = 1e6, c.rms_norm_eps = 1e-6;
  c.tie_word_embeddings = tied, c.fuser = "none", c.qk_norm = true;
  return c;
}

/// `m` with every parameter rounded as a file of `dtype` holds it.
M rounded(const M& m, const std::string& dtype) {
  M r = m;
  for (std::size_t i = 0; i < r.params.size(); ++i) r.params.values()[i] = hf_fixture_round(m.params.values()[i], dtype);
  return r;
}

std::vector<float> logits(const M& m) {
  const TinyBatch b = tiny_batch(2, 9, m.V, 7);
  return fbt::pass_logits(m, b.batch(), 1);
}

class Hf : public TempDirTest {};

}  // namespace

TEST_F(Hf, DirectoriesLoadWithTheWrittenWeightsAndLogits) {
  struct Case {
    bool tied;
    std::string dtype;
    int shards;
    bool new_style;
  };
  for (const Case& k : {Case{true, "F32", 1, false}, Case{false, "F32", 1, false}, Case{true, "F32", 3, false}, Case{false, "BF16", 1, true},
                        Case{true, "F16", 3, true}, Case{false, "F16", 2, false}}) {
    const std::string what = std::string(k.tied ? "tied" : "untied") + " " + k.dtype + " " + std::to_string(k.shards) + " shard(s)" +
                             (k.new_style ? ", newer config keys" : "");
    M m(plain_config(k.tied), 3);
    randomize(m, 5);
    const std::string dir = path("hf_" + k.dtype + std::to_string(k.shards) + (k.tied ? "t" : "u"));
    write_hf_fixture(dir, m, HfFixtureOptions{k.dtype, k.shards, k.new_style});
    ASSERT_TRUE(fbt::is_hf_model_dir(dir));
    ASSERT_EQ(fs::exists(fs::path(dir) / "model.safetensors.index.json"), k.shards > 1) << what;

    const fbt::ModelConfig c = fbt::read_checkpoint_config(dir);
    EXPECT_EQ(c.fuser, "none") << what;
    EXPECT_EQ(c.head_dim, 6) << what;
    EXPECT_EQ(c.num_key_value_heads, 2) << what;
    EXPECT_EQ(c.rope_theta, 1e6) << what;
    EXPECT_EQ(c.tie_word_embeddings, k.tied) << what;

    const M want = rounded(m, k.dtype);
    const M got = fbt::load_checkpoint<M>(dir);
    ASSERT_EQ(got.params.size(), want.params.size());
    EXPECT_EQ(std::memcmp(got.params.values(), want.params.values(), want.params.size() * sizeof(float)), 0)
        << what << ": the parameters are the file's, bit for bit";
    if (k.dtype != "F32")
      EXPECT_NE(std::memcmp(got.params.values(), m.params.values(), m.params.size() * sizeof(float)), 0) << what << ": the rounding shows";
    const std::vector<float> a = logits(got), b = logits(want);
    EXPECT_EQ(a, b) << what << ": logits equal those of the model the directory was written from";
  }
}

TEST_F(Hf, OneEntryPointForEveryKindOfCheckpoint) {
  M m(plain_config(true), 3);
  randomize(m, 6);
  fs::create_directories(path("fbt_dir"));
  fbt::save_model(path("fbt_dir/model.safetensors"), m);
  write_hf_fixture(path("hf"), m);
  for (const std::string& p : {path("fbt_dir"), path("fbt_dir/model.safetensors"), path("hf")}) {
    EXPECT_EQ(fbt::read_checkpoint_config(p).hidden_size, 16) << p;
    const M r = fbt::load_checkpoint<M>(p);
    EXPECT_EQ(std::memcmp(r.params.values(), m.params.values(), m.params.size() * sizeof(float)), 0) << p;
  }
  EXPECT_FALSE(fbt::is_hf_model_dir(path("fbt_dir")));
  EXPECT_FALSE(fbt::is_hf_model_dir(path("fbt_dir/model.safetensors")));
  // a model type with a concrete full-bandwidth fuser does not load a plain directory (Model<float> loads it)
  using GluModel = fbt::Model<float, fbt::GluFuser<float>>;
  EXPECT_FBT_ERROR(fbt::load_checkpoint<GluModel>(path("hf")), "fuser is \"none\"", "\"glu\"");
  EXPECT_EQ(fbt::load_checkpoint<fbt::Model<float>>(path("hf")).cfg.fuser, "none");
}

TEST_F(Hf, ConfigsFbtDoesNotImplementAreRefusedByName) {
  M m(plain_config(true), 3);
  const std::string base = hf_fixture_config_json(m.cfg, {});
  struct Bad {
    std::string from, to, says;
  };
  for (const Bad& b : {Bad{"\"Qwen3ForCausalLM\"", "\"Qwen3MoeForCausalLM\"", "\"Qwen3MoeForCausalLM\" is not an architecture fbt loads"},
                       Bad{"\"model_type\": \"qwen3\"", "\"model_type\": \"llama\"", "model_type"},
                       Bad{"\"rope_scaling\": null", "\"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 4.0}", "rope_scaling"},
                       Bad{"[\"full_attention\", \"full_attention\"]", "[\"full_attention\", \"chunked_attention\"]", "chunked_attention"},
                       Bad{"\"attention_bias\": false", "\"attention_bias\": true", "attention biases"},
                       Bad{"\"attention_dropout\": 0.0", "\"attention_dropout\": 0.1", "dropout"},
                       Bad{"\"hidden_act\": \"silu\"", "\"hidden_act\": \"gelu\"", "silu"},
                       Bad{"\"head_dim\": 6,\n", "", "\"head_dim\": missing"}}) {
    const std::string dir = path("bad");
    fs::remove_all(dir);
    write_hf_fixture(dir, m);
    std::string cfg = base;
    const auto at = cfg.find(b.from);
    ASSERT_NE(at, std::string::npos) << b.from;
    cfg.replace(at, b.from.size(), b.to);
    std::ofstream(fs::path(dir) / "config.json") << cfg;
    EXPECT_FBT_ERROR(fbt::load_checkpoint<M>(dir), "config.json", b.says);
  }
  // newer transformers' rope_parameters: only the default RoPE
  const std::string dir = path("rope");
  write_hf_fixture(dir, m, HfFixtureOptions{"F32", 1, true});
  std::string cfg = hf_fixture_config_json(m.cfg, HfFixtureOptions{"F32", 1, true});
  cfg.replace(cfg.find("\"default\""), 9, "\"linear\"");
  std::ofstream(fs::path(dir) / "config.json") << cfg;
  EXPECT_FBT_ERROR(fbt::load_checkpoint<M>(dir), "rope_parameters", "\"linear\"");
}

TEST_F(Hf, HostileIndexesAndShardsAreRefused) {
  M m(plain_config(false), 3);
  const std::string dir = path("sharded"), index = (fs::path(dir) / "model.safetensors.index.json").string();
  write_hf_fixture(dir, m, HfFixtureOptions{"F32", 2, false});
  const std::string good = read_bytes(index);
  auto with_index = [&](const std::string& text) { std::ofstream(index, std::ios::trunc) << text; };
  const std::string shard1 = "model-00001-of-00002.safetensors", shard2 = "model-00002-of-00002.safetensors";

  // a shard named by a path (outside the directory)
  std::string t = good;
  t.replace(t.find(shard1), shard1.size(), "../" + shard1);
  with_index(t);
  EXPECT_FBT_ERROR(fbt::load_checkpoint<M>(dir), index, "is not a plain file name");
  // the index puts a tensor in the other shard
  t = good;
  const std::string emb = "\"model.embed_tokens.weight\": \"" + shard1 + "\"";
  t.replace(t.find(emb), emb.size(), "\"model.embed_tokens.weight\": \"" + shard2 + "\"");
  with_index(t);
  EXPECT_FBT_ERROR(fbt::load_checkpoint<M>(dir), shard1, "model.embed_tokens.weight", "puts it in");
  // a tensor the index does not list
  t = good;
  t.replace(t.find(emb + ",\n"), emb.size() + 2, "");
  with_index(t);
  EXPECT_FBT_ERROR(fbt::load_checkpoint<M>(dir), "model.embed_tokens.weight", "is not in the index");
  // the index lists a tensor its shard does not hold
  t = good;
  t.replace(t.find("\"weight_map\": {\n"), 16, "\"weight_map\": {\n    \"model.extra.weight\": \"" + shard2 + "\",\n");
  with_index(t);
  EXPECT_FBT_ERROR(fbt::load_checkpoint<M>(dir), shard2, "model.extra.weight", "does not hold it");
  // a missing shard, a broken index, no weight_map
  with_index(good);
  fs::remove(fs::path(dir) / shard2);
  EXPECT_FBT_ERROR(fbt::load_checkpoint<M>(dir), shard2);
  with_index("{\"weight_map\": [1, 2]}");
  EXPECT_FBT_ERROR(fbt::load_checkpoint<M>(dir), index, "weight_map");
  with_index("{\"metadata\": {}}");
  EXPECT_FBT_ERROR(fbt::load_checkpoint<M>(dir), index, "has no \"weight_map\"");
  with_index("{");
  EXPECT_FBT_ERROR(fbt::load_checkpoint<M>(dir), index);
  // no tensors at all
  fs::remove(index);
  EXPECT_FBT_ERROR(fbt::load_checkpoint<M>(dir), "needs model.safetensors or model.safetensors.index.json");
}

// An index far larger than any model fbt builds (2,000,000 entries over 4,096 shard names, 44 MB, within
// the 64 MiB file limit) is refused as soon as the parse passes the most tensors a model can have: the
// error says so, rather than (before) a missing shard after 20 s and 580 MB of parsing and searching.
// One over the limit is refused by its count; exactly the limit passes the index checks (and is then
// refused for its first missing shard). The 2,000,000-entry case runs in well under a second.
TEST_F(Hf, IndexesOverTheTensorLimitAreRefusedAtOnce) {
  M m(plain_config(true), 3);
  const std::string dir = path("huge"), index = (fs::path(dir) / "model.safetensors.index.json").string();
  fs::create_directories(dir);
  std::ofstream(fs::path(dir) / "config.json") << hf_fixture_config_json(m.cfg, {});
  auto write_index = [&](std::size_t entries) {
    std::string t = "{\"metadata\": {\"total_size\": 1}, \"weight_map\": {";
    t.reserve(entries * 24 + 64);
    for (std::size_t i = 0; i < entries; ++i)
      t += (i ? ",\"t" : "\"t") + std::to_string(i) + "\":\"s" + std::to_string(i % fbt::kHfMaxShards) + ".st\"";
    t += "}}";
    std::ofstream(index, std::ios::binary | std::ios::trunc) << t;
    return t.size();
  };
  ASSERT_GT(write_index(2000000), std::size_t(40) << 20);
  EXPECT_FBT_ERROR(fbt::load_checkpoint<M>(dir), index, "more than", "values", "at most 65536 tensors");
  write_index(fbt::kHfMaxIndexEntries + 1);
  EXPECT_FBT_ERROR(fbt::load_checkpoint<M>(dir), index, "names 65537 tensors, more than the 65536");
  write_index(fbt::kHfMaxIndexEntries);
  EXPECT_FBT_ERROR(fbt::load_checkpoint<M>(dir), (fs::path(dir) / "s0.st").string(), "cannot open");
}

TEST_F(Hf, TensorErrorsNameTheirShard) {
  M m(plain_config(true), 3);
  fbt::ModelConfig wrong = m.cfg;
  wrong.intermediate_size = 20;  // the config says 20, the tensors are 24 wide
  const std::string dir = path("mismatch");
  write_hf_fixture(dir, m, HfFixtureOptions{"F32", 2, false});
  std::ofstream(fs::path(dir) / "config.json", std::ios::trunc) << hf_fixture_config_json(wrong, {});
  EXPECT_FBT_ERROR(fbt::load_checkpoint<M>(dir), "model-0000", "mlp.", "shape", "from the config");
}

TEST_F(Hf, ExportRoundTrips) {
  // a baseline, F32 and BF16
  M b(plain_config(true), 3);
  randomize(b, 8);
  fbt::save_hf_dir(path("base"), b);
  const M b2 = fbt::load_checkpoint<M>(path("base"));
  EXPECT_EQ(std::memcmp(b2.params.values(), b.params.values(), b.params.size() * sizeof(float)), 0);
  EXPECT_EQ(fbt::to_json(b2.cfg), fbt::to_json(b.cfg));
  fbt::save_hf_dir(path("base16"), b, fbt::HfExportOptions{false, "BF16"});
  const M b3 = fbt::load_checkpoint<M>(path("base16")), want = rounded(b, "BF16");
  EXPECT_EQ(std::memcmp(b3.params.values(), want.params.values(), b.params.size() * sizeof(float)), 0);
  // a full-bandwidth model comes back as itself
  using G = fbt::Model<float>;
  fbt::ModelConfig gc = plain_config(true);
  gc.fuser = "glu";
  G g(gc, 4);
  randomize(g, 9);
  fbt::save_hf_dir(path("full"), g);
  const G g2 = fbt::load_checkpoint<G>(path("full"));
  EXPECT_EQ(std::memcmp(g2.params.values(), g.params.values(), g.params.size() * sizeof(float)), 0);
  EXPECT_EQ(fbt::to_json(g2.cfg), fbt::to_json(g.cfg));
}

// A directory fbt exported carries fbt_config, but transformers builds from the top-level keys: each is
// checked as in a config.json without fbt_config, by load and by init_from alike, and refused by name
// when it asks for what fbt does not compute (before, they were ignored beside fbt_config). Keys that do
// not change the model (token ids, use_cache, transformers_version, a sliding_window that
// use_sliding_window false turns off) are accepted.
TEST_F(Hf, AnExportsTopLevelKeysAreCheckedBesideFbtConfig) {
  using G = M;  // a baseline: its export is a Qwen3ForCausalLM with fbt_config (a full-bandwidth model's is FbtForCausalLM)
  const fbt::ModelConfig gc = plain_config(true);
  G g(gc, 4);
  randomize(g, 11);
  const std::string dir = path("export"), cj = (fs::path(dir) / "config.json").string();
  fbt::save_hf_dir(dir, g);
  const nlohmann::json exported = nlohmann::json::parse(read_bytes(cj));
  auto with = [&](const std::string& key, const nlohmann::json* value) {
    nlohmann::json j = exported;
    if (value) j[key] = *value;
    else j.erase(key);
    std::ofstream(cj, std::ios::trunc) << j.dump(2);
  };
  struct Bad {
    std::string key;
    nlohmann::json value;
    std::string says;
  };
  const Bad bads[] = {{"rope_scaling", {{"rope_type", "yarn"}, {"factor", 4.0}}, "plain RoPE"},
                      {"hidden_act", "gelu", "silu"},
                      {"attention_bias", true, "attention biases"},
                      {"model_type", "llama", "expected \"fbt\" or \"qwen3\""},
                      {"architectures", {"LlamaForCausalLM"}, "not an architecture fbt loads"},
                      {"layer_types", {"full_attention", "linear_attention"}, "full_attention and sliding_attention"},
                      {"attention_dropout", 0.1, "dropout"},
                      {"rope_parameters", {{"rope_type", "linear"}, {"rope_theta", 1e6}}, "plain RoPE"},
                      {"quantization_config", {{"quant_method", "gptq"}}, "unknown key"},
                      {"rms_norm_eps", 1e-5, "fbt_config says"},
                      {"rope_parameters", {{"rope_type", "default"}, {"rope_theta", 5e5}}, "but \"rope_theta\" is"}};
  for (const Bad& b : bads) {
    SCOPED_TRACE(b.key + " " + b.value.dump());
    with(b.key, &b.value);
    EXPECT_FBT_ERROR(fbt::load_checkpoint<G>(dir), "config.json", "\"" + b.key + "\"", b.says);
    G fresh(gc, 5);
    EXPECT_FBT_ERROR(fbt::init_from_checkpoint(fresh, dir), "config.json", "\"" + b.key + "\"", b.says);
  }
  with("head_dim", nullptr);  // transformers would take its default (128)
  EXPECT_FBT_ERROR(fbt::load_checkpoint<G>(dir), "config.json", "\"head_dim\"", "missing");
  nlohmann::json rp = exported;  // newer transformers' rope_parameters in place of rope_theta: compared with fbt_config
  rp.erase("rope_theta");
  rp["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 5e5}};
  std::ofstream(cj, std::ios::trunc) << rp.dump(2);
  EXPECT_FBT_ERROR(fbt::load_checkpoint<G>(dir), "config.json", "\"rope_parameters\"", "fbt_config says");
  nlohmann::json sw = exported;  // a window at the top level only: transformers would build another model
  sw["use_sliding_window"] = true, sw["sliding_window"] = 3, sw["layer_types"] = {"full_attention", "sliding_attention"};
  std::ofstream(cj, std::ios::trunc) << sw.dump(2);
  EXPECT_FBT_ERROR(fbt::load_checkpoint<G>(dir), "config.json", "layer 1 a sliding window of 3", "fbt_config says 0");
  // inert keys: what they change is not the model's function
  nlohmann::json j = exported;
  j["bos_token_id"] = 1, j["eos_token_id"] = 2, j["pad_token_id"] = 0, j["use_cache"] = false, j["transformers_version"] = "4.51.3";
  j["sliding_window"] = 4096, j["max_window_layers"] = 28, j["torch_dtype"] = "bfloat16", j["layer_types"] = {"full_attention", "full_attention"};
  std::ofstream(cj, std::ios::trunc) << j.dump(2);
  const G back = fbt::load_checkpoint<G>(dir);
  EXPECT_EQ(std::memcmp(back.params.values(), g.params.values(), g.params.size() * sizeof(float)), 0);
  G fresh(gc, 5);
  EXPECT_TRUE(fbt::init_from_checkpoint(fresh, dir).empty());
}

// A tied checkpoint whose lm_head.weight is not the embedding: load refuses it, and so does init_from
// (before, init_from dropped the tensor unseen and the run computed another head). An exact copy is accepted.
// Sliding-window Qwen3 directories load with Hugging Face's reading of the four keys, and an export of a
// windowed model writes them so that the top level (what transformers builds) and fbt_config agree.
TEST_F(Hf, SlidingWindowDirectoriesLoadAsTransformersReadsThem) {
  M m(plain_config(true), 3);
  randomize(m, 8);
  const std::string dir = path("sw"), cj = (fs::path(dir) / "config.json").string();
  write_hf_fixture(dir, m);
  const nlohmann::json base = nlohmann::json::parse(hf_fixture_config_json(m.cfg, {}));
  struct Case {
    nlohmann::json edits;
    std::vector<int> windows;
  };
  const Case cases[] = {
      {{{"use_sliding_window", true}, {"sliding_window", 3}, {"layer_types", {"sliding_attention", "full_attention"}}}, {3, 0}},
      {{{"use_sliding_window", true}, {"sliding_window", 3}, {"max_window_layers", 1}, {"layer_types", nullptr}}, {0, 3}},  // HF's default types
      {{{"use_sliding_window", true}, {"sliding_window", 3}, {"max_window_layers", 28}, {"layer_types", nullptr}}, {0, 0}},
      {{{"use_sliding_window", false}, {"sliding_window", 3}, {"layer_types", {"full_attention", "full_attention"}}}, {0, 0}},  // window off
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.edits.dump());
    nlohmann::json j = base;
    for (auto it = c.edits.begin(); it != c.edits.end(); ++it)
      if (it->is_null()) j.erase(it.key());
      else j[it.key()] = *it;
    std::ofstream(cj, std::ios::trunc) << j.dump(2);
    const M back = fbt::load_checkpoint<M>(dir);
    EXPECT_EQ(back.windows, c.windows);
  }
  // issue 47: sliding layers with the window off (transformers would run them as full attention) are refused
  {
    nlohmann::json j = base;
    j["use_sliding_window"] = false, j["sliding_window"] = 3, j["layer_types"] = {"sliding_attention", "sliding_attention"};
    std::ofstream(cj, std::ios::trunc) << j.dump(2);
    EXPECT_FBT_ERROR(fbt::load_checkpoint<M>(dir), cj, "use_sliding_window is false but layer_types gives sliding_attention layers");
  }
  // export of a windowed model: transformers' keys at the top level, and it loads back the same
  fbt::ModelConfig wc = plain_config(true);
  wc.sliding_window = 2, wc.layer_types = {"sliding_attention", "full_attention"};
  M w(wc, 4);
  randomize(w, 9);
  const std::string out = path("sw_export");
  fbt::save_hf_dir(out, w);
  const nlohmann::json e = nlohmann::json::parse(read_bytes((fs::path(out) / "config.json").string()));
  EXPECT_EQ(e["use_sliding_window"], true);
  EXPECT_EQ(e["sliding_window"], 2);
  EXPECT_EQ(e["max_window_layers"], 0);
  EXPECT_EQ(e["layer_types"], nlohmann::json({"sliding_attention", "full_attention"}));
  const M back = fbt::load_checkpoint<M>(out);
  EXPECT_EQ(back.windows, (std::vector<int>{2, 0}));
  EXPECT_EQ(std::memcmp(back.params.values(), w.params.values(), w.params.size() * sizeof(float)), 0);
}

TEST_F(Hf, InitFromRefusesATiedHeadThatIsNotTheEmbedding) {
  M m(plain_config(true), 3);
  randomize(m, 12);
  std::vector<float> head(m.params.spec("model.embed_tokens.weight").size);
  std::memcpy(head.data(), m.params.value("model.embed_tokens.weight"), head.size() * sizeof(float));
  auto save_with_head = [&](const std::string& p) {
    std::vector<fbt::TensorRef> t = fbt::model_tensors(m);
    t.push_back({"lm_head.weight", "F32", m.params.spec("model.embed_tokens.weight").shape, head.data()});
    fbt::save_safetensors(p, t, fbt::model_metadata(m.cfg));
  };
  save_with_head(path("copy.safetensors"));
  M a(plain_config(true), 4);
  EXPECT_TRUE(fbt::init_from_checkpoint(a, path("copy.safetensors")).empty());
  EXPECT_EQ(std::memcmp(a.params.values(), m.params.values(), m.params.size() * sizeof(float)), 0);
  head[7] += 0.25f;
  save_with_head(path("differs.safetensors"));
  EXPECT_FBT_ERROR(fbt::load_checkpoint<M>(path("differs.safetensors")), "differs.safetensors", "lm_head.weight", "differs from");
  M b(plain_config(true), 4);
  const std::vector<float> before(b.params.values(), b.params.values() + b.params.size());
  EXPECT_FBT_ERROR(fbt::init_from_checkpoint(b, path("differs.safetensors")), "init_from_checkpoint", "differs.safetensors",
                   "tensor \"lm_head.weight\"", "differs from model.embed_tokens.weight at index 7");
  EXPECT_EQ(std::memcmp(b.params.values(), before.data(), before.size() * sizeof(float)), 0) << "the model is unchanged";
  // a head of another shape is refused by its shape, never compared out of bounds
  std::vector<fbt::TensorRef> t = fbt::model_tensors(m);
  t.push_back({"lm_head.weight", "F32", fbt::Shape{36, 16}, head.data()});  // the embedding is [37, 16]
  fbt::save_safetensors(path("short.safetensors"), t, fbt::model_metadata(m.cfg));
  EXPECT_FBT_ERROR(fbt::init_from_checkpoint(b, path("short.safetensors")), "short.safetensors", "lm_head.weight", "in a tied model, expected the embedding's");
}

// Exporting over an earlier sharded export removes its index and shards (before, they stayed beside the
// new model.safetensors); other files are left alone. A write that fails (config.json's temporary file on
// a full disk, /dev/full) leaves the earlier export whole and no temporary file (before, model.safetensors
// was replaced first, and the directory held the new tensors under the old config).
TEST_F(Hf, ExportReplacesAnEarlierExportWhole) {
  M old_model(plain_config(false), 3), new_model(plain_config(true), 4);
  randomize(old_model, 13), randomize(new_model, 14);
  const std::string dir = path("out");
  write_hf_fixture(dir, old_model, HfFixtureOptions{"F32", 3, false});
  ASSERT_TRUE(fs::exists(fs::path(dir) / "model-00003-of-00003.safetensors"));
  std::ofstream(fs::path(dir) / "tokenizer.json") << "{}";
  std::ofstream(fs::path(dir) / "model-1.safetensors") << "not a shard name save_pretrained writes";
  fbt::save_hf_dir(dir, new_model);
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"config.json", "model-1.safetensors", "model.safetensors", "tokenizer.json"}));
  const M back = fbt::load_checkpoint<M>(dir);
  EXPECT_EQ(std::memcmp(back.params.values(), new_model.params.values(), new_model.params.size() * sizeof(float)), 0);

  // a failed write: the directory keeps the export it held, and no temporary file
  if (!fs::exists("/dev/full")) GTEST_SKIP() << "no /dev/full to fill";
  fs::create_symlink("/dev/full", fs::path(dir) / "config.json.tmp");
  EXPECT_FBT_ERROR(fbt::save_hf_dir(dir, old_model), "config.json", "disk full");
  EXPECT_FALSE(fs::exists(fs::symlink_status(fs::path(dir) / "config.json.tmp")));
  EXPECT_FALSE(fs::exists(fs::path(dir) / "model.safetensors.tmp"));
  const M kept = fbt::load_checkpoint<M>(dir);
  EXPECT_EQ(std::memcmp(kept.params.values(), new_model.params.values(), new_model.params.size() * sizeof(float)), 0);
  EXPECT_TRUE(kept.cfg.tie_word_embeddings);
}

TEST_F(Hf, ThePlainPartComputesPassOne) {
  using G = fbt::Model<float>;
  for (const std::string input_norm : {"all", "feedback_passes"})
    for (bool tied : {true, false}) {
      fbt::ModelConfig gc = plain_config(tied);
      gc.fuser = "glu", gc.input_norm = input_norm;
      G g(gc, 4);
      randomize(g, 10);
      const std::string dir = path("plain_" + input_norm + (tied ? "_tied" : "_untied"));
      fbt::save_hf_dir(dir, g, fbt::HfExportOptions{true, "F32"});
      const fbt::ModelConfig pc = fbt::read_checkpoint_config(dir);
      EXPECT_EQ(pc.fuser, "none");
      EXPECT_EQ(pc.tie_word_embeddings, tied && input_norm != "all") << "N_in folded into the embedding unties the head";
      const M p = fbt::load_checkpoint<M>(dir);
      const TinyBatch tb = tiny_batch(2, 9, g.V, 7);
      const std::vector<float> want = fbt::pass_logits(g, tb.batch(), 1), got = fbt::pass_logits(p, tb.batch(), 1);
      ASSERT_EQ(got.size(), want.size());
      // the same float operations in the same order on every row: equal, bit for bit
      EXPECT_EQ(got, want) << "input_norm " << input_norm << (tied ? ", tied" : ", untied");
      if (input_norm == "all") {  // the fold is what makes it so: the stack on the raw embedding computes something else
        fbt::ModelConfig rc = pc;
        rc.tie_word_embeddings = tied;
        M raw(rc, 1);
        for (const auto& sp : raw.params.specs())
          std::memcpy(raw.params.value(sp.name), g.params.value(sp.name), sp.size * sizeof(float));
        EXPECT_NE(fbt::pass_logits(raw, tb.batch(), 1), want);
      }
    }
}

TEST_F(Hf, WhatQwen3CannotHoldIsTheRemoteCodeModelOrRefusedAsPlain) {
  static_assert(fbt::kHfByteVocabSize == fbt::ByteTokenizer::kVocabSize && fbt::kHfByteSep == fbt::ByteTokenizer::kSep);
  // a baseline a Qwen3ForCausalLM cannot hold is written as the remote-code model FbtForCausalLM (config.json
  // names it and its auto_map, the Python files beside it), and read back bit for bit
  for (const char* knob : {"block_norm", "qk_norm", "layer_intermediate_size"}) {
    fbt::ModelConfig c = plain_config(true);
    if (std::string(knob) == "block_norm") c.block_norm = "sandwich";
    if (std::string(knob) == "qk_norm") c.qk_norm = false;
    if (std::string(knob) == "layer_intermediate_size") c.layer_intermediate_size = {24, 16};
    c.vocab_size = fbt::ByteTokenizer::kVocabSize;  // the byte vocabulary: the export names the byte tokenizer
    M b(c, 1);
    randomize(b, 5);
    const std::string d = path(std::string("remote_") + knob);
    fbt::save_hf_dir(d, b);
    const std::string cj = read_bytes((fs::path(d) / "config.json").string());
    EXPECT_NE(cj.find("\"FbtForCausalLM\""), std::string::npos) << knob;
    EXPECT_NE(cj.find("\"modeling_fbt.FbtForCausalLM\""), std::string::npos) << knob;
    for (const auto& f : fbt::hf_remote_code_files()) EXPECT_EQ(read_bytes((fs::path(d) / f.first).string()), f.second) << f.first;
    EXPECT_TRUE(fs::exists(fs::path(d) / "tokenizer_config.json"));
    EXPECT_NE(cj.find("\"eos_token_id\": 256"), std::string::npos) << knob;
    const M back = fbt::load_checkpoint<M>(d);
    EXPECT_EQ(std::memcmp(back.params.values(), b.params.values(), b.params.size() * sizeof(float)), 0) << knob;
    EXPECT_EQ(fbt::to_json(back.cfg), fbt::to_json(b.cfg)) << knob;
  }
  // the plain (Qwen3) export of a full-bandwidth model whose stack a Qwen3 cannot hold is refused by name
  using G = fbt::Model<float>;
  fbt::ModelConfig c = plain_config(true);
  c.fuser = "glu", c.block_norm = "sandwich";
  EXPECT_FBT_ERROR(fbt::save_hf_dir(path("s"), G(c, 1), fbt::HfExportOptions{true, "F32"}), "block_norm \"sandwich\"", "--plain");
  c = plain_config(true);
  c.fuser = "glu", c.qk_norm = false;
  EXPECT_FBT_ERROR(fbt::save_hf_dir(path("q"), G(c, 1), fbt::HfExportOptions{true, "F32"}), "qk_norm false");
  // the remote-code model's own keys are checked when fbt reads its config.json
  fbt::ModelConfig fc = plain_config(true);
  fc.fuser = "glu";
  G g(fc, 2);
  fbt::save_hf_dir(path("fb"), g);
  const std::string fcj = (fs::path(path("fb")) / "config.json").string();
  std::string ftext = read_bytes(fcj);
  const std::string pf = "\"passes\": 1", pt = "\"passes\": 0";
  ASSERT_NE(ftext.find(pf), std::string::npos);
  ftext.replace(ftext.find(pf), pf.size(), pt);
  std::ofstream(fcj, std::ios::trunc) << ftext;
  EXPECT_FBT_ERROR(fbt::load_checkpoint<G>(path("fb")), "\"passes\"", "an integer >= 1");
  // a config.json whose Qwen3 keys say otherwise than its fbt_config
  M b(plain_config(true), 3);
  fbt::save_hf_dir(path("edited"), b);
  const std::string cj = (fs::path(path("edited")) / "config.json").string();
  std::string text = read_bytes(cj);
  const std::string from = "\"num_hidden_layers\": 2", to = "\"num_hidden_layers\": 3";
  text.replace(text.find(from), from.size(), to);
  std::ofstream(cj, std::ios::trunc) << text;
  EXPECT_FBT_ERROR(fbt::load_checkpoint<M>(path("edited")), "num_hidden_layers", "fbt_config");
}

}  // namespace test_io_hf
