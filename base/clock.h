// Clock: the one source of time for scheduling logic, injected so that tests and the simulator
// drive the scheduler with a manual clock while the daemon uses the system clock.
//
// Times are microseconds since the Unix epoch (wall time, for timestamps users see) and a
// monotonic reading (for timeouts). A ManualClock returns the same value for both.
//
// Thread safety: SystemClock is stateless; ManualClock is safe to read from any thread and to
// advance from one.
#pragma once

#include <atomic>
#include <cstdint>

namespace gpupool {

class Clock {
 public:
  virtual ~Clock() = default;
  // Microseconds since the Unix epoch.
  virtual int64_t NowMicros() const = 0;
  // Microseconds on a clock that never jumps; only differences are meaningful.
  virtual int64_t MonotonicMicros() const = 0;
};

class SystemClock final : public Clock {
 public:
  int64_t NowMicros() const override;
  int64_t MonotonicMicros() const override;
  static SystemClock* Get();
};

class ManualClock final : public Clock {
 public:
  explicit ManualClock(int64_t start_micros = 1'700'000'000'000'000) : now_(start_micros) {}
  int64_t NowMicros() const override { return now_.load(); }
  int64_t MonotonicMicros() const override { return now_.load(); }
  void Advance(int64_t micros) { now_ += micros; }
  void Set(int64_t micros) { now_ = micros; }

 private:
  std::atomic<int64_t> now_;
};

}  // namespace gpupool
