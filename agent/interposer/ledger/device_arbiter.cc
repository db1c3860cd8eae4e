#include "agent/interposer/ledger/device_arbiter.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

namespace gpupool::ledger {

int DeviceArbiter::Join(uint32_t percent, bool fair) {
  std::lock_guard<std::mutex> l(mu_);
  int id = next_id_++;
  Tenant& t = tenants_[id];
  t.percent = percent;
  t.fair = fair;
  t.last_active_ns = 0;
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

int64_t DeviceArbiter::Charge(int id, uint64_t start_ns, uint64_t end_ns) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = tenants_.find(id);
  if (it == tenants_.end()) return end_ns > start_ns ? static_cast<int64_t>(end_ns - start_ns) : 0;
  Tenant& me = it->second;
  if (!me.spans.empty()) start_ns = std::max(start_ns, me.spans.back().end);
  double charge = 0;
  if (end_ns > start_ns) {
    // The other tenants' busy moments within the span: +1 where a span of one starts, -1 where
    // it ends (a tenant's own spans are disjoint, so each counts at most once at any moment).
    std::vector<std::pair<uint64_t, int>> edges;  // (time, +1 / -1), tagged by tenant below
    std::vector<Tenant*> whose;
    for (auto& [tid, t] : tenants_) {
      if (tid == id) continue;
      for (const Span& sp : t.spans) {
        if (sp.end <= start_ns || sp.start >= end_ns) continue;
        whose.push_back(&t);
        edges.push_back({std::max(sp.start, start_ns), static_cast<int>(whose.size())});
        edges.push_back({std::min(sp.end, end_ns), -static_cast<int>(whose.size())});
      }
    }
    std::sort(edges.begin(), edges.end());  // at one instant, ends (negative) before starts
    std::vector<Tenant*> busy;
    uint64_t at = start_ns;
    auto settle = [&](uint64_t until) {  // [at, until) with `busy` unchanged
      if (until <= at) return;
      const double len = static_cast<double>(until - at);
      const double k = static_cast<double>(busy.size());
      charge += len / (k + 1);
      // Each busy tenant was charged 1/k of these moments; it now shares them with one more.
      for (Tenant* t : busy) t->correction_ns += len / (k + 1) - len / k;
      at = until;
    };
    for (const auto& [when, tag] : edges) {
      settle(when);
      Tenant* t = whose[static_cast<size_t>(std::abs(tag)) - 1];
      if (tag > 0) {
        busy.push_back(t);
      } else {
        auto gone = std::find(busy.begin(), busy.end(), t);
        if (gone != busy.end()) busy.erase(gone);
      }
    }
    settle(end_ns);
    if (!me.spans.empty() && me.spans.back().end == start_ns) {
      me.spans.back().end = end_ns;
    } else {
      me.spans.push_back({start_ns, end_ns});
    }
    // Forget what no late report can still reach.
    const uint64_t horizon = end_ns > kHistoryNs ? end_ns - kHistoryNs : 0;
    for (auto& [tid, t] : tenants_)
      while (!t.spans.empty() && t.spans.front().end < horizon) t.spans.pop_front();
  }
  charge += me.correction_ns;
  const double whole = std::trunc(charge);
  me.correction_ns = charge - whole;  // the fraction of a ns carries on
  return static_cast<int64_t>(whole);
}

}  // namespace gpupool::ledger
