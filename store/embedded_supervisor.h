// EmbeddedSupervisor: keeps gpupoold's embedded PostgreSQL alive.
//
// A thread looks at the server every `interval` (EmbeddedPostgres::ServerPid: postmaster.pid and
// /proc, no connection). When the postmaster is gone — kill -9, the OOM killer, a crash — it logs
// an error naming the dead pid and restarts the server on the same port with the same password
// (RestartAfterCrash; PostgreSQL replays its WAL, so every committed transaction is still there).
// A restart that fails (the dead server's backends may hold its shared memory for a moment) is
// retried with backoff, `interval` doubling to `max_backoff`, each failure logged with its reason.
// Clients need nothing from the supervisor: PgStore reconnects by itself once the server is back.
//
// Thread safety: construct and destroy on one thread; while the supervisor lives, nobody else may
// call the EmbeddedPostgres (Stop it before stopping the server). restarts() is safe anywhere.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

namespace gpupool {

class EmbeddedPostgres;

struct EmbeddedSupervisorOptions {
  std::chrono::milliseconds interval{500};
  std::chrono::milliseconds max_backoff{5000};
};

class EmbeddedSupervisor {
 public:
  // REQUIRES: `pg` started and outliving the supervisor.
  EmbeddedSupervisor(EmbeddedPostgres* pg, EmbeddedSupervisorOptions options = {});
  ~EmbeddedSupervisor();  // Stop()
  EmbeddedSupervisor(const EmbeddedSupervisor&) = delete;
  EmbeddedSupervisor& operator=(const EmbeddedSupervisor&) = delete;

  // Ends the watch (an ongoing restart finishes first). Idempotent.
  void Stop();
  // Successful restarts so far.
  int64_t restarts() const { return restarts_.load(); }

 private:
  void Loop();
  // Sleeps up to `d`; false when stopping.
  bool SleepFor(std::chrono::milliseconds d);

  EmbeddedPostgres* pg_;
  const EmbeddedSupervisorOptions options_;
  std::atomic<int64_t> restarts_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;  // guarded by mu_
  std::thread thread_;
};

}  // namespace gpupool
