// benchmarks/gpu_bench.cu (gpu_bench): fbt on a GPU (fbt::BackendModel and fbt::Decoder over
// fbt::cuda::CudaBackend), the measures of scripts/gpu-check.sh.
//
//   gpu_bench [--config 100m|small] [--batch B] [--seq T] [--steps N] [--warmup W] [--prompt P]
//             [--decode-steps S] [--gemm fp32|tf32|bf16] [--measures train,kpass2,decode_standard,decode_soft]
//
// Configs: 100m = D 768, 12 layers, 12 heads (12 kv), SwiGLU 2048, T 512, batch 8, byte vocabulary (257):
// about 85M matrix parameters + 0.2M embedding (+1.2M feedback), the issue's ~100M-parameter config;
// small = D 256, 4 layers, 4 heads, SwiGLU 768, T 128, batch 8 (a quick smoke run).
// Measures (as benchmarks/e2e.cpp's, on the device):
//   train            baseline model (fuser none), K = 1: zero_grad + forward + backward + AdamW
//   kpass2           glu model, K = 2, no detach, sigma 0.02, uniform prefix (the schedule's common case)
//   decode_standard  glu model: ms per token of S KV-cached greedy steps after a P-token prefill
//   decode_soft      the same in soft mode (the fed-back state, spec section 4)
// Prints one JSON line per measure: {"impl":"fbt-cuda", "measure", "median_ms", "min_ms", "tokens_per_s"
// or "ms_per_token", "params", "gemm", "device"}, the median over the timed repetitions.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "fbt/cuda/cuda.cuh"

using namespace fbt;
namespace fc = fbt::cuda;

