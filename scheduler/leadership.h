// LeaderLease: the port through which gpupoold replicas elect one leader on the database they
// share, and Leadership: the loop that waits for the lease, keeps renewing it, and stops the
// process the moment it can no longer be sure it holds it (docs/ha.md, "Leader election").
//
// The lease is a row with an expiry on the database's own clock (store/pg_leader_lease.h):
// TryAcquire takes it when it is free or expired, with a new epoch (which fences every write of
// an older leader, and every write of ours once our lease has expired: gp_fence); Renew extends
// it only for the epoch we hold; Release gives it up on a clean shutdown.
//
// Leadership's rule: a renewal sent at t extends our lease to at least t + lease on the
// database's clock, so on our own monotonic clock we may act until t + lease - safety; past
// that, without a successful renewal, on_lost runs (gpupoold exits at once: no write and no
// dispatch after; its supervisor restarts it as a standby).
//
// Thread safety: LeaderLease implementations are called from one thread at a time. Leadership
// runs its own renewal thread; its public methods are for one owner thread.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "base/status.h"

namespace gpupool {

struct LeaderClaim {
  bool leading = false;
  int64_t epoch = 0;           // ours when leading, else the current leader's
  std::string leader_address;  // the current leader's advertised API address
  std::string leader_http;     // its REST base URL ("https://HOST:PORT"); may be empty
  std::string leader_holder;   // "<host>:<pid>"
  bool leader_live = false;    // the row's lease had not expired when read (or we lead)
  int64_t expires_in_ms = 0;   // not ours: how long the row's lease still runs (database clock)
};

class LeaderLease {
 public:
  virtual ~LeaderLease() = default;
  // Takes the lease if it is free or expired (a new epoch); else says who holds it.
  virtual Result<LeaderClaim> TryAcquire(int64_t lease_ms) = 0;
  // Extends the lease of `epoch`; ABORTED when another replica holds it now.
  virtual Status Renew(int64_t epoch, int64_t lease_ms) = 0;
  // Gives the lease of `epoch` up (best effort), so a standby takes over at once.
  virtual void Release(int64_t epoch) = 0;
};

struct LeadershipOptions {
  int64_t lease_ms = 2000;
  // How often a standby asks and a leader renews.
  int64_t poll_ms = 250;
  // Kept off the end of the lease on our own clock (clock rate, scheduling delay).
  int64_t safety_ms = 250;
};

class Leadership {
 public:
  // REQUIRES: lease outlives this. on_lost must not return to normal operation (it exits).
  Leadership(LeaderLease* lease, LeadershipOptions options, std::function<void(Status)> on_lost);
  ~Leadership();  // stops renewing (does not release)

  // Blocks until this replica leads, logging who leads meanwhile; returns our epoch. Errors of
  // the database are logged and retried; returns early only when `stop` becomes true.
  // `on_poll`, when set, hears every poll's answer (a default LeaderClaim when the database did
  // not answer), so a standby can tell clients where the leader is.
  Result<int64_t> WaitToLead(const std::atomic<bool>& stop,
                             const std::function<void(const LeaderClaim&)>& on_poll = {});

  // Starts the renewal thread (after WaitToLead).
  void KeepRenewing();

  // Stops renewing and releases the lease (clean shutdown).
  void Resign();

 private:
  void RenewLoop();
  // Checks the deadline on its own, so a renewal stuck in the network cannot keep us acting.
  void WatchLoop();
  void Lost(const Status& why);

  LeaderLease* const lease_;
  const LeadershipOptions options_;
  const std::function<void(Status)> on_lost_;
  int64_t epoch_ = 0;
  std::chrono::steady_clock::time_point valid_until_;
  std::mutex mu_;  // guards stop_
  std::condition_variable cv_;
  bool stop_ = false;
  std::atomic<bool> lost_{false};
  std::thread thread_;
  std::thread watch_;
};

}  // namespace gpupool
