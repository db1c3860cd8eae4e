// DeviceSlotsBook: the time-slice slots an admin set on devices (issue 27; docs/placement.md,
// "Time-slicing per device"). Plain data, no I/O: the core stores a SetDeviceSlots row first and
// only then calls Put(), and builds each node's placement view with Slots().
//
// Thread safety: none; the core's thread owns it.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "scheduler/model.h"

namespace gpupool {

class DeviceSlotsBook {
 public:
  // Replaces the book's rows (Recover()).
  void Load(const std::vector<DeviceSlotsRecord>& rows);
  // Applies a stored row; slots 0 removes the device's entry.
  void Put(const DeviceSlotsRecord& row);
  // The slots an admin set on (node, device); 0 when none (the device's own, from its agent's
  // config, or else the pool's default, apply).
  int32_t Slots(const std::string& node, const std::string& device) const;
  // The row of (node, device), or null.
  const DeviceSlotsRecord* Find(const std::string& node, const std::string& device) const;

 private:
  std::map<std::pair<std::string, std::string>, DeviceSlotsRecord> rows_;
};

}  // namespace gpupool
