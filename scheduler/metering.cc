#include "scheduler/metering.h"

#include <algorithm>
#include <set>

namespace gpupool {
namespace {

// What `held` of a device is backed by its physical capacity: held × physical ÷ offered.
int64_t PhysicalShare(int64_t held, int64_t physical, int64_t offered) {
  if (offered <= 0 || physical >= offered) return held;
  return held * physical / offered;
}

std::string Join(const std::set<std::string>& parts) {
  std::string out;
  for (const std::string& p : parts) {
    if (!out.empty()) out += '+';
    out += p;
  }
  return out;
}

}  // namespace

UsageTotals RatesOf(const std::vector<Allocation>& allocations, Ratio compute, Ratio memory,
                    const std::function<const MeteredDevice*(const std::string&)>& device,
                    std::string* model, std::string* mig_profile) {
  UsageTotals r;
  std::set<std::string> models, profiles;
  for (const Allocation& a : allocations) {
    const MeteredDevice* d = device(a.device_id);
    models.insert(d != nullptr ? d->model : "unknown");
    Resources physical = d != nullptr ? d->physical : a.amount;
    Resources offered = d != nullptr ? Offered(physical, compute, memory) : a.amount;
    const int64_t phys_tflops =
        PhysicalShare(a.amount.milli_tflops, physical.milli_tflops, offered.milli_tflops);
    r.milli_tflops_seconds += a.amount.milli_tflops;
    r.physical_milli_tflops_seconds += phys_tflops;
    r.vram_mib_seconds += a.amount.vram_mib;
    // No spill here: it is not a share of what is held. A slice spills only when its
    // allocations outgrow the device's own memory, which the node measures (Split adds the
    // measured figure at the attempt's end).
    if (d != nullptr && !d->mig_profile.empty()) profiles.insert(d->mig_profile);
    if (a.slots > 0) {
      r.slot_seconds += a.slots;  // a slot of a time-sliced GPU or MIG instance, not the whole
    } else if (d != nullptr && !d->mig_profile.empty()) {
      ++r.mig_instance_seconds;
    } else if (a.exclusive) {
      ++r.device_seconds;
    }
  }
  *model = Join(models);
  *mig_profile = Join(profiles);
  return r;
}

std::vector<UsageInterval> Split(const UsageInterval& rates, int64_t from_us, int64_t to_us,
                                 int64_t interval_us, AttemptEnd end,
                                 const TaskUsageRecord& sandbox) {
  std::vector<UsageInterval> out;
  auto piece = [&](int64_t a, int64_t b) {
    UsageInterval u = rates;
    u.start_us = a;
    u.end_us = b;
    const int64_t s = MeteredSeconds(a, b);
    const UsageTotals& r = rates.totals;
    u.totals = UsageTotals{};
    u.totals.milli_tflops_seconds = r.milli_tflops_seconds * s;
    u.totals.physical_milli_tflops_seconds = r.physical_milli_tflops_seconds * s;
    u.totals.vram_mib_seconds = r.vram_mib_seconds * s;
    u.totals.spill_mib_seconds = r.spill_mib_seconds * s;
    u.totals.device_seconds = r.device_seconds * s;
    u.totals.mig_instance_seconds = r.mig_instance_seconds * s;
    u.totals.slot_seconds = r.slot_seconds * s;
    u.totals.intervals = 1;
    out.push_back(std::move(u));
  };
  for (int64_t a = from_us; a < to_us;) {
    const int64_t b = std::min(to_us, (a / interval_us + 1) * interval_us);
    piece(a, b);
    a = b;
  }
  if (end != AttemptEnd::kNone) {
    if (out.empty()) piece(to_us, to_us);
    UsageInterval& last = out.back();
    last.end = end;
    last.totals.cpu_usage_us = sandbox.cpu_usage_us;
    last.totals.peak_memory_bytes = sandbox.peak_memory_bytes;
    last.totals.spill_mib_seconds += sandbox.spill_mib_seconds;
  }
  return out;
}

void UsageMeter::Load(const std::vector<UsageMark>& marks) {
  for (const UsageMark& m : marks) {
    marks_[{m.job_id, m.task_index}] = Entry{m.attempt, m.metered_until_us, false};
  }
}

int64_t UsageMeter::Mark(const TaskKey& task, int32_t attempt, int64_t start_us) const {
  auto it = marks_.find(task);
  if (it == marks_.end() || it->second.attempt != attempt) return start_us;
  return std::max(it->second.until_us, start_us);
}

bool UsageMeter::InFlight(const TaskKey& task) const {
  auto it = marks_.find(task);
  return it != marks_.end() && it->second.in_flight;
}

void UsageMeter::SetInFlight(const TaskKey& task, int32_t attempt, int64_t start_us) {
  Entry& e = marks_[task];
  if (e.attempt != attempt || e.until_us == 0) e = Entry{attempt, start_us, false};
  e.in_flight = true;
}

void UsageMeter::ClearInFlight(const TaskKey& task) {
  if (auto it = marks_.find(task); it != marks_.end()) it->second.in_flight = false;
}

void UsageMeter::Stored(const std::vector<UsageInterval>& rows,
                        const std::function<void(const UsageInterval&)>& count) {
  for (const UsageInterval& u : rows) {
    const TaskKey key{u.job_id, u.task_index};
    auto it = marks_.find(key);
    if (it == marks_.end()) {
      // First rows of an attempt no periodic scan saw (it ended within its first interval).
      if (u.end == AttemptEnd::kNone) continue;  // a late periodic batch of a finished attempt
      it = marks_.emplace(key, Entry{u.attempt, u.start_us, false}).first;
    }
    Entry& e = it->second;
    if (e.attempt != u.attempt) {
      if (u.attempt < e.attempt) continue;  // an older attempt's late rows: counted before
      e = Entry{u.attempt, u.start_us, false};
    }
    // Rows of an attempt are contiguous: a row ending at or before the mark was counted.
    if (u.end_us > e.until_us ||
        (u.end != AttemptEnd::kNone && u.end_us == u.start_us && u.start_us >= e.until_us)) {
      if (count) count(u);
      e.until_us = u.end_us;
    }
    if (u.end != AttemptEnd::kNone) {
      marks_.erase(it);
    } else {
      e.in_flight = false;
    }
  }
}

}  // namespace gpupool
