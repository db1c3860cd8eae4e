// Core: preemption and the reservations it makes (docs/tenancy.md).
//
// A pending task that does not fit may preempt when
//  * priority: its class may preempt, and the victims are of a lower priority value; or
//  * reclaim: its share group stays within its guarantee with the task, and the victims run on
//    capacity their own group borrows (beyond its guarantee), at a priority no higher than its.
// Victims must be preemptible (class, or the job's own `preemptible`), past their class's
// minimum runtime, not of a job this task was itself preempted by (no ping-pong), and within
// their group's disruption budget. placement::Engine::FindVictims picks the cheapest set on one
// node; on equal class values tasks on borrowed capacity rank cheaper, so they go first. A victim
// of a gang takes its whole gang down (restarted whole). The victims' room is reserved: as each
// one stops its allocation stays committed in the engine for the reservation, and once the last
// is gone the pass swaps it for the preemptor's allocation.
#include <climits>

#include "base/log.h"
#include "scheduler/core.h"
#include "scheduler/core_state.h"

namespace gpupool {
namespace {

struct Item {
  int64_t since_us;
  TaskKey key;
  QuotaAmount usage;
  bool eligible;
  PreemptionCandidate candidate;
};

}  // namespace

// Running tasks of `pool` that may be preempted, with their borrowed flag: within a share group,
// the oldest tasks fill the guarantee; whatever started later beyond it is borrowed.
std::vector<PreemptionCandidate> Core::State::Candidates(const std::string& pool, int64_t now) {
  std::vector<PreemptionCandidate> out;
  auto it = active.find(pool);
  if (it == active.end()) return out;
  std::map<std::string, std::vector<Item>> by_group;
  for (const TaskKey& key : it->second) {
    JobEntry& j = jobs.at(key.first);
    const TaskRecord& t = j.rec.tasks[static_cast<size_t>(key.second)];
    const TaskRuntime& rt = j.rt[static_cast<size_t>(key.second)];
    const PriorityClass* cls = ClassOf(j);
    int64_t since = t.started_us != 0 ? t.started_us : t.scheduled_us;
    int64_t runtime_us = std::max<int64_t>(0, now - since);
    bool preemptible = (cls != nullptr && cls->preemptible) || j.rec.spec.preemptible;
    bool past_min = cls == nullptr || runtime_us >= cls->min_runtime_ms * 1000;
    PreemptionCandidate c;
    c.job_id = key.first;
    c.index = key.second;
    c.value = j.priority;
    c.group = book.GroupOf(pool, j.rec.spec.tenant);
    if (j.rec.spec.gang) {
      c.gang_size = 0;
      for (const TaskRuntime& m : j.rt) c.gang_size += m.holds ? 1 : 0;
    }
    c.task.task_id = TaskId(key.first, key.second);
    c.task.allocation = rt.allocation;
    c.task.work_lost = runtime_us / 1'000'000 * c.gang_size;  // seconds of work, whole gang
    bool eligible =
        rt.holds && !rt.committing && rt.stop == StopIntent::kNone && preemptible && past_min;
    by_group[c.group].push_back(Item{since, key, rt.usage, eligible, std::move(c)});
  }
  for (auto& [group, items] : by_group) {
    std::sort(items.begin(), items.end(), [](const Item& a, const Item& b) {
      return std::tie(a.since_us, a.key) < std::tie(b.since_us, b.key);
    });
    const QuotaRecord* q = book.Quota(group, pool);
    QuotaAmount cum;
    for (Item& item : items) {
      cum.resources += item.usage.resources;
      cum.devices += item.usage.devices;
      bool borrowed = q == nullptr || q->guaranteed.IsZero();
      for (int d = 0; d < 3 && !borrowed; ++d) {
        int64_t g = Dimension(q->guaranteed, d);
        borrowed = g > 0 && Dimension(cum, d) > g;
      }
      item.candidate.borrowed = borrowed;
      if (item.eligible) out.push_back(std::move(item.candidate));
    }
  }
  return out;
}

bool Core::State::TryPreempt(PassState& pass, JobEntry& job, int32_t index,
                             const placement::Request& req, std::string* why) {
  const PriorityClass* cls = ClassOf(job);
  const std::string& pool_name = job.rec.spec.pool;
  const std::string& tenant = job.rec.spec.tenant;
  const bool may_preempt = cls != nullptr && cls->may_preempt;
  const bool reclaim = book.WithinGuarantee(pool_name, tenant, Estimate(job.request));
  PoolEntry* pool = FindPool(pool_name);
  if ((!may_preempt && !reclaim) || pool == nullptr) return false;
  const std::string group = book.GroupOf(pool_name, tenant);
  std::pair<ShapeKey, std::string> memo{
      ShapeKey{pool_name, job.request},
      std::to_string(job.priority) + "/" + (reclaim ? group : "")};
  if (pass.preempt_failed.contains(memo)) return false;

  const int32_t budget = options.tenancy.disruption_budget_victims;
  const int64_t window_us = options.tenancy.disruption_budget_window_ms * 1000;
  auto remaining = [&](const std::string& g) -> int32_t {
    if (budget <= 0) return INT32_MAX;
    std::deque<int64_t>& times = disruptions[g];
    while (!times.empty() && times.front() <= pass.now - window_us) times.pop_front();
    return budget - static_cast<int32_t>(times.size());
  };

  const TaskRuntime& me = job.rt[static_cast<size_t>(index)];
  std::vector<PreemptionCandidate> candidates = Candidates(pool_name, pass.now);
  std::vector<placement::RunningTask> running;
  std::map<std::string, const PreemptionCandidate*> by_id;
  bool budget_blocked = false;
  for (const PreemptionCandidate& c : candidates) {
    if (c.job_id == job.rec.id || me.preempted_by.contains(c.job_id)) continue;
    bool by_priority = may_preempt && c.value < job.priority;
    bool by_reclaim = reclaim && c.borrowed && c.value <= job.priority && c.group != group;
    if (!by_priority && !by_reclaim) continue;
    if (remaining(c.group) < c.gang_size) {
      budget_blocked = true;
      continue;
    }
    // Doubled so that, on equal class values, borrowed capacity ranks cheaper (and reclaim can
    // reach exactly the borrowers of its own value).
    placement::RunningTask t = c.task;
    t.priority = 2 * c.value + (c.borrowed ? 0 : 1);
    by_id[t.task_id] = &c;
    running.push_back(std::move(t));
  }
  placement::VictimSet vs =
      pool->engine->FindVictims(req, 2 * job.priority + (reclaim ? 1 : 0), running);
  if (!vs.found || vs.task_ids.empty()) {
    pass.preempt_failed.insert(memo);
    if (budget_blocked) *why = "preemption held back by a disruption budget";
    return false;
  }
  std::map<std::string, int32_t> per_group;
  for (const std::string& id : vs.task_ids)
    per_group[by_id.at(id)->group] += by_id.at(id)->gang_size;
  for (const auto& [g, n] : per_group) {
    if (n > remaining(g)) {
      pass.preempt_failed.insert(memo);
      *why = "preemption held back by the disruption budget of " + g;
      return false;
    }
  }

  const int64_t rid = next_reservation_id++;
  Reservation& r = reservations[rid];
  r.pool = pool_name;
  r.job_id = job.rec.id;
  r.index = index;
  r.attempt = job.rec.tasks[static_cast<size_t>(index)].attempt;
  r.allocation = vs.decision.allocation;
  r.created_us = pass.now;
  r.victims.insert(vs.task_ids.begin(), vs.task_ids.end());
  job.rt[static_cast<size_t>(index)].reservation = rid;

  const std::string preemptor = TaskId(job.rec.id, index);
  for (const std::string& id : vs.task_ids) {
    const PreemptionCandidate& c = *by_id.at(id);
    bool priority_rule = may_preempt && c.value < job.priority;
    std::string cause = priority_rule ? "priority" : "reclaim";
    JobEntry& victim = jobs.at(c.job_id);
    std::string text =
        priority_rule
            ? "preempted by task " + preemptor + " of " + tenant + " (rule priority: class " +
                  job.rec.spec.priority_class + " " + std::to_string(job.priority) + " > " +
                  victim.rec.spec.priority_class + " " + std::to_string(c.value) + ")"
            : "preempted by task " + preemptor + " of " + tenant + " (rule reclaim: " + group +
                  " is within its guarantee in pool " + pool_name + ", " + c.group +
                  " ran on borrowed capacity)";
    std::vector<int32_t> stopping{c.index};
    if (victim.rec.spec.gang) {
      victim.restarting = true;  // the whole gang stops and is placed again whole
      for (int32_t m = 0; m < static_cast<int32_t>(victim.rt.size()); ++m) {
        const TaskRuntime& mrt = victim.rt[static_cast<size_t>(m)];
        if (m != c.index && mrt.holds && mrt.stop == StopIntent::kNone) stopping.push_back(m);
      }
    }
    for (int32_t m : stopping) {
      TaskRecord& t = victim.rec.tasks[static_cast<size_t>(m)];
      TaskRuntime& rt = victim.rt[static_cast<size_t>(m)];
      std::string mine = m == c.index ? text : text + " (gang member of " + id + ")";
      rt.stop = StopIntent::kPreempt;
      rt.reserved_for = m == c.index ? rid : 0;
      rt.stop_cause = mine;
      rt.preempted_by.insert(job.rec.id);
      t.reason = "stopping: " + mine;  // kStoppingPreempted + …
      std::string tid = TaskId(victim.rec.id, m);
      pass.batch.emplace_back(UpdateTask{t});
      pass.batch.emplace_back(AppendEvent{Event("task.preempted", "task/" + tid, mine)});
      pass.batch.emplace_back(AppendEvent{Event(
          "task.preempted", "job/" + std::to_string(victim.rec.id), "task " + tid + ": " + mine)});
      if (metrics != nullptr) metrics->Preemption(cause);
      if (budget > 0) disruptions[c.group].push_back(pass.now);
      SendStop(victim, m, mine);
      Notify(victim, "task " + tid + ": preempted: " + mine);
    }
  }
  std::string ids;
  for (const std::string& v : r.victims) ids += (ids.empty() ? "" : ", ") + v;
  job.rec.tasks[static_cast<size_t>(index)].reason =
      "waiting for " + std::to_string(r.victims.size()) + " preempted task(s) to stop on " +
      r.allocation.node + ": " + ids;
  LogInfo("core", "preempting",
          {{"task", preemptor}, {"node", r.allocation.node}, {"victims", ids}});
  return true;
}

void Core::State::ProcessReservations(PassState& pass) {
  if (reservations.empty()) return;
  int64_t timeout_us =
      options.tenancy.reservation_timeout_ms > 0
          ? options.tenancy.reservation_timeout_ms * 1000
          : (3 * options.stop_grace_period_ms + options.heartbeat_timeout_ms) * 1000;
  std::vector<int64_t> ids;
  for (const auto& [id, r] : reservations) ids.push_back(id);
  for (int64_t id : ids) {
    Reservation& r = reservations.at(id);
    JobEntry* job = FindJob(r.job_id);
    bool valid = job != nullptr && r.index < static_cast<int32_t>(job->rec.tasks.size()) &&
                 job->rec.state != JobState::kCancelled &&
                 job->rec.tasks[static_cast<size_t>(r.index)].state == TaskState::kPending &&
                 job->rec.tasks[static_cast<size_t>(r.index)].attempt == r.attempt &&
                 job->rt[static_cast<size_t>(r.index)].reservation == id;
    auto node = nodes.find(r.allocation.node);
    PoolEntry* pool = FindPool(r.pool);
    if (!valid || pool == nullptr) {
      DropReservation(id, "its task moved on");
    } else if (node == nodes.end() || node->second.rec.state != NodeState::kReady) {
      DropReservation(id, "node " + r.allocation.node + " is no longer ready");
    } else if (pass.now - r.created_us > timeout_us) {
      DropReservation(id, "victims did not stop in time");
    } else if (r.victims.empty()) {
      // Every victim is gone: swap the room they left for the preemptor's allocation.
      for (const placement::Allocation& a : r.held) (void)pool->engine->Release(a);
      r.held.clear();
      placement::Allocation alloc = r.allocation;
      int32_t index = r.index;
      reservations.erase(id);
      job->rt[static_cast<size_t>(index)].reservation = 0;
      if (!book.WhyOverLimit(r.pool, job->rec.spec.tenant, UsageOf(alloc)).empty()) continue;
      Status st = pool->engine->Commit(alloc);
      if (!st.ok()) {
        LogWarn("core", "reserved room no longer fits; the task queues again",
                {{"task", TaskId(job->rec.id, index)}, {"error", st.ToString()}});
        continue;
      }
      Reserve(pass, *job, index, alloc);
    }
  }
}

void Core::State::DropReservation(int64_t id, const std::string& why) {
  auto it = reservations.find(id);
  if (it == reservations.end()) return;
  Reservation& r = it->second;
  if (PoolEntry* pool = FindPool(r.pool)) {
    for (const placement::Allocation& a : r.held) (void)pool->engine->Release(a);
  }
  for (const std::string& v : r.victims) {
    int32_t index = 0;
    if (JobEntry* victim = FindTask(v, &index)) {
      victim->rt[static_cast<size_t>(index)].reserved_for = 0;
    }
  }
  if (JobEntry* job = FindJob(r.job_id); job != nullptr &&
                                         r.index < static_cast<int32_t>(job->rt.size()) &&
                                         job->rt[static_cast<size_t>(r.index)].reservation == id) {
    job->rt[static_cast<size_t>(r.index)].reservation = 0;
  }
  LogInfo("core", "reservation dropped",
          {{"task", TaskId(r.job_id, r.index)}, {"node", r.allocation.node}, {"why", why}});
  reservations.erase(it);
}

}  // namespace gpupool
