// device_arbiter.h — the compute shares of the tenants of one device, for the agent's ledgers.
//
// Every task's ledger on a device joins the device's arbiter with its share and mode. Strict
// tenants are held to their share. Fair tenants burst into idle time: the shares of tenants
// that have not used the device for kActiveNs are split among the active fair tenants in
// proportion to their shares. A tenant counts as active from its first report of GPU time, so a
// fair tenant's burst shrinks at its next report after another tenant starts (its ledger's
// bucket, 20 ms deep, bounds what it keeps of the burst): the idle time is given back in well
// under 1 s.
// Rates are in basis points of the device (10000 = all of it).
//
// Charging under time-slicing. Without MPS the device runs one context at a time and switches
// among the contexts that have work every timeslice, preempting kernels midway, so the event
// pairs a tenant's interposer puts around its launches include every slice other tenants ran
// meanwhile. On an H200 (driver 580; docs/interposer.md, "On a real GPU") two busy tenants'
// pairs each added up to ~100 % of wall time while each got 50 % of the device, and capped
// 30/70 tenants were each held to their caps of that inflated time: they got 20 and 59.
// Charge() therefore takes each tenant's busy spans on the host's clock and splits every moment
// among the tenants busy at that moment (processor sharing, what round-robin slices amount to
// over many slices): a moment only one tenant was busy is all its own, a moment two were busy is
// half each. Spans arrive late and in any order between tenants, so the split is kept exact
// incrementally: a span that arrives over moments other tenants were already charged for
// lowers their charge for them, and that correction (a refund) reaches each at its next
// Charge(). Everything charged for a moment adds up to the moment's length, so a tenant's
// reports can shift device time only from itself to others, never charge another more.
// Thread-safe.
#ifndef GPUPOOL_AGENT_INTERPOSER_LEDGER_DEVICE_ARBITER_H_
#define GPUPOOL_AGENT_INTERPOSER_LEDGER_DEVICE_ARBITER_H_

#include <cstdint>
#include <deque>
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
  // `id` was busy on the device over [start_ns, end_ns) (CLOCK_MONOTONIC). Returns the GPU time
  // to charge it now, in ns: its share of that span plus the corrections its earlier spans got
  // since its last call (negative: more refunded than charged). The part of a span before the
  // end of `id`'s previous span is not charged again.
  int64_t Charge(int id, uint64_t start_ns, uint64_t end_ns);

  // Spans are kept this long after their end, for other tenants' late reports of those moments.
  static constexpr uint64_t kHistoryNs = 5'000'000'000;

 private:
  struct Span {
    uint64_t start, end;
  };
  struct Tenant {
    uint32_t percent = 0;
    bool fair = false;
    uint64_t last_active_ns = 0;
    std::deque<Span> spans;    // disjoint, in order
    double correction_ns = 0;  // owed to (negative) or by it, since its last Charge()
  };
  std::mutex mu_;  // guards everything below
  std::map<int, Tenant> tenants_;
  int next_id_ = 1;
};

}  // namespace gpupool::ledger

#endif  // GPUPOOL_AGENT_INTERPOSER_LEDGER_DEVICE_ARBITER_H_
