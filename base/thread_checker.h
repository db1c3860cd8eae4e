// ThreadChecker: states "only one thread touches this" as a check. It binds to the first thread
// that asks and answers, from then on, whether the caller is that thread. Debug builds assert it
// (GPUPOOL_DCHECK_ON_THREAD); release builds compile the check away.
//
// The scheduler Core uses it: every handler must run on the core's loop thread (the Scheduler
// facade posts there; scenario tests call from their one thread).
#pragma once

#include <atomic>
#include <cassert>
#include <thread>

namespace gpupool {

class ThreadChecker {
 public:
  bool CalledOnValidThread() const {
    std::thread::id expected;
    const std::thread::id me = std::this_thread::get_id();
    if (owner_.compare_exchange_strong(expected, me)) return true;  // first caller: bound
    return expected == me;
  }

 private:
  mutable std::atomic<std::thread::id> owner_{};
};

}  // namespace gpupool

#define GPUPOOL_DCHECK_ON_THREAD(checker) assert((checker).CalledOnValidThread())
