// examples/own_project/check_pieces.cpp: this project's fuser and block against central finite differences
// in double, through the whole K = 3 step of the library (every parameter tensor: fbt::check_step_gradients),
// with no library edit. Exit status 0 only if every gradient agrees to 1e-6 (relative).
#include <cstdio>

#include "fbt/fbt.hpp"
#include "my_pieces.hpp"

int main() {
  using M = fbt::Model<double, LowRankFuser<double>, GatedBlock<double>>;
  fbt::ModelConfig cfg;  // a tiny model: V 32, D 16, 2 blocks
  cfg.vocab_size = 32, cfg.hidden_size = 16, cfg.num_hidden_layers = 2, cfg.num_attention_heads = 2, cfg.num_key_value_heads = 1;
  cfg.intermediate_size = 24, cfg.max_position_embeddings = 64;
  cfg.fuser = "lowrank", cfg.fuser_options = {{"rank", fbt::OptionValue::of_int(3)}};
  cfg.block = "gated_attn", cfg.block_options = {{"gate_init", fbt::OptionValue::of_real(0.7)}};
  M m(cfg, 1);
  fbt::perturb_parameters(m.params, 2);  // away from the init: B = 0 would make the state's gradient zero
  fbt::Rng rng(3);
  const int B = 2, T = 8;
  std::vector<int> tok(B * T), tgt(B * T), prefix(3 * B, 1);
  std::vector<std::uint8_t> docs(B * T, 0);
  for (int i = 0; i < B * T; ++i) tok[i] = int(rng.below(32)), tgt[i] = int(rng.below(32));
  docs[T + 4] = 1;  // a document boundary in row 1
  fbt::Rng jitter(4);
  fbt::StepOptions o;
  o.K = 3, o.sigma = 0.02, o.rng = &jitter, o.prefix = prefix.data(), o.lambda = 0.7;
  const auto rep = fbt::check_step_gradients(m, fbt::Batch{B, T, tok.data(), tgt.data(), docs.data()}, o);
  std::printf("lowrank (rank 3) and gated_attn (gate_init 0.7): backward vs central differences, K = 3:\n%s", rep.str().c_str());
  std::printf("worst relative error %.3g (bound 1e-6): %s\n", rep.worst(), rep.ok(1e-6) ? "ok" : "FAILED");
  return rep.ok(1e-6) ? 0 : 1;
}
