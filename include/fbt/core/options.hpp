// fbt/core/options.hpp: the options of a piece of the model (a fuser, a block): what the piece declares
// (name, type, default, range, help), what a config gives (a flat map of values), and the checked values
// the piece reads when it is built.
//
//   A fuser or block declares its options (optional member):
//     static void declare_options(fbt::OptionList& o) {
//       o.add_int("rank", 8, 1, 4096, "rank of the factorised state map");
//     }
//   and reads them from what it is built with (FuserArgs::options, LayerSpec::options):
//     explicit LowRankFuser(const fbt::FuserArgs& a) : rank(int(a.options.get_int("rank"))) {}
//   A config holds them as fuser_options / block_options (a JSON object in files and checkpoints,
//   `--fuser_options '{"rank": 8}'` or `--fuser.rank 8` on the command line). resolve() checks them
//   against the declaration: an unknown key, a wrong type or a value out of range is refused with one
//   line naming the key ("fuser_options.rank: ..."); absent options take their default, and the resolved
//   values (every declared option) are what the checkpoint records.
// Values from a JSON file are typed (a string where a number belongs is refused); values from the command
// line are text, read as the declared type.
#pragma once

#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "../config.hpp"
#include "../detail/input.hpp"

namespace fbt {

/// One option value: a bool, an integer, a real, a string, or (from the command line) text not yet typed.
struct OptionValue {
  enum Kind { Bool, Int, Real, String, Text };
  Kind kind = Text;
  bool b = false;
  long long i = 0;
  double r = 0;
  std::string s;  ///< String, and Text's raw characters

  static OptionValue of_bool(bool v) { OptionValue o; o.kind = Bool, o.b = v; return o; }
  static OptionValue of_int(long long v) { OptionValue o; o.kind = Int, o.i = v; return o; }
  static OptionValue of_real(double v) { OptionValue o; o.kind = Real, o.r = v; return o; }
  static OptionValue of_string(std::string v) { OptionValue o; o.kind = String, o.s = std::move(v); return o; }
  static OptionValue of_text(std::string v) { OptionValue o; o.kind = Text, o.s = std::move(v); return o; }

  /// The value as a config file writes it: true, 8, 0.25, "fan_in" (text unquoted: it has no type yet).
  std::string str() const {
    switch (kind) {
      case Bool: return b ? "true" : "false";
      case Int: return std::to_string(i);
      case Real: {
        std::ostringstream o;
        o.precision(17);
        o << r;
        return o.str();
      }
      case String: return "\"" + s + "\"";
      default: return s;
    }
  }
  bool operator==(const OptionValue& o) const { return kind == o.kind && b == o.b && i == o.i && (r == o.r || (r != r && o.r != o.r)) && s == o.s; }
  bool operator!=(const OptionValue& o) const { return !(*this == o); }
};

/// Option values by name, as a config holds them (sorted by name, so a config's record is canonical).
using Options = std::map<std::string, OptionValue>;

/// What one option is: its name, type, default, range (Int/Real), allowed values (String; empty = any) and help.
struct OptionSpec {
  std::string name;
  OptionValue::Kind kind = OptionValue::Int;
  OptionValue def;
  double lo = 0, hi = 0;
  std::vector<std::string> choices;
  std::string help;
};

/// \brief The options a piece declares (its static declare_options fills one).
class OptionList {
 public:
  void add_int(const std::string& name, long long def, long long lo, long long hi, const std::string& help) {
    add({name, OptionValue::Int, OptionValue::of_int(def), double(lo), double(hi), {}, help});
  }
  void add_real(const std::string& name, double def, double lo, double hi, const std::string& help) {
    add({name, OptionValue::Real, OptionValue::of_real(def), lo, hi, {}, help});
  }
  void add_bool(const std::string& name, bool def, const std::string& help) { add({name, OptionValue::Bool, OptionValue::of_bool(def), 0, 0, {}, help}); }
  /// A string option; `choices` lists the allowed values (empty: any string).
  void add_string(const std::string& name, const std::string& def, std::vector<std::string> choices, const std::string& help) {
    add({name, OptionValue::String, OptionValue::of_string(def), 0, 0, std::move(choices), help});
  }
  const std::vector<OptionSpec>& specs() const { return specs_; }
  const OptionSpec* find(const std::string& name) const {
    for (const auto& s : specs_)
      if (s.name == name) return &s;
    return nullptr;
  }
  std::string names() const {
    std::string r;
    for (const auto& s : specs_) r += (r.empty() ? "" : ", ") + s.name;
    return r.empty() ? "none" : r;
  }
  /// Adds a declared option as it is (a mixed block re-declares its types' options under scoped names).
  void add(OptionSpec s) {
    FBT_ASSERT(!s.name.empty() && find(s.name) == nullptr, "OptionList: option \"" + s.name + "\" is empty or declared twice");
    specs_.push_back(std::move(s));
  }

 private:
  std::vector<OptionSpec> specs_;
};

namespace detail {
inline std::string option_quote(const std::string& v) { return "\"" + excerpt(v) + "\""; }
inline const char* option_kind_name(OptionValue::Kind k) {
  return k == OptionValue::Bool ? "a boolean" : k == OptionValue::Int ? "an integer" : k == OptionValue::Real ? "a number" : "a string";
}
}  // namespace detail

/// \brief Options checked against their declaration, every declared option present: what a piece reads.
class OptionValues {
 public:
  OptionValues() = default;
  long long get_int(const std::string& n) const { return at(n, OptionValue::Int).i; }
  double get_real(const std::string& n) const { return at(n, OptionValue::Real).r; }
  bool get_bool(const std::string& n) const { return at(n, OptionValue::Bool).b; }
  const std::string& get_string(const std::string& n) const { return at(n, OptionValue::String).s; }
  const Options& values() const { return v_; }
  bool has(const std::string& n) const { return v_.count(n) > 0; }

