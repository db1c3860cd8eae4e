// device_arbiter.h — the compute shares of the tenants of one device, for the agent's ledgers.
//
// Every task's ledger on a device joins the device's arbiter with its share and mode. Strict
// tenants are held to their share. Fair tenants burst into idle time: the shares of tenants
// that have not used the device for kActiveNs are split among the active fair tenants in
// proportion to their shares. A tenant counts as active from its first report of GPU time, so a
// fair tenant's burst shrinks at its next report after another tenant starts (its ledger's
// bucket, 20 ms deep, bounds what it keeps of the burst): the idle time is given back in well
// under 1 s.
// Rates are in basis points of the device (10000 = all of it). Thread-safe.
#ifndef GPUPOOL_AGENT_INTERPOSER_LEDGER_DEVICE_ARBITER_H_
#define GPUPOOL_AGENT_INTERPOSER_LEDGER_DEVICE_ARBITER_H_

#include <cstdint>
#include <map>
#include <mutex>

namespace gpupool::ledger {

class DeviceArbiter {
 public:
  static constexpr uint64_t kActiveNs = 250'000'000;

  // A tenant with `percent` (1..100) of the device; returns its id.
  int Join(uint32_t percent, bool fair);
  void Leave(int id);
  // Notes that `id` uses the device at `now_ns` and returns its refill rate now.
  uint32_t RateBp(int id, uint64_t now_ns);

 private:
  struct Tenant {
    uint32_t percent;
    bool fair;
    uint64_t last_active_ns;
  };
  std::mutex mu_;  // guards everything below
  std::map<int, Tenant> tenants_;
  int next_id_ = 1;
};

}  // namespace gpupool::ledger

#endif  // GPUPOOL_AGENT_INTERPOSER_LEDGER_DEVICE_ARBITER_H_
