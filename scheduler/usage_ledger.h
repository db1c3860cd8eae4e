// The usage ledger's row: what one task attempt held during one closed interval.
//
// The ledger is append-only and exact: each row is keyed by (job id, task index, attempt,
// interval start), so storing the same interval twice (a retried batch, a restart, a failover)
// keeps the first and changes nothing. Quantities are integers over whole seconds between the
// interval's floored endpoints, so the rows of an attempt add up to exactly
// floor(end) - floor(start) seconds of what it held (docs/billing.md, "Ledger"). The core writes
// them (scheduler/metering.h); store/ persists them (AppendUsage, RollUpUsage in store.h).
//
// Thread safety: plain values.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "pool/inventory.h"
#include "scheduler/usage_report.h"

namespace gpupool {

// How an attempt ended, on its last interval (kNone on the others).
enum class AttemptEnd { kNone = 0, kSucceeded, kFailed, kPreempted, kLost, kCancelled };
std::string_view ToString(AttemptEnd e);  // "" for kNone, else "SUCCEEDED", …
std::optional<AttemptEnd> ParseAttemptEnd(std::string_view s);

struct UsageInterval {
  // The idempotent key.
  int64_t job_id = 0;
  int32_t task_index = 0;
  int32_t attempt = 0;
  int64_t start_us = 0;
  // [start_us, end_us); end_us > start_us, except an attempt's last interval, which may be
  // empty (it ended on a boundary) and still says how it ended.
  int64_t end_us = 0;
  // Who and where.
  std::string tenant;
  std::string pool;
  std::string node;
  std::string model;  // the devices' model; distinct models joined by '+'
  SharingMode sharing_mode = SharingMode::kFractional;
  std::string priority_class;
  std::string mig_profile;  // "" unless it held a MIG instance
  std::string service;      // the service whose replica this is (its name); "" for a job
  // What it held × whole seconds (UsageTotals' units), and the sandbox's account of the
  // attempt (on the last interval only, when the agent reported it).
  UsageTotals totals;
  AttemptEnd end = AttemptEnd::kNone;
  friend bool operator==(const UsageInterval&, const UsageInterval&) = default;
};

// How far an attempt's intervals are stored: Recover() reads it for every SCHEDULED or RUNNING
// task that has ledger rows, and the core resumes metering there.
struct UsageMark {
  int64_t job_id = 0;
  int32_t task_index = 0;
  int32_t attempt = 0;
  int64_t metered_until_us = 0;  // the latest stored interval's end
  friend bool operator==(const UsageMark&, const UsageMark&) = default;
};

// Whole seconds between the floored endpoints: what an interval [start, end) counts.
inline int64_t MeteredSeconds(int64_t start_us, int64_t end_us) {
  return end_us / 1'000'000 - start_us / 1'000'000;
}

}  // namespace gpupool
