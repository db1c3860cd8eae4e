#include "agent/interposer/ledger/device_arbiter.h"

namespace gpupool::ledger {

int DeviceArbiter::Join(uint32_t percent, bool fair) {
  std::lock_guard<std::mutex> l(mu_);
  int id = next_id_++;
  tenants_[id] = Tenant{percent, fair, 0};
  return id;
}

void DeviceArbiter::Leave(int id) {
  std::lock_guard<std::mutex> l(mu_);
  tenants_.erase(id);
}

uint32_t DeviceArbiter::RateBp(int id, uint64_t now_ns) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = tenants_.find(id);
  if (it == tenants_.end()) return 0;
  it->second.last_active_ns = now_ns;
  uint32_t own = it->second.percent * 100;
  if (!it->second.fair) return own;
  // The shares of the active tenants, and of the active fair ones among them.
  uint64_t active = 0, active_fair = 0;
  for (const auto& [tid, t] : tenants_) {
    if (t.last_active_ns == 0 || now_ns - t.last_active_ns > kActiveNs) continue;
    active += t.percent;
    if (t.fair) active_fair += t.percent;
  }
  if (active >= 100 || active_fair == 0) return own;
  uint64_t idle_bp = (100 - active) * 100;
  return own + static_cast<uint32_t>(idle_bp * it->second.percent / active_fair);
}

}  // namespace gpupool::ledger
