// fbt/core/queued.hpp: registrations queued when a file is loaded, run on a registry when it is used.
//
// FBT_REGISTER_FUSER(F) and its siblings (model/pieces.hpp, fbt/plugin.hpp) run before main, when the
// registry they add to may not exist yet, and in a plugin (a shared object, fbt/plugin.hpp) whose registries
// are not the program's. So a registration is a function queued per registry type R:
//   queue_registration<R>(fn)       what the macro does when its file is loaded
//   run_queued(r, applied)          what registry r does whenever it is used: runs the ones it has not run
// A plugin's entry point runs its own queue on the program's registries instead (fbt/plugin.hpp), so a
// plugin never builds a registry of its own (nor compiles the library's pieces that one holds).
#pragma once

#include <cstddef>
#include <mutex>
#include <vector>

namespace fbt {
namespace detail {

/// The registrations queued for registries of type R, in the order their files were loaded.
template <class R> struct RegistrationQueue {
  std::mutex mu;
  std::vector<void (*)(R&)> fns;
};
template <class R> RegistrationQueue<R>& registration_queue() {
  static RegistrationQueue<R> q;
  return q;
}

/// Queues fn for this program's registry of type R; returns true (for a static initializer).
template <class R> bool queue_registration(void (*fn)(R&)) {
  RegistrationQueue<R>& q = registration_queue<R>();
  std::lock_guard<std::mutex> g(q.mu);
  q.fns.push_back(fn);
  return true;
}

/// Runs on r the queued registrations after the first `applied` (and counts them in): every registry of
/// type R calls it when used. A registration that throws (a name taken by another type) is counted too, so
/// its error is said once.
template <class R> void run_queued(R& r, std::size_t& applied) {
  RegistrationQueue<R>& q = registration_queue<R>();
  for (;;) {
    void (*fn)(R&) = nullptr;
    {
      std::lock_guard<std::mutex> g(q.mu);
      if (applied >= q.fns.size()) return;
      fn = q.fns[applied++];
    }
    fn(r);
  }
}

}  // namespace detail
}  // namespace fbt
