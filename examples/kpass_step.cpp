// examples/kpass_step.cpp: build a small full-bandwidth model and train it with the K-pass objective.
//
//   build/examples/kpass_step [text-file]
//
// Builds a byte-level model (D 128, 4 layers, GLU fuser), says how much memory a K = 3 step needs,
// runs one K = 3 step (spec defaults: sigma 0.02, a uniform plain prefix per sequence and pass) and
// prints each pass's loss and the gradient norms by part of the model; then trains 40 AdamW steps,
// single-pass first and with the paper's after-start mix of 2 and 3 passes later, printing every pass's loss. With no file
// it uses a small built-in text; give the path of any text file (e.g. tinyshakespeare) to train on it instead.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "fbt/model/multipass.hpp"
#include "fbt/train/adamw.hpp"
#include "fbt/train/clip.hpp"
#include "fbt/train/lr_schedule.hpp"

using namespace fbt;

static std::string builtin_text() {
  // deterministic pseudo-English: enough structure for the losses to fall within a few steps
  const char* words[] = {"the", "state", "of", "a", "token", "flows", "back", "into", "stack", "and", "feeds", "next",
                         "layer", "with", "full", "bandwidth", "latent", "feedback", "gate", "fuses"};
  Rng r(1);
  std::string s;
  while (s.size() < 200000) {
    s += words[r.below(20)];
    s += r.below(8) == 0 ? ".\n" : " ";
  }
  return s;
}

int main(int argc, char** argv) {
  std::string text;
  if (argc > 1) {
    std::ifstream f(argv[1], std::ios::binary);
    if (!f) {
      std::fprintf(stderr, "kpass_step: cannot open text file '%s'\n", argv[1]);
      return 1;
    }
    text.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
    if (text.size() < 10000) {
      std::fprintf(stderr, "kpass_step: '%s' holds %zu bytes; need at least 10000\n", argv[1], text.size());
      return 1;
    }
  } else {
    text = builtin_text();
  }

  ModelConfig cfg;  // byte vocabulary (257), D 128, L 4, 4 heads, SwiGLU 384, fuser glu
  Model<float> model(cfg, /*seed=*/1);
  const int B = 8, T = 64, K = 3;
  std::printf("fbt %s: full-bandwidth model, %zu parameters (%d layers, D %d, fuser %s)\n", FBT_VERSION_STRING, model.params.size(),
              cfg.num_hidden_layers, cfg.hidden_size, cfg.fuser.c_str());

  // a batch: B windows of T+1 bytes; position t predicts byte t+1
  Rng data_rng(2), step_rng(3);
  std::vector<int> tokens(B * T), targets(B * T), prefix(K * B);
  auto next_batch = [&]() {
    for (int b = 0; b < B; ++b) {
      const std::size_t at = data_rng.below(std::uint32_t(text.size() - T - 1));
      for (int t = 0; t < T; ++t) {
        tokens[b * T + t] = (unsigned char)text[at + t];
        targets[b * T + t] = (unsigned char)text[at + t + 1];
      }
    }
    for (auto& p : prefix) p = int(step_rng.below(T));  // prefix p ~ U{0..T-1} per sequence per pass
    return Batch{B, T, tokens.data(), targets.data(), nullptr};
  };

  StepOptions opt;
  opt.K = K, opt.sigma = 0.02, opt.prefix = prefix.data(), opt.rng = &step_rng;
  std::printf("workspace of a B=%d T=%d step: K=1 %.1f MB, K=3 %.1f MB, K=3 detached %.1f MB\n", B, T,
              step_workspace_bytes(model, B, T, StepOptions{}) / 1e6, step_workspace_bytes(model, B, T, opt) / 1e6,
              [&] { StepOptions d = opt; d.detach = true; return step_workspace_bytes(model, B, T, d) / 1e6; }());

  Workspace<Model<float>> ws;
  model.params.zero_grad();
  const Batch batch = next_batch();
  const StepStats st = multipass_step(model, ws, batch, opt);
  std::printf("\none K=%d step (lambda %.1f, sigma %.2f, uniform prefix):\n", K, opt.lambda, opt.sigma);
  for (int j = 0; j < K; ++j)
    std::printf("  pass %d  loss %.4f  weight %.2f%s\n", j + 1, st.loss[j], st.weight[j],
                j ? ("  fed-back state rms " + std::to_string(st.state_rms[j]) + "  gate mean " + std::to_string(st.gate_mean[j])).c_str() : "");
  std::printf("  (a uniform guess over 257 tokens has loss ln 257 = %.4f)\n  objective sum_j weight_j loss_j = %.4f\n", std::log(257.0), st.objective);
  // gradient norms by part of the model
  double g_emb = 0, g_blocks = 0, g_fb = 0, g_norm = 0;
  for (const auto& s : model.params.specs()) {
    double ss = 0;
    for (std::size_t i = 0; i < s.size; ++i) ss += double(model.params.grads()[s.offset + i]) * model.params.grads()[s.offset + i];
    if (s.name.rfind("model.feedback.", 0) == 0) g_fb += ss;
    else if (s.name.rfind("model.layers.", 0) == 0) g_blocks += ss;
    else if (s.name == "model.embed_tokens.weight") g_emb += ss;
    else g_norm += ss;
  }
  std::printf("  gradient norms: embedding/head %.4g, blocks %.4g, feedback (fuser + N_in) %.4g, final norm %.4g, total %.4g\n",
              std::sqrt(g_emb), std::sqrt(g_blocks), std::sqrt(g_fb), std::sqrt(g_norm), grad_global_norm(model.params));

  // a short run: AdamW + clipping + warmup-cosine; single-pass for the first half, then the paper's
  // after-start mix (K = 2 with probability 0.88, K = 3 with 0.12), as the schedule does over a run
  const int steps = 40;
  const LrSchedule sched = make_lr_schedule("cosine", 3e-3, 3e-4, 5, steps);
  AdamWConfig adam;
  std::printf("\n%d AdamW steps: K = 1 for steps 0-%d, then K = 2 (88%%) or 3 (12%%):\n", steps, steps / 2 - 1);
  const auto t0 = std::chrono::steady_clock::now();
  for (int s = 0; s < steps; ++s) {
    const double u = step_rng.uniform();
    StepOptions o = opt;
    o.K = s < steps / 2 ? 1 : (u < 0.88 ? 2 : 3);
    model.params.zero_grad();
    const StepStats r = multipass_step(model, ws, next_batch(), o);
    const double norm = clip_grad_norm(model.params, 1.0);
    adamw_update(model.params, adam, sched.lr(s));
    if (s % 5 == 0 || s == steps - 1 || o.K == 3) {
      std::printf("  step %2d  K=%d  lr %.2e  |g| %.3f  losses", s, o.K, sched.lr(s), norm);
      for (double l : r.loss) std::printf(" %.4f", l);
      std::printf("\n");
    }
  }
  const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("  %.1f s, %.0f tokens/s (single thread, not a benchmark: see benchmarks/)\n", sec, steps * double(B) * T / sec);
  return 0;
}
