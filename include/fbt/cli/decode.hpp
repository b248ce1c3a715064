// fbt/cli/decode.hpp: `fbt sample`, `fbt export` and `fbt logits` over the fusers and blocks a command
// knows; sample's modes are the registered decoding policies (decode/policy.hpp).
#pragma once

#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <thread>

#include <unistd.h>

#include "../io/npy.hpp"
#include "common.hpp"

namespace fbt {
namespace cli {

// ----------------------------------------------------------------------------------------- sample
inline int cmd_sample(CommandState& st, Args a) {
  if (wants_help(a)) {
    std::printf(
        "fbt sample --checkpoint CKPT (--prompt TEXT | --prompt_ids ID,ID,...) [--output text|ids] [--sep_id N]\n"
        "           [--mode standard|soft|fused(k)] [--prefill standard|fused(k)|recurrent|recurrent(k)] [--max_new_tokens N] [--temperature X] [--top_k N]\n"
        "           [--top_p X] [--seed N] [--n N] [--precision fp32|bf16] [--max_memory_gb X] [--device cpu|cuda|host]\n\n"
        "Generates with the KV-cache decoder (spec section 4). CKPT is an fbt checkpoint (directory or\n"
        "model.safetensors) or a Hugging Face directory (config.json + model.safetensors or shards).\n"
        "--prompt is text for byte-level models (vocabulary 257); --prompt_ids gives token ids for a model\n"
        "whose tokenizer is not bytes, and --output ids prints the new tokens as ids (comma-separated).\n"
        "--sep_id: the document separator id (default 256 for a byte-level model, else -1 = none).\n"
        "--prefill: how the prompt is prefilled (default: as the mode says); recurrent = token by token, each\n"
        "prompt token fed back with the previous position's state (the prompt decoded in soft mode); recurrent(k)\n"
        "= a standard prefill of all but the last k prompt tokens, those k decoded so.\n"
        "temperature 0 is greedy. --precision bf16 runs the matrix products with bf16 operands and fp32 sums\n"
        "(default fp32). --n samples several continuations together (batched), each with its own seed\n"
        "(seed, seed+1, ...). The n sequences' K/V caches, logits and prefill are estimated before the weights are\n"
        "read and refused above --max_memory_gb (default 0: the machine's available memory).\n"
        "--device: the backend the decoder runs on (cpu, the default; cuda: the fbt_cuda build; host: the CUDA\n"
        "backend's host stand-in); --precision bf16 is the CPU's.\n");
    std::printf("--mode: a decoding policy this command knows: %s (fused takes (k); a policy of your own, NAME(ARG))\n",
                PolicyRegistry::global().names().c_str());
    return 0;
  }
  const std::string ck = take(a, "checkpoint", ""), prompt = take(a, "prompt", ""), prompt_ids = take(a, "prompt_ids", "");
  const std::string output = take(a, "output", "text"), sep_opt = take(a, "sep_id", "");
  if (ck.empty()) throw Error("fbt sample: --checkpoint is required");
  if (prompt.empty() == prompt_ids.empty()) throw Error("fbt sample: give exactly one of --prompt TEXT and --prompt_ids ID,ID,... (non-empty)");
  if (output != "text" && output != "ids") throw Error("--output " + detail::quote_value(output) + ": expected text or ids");
  GenerateOptions o;
  o.mode = DecodeModeSpec::parse(take(a, "mode", "soft"));
  if (const std::string pf = take(a, "prefill", ""); !pf.empty()) o.mode = o.mode.with_prefill(PrefillSpec::parse(pf));
  const int imax = std::numeric_limits<int>::max();
  o.max_new_tokens = int_option<int>("max_new_tokens", take(a, "max_new_tokens", "200"), 1, imax, "tokens to generate");
  o.sampling.temperature = real_option("temperature", take(a, "temperature", "0.8"), 0, false, HUGE_VAL, true, "0 = greedy");
  o.sampling.top_k = int_option<int>("top_k", take(a, "top_k", "0"), 0, imax, "0 = off");
  o.sampling.top_p = real_option("top_p", take(a, "top_p", "1"), 0, true, 1, false, "1 = off");
  o.seed = int_option<std::uint64_t>("seed", take(a, "seed", "1"), 0, std::numeric_limits<std::uint64_t>::max());
  const int n = int_option<int>("n", take(a, "n", "1"), 1, 1024, "samples");
  const Precision prec = precision_option(take(a, "precision", "fp32"));
  const std::string device = take(a, "device", "cpu");
  with_device(device, [](auto) {});
  cpu_only(device, prec == Precision::bf16, "--precision bf16");
  const double max_memory_gb = max_memory_option(a);
  no_leftovers(a, "sample");
  o.sampling.validate();
  // text in or out needs the byte vocabulary (cli::checkpoint_config refuses another); ids work with any
  const bool bytes = !prompt.empty() || output == "text";
  const ModelConfig mc = bytes ? cli::checkpoint_config(ck) : cli::checkpoint_config_any_vocab(ck);
  const int sep = sep_opt.empty() ? (mc.vocab_size == ByteTokenizer::kVocabSize ? kSep : -1)
                                  : int_option<int>("sep_id", sep_opt, -1, mc.vocab_size - 1, "the document separator id, -1 = none");
  std::vector<int> prompt_tokens;
  if (!prompt.empty()) {
    prompt_tokens = ByteTokenizer::encode_document(prompt);
  } else {
    for (const auto& v : split(prompt_ids, ',')) {
      const std::size_t i = prompt_tokens.size();
      const long long id = int_option<long long>("prompt_ids", v, std::numeric_limits<long long>::min(), std::numeric_limits<long long>::max(), "token ids");
      if (id < 0 || id >= mc.vocab_size)
        throw Error("--prompt_ids: id " + std::to_string(id) + " at position " + std::to_string(i) + " is outside the model's vocabulary [0, " +
                    std::to_string(mc.vocab_size) + ")");
      prompt_tokens.push_back(int(id));
    }
  }
  // the prompt and the new tokens must fit the model's positions: said before the weights are loaded
  const long long P = static_cast<long long>(prompt_tokens.size()), maxpos = mc.max_position_embeddings;
  if (P > maxpos)
    throw Error(std::string(prompt.empty() ? "--prompt_ids: " : "--prompt: ") + std::to_string(P) +
                (prompt.empty() ? " tokens" : " tokens (its bytes and the document separator)") + ", more than the model's max_position_embeddings (" +
                std::to_string(maxpos) + ")");
  if (P + o.max_new_tokens > maxpos)
    throw Error("--max_new_tokens " + std::to_string(o.max_new_tokens) + ": the prompt takes " + std::to_string(P) + " of the model's " +
                std::to_string(maxpos) + " positions (max_position_embeddings), so at most " + std::to_string(maxpos - P) + " new tokens fit");
  // the n sequences' K/V caches, the logits and the prefill, said before the weights are loaded
  check_command_memory(st, "sample", sample_memory(mc, n, P, P + o.max_new_tokens, o.mode.prefill_passes()), max_memory_gb,
                       "lower --n or --max_new_tokens");
  std::vector<std::vector<int>> outs;
  with_device(device, [&](auto be_tag) {
    with_model<float>(mc, [&](auto tag) {
      using M = typename decltype(tag)::type;
      M m = load_checkpoint<M>(ck);
      if (o.mode.feeds_back() && !m.feedback()) {
        std::fprintf(stderr, "note: %s is a baseline (fuser none); decoding in standard mode\n", ck.c_str());
        o.mode = DecodeModeSpec{};
      }
      if (o.mode.prefill_feeds_back() && !m.feedback())
        throw Error("fbt sample: --prefill " + o.mode.prefill.describe() + " needs a feedback fuser; " + ck + " is a baseline (fuser none)");
      on_backend<typename decltype(be_tag)::type>(m, sep, [&](auto&, const auto&, auto& dec) {
        std::vector<Request> reqs;
        for (int i = 0; i < n; ++i) {
          reqs.push_back({prompt_tokens, o});
          reqs.back().opts.seed = o.seed + std::uint64_t(i);  // wraps at 2^64 by design: seeds are bit patterns
        }
        outs = generate_batch(dec, reqs);
      });
    });
  });
  for (int i = 0; i < n; ++i) {
    std::printf("--- sample %d (%s, temperature %g, seed %llu)\n", i + 1, o.mode.name().c_str(), o.sampling.temperature,
                (unsigned long long)(o.seed + std::uint64_t(i)));
    if (output == "ids") {
      std::string line;
      for (int t : outs[i]) line += (line.empty() ? "" : ",") + std::to_string(t);
      std::printf("%s\n", line.c_str());
    } else {
      const std::string head = prompt.empty() ? ByteTokenizer::decode_visible(prompt_tokens) : prompt;
      std::printf("%s%s\n", head.c_str(), ByteTokenizer::decode_visible(outs[i]).c_str());
    }
  }
  return 0;
}

// ----------------------------------------------------------------------------------------- logits
// ----------------------------------------------------------------------------------------- export
inline int cmd_export(CommandState& /*st*/, Args a) {
  if (wants_help(a)) {
    std::printf(
        "fbt export --checkpoint CKPT --hf DIR [--plain true] [--dtype F32|BF16]\n\n"
        "Writes the checkpoint as a Hugging Face directory (docs/interop.md). A full-bandwidth model (and a baseline\n"
        "a Qwen3 cannot hold: sandwich norms, per-layer sizes, no QK-norm) becomes the remote-code model FbtForCausalLM:\n"
        "config.json (fbt's config, auto_map), model.safetensors, modeling_fbt.py, configuration_fbt.py, fbt_torch.py,\n"
        "tokenization_fbt.py; AutoModelForCausalLM.from_pretrained(DIR, trust_remote_code=True) loads it with its\n"
        "feedback (K-pass forward, generate() in standard, soft and fused(k)). A baseline, or with --plain true the\n"
        "plain part (pass 1) of a full-bandwidth model, is a Qwen3ForCausalLM with no missing or unexpected keys.\n"
        "fbt loads every export back. CKPT may itself be a Hugging Face directory.\n");
    return 0;
  }
  const std::string ck = take(a, "checkpoint", ""), dir = take(a, "hf", ""), dtype = take(a, "dtype", "F32");
  const bool plain = detail::parse_bool("plain", take(a, "plain", "false"));
  no_leftovers(a, "export");
  if (ck.empty()) throw Error("fbt export: --checkpoint is required");
  if (dir.empty()) throw Error("fbt export: --hf DIR (the directory to write) is required");
  if (dtype != "F32" && dtype != "BF16") throw Error("--dtype " + detail::quote_value(dtype) + ": expected F32 or BF16");
  const ModelConfig mc = cli::checkpoint_config_any_vocab(ck);
  with_model<float>(mc, [&](auto tag) {
    using M = typename decltype(tag)::type;
    const M m = load_checkpoint<M>(ck);
    save_hf_dir(dir, m, HfExportOptions{plain, dtype});
    const bool remote = hf_remote_code_implements(m.cfg) && (m.feedback() ? !plain : !qwen3_cannot_hold(m.cfg).empty());
    if (remote)
      std::printf("wrote %s: FbtForCausalLM (fuser %s, remote code: AutoModelForCausalLM.from_pretrained(DIR, trust_remote_code=True)), %s\n", dir.c_str(),
                  m.cfg.fuser.c_str(), dtype.c_str());
    else
      std::printf("wrote %s: Qwen3ForCausalLM%s, %s (config.json, model.safetensors)\n", dir.c_str(),
                  !m.feedback() ? "" : plain ? " (the plain part)" : " with the feedback tensors of a user's fuser (for fbt)", dtype.c_str());
  });
  return 0;
}

inline int cmd_logits(CommandState& st, Args a) {
  if (wants_help(a)) {
    std::printf(
        "fbt logits --checkpoint CKPT (--text TEXT | --text_file FILE) [--passes K] [--precision fp32|bf16] [--max_memory_gb X] --out FILE.npy\n\n"
        "Encodes the text as one document (kSep + bytes, at most max_position_embeddings tokens), runs K passes of\n"
        "the training forward (no prefix mixing, no noise: pass k = fused(k-1) prefill at every position) and\n"
        "writes their logits as a float32 .npy of shape (K, T, V); also FILE.tokens.npy (int32, (T)). K defaults\n"
        "to 3 for a full-bandwidth model, 1 for a baseline.\n");
    return 0;
  }
  const std::string ck = take(a, "checkpoint", ""), text = take(a, "text", ""), tf = take(a, "text_file", ""), out = take(a, "out", "");
  const std::string passes = take(a, "passes", "");
  const int K_opt = passes.empty() ? 0 : int_option<int>("passes", passes, 1, kMaxPasses, "passes whose logits are written");
  precision_option(take(a, "precision", "fp32"));
  const double max_memory_gb = max_memory_option(a);
  no_leftovers(a, "logits");
  if (ck.empty()) throw Error("fbt logits: --checkpoint is required");
  if (out.empty()) throw Error("fbt logits: --out FILE.npy is required");
  if (text.empty() == tf.empty()) throw Error("fbt logits: give exactly one of --text and --text_file");
  const std::string body = tf.empty() ? text : cli::read_text_option("text_file", tf);
  std::vector<float> all;  // (K, T, V)
  std::vector<int> tok = ByteTokenizer::encode_document(body);
  int K = 0, Tn = 0, V = 0;
  const ModelConfig mc = cli::checkpoint_config(ck);
  if (K_opt > 1 && !mc.feedback()) throw Error("--passes " + std::to_string(K_opt) + ": the checkpoint is a baseline (fuser none), which has 1 pass");
  check_command_memory(st, "logits", logits_memory(mc, K_opt > 0 ? K_opt : (mc.feedback() ? 3 : 1), std::min<long long>(tok.size(), mc.max_position_embeddings)),
                       max_memory_gb, "lower --passes or the text's length");
  with_model<float>(mc, [&](auto tag) {
    using M = typename decltype(tag)::type;
    M m = load_checkpoint<M>(ck);
    K = K_opt > 0 ? K_opt : (m.feedback() ? 3 : 1);
    if (int(tok.size()) > m.cfg.max_position_embeddings) tok.resize(m.cfg.max_position_embeddings);
    Tn = int(tok.size()), V = m.V;
    if (Tn < 2) throw Error("fbt logits: the text must hold at least one byte");
    std::vector<std::uint8_t> ds(Tn);
    for (int t = 0; t < Tn; ++t) ds[t] = (t == 0 || tok[t] == kSep) ? 1 : 0;
    all = pass_logits(m, Batch{1, Tn, tok.data(), nullptr, ds.data()}, K);  // pass k = fused(k-1) prefill at every position
  });
  save_npy(out, all.data(), Shape{long(K), long(Tn), long(V)});
  std::vector<std::int32_t> t32(tok.begin(), tok.end());
  const std::string tout = (out.size() > 4 && out.substr(out.size() - 4) == ".npy" ? out.substr(0, out.size() - 4) : out) + ".tokens.npy";
  save_npy(tout, t32.data(), Shape{long(Tn)});
  std::printf("wrote %s (%d passes x %d tokens x %d) and %s\n", out.c_str(), K, Tn, V, tout.c_str());
  return 0;
}

}  // namespace cli
}  // namespace fbt
