// fbt/train/run_dir.hpp: a run's output directory: checked and created before anything heavy, held by one
// process at a time, and interrupted cleanly by SIGTERM / SIGINT.
//
//   prepare_out_dir(dir)  creates dir (and its parents); refuses, naming it, a path that is not a
//                         directory or one this process cannot write
//   lock_run_dir(dir)     an exclusive flock on dir/run.lock, which holds the holder's process id; a second
//                         process is refused naming that id. The kernel releases the lock when the holder
//                         exits in any way (a crash, kill -9); within one process the same lock is shared,
//                         and claim() lets one run at a time use it. Opened with O_NOFOLLOW, never truncated,
//                         removed by its holder (a symlink or a hard link as run.lock is refused).
//   stop signals          install_stop_handlers(): the first SIGTERM or SIGINT sets stop_signal() (the
//                         trainer finishes its step, writes a checkpoint and returns); a second one ends the
//                         process at once, by that signal.
// POSIX (flock, sigaction); std otherwise.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "../config.hpp"

namespace fbt {

/// \brief Creates `dir` (and its parents) for a run's output, before data or a model are set up. Refuses
/// (fbt::Error "out_dir '<dir>': ...", one line) a path that exists and is not a directory, one that cannot
/// be created (with the system's reason) and one this process cannot write.
inline void prepare_out_dir(const std::string& dir) {
  namespace fs = std::filesystem;
  if (dir.empty()) throw Error("out_dir is empty");
  std::error_code ec;
  const fs::file_status st = fs::status(dir, ec);
  if (fs::exists(st) && !fs::is_directory(st)) throw Error("out_dir '" + detail::excerpt(dir, 400) + "': exists and is not a directory");
  if (!fs::exists(st)) {
    fs::create_directories(dir, ec);
    if (ec) throw Error("out_dir '" + detail::excerpt(dir, 400) + "': cannot create the directory: " + ec.message());
  }
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    throw Error("out_dir '" + detail::excerpt(dir, 400) + "': cannot write in the directory: " + std::strerror(errno));
}

/// An exclusive lock on a run directory (lock_run_dir): held while the object lives, or until the process ends.
///
/// dir/run.lock is opened with O_NOFOLLOW and must be a regular file with one link (a symbolic or hard link
/// to another file is refused: its target is never written); it is never truncated: the holder's process id
/// is written over its first bytes, padded to a fixed width. The holder removes the file when it lets go,
/// so a refused or finished run leaves no run.lock behind; a process that locked a file another just removed
/// notices (the path no longer names the inode it holds) and takes the new one.
/// Within one process the lock is shared (lock_run_dir); claim() makes one run its user at a time.
class RunDirLock {
 public:
  explicit RunDirLock(const std::string& dir) : dir_(detail::excerpt(dir, 400)), path_(dir + "/run.lock") {
    for (int attempt = 0;; ++attempt) {
      fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
      if (fd_ < 0) {
        const int err = errno;
        if (err == ELOOP) refuse("its lock file run.lock is a symbolic link: refused (fbt writes only a file of its own; remove the link)");
        refuse(std::string("cannot open its lock file run.lock: ") + std::strerror(err));
      }
      struct stat st;
      if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) close_and_refuse("its lock file run.lock is not a regular file: refused (remove it)");
      if (st.st_nlink > 1)
        close_and_refuse("its lock file run.lock has " + std::to_string(st.st_nlink) + " links (a hard link to another file): refused (remove it)");
      if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
        const int err = errno;
        char buf[32] = {0};
        const ssize_t n = ::pread(fd_, buf, sizeof buf - 1, 0);
        std::string pid = n > 0 ? std::string(buf, std::size_t(n)) : std::string();
        while (!pid.empty() && (pid.back() == '\n' || pid.back() == ' ')) pid.pop_back();
        if (err == EWOULDBLOCK)
          close_and_refuse("is in use by another run (process " + (pid.empty() ? std::string("?") : detail::excerpt(pid)) +
                           " holds its lock file run.lock): wait for it to end, or choose another out_dir");
        close_and_refuse(std::string("cannot lock run.lock: ") + std::strerror(err));
      }
      struct stat now;  // the holder before us may have removed the file between our open and our lock
      if (::lstat(path_.c_str(), &now) == 0 && now.st_dev == st.st_dev && now.st_ino == st.st_ino) break;
      ::close(fd_), fd_ = -1;
      if (attempt >= 100) refuse("cannot take its lock file run.lock: it keeps being replaced");
    }
    const std::string pid = padded_pid(std::to_string(::getpid()));
    if (::pwrite(fd_, pid.data(), pid.size(), 0) != ssize_t(pid.size())) {
      // the lock holds without the id; a second run then names the holder "?"
    }
  }
  ~RunDirLock() {
    if (fd_ >= 0) {
      ::unlink(path_.c_str());  // still holding the lock: a process waiting on this inode sees it gone and retries
      ::close(fd_);             // releases the flock
    }
  }
  RunDirLock(const RunDirLock&) = delete;
  RunDirLock& operator=(const RunDirLock&) = delete;
  const std::string& path() const { return path_; }

  /// \brief Makes the caller the directory's one run in this process until the returned guard ends (Trainer::run
  /// holds one): a second run on the same out_dir in this process (two fbt.train calls) is refused at once.
  std::shared_ptr<void> claim() {
    bool free = false;
    if (!claimed_.compare_exchange_strong(free, true))
      throw Error("out_dir '" + dir_ + "' is in use by another run in this process: wait for it to end, or choose another out_dir");
    return std::shared_ptr<void>(nullptr, [this](void*) { claimed_ = false; });
  }

 private:
  [[noreturn]] void refuse(const std::string& what) { throw Error("out_dir '" + dir_ + "'" + (what.rfind("is ", 0) == 0 ? " " : ": ") + what); }
  [[noreturn]] void close_and_refuse(const std::string& what) {
    ::close(fd_), fd_ = -1;
    refuse(what);
  }
  /// The id over the file's first bytes, padded with spaces to a fixed width (the file is never truncated).
  static std::string padded_pid(std::string id) {
    id.resize(20, ' ');
    return id + "\n";
  }
  std::string dir_, path_;
  int fd_ = -1;
  std::atomic<bool> claimed_{false};
};

