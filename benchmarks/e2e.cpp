// benchmarks/e2e.cpp (bench_e2e): whole-step timings of fbt, one measure per process.
//
//   bench_e2e --config tiny|small --threads N --measure M [--reps R] [--warmup W] [--batch B] [--seq T]
//             [--hidden_size D --num_hidden_layers L --num_attention_heads H --num_key_value_heads KV --intermediate_size F]
//             (the config's model with those fields replaced: the scale ladder's rungs, EXPERIMENTS.md section 15)
//   bench_e2e --save-init DIR       writes DIR/<config>_none.safetensors and DIR/<config>_glu.safetensors
//   bench_e2e --dump-check DIR      writes check_<fuser>.{safetensors,json}: weights, a batch, per-pass
//                                   losses, gradient norms and greedy decodes, for the PyTorch peer's check
// Prints one JSON line per measure: median and spread of R timed repetitions (after W warm-ups), tokens/s,
// model FLOPs per token, achieved GFLOP/s and the process's peak resident memory. Run one measure per
// process (the driver benchmarks/run_e2e.py does, alternating with the PyTorch peer) so peak RSS is
// that measure's own. Configs: tiny = D 128, 4 layers, 4 heads (4 kv), SwiGLU 384, T 128,
// batch 16; small = D 256, 6 layers, 8 heads (4 kv), SwiGLU 768, T 256, batch 8; byte vocabulary (257).
// Measures: train (baseline step: forward, backward, AdamW), fbt_k1, kpass2, kpass3 (glu model, no detach,
// sigma 0.02, uniform prefix), kpass3_g1 (grad_passes 1), mix (33 steps: 25 x K=1, 7 x K=2, 1 x K=3, in a
// fixed shuffled order; time per step), forward (K = 1, no backward), decode_{standard,soft}_{128,1024}
// (ms/token of 64 steps after a prefill of that many tokens), prefill_fused1 (fused(1) prefill of 128
// tokens), sgemm (1024^3 float product through the CPU backend, as in a step, 1 thread: the ceiling), soft_overhead_{128,1024}
// (standard and soft steps in turn in one process: medians of each and the soft step's overhead).
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <string>

#include "fbt/decode/decoder.hpp"
#include "fbt/io/checkpoint.hpp"
#include "fbt/model/parallel_step.hpp"
#include "fbt/train/adamw.hpp"
#include "fbt/train/config.hpp"

using namespace fbt;

namespace {

struct Bench {
  std::string name;
  ModelConfig model;
  int B, T;
};

Bench make_config(const std::string& name) {
  Bench b;
  b.name = name;
  b.model.vocab_size = 257, b.model.max_position_embeddings = 2048;
  if (name == "tiny") {
    b.model.hidden_size = 128, b.model.num_hidden_layers = 4, b.model.num_attention_heads = 4, b.model.num_key_value_heads = 4;
    b.model.intermediate_size = 384, b.T = 128, b.B = 16;
  } else if (name == "small") {
    b.model.hidden_size = 256, b.model.num_hidden_layers = 6, b.model.num_attention_heads = 8, b.model.num_key_value_heads = 4;
    b.model.intermediate_size = 768, b.T = 256, b.B = 8;
  } else {
    throw Error("bench_e2e: unknown --config \"" + name + "\" (tiny or small)");
  }
  return b;
}

/// Model FLOPs per token of one forward pass: 2 x (matrix parameters + head) + causal attention (QK^T
/// and AV over (T+1)/2 keys on average). A training pass costs 3x (forward + backward).
double forward_flops_per_token(const ModelConfig& c, int T) {
  const double D = c.hidden_size, QD = c.num_attention_heads * c.hs(), KD = c.num_key_value_heads * c.hs(), F = c.intermediate_size;
  const double per_layer = D * QD + 2 * D * KD + QD * D + 3 * D * F;
  return 2.0 * (c.num_hidden_layers * per_layer + c.vocab_size * D) + c.num_hidden_layers * 4.0 * QD * (T + 1) / 2.0;
}

struct Timing {
  std::vector<double> ms;
  double q(double p) const {
    std::vector<double> s = ms;
    std::sort(s.begin(), s.end());
    const double x = p * (s.size() - 1);
    const std::size_t i = std::size_t(x);
    return i + 1 < s.size() ? s[i] + (x - i) * (s[i + 1] - s[i]) : s[i];
  }
};

Timing time_it(int warmup, int reps, const std::function<void()>& f) {
  for (int i = 0; i < warmup; ++i) f();
  Timing t;
  for (int i = 0; i < reps; ++i) {
    const auto a = std::chrono::steady_clock::now();
    f();
    t.ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - a).count());
  }
  return t;
}

