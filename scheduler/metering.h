// Metering: how the core turns the allocations of running task attempts into ledger intervals
// (scheduler/usage_ledger.h). Pure arithmetic and one small book; no I/O, no clock.
//
// The model:
//  * An attempt is metered from the moment its allocation was committed (scheduled_us) to the
//    moment the core released it (its end, requeue or loss): the integral of its allocation.
//  * That span is cut at multiples of the metering interval (UTC) into closed intervals. The
//    core closes every running attempt's intervals when a boundary passes (Tick), and the last,
//    partial one (with how the attempt ended) in the same batch as the attempt's end.
//  * Each interval carries the attempt's rates × its whole seconds (MeteredSeconds), so an
//    attempt's rows always add up to exactly floor(end) − floor(start) seconds of what it held.
//  * The book keeps, per task, how far its current attempt is stored (the mark). Marks only move
//    when a batch is durable, so the next batch starts where the stored rows end: the rows of an
//    attempt are contiguous, and after a restart the core resumes at the stored mark
//    (RecoveredState::usage_marks). A batch sent twice is harmless (idempotent keys).
//
// Single-threaded: the core's thread.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "scheduler/model.h"
#include "scheduler/usage_ledger.h"

namespace gpupool {

using TaskKey = std::pair<int64_t, int32_t>;  // (job id, index), as in job_table.h

// What an attempt holds per second, with its dimensions: a ledger row with `totals` as rates
// and no key or span yet.
struct MeterRates {
  UsageInterval row;  // tenant, pool, node, model, sharing mode, class, MIG profile; totals/s
};

// What the core knows of a device, for the rates.
struct MeteredDevice {
  std::string model;
  std::string mig_profile;
  Resources physical;
};

// The rates of an attempt holding `allocations` in a pool with the given overcommit ratios.
// `device` looks a device id up (nullptr when unknown: its model is "unknown" and its physical
// share equals what it holds). Physical share of an allocation: what it holds × the device's
// physical ÷ the device's offered capacity (exact for whole devices). No spill: holding a slice
// under memory overcommit spills nothing until its allocations outgrow the device, which only
// the node can measure (TaskUsageRecord::spill_mib_seconds, added by Split).
UsageTotals RatesOf(const std::vector<Allocation>& allocations, Ratio compute, Ratio memory,
                    const std::function<const MeteredDevice*(const std::string&)>& device,
                    std::string* model, std::string* mig_profile);

// `rates` over [from_us, to_us) cut at multiples of `interval_us`: one row per piece, each with
// the rates × its whole seconds. With `end` != kNone the last row carries it and `sandbox` (CPU,
// peak memory, and the spill the node measured over the attempt), and a zero-length span still
// gives that one row.
// REQUIRES: from_us <= to_us, interval_us > 0.
std::vector<UsageInterval> Split(const UsageInterval& rates, int64_t from_us, int64_t to_us,
                                 int64_t interval_us, AttemptEnd end = AttemptEnd::kNone,
                                 const TaskUsageRecord& sandbox = {});

// Where each task's current attempt is metered up to, and which tasks have ledger rows in
// flight.
class UsageMeter {
 public:
  // After recovery: the stored marks.
  void Load(const std::vector<UsageMark>& marks);
  // Where metering of (task, attempt) resumes: its mark, else `start_us`.
  int64_t Mark(const TaskKey& task, int32_t attempt, int64_t start_us) const;
  bool InFlight(const TaskKey& task) const;
  void SetInFlight(const TaskKey& task, int32_t attempt, int64_t start_us);
  // The periodic batch holding the task's rows failed: it will be built again from the mark.
  void ClearInFlight(const TaskKey& task);
  // `rows` are durable: marks move to their ends; an attempt's last row forgets its task. Calls
  // `count` for each row not counted before (for the /metrics counters: a row stored twice is
  // counted once).
  void Stored(const std::vector<UsageInterval>& rows,
              const std::function<void(const UsageInterval&)>& count);
  size_t size() const { return marks_.size(); }

  // The next time a periodic scan is due (the next boundary, or sooner after a failure).
  int64_t next_scan_us = 0;
  int64_t next_rollup_us = 0;

 private:
  struct Entry {
    int32_t attempt = 0;
    int64_t until_us = 0;
    bool in_flight = false;
  };
  std::map<TaskKey, Entry> marks_;
};

}  // namespace gpupool
