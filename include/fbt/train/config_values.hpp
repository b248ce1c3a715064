// fbt/train/config_values.hpp: the grammar of a value's text, one for every way a value arrives (a flag,
// a config file's string, a checkpoint's record, `fbt`'s own options through cli::int_option / real_option):
// integers range-checked against their type ("1e5" is 100000, "1.5" and "0x10" are refused), finite reals,
// booleans (true/false, 1/0, on/off), comma lists, and the shortest text that reads back as the same double.
// Every refusal names the field (or the option) and quotes the value, bounded (detail::excerpt).
#pragma once

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "../config.hpp"
#include "../detail/input.hpp"

namespace fbt {

namespace detail {

/// `"v"` as an error message quotes an option's value: bounded (detail::excerpt), so a 20 MB value
/// gives a short line.
inline std::string quote_value(const std::string& v) { return "\"" + excerpt(v) + "\""; }

/// True when `v` holds only the characters of a decimal number ("-12", "1e6", "0.5"): no spaces,
/// hex, "inf" or "nan", which strtod would otherwise accept.
inline bool decimal_chars(const std::string& v) {
  if (v.empty()) return false;
  for (char ch : v)
    if (!((ch >= '0' && ch <= '9') || ch == '+' || ch == '-' || ch == '.' || ch == 'e' || ch == 'E')) return false;
  return true;
}

/// \brief The whole of `v` as an integer of type I, range-checked against I (no wrap, no truncation).
///
/// Accepts decimal digits with an optional sign, and a whole number written as a real ("1e6", "64.0"),
/// so `--steps 1e5` works. Refuses, naming field `f` and the value: anything else ("12abc", "1.5", "",
/// " 3", "0x10", "inf") with "expected an integer", and a value outside I with "is out of range
/// (expected an integer in [min, max])".
/// `label` starts the error message: "config field steps" (parse_integer) or "--passes" (the CLI's own options).
template <class I> I parse_integer_as(const std::string& label, const std::string& v) {
  static_assert(std::is_integral<I>::value, "parse_integer: I must be an integer type");
  using Lim = std::numeric_limits<I>;
  const auto out_of_range = [&] {
    return Error(label + ": " + quote_value(v) + " is out of range (expected an integer in [" + std::to_string(Lim::min()) + ", " +
                 std::to_string(Lim::max()) + "])");
  };
  const auto not_integer = [&] { return Error(label + ": expected an integer, got " + quote_value(v)); };
  if (!decimal_chars(v)) throw not_integer();
  const bool negative = v[0] == '-';
  char* end = nullptr;
  errno = 0;
  if constexpr (std::is_unsigned<I>::value) {
    if (!negative) {  // strtoull would wrap "-1" to 2^64 - 1
      const unsigned long long x = std::strtoull(v.c_str(), &end, 10);
      if (*end == 0) {
        if (errno == ERANGE || x > static_cast<unsigned long long>(Lim::max())) throw out_of_range();
        return static_cast<I>(x);
      }
    }
  } else {
    const long long x = std::strtoll(v.c_str(), &end, 10);
    if (*end == 0) {
      if (errno == ERANGE || x < static_cast<long long>(Lim::min()) || x > static_cast<long long>(Lim::max())) throw out_of_range();
      return static_cast<I>(x);
    }
  }
  // not plain digits: a whole number written as a real?
  errno = 0;
  const double d = std::strtod(v.c_str(), &end);
  if (*end != 0 || end == v.c_str()) throw not_integer();
  if (!std::isfinite(d)) throw out_of_range();  // 1e999
  if (d != std::floor(d)) throw not_integer();
  // double(max) + 1 is exact for every integer type (2^31, 2^63, 2^64), so this is the exact range test
  if (!(d >= static_cast<double>(Lim::min()) && d < static_cast<double>(Lim::max()) + 1.0)) throw out_of_range();
  return static_cast<I>(d);
}
template <class I> I parse_integer(const std::string& f, const std::string& v) { return parse_integer_as<I>("config field " + f, v); }

/// \brief The whole of `v` as a long (see parse_integer).
inline long parse_long(const std::string& f, const std::string& v) { return parse_integer<long>(f, v); }
/// \brief The whole of `v` as an int (see parse_integer): "4294967312" is out of range, not 16.
inline int parse_int(const std::string& f, const std::string& v) { return parse_integer<int>(f, v); }

/// \brief The whole of `v` as a finite real. Refuses, naming field `f` and the value, anything that is
/// not a decimal number ("0.5junk", "", "0x1p3") and a non-finite one ("inf", "nan", "1e999").
inline double parse_double_as(const std::string& label, const std::string& v) {
  char* end = nullptr;
  const double x = std::strtod(v.c_str(), &end);
  const bool whole = !v.empty() && end != v.c_str() && *end == 0;
  if (whole && !std::isfinite(x)) throw Error(label + ": expected a finite number, got " + quote_value(v));
  if (!whole || !decimal_chars(v)) throw Error(label + ": expected a number, got " + quote_value(v));
  return x;
}
inline double parse_double(const std::string& f, const std::string& v) { return parse_double_as("config field " + f, v); }
inline bool parse_bool(const std::string& f, const std::string& v) {
  if (v == "true" || v == "1" || v == "on") return true;
  if (v == "false" || v == "0" || v == "off") return false;
  throw Error("config field " + f + ": expected true or false, got " + quote_value(v));
}
/// "256,128,256" -> {256, 128, 256}; "" -> {} (a field of per-layer sizes).
inline std::vector<int> parse_int_list(const std::string& f, const std::string& v) {
  std::vector<int> out;
  if (v.empty()) return out;
  std::size_t i = 0;
  while (i <= v.size()) {
    const std::size_t j = std::min(v.find(',', i), v.size());
    out.push_back(parse_int(f, v.substr(i, j - i)));
    i = j + 1;
  }
  return out;
}
/// "decoder,gated_attn" -> {"decoder", "gated_attn"} ("" = none); an empty name is refused naming the field.
inline std::vector<std::string> parse_name_list(const std::string& f, const std::string& v) {
  std::vector<std::string> r;
  if (v.empty()) return r;
  std::size_t a = 0;
  while (true) {
    const std::size_t b = v.find(',', a);
    const std::string n = v.substr(a, b == std::string::npos ? std::string::npos : b - a);
    if (n.empty()) throw Error(f + ": an empty name in " + quote_value(v) + " (expected names separated by commas)");
    r.push_back(n);
    if (b == std::string::npos) return r;
    a = b + 1;
  }
}
inline std::string format_name_list(const std::vector<std::string>& v) {
  std::string r;
  for (const auto& n : v) r += (r.empty() ? "" : ",") + n;
  return r;
}
inline std::string format_int_list(const std::vector<int>& v) {
  std::string s;
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s;
}
/// The shortest decimal text that reads back as exactly x (15 digits when they suffice, else 17).
inline std::string num(double x) {
  for (int prec : {15, 17}) {
    std::ostringstream os;
    os.precision(prec);
    os << x;
    if (prec == 17 || std::strtod(os.str().c_str(), nullptr) == x) return os.str();
  }
  return {};
}
}  // namespace detail

}  // namespace fbt