double peak_rss_mb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss / 1024.0;
}

void random_batch(Rng& r, int B, int T, std::vector<int>& tok, std::vector<int>& tgt) {
  tok.resize(std::size_t(B) * T), tgt.resize(std::size_t(B) * T);
  for (auto& x : tok) x = int(r.below(256));
  for (auto& x : tgt) x = int(r.below(256));
}

std::string arg(int argc, char** argv, const char* key, const std::string& def) {
  for (int i = 1; i + 1 < argc; ++i)
    if (!std::strcmp(argv[i], key)) return argv[i + 1];
  return def;
}

void save_init(const std::string& dir, const std::string& cfg) {
  std::filesystem::create_directories(dir);
  for (const char* fuser : {"none", "glu"}) {
    Bench b = make_config(cfg);
    b.model.fuser = fuser;
    with_model<float>(b.model, [&](auto tag) {
      typename decltype(tag)::type m(b.model, 1);
      save_model(dir + "/" + cfg + "_" + fuser + ".safetensors", m);
    });
  }
  std::printf("{\"saved\": \"%s\", \"config\": \"%s\"}\n", dir.c_str(), cfg.c_str());
}

template <class M> void dump_check_model(const std::string& dir, const ModelConfig& c);

/// Weights, a batch and fbt's results on it, for the PyTorch peer's exactness check (check_peer.py).
void dump_check(const std::string& dir) {
  std::filesystem::create_directories(dir);
  for (const char* fuser : {"none", "glu", "gated_add", "concat"}) {
    ModelConfig c = make_config("tiny").model;
    c.fuser = fuser, c.num_key_value_heads = 2, c.max_position_embeddings = 256;  // GQA too
    with_model<float>(c, [&](auto tag) { dump_check_model<typename decltype(tag)::type>(dir, c); });
  }
  std::printf("{\"dumped\": \"%s\"}\n", dir.c_str());
}

