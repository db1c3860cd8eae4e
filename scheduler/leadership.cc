#include "scheduler/leadership.h"

#include <algorithm>

#include "base/log.h"

namespace gpupool {

Leadership::Leadership(LeaderLease* lease, LeadershipOptions options,
                       std::function<void(Status)> on_lost)
    : lease_(lease), options_(options), on_lost_(std::move(on_lost)) {}

Leadership::~Leadership() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (watch_.joinable()) watch_.join();
}

Result<int64_t> Leadership::WaitToLead(const std::atomic<bool>& stop,
                                       const std::function<void(const LeaderClaim&)>& on_poll) {
  std::string last_leader;
  while (!stop.load()) {
    const auto sent = std::chrono::steady_clock::now();
    Result<LeaderClaim> claim = lease_->TryAcquire(options_.lease_ms);
    if (on_poll) on_poll(claim.ok() ? *claim : LeaderClaim{});
    if (!claim.ok()) {
      LogWarn("leadership", "cannot reach the lease; retrying",
              {{"error", claim.status().message()}});
    } else if (claim->leading) {
      epoch_ = claim->epoch;
      valid_until_ = sent + std::chrono::milliseconds(options_.lease_ms - options_.safety_ms);
      LogInfo("leadership", "leading", {{"epoch", std::to_string(epoch_)}});
      return epoch_;
    } else if (claim->leader_holder != last_leader) {
      last_leader = claim->leader_holder;
      LogInfo("leadership", "standby",
              {{"leader", claim->leader_holder},
               {"leader_address", claim->leader_address},
               {"epoch", std::to_string(claim->epoch)}});
    }
    // A warm standby tries again the moment the leader's lease ends (on the database's clock, as
    // the row said), not up to a poll later: a dead leader's lease is the takeover's floor.
    int64_t sleep_ms = options_.poll_ms;
    if (claim.ok() && !claim->leading && claim->leader_live && claim->expires_in_ms < sleep_ms) {
      sleep_ms = std::max<int64_t>(1, claim->expires_in_ms + 1);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(sleep_ms));
  }
  return Status::Unavailable("stopped while waiting to lead");
}

void Leadership::KeepRenewing() {
  thread_ = std::thread([this] { RenewLoop(); });
  watch_ = std::thread([this] { WatchLoop(); });
}

void Leadership::Lost(const Status& why) {
  if (lost_.exchange(true)) return;
  // Another replica leads, or we cannot prove we still do: stop acting at once.
  LogError("leadership", "leader lease lost; stopping",
           {{"epoch", std::to_string(epoch_)}, {"error", why.message()}});
  on_lost_(why);
}

void Leadership::WatchLoop() {
  std::unique_lock lock(mu_);
  while (!stop_) {
    cv_.wait_for(lock, std::chrono::milliseconds(std::max<int64_t>(10, options_.poll_ms / 5)));
    if (stop_) return;
    if (std::chrono::steady_clock::now() >= valid_until_) {
      lock.unlock();
      Lost(Status::Unavailable("no lease renewal succeeded within " +
                               std::to_string(options_.lease_ms - options_.safety_ms) + " ms"));
      return;
    }
  }
}

void Leadership::RenewLoop() {
  std::unique_lock lock(mu_);
  while (!stop_) {
    cv_.wait_for(lock, std::chrono::milliseconds(options_.poll_ms));
    if (stop_) return;
    lock.unlock();
    const auto sent = std::chrono::steady_clock::now();
    Status st = lease_->Renew(epoch_, options_.lease_ms);
    const auto now = std::chrono::steady_clock::now();
    lock.lock();
    if (st.ok()) {
      valid_until_ = sent + std::chrono::milliseconds(options_.lease_ms - options_.safety_ms);
      continue;
    }
    if (st.code() == StatusCode::kAborted || now >= valid_until_) {
      lock.unlock();
      Lost(st);
      return;
    }
    LogWarn(
        "leadership", "lease renewal failed; retrying",
        {{"error", st.message()},
         {"left_ms",
          std::to_string(
              std::chrono::duration_cast<std::chrono::milliseconds>(valid_until_ - now).count())}});
  }
}

void Leadership::Resign() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (watch_.joinable()) watch_.join();
  if (epoch_ > 0 && !lost_.load()) lease_->Release(epoch_);
}

}  // namespace gpupool
