// Core: reservations — the room preemption frees, kept for the preemptor (docs/tenancy.md).
//
// As each victim stops, its allocation stays committed in the engine (Reservation::held) instead
// of being released; a placement on a node with a reservation is refused when the reserved
// placement would no longer fit once the victims are gone; when the last victim is gone the pass
// swaps the held room for the preemptor's allocation (a gang's reservations all at once) before
// it places anything else.
#include "base/log.h"
#include "placement/tentative.h"
#include "scheduler/core.h"
#include "scheduler/core_state.h"

namespace gpupool {

bool Core::State::ReservationsFit(PoolEntry& pool, const std::string& node) {
  std::vector<const Reservation*> here = reservations.OnNode(pool.rec.name, node);
  if (here.empty()) return true;
  placement::Tentative tx(*pool.engine);  // rolled back on return: this only looks
  // As if every victim were gone…
  for (const Reservation* r : here) {
    for (const std::string& v : r->victims) {
      int32_t i = 0;
      JobEntry* j = jobs.FindTask(v, &i);
      if (j == nullptr || !j->task(i).holds) continue;
      (void)tx.Release(j->task(i).allocation);
    }
    for (const placement::Allocation& a : r->held) (void)tx.Release(a);
  }
  // …does every reserved placement still fit?
  bool fits = true;
  for (const Reservation* r : here) {
    if (!tx.Commit(r->allocation).ok()) {
      fits = false;
      break;
    }
  }
  if (Status st = tx.Rollback(); !st.ok())
    LogError("core", "undo of a reservation check failed", {{"error", st.ToString()}});
  return fits;
}

// Why reservation `id` no longer stands, or "" while it does: its task moved on, its node is not
// ready, or its victims took longer than the timeout to stop.
std::string Core::State::StaleReservation(int64_t id, const Reservation& r, int64_t now) const {
  const int64_t timeout_us =
      options.tenancy.reservation_timeout_ms > 0
          ? options.tenancy.reservation_timeout_ms * 1000
          : (3 * options.stop_grace_period_ms + options.heartbeat_timeout_ms) * 1000;
  const JobEntry* job = jobs.Find(r.job_id);
  bool valid = job != nullptr && r.index < job->size() && !CancelRequested(job->head.state) &&
               job->task(r.index).rec.state == TaskState::kPending &&
               job->task(r.index).rec.attempt == r.attempt && job->task(r.index).reservation == id;
  if (!valid || pools.find(r.pool) == pools.end()) return "its task moved on";
  auto node = nodes.find(r.allocation.node);
  if (node == nodes.end() || node->second.rec.state != NodeState::kReady) {
    return "node " + r.allocation.node + " is no longer ready";
  }
  if (now - r.created_us > timeout_us) return "victims did not stop in time";
  return "";
}

// Every victim of the group of `id` is gone: swaps the room they left for the preemptor's
// allocation(s), placed in this pass, when the tenant's quota still allows them. Otherwise the
// preemptor queues again.
void Core::State::TakeUpReservation(PassState& pass, int64_t id) {
  Reservation& first = *reservations.Find(id);
  JobEntry& job = jobs.at(first.job_id);
  PoolEntry& pool = *FindPool(first.pool);
  std::vector<std::pair<int32_t, placement::Allocation>> take;
  QuotaAmount total;
  for (int64_t g : reservations.GroupOf(id)) {
    Reservation& each = *reservations.Find(g);
    for (const placement::Allocation& a : each.held) (void)pool.engine->Release(a);
    total += UsageOf(each.allocation);
    take.emplace_back(each.index, each.allocation);
    job.task(each.index).reservation = 0;
    EraseReservation(g);  // its quota hold goes: the allocation is charged instead
  }
  // The hold kept the chain's quota for this room since the victims were chosen, so only a
  // quota lowered meanwhile lands here.
  if (std::string why = book.WhyOverLimit(job.head.spec.pool, job.head.spec.tenant, total);
      !why.empty()) {
    LogWarn("core", "reserved room given up: the quota no longer allows it; the task queues again",
            {{"job", std::to_string(job.head.id)}, {"why", why}});
    return;
  }
  placement::Tentative tx(*pool.engine);
  Status st;
  for (size_t k = 0; k < take.size() && st.ok(); ++k) st = tx.Commit(take[k].second);
  if (!st.ok()) {
    (void)tx.Rollback();
    LogWarn("core", "reserved room no longer fits; the task queues again",
            {{"job", std::to_string(job.head.id)}, {"error", st.ToString()}});
    return;
  }
  tx.Keep();
  for (const auto& [index, alloc] : take) Reserve(pass, job, index, alloc);
}

void Core::State::ProcessReservations(PassState& pass) {
  if (reservations.empty()) return;
  for (int64_t id : reservations.Ids()) {
    Reservation* found = reservations.Find(id);
    if (found == nullptr) continue;  // dropped or taken up with its gang
    if (std::string why = StaleReservation(id, *found, pass.now); !why.empty()) {
      // A gang's reservations stand and fall together.
      for (int64_t g : reservations.GroupOf(id)) DropReservation(g, why);
      continue;
    }
    if (reservations.GroupReady(id)) TakeUpReservation(pass, id);
  }
}

void Core::State::DropReservation(int64_t id, const std::string& why) {
  Reservation* found = reservations.Find(id);
  if (found == nullptr) return;
  Reservation& r = *found;
  if (PoolEntry* pool = FindPool(r.pool)) {
    for (const placement::Allocation& a : r.held) (void)pool->engine->Release(a);
  }
  for (const std::string& v : r.victims) {
    int32_t index = 0;
    if (JobEntry* victim = jobs.FindTask(v, &index)) {
      victim->task(index).reserved_for = 0;
    }
  }
  if (JobEntry* job = jobs.Find(r.job_id);
      job != nullptr && r.index < job->size() && job->task(r.index).reservation == id) {
    job->task(r.index).reservation = 0;
  }
  LogInfo("core", "reservation dropped",
          {{"task", TaskId(r.job_id, r.index)}, {"node", r.allocation.node}, {"why", why}});
  EraseReservation(id);
}

int64_t Core::State::AddReservation(Reservation r) {
  book.Hold(r.pool, r.tenant, r.quota, +1);
  return reservations.Add(std::move(r));
}

void Core::State::EraseReservation(int64_t id) {
  if (const Reservation* r = reservations.Find(id)) book.Hold(r->pool, r->tenant, r->quota, -1);
  reservations.Erase(id);
}

// After a restart: victims still stopping carry their preemptor in typed columns
// (TaskRecord::stop, ::preempted_by). Their preemptor gets its reservation back — the room those
// victims leave, placed as if they were gone already — so it waits for them instead of
// preempting more tasks for the same room. Gang preemptors are not rebuilt (they queue again).
void Core::State::RebuildReservations(int64_t now, const std::string* only_pool) {
  std::map<TaskKey, std::vector<TaskKey>> victims_of;  // preemptor → victims feeding its room
  for (auto& [id, job] : jobs) {
    for (int32_t i = 0; i < job.size(); ++i) {
      const TaskRecord& t = job.task(i).rec;
      if (t.stop != StopIntent::kPreempt || !job.task(i).holds || !t.preempted_by.reserved) {
        continue;
      }
      victims_of[{t.preempted_by.job_id, t.preempted_by.index}].push_back({id, i});
    }
  }
  for (const auto& [by, victims] : victims_of) {
    JobEntry* job = jobs.Find(by.first);
    if (job == nullptr || job->head.spec.gang ||
        (only_pool != nullptr && job->head.spec.pool != *only_pool) || by.second >= job->size() ||
        job->task(by.second).rec.state != TaskState::kPending) {
      continue;
    }
    RebuildReservation(now, *job, by.second, victims);
  }
}

// The reservation of task `index` of `job`, a preemptor waiting for `victims`: where it would go
// once they are gone (nothing when it would not fit even then).
void Core::State::RebuildReservation(int64_t now, JobEntry& job, int32_t index,
                                     const std::vector<TaskKey>& victims) {
  PoolEntry* pool = FindPool(job.head.spec.pool);
  if (pool == nullptr) return;
  placement::Decision d;
  {
    placement::Tentative tx(*pool->engine);  // as if they were gone; undone at once
    for (const TaskKey& v : victims) {
      const Task& vrt = jobs.at(v.first).task(v.second);
      if (vrt.holds) (void)tx.Release(vrt.allocation);
    }
    d = pool->engine->Place(ToPlacement(job.request));
  }
  if (!d.placed) return;
  Reservation r;
  r.pool = job.head.spec.pool;
  r.job_id = job.head.id;
  r.index = index;
  r.attempt = job.task(index).rec.attempt;
  r.allocation = d.allocation;
  r.created_us = now;
  r.tenant = job.head.spec.tenant;
  r.quota = UsageOf(d.allocation);
  for (const TaskKey& v : victims) r.victims.insert(TaskId(v.first, v.second));
  LogInfo("core", "reservation rebuilt after restart",
          {{"task", TaskId(job.head.id, index)},
           {"node", r.allocation.node},
           {"victims", std::to_string(r.victims.size())}});
  const int64_t rid = AddReservation(std::move(r));
  for (const TaskKey& v : victims) jobs.at(v.first).task(v.second).reserved_for = rid;
  job.task(index).reservation = rid;
}

}  // namespace gpupool
