#include "tests/support/completion_loop.h"

namespace gpupool::testing {

void CountingStore::Apply(std::vector<Mutation> batch, Done done) {
  ++in_flight_;
  inner_->Apply(std::move(batch), [this, done = std::move(done)](Status st) {
    done(std::move(st));
    --in_flight_;  // after the completion reached the executor's queue
  });
}

Executor CompletionLoop::executor() {
  return [this](std::function<void()> fn) {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(fn));
    cv_.notify_one();
  };
}

void CompletionLoop::Idle(const CountingStore& store) {
  for (;;) {
    // Read before looking at the queue: a batch that finishes in between has queued its
    // completion already, so an empty queue then means truly idle.
    const bool quiet = store.in_flight() == 0;
    std::function<void()> fn;
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (queue_.empty()) {
        if (quiet) return;
        cv_.wait_for(lock, std::chrono::milliseconds(1));
        continue;
      }
      fn = std::move(queue_.front());
      queue_.pop_front();
    }
    fn();
  }
}

void CompletionLoop::Drop() {
  std::lock_guard<std::mutex> lock(mu_);
  queue_.clear();
}

}  // namespace gpupool::testing
