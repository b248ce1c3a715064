// fbt/config.hpp: version macros and the library-wide assertion.
//
// Every other header includes this one first. FBT_ASSERT is always on (the checks are cheap shape
// tests at kernel entry, never inside inner loops) and throws fbt::Error so that a bad call is a
// clear message rather than a crash.
#pragma once

#include <stdexcept>
#include <string>

#define FBT_VERSION_MAJOR 0
#define FBT_VERSION_MINOR 1
#define FBT_VERSION_PATCH 0
#define FBT_VERSION_STRING "0.1.0"

#if __cplusplus >= 202002L
#define FBT_CXX20 1
#else
#define FBT_CXX20 0
#endif

#if defined(__has_include)
#if __has_include(<xtensor/xarray.hpp>) || __has_include(<xtensor/containers/xarray.hpp>)
#define FBT_HAS_XTENSOR 1
#endif
#endif
#ifndef FBT_HAS_XTENSOR
#define FBT_HAS_XTENSOR 0
#endif

namespace fbt {

/// \brief Every error fbt raises: bad configuration, bad shapes, bad files, non-finite losses.
struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

namespace detail {
[[noreturn]] inline void assert_fail(const char* cond, const char* file, int line, const std::string& msg) {
  throw Error(std::string("fbt: ") + msg + " (check `" + cond + "` failed at " + file + ":" + std::to_string(line) + ")");
}
}  // namespace detail

}  // namespace fbt

/// FBT_ASSERT(cond, msg): throws fbt::Error naming the condition and the message when cond is false.
#define FBT_ASSERT(cond, msg)                                                          \
  do {                                                                                 \
    if (!(cond)) ::fbt::detail::assert_fail(#cond, __FILE__, __LINE__, std::string() + msg); \
  } while (0)
