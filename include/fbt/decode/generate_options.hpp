// fbt/decode/generate_options.hpp: what one generation request asks for (the decoding mode, how many tokens,
// sampling, its seed, a stop token): decode/decoder.hpp's generate and fbt/session.hpp take it.
#pragma once

#include <cstdint>

#include "policy.hpp"
#include "sampling.hpp"

namespace fbt {

/// What one request asks for.
struct GenerateOptions {
  DecodeModeSpec mode;
  int max_new_tokens = 64;
  SamplingOptions sampling;
  std::uint64_t seed = 0;  ///< the request's own sampling stream
  int stop_token = -1;     ///< generation ends after emitting it (-1: none)
};

}  // namespace fbt
