#include "agent/health/health_monitor.h"

#include <algorithm>

#include "agent/health/xid.h"

namespace gpupool::agent {

std::vector<DeviceFault> HealthMonitor::Observe(const std::vector<DeviceEvent>& events,
                                                const Inventory& inventory) {
  std::vector<DeviceFault> fresh;
  auto fault = [&](const std::string& uuid, const std::string& reason, int64_t id) {
    DeviceFault f{uuid, reason, id};
    faults_[uuid] = f;
    fresh.push_back(std::move(f));
  };
  for (const DeviceEvent& e : events) {
    Counters& c = counters_[e.uuid];
    std::string reason;
    switch (e.kind) {
      case DeviceEvent::Kind::kXid:
        ++c.xids;
        c.last_xid = e.xid;
        if (XidIsFatal(e.xid)) reason = DescribeXid(e.xid);
        break;
      case DeviceEvent::Kind::kEccCorrected:
        ++c.ecc_corrected;
        break;
      case DeviceEvent::Kind::kEccUncorrected:
        ++c.ecc_uncorrected;
        reason = "uncorrectable (double-bit) ECC error";
        break;
    }
    if (reason.empty()) continue;
    // Ids grow strictly, so a fault after an admin's clear is never taken for the cleared one.
    const int64_t id = std::max(e.time_us, last_id_ + 1);
    last_id_ = id;
    fault(e.uuid, reason, id);
    // A GPU's fault takes its MIG instances with it; placement works on the instances.
    for (const Device& d : inventory.devices) {
      if (d.parent_uuid == e.uuid) fault(d.uuid, reason + " on its GPU " + e.uuid, id);
    }
  }
  return fresh;
}

const DeviceFault* HealthMonitor::FaultOf(const std::string& uuid) const {
  auto it = faults_.find(uuid);
  return it == faults_.end() ? nullptr : &it->second;
}

HealthMonitor::Counters HealthMonitor::CountersOf(const std::string& uuid) const {
  auto it = counters_.find(uuid);
  return it == counters_.end() ? Counters{} : it->second;
}

void HealthMonitor::Annotate(DeviceSample* s) const {
  const Counters c = CountersOf(s->uuid);
  s->xid_errors += c.xids;
  if (c.last_xid != 0) s->last_xid = c.last_xid;
  s->ecc_errors += c.ecc_uncorrected;
}

}  // namespace gpupool::agent
