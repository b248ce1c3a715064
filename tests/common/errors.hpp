// tests/common/errors.hpp: the message of an fbt::Error, for tests that check what a refusal says.
#pragma once

#include <string>

#include "fbt/config.hpp"

namespace fbt_test {

/// The message of the fbt::Error that f() throws, or "<no throw>" if it returns.
template <class F> std::string error_of(F&& f) {
  try {
    f();
  } catch (const fbt::Error& e) {
    return e.what();
  }
  return "<no throw>";
}

inline bool contains(const std::string& s, const std::string& sub) { return s.find(sub) != std::string::npos; }

}  // namespace fbt_test
