// tests/model/test_mixed_stack.cpp: a stack of mixed block types: Model<T>'s blocks are erased at their slot
// (AnyBlock<T>, fbt/layers/any_piece.hpp), so layer l may be any registered type; through the model, the K-pass
// step, the decoder, checkpoints and the trainer, none of which is changed for it.
//
// The stack: 3 layers, decoder, gated_attn, decoder: a user block (examples/own_project/my_pieces.hpp GatedBlock,
// the attention output scaled by a learned gate) between two built-in ones, chosen by the config key
// layer_blocks, its option given as block_options "gated_attn.gate_init". Checks:
// - each layer is built as its type, with its own tensors and its type's options; the config records
//   block "mixed", layer_blocks and the scoped options; a model composed from parts describes itself the same;
// - the K = 3 chain gradient against central finite differences in double (normwise rel err < 1e-6);
// - KV-cached decoding equals the training forward: standard decoding = pass 1's logits at every position,
//   the fused(k) prefill = pass k+1's logits at the prompt's last position (1e-10, logits are O(1));
// - a checkpoint round trip, and refusals naming the layer: a layer_blocks entry this program does not know,
//   a model whose layer_blocks differs, a block option of no used type, a model of one concrete block type
//   given layer_blocks;
// - the trainer runs a few steps (float) and resumes bit-identically.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <unistd.h>

#include "common/errors.hpp"
#include "common/pass_runner.hpp"
#include "common/tiny_model.hpp"
#include "examples/own_project/my_pieces.hpp"
#include "fbt/decode/decoder.hpp"
#include "fbt/io/checkpoint.hpp"
#include "fbt/train/trainer.hpp"

