// fbt/decode/policy.hpp: decoding policies, what is fed back at the next token (spec section 4), as types
// with a written contract, like the fuser. The paper's three modes are three policies:
//
//   standard   every input is plain; the prompt is prefilled with one plain pass
//   soft       plain prefill; then every new token's input is N_in(Fuse(h_prev, e(tok)))
//   fused(k)   prefill = a plain pass + k fed-back passes over the prompt; then as soft
// A mode may also carry its own prompt prefill (PrefillSpec: standard, fused(k) or recurrent = token by
// token with feedback), written "MODE/prefill=P" (`--prefill P` on the commands).
//
// A policy type P (a user's as well as the built-in ones) has
//   static constexpr const char* name = "...";   the mode's name: `--mode NAME` or `--mode NAME(ARG)`
//   explicit P(const std::string& arg)           ARG ("" when not given); refuse a bad one with fbt::Error
//   int prefill_passes() const                   passes over the prompt: 1 = plain, 1 + k = fused(k)
//   bool feeds_back() const                      whether it uses the fed-back state at all (then the model
//                                                needs a feedback fuser)
//   bool feed(const PolicyStep&) const           whether the new token at this step is fused with h_prev
//                                                (asked only when the model could: a state exists and the
//                                                token does not start a document)
//   std::string describe() const                 the canonical spelling, e.g. "fused(2)"
// The decoder holds a policy as a DecodeModeSpec (a shared, immutable policy object), parsed from text by
// DecodeModeSpec::parse through the registry: the built-in policies are registered there, a program adds
// its own with register_policy<P>() (fbt::cli_main does it for the types it is given).
#pragma once

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <typeinfo>
#include <vector>

#include "../core/queued.hpp"
#include "../config.hpp"
#include "../detail/input.hpp"

namespace fbt {

/// What a policy sees when the decoder asks whether to feed the state back.
struct PolicyStep {
  int position = 0;   ///< the new token's position in its sequence's cache (0 = a document's first)
  int generated = 0;  ///< tokens this sequence has been fed after its prefill, this one not counted
};

/// The decoder's view of a policy (type-erased: a mode is chosen per request at run time).
struct DecodePolicy {
  virtual ~DecodePolicy() = default;
  virtual int prefill_passes() const = 0;
  virtual bool feeds_back() const = 0;
  virtual bool feed(const PolicyStep&) const = 0;
  virtual std::string describe() const = 0;
};

namespace detail {
template <class P> struct PolicyAdapter final : DecodePolicy {
  P p;
  explicit PolicyAdapter(const std::string& arg) : p(arg) {}
  explicit PolicyAdapter(P given, int) : p(std::move(given)) {}
  int prefill_passes() const override { return p.prefill_passes(); }
  bool feeds_back() const override { return p.feeds_back(); }
  bool feed(const PolicyStep& s) const override { return p.feed(s); }
  std::string describe() const override { return p.describe(); }
};
}  // namespace detail

// ---- the built-in policies -----------------------------------------------------------------------

/// standard: no feedback; one plain prefill pass.
struct StandardPolicy {
  static constexpr const char* name = "standard";
  explicit StandardPolicy(const std::string& arg) {
    if (!arg.empty()) throw Error("decoding mode standard takes no argument, got standard(" + detail::excerpt(arg) + ")");
  }
  int prefill_passes() const { return 1; }
  bool feeds_back() const { return false; }
  bool feed(const PolicyStep&) const { return false; }
  std::string describe() const { return "standard"; }
};

/// soft: plain prefill, then every new token fused with the previous position's state.
struct SoftPolicy {
  static constexpr const char* name = "soft";
  explicit SoftPolicy(const std::string& arg) {
    if (!arg.empty()) throw Error("decoding mode soft takes no argument, got soft(" + detail::excerpt(arg) + ")");
  }
  int prefill_passes() const { return 1; }
  bool feeds_back() const { return true; }
  bool feed(const PolicyStep&) const { return true; }
  std::string describe() const { return "soft"; }
};

/// fused(k): a plain pass and k fed-back passes over the prompt (k in [1, 1000], default 1), then as soft.
struct FusedPolicy {
  static constexpr const char* name = "fused";
  int k = 1;
  explicit FusedPolicy(const std::string& arg) {
    if (arg.empty()) return;
    char* end = nullptr;
    const long v = std::strtol(arg.c_str(), &end, 10);
    if (!(end && *end == 0 && v >= 1 && v <= 1000 && arg.find_first_not_of("0123456789") == std::string::npos))
      throw Error("decoding mode fused(" + detail::excerpt(arg) + "): k must be an integer in [1, 1000]");
    k = int(v);
  }
  int prefill_passes() const { return 1 + k; }
  bool feeds_back() const { return true; }
  bool feed(const PolicyStep&) const { return true; }
  std::string describe() const { return "fused(" + std::to_string(k) + ")"; }
};

/// \brief The policies a program knows, by name: the built-in ones, and what register_policy<P>() adds.
class PolicyRegistry {
 public:
  using Factory = std::function<std::shared_ptr<const DecodePolicy>(const std::string& arg)>;
  static PolicyRegistry& global() {
    static PolicyRegistry r;
    std::lock_guard<std::mutex> g(r.queue_mu_);
    detail::run_queued(r, r.applied_);  // FBT_REGISTER_POLICY of files loaded since (core/queued.hpp)
    return r;
  }
  /// Adds P (a second type of the same name is refused; the same type again is a no-op).
  template <class P> void add() {
    std::lock_guard<std::mutex> g(mu_);
    const std::string n = P::name;
    if (n.empty() || n.find_first_of("()") != std::string::npos) throw Error("decoding policy name \"" + detail::excerpt(n) + "\" must be non-empty, without parentheses");
    auto it = types_.find(n);
    if (it != types_.end()) {
      if (it->second == typeid(P).name()) return;
      throw Error("two decoding policies are named \"" + n + "\": give each its own static name");
    }
    types_[n] = typeid(P).name();
    make_[n] = [](const std::string& arg) -> std::shared_ptr<const DecodePolicy> { return std::make_shared<detail::PolicyAdapter<P>>(arg); };
  }
  /// The policy `NAME` or `NAME(ARG)` spells; an unknown name is refused with the list.
  std::shared_ptr<const DecodePolicy> make(const std::string& s) const {
    std::string name = s, arg;
    const auto open = s.find('(');
    if (open != std::string::npos) {
      if (s.back() != ')') throw Error("decoding mode \"" + detail::excerpt(s) + "\": expected NAME or NAME(ARG)");
      name = s.substr(0, open), arg = s.substr(open + 1, s.size() - open - 2);
    }
    std::lock_guard<std::mutex> g(mu_);
    auto it = make_.find(name);
    if (it == make_.end() && open == std::string::npos && s.rfind("fused", 0) == 0 && s.size() > 5)
      return make_.at("fused")(s.substr(5));  // the short form fusedK
    if (it == make_.end()) throw Error("unknown decoding mode \"" + detail::excerpt(s) + "\" (known: " + names_locked() + "; fused takes (k), k in [1, 1000])");
    return it->second(arg);
  }
  std::string names() const {
    std::lock_guard<std::mutex> g(mu_);
    return names_locked();
  }

