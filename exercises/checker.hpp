// exercises/checker.hpp: what the checkers share: the result lines, the score, and a guard that turns a
// crash into a message.
//
// Every check prints one line, "  PASS  what  detail" or "  FAIL  what  detail". Some checks carry points
// (the rubric in docs/course/teaching.md); the checker's last line before its verdict is
//     grade: <exercise> <points>/<max>
// which scripts/grade.sh reads. A check without points (one that checks the given code, not yours) still
// counts as a failure when it fails.
#pragma once

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include <unistd.h>

namespace fbt_course_check {

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
