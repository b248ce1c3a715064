// fbt/session_impl.hpp: the definitions of fbt/session.hpp's functions, over the whole library: compiled once
// into fbt::runtime (src/session.cpp), or inline into a program of headers only (fbt/session.hpp includes this
// file when FBT_COMPILED_RUNTIME is not defined).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "check/gradcheck.hpp"
#include "data/tokenizer.hpp"
#include "decode/decoder.hpp"
#include "io/checkpoint.hpp"
#include "io/hf.hpp"
#include "session.hpp"
#include "train/trainer.hpp"

// inline in a program of headers only; ordinary functions in the one file that compiles them into fbt::runtime
#if defined(FBT_BUILDING_RUNTIME)
#define FBT_SESSION_FN
#else
#define FBT_SESSION_FN inline
#endif

namespace fbt {

FBT_SESSION_FN StepGradReport check_model_gradients(const ModelConfig& c, const ModelCheckOptions& o) {
  if (o.K < 1 || o.K > kMaxPasses) throw Error("check_model_gradients: K must be in [1, " + std::to_string(kMaxPasses) + "], got " + std::to_string(o.K));
  if (o.batch < 1 || o.seq_len < 2 || o.seq_len > c.max_position_embeddings)
    throw Error("check_model_gradients: expected batch >= 1 and seq_len in [2, max_position_embeddings], got batch " + std::to_string(o.batch) +
                ", seq_len " + std::to_string(o.seq_len));
  if (o.prefix < 0 || o.prefix > o.seq_len)
    throw Error("check_model_gradients: prefix (plain positions) must be in [0, seq_len = " + std::to_string(o.seq_len) + "], got " + std::to_string(o.prefix));
  Model<double> m(c, o.seed);  // its pieces by name, from the double registries
  perturb_parameters(m.params, o.seed + 1);  // away from the init: identities and zeros hide wrong terms
  Rng rng(o.seed + 2);
  const int B = o.batch, T = o.seq_len, V = c.vocab_size;
  std::vector<int> tok(std::size_t(B) * T), tgt(std::size_t(B) * T), prefix(std::size_t(o.K) * B, o.prefix);  // (B, T), (B, T), (K, B)
  std::vector<std::uint8_t> docs(std::size_t(B) * T, 0);                                                      // (B, T)
  for (std::size_t i = 0; i < tok.size(); ++i) tok[i] = int(rng.below(std::uint64_t(V))), tgt[i] = int(rng.below(std::uint64_t(V)));
  if (o.doc_boundary && B > 1 && T > 2) docs[std::size_t(T) + std::size_t(T / 2)] = 1;
  Rng jitter(o.seed + 3);
  StepOptions so;
  so.K = o.K, so.sigma = o.sigma, so.rng = &jitter, so.lambda = o.lambda;
  if (o.prefix > 0) so.prefix = prefix.data();
  return check_step_gradients(m, Batch{B, T, tok.data(), tgt.data(), docs.data()}, so, o.max_per_tensor);
}

/// The model of a Session: the trainer's (a trained run, with its data for evaluate) or a loaded one.
struct Session::Impl {
  std::unique_ptr<Trainer<Model<float>>> trainer;
  std::unique_ptr<Model<float>> loaded;
  Model<float>& model() { return trainer ? trainer->model : *loaded; }
  const Model<float>& model() const { return trainer ? trainer->model : *loaded; }
};

FBT_SESSION_FN Session::Session(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
FBT_SESSION_FN Session::Session(Session&&) noexcept = default;
FBT_SESSION_FN Session& Session::operator=(Session&&) noexcept = default;
FBT_SESSION_FN Session::~Session() = default;

FBT_SESSION_FN Session Session::train(const TrainConfig& c, std::FILE* out) {
  auto impl = std::make_unique<Impl>();
  impl->trainer = std::make_unique<Trainer<Model<float>>>(c);
  impl->trainer->run(out);
  return Session(std::move(impl));
}
FBT_SESSION_FN Session Session::load(const std::string& path) {
  auto impl = std::make_unique<Impl>();
  impl->loaded = std::make_unique<Model<float>>(load_model<Model<float>>(checkpoint_model_file(path)));
  return Session(std::move(impl));
}
FBT_SESSION_FN const ModelConfig& Session::config() const { return impl_->model().cfg; }
FBT_SESSION_FN long Session::step() const { return impl_->trainer ? impl_->trainer->step : 0; }
FBT_SESSION_FN EvalReport Session::evaluate() {
  if (!impl_->trainer) throw Error("Session::evaluate: a loaded model has no validation data; evaluate a checkpoint with `fbt eval --checkpoint DIR`");
  return impl_->trainer->evaluate();
}
FBT_SESSION_FN std::vector<int> Session::generate(const std::vector<int>& prompt, const GenerateOptions& o) {
  Decoder<Model<float>> dec(impl_->model(), kSep);
  return fbt::generate(dec, prompt, o);
}
FBT_SESSION_FN std::vector<float> Session::prefill_logits(const std::vector<int>& prompt, const DecodeModeSpec& mode) {
  const Model<float>& m = impl_->model();
  if (prompt.empty() || prompt.size() > std::size_t(m.cfg.max_position_embeddings))
    throw Error("Session::prefill_logits: the prompt holds " + std::to_string(prompt.size()) + " tokens (expected 1 to max_position_embeddings, " +
                std::to_string(m.cfg.max_position_embeddings) + ")");
  Decoder<Model<float>> dec(m, kSep);
  auto s = dec.new_sequence(int(prompt.size()), mode);
  std::vector<float> logits(std::size_t(m.cfg.vocab_size));  // (V)
  dec.prefill(s, prompt.data(), int(prompt.size()), logits.data());
  return logits;
}
FBT_SESSION_FN void Session::save(const std::string& path) const { save_model(path, impl_->model()); }

}  // namespace fbt

#undef FBT_SESSION_FN
