#include "scheduler/device_slots.h"

namespace gpupool {

void DeviceSlotsBook::Load(const std::vector<DeviceSlotsRecord>& rows) {
  rows_.clear();
  for (const DeviceSlotsRecord& r : rows) Put(r);
}

void DeviceSlotsBook::Put(const DeviceSlotsRecord& row) {
  std::pair key{row.node, row.device};
  if (row.slots <= 0) {
    rows_.erase(key);
  } else {
    rows_[key] = row;
  }
}

int32_t DeviceSlotsBook::Slots(const std::string& node, const std::string& device) const {
  const DeviceSlotsRecord* r = Find(node, device);
  return r == nullptr ? 0 : r->slots;
}

const DeviceSlotsRecord* DeviceSlotsBook::Find(const std::string& node,
                                               const std::string& device) const {
  auto it = rows_.find(std::pair{node, device});
  return it == rows_.end() ? nullptr : &it->second;
}

}  // namespace gpupool
