// DeviceFaultBook: which devices a fatal fault (XID / uncorrectable ECC) keeps out of service.
// Plain data, no I/O and no clock: the core stores what Report() and Clear() return (a
// SetDeviceFault row) and only then calls Put().
//
// The model:
// - An agent reports a fault with an id (the event's time). A fault the book does not hold, or
//   one whose id differs from the held one, is new: Report() returns the row to store.
// - A cleared row stays in the book: the same id reported again (an agent that still remembers
//   it) is not new; a different id is.
// - Active() is what placement must honour: the device is unhealthy while an uncleared row
//   exists, whatever the agent's own health bit says.
//
// Thread safety: none; the core's thread owns it.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "scheduler/model.h"

namespace gpupool {

class DeviceFaultBook {
 public:
  // Replaces the book's rows (Recover()).
  void Load(const std::vector<DeviceFaultRecord>& rows);

  // The row to store when (node, device) reports fault `fault_id`; nullopt when not new.
  // REQUIRES: fault_id > 0.
  std::optional<DeviceFaultRecord> Report(const std::string& node, const std::string& device,
                                          const std::string& reason, int64_t fault_id,
                                          int64_t now_us) const;

  // The cleared row to store; NOT_FOUND (naming node and device) when no fault is active.
  Result<DeviceFaultRecord> Clear(const std::string& node, const std::string& device,
                                  const std::string& by, int64_t now_us) const;

  // Applies a stored row.
  void Put(const DeviceFaultRecord& row);

  // The uncleared fault of (node, device), or null.
  const DeviceFaultRecord* Active(const std::string& node, const std::string& device) const;
  // Every uncleared fault, by node then device.
  std::vector<DeviceFaultRecord> ActiveFaults() const;

 private:
  std::map<std::pair<std::string, std::string>, DeviceFaultRecord> rows_;
};

}  // namespace gpupool
