// fbt/python/decoder.hpp: the decoder behind fbt.Decoder (docs/python.md): the library's Decoder<M>
// (decode/decoder.hpp) and its generate_batch, the code `fbt sample` runs, with the sequences (KV caches and
// fed-back states) and the sampling streams kept between calls for an interactive session.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "../decode/decoder.hpp"
#include "../decode/score.hpp"

namespace fbt {
namespace python {

/// \brief A decoding session over some model type: the sequences of the last generate() call, kept.
struct AnyDecoder {
  virtual ~AnyDecoder() = default;
  /// \brief Generates for each request. resume false: fresh sequences of `capacity` positions (0: each request's
  /// prompt + max_new_tokens), each request's Rng from its seed; resume true: the kept sequences go on, each fed its
  /// request's prompt first (reqs.size() must be sequences()). between_steps runs after every decoding step.
  virtual std::vector<std::vector<int>> generate(const std::vector<Request>& reqs, bool resume, int capacity,
                                                 const std::function<void()>& between_steps) = 0;
  virtual void reset() = 0;                  ///< drops the kept sequences
  virtual int sequences() const = 0;         ///< kept sequences (0 after reset or before the first call)
  virtual int length(int i) const = 0;       ///< positions in sequence i's cache (since its document start)
  virtual int capacity(int i) const = 0;     ///< positions sequence i can hold
  virtual DecodeModeSpec mode() const = 0;   ///< the kept sequences' mode
  /// \brief Log-likelihoods of continuations in `mode` (decode/score.hpp), on fresh sequences: the kept ones are
  /// not touched.
  virtual std::vector<ScoreResult> score(const std::vector<ScoreRequest>& reqs, const DecodeModeSpec& mode, int batch,
                                         const std::function<void()>& between_steps) = 0;
};

template <class M> struct DecoderOf final : AnyDecoder {
  using Seq = typename Decoder<M>::Seq;
  std::shared_ptr<const void> keep;  ///< the model (the decoder reads its weights)
  Decoder<M> dec;
  std::vector<Seq> seqs;
  std::vector<Rng> rngs;

  DecoderOf(std::shared_ptr<const void> owner, const M& m, int sep) : keep(std::move(owner)), dec(m, sep) {}

  std::vector<std::vector<int>> generate(const std::vector<Request>& reqs, bool resume, int cap, const std::function<void()>& between) override {
    if (!resume) {
      reset();
      const int maxpos = dec.model().opts.max_position_embeddings;
      for (std::size_t i = 0; i < reqs.size(); ++i) {
        const int need = checked_capacity(reqs[i], int(i), maxpos);
        if (cap > 0 && cap < need)
          throw Error("context " + std::to_string(cap) + ": the prompt and max_new_tokens need " + std::to_string(need) + " positions");
        seqs.push_back(dec.new_sequence(cap > 0 ? cap : need, reqs[i].opts.mode));
        rngs.emplace_back(reqs[i].opts.seed);
      }
    } else {
      FBT_ASSERT(reqs.size() == seqs.size(), "resume: " + std::to_string(reqs.size()) + " requests for " + std::to_string(seqs.size()) + " kept sequences");
    }
    try {
      return generate_batch(dec, reqs, seqs, rngs, between);
    } catch (...) {  // interrupted or refused half way: the caches may hold part of a step
      reset();
      throw;
    }
  }
  void reset() override { seqs.clear(), rngs.clear(); }
  int sequences() const override { return int(seqs.size()); }
  int length(int i) const override { return seqs[std::size_t(i)].len; }
  int capacity(int i) const override { return seqs[std::size_t(i)].capacity; }
  DecodeModeSpec mode() const override { return seqs.empty() ? DecodeModeSpec{} : seqs[0].mode; }
  std::vector<ScoreResult> score(const std::vector<ScoreRequest>& reqs, const DecodeModeSpec& m, int batch, const std::function<void()>& between) override {
    return score_continuations(dec, reqs, m, batch, between);
  }
};

}  // namespace python
}  // namespace fbt