  /// \brief Checks `given` against `list` (errors start with `what`, e.g. "fuser_options" or "fuser \"lowrank\"")
  /// and fills in the defaults. Refuses an unknown key, a value of the wrong type, an integer or real out of
  /// its range and a string outside its choices, each naming `prefix.key`.
  static OptionValues resolve(const OptionList& list, const Options& given, const std::string& prefix, const std::string& owner) {
    OptionValues r;
    for (const auto& kv : given) {
      const OptionSpec* s = list.find(kv.first);
      const std::string key = prefix + "." + kv.first;
      if (!s)
        throw Error(key + ": unknown option of " + owner + " (its options: " + list.names() + ")");
      r.v_[kv.first] = typed(*s, kv.second, key);
    }
    for (const auto& s : list.specs())
      if (!r.v_.count(s.name)) r.v_[s.name] = s.def;
    return r;
  }

 private:
  const OptionValue& at(const std::string& n, OptionValue::Kind k) const {
    auto it = v_.find(n);
    FBT_ASSERT(it != v_.end(), "option \"" + n + "\" has no value: declare it (declare_options) and build the piece from a config, or by hand "
                               "with fbt::make_fuser<F>(args, options) / fbt::make_block<B>(spec, options)");
    FBT_ASSERT(it->second.kind == k, "option \"" + n + "\" is " + detail::option_kind_name(it->second.kind) + ", read as " + detail::option_kind_name(k));
    return it->second;
  }
  /// v as s's type, range-checked. Text (from the command line) is parsed; typed values must match.
  static OptionValue typed(const OptionSpec& s, const OptionValue& v, const std::string& key) {
    auto fail = [&](const std::string& why) -> OptionValue { throw Error(key + ": " + why); };
    OptionValue o;
    o.kind = s.kind;
    switch (s.kind) {
      case OptionValue::Bool:
        if (v.kind == OptionValue::Bool) o.b = v.b;
        else if (v.kind == OptionValue::Text && (v.s == "true" || v.s == "false")) o.b = v.s == "true";
        else return fail("expected a boolean (true or false), got " + (v.kind == OptionValue::Text ? detail::option_quote(v.s) : v.str()));
        return o;
      case OptionValue::Int: {
        if (v.kind == OptionValue::Int) o.i = v.i;
        else if (v.kind == OptionValue::Text) {
          char* end = nullptr;
          errno = 0;
          const long long x = std::strtoll(v.s.c_str(), &end, 10);
          if (v.s.empty() || *end != 0 || errno == ERANGE || v.s.find_first_of(" \t") != std::string::npos)
            return fail("expected an integer, got " + detail::option_quote(v.s));
          o.i = x;
        } else return fail("expected an integer, got " + (v.kind == OptionValue::String ? detail::option_quote(v.s) : v.str()));
        if (double(o.i) < s.lo || double(o.i) > s.hi)
          return fail("must be in [" + std::to_string((long long)s.lo) + ", " + std::to_string((long long)s.hi) + "], got " + std::to_string(o.i));
        return o;
      }
      case OptionValue::Real: {
        if (v.kind == OptionValue::Real) o.r = v.r;
        else if (v.kind == OptionValue::Int) o.r = double(v.i);
        else if (v.kind == OptionValue::Text) {
          char* end = nullptr;
          const double x = std::strtod(v.s.c_str(), &end);
          if (v.s.empty() || *end != 0 || v.s.find_first_not_of("0123456789+-.eE") != std::string::npos)
            return fail("expected a number, got " + detail::option_quote(v.s));
          o.r = x;
        } else return fail("expected a number, got " + (v.kind == OptionValue::String ? detail::option_quote(v.s) : v.str()));
        if (!std::isfinite(o.r) || o.r < s.lo || o.r > s.hi)
          return fail("must be a finite number in [" + OptionValue::of_real(s.lo).str() + ", " + OptionValue::of_real(s.hi).str() + "], got " +
                      OptionValue::of_real(o.r).str());
        return o;
      }
      default: {
        if (v.kind == OptionValue::String || v.kind == OptionValue::Text) o.s = v.s;
        else return fail("expected a string, got " + v.str());
        if (!s.choices.empty()) {
          bool ok = false;
          std::string list;
          for (const auto& c : s.choices) ok = ok || c == o.s, list += (list.empty() ? "" : ", ") + c;
          if (!ok) return fail("unknown value " + detail::option_quote(o.s) + " (expected one of: " + list + ")");
        }
        return o;
      }
    }
  }
  Options v_;
};

// ---- the optional declare_options member --------------------------------------------------------

template <class X, class = void> struct has_declared_options : std::false_type {};
template <class X>
struct has_declared_options<X, std::void_t<decltype(X::declare_options(std::declval<OptionList&>()))>> : std::true_type {};

/// The options a piece type X declares (none when it has no declare_options).
template <class X> OptionList declared_options() {
  OptionList o;
  if constexpr (has_declared_options<X>::value) X::declare_options(o);
  return o;
}

}  // namespace fbt