template <class M> void dump_check_model(const std::string& dir, const ModelConfig& c) {
  const std::string fuser = c.fuser;
  {
    M m(c, 7);
    Rng pr(8);  // move every weight off its init so no term is trivially zero (W_s = 0, W_U = I, gains 1)
    for (const auto& s : m.params.specs())
      for (std::size_t i = 0; i < s.size; ++i) m.params.values()[s.offset + i] += float((s.shape.size() == 1 ? 0.2 : 0.02) * pr.normal());
    const int B = 2, T = 32, K = 3;
    Rng r(9);
    std::vector<int> tok, tgt, prefix(std::size_t(K) * B);
    random_batch(r, B, T, tok, tgt);
    for (auto& p : prefix) p = int(r.below(T));
    prefix[0] = prefix[1] = 0;
    Workspace<M> w;
    StepOptions o;
    o.K = K, o.lambda = 0.8, o.prefix = prefix.data();
    if (fuser == "none") o.K = 1;
    m.params.zero_grad();
    const StepStats st = multipass_step(m, w, Batch{B, T, tok.data(), tgt.data(), nullptr}, o);
    nlohmann::json j{{"fuser", fuser}, {"B", B}, {"T", T}, {"K", o.K}, {"lambda", o.lambda}, {"tokens", tok}, {"targets", tgt},
                     {"prefix", std::vector<int>(prefix.begin(), prefix.begin() + std::size_t(o.K) * B)}, {"loss", st.loss}, {"objective", st.objective}};
    for (const auto& s : m.params.specs()) {
      double n2 = 0;
      for (std::size_t i = 0; i < s.size; ++i) n2 += double(m.params.grads()[s.offset + i]) * m.params.grads()[s.offset + i];
      j["grad_norm"][s.name] = std::sqrt(n2);
    }
    Decoder<M> dec(m, 256);
    const std::vector<int> prompt(tok.begin(), tok.begin() + 12);
    for (const char* mode : {"standard", "soft", "fused(1)"}) {
      if (fuser == "none" && std::string(mode) != "standard") continue;
      GenerateOptions g;
      g.mode = DecodeModeSpec::parse(mode), g.max_new_tokens = 16;
      j["greedy"][mode] = generate(dec, prompt, g);
    }
    j["prompt"] = prompt;
    save_model(dir + "/check_" + fuser + ".safetensors", m);
    std::ofstream(dir + "/check_" + fuser + ".json") << j.dump() << "\n";
  }
}

}  // namespace

