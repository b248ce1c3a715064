// fbt/cli/args.hpp: what every `fbt` subcommand shares: the --name value pairs, options read
// with their range checked, checkpoints whose vocabulary the byte tokenizer can serve, and text files
// read only when they are regular files of bounded size.
//
// Every refusal is an fbt::Error whose text names the option (or the file and the field), quotes the
// value (bounded: detail::excerpt) and says what was expected; `fbt` prints it as one line on stderr and
// exits with status 1. Kept in a header so tests/tools/test_cli.cpp checks the same code the command runs.
#pragma once

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "../data/tokenizer.hpp"
#include "../detail/input.hpp"
#include "../io/hf.hpp"
#include "../train/config.hpp"

namespace fbt {
namespace cli {

using Args = std::vector<std::pair<std::string, std::string>>;

/// \brief --name value / --name=value pairs (everything after the subcommand). One rule for every
/// subcommand: an option given twice is refused, naming it (a second value would otherwise silently win
/// or be lost), except the options listed in `repeatable` (ablate's --vary), which may be given any
/// number of times.
inline Args parse_args(int argc, char** argv, int from, const std::vector<std::string>& repeatable = {}) {
  Args a;
  auto add = [&](std::string k, std::string v) {
    if (std::find(repeatable.begin(), repeatable.end(), k) == repeatable.end())
      for (const auto& kv : a)
        if (kv.first == k)
          throw Error("option --" + detail::excerpt(k) + " is given twice (" + detail::quote_value(kv.second) + " and " + detail::quote_value(v) +
                      "): give each option once");
    a.push_back({std::move(k), std::move(v)});
  };
  for (int i = from; i < argc; ++i) {
    std::string k = argv[i];
    if (k == "--help" || k == "-h") {
      a.push_back({"help", ""});
      continue;
    }
    if (k.rfind("--", 0) != 0) throw Error("unexpected argument \"" + detail::excerpt(k) + "\" (options look like --name value)");
    k = k.substr(2);
    const auto eq = k.find('=');
    if (eq != std::string::npos) {
      add(k.substr(0, eq), k.substr(eq + 1));
    } else {
      if (i + 1 >= argc) throw Error("option --" + detail::excerpt(k) + " needs a value");
      add(k, argv[i + 1]);
      ++i;
    }
  }
  return a;
}
inline bool wants_help(const Args& a) {
  for (const auto& kv : a)
    if (kv.first == "help") return true;
  return false;
}
/// The value of --key (removed from `a`), or `def` when absent.
inline std::string take(Args& a, const std::string& key, const std::string& def) {
  for (auto it = a.begin(); it != a.end(); ++it)
    if (it->first == key) {
      const std::string v = it->second;
      a.erase(it);
      return v;
    }
  return def;
}
/// \brief --precision fp32|bf16 for the model's matrix products (ops/gemm_bf16.hpp), set for the whole
/// process; refuses an unknown value and bf16 in a build without oneDNN, naming the option.
inline Precision precision_option(const std::string& v) {
  Precision p;
  try {
    p = parse_precision(v);
  } catch (const Error&) {
    throw Error("--precision: expected fp32 or bf16, got \"" + detail::excerpt(v) + "\"");
  }
  if (p == Precision::bf16 && !bf16_available()) throw Error("--precision bf16: " + bf16_unavailable_reason());
  set_matmul_precision(p);
  return p;
}
inline void no_leftovers(const Args& a, const char* cmd) {
  if (!a.empty())
    throw Error(std::string("fbt ") + cmd + ": unknown option --" + detail::excerpt(a.front().first) + " (see fbt " + cmd + " --help)");
}

/// \brief Integer option --name (text v) as I, in [lo, hi]. Refuses a value that is not a whole integer,
/// one outside I ("out of range") and one outside [lo, hi] ("must be >= lo" / "must be in [lo, hi]"),
/// each naming the option and quoting the value; `what` says what the option counts.
template <class I> I int_option(const std::string& name, const std::string& v, I lo, I hi, const std::string& what = "") {
  const I x = detail::parse_integer_as<I>("--" + name, v);
  if (x < lo || x > hi) {
    const std::string range = hi == std::numeric_limits<I>::max() ? ">= " + std::to_string(lo)
                                                                  : "in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
    throw Error("--" + name + " " + detail::quote_value(v) + ": must be " + range + (what.empty() ? std::string() : " (" + what + ")"));
  }
  return x;
}

/// \brief Real option --name: a finite number in [lo, hi] (lo_open / hi_open: the end itself excluded).
inline double real_option(const std::string& name, const std::string& v, double lo, bool lo_open, double hi, bool hi_open,
                          const std::string& what = "") {
  const double x = detail::parse_double_as("--" + name, v);
  if ((lo_open ? !(x > lo) : !(x >= lo)) || (hi_open ? !(x < hi) : !(x <= hi))) {
    const std::string range = std::string(lo_open ? "(" : "[") + detail::num(lo) + ", " +
                              (std::isinf(hi) ? std::string("inf") : detail::num(hi)) + (hi_open ? ")" : "]");
    throw Error("--" + name + " " + detail::quote_value(v) + ": must be in " + range + (what.empty() ? std::string() : " (" + what + ")"));
  }
  return x;
}

/// \brief The model config of checkpoint `ck` (an fbt checkpoint directory or model file, or a Hugging Face
/// directory with a config.json: io/hf.hpp), refused up front when its vocabulary is not the byte
/// tokenizer's: every fbt command reads and writes text as bytes (257 tokens: 256 bytes + the document
/// separator), so a 32-token model would fail later with a token-id message instead.
/// \brief As checkpoint_config, for commands that read token ids (any vocabulary).
inline ModelConfig checkpoint_config_any_vocab(const std::string& ck) {
  if (is_hf_model_dir(ck)) return read_hf_config(ck);
  const std::string p = checkpoint_model_file(ck);
  detail::regular_file_size(p, std::numeric_limits<std::uint64_t>::max(), "checkpoint");  // a FIFO would block the read forever
  return read_model_config(p);
}
inline ModelConfig checkpoint_config(const std::string& ck) {
  const ModelConfig c = checkpoint_config_any_vocab(ck);
  const std::string p = is_hf_model_dir(ck) ? ck : checkpoint_model_file(ck);
  if (c.vocab_size != ByteTokenizer::kVocabSize)
    throw Error("checkpoint '" + p + "': vocab_size is " + std::to_string(c.vocab_size) + ", but fbt reads text with its byte tokenizer, which needs " +
                std::to_string(ByteTokenizer::kVocabSize) + " (256 bytes + the document separator)" +
                (c.vocab_size != ByteTokenizer::kVocabSize ? std::string("; fbt sample takes --prompt_ids and --output ids for other vocabularies") : std::string()));
  return c;
}

/// The largest file `--text_file` reads (bytes): 64 MiB, far more than any model's positions.
inline constexpr std::uint64_t kMaxTextOptionBytes = std::uint64_t(64) << 20;

/// \brief The bytes of the file named by option --name: refused before opening when it is not a regular
/// file (a directory, FIFO or device) or is over max_bytes, naming the option and the file.
inline std::string read_text_option(const std::string& name, const std::string& path, std::uint64_t max_bytes = kMaxTextOptionBytes) {
  const std::uint64_t n = detail::regular_file_size(path, max_bytes, "--" + name, "--" + name);
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("--" + name + ": '" + path + "': cannot open file");
  std::string s(std::size_t(n), '\0');
  if (n > 0) in.read(&s[0], std::streamsize(n));
  if (std::uint64_t(in.gcount()) != n) throw Error("--" + name + ": '" + path + "': read error (the file changed while being read?)");
  return s;
}

/// \brief An error message as `fbt` prints it: one line (newlines and control characters shown as '?'),
/// at most 4096 bytes.
inline std::string one_line(const std::string& msg) { return detail::excerpt(msg, 4096); }

}  // namespace cli
}  // namespace fbt
