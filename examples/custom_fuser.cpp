// examples/custom_fuser.cpp: a feedback fuser of your own, u = e + W s, written outside the library and
// given everything the built-in fusers get.
//
//   build/examples/custom_fuser [out_dir]
//
// The fuser below is ~40 lines against the contract of fbt/layers/fuser.hpp: declare its parameter,
// say what a pass keeps, forward, backward. Then, with no edit to the library:
//   1. its backward is checked against central finite differences in double through the whole K = 3
//      chain (fbt::check_step_gradients: every parameter tensor of the model, jitter and prefixes on);
//   2. the library's Trainer runs 200 steps of the K-pass schedule on a built-in task;
//   3. the KV-cache decoder decodes greedily in every mode (standard, soft, fused(1), fused(2));
//   4. a checkpoint is saved and loaded back (the config records fuser "add") with identical logits.
// Exit status 0 only if every check holds. tests/install builds this file against the installed package.
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "fbt/fbt.hpp"

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

// -------------------------------------------------------------------------------------------------------
namespace {

bool gradient_check() {
  using M = fbt::Model<double, AddFuser<double>>;
  fbt::ModelConfig cfg;  // a tiny model: V 32, D 16, 2 blocks
  cfg.vocab_size = 32, cfg.hidden_size = 16, cfg.num_hidden_layers = 2, cfg.num_attention_heads = 2, cfg.num_key_value_heads = 1;
  cfg.intermediate_size = 24, cfg.max_position_embeddings = 64, cfg.fuser = "add";
  M m(cfg, 1);
  fbt::perturb_parameters(m.params, 2);  // away from the init: W = 0 would make the state gradient zero
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
  std::printf("1. backward vs central differences (double, K = 3, jitter, prefix 1, a document boundary):\n%s", rep.str().c_str());
  std::printf("   worst relative error %.3g (bound 1e-6): %s\n", rep.worst(), rep.ok(1e-6) ? "ok" : "FAILED");
  return rep.ok(1e-6);
}

}  // namespace

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  using M = fbt::Model<float, AddFuser<float>>;
  const std::string out = argc > 1 ? argv[1] : (fs::temp_directory_path() / "fbt_custom_fuser").string();
  bool ok = gradient_check();

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
  fbt::Trainer<M> t(c);
  t.run(nullptr);
  const fbt::EvalReport e = t.evaluate();
  std::printf("\n2. %ld training steps on %s: validation loss per pass", t.step, c.data.c_str());
  for (double l : e.val_loss) std::printf(" %.4f", l);
  std::printf(" | token by token, soft %.4f (standard %.4f) | contraction L(8) %.4f\n", e.seq_loss_soft, e.seq_loss_standard,
              e.contraction.loss.back());
  ok = ok && e.val_loss[0] < 2.0;  // a uniform guess over 257 bytes is 5.55; trained, well under 2

  // 3. greedy decoding in every mode, with the KV cache
  auto& dec = t.decoder();
  const std::vector<int> prompt = fbt::ByteTokenizer::encode_document("12+34=?\n");
  std::printf("\n3. greedy decoding of \"12+34=?\" (the answer is 46):\n");
  for (const char* mode : {"standard", "soft", "fused(1)", "fused(2)"}) {
    fbt::GenerateOptions go;
    go.mode = fbt::DecodeModeSpec::parse(mode), go.max_new_tokens = 40, go.stop_token = fbt::kSep;
    std::string text;
    for (int tok : fbt::generate(dec, prompt, go))
      if (tok != fbt::kSep) text += tok == '\n' ? std::string("\\n") : std::string(1, char(tok));
    std::printf("   %-9s %s\n", mode, text.c_str());
  }

  // 4. save, load into a fresh model (the file's config says fuser "add"), same logits bit for bit
  const std::string path = out + "/add_fuser.safetensors";
  fbt::save_model(path, t.model);
  const M loaded = fbt::load_model<M>(path);
  fbt::Decoder<M> dec2(loaded, fbt::kSep);
  std::vector<float> a(loaded.V), b(loaded.V);
  std::printf("\n");
  for (const char* mode : {"standard", "fused(2)"}) {
    auto s1 = dec.new_sequence(32, fbt::DecodeModeSpec::parse(mode));
    auto s2 = dec2.new_sequence(32, fbt::DecodeModeSpec::parse(mode));
    dec.prefill(s1, prompt.data(), int(prompt.size()), a.data());
    dec2.prefill(s2, prompt.data(), int(prompt.size()), b.data());
    const bool same = std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
    std::printf("4. reloaded %s, %s prefill logits: %s\n", path.c_str(), mode, same ? "identical" : "DIFFER");
    ok = ok && same;
  }
  std::printf("\n%s\n", ok ? "custom_fuser: all checks passed" : "custom_fuser: a check FAILED");
  return ok ? 0 : 1;
}
