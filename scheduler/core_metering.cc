// Core: the usage ledger on the change path (scheduler/metering.h has the model).
//
//  * An attempt's end (core_change.cc, CommitTaskChanges) carries its last intervals — from
//    its stored mark to the end, the last one with how it ended — in the SAME batch as the task
//    change, so an attempt is never recorded as ended without its usage, nor the reverse.
//  * Tick closes the intervals of every running attempt once a boundary has passed, in batches
//    of at most max_intervals_per_batch. A task with a batch in flight is left out until it is
//    answered; a refused batch changes nothing in memory and is built again (the same rows,
//    same keys) by a scan a second later.
//  * Marks move only when a batch is durable (ApplyChangeSet and the periodic batch's callback
//    call MeterStored), and the usage counters on /metrics count each stored row once.
#include "base/log.h"
#include "scheduler/core.h"
#include "scheduler/core_state.h"

namespace gpupool {
namespace {

constexpr int64_t kDayUs = 24LL * 3600 * 1'000'000;

AttemptEnd EndOf(const TaskChange& c) {
  switch (c.after.state) {
    case TaskState::kSucceeded:
      return AttemptEnd::kSucceeded;
    case TaskState::kFailed:
      return AttemptEnd::kFailed;
    case TaskState::kCancelled:
      return AttemptEnd::kCancelled;
    default:
      return c.transition == "PREEMPTED" ? AttemptEnd::kPreempted : AttemptEnd::kLost;
  }
}

bool Holds(TaskState s) { return s == TaskState::kScheduled || s == TaskState::kRunning; }

}  // namespace

UsageInterval Core::State::MeterRatesOf(const JobEntry& job, const TaskRecord& t) const {
  UsageInterval r;
  r.job_id = job.head.id;
  r.task_index = t.index;
  r.attempt = t.attempt;
  r.tenant = job.head.spec.tenant;
  r.pool = job.head.spec.pool;
  r.node = t.node;
  r.priority_class = job.head.spec.priority_class;
  r.service = job.head.spec.service_name;
  Ratio compute, memory;
  if (auto p = pools.find(job.head.spec.pool); p != pools.end()) {
    compute = p->second.rec.compute_overcommit;
    memory = p->second.rec.memory_overcommit;
    r.sharing_mode = p->second.rec.sharing_mode;
  }
  const NodeEntry* node = nullptr;
  if (auto n = nodes.find(t.node); n != nodes.end()) node = &n->second;
  MeteredDevice scratch;
  auto device = [&](const std::string& id) -> const MeteredDevice* {
    if (node == nullptr) return nullptr;
    auto i = node->device_index.find(id);
    if (i == node->device_index.end()) return nullptr;
    const DeviceRecord& d = node->rec.devices[static_cast<size_t>(i->second)];
    scratch = MeteredDevice{d.model, d.mig_profile, d.physical};
    return &scratch;
  };
  r.totals = RatesOf(t.allocations, compute, memory, device, &r.model, &r.mig_profile);
  return r;
}

void Core::State::AppendFinalUsage(const TaskChange& c, int64_t now_us,
                                   std::vector<Mutation>* batch) const {
  if (!options.metering.enabled) return;
  const JobEntry& job = jobs.at(c.job_id);
  const TaskRecord& before = job.task(c.index).rec;
  if (!Holds(before.state) || before.scheduled_us == 0) return;
  if (Holds(c.after.state) && c.after.attempt == before.attempt) return;  // not an end
  const int64_t from = meter.Mark({c.job_id, c.index}, before.attempt, before.scheduled_us);
  // The end the task record shows (a finished attempt's finished_us), else the change's time.
  const int64_t end =
      c.after.finished_us != 0 && c.after.attempt == before.attempt ? c.after.finished_us : now_us;
  const int64_t to = std::max(from, end);
  TaskUsageRecord sandbox = c.usage_reported ? c.after.usage : TaskUsageRecord{};
  batch->emplace_back(
      AppendUsage{Split(MeterRatesOf(job, before), from, to,
                        options.metering.interval_s * 1'000'000, EndOf(c), sandbox)});
}

void Core::State::MeterStored(const std::vector<Mutation>& batch) {
  for (const Mutation& m : batch) {
    const auto* au = std::get_if<AppendUsage>(&m);
    if (au == nullptr) continue;
    meter.Stored(au->intervals, [this](const UsageInterval& u) {
      if (metrics != nullptr) {
        metrics->Usage(TenantAtDepth(u.tenant, options.metering.metrics_tenant_depth), u.pool,
                       u.totals);
      }
    });
  }
}

void Core::State::MeterTick(Core* core) {
  (void)core;
  const int64_t now = clock->NowMicros();
  const MeteringOptions& mo = options.metering;
  if (!mo.enabled) return;
  if (mo.rollup_after_days > 0 && now >= meter.next_rollup_us) {
    meter.next_rollup_us = now + 3600LL * 1'000'000;
    const int64_t cutoff = (now / kDayUs - mo.rollup_after_days) * kDayUs;
    if (cutoff > 0) {
      Persist({RollUpUsage{cutoff}}, [](Status st) {
        if (!st.ok()) LogWarn("core", "usage roll-up not stored", {{"error", st.ToString()}});
      });
    }
  }
  if (now < meter.next_scan_us) return;
  const int64_t interval_us = mo.interval_s * 1'000'000;
  const int64_t boundary = now / interval_us * interval_us;
  meter.next_scan_us = boundary + interval_us;
  std::vector<UsageInterval> rows;
  std::vector<TaskKey> keys;
  auto flush = [&] {
    if (rows.empty()) return;
    std::vector<Mutation> batch{AppendUsage{std::move(rows)}};
    std::vector<Mutation> copy = batch;
    Persist(std::move(batch), [this, keys = std::move(keys), copy = std::move(copy)](Status st) {
      if (st.ok()) {
        MeterStored(copy);
        return;
      }
      LogWarn("core", "usage intervals not stored; closed again from the mark",
              {{"tasks", std::to_string(keys.size())}, {"error", st.ToString()}});
      for (const TaskKey& k : keys) meter.ClearInFlight(k);
      meter.next_scan_us = std::min(meter.next_scan_us, clock->NowMicros() + 1'000'000);
    });
    rows.clear();
    keys.clear();
  };
  for (const auto& [pool, tasks] : active) {
    for (const TaskKey& key : tasks) {
      const JobEntry* job = jobs.Find(key.first);
      if (job == nullptr || !job->Has(key.second)) continue;
      const Task& rt = job->task(key.second);
      const TaskRecord& t = rt.rec;
      if (rt.changing || rt.committing || !Holds(t.state) || t.scheduled_us == 0) continue;
      if (meter.InFlight(key)) continue;
      const int64_t from = meter.Mark(key, t.attempt, t.scheduled_us);
      if (boundary <= from) continue;
      std::vector<UsageInterval> closed = Split(MeterRatesOf(*job, t), from, boundary, interval_us);
      meter.SetInFlight(key, t.attempt, from);
      keys.push_back(key);
      for (UsageInterval& u : closed) rows.push_back(std::move(u));
      if (static_cast<int32_t>(rows.size()) >= mo.max_intervals_per_batch) flush();
    }
  }
  flush();
}

}  // namespace gpupool
