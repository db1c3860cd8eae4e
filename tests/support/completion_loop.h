// Test and bench support: a Core whose store completions run on the caller's thread, so that
// "idle" is exact rather than waited for with sleeps.
//
// CountingStore wraps a Store and counts the batches in flight: a batch counts from Apply()
// until its completion has been handed on (to the Core's executor). CompletionLoop is that
// executor: functions queue up until Idle() runs them on the caller's thread; Idle(store)
// returns once nothing is queued and the store has no batch in flight. Drop() forgets what is
// queued (a simulated crash: committed, and the core never hears of it).
//
// Used by the metering conservation test (tests/scheduler/) and bench/ledger_write.cc.
//
// Thread safety: Apply's completions and the executor may run on the store's thread; Idle(),
// Drop() and everything else on the caller's one thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "scheduler/dispatch.h"
#include "scheduler/store.h"

namespace gpupool::testing {

class CountingStore : public Store {
 public:
  // Borrows `inner`, or owns it.
  explicit CountingStore(Store* inner) : inner_(inner) {}
  explicit CountingStore(std::unique_ptr<Store> inner) : owned_(std::move(inner)) {
    inner_ = owned_.get();
  }

  Result<int64_t> AcquireLeadership() override { return inner_->AcquireLeadership(); }
  Result<RecoveredState> Recover() override { return inner_->Recover(); }
  void Apply(std::vector<Mutation> batch, Done done) override;
  Result<std::vector<EventRecord>> ListEvents(const std::string& prefix, int limit) override {
    return inner_->ListEvents(prefix, limit);
  }
  Result<std::vector<UsageReportRow>> QueryUsage(const UsageQuery& q) override {
    return inner_->QueryUsage(q);
  }

  int in_flight() const { return in_flight_.load(); }

 private:
  std::unique_ptr<Store> owned_;
  Store* inner_ = nullptr;
  std::atomic<int> in_flight_{0};
};

class CompletionLoop {
 public:
  Executor executor();
  // Runs queued functions until none is queued and `store` has no batch in flight.
  void Idle(const CountingStore& store);
  void Drop();

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;  // guarded by mu_
};

}  // namespace gpupool::testing
