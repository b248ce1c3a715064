// examples/custom_fuser.cpp: a feedback fuser of your own, u = e + W s, written outside the library and
// given everything the built-in fusers get.
//
//   build/examples/custom_fuser [out_dir]
//
// The fuser below is ~40 lines against the contract of fbt/layers/fuser.hpp: declare its parameter,
// say what a pass keeps, forward, backward. FBT_REGISTER_FUSER makes it known by name ("add"), in float and
// double, at its slot (AnyFuser). Then, with no edit to the library, through fbt/session.hpp:
//   1. its backward is checked against central finite differences in double through the whole K = 3
//      chain (fbt::check_model_gradients: every parameter tensor of the model, jitter and prefixes on);
//   2. the library's Trainer runs 200 steps of the K-pass schedule on a built-in task (fbt::Session::train);
//   3. the KV-cache decoder decodes greedily in every mode (standard, soft, fused(1), fused(2));
//   4. a checkpoint is saved and loaded back (the config records fuser "add") with identical logits.
// Linked to fbt::runtime (this build's examples, or an installed fbt), the file compiles its fuser only: the
// trainer, the decoder and the check are compiled once there (docs/PERFORMANCE.md, "Compile time of a user
// file"). Without it, fbt/session.hpp compiles them here from the headers. Exit status 0 only if every check
// holds. tests/install builds this file against the installed package both ways.
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "fbt/layers/fuser.hpp"
#include "fbt/ops/linear.hpp"
#include "fbt/session.hpp"

// ---- the fuser: u = e + W s,  W (D, D) starts at 0, so the model starts as the plain one ----------------
template <class T> struct AddFuser {
  using Scalar = T;
  static constexpr const char* name = "add";  // its value of the config's `fuser` field
  int D = 0;
  std::size_t w = 0;  // offset of W in the flat parameter store

  struct Cache {};    // backward needs nothing but s, which the step keeps

  explicit AddFuser(const fbt::FuserArgs& a) : D(a.hidden_size) {}

  /// One parameter, under model.feedback. (the registry is scoped): model.feedback.w_a.weight.
  void declare(const fbt::ParamRegistry<T>& r) { w = r.add("w_a.weight", {D, D}, fbt::Init::Zeros); }

  template <class Be> void alloc(const Be&, fbt::Carver<T>&, fbt::Carver<T>&, Cache&, int, bool) const {}

  /// u (N, D) = e + s W^T.
  template <class Be>
  void forward(Be& be, const fbt::Weights<T>& wt, Cache&, const T* s, const T* e, const T* /*pre*/, T* u, int N) const {
    be.copy(u, e, std::size_t(N) * D);
    fbt::linear(be, u, s, wt.value + w, N, D, D, D, /*acc=*/true);
  }

  /// de += du;  ds += du W (skipped when detached: ds null);  dW += du^T s.
  template <class Be>
  void backward(Be& be, const fbt::Weights<T>& wt, const Cache&, const T* s, const T* /*e*/, const T* /*pre*/, const T* du, T* ds, T* de,
                T* /*dpre*/, int N) const {
    be.add(de, du, std::size_t(N) * D);
    fbt::linear_backward(be, ds, wt.grad + w, du, s, wt.value + w, N, D, D, D);
  }

  /// Optional: what the trainer logs per fed-back pass: ||W s|| / ||e|| over the fed-back rows.
  template <class Be> fbt::FuserStats diagnostics(Be& be, const fbt::Weights<T>&, const Cache&, const fbt::FuserPass<T>& p) const {
    return fbt::feedback_ratio(be, p, p.e, D);  // u - e = W s
  }
};

FBT_REGISTER_FUSER(AddFuser);  // AddFuser<float> and AddFuser<double>, by name, when the program starts

