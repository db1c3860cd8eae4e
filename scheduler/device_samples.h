// DeviceSampleBook: the last device sample each node's agent sent in a heartbeat (utilization,
// memory, power, temperature, ECC and XID counters), kept so the API can show them with the node
// (gpupoolctl nodes get, REST /v1/nodes, the console's node picture).
//
// Samples are for people and dashboards: nothing in scheduling reads them (health goes through
// DeviceRecord::healthy), and they are not stored — after a restart a node shows none until its
// next heartbeat. A node that stops sending keeps its last sample with its time, so a reader can
// see how old it is.
//
// Thread safety: none; owned by the core and used on its thread.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

namespace gpupool {

struct DeviceSample {
  int32_t utilization_pct = 0;
  int64_t memory_used_mib = 0;
  int32_t power_watts = 0;
  int32_t temperature_c = 0;
  int64_t ecc_errors = 0;
  int64_t xid_errors = 0;
  int64_t time_us = 0;  // wall clock, when the scheduler received it
  friend bool operator==(const DeviceSample&, const DeviceSample&) = default;
};

class DeviceSampleBook {
 public:
  void Put(const std::string& node, const std::string& device, const DeviceSample& sample) {
    nodes_[node][device] = sample;
  }
  std::optional<DeviceSample> Find(const std::string& node, const std::string& device) const {
    auto n = nodes_.find(node);
    if (n == nodes_.end()) return std::nullopt;
    auto d = n->second.find(device);
    if (d == n->second.end()) return std::nullopt;
    return d->second;
  }
  // A node re-registered (its devices may have changed) or was removed.
  void ForgetNode(const std::string& node) { nodes_.erase(node); }

 private:
  std::map<std::string, std::map<std::string, DeviceSample>> nodes_;  // node → device → sample
};

}  // namespace gpupool
