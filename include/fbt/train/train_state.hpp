// fbt/train/train_state.hpp: reading what a checkpoint's training state records, checked before it is
// trusted: the run's config (read_train_config) and the generators' states.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <random>
#include <sstream>
#include <string>

#include "../core/rng.hpp"
#include "../detail/input.hpp"
#include "../io/json.hpp"
#include "../io/safetensors.hpp"
#include "config.hpp"

namespace fbt {

namespace detail {
/// Refuses (fbt::Error "<who>: '<path>': ...") a path that is not a regular file, before anything opens it:
/// opening a FIFO blocks, a device never ends. Size limits are the reader's (io/safetensors.hpp).
inline void require_regular_file(const std::string& path, const std::string& who) {
  regular_file_size(path, std::numeric_limits<std::uint64_t>::max(), who);
}

/// Checks an Rng state string as Rng::state() writes it, before Rng::set_state trusts it: the engine's
/// words (each a 32-bit value), the engine's position when the library writes one (at most the word
/// count), the Box-Muller flag (0 or 1) and the spare normal (finite); nothing more, and the state must
/// read back to the same text. Throws fbt::Error "<where>: field \"<name>\" ...".
inline void check_rng_state(const std::string& s, const std::string& where, const char* name) {
  auto fail = [&](const std::string& why) {
    throw Error(where + ": field \"" + name + "\" is " + quote_value(s) + ": " + why + " (expected a generator state as fbt writes it)");
  };
  auto count = [](const std::string& t) {
    std::istringstream is(t);
    std::string w;
    std::size_t n = 0;
    while (is >> w) ++n;
    return n;
  };
  const std::size_t n_expected = count(Rng(1).state());
  const std::size_t n_words = std::mt19937::state_size;
  if (count(s) != n_expected) fail("it holds " + std::to_string(count(s)) + " field(s), not " + std::to_string(n_expected));
  std::istringstream is(s);
  std::string w;
  for (std::size_t i = 0; i + 2 < n_expected; ++i) {
    is >> w;
    const bool digits = !w.empty() && w.size() <= 10 && w.find_first_not_of("0123456789") == std::string::npos;
    const unsigned long long x = digits ? std::strtoull(w.c_str(), nullptr, 10) : 0;
    const unsigned long long limit = i < n_words ? 0xFFFFFFFFull : n_words;  // a word, or the engine's position
    if (!digits || x > limit) fail("entry " + std::to_string(i) + " (" + quote_value(w) + ") is not an integer in [0, " + std::to_string(limit) + "]");
  }
  is >> w;
  if (w != "0" && w != "1") fail("the normal-spare flag " + quote_value(w) + " is not 0 or 1");
  is >> w;
  char* end = nullptr;
  const double spare = std::strtod(w.c_str(), &end);
  if (*end != 0 || !std::isfinite(spare)) fail("the spare normal " + quote_value(w) + " is not a finite number");
  Rng r;
  r.set_state(s);
  if (r.state() != s) fail("it does not read back to itself");
}
}  // namespace detail

/// \brief The training config a checkpoint directory's run was made with (its train_state's record):
/// what a program reads to choose the model type (fbt::with_model) before resuming it.
inline TrainConfig read_train_config(const std::string& dir) {
  const std::string st_path = dir + "/train_state.safetensors";
  if (!std::filesystem::exists(dir) && std::filesystem::exists(dir + ".old"))
    throw Error("checkpoint '" + dir + "' is missing but '" + dir + ".old' exists: a save was interrupted; resume from '" + dir + ".old'");
  detail::require_regular_file(st_path, "training state");  // a FIFO would block the read forever
  const SafetensorsFile f = read_safetensors(st_path);
  auto it = f.metadata.find("train_config");
  if (it == f.metadata.end()) throw Error("training state '" + st_path + "': metadata field \"train_config\" is missing");
  TrainConfig c;
  const std::string where = "training state '" + st_path + "' (train_config)";
  apply_json(c, detail::parse_json_strict(it->second, where), where);
  return c;
}

}  // namespace fbt
