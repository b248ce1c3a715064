// fbt/session.hpp: the research loop as a few plain functions and one model handle, compiled once in
// fbt::runtime (src/session.cpp), so that a program of its own pieces calls the trainer, the decoder, the
// checkpoints and the gradient check without compiling them:
//
//   #include "fbt/session.hpp"                                   // declarations only: a second to compile
//   FBT_REGISTER_FUSER(AddFuser)                                 // your piece, by name (model/pieces.hpp)
//   fbt::StepGradReport r = fbt::check_model_gradients(cfg);      // cfg.fuser = "add": the K-pass chain in double
//   fbt::Session s = fbt::Session::train(train_config);           // Trainer<Model<float>> to the end
//   std::vector<int> out = s.generate(prompt, opts);              // the KV-cache decoder, any mode
//   s.save("add.safetensors"); fbt::Session back = fbt::Session::load("add.safetensors");
//
// The model is fbt::Model<float> with its fuser and blocks erased at their slots (layers/any_piece.hpp), made
// by name from the registries, so one compiled loop serves every piece (docs/api.md, "The loop compiled once").
// A program that links fbt::runtime (FBT_COMPILED_RUNTIME) gets the definitions from it; a program of headers
// only gets them from fbt/session_impl.hpp, included below, and compiles the loop itself.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "check/grad_report.hpp"
#include "data/tokenizer.hpp"
#include "decode/generate_options.hpp"
#include "model/pieces.hpp"
#include "train/reports.hpp"
#include "train/train_config.hpp"

namespace fbt {

/// What check_model_gradients checks: the K-pass step on a (batch, seq_len) batch of random tokens, with the
/// objective's options (K, lambda, the jitter sigma, a plain prefix of `prefix` positions in every row of every fed-back
/// pass, and a document boundary in the second row), from parameters perturbed away from the init (perturb_parameters).
struct ModelCheckOptions {
  int K = 3;
  double lambda = 0.7, sigma = 0.02;
  int batch = 2, seq_len = 8;
  int prefix = 1;                ///< positions t < prefix stay plain in every fed-back pass (the prefix knob; 0 = none), in [0, seq_len]
  bool doc_boundary = true;      ///< a document starts mid-way through row 1
  std::uint64_t seed = 1;        ///< the weights' init; seed + 1 the perturbation, + 2 the tokens, + 3 the jitter
  std::size_t max_per_tensor = 0;  ///< > 0: that many sampled elements per tensor (a bigger model)
};

/// \brief The K-pass step's gradient of every parameter tensor of the model config `c` names (its fuser and
/// blocks from the registries, in double) against central differences (check/gradcheck.hpp): how a piece of
/// one's own is checked through the whole chain. Throws fbt::Error for a config that does not validate.
StepGradReport check_model_gradients(const ModelConfig& c, const ModelCheckOptions& o = {});

/// \brief A model of the runtime (Model<float>, its pieces by name), trained here or loaded, with its decoder.
class Session {
 public:
  /// Trains a run of config c to its end (Trainer: the K-pass schedule, evaluations, out_dir's logs and
  /// checkpoint), printing progress lines to `out` (null: none). Throws fbt::Error as `fbt train` refuses.
  static Session train(const TrainConfig& c, std::FILE* out = stderr);
  /// A model file (.safetensors) or a checkpoint directory, its pieces made by the names its config records.
  static Session load(const std::string& path);
  Session(Session&&) noexcept;
  Session& operator=(Session&&) noexcept;
  ~Session();

  const ModelConfig& config() const;
  long step() const;  ///< optimizer steps taken (0 for a loaded model)
  /// The per-pass validation losses, sequential losses and contraction monitor of the trained run (the
  /// trainer's evaluation on its own validation data). Throws fbt::Error for a loaded model (it has no data).
  EvalReport evaluate();
  /// Greedy or sampled decoding with the KV cache in o.mode: the new tokens (ending at o.stop_token).
  std::vector<int> generate(const std::vector<int>& prompt, const GenerateOptions& o);
  /// (V) the logits after prefilling `prompt` in `mode` (the next token's distribution, before any sampling).
  std::vector<float> prefill_logits(const std::vector<int>& prompt, const DecodeModeSpec& mode);
  /// Writes the model (.safetensors with its config; written to a temporary name and renamed).
  void save(const std::string& path) const;

 private:
  struct Impl;
  explicit Session(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace fbt

#if !defined(FBT_COMPILED_RUNTIME) || defined(FBT_BUILDING_RUNTIME)
#include "session_impl.hpp"
#endif