// The file's own namespace: with FBT_TEST_UNITY an area's test files share one translation unit.
namespace test_model_mixed_stack {

using namespace fbt;
using namespace fbt_test;

namespace {

FBT_REGISTER_BLOCK(GatedBlock);  // "gated_attn", known to every config this program reads
template <class T> using MixedModel = Model<T>;

ModelConfig mixed_config(const std::string& fuser = "glu") {
  ModelConfig c = tiny_config(fuser);
  c.num_hidden_layers = 3, c.block = "mixed", c.layer_blocks = {"decoder", "gated_attn", "decoder"};
  c.block_options["gated_attn.gate_init"] = OptionValue::of_real(0.5);
  return c;
}

std::string temp_dir(const std::string& name) {
  const std::string d = testing::TempDir() + "fbt_mixed_" + name + "_" + std::to_string(::getpid());
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d;
}

double max_diff(const std::vector<double>& a, const std::vector<double>& b) {
  double d = 0;
  for (std::size_t i = 0; i < a.size(); ++i) d = std::max(d, std::abs(a[i] - b[i]));
  return d;
}

}  // namespace

TEST(MixedStack, EachLayerIsBuiltAsItsType) {
  const MixedModel<double> m(mixed_config(), 1);
  ASSERT_EQ(m.L, 3);
  EXPECT_EQ(m.blocks[0].type_name(), "decoder");
  EXPECT_EQ(m.blocks[1].type_name(), "gated_attn");
  EXPECT_EQ(m.blocks[2].type_name(), "decoder");
  ASSERT_NE(m.blocks[1].get_if<GatedBlock<double>>(), nullptr);
  EXPECT_EQ(m.blocks[1].get_if<GatedBlock<double>>()->attn.out.gate_init, 0.5) << "the type's own option, from block_options gated_attn.gate_init";
  EXPECT_TRUE(m.params.has("model.layers.1.self_attn.gate.weight"));
  EXPECT_FALSE(m.params.has("model.layers.0.self_attn.gate.weight"));
  EXPECT_FALSE(m.params.has("model.layers.2.self_attn.gate.weight"));
  EXPECT_EQ(m.cfg.block, "mixed");
  EXPECT_EQ(m.cfg.layer_blocks, (std::vector<std::string>{"decoder", "gated_attn", "decoder"}));
  ASSERT_EQ(m.cfg.block_options.count("gated_attn.gate_init"), 1u);
  EXPECT_EQ(m.cfg.block_options.at("gated_attn.gate_init").r, 0.5);
  // one model type for every stack
  bool one_type = false;
  with_model<double>(mixed_config(), [&](auto tag) { one_type = std::is_same<typename decltype(tag)::type, Model<double>>::value; });
  EXPECT_TRUE(one_type);
}

TEST(MixedStack, ComposedFromPartsDescribesItselfAsTheConfigDoes) {
  const ModelConfig c = mixed_config();
  LayerSpec s = layer_spec(c, 0);
  std::vector<AnyBlock<double>> bl{make_block<DecoderBlock<double>>(s), make_block<GatedBlock<double>>(layer_spec(c, 1), {{"gate_init", OptionValue::of_real(0.5)}}),
                                make_block<DecoderBlock<double>>(layer_spec(c, 2))};
  MixedModel<double> m(Embedding<double>(c.vocab_size, c.hidden_size, c.initializer_range), bl, FuserConfig<GluFuser<double>>::make(c), model_options(c), 1);
  EXPECT_EQ(m.cfg.block, "mixed");
  EXPECT_EQ(m.cfg.layer_blocks, c.layer_blocks);
  EXPECT_EQ(MixedModel<double>::normalized(m.cfg).block_options, MixedModel<double>::normalized(c).block_options);
  const MixedModel<double> built(c, 1);
  EXPECT_EQ(m.params.layout().specs.size(), built.params.layout().specs.size());
}

TEST(MixedStack, ChainBackwardMatchesFiniteDifference) {
  const ModelConfig cfg = mixed_config();
  MixedModel<double> m(cfg, 1);
  randomize(m, 2);
  TinyBatch tb = tiny_batch(2, 6, cfg.vocab_size, 3);
  tb.doc_start[8] = 1;
  StepOptions o;
  o.K = 3, o.lambda = 0.7;
  Workspace<MixedModel<double>> w;
  const Batch b = tb.batch(true);
  m.params.zero_grad();
  const StepStats st = multipass_step(m, w, b, o);
  std::vector<double> grad(m.params.grads(), m.params.grads() + m.params.size());
  auto objective = [&]() {
    StepOptions f = o;
    f.backward = false;
    return multipass_step(m, w, b, f).objective;
  };
  EXPECT_NEAR(st.objective, objective(), 1e-12);
  const GradCheck r = check_gradient(objective, m.params.values(), grad.data(), m.params.size());
  std::printf("  mixed stack K=3: %zu params, rel err %.3g, |g_fd| %.3g\n", m.params.size(), r.err, r.norm);
  EXPECT_LT(r.err, 1e-6) << "max_abs " << r.max_abs;
  EXPECT_GT(r.norm, 1e-3);
  // the user block's own tensor gets its gradient
  const auto& g = m.params.spec("model.layers.1.self_attn.gate.weight");
  double gn = 0;
  for (std::size_t i = 0; i < g.size; ++i) gn += std::abs(grad[g.offset + i]);
  EXPECT_GT(gn, 1e-6);
}

TEST(MixedStack, DecodingEqualsTheForward) {
  const ModelConfig cfg = mixed_config();
  MixedModel<double> m(cfg, 31);
  randomize(m, 32);
  TinyBatch tb = tiny_batch(1, 9, cfg.vocab_size, 33);
  const int n = 9, P = 4;
  const Batch full{1, n, tb.tokens.data(), tb.targets.data(), nullptr};
  const PassRun plain = run_passes(m, full, 1);
  Decoder<MixedModel<double>> dec(m);
  std::vector<double> lg(m.V);
  // standard: KV-cached steps equal pass 1 at every position
  auto s = dec.new_sequence(n, DecodeModeSpec::parse("standard"));
  dec.prefill(s, tb.tokens.data(), P, lg.data());
  EXPECT_LT(max_diff(lg, head_logits(m, plain.hf[0], P - 1)), 1e-10) << "standard prefill";
  auto* sp = &s;
  for (int t = P; t < n; ++t) {
    dec.step(&sp, 1, &tb.tokens[t], lg.data());
    EXPECT_LT(max_diff(lg, head_logits(m, plain.hf[0], t)), 1e-10) << "standard step at " << t;
  }
  // fused(k) prefill: pass k+1 over the prompt, at its last position
  const Batch prompt{1, P, tb.tokens.data(), tb.targets.data(), nullptr};
  for (int k = 1; k <= 2; ++k) {
    const PassRun chain = run_passes(m, prompt, k + 1);
    auto f = dec.new_sequence(n, DecodeModeSpec::parse("fused(" + std::to_string(k) + ")"));
    dec.prefill(f, tb.tokens.data(), P, lg.data());
    EXPECT_LT(max_diff(lg, head_logits(m, chain.hf[k], P - 1)), 1e-10) << "fused(" << k << ") prefill";
    EXPECT_GT(max_diff(lg, head_logits(m, plain.hf[0], P - 1)), 1e-6) << "fused(" << k << ") differs from standard";
  }
}

TEST(MixedStack, CheckpointRoundTripAndRefusalsNameTheLayer) {
  const std::string dir = temp_dir("ckpt");
  MixedModel<float> m(mixed_config(), 5);
  randomize(m, 6);
  save_model(dir + "/m.safetensors", m);
  bool loaded = false;
  const ModelConfig file_cfg = m.cfg;
  with_model<float>(file_cfg, [&](auto tag) {
    using M = typename decltype(tag)::type;
    const M back = load_model<M>(dir + "/m.safetensors");
    ASSERT_EQ(back.params.size(), m.params.size());
    EXPECT_EQ(std::memcmp(back.params.values(), m.params.values(), m.params.size() * sizeof(float)), 0);
    EXPECT_EQ(back.cfg.layer_blocks, m.cfg.layer_blocks);
    loaded = true;
  });
  EXPECT_TRUE(loaded);
  // a model whose layer 0 is another type refuses the file, naming the layer
  ModelConfig other = mixed_config();
  other.layer_blocks = {"gated_attn", "decoder", "decoder"};
  MixedModel<float> o(other, 5);
  const std::string e = error_of([&] { load_model_into(dir + "/m.safetensors", o); });
  EXPECT_NE(e.find("layer_blocks[0]"), std::string::npos) << e;
  EXPECT_NE(e.find("\"decoder\" in the file but \"gated_attn\" in the model"), std::string::npos) << e;
  // a type this program does not know, at layer 2
  ModelConfig bad = mixed_config();
  bad.layer_blocks[2] = "nosuch";
  const std::string e2 = error_of([&] { MixedModel<float> x(bad, 1); });
  EXPECT_NE(e2.find("layer_blocks[2]"), std::string::npos) << e2;
  EXPECT_NE(e2.find("decoder, gated_attn"), std::string::npos) << e2;
  // an option of no listed type
  ModelConfig opt = mixed_config();
  opt.block_options["decoder.gate_init"] = OptionValue::of_real(0.5);
  const std::string e3 = error_of([&] { MixedModel<float> x(opt, 1); });
  EXPECT_NE(e3.find("block_options.decoder.gate_init"), std::string::npos) << e3;
  // a model of one concrete block type refuses a mixed config; a config with layer_blocks but another block is refused
  const std::string e4 = error_of([&] { Model<float, GluFuser<float>, DecoderBlock<float>> x(mixed_config(), 1); });
  EXPECT_NE(e4.find("mixed"), std::string::npos) << e4;
  ModelConfig nb = mixed_config();
  nb.block = "decoder";
  const std::string e5 = error_of([&] { nb.validate(); });
  EXPECT_NE(e5.find("layer_blocks"), std::string::npos) << e5;
  ModelConfig cnt = mixed_config();
  cnt.layer_blocks.pop_back();
  const std::string e6 = error_of([&] { cnt.validate(); });
  EXPECT_NE(e6.find("layer_blocks"), std::string::npos) << e6;
  // a type this program does not know is refused before a model is built, with what to do
  const std::string e7 = error_of([&] { with_model<float>(bad, [](auto) {}); });
  EXPECT_NE(e7.find("layer_blocks[2]"), std::string::npos) << e7;
  EXPECT_NE(e7.find("--plugin"), std::string::npos) << e7;
}

TEST(MixedStack, TrainerRunsAndResumesBitIdentically) {
  const std::string dir = temp_dir("train");
  TrainConfig c;
  c.model = mixed_config();
  c.model.hidden_size = 16, c.model.num_attention_heads = 2, c.model.num_key_value_heads = 1, c.model.intermediate_size = 32;
  c.model.max_position_embeddings = 32, c.model.vocab_size = 257;
  c.data = "task:addition", c.task_difficulty = 2;
  c.batch_size = 2, c.seq_len = 16, c.steps = 4, c.warmup_steps = 1;
  c.schedule.feedback_start = 0.0, c.schedule.pass_mix = {{2, 1.0}};
  c.eval_every = 0, c.eval_windows = 1, c.seq_eval_windows = 1, c.monitor_passes = 0, c.progress = false;
  using M = MixedModel<float>;
  c.out_dir = dir + "/a";
  Trainer<M> straight(c);
  for (int i = 0; i < 4; ++i) {
    const StepReport st = straight.train_step();
    ASSERT_FALSE(st.loss.empty());
    EXPECT_TRUE(std::isfinite(st.loss[0])) << "step " << i;
  }
  c.out_dir = dir + "/b";
  Trainer<M> first(c);
  for (int i = 0; i < 2; ++i) first.train_step();
  first.save_checkpoint(dir + "/b/checkpoint");
  auto resumed = Trainer<M>::resume(dir + "/b/checkpoint");
  for (int i = 0; i < 2; ++i) resumed->train_step();
  const auto& a = straight.model.params;
  const auto& r = resumed->model.params;
  ASSERT_EQ(a.size(), r.size());
  EXPECT_EQ(std::memcmp(a.values(), r.values(), a.size() * sizeof(float)), 0) << "4 steps vs 2 + save + resume + 2";
  EXPECT_EQ(resumed->model.cfg.layer_blocks, c.model.layer_blocks);
}

}  // namespace test_model_mixed_stack