int main(int argc, char** argv) try {
  for (int i = 1; i < argc; ++i)
    if (!std::strcmp(argv[i], "--help")) {
      std::printf("bench_e2e --config tiny|small --threads N --measure M [--reps R] [--warmup W] [--batch B] [--seq T] [--precision fp32|bf16]\n"
                  "          [--hidden_size D] [--num_hidden_layers L] [--num_attention_heads H] [--num_key_value_heads KV] [--intermediate_size F]\n"
                  "          [--fp32-gemm auto|eigen|onednn]   (auto: oneDNN's float product where it beats Eigen's; onednn: oneDNN's whatever its kernel)\n"
                  "          [--sliding_window W [--window_pattern SSSL]]   (decode measures also print the KV cache bytes to stderr)\n"
                  "bench_e2e --save-init DIR [--config C] | --dump-check DIR\n"
                  "measures: train fbt_k1 kpass2 kpass3 kpass3_g1 mix forward decode_standard_128 decode_soft_128\n"
                  "          decode_standard_1024 decode_soft_1024 prefill_fused1 sgemm soft_overhead_128 soft_overhead_1024\n");
      return 0;
    }
  const std::string cfg = arg(argc, argv, "--config", "tiny");
  if (arg(argc, argv, "--save-init", "") != "") return save_init(arg(argc, argv, "--save-init", ""), cfg), 0;
  if (arg(argc, argv, "--dump-check", "") != "") return dump_check(arg(argc, argv, "--dump-check", "")), 0;
  const std::string measure = arg(argc, argv, "--measure", "train");
  const int threads = std::stoi(arg(argc, argv, "--threads", "1"));
  const Precision prec = parse_precision(arg(argc, argv, "--precision", "fp32"));
  set_matmul_precision(prec);  // bf16: the model's products (and the sgemm measure) with bf16 operands, fp32 sums
  // fp32 products: auto (oneDNN's kernel where it beats Eigen's, ops/gemm_dnnl.hpp), eigen or onednn (oneDNN's
  // whatever its kernel: its jit GEMM on an AVX2 CPU); a before/after in one build
  const std::string fp32_gemm = arg(argc, argv, "--fp32-gemm", "auto");
  if (fp32_gemm != "auto" && fp32_gemm != "eigen" && fp32_gemm != "onednn")
    throw Error("bench_e2e: --fp32-gemm: expected auto, eigen or onednn, got '" + fp32_gemm + "'");
#if !defined(FBT_HAVE_DNNL)
  if (fp32_gemm == "onednn") throw Error("bench_e2e: --fp32-gemm onednn: this build has no oneDNN (libdnnl-dev)");
#endif
  std::optional<ScopedFp32Eigen> force_eigen;
  std::optional<ScopedFp32OneDnn> force_onednn;
  if (fp32_gemm == "eigen") force_eigen.emplace();
  if (fp32_gemm == "onednn") force_onednn.emplace();
  int reps = std::stoi(arg(argc, argv, "--reps", "5")), warmup = std::stoi(arg(argc, argv, "--warmup", "2"));
  Bench b = make_config(cfg);
  b.B = std::stoi(arg(argc, argv, "--batch", std::to_string(b.B)));
  b.T = std::stoi(arg(argc, argv, "--seq", std::to_string(b.T)));
  for (const auto& [flag, field] : {std::pair<const char*, int*>{"--hidden_size", &b.model.hidden_size}, {"--num_hidden_layers", &b.model.num_hidden_layers},
                                    {"--num_attention_heads", &b.model.num_attention_heads}, {"--num_key_value_heads", &b.model.num_key_value_heads},
                                    {"--intermediate_size", &b.model.intermediate_size}})
    *field = std::stoi(arg(argc, argv, flag, std::to_string(*field)));
  b.model.head_dim = 0;  // derived from hidden_size / heads (a replaced width must not keep the config's)
  b.model.validate();  // names the field of a shape that does not fit (heads not dividing D, ...)
  if (const int W = std::stoi(arg(argc, argv, "--sliding_window", "0")); W > 0) {  // sliding-window layers (nanochat's pattern)
    b.model.sliding_window = W;
    b.model.layer_types = window_pattern_layer_types(arg(argc, argv, "--window_pattern", "SSSL"), b.model.num_hidden_layers);
  }
  const double fwd_flops = forward_flops_per_token(b.model, b.T);
  double tokens_per_rep = double(b.B) * b.T, flops_per_token = 3 * fwd_flops;
  Timing t;
  Rng r(1);
  std::vector<int> tok, tgt;
  random_batch(r, b.B, b.T, tok, tgt);
  const Batch batch{b.B, b.T, tok.data(), tgt.data(), nullptr};

  if (measure == "sgemm") {
    const int n = 1024;
    AlignedVector<float> A(std::size_t(n) * n), Bm(std::size_t(n) * n), C(std::size_t(n) * n);
    for (auto& x : A) x = float(r.normal());
    for (auto& x : Bm) x = float(r.normal());
    t = time_it(warmup, reps, [&] {
      CpuBackend<float>().gemm(C.data(), n, A.data(), n, false, Bm.data(), n, false, n, n, n, false);  // the step's product
    });
    tokens_per_rep = 1, flops_per_token = 2.0 * n * n * n;
  } else if (measure.rfind("soft_overhead_", 0) == 0) {
    // standard and soft decoding of the same model, step by step in turn in one process, so both see the
    // same memory layout and machine state: the per-token overhead of soft decoding (spec 4)
    ModelConfig mc = b.model;
    mc.fuser = "glu";
    Model<float> m(mc, 1);
    Decoder<Model<float>> dec(m, 256);
    const int ctx = std::stoi(measure.substr(measure.rfind('_') + 1)), steps = 64;
    std::vector<int> prompt(ctx);
    for (int i = 0; i < ctx; ++i) prompt[i] = int(r.below(256));
    std::vector<float> ls(mc.vocab_size), lf(mc.vocab_size);
    Timing st, so;
    for (int rep = 0; rep < warmup + reps; ++rep) {
      auto a = dec.new_sequence(ctx + steps, DecodeModeSpec{}), c = dec.new_sequence(ctx + steps, DecodeModeSpec::parse("soft"));
      dec.prefill(a, prompt.data(), ctx, ls.data());
      dec.prefill(c, prompt.data(), ctx, lf.data());
      auto *pa = &a, *pc = &c;
      for (int i = 0; i < steps; ++i) {
        int ta = argmax_token(ls.data(), mc.vocab_size), tc = argmax_token(lf.data(), mc.vocab_size);
        if (ta == 256) ta = 32;
        if (tc == 256) tc = 32;
        const auto t0 = std::chrono::steady_clock::now();
        dec.step(&pa, 1, &ta, ls.data());
        const auto t1 = std::chrono::steady_clock::now();
        dec.step(&pc, 1, &tc, lf.data());
        const auto t2 = std::chrono::steady_clock::now();
        if (rep >= warmup) {
          st.ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
          so.ms.push_back(std::chrono::duration<double, std::milli>(t2 - t1).count());
        }
      }
    }
    std::printf("{\"impl\": \"fbt\", \"config\": \"%s\", \"shape\": \"D %d, %d layers, %d/%d heads, MLP %d\", \"threads\": 1, \"measure\": \"%s\", \"steps\": %zu, \"standard_median_ms\": %.6g, "
                "\"standard_p25_ms\": %.6g, \"standard_p75_ms\": %.6g, \"soft_median_ms\": %.6g, \"soft_p25_ms\": %.6g, \"soft_p75_ms\": %.6g, "
                "\"overhead\": %.6g, \"peak_rss_mb\": %.1f}\n",
                cfg.c_str(), mc.hidden_size, mc.num_hidden_layers, mc.num_attention_heads, mc.num_key_value_heads, mc.intermediate_size,
                measure.c_str(), st.ms.size(), st.q(0.5), st.q(0.25), st.q(0.75), so.q(0.5), so.q(0.25), so.q(0.75),
                so.q(0.5) / st.q(0.5) - 1.0, peak_rss_mb());
    return 0;
  } else if (measure.rfind("decode_", 0) == 0 || measure == "prefill_fused1") {
    ModelConfig mc = b.model;
    mc.fuser = "glu";
    Model<float> m(mc, 1);
    Decoder<Model<float>> dec(m, 256);
    std::vector<float> logits(mc.vocab_size);
    if (measure == "prefill_fused1") {
      const int P = 128;
      t = time_it(warmup, reps, [&] {
        auto s = dec.new_sequence(P, DecodeModeSpec::parse("fused(1)"));
        dec.prefill(s, tok.data(), P, logits.data());
      });
      tokens_per_rep = P, flops_per_token = 2 * forward_flops_per_token(mc, P);
    } else {
      const bool soft = measure.find("soft") != std::string::npos;
      const int ctx = std::stoi(measure.substr(measure.rfind('_') + 1)), steps = 64;
      std::vector<int> prompt(ctx);
      for (int i = 0; i < ctx; ++i) prompt[i] = int(r.below(256));
      t = time_it(warmup, reps, [] {});
      t.ms.clear();
      for (int rep = 0; rep < warmup + reps; ++rep) {
        auto s = dec.new_sequence(ctx + steps, soft ? DecodeModeSpec::parse("soft") : DecodeModeSpec{});
        if (rep == 0)
          std::fprintf(stderr, "bench_e2e: KV cache of one sequence of %d positions: %zu bytes (sliding_window %d)\n", ctx + steps,
                       (s.k.size() + s.v.size()) * sizeof(float), mc.sliding_window);
        dec.prefill(s, prompt.data(), ctx, logits.data());
        auto* sp = &s;
        const auto a = std::chrono::steady_clock::now();
        for (int i = 0; i < steps; ++i) {
          int next = argmax_token(logits.data(), mc.vocab_size);
          if (next == 256) next = 32;
          dec.step(&sp, 1, &next, logits.data());
        }
        if (rep >= warmup) t.ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - a).count() / steps);
      }
      tokens_per_rep = 1, flops_per_token = forward_flops_per_token(mc, 2 * (ctx + steps / 2) - 1);  // attention over ~ctx keys
    }
  } else {
    ModelConfig mc = b.model;
    mc.fuser = measure == "train" ? "none" : "glu";
    with_model<float>(mc, [&](auto tag) {
    typename decltype(tag)::type m(mc, 1);
    ParallelStepper<typename decltype(tag)::type> step(m, threads);
    AdamWConfig adam;
    StepStats st;
    StepOptions o;
    std::vector<int> prefix;
    Rng sr(2);
    auto train_step = [&](int K, int g, bool backward) {
      o = StepOptions{};
      o.K = K, o.grad_passes = g, o.backward = backward, o.sigma = K > 1 ? 0.02 : 0.0, o.rng = &sr;
      prefix.assign(std::size_t(K) * b.B, 0);
      for (std::size_t i = b.B; i < prefix.size(); ++i) prefix[i] = int(sr.below(b.T));
      o.prefix = prefix.data();
      if (backward) m.params.zero_grad();
      step.step(batch, o, st);
      if (backward) adamw_update(m.params, adam, 1e-4);
    };
    if (measure == "train" || measure == "fbt_k1") t = time_it(warmup, reps, [&] { train_step(1, 0, true); });
    else if (measure == "kpass2") t = time_it(warmup, reps, [&] { train_step(2, 0, true); }), flops_per_token *= 2;
    else if (measure == "kpass3") t = time_it(warmup, reps, [&] { train_step(3, 0, true); }), flops_per_token *= 3;
    else if (measure == "kpass3_g1") t = time_it(warmup, reps, [&] { train_step(3, 1, true); }), flops_per_token = 2 * fwd_flops + 3 * fwd_flops;
    else if (measure == "forward") t = time_it(warmup, reps, [&] { train_step(1, 0, false); }), flops_per_token = fwd_flops;
    else if (measure == "mix") {
      std::vector<int> ks(25, 1);
      ks.insert(ks.end(), 7, 2);
      ks.push_back(3);
      Rng shuffle(3);
      for (int i = int(ks.size()) - 1; i > 0; --i) std::swap(ks[i], ks[shuffle.below(i + 1)]);
      warmup = std::min(warmup, 1);
      t = time_it(warmup, reps, [&] {
        for (int k : ks) train_step(k, 0, true);
      });
      for (auto& x : t.ms) x /= double(ks.size());  // per step
      flops_per_token *= (25 + 7 * 2 + 3) / 33.0;
    } else {
      throw Error("bench_e2e: unknown --measure \"" + measure + "\" (see --help)");
    }
      });
  }
  const double med = t.q(0.5);
  const double tps = tokens_per_rep / (med / 1e3);
  std::printf("{\"impl\": \"fbt\", \"precision\": \"%s\", \"config\": \"%s\", \"threads\": %d, \"measure\": \"%s\", \"B\": %d, \"T\": %d, \"reps\": %d, "
              "\"median_ms\": %.6g, \"p25_ms\": %.6g, \"p75_ms\": %.6g, \"min_ms\": %.6g, \"max_ms\": %.6g, \"tokens_per_s\": %.6g, "
              "\"flops_per_token\": %.6g, \"gflops\": %.6g, \"peak_rss_mb\": %.1f, \"gemm_impl\": \"%s\", \"compiler\": \"%s\"}\n",
              precision_name(prec), cfg.c_str(), threads, measure.c_str(), b.B, b.T, int(t.ms.size()), med, t.q(0.25), t.q(0.75), t.q(0.0), t.q(1.0), tps,
              flops_per_token, flops_per_token * tps / 1e9, peak_rss_mb(), (prec == Precision::bf16 ? gemm_bf16_impl(1024, 1024, 1024) : gemm_f32_impl(1024, 1024, 1024)).c_str(),
#if defined(__clang__)
              "clang " __clang_version__
#else
              "gcc " __VERSION__
#endif
  );
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "bench_e2e: error: %s\n", e.what());
  return 1;
}
