#include "scheduler/device_faults.h"

namespace gpupool {

void DeviceFaultBook::Load(const std::vector<DeviceFaultRecord>& rows) {
  rows_.clear();
  for (const DeviceFaultRecord& r : rows) rows_[{r.node, r.device}] = r;
}

std::optional<DeviceFaultRecord> DeviceFaultBook::Report(const std::string& node,
                                                         const std::string& device,
                                                         const std::string& reason,
                                                         int64_t fault_id, int64_t now_us) const {
  auto it = rows_.find({node, device});
  if (it != rows_.end() && it->second.fault_id == fault_id) return std::nullopt;
  DeviceFaultRecord row;
  row.node = node;
  row.device = device;
  row.reason = reason.empty() ? "fault reported by the agent" : reason;
  row.fault_id = fault_id;
  row.since_us = now_us;
  return row;
}

Result<DeviceFaultRecord> DeviceFaultBook::Clear(const std::string& node, const std::string& device,
                                                 const std::string& by, int64_t now_us) const {
  const DeviceFaultRecord* active = Active(node, device);
  if (active == nullptr) {
    return Status::NotFound("device '" + device + "' on node '" + node + "' has no fault to clear");
  }
  DeviceFaultRecord row = *active;
  row.cleared = true;
  row.cleared_by = by;
  row.cleared_us = now_us;
  return row;
}

void DeviceFaultBook::Put(const DeviceFaultRecord& row) { rows_[{row.node, row.device}] = row; }

const DeviceFaultRecord* DeviceFaultBook::Active(const std::string& node,
                                                 const std::string& device) const {
  auto it = rows_.find({node, device});
  return it == rows_.end() || it->second.cleared ? nullptr : &it->second;
}

std::vector<DeviceFaultRecord> DeviceFaultBook::ActiveFaults() const {
  std::vector<DeviceFaultRecord> out;
  for (const auto& [key, row] : rows_) {
    if (!row.cleared) out.push_back(row);
  }
  return out;
}

}  // namespace gpupool