namespace {

struct Args {
  std::string config = "100m", gemm = "fp32", measures = "train,kpass2,decode_standard,decode_soft";
  int B = 0, T = 0, steps = 6, warmup = 2, prompt = 128, decode_steps = 64;
};

ModelConfig make_config(const std::string& name, Args& a) {
  ModelConfig c;
  c.vocab_size = 257, c.max_position_embeddings = 2048;
  if (name == "100m") {
    c.hidden_size = 768, c.num_hidden_layers = 12, c.num_attention_heads = 12, c.num_key_value_heads = 12, c.intermediate_size = 2048;
    if (!a.B) a.B = 8;
    if (!a.T) a.T = 512;
  } else if (name == "small") {
    c.hidden_size = 256, c.num_hidden_layers = 4, c.num_attention_heads = 4, c.num_key_value_heads = 4, c.intermediate_size = 768;
    if (!a.B) a.B = 8;
    if (!a.T) a.T = 128;
  } else {
    throw Error("gpu_bench: unknown --config \"" + name + "\" (100m or small)");
  }
  return c;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double now_ms() { return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

void print(const std::string& measure, const std::vector<double>& ms, const std::string& rate_key, double rate, std::size_t params,
           const Args& a, const std::string& dev) {
  std::printf("{\"impl\": \"fbt-cuda\", \"measure\": \"%s\", \"config\": \"%s\", \"B\": %d, \"T\": %d, \"median_ms\": %.4f, \"min_ms\": %.4f, "
              "\"%s\": %.4f, \"params\": %zu, \"gemm\": \"%s\", \"reps\": %zu, \"device\": \"%s\"}\n",
              measure.c_str(), a.config.c_str(), a.B, a.T, median(ms), *std::min_element(ms.begin(), ms.end()), rate_key.c_str(), rate, params,
              a.gemm.c_str(), ms.size(), dev.c_str());
  std::fflush(stdout);
}

template <class M> void bench_train(const std::string& measure, const Args& a, const ModelConfig& c, const std::string& dev) {
  const bool kpass = measure == "kpass2";
  M m(c, 1);
  fc::DeviceModel<M> dm(m, fc::parse_gemm_mode(a.gemm));
  fbt::BackendOptimizer<M, fc::CudaBackend> opt(dm);
  const int N = a.B * a.T;
  Rng data(2);
  std::vector<int> tokens(N), targets(N);
  for (int n = 0; n < N; ++n) tokens[n] = int(data.below(256)), targets[n] = int(data.below(256));
  const Batch b{a.B, a.T, tokens.data(), targets.data(), nullptr};
  Rng rng(3);
  StepOptions o;
  o.K = kpass ? 2 : 1;
  o.sigma = kpass ? 0.02 : 0.0;
  o.rng = &rng;
  std::vector<int> prefix(std::size_t(o.K) * a.B, 0);
  AdamWConfig adam;
  StepStats st;
  std::fprintf(stderr, "gpu_bench %s: %zu parameters, workspace %.2f GiB\n", measure.c_str(), m.params.size(),
               double(dm.workspace_bytes(a.B, a.T, o)) / (1 << 30));
  std::vector<double> ms;
  for (int i = 0; i < a.warmup + a.steps; ++i) {
    for (int j = 1; j < o.K; ++j)
      for (int r = 0; r < a.B; ++r) prefix[std::size_t(j) * a.B + r] = int(rng.below(std::uint32_t(a.T)));  // uniform prefix
    o.prefix = kpass ? prefix.data() : nullptr;
    dm.backend().sync();
    const double t0 = now_ms();
    dm.zero_grad();
    dm.multipass_step(b, o, st);
    opt.adamw_update(adam, 1e-4);
    dm.backend().sync();
    if (i >= a.warmup) ms.push_back(now_ms() - t0);
  }
  print(measure, ms, "tokens_per_s", double(N) / (median(ms) / 1000.0), m.params.size(), a, dev);
}

void bench_decode(const std::string& measure, const Args& a, ModelConfig c, const std::string& dev) {
  using M = Model<float, GluFuser<float>>;
  c.fuser = "glu";
  M m(c, 1);
  fc::DeviceModel<M> dm(m, fc::parse_gemm_mode(a.gemm));
  fc::DeviceDecoder<M> dec(dm);
  const auto mode = DecodeModeSpec::parse(measure == "decode_soft" ? "soft" : "standard");
  Rng data(4);
  std::vector<int> prompt(a.prompt);
  for (auto& t : prompt) t = int(data.below(256));
  std::vector<float> logits(c.vocab_size);
  std::vector<double> ms;
  for (int rep = 0; rep < 1 + std::max(1, a.steps / 2); ++rep) {  // the first repetition warms up
    auto s = dec.new_sequence(a.prompt + a.decode_steps + 1, mode);
    dec.prefill(s, prompt.data(), a.prompt, logits.data());
    int tok = argmax_token(logits.data(), c.vocab_size);
    auto* sp = &s;
    const double t0 = now_ms();
    for (int i = 0; i < a.decode_steps; ++i) {
      dec.step(&sp, 1, &tok, logits.data());  // synchronises: the logits are on the host
      tok = argmax_token(logits.data(), c.vocab_size);
    }
    if (rep > 0) ms.push_back((now_ms() - t0) / a.decode_steps);
  }
  print(measure, ms, "ms_per_token", median(ms), m.params.size(), a, dev);
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) throw Error("gpu_bench: " + k + " needs a value");
      return argv[++i];
    };
    if (k == "--config") a.config = next();
    else if (k == "--batch") a.B = std::stoi(next());
    else if (k == "--seq") a.T = std::stoi(next());
    else if (k == "--steps") a.steps = std::stoi(next());
    else if (k == "--warmup") a.warmup = std::stoi(next());
    else if (k == "--prompt") a.prompt = std::stoi(next());
    else if (k == "--decode-steps") a.decode_steps = std::stoi(next());
    else if (k == "--gemm") a.gemm = next();
    else if (k == "--measures") a.measures = next();
    else {
      std::fprintf(stderr, "usage: gpu_bench [--config 100m|small] [--batch B] [--seq T] [--steps N] [--warmup W] [--prompt P] "
                           "[--decode-steps S] [--gemm fp32|tf32|bf16] [--measures train,kpass2,decode_standard,decode_soft]\n");
      return 2;
    }
  }
  try {
    if (!fc::device_available()) {
      std::fprintf(stderr, "gpu_bench: %s\n", fc::no_device_reason().c_str());
      return 3;
    }
    const std::string dev = fc::device_name();
    const ModelConfig c = make_config(a.config, a);
    std::size_t from = 0;
    while (from <= a.measures.size()) {
      const std::size_t to = std::min(a.measures.find(',', from), a.measures.size());
      const std::string meas = a.measures.substr(from, to - from);
      from = to + 1;
      if (meas.empty()) continue;
      ModelConfig cm = c;
      if (meas == "train") {
        cm.fuser = "none";
        bench_train<Model<float, NoFuser<float>>>(meas, a, cm, dev);
      } else if (meas == "kpass2") {
        cm.fuser = "glu";
        bench_train<Model<float, GluFuser<float>>>(meas, a, cm, dev);
      } else if (meas == "decode_standard" || meas == "decode_soft") {
        bench_decode(meas, a, c, dev);
      } else {
        throw Error("gpu_bench: unknown measure \"" + meas + "\"");
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpu_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
