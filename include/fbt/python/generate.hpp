// fbt/python/generate.hpp: fbt.Decoder, KV-cached generation from Python in every decoding mode (spec section 4;
// docs/python.md), and the byte tokenizer's encode/decode.
//
// generate() is generate_batch (decode/decoder.hpp), the code `fbt sample` runs: with the same checkpoint, prompt,
// mode and options (seed, seed+1, ... for n samples) it gives the command's tokens. It runs without the GIL and
// checks for Ctrl-C between steps, every 20 ms at most (KeyboardInterrupt; the session is then reset). The sequences stay in the
// Decoder after a call: generate(more, resume=True) feeds `more` after the last generated token and goes on, the
// KV caches reused (an interactive session; `context` sizes the caches of a session started by generate()).
// One Decoder runs one call at a time (a second thread gets RuntimeError); two Decoders decode in parallel.
#pragma once

#include <atomic>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nanobind/stl/optional.h>

#include "model.hpp"

namespace fbt {
namespace python {

struct PyDecoder {
  std::shared_ptr<AnyModel> model;
  std::unique_ptr<AnyDecoder> impl;
  int sep = -1;
  std::vector<int> pending;  ///< (n) the last token each kept sequence generated (not yet in its cache); -1 none
  std::unique_ptr<std::atomic<bool>> busy = std::make_unique<std::atomic<bool>>(false);
};

/// Marks a decoder busy for the length of a call; refuses a second, concurrent call.
struct BusyGuard {
  std::atomic<bool>& flag;
  explicit BusyGuard(std::atomic<bool>& f) : flag(f) {
    if (flag.exchange(true)) throw std::runtime_error("fbt.Decoder: already generating in another thread (one call at a time per Decoder; make one Decoder per thread)");
  }
  ~BusyGuard() { flag = false; }
};

/// max_new_tokens: >= 1 (as `fbt sample --max_new_tokens` refuses 0: a call that generates nothing is a mistake)
/// and small enough to be a position count.
inline int max_new_tokens_arg(long long v, int max_position_embeddings) {
  if (v < 1) value_error("max_new_tokens: must be >= 1 (as fbt sample's --max_new_tokens), got " + std::to_string(v));
  if (v > max_position_embeddings)
    value_error("max_new_tokens: " + std::to_string(v) + " is more than the model's max_position_embeddings (" + std::to_string(max_position_embeddings) + ")");
  return int(v);
}

inline void bind_decoder(nb::module_& mod) {
  using D = PyDecoder;
  using P = PyModel;
  if (nb::type<D>().is_valid()) {
    mod.attr("Decoder") = nb::type<D>();
    return;
  }
  nb::class_<D> c(mod, "Decoder",
                  "KV-cached generation from a model (decode/decoder.hpp: the decoder `fbt sample` runs) in the modes standard, soft and\n"
                  "fused(k); the KV caches of the last call are kept, so generate(..., resume=True) goes on from them.");
  c.def(
      "__init__",
      [](D* self, const P& model, std::optional<int> sep) {
        const int s = sep ? *sep : model.sep();
        if (s < -1 || s >= model.impl->vocab()) value_error("sep: the document separator id must be -1 (none) or in [0, " + std::to_string(model.impl->vocab()) + ")");
        new (self) D{model.impl, model.impl->decoder(model.impl, s), s, {}};
      },
      "model"_a, "sep"_a = nb::none(),
      "A decoder of `model` (its current weights). sep: the document separator id (default 256 for a byte-level model, else none);\n"
      "a separator starts a new document (plain input; under masked attention the cache restarts).");
  c.def(
      "generate",
      [](D& self, nb::handle prompt, std::optional<std::string> mode, std::optional<std::string> prefill, long long max_new_tokens, bool greedy,
         double temperature, int top_k, double top_p, std::uint64_t seed, int n, std::optional<int> stop_token, bool resume, int context) -> nb::object {
        BusyGuard busy(*self.busy);
        const AnyModel& am = *self.model;
        const int maxpos = am.config().max_position_embeddings;
        if (n < 1 || n > 1024) value_error("n: samples must be in [1, 1024], got " + std::to_string(n));
        if (context < 0 || context > maxpos)
          value_error("context: must be in [0, max_position_embeddings = " + std::to_string(maxpos) + "], got " + std::to_string(context));
        GenerateOptions o;
        o.max_new_tokens = max_new_tokens_arg(max_new_tokens, maxpos);
        o.sampling.temperature = greedy ? 0.0 : temperature;
        o.sampling.top_k = top_k, o.sampling.top_p = top_p;
        try {
          o.sampling.validate();
        } catch (const Error& e) {
          value_error(std::string(e.what()).substr(std::string("sampling: ").size()));
        }
        if (stop_token && (*stop_token < 0 || *stop_token >= am.vocab()))
          value_error("stop_token: " + std::to_string(*stop_token) + " is outside the vocabulary [0, " + std::to_string(am.vocab()) + ")");
        o.stop_token = stop_token ? *stop_token : -1;
        std::vector<Request> reqs;
        if (!resume) {
          const std::string ms = mode ? *mode : (am.has_feedback() ? "soft" : "standard");
          o.mode = DecodeModeSpec::parse(ms);
          if (prefill) o.mode = o.mode.with_prefill(PrefillSpec::parse(*prefill));
          if (!am.has_feedback() && (o.mode.feeds_back() || o.mode.prefill_feeds_back()))
            value_error("mode: " + o.mode.name() + " feeds the state back, but this model is a baseline (fuser none): use mode=\"standard\"");
          TokenBatch tb = tokens_arg(prompt, "prompt", am.vocab(), 1);
          const std::vector<int> p(tb.ids, tb.ids + tb.T);
          for (int i = 0; i < n; ++i) {
            reqs.push_back({p, o});
            reqs.back().opts.seed = seed + std::uint64_t(i);  // as `fbt sample --n`: seed, seed+1, ...
          }
        } else {
          if (self.impl->sequences() == 0) value_error("resume: no session to resume (call generate(prompt) first; a reset or an interrupted call ends it)");
          if (mode && DecodeModeSpec::parse(*mode).name() != self.impl->mode().name())
            value_error("mode: the session decodes in " + self.impl->mode().name() + "; a resumed call keeps it (leave mode out, or start anew)");
          if (prefill) value_error("prefill: a resumed session has been prefilled; leave prefill out");
          std::vector<int> more;
          if (!prompt.is_none()) {
            if (nb::isinstance<nb::str>(prompt) || nb::isinstance<nb::bytes>(prompt)) {  // the same document goes on: bytes, no separator
              if (am.vocab() != ByteTokenizer::kVocabSize) value_error("prompt: text needs a byte-level model (vocab_size 257); pass token ids");
              const std::string b = nb::isinstance<nb::str>(prompt) ? nb::cast<std::string>(prompt)
                                                                   : std::string(nb::borrow<nb::bytes>(prompt).c_str(), nb::borrow<nb::bytes>(prompt).size());
              more = ByteTokenizer::encode(b);
            } else {
              TokenBatch tb = tokens_arg(prompt, "prompt", am.vocab(), 1);
              more.assign(tb.ids, tb.ids + tb.T);
            }
          }
          o.mode = self.impl->mode();
          for (int i = 0; i < self.impl->sequences(); ++i) {
            std::vector<int> feed;
            if (self.pending[std::size_t(i)] >= 0) feed.push_back(self.pending[std::size_t(i)]);
            feed.insert(feed.end(), more.begin(), more.end());
            if (feed.empty()) value_error("prompt: sequence " + std::to_string(i) + " has nothing to feed (its last call generated no token): give tokens");
            reqs.push_back({feed, o});
          }
        }
        std::vector<std::vector<int>> outs;
        InterruptCheck interrupted;
        {
          nb::gil_scoped_release unlocked;
          outs = self.impl->generate(reqs, resume, context, std::ref(interrupted));
        }
        self.pending.assign(outs.size(), -1);
        for (std::size_t i = 0; i < outs.size(); ++i)
          if (!outs[i].empty()) self.pending[i] = outs[i].back();
        auto arr = [](std::vector<int>&& v) {
          const std::size_t len = v.size();
          return owned_array(std::move(v), {len});
        };
        if (outs.size() == 1) return nb::cast(arr(std::move(outs[0])));
        nb::list l;
        for (auto& v : outs) l.append(arr(std::move(v)));
        return l;
      },
      nb::sig("def generate(self, prompt: NDArray | Sequence[int] | str | bytes | None, mode: str | None = None, prefill: str | None = None, "
              "max_new_tokens: int = 64, greedy: bool = False, temperature: float = 0.8, top_k: int = 0, top_p: float = 1.0, seed: int = 1, "
              "n: int = 1, stop_token: int | None = None, resume: bool = False, context: int = 0) -> NDArray[numpy.int32] | list[NDArray[numpy.int32]]"),
      "prompt"_a.none(), "mode"_a = nb::none(), "prefill"_a = nb::none(), "max_new_tokens"_a = 64, "greedy"_a = false, "temperature"_a = 0.8,
      "top_k"_a = 0, "top_p"_a = 1.0, "seed"_a = 1, "n"_a = 1, "stop_token"_a = nb::none(), "resume"_a = false, "context"_a = 0,
      "Generates new tokens after `prompt`: an int32 array (new,) for n = 1, else a list of n arrays.\n\n"
      "prompt: token ids (T,) (numpy, list, CPU tensor) or text (str/bytes: one document, kSep + the bytes).\n"
      "mode: standard | soft | fused(k) | a registered policy (default soft, standard for a baseline); prefill: standard | fused(k) |\n"
      "recurrent (default: as the mode says). greedy (= temperature 0), temperature, top_k (0 = off), top_p (1 = off): the\n"
      "sampling, in that order; seed: sample i draws from seed + i (as `fbt sample --n`). stop_token: generation ends after it.\n"
      "resume=True: the last call's sequences go on: `prompt` (ids, or text read as bytes of the same document; may be None)\n"
      "is fed after the last generated token, the KV caches reused; mode and seed stay the session's.\n"
      "context: positions each new sequence can hold (default prompt + max_new_tokens; give more to resume later).");
  c.def(
      "score",
      [](D& self, nb::handle requests, std::optional<std::string> mode, std::optional<std::string> prefill, int batch_size) -> nb::list {
        BusyGuard busy(*self.busy);
        const AnyModel& am = *self.model;
        if (batch_size < 1 || batch_size > 4096) value_error("batch_size: must be in [1, 4096], got " + std::to_string(batch_size));
        DecodeModeSpec ms = DecodeModeSpec::parse(mode ? *mode : (am.has_feedback() ? "soft" : "standard"));
        if (prefill) ms = ms.with_prefill(PrefillSpec::parse(*prefill));
        if (!am.has_feedback() && (ms.feeds_back() || ms.prefill_feeds_back()))
          value_error("mode: " + ms.name() + " feeds the state back, but this model is a baseline (fuser none): use mode=\"standard\"");
        if (!nb::isinstance<nb::list>(requests) && !nb::isinstance<nb::tuple>(requests))
          type_error("requests: expected a list of (context, continuation) pairs, got " + py_type_name(requests));
        std::vector<ScoreRequest> reqs;
        std::size_t i = 0;
        for (nb::handle r : requests) {
          const std::string who = "requests[" + std::to_string(i++) + "]";
          if (!(nb::isinstance<nb::tuple>(r) || nb::isinstance<nb::list>(r)) || nb::len(r) != 2)
            type_error(who + ": expected a (context, continuation) pair, got " + py_type_name(r) +
                       (nb::isinstance<nb::tuple>(r) || nb::isinstance<nb::list>(r) ? " of " + std::to_string(nb::len(r)) : std::string()));
          ScoreRequest q;
          const nb::handle ctx = r[0], cont = r[1];
          TokenBatch a = tokens_arg(ctx, (who + "[0]").c_str(), am.vocab(), 1);  // text: one document, kSep first
          q.context.assign(a.ids, a.ids + a.T);
          if (nb::isinstance<nb::str>(cont) || nb::isinstance<nb::bytes>(cont)) {  // the same document goes on: bytes only
            if (am.vocab() != ByteTokenizer::kVocabSize) value_error(who + "[1]: text needs a byte-level model (vocab_size 257); pass token ids");
            const std::string b = nb::isinstance<nb::str>(cont) ? nb::cast<std::string>(cont)
                                                               : std::string(nb::borrow<nb::bytes>(cont).c_str(), nb::borrow<nb::bytes>(cont).size());
            q.continuation = ByteTokenizer::encode(b);
          } else {
            TokenBatch c2 = tokens_arg(cont, (who + "[1]").c_str(), am.vocab(), 1);
            q.continuation.assign(c2.ids, c2.ids + c2.T);
          }
          reqs.push_back(std::move(q));
        }
        std::vector<ScoreResult> res;
        InterruptCheck interrupted;
        try {
          nb::gil_scoped_release unlocked;
          res = self.impl->score(reqs, ms, batch_size, std::ref(interrupted));
        } catch (const Error& e) {
          value_error(e.what());
        }
        nb::list out;
        for (const auto& x : res) out.append(nb::make_tuple(x.logprob, x.greedy));
        return out;
      },
      nb::sig("def score(self, requests: Sequence[tuple[NDArray | Sequence[int] | str | bytes, NDArray | Sequence[int] | str | bytes]], "
              "mode: str | None = None, prefill: str | None = None, batch_size: int = 16) -> list[tuple[float, bool]]"),
      "requests"_a, "mode"_a = nb::none(), "prefill"_a = nb::none(), "batch_size"_a = 16,
      "Log-likelihoods of continuations (decode/score.hpp): for each (context, continuation), the context prefilled in `mode`'s\n"
      "prefill and each continuation token fed as a decoding step, so the mode's policy decides the feedback as when the model\n"
      "generates them. Returns [(sum of log p, whether every token is the greedy choice)]. context: ids or text (one document,\n"
      "kSep + the bytes); continuation: ids or text (bytes, no separator). batch_size sequences are decoded together. The kept\n"
      "sequences of generate() are not touched. What python -m fbt.lm_eval's loglikelihood runs.");
  c.def("reset", [](D& self) {
    BusyGuard busy(*self.busy);
    self.impl->reset(), self.pending.clear();
  }, "Drops the kept sequences (their KV caches).");
  c.def_prop_ro("sequences", [](const D& self) { return self.impl->sequences(); }, "Sequences kept from the last call (0: none).");
  c.def_prop_ro("lengths", [](const D& self) {
    std::vector<int> l;
    for (int i = 0; i < self.impl->sequences(); ++i) l.push_back(self.impl->length(i));
    return l;
  }, "Positions in each kept sequence's cache.");
  c.def_prop_ro("context", [](const D& self) { return self.impl->sequences() ? self.impl->capacity(0) : 0; }, "Positions each kept sequence can hold.");
  c.def_prop_ro("mode", [](const D& self) { return self.impl->sequences() ? self.impl->mode().name() : std::string(); }, "The kept sequences' decoding mode.");
  c.def_prop_ro("model", [](const D& self) { return P{self.model}; });
}

/// The byte tokenizer (data/tokenizer.hpp): text <-> ids of a byte-level model (vocab_size 257).
inline void bind_tokenizer(nb::module_& m) {
  m.def(
      "encode",
      [](nb::handle text, bool document) {
        std::string b;
        if (nb::isinstance<nb::str>(text)) b = nb::cast<std::string>(text);
        else if (nb::isinstance<nb::bytes>(text)) b = std::string(nb::borrow<nb::bytes>(text).c_str(), nb::borrow<nb::bytes>(text).size());
        else type_error("text: expected str or bytes, got " + py_type_name(text));
        std::vector<int> v = document ? ByteTokenizer::encode_document(b) : ByteTokenizer::encode(b);
        const std::size_t n = v.size();
        return owned_array(std::move(v), {n});
      },
      "text"_a, "document"_a = true,
      "Byte-level ids (int32) of `text` (str as UTF-8, or bytes); document=True puts the separator 256 first (how fbt reads a document).");
  m.def(
      "decode",
      [](nb::handle tokens) {
        TokenBatch tb = tokens_arg(tokens, "tokens", ByteTokenizer::kVocabSize, 1);
        std::string s;
        for (int i = 0; i < tb.T; ++i)
          if (tb.ids[i] != ByteTokenizer::kSep) s += char(tb.ids[i]);
        return nb::bytes(s.data(), s.size());
      },
      "tokens"_a, "The bytes of byte-level ids (separators dropped); .decode('utf-8', 'replace') makes text of them.");
}

}  // namespace python
}  // namespace fbt
