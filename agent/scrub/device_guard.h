// DeviceGuard: keeps one tenant's leftovers in device memory from reaching the next tenant.
//
// The task runner calls BeforeStart() for every task it is about to launch and Ended() when it
// ends. For each device the task was granted the guard remembers which tenants have used it
// since its last scrub; when a task of a different tenant is about to start there, the device's
// free memory is scrubbed first (VramScrubber) and the scrub is recorded (log, counters,
// LastScrub). Memory held by a task still running on the device belongs to that task and is not
// touched (fractional sharing); its tenant stays on the list until the next scrub after it.
//
// A device this process has not seen yet counts as used by an unknown tenant
// (kBeforeThisProcess): the guard keeps nothing on disk, so after an agent restart it cannot know
// who used the device last, and the first task there gets a scrub whatever its tenant.
//
// A failed scrub puts the device out of service: BeforeStart() fails every later task on it
// with the reason, and the agent reports it unhealthy in Register and Heartbeat, until the agent
// restarts. A device the scrubber cannot handle (a MIG instance under CUDA) is not scrubbed;
// Capability() says so.
//
// Thread safety: all methods are safe from any thread; scrubs run one at a time.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "agent/scrub/scrubber.h"
#include "base/status.h"

namespace gpupool::agent {

struct ScrubRecord {
  std::string uuid;
  std::string from_tenants;  // who had used it, comma-separated
  std::string to_tenant;
  ScrubResult result;
};

class DeviceGuard {
 public:
  // Who used a device before this agent process started (ScrubRecord::from_tenants names it).
  static constexpr const char* kBeforeThisProcess = "(unknown: before this agent process)";

  explicit DeviceGuard(std::unique_ptr<VramScrubber> scrubber);

  // REQUIRES: called once per launch, paired with Ended() for tasks that started.
  Status BeforeStart(const std::string& tenant, const std::vector<std::string>& uuids);
  void Ended(const std::string& tenant, const std::vector<std::string>& uuids);
  // A task a previous agent process started and this one re-adopted (TaskRunner::Recover): it
  // runs on `uuids` already; counted as BeforeStart would, with no scrub (its memory is live).
  // Paired with Ended() like a started task.
  void Adopted(const std::string& tenant, const std::vector<std::string>& uuids);

  // Reason the device is out of service, or nullopt.
  std::optional<std::string> OutOfService(const std::string& uuid) const;
  std::optional<ScrubRecord> LastScrub(const std::string& uuid) const;
  int64_t scrubs() const;
  VramScrubber* scrubber() { return scrubber_.get(); }
  std::string CapabilityDetail() const;

 private:
  struct State {
    std::map<std::string, int> running;  // tenant → tasks running on the device
    std::set<std::string> since_scrub;   // tenants that used it since the last scrub
    std::string out_of_service;
    std::optional<ScrubRecord> last;
  };
  // REQUIRES: mu_ held. The device's state, made on first sight (used by kBeforeThisProcess).
  State& DeviceLocked(const std::string& uuid);
  std::unique_ptr<VramScrubber> scrubber_;
  mutable std::mutex mu_;
  std::map<std::string, State> devices_;  // guarded by mu_
  int64_t scrubs_ = 0;                    // guarded by mu_
};

}  // namespace gpupool::agent
