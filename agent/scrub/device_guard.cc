#include "agent/scrub/device_guard.h"

#include "base/log.h"

namespace gpupool::agent {

DeviceGuard::DeviceGuard(std::unique_ptr<VramScrubber> scrubber) : scrubber_(std::move(scrubber)) {}

DeviceGuard::State& DeviceGuard::DeviceLocked(const std::string& uuid) {
  auto [it, made] = devices_.try_emplace(uuid);
  if (made) it->second.since_scrub.insert(kBeforeThisProcess);
  return it->second;
}

Status DeviceGuard::BeforeStart(const std::string& tenant, const std::vector<std::string>& uuids) {
  std::lock_guard lock(mu_);
  for (const std::string& uuid : uuids) {
    const State& s = DeviceLocked(uuid);
    if (!s.out_of_service.empty()) {
      return Status::FailedPrecondition("device " + uuid +
                                        " is out of service: " + s.out_of_service);
    }
  }
  for (const std::string& uuid : uuids) {
    State& s = DeviceLocked(uuid);
    std::string others;
    for (const std::string& t : s.since_scrub) {
      if (t != tenant) others += (others.empty() ? "" : ",") + t;
    }
    if (!others.empty() && scrubber_->CanScrub(uuid)) {
      auto r = scrubber_->Scrub(uuid);
      if (!r.ok()) {
        s.out_of_service = "vram scrub failed: " + r.status().message();
        LogError("agent.scrub", "vram scrub failed; device out of service",
                 {{"device", uuid}, {"error", r.status().message()}});
        return Status::FailedPrecondition("device " + uuid +
                                          " is out of service: " + s.out_of_service);
      }
      ++scrubs_;
      s.last = ScrubRecord{uuid, others, tenant, *r};
      s.since_scrub.clear();
      for (const auto& [t, n] : s.running) {
        if (n > 0) s.since_scrub.insert(t);  // their live memory was not touched
      }
      LogInfo("agent.scrub", "vram scrubbed",
              {{"device", uuid},
               {"from", others},
               {"to", tenant},
               {"bytes", std::to_string(r->bytes)},
               {"us", std::to_string(r->micros)}});
    }
    s.since_scrub.insert(tenant);
    ++s.running[tenant];
  }
  return Status::Ok();
}

void DeviceGuard::Adopted(const std::string& tenant, const std::vector<std::string>& uuids) {
  std::lock_guard lock(mu_);
  for (const std::string& uuid : uuids) {
    State& s = DeviceLocked(uuid);
    s.since_scrub.insert(tenant);
    ++s.running[tenant];
  }
}

void DeviceGuard::Ended(const std::string& tenant, const std::vector<std::string>& uuids) {
  std::lock_guard lock(mu_);
  for (const std::string& uuid : uuids) {
    State& s = DeviceLocked(uuid);
    if (--s.running[tenant] <= 0) s.running.erase(tenant);
  }
}

std::optional<std::string> DeviceGuard::OutOfService(const std::string& uuid) const {
  std::lock_guard lock(mu_);
  auto it = devices_.find(uuid);
  if (it == devices_.end() || it->second.out_of_service.empty()) return std::nullopt;
  return it->second.out_of_service;
}

std::optional<ScrubRecord> DeviceGuard::LastScrub(const std::string& uuid) const {
  std::lock_guard lock(mu_);
  auto it = devices_.find(uuid);
  if (it == devices_.end()) return std::nullopt;
  return it->second.last;
}

int64_t DeviceGuard::scrubs() const {
  std::lock_guard lock(mu_);
  return scrubs_;
}

std::string DeviceGuard::CapabilityDetail() const {
  if (scrubber_->Name() == "cuda") {
    return scrubber_->ScrubsMig()
               ? "free VRAM zeroed (CUDA driver API) before a device changes tenant; MIG "
                 "instances through gpupool-scrub"
               : "free VRAM zeroed (CUDA driver API) before a device changes tenant; whole GPUs "
                 "only, MIG instances are not scrubbed (gpupool-scrub not found beside the agent)";
  }
  return "free VRAM zeroed before a device changes tenant (" + scrubber_->Name() + ")";
}

}  // namespace gpupool::agent