/// \brief The lock of run directory `dir` (prepare_out_dir first creates it): taken now, or shared with
/// the holder in this process (a command that locked its out_dir before building the trainer). Refuses,
/// naming the other process's id, a directory another process holds.
inline std::shared_ptr<RunDirLock> lock_run_dir(const std::string& dir) {
  static std::mutex mu;
  static std::map<std::string, std::weak_ptr<RunDirLock>> held;
  std::error_code ec;
  std::string key = std::filesystem::weakly_canonical(dir, ec).string();
  if (ec || key.empty()) key = dir;
  const std::lock_guard<std::mutex> g(mu);
  if (auto p = held[key].lock()) return p;
  auto p = std::make_shared<RunDirLock>(dir);
  held[key] = p;
  return p;
}

// ------------------------------------------------------------------------------------------ signals
/// The signal (SIGTERM, SIGINT) that asked the process to stop, 0 when none has.
inline std::atomic<int>& stop_signal() {
  static std::atomic<int> s{0};
  return s;
}

namespace detail {
inline void on_stop_signal(int sig) {
  int none = 0;
  if (!stop_signal().compare_exchange_strong(none, sig)) {  // the second signal: end now, by that signal
    ::signal(sig, SIG_DFL);
    ::raise(sig);
    ::_exit(128 + sig);
  }
}
}  // namespace detail

/// \brief Installs the handlers of SIGTERM and SIGINT: the first sets stop_signal() (Trainer::run then
/// finishes its step, writes a checkpoint and returns), a second one ends the process at once.
inline void install_stop_handlers() {
  static_assert(std::atomic<int>::is_always_lock_free, "a signal handler needs a lock-free flag");
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_handler = detail::on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  ::sigaction(SIGTERM, &sa, nullptr);
  ::sigaction(SIGINT, &sa, nullptr);
}

/// "SIGTERM", "SIGINT" or "signal N".
inline std::string signal_name(int sig) {
  if (sig == SIGTERM) return "SIGTERM";
  if (sig == SIGINT) return "SIGINT";
  return "signal " + std::to_string(sig);
}

}  // namespace fbt
