// CoreLoop: the one thread that owns the scheduler Core. Everything outside (gRPC handlers, the
// REST gateway, agent streams, store completions) reaches the core by posting a closure here.
//
// Runs an Asio io_context on a dedicated thread and calls Core::Tick() every `tick_interval`.
// Post() is safe from any thread; closures run in order, one at a time, on the loop thread.
// Call() posts and waits for the result (for synchronous reads from other threads; never call
// it from the loop thread itself).
//
// Thread safety: Post/Call/Stop from any thread.
#pragma once

#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <thread>

#include "scheduler/dispatch.h"

namespace gpupool {

class CoreLoop {
 public:
  CoreLoop();
  ~CoreLoop();  // Stop()s
  CoreLoop(const CoreLoop&) = delete;
  CoreLoop& operator=(const CoreLoop&) = delete;

  // Starts the thread; `tick` runs every `interval` on it (skip with an empty function).
  void Start(std::function<void()> tick, std::chrono::milliseconds interval);
  // Runs pending closures, then stops the thread. Idempotent.
  void Stop();

  void Post(std::function<void()> fn);
  // An Executor that posts to this loop (for Core's store completions).
  Executor executor();
  bool InLoopThread() const;

  template <typename F>
  auto Call(F&& fn) -> decltype(fn()) {
    using R = decltype(fn());
    auto task = std::make_shared<std::packaged_task<R()>>(std::forward<F>(fn));
    auto fut = task->get_future();
    Post([task] { (*task)(); });
    return fut.get();
  }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpupool
