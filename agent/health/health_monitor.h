// HealthMonitor: turns a backend's device events (XID, ECC) into device faults.
//
// A fatal XID (agent/health/xid.h) or an uncorrectable ECC error makes a fault: the device — and,
// for a GPU, each of its MIG instances — is faulted from then on, with the newest fatal event's
// description as the reason and its time as the fault id (strictly increasing: every fatal
// event is a new fault, so one after an admin's clear raises the device again). The agent fails the
// faulted devices' tasks (TaskRunner::FailDevices) and reports the fault on every Register and
// Heartbeat; gpupoold keeps the device out of service until an admin clears it. The monitor never
// clears a fault itself: a device that threw a fatal XID stays suspect for the agent's lifetime.
// Non-fatal events are only counted (xid_errors, last_xid, corrected ECC) for the heartbeat and
// /metrics.
//
// Thread safety: none; the agent's strand owns it.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "agent/backend.h"

namespace gpupool::agent {

struct DeviceFault {
  std::string uuid;
  std::string reason;    // "XID 79 (GPU has fallen off the bus)"
  int64_t fault_id = 0;  // the event's time, µs since the epoch (> 0)
};

class HealthMonitor {
 public:
  // Feeds events; returns the faults that are new (one per newly faulted device, MIG instances
  // of a faulted GPU included). `inventory` maps GPUs to their MIG instances.
  std::vector<DeviceFault> Observe(const std::vector<DeviceEvent>& events,
                                   const Inventory& inventory);

  // The device's fault, or null.
  const DeviceFault* FaultOf(const std::string& uuid) const;
  // Adds the counters to a sample (xid_errors, last_xid, ecc_errors).
  void Annotate(DeviceSample* sample) const;

  struct Counters {
    int64_t xids = 0;
    int32_t last_xid = 0;
    int64_t ecc_corrected = 0;
    int64_t ecc_uncorrected = 0;
  };
  Counters CountersOf(const std::string& uuid) const;

 private:
  std::map<std::string, Counters> counters_;
  std::map<std::string, DeviceFault> faults_;
  int64_t last_id_ = 0;
};

}  // namespace gpupool::agent