// -------------------------------------------------------------------------------------------------------
int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  const std::string out = argc > 1 ? argv[1] : (fs::temp_directory_path() / "fbt_custom_fuser").string();

  // 1. the backward against central differences: a tiny model (V 32, D 16, 2 blocks) whose config names the fuser
  fbt::ModelConfig cfg;
  cfg.vocab_size = 32, cfg.hidden_size = 16, cfg.num_hidden_layers = 2, cfg.num_attention_heads = 2, cfg.num_key_value_heads = 1;
  cfg.intermediate_size = 24, cfg.max_position_embeddings = 64, cfg.fuser = "add";
  fbt::ModelCheckOptions co;  // K = 3, lambda 0.7, jitter 0.02, prefix 1, a document boundary
  const fbt::StepGradReport rep = fbt::check_model_gradients(cfg, co);
  std::printf("1. backward vs central differences (double, K = 3, jitter, prefix 1, a document boundary):\n%s", rep.str().c_str());
  std::printf("   worst relative error %.3g (bound 1e-6): %s\n", rep.worst(), rep.ok(1e-6) ? "ok" : "FAILED");
  bool ok = rep.ok(1e-6);

  // 2. train with the library's trainer: the config names the fuser ("add"); everything else is as for glu
  fbt::TrainConfig c;
  c.model.fuser = "add";
  c.model.hidden_size = 64, c.model.num_hidden_layers = 2, c.model.num_attention_heads = 4, c.model.num_key_value_heads = 2;
  c.model.intermediate_size = 128, c.model.max_position_embeddings = 256;
  c.data = "task:addition", c.task_difficulty = 2;
  c.batch_size = 8, c.seq_len = 64, c.steps = 200, c.warmup_steps = 20, c.lr = 3e-3, c.min_lr = 3e-4;
  c.schedule.feedback_start = 0.25;  // feedback from step 50: 88% two-pass, 12% three-pass batches
  c.eval_every = 0, c.eval_windows = 8, c.seq_eval_windows = 2, c.monitor_passes = 8, c.progress = false;
  c.out_dir = out;
  fs::remove_all(out);
  fbt::Session s = fbt::Session::train(c, nullptr);
  const fbt::EvalReport e = s.evaluate();
  std::printf("\n2. %ld training steps on %s: validation loss per pass", s.step(), c.data.c_str());
  for (double l : e.val_loss) std::printf(" %.4f", l);
  std::printf(" | token by token, soft %.4f (standard %.4f) | contraction L(8) %.4f\n", e.seq_loss_soft, e.seq_loss_standard,
              e.contraction.loss.back());
  ok = ok && e.val_loss[0] < 2.0;  // a uniform guess over 257 bytes is 5.55; trained, well under 2

  // 3. greedy decoding in every mode, with the KV cache
  const std::vector<int> prompt = fbt::ByteTokenizer::encode_document("12+34=?\n");
  std::printf("\n3. greedy decoding of \"12+34=?\" (the answer is 46):\n");
  for (const char* mode : {"standard", "soft", "fused(1)", "fused(2)"}) {
    fbt::GenerateOptions go;
    go.mode = fbt::DecodeModeSpec::parse(mode), go.max_new_tokens = 40, go.stop_token = fbt::kSep;
    std::string text;
    for (int tok : s.generate(prompt, go))
      if (tok != fbt::kSep) text += tok == '\n' ? std::string("\\n") : std::string(1, char(tok));
    std::printf("   %-9s %s\n", mode, text.c_str());
  }

  // 4. save, load into a fresh model (the file's config says fuser "add"), same logits bit for bit
  const std::string path = out + "/add_fuser.safetensors";
  s.save(path);
  fbt::Session loaded = fbt::Session::load(path);
  std::printf("\n");
  for (const char* mode : {"standard", "fused(2)"}) {
    const std::vector<float> a = s.prefill_logits(prompt, fbt::DecodeModeSpec::parse(mode));       // (V)
    const std::vector<float> b = loaded.prefill_logits(prompt, fbt::DecodeModeSpec::parse(mode));  // (V)
    const bool same = a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
    std::printf("4. reloaded %s (fuser %s), %s prefill logits: %s\n", path.c_str(), loaded.config().fuser.c_str(), mode,
                same ? "identical" : "DIFFER");
    ok = ok && same;
  }
  std::printf("\n%s\n", ok ? "custom_fuser: all checks passed" : "custom_fuser: a check FAILED");
  return ok ? 0 : 1;
}