 private:
  PolicyRegistry() { add<StandardPolicy>(), add<SoftPolicy>(), add<FusedPolicy>(); }
  std::string names_locked() const {
    std::string r;
    for (const auto& kv : make_) r += (r.empty() ? "" : ", ") + kv.first;
    return r;
  }
  mutable std::mutex mu_;
  std::map<std::string, Factory> make_;
  std::map<std::string, std::string> types_;
  std::mutex queue_mu_;
  std::size_t applied_ = 0;
};

/// Makes policy type P known to DecodeModeSpec::parse (and so to `--mode`).
template <class P> void register_policy() { PolicyRegistry::global().add<P>(); }
/// Registers policy type P when the file is loaded (a program's, or a plugin's: fbt/plugin.hpp).
#define FBT_REGISTER_POLICY(P)                                                                                  \
  static const bool FBT_POLICY_CAT(fbt_registered_policy_, __COUNTER__) [[maybe_unused]] =                   \
      ::fbt::detail::queue_registration<::fbt::PolicyRegistry>(+[](::fbt::PolicyRegistry& r) { r.add<P>(); })
#define FBT_POLICY_CAT_(a, b) a##b
#define FBT_POLICY_CAT(a, b) FBT_POLICY_CAT_(a, b)

/// \brief How a prompt is prefilled, when not as its decoding policy says (`--prefill`):
///   policy      the policy's own prefill_passes() (the default)
///   standard    one plain pass (every prompt input is N_in(e))
///   fused(k)    a plain pass and k fed-back passes over the prompt (k in [1, 1000])
///   recurrent   token by token with feedback: the first token plain, then each prompt token's input fused
///               with the previous position's exact state, i.e. the prompt decoded in soft mode from an
///               empty cache (a fully sequential prefill: P one-position steps; = fused(P-1), spec 4)
///   recurrent(k) the last k prompt tokens token by token with feedback, the rest standard: one plain pass
///               over the first P-k tokens, then each of the last k a fed-back step (the first of them fused
///               with the plain pass's state at the token before). k in [1, 1000000]; recurrent(1) gives the
///               last position the layer-0 input fused(1) gives it; k >= P-1 is recurrent.
/// Prefill and generation are independent: `soft` + recurrent prefill feeds back everywhere, `standard`
/// + recurrent prefill reads a recurrently prefilled prompt and then generates without feedback.
struct PrefillSpec {
  enum Kind { kPolicy, kStandard, kFused, kRecurrent };
  Kind kind = kPolicy;
  int k = 0;  ///< fused(k): k; recurrent(k): k fed-back suffix tokens (0 = the whole prompt, "recurrent")
  /// "" or "policy", "standard", "fused(k)" (also "fusedK", "fused" = fused(1)), "recurrent", "recurrent(k)".
  static PrefillSpec parse(const std::string& s) {
    PrefillSpec p;
    if (s.empty() || s == "policy") return p;
    if (s == "standard") return p.kind = kStandard, p;
    if (s == "recurrent") return p.kind = kRecurrent, p;
    if (s.rfind("recurrent(", 0) == 0 && s.back() == ')') {
      const std::string arg = s.substr(10, s.size() - 11);
      char* end = nullptr;
      const long v = std::strtol(arg.c_str(), &end, 10);
      if (arg.empty() || arg.find_first_not_of("0123456789") != std::string::npos || !(end && *end == 0) || v < 1 || v > 1000000)
        throw Error("prefill recurrent(" + detail::excerpt(arg) + "): k (the prompt's last tokens decoded with feedback) must be an integer in [1, 1000000]");
      return p.kind = kRecurrent, p.k = int(v), p;
    }
    std::string arg;
    if (s == "fused") arg = "1";
    else if (s.rfind("fused(", 0) == 0 && s.back() == ')') arg = s.substr(6, s.size() - 7);
    else if (s.rfind("fused", 0) == 0) arg = s.substr(5);
    else throw Error("prefill \"" + detail::excerpt(s) + "\": expected standard, fused(k), recurrent or recurrent(k)");
    p.kind = kFused, p.k = FusedPolicy(arg).k;  // the same k rule as the fused(k) policy
    return p;
  }
  std::string describe() const {
    if (kind == kRecurrent) return k > 0 ? "recurrent(" + std::to_string(k) + ")" : "recurrent";
    return kind == kPolicy ? "policy" : kind == kStandard ? "standard" : "fused(" + std::to_string(k) + ")";
  }
  /// Recurrent prefill of a P-token prompt: how many of its last tokens are fed-back steps (P-1 for the
  /// whole prompt: its first token has no state before it).
  int recurrent_steps(int P) const {
    FBT_ASSERT(kind == kRecurrent && P >= 1, "recurrent_steps: a recurrent prefill of at least one token");
    return k > 0 ? std::min(k, P - 1) : P - 1;
  }
};

/// \brief A decoding mode: a policy object (default: standard) and how the prompt is prefilled (default:
/// as the policy says). What a sequence and a request carry.
struct DecodeModeSpec {
  std::shared_ptr<const DecodePolicy> policy;
  PrefillSpec prefill{};
  /// "standard", "soft", "fused(k)" (also "fusedK", "fused" = fused(1)), or a registered policy's NAME(ARG);
  /// any of them followed by "/prefill=P" (P as PrefillSpec::parse reads it), e.g. "soft/prefill=recurrent".
  static DecodeModeSpec parse(const std::string& s) {
    const std::string tag = "/prefill=";
    const auto at = s.rfind(tag);
    if (at == std::string::npos) return DecodeModeSpec{PolicyRegistry::global().make(s)};
    return DecodeModeSpec{PolicyRegistry::global().make(s.substr(0, at)), PrefillSpec::parse(s.substr(at + tag.size()))};
  }
  /// A policy object made by the program itself.
  template <class P> static DecodeModeSpec of(P p) {
    return DecodeModeSpec{std::make_shared<detail::PolicyAdapter<P>>(std::move(p), 0)};
  }
  /// This mode with the prompt prefilled as p.
  DecodeModeSpec with_prefill(PrefillSpec p) const { return DecodeModeSpec{policy, p}; }
  /// The canonical spelling: parse(name()) gives this mode back.
  std::string name() const {
    const std::string n = policy ? policy->describe() : "standard";
    return prefill.kind == PrefillSpec::kPolicy ? n : n + "/prefill=" + prefill.describe();
  }
  /// Whole-prompt passes of the prefill (1 under recurrent prefill: over its tokens before the fed-back steps).
  int prefill_passes() const {
    switch (prefill.kind) {
      case PrefillSpec::kStandard: case PrefillSpec::kRecurrent: return 1;
      case PrefillSpec::kFused: return 1 + prefill.k;
      default: return policy ? policy->prefill_passes() : 1;
    }
  }
  bool recurrent_prefill() const { return prefill.kind == PrefillSpec::kRecurrent; }
  /// Whether the prefill uses the fed-back state (then the model needs a feedback fuser).
  bool prefill_feeds_back() const { return recurrent_prefill() || prefill_passes() > 1; }
  bool feeds_back() const { return policy && policy->feeds_back(); }
  bool feed(const PolicyStep& s) const { return policy && policy->feed(s); }
};

}  // namespace fbt
