// exercises/checker.hpp: what the checkers share: the run's seed, the result lines, the score, and a guard that
// turns a crash into a message.
//
// Every checker draws its sizes and data from one seed per run, printed on its first line
//     seed 123456789 (this draw again: check_<name>_student --seed 123456789)
// so that a solution cannot fit one fixed case; `--seed N` reproduces a run exactly. ctest passes a fixed
// seed (FBT_COURSE_TEST_SEED), so its results do not change from run to run; scripts/grade.sh passes one seed
// to all the checkers of a grading run and records it in its JSON.
//
// Every check prints one line, "  PASS  what  detail" or "  FAIL  what  detail". Some checks carry points
// (the rubric in docs/course/teaching.md); the checker's last line before its verdict is
//     grade: <exercise> <points>/<max>
// which scripts/grade.sh reads. A check without points (one that checks the given code, not yours) still
// counts as a failure when it fails.
#pragma once

#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>

#include <unistd.h>

namespace fbt_course_check {

/// The run's seed: N from `--seed N` (or `--seed=N`), else a fresh one. Prints it as the first line.
inline std::uint64_t run_seed(int argc, char** argv) {
  std::uint64_t seed = 0;
  bool given = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    std::string v;
    if (a == "--seed" && i + 1 < argc) v = argv[++i];
    else if (a.rfind("--seed=", 0) == 0) v = a.substr(7);
    char* end = nullptr;
    if (!v.empty()) seed = std::strtoull(v.c_str(), &end, 10);
    if (v.empty() || *end != '\0') {
      std::printf("usage: %s [--seed N]   (N: a number; without it, each run draws its own)\n", argv[0]);
      std::exit(2);
    }
    given = true;
  }
  if (!given) {
    std::random_device rd;
    seed = ((std::uint64_t(rd()) << 32) ^ rd()) % 1000000000ull;
  }
  const char* name = std::strrchr(argv[0], '/');
  std::printf("seed %llu (this draw again: %s --seed %llu)\n", (unsigned long long)seed, name ? name + 1 : argv[0], (unsigned long long)seed);
  std::fflush(stdout);
  return seed;
}

/// A whole number drawn uniformly in [lo, hi] (Rng: fbt::Rng or anything with below(n)).
template <class Rng> int draw(Rng& rng, int lo, int hi) { return lo + int(rng.below(std::uint32_t(hi - lo + 1))); }

struct Score {
  int failures = 0;  // failed checks, with or without points
  int points = 0, max = 0;
};
inline Score& score() {
  static Score s;
  return s;
}

/// One result line; `points` goes to the score when ok (and to the maximum either way).
inline void report(const std::string& what, bool ok, const std::string& detail, int points = 0, int width = 40) {
  std::printf("  %-4s  %-*s %s\n", ok ? "PASS" : "FAIL", width, what.c_str(), detail.c_str());
  if (!ok) ++score().failures;
  score().max += points;
  if (ok) score().points += points;
  std::fflush(stdout);
}

/// printf into a std::string.
inline std::string fmt(const char* f, double a, double b = 0, double c = 0) {
  char buf[200];
  std::snprintf(buf, sizeof buf, f, a, b, c);
  return buf;
}

/// The grade line (scripts/grade.sh reads it). For the untouched stub: 0 points of `max`.
inline void print_grade(const char* exercise, bool not_attempted = false, int max_if_not_attempted = 0) {
  if (not_attempted) std::printf("grade: %s 0/%d (not attempted)\n", exercise, max_if_not_attempted);
  else std::printf("grade: %s %d/%d\n", exercise, score().points, score().max);
  std::fflush(stdout);
}

// ---- the crash guard ---------------------------------------------------------------------------------------
// A segmentation fault in your code (a null or too short slice, an index out of range) would end the checker
// with no word (exit 139). The guard catches the signal, prints which step was running and what usually
// causes it there, the grade so far, and exits 1.
inline const char*& guard_step() {
  static const char* step = "";
  return step;
}
inline const char*& guard_advice() {
  static const char* advice = "";
  return advice;
}
inline char* guard_grade_line() {  // "grade: <exercise> 0/<max> (crashed)", written at install time
  static char line[160] = "";
  return line;
}
/// Names the step about to run, and the likely cause of a crash in it.
inline void guard(const char* step, const char* advice) {
  guard_step() = step;
  guard_advice() = advice;
}
extern "C" inline void fbt_course_on_crash(int sig) {
  // only async-signal-safe calls: write and _exit
  auto say = [](const char* s) { (void)!::write(1, s, std::strlen(s)); };
  say("\n  FAIL  crashed (");
  say(sig == SIGSEGV ? "segmentation fault" : sig == SIGBUS ? "bus error" : sig == SIGFPE ? "arithmetic error" : "abort");
  say(") in: ");
  say(guard_step());
  say("\ndiagnosis: ");
  say(guard_advice());
  say("\n");
  say(guard_grade_line());
  say("FAIL: the checker crashed\n");
  ::_exit(1);
}
/// Installs the crash guard for `exercise`, whose rubric has `max_points`: a crash scores 0.
inline void install_crash_guard(const char* exercise, int max_points) {
  std::snprintf(guard_grade_line(), 160, "grade: %s 0/%d (crashed)\n", exercise, max_points);
  std::signal(SIGSEGV, fbt_course_on_crash);
  std::signal(SIGBUS, fbt_course_on_crash);
  std::signal(SIGFPE, fbt_course_on_crash);
  std::signal(SIGABRT, fbt_course_on_crash);
}

}  // namespace fbt_course_check
