// tests/io/test_hf.cpp: Hugging Face model directories as checkpoints (fbt/io/hf.hpp; issue 15).
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
// cannot hold is refused by name, and a config.json whose Qwen3 keys contradict its fbt_config too.
#include <gtest/gtest.h>

#include <fbt/io/hf.hpp>
#include <fbt/train/evaluate.hpp>

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
  // a full-bandwidth type does not load a plain directory
  EXPECT_FBT_ERROR(fbt::load_checkpoint<fbt::Model<float>>(path("hf")), "fuser is \"none\"", "\"glu\"");
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
                       Bad{"\"use_sliding_window\": false", "\"use_sliding_window\": true", "sliding-window"},
                       Bad{"[\"full_attention\", \"full_attention\"]", "[\"full_attention\", \"sliding_attention\"]", "sliding_attention"},
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

TEST_F(Hf, ExportRefusesWhatQwen3CannotHold) {
  fbt::ModelConfig c = plain_config(true);
  c.block_norm = "sandwich";
  EXPECT_FBT_ERROR(fbt::save_hf_dir(path("s"), M(c, 1)), "block_norm \"sandwich\"");
  c = plain_config(true);
  c.qk_norm = false;
  EXPECT_FBT_ERROR(fbt::save_hf_dir(path("q"), M(c, 1)), "qk_norm false");
  c = plain_config(true);
  c.layer_intermediate_size = {24, 16};
  EXPECT_FBT_ERROR(fbt::save_hf_dir(path("h"), M(c, 1)), "per-layer sizes");
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
