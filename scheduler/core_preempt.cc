// Core: preemption and the reservations it makes (docs/tenancy.md).
//
// A pending task that does not fit may preempt when
//  * priority: its class may preempt, and the victims are of a lower priority value; or
//  * reclaim: its share group stays within its guarantee with the task, and the victims belong
//    to other groups that stay at or above their own guarantees without them (core_reclaim.cc);
//    of a class no higher than the task's first, of any class when those cannot make room.
// Victims must be preemptible (class, or the job's own `preemptible`), past their class's
// minimum runtime, not of a job this task was itself preempted by (no ping-pong), and within
// their group's disruption budget. placement::Engine::FindVictims picks the cheapest set on one
// node; on equal class values tasks started after their group's guarantee was full rank cheaper,
// so they go first. A victim of a gang takes its whole gang down (restarted whole). The victims'
// room is reserved: as each one stops its allocation stays committed in the engine for the
// reservation (core_reservations.cc).
#include <climits>

#include "base/log.h"
#include "placement/tentative.h"
#include "scheduler/core.h"
#include "scheduler/core_state.h"

namespace gpupool {
// One task running in `pool` as a victim FindVictims may choose (`borrowed` not set yet);
// `eligible` when it may be stopped now at all: preemptible, past its class's minimum runtime,
// and not committing, changing or stopping already.
PreemptionCandidate Core::State::CandidateOf(const std::string& pool, const TaskKey& key,
                                             int64_t now, bool* eligible) const {
  const JobEntry& j = jobs.at(key.first);
  const Task& rt = j.task(key.second);
  const TaskRecord& t = rt.rec;
  const PriorityClass* cls = ClassOf(j);
  int64_t since = t.started_us != 0 ? t.started_us : t.scheduled_us;
  int64_t runtime_us = std::max<int64_t>(0, now - since);
  bool preemptible = (cls != nullptr && cls->preemptible) || j.head.spec.preemptible;
  bool past_min = cls == nullptr || runtime_us >= cls->min_runtime_ms * 1000;
  PreemptionCandidate c;
  c.job_id = key.first;
  c.index = key.second;
  c.value = j.priority;
  c.group = book.GroupOf(pool, j.head.spec.tenant);
  if (j.head.spec.gang) {
    c.gang_size = 0;
    for (const Task& m : j.tasks) c.gang_size += m.holds ? 1 : 0;
  }
  c.task.task_id = TaskId(key.first, key.second);
  c.task.allocation = rt.allocation;
  c.task.work_lost = runtime_us / 1'000'000 * c.gang_size;  // seconds of work, whole gang
  *eligible = rt.holds && !rt.committing && !rt.changing && t.stop == StopIntent::kNone &&
              preemptible && past_min;
  return c;
}

QuotaAmount Core::State::ReclaimNeed(const JobEntry& job) const {
  QuotaAmount need = Estimate(job.request);
  if (job.request.shape == RequestShape::kWholeGpus) {
    // Its GPUs' TFLOPS and VRAM are known only once placed: count the largest the pool has, so
    // a tenant is never "within its guarantee" only because the estimate left them out (which
    // would let it reclaim, go beyond, and be reclaimed from in turn).
    if (const PoolEntry* pool =
            pools.contains(job.head.spec.pool) ? &pools.at(job.head.spec.pool) : nullptr) {
      need.resources.milli_tflops =
          pool->limits.largest_device.milli_tflops * job.request.gpu_count;
      need.resources.vram_mib = pool->limits.largest_device.vram_mib * job.request.gpu_count;
    }
  }
  return need;
}

int32_t Core::State::BudgetLeft(int64_t now, const std::string& group) {
  const int32_t budget = options.tenancy.disruption_budget_victims;
  if (budget <= 0) return INT32_MAX;
  const int64_t window_us = options.tenancy.disruption_budget_window_ms * 1000;
  std::deque<int64_t>& times = disruptions[group];
  while (!times.empty() && times.front() <= now - window_us) times.pop_front();
  return budget - static_cast<int32_t>(times.size());
}

std::vector<PreemptionCandidate> Core::State::Eligible(PassState& pass, const JobEntry& job,
                                                       const PreemptorRules& rules,
                                                       bool* budget_blocked) {
  std::set<int64_t> preempted_by;  // no ping-pong: never the jobs that preempted this one
  for (const Task& t : job.tasks) {
    preempted_by.insert(t.preempted_by.begin(), t.preempted_by.end());
    // the durable last one survives a restart
    if (!t.rec.preempted_by.empty()) preempted_by.insert(t.rec.preempted_by.job_id);
  }
  std::vector<PreemptionCandidate> out;
  for (const PreemptionCandidate& cached : PassCandidates(pass, job.head.spec.pool)) {
    if (cached.job_id == job.head.id || preempted_by.contains(cached.job_id)) continue;
    // Across groups only what a group can spare: no rule pushes another group below its
    // guarantee (core_reclaim.cc).
    const bool other = cached.group != rules.group;
    bool by_priority =
        rules.may_preempt && cached.value < job.priority && (!other || cached.reclaimable);
    bool by_reclaim = rules.reclaim && cached.reclaimable && other &&
                      (rules.any_class || cached.value <= job.priority);
    if (!by_priority && !by_reclaim) continue;
    PreemptionCandidate c = cached;
    if (BudgetLeft(pass.now, c.group) < c.gang_size) {
      *budget_blocked = true;
      continue;
    }
    // Doubled so that, on equal class values, borrowed capacity ranks cheaper. Every candidate
    // here is one the task may take, so FindVictims is given no threshold of its own.
    c.task.priority = 2 * c.value + (c.borrowed ? 0 : 1);
    out.push_back(std::move(c));
  }
  return out;
}

int64_t Core::State::NewReservation(PassState& pass, JobEntry& job, int32_t index,
                                    const placement::VictimSet& vs, bool gang) {
  Reservation r;
  r.pool = job.head.spec.pool;
  r.job_id = job.head.id;
  r.index = index;
  r.attempt = job.task(index).rec.attempt;
  r.allocation = vs.decision.allocation;
  r.created_us = pass.now;
  r.victims.insert(vs.task_ids.begin(), vs.task_ids.end());
  r.gang = gang;
  r.tenant = job.head.spec.tenant;
  r.quota = UsageOf(vs.decision.allocation);
  const int64_t rid = AddReservation(std::move(r));
  job.task(index).reservation = rid;
  pass.new_reservations.push_back(rid);
  return rid;
}

// The display text of a preemption: who, and by which rule.
std::string Core::State::PreemptionText(const JobEntry& job, int32_t index,
                                        const PreemptorRules& rules, const JobEntry& victim,
                                        const PreemptionCandidate& c, bool priority_rule) const {
  const std::string by =
      "preempted by task " + TaskId(job.head.id, index) + " of " + job.head.spec.tenant;
  if (priority_rule) {
    return by + " (rule priority: class " + job.head.spec.priority_class + " " +
           std::to_string(job.priority) + " > " + victim.head.spec.priority_class + " " +
           std::to_string(c.value) + ")";
  }
  return by + " (rule reclaim: " + rules.group + " is within its guarantee in pool " +
         job.head.spec.pool + ", " + c.group + " stays at or above its own)";
}

// The tasks that stop with task `index` of `victim`: itself, and for a gang every member that
// holds room and is not stopping yet (the gang is then placed again whole: restarting).
std::vector<int32_t> Core::State::StoppingWith(JobEntry& victim, int32_t index) {
  std::vector<int32_t> stopping{index};
  if (!victim.head.spec.gang) return stopping;
  victim.restarting = true;
  for (int32_t m = 0; m < victim.size(); ++m) {
    const Task& mrt = victim.task(m);
    if (m != index && mrt.holds && mrt.rec.stop == StopIntent::kNone) stopping.push_back(m);
  }
  return stopping;
}

// Plans the stop of one victim task `m` (stored with the pass's batch, sent after it): its stop
// intent and last preemption, its events, the metric and its group's disruption count.
void Core::State::PlanVictimStop(PassState& pass, const JobEntry& job, int32_t index,
                                 const VictimStop& v) {
  TaskRecord& t = v.victim->task(v.m).rec;
  Task& rt = v.victim->task(v.m);
  const bool first = v.m == v.c->index;
  pass.stops.push_back({v.victim->head.id, v.m, v.text, t, v.restarting_before, job.head.id});
  t.stop = StopIntent::kPreempt;
  t.preempted_by = Preemption{job.head.id, index,
                              v.priority_rule ? PreemptRule::kPriority : PreemptRule::kReclaim,
                              /*reserved=*/first};
  rt.reserved_for = first ? v.rid : 0;
  rt.stop_cause = v.text;
  rt.preempted_by.insert(job.head.id);
  t.reason = "stopping: " + v.text;  // display only; the facts are t.stop and t.preempted_by
  std::string tid = TaskId(v.victim->head.id, v.m);
  pass.batch.emplace_back(UpdateTask{t});
  const std::string& victim_tenant = v.victim->head.spec.tenant;
  pass.batch.emplace_back(
      AppendEvent{Event("task.preempted", "task/" + tid, v.text, victim_tenant)});
  pass.batch.emplace_back(
      AppendEvent{Event("task.preempted", "job/" + std::to_string(v.victim->head.id),
                        "task " + tid + ": " + v.text, victim_tenant)});
  if (metrics != nullptr) metrics->Preemption(v.priority_rule ? "priority" : "reclaim");
  if (options.tenancy.disruption_budget_victims > 0) {
    disruptions[v.c->group].push_back(pass.now);
  }
}

void Core::State::StopVictims(PassState& pass, JobEntry& job, int32_t index,
                              const PreemptorRules& rules, int64_t rid,
                              const std::vector<std::string>& ids,
                              const std::map<std::string, const PreemptionCandidate*>& by_id) {
  for (const std::string& id : ids) {
    const PreemptionCandidate& c = *by_id.at(id);
    JobEntry& victim = jobs.at(c.job_id);
    Task& first = victim.task(c.index);
    if (first.rec.stop != StopIntent::kNone) {
      // Stopping already (a gang sibling of an earlier victim): its room still comes to us.
      if (first.reserved_for == 0) first.reserved_for = rid;
      continue;
    }
    VictimStop v{&victim,           &c, 0, rules.may_preempt && c.value < job.priority, rid,
                 victim.restarting, {}};
    const std::string text = PreemptionText(job, index, rules, victim, c, v.priority_rule);
    for (int32_t m : StoppingWith(victim, c.index)) {
      v.m = m;
      v.text = m == c.index ? text : text + " (gang member of " + id + ")";
      PlanVictimStop(pass, job, index, v);
    }
  }
}

namespace {

std::string WaitingFor(const Reservation& r) {
  std::string ids;
  for (const std::string& v : r.victims) ids += (ids.empty() ? "" : ", ") + v;
  return "waiting for " + std::to_string(r.victims.size()) + " preempted task(s) to stop on " +
         r.allocation.node + ": " + ids;
}

}  // namespace

// Why the disruption budget forbids stopping `ids` now, or "".
std::string Core::State::OverBudget(
    int64_t now, const std::vector<std::string>& ids,
    const std::map<std::string, const PreemptionCandidate*>& by_id) {
  std::map<std::string, int32_t> per_group;
  std::set<int64_t> gangs;  // a gang counts once, whole
  for (const std::string& id : ids) {
    const PreemptionCandidate* c = by_id.at(id);
    if (c->gang_size > 1 && !gangs.insert(c->job_id).second) continue;
    per_group[c->group] += c->gang_size;
  }
  for (const auto& [g, n] : per_group) {
    if (n > BudgetLeft(now, g)) return "preemption held back by the disruption budget of " + g;
  }
  return "";
}

// The rules under which `job` may preempt with `need` more of its group's guarantee; false when
// neither rule lets it.
bool Core::State::RulesFor(const JobEntry& job, const QuotaAmount& need,
                           PreemptorRules* rules) const {
  const PriorityClass* cls = ClassOf(job);
  const std::string& pool_name = job.head.spec.pool;
  rules->may_preempt = cls != nullptr && cls->may_preempt;
  rules->reclaim = book.WithinGuarantee(pool_name, job.head.spec.tenant, need);
  if (!rules->may_preempt && !rules->reclaim) return false;
  rules->group = book.GroupOf(pool_name, job.head.spec.tenant);
  return true;
}

// True (and `members` wait, naming the binding quota) when the preemptor's chain would be over a
// limit holding `usage` once `victims` are gone: it does not preempt for room it could not take.
bool Core::State::OverLimitOnceRoomIsFree(
    JobEntry& job, const std::vector<int32_t>& members, const QuotaAmount& usage,
    const std::vector<std::string>& victims,
    const std::map<std::string, const PreemptionCandidate*>& by_id) {
  std::string binding;
  std::string over = PreemptorOverLimit(job, usage, victims, by_id, &binding);
  if (over.empty()) return false;
  Wait(job, members, "waiting: " + over, PendingVerdict{PendingCode::kOverQuota, binding, {}});
  return true;
}

// A pass remembers the shapes that found no victims, per priority, group (which other groups'
// tasks a task may take depends on its own group, by either rule) and rule.
std::pair<ShapeKey, std::string> Core::State::PreemptMemo(const JobEntry& job,
                                                          const PreemptorRules& rules,
                                                          const std::string& suffix) {
  return {ShapeKey{job.head.spec.pool, job.request},
          std::to_string(job.priority) + "/" + rules.group + (rules.reclaim ? "/reclaim" : "") +
              (rules.any_class ? "/any class" : "") + suffix};
}

// Whether the chosen victims `ids` may be stopped: some were found and the disruption budgets
// allow them. When not, the pass remembers it and `why` says whether a budget was the cause.
bool Core::State::VictimsAllowed(PassState& pass, const std::pair<ShapeKey, std::string>& memo,
                                 bool found, const std::vector<std::string>& ids,
                                 bool budget_blocked,
                                 const std::map<std::string, const PreemptionCandidate*>& by_id,
                                 std::string* why) {
  if (!found || ids.empty()) {
    pass.preempt_failed.insert(memo);
    if (budget_blocked) *why = "preemption held back by a disruption budget";
    return false;
  }
  if (std::string over = OverBudget(pass.now, ids, by_id); !over.empty()) {
    pass.preempt_failed.insert(memo);
    *why = over;
    return false;
  }
  return true;
}

// Reclaim searches in two rounds: victims of classes up to the task's own first and, only when
// they cannot make room, of any preemptible class (a group above its guarantee lends what it
// holds beyond it whatever the class of the tasks that hold it). The second round is skipped
// when no candidate is of a higher class than the task's: it would find nothing new.
bool Core::State::InRounds(PreemptorRules& rules, const std::function<Preempted()>& round) {
  const int rounds = rules.reclaim ? 2 : 1;
  for (int r = 0; r < rounds; ++r) {
    rules.any_class = r == 1;
    switch (round()) {
      case Preempted::kYes:
        return true;
      case Preempted::kWaits:
        return false;
      case Preempted::kNo:
        break;
    }
  }
  return false;
}

bool Core::State::SkipRound(PassState& pass, const JobEntry& job, const PreemptorRules& rules,
                            const std::pair<ShapeKey, std::string>& memo,
                            const std::vector<PreemptionCandidate>& candidates) {
  if (!rules.any_class) return false;
  for (const PreemptionCandidate& c : candidates) {
    if (c.value > job.priority) return false;
  }
  pass.preempt_failed.insert(memo);
  return true;
}

Core::State::Preempted Core::State::PreemptRound(PassState& pass, PoolEntry& pool, JobEntry& job,
                                                 int32_t index, const placement::Request& req,
                                                 const PreemptorRules& rules, std::string* why) {
  std::pair<ShapeKey, std::string> memo = PreemptMemo(job, rules, "");
  if (pass.preempt_failed.contains(memo)) return Preempted::kNo;
  bool budget_blocked = false;
  std::vector<PreemptionCandidate> candidates = Eligible(pass, job, rules, &budget_blocked);
  if (SkipRound(pass, job, rules, memo, candidates)) return Preempted::kNo;
  std::vector<placement::RunningTask> running;
  std::map<std::string, const PreemptionCandidate*> by_id;
  for (const PreemptionCandidate& c : candidates) {
    by_id[c.task.task_id] = &c;
    running.push_back(c.task);
  }
  placement::VictimSet vs;
  {
    placement::Tentative future(*pool.engine);  // rolled back: the search only looks
    ReservedFuture(future, job.head.spec.pool);
    vs = pool.engine->FindVictims(req, INT32_MAX, running);
  }
  if (vs.found && !vs.task_ids.empty()) {
    vs.found = RoomNowWithout(pool, vs.task_ids, by_id, {vs.decision.allocation}) &&
               ReclaimSparesGroups(pass, job, rules, vs.task_ids, by_id);
  }
  if (!VictimsAllowed(pass, memo, vs.found, vs.task_ids, budget_blocked, by_id, why))
    return Preempted::kNo;
  if (OverLimitOnceRoomIsFree(job, {index}, UsageOf(vs.decision.allocation), vs.task_ids, by_id))
    return Preempted::kWaits;
  int64_t rid = NewReservation(pass, job, index, vs, /*gang=*/false);
  StopVictims(pass, job, index, rules, rid, vs.task_ids, by_id);
  const Reservation& r = *reservations.Find(rid);
  job.task(index).rec.reason = WaitingFor(r);
  job.task(index).rec.pending = {PendingCode::kWaitingForVictims, "", {}};
  LogInfo("core", "preempting",
          {{"task", TaskId(job.head.id, index)},
           {"node", r.allocation.node},
           {"victims", std::to_string(r.victims.size())}});
  return Preempted::kYes;
}

bool Core::State::TryPreempt(PassState& pass, JobEntry& job, int32_t index,
                             const placement::Request& req, std::string* why) {
  PreemptorRules rules;
  PoolEntry* pool = FindPool(job.head.spec.pool);
  if (!RulesFor(job, ReclaimNeed(job), &rules) || pool == nullptr) return false;
  return InRounds(rules, [&] { return PreemptRound(pass, *pool, job, index, req, rules, why); });
}

// Victims for each of `count` gang members in turn, as if the earlier members were placed and
// their victims gone (tentative engine changes, undone in reverse before returning). True when
// every member found room; `sets` holds each member's set, `chosen` every victim.
bool Core::State::GangVictims(PoolEntry& pool, const placement::Request& req, int32_t priority,
                              size_t count, const std::vector<PreemptionCandidate>& candidates,
                              const std::map<std::string, const PreemptionCandidate*>& by_id,
                              std::vector<placement::VictimSet>* sets,
                              std::set<std::string>* chosen) {
  placement::Tentative tx(*pool.engine);
  bool ok = true;
  for (size_t k = 0; k < count && ok; ++k) {
    std::vector<placement::RunningTask> running;
    for (const PreemptionCandidate& c : candidates) {
      if (!chosen->contains(c.task.task_id)) running.push_back(c.task);
    }
    placement::VictimSet vs = pool.engine->FindVictims(req, priority, running);
    ok = vs.found;
    for (size_t v = 0; ok && v < vs.task_ids.size(); ++v) {
      const placement::Allocation& a = by_id.at(vs.task_ids[v])->task.allocation;
      ok = tx.Release(a).ok();
      chosen->insert(vs.task_ids[v]);
    }
    if (ok) ok = tx.Commit(vs.decision.allocation).ok();
    if (ok) sets->push_back(std::move(vs));
  }
  if (Status st = tx.Rollback(); !st.ok())
    LogError("core", "undo of a tentative gang placement failed", {{"error", st.ToString()}});
  return ok;
}

// A gang that does not fit: victims for every member (GangVictims). All or nothing.
Core::State::Preempted Core::State::PreemptGangRound(
    PassState& pass, PoolEntry& pool, JobEntry& job, const std::vector<int32_t>& members,
    const placement::Request& req, const PreemptorRules& rules, std::string* why) {
  std::pair<ShapeKey, std::string> memo =
      PreemptMemo(job, rules, "/gang of " + std::to_string(members.size()));
  if (pass.preempt_failed.contains(memo)) return Preempted::kNo;
  bool budget_blocked = false;
  std::vector<PreemptionCandidate> candidates = Eligible(pass, job, rules, &budget_blocked);
  if (SkipRound(pass, job, rules, memo, candidates)) return Preempted::kNo;
  std::map<std::string, const PreemptionCandidate*> by_id;
  for (const PreemptionCandidate& c : candidates) by_id[c.task.task_id] = &c;
  std::vector<placement::VictimSet> sets;
  std::set<std::string> chosen;
  bool ok = false;
  {
    placement::Tentative future(*pool.engine);  // rolled back: the search only looks
    ReservedFuture(future, job.head.spec.pool);
    ok = GangVictims(pool, req, INT32_MAX, members.size(), candidates, by_id, &sets, &chosen);
  }
  std::vector<std::string> ids(chosen.begin(), chosen.end());
  std::vector<placement::Allocation> rooms;
  QuotaAmount usage;
  for (const placement::VictimSet& vs : sets) {
    rooms.push_back(vs.decision.allocation);
    usage += UsageOf(vs.decision.allocation);
  }
  if (ok) {
    ok = RoomNowWithout(pool, ids, by_id, rooms) &&
         ReclaimSparesGroups(pass, job, rules, ids, by_id);
  }
  if (!VictimsAllowed(pass, memo, ok, ids, budget_blocked, by_id, why)) return Preempted::kNo;
  if (OverLimitOnceRoomIsFree(job, members, usage, ids, by_id)) return Preempted::kWaits;
  for (size_t k = 0; k < members.size(); ++k) {
    int64_t rid = NewReservation(pass, job, members[k], sets[k], /*gang=*/true);
    StopVictims(pass, job, members[k], rules, rid, sets[k].task_ids, by_id);
  }
  Wait(job, members,
       "gang of " + std::to_string(members.size()) + " waiting for " + std::to_string(ids.size()) +
           " preempted task(s) to stop",
       {PendingCode::kWaitingForVictims, "", {}});
  LogInfo("core", "preempting for a gang",
          {{"job", std::to_string(job.head.id)}, {"victims", std::to_string(ids.size())}});
  return Preempted::kYes;
}

bool Core::State::TryPreemptGang(PassState& pass, JobEntry& job,
                                 const std::vector<int32_t>& members, const placement::Request& req,
                                 std::string* why) {
  QuotaAmount one = ReclaimNeed(job), all;
  for (size_t k = 0; k < members.size(); ++k) all += one;
  PreemptorRules rules;
  PoolEntry* pool = FindPool(job.head.spec.pool);
  if (!RulesFor(job, all, &rules) || pool == nullptr || members.empty()) return false;
  return InRounds(rules,
                  [&] { return PreemptGangRound(pass, *pool, job, members, req, rules, why); });
}

// After the pass's batch is stored: the victims' stops go out (act), and only then. If the store
// refused it, nothing was sent: the victims run on as if never chosen and the room is not kept.
void Core::State::ActOnStops(const Status& stored, const std::vector<PassState::Stop>& stops,
                             const std::vector<int64_t>& new_reservations) {
  auto still_stopping = [&](const PassState::Stop& s) -> JobEntry* {
    JobEntry* victim = jobs.Find(s.job_id);
    if (victim == nullptr) return nullptr;
    const TaskRecord& t = victim->task(s.index).rec;
    return t.attempt == s.before.attempt && t.stop == StopIntent::kPreempt ? victim : nullptr;
  };
  if (stored.ok()) {
    for (const PassState::Stop& s : stops) {
      if (JobEntry* victim = still_stopping(s)) {
        dispatcher.Stop(*victim, s.index, s.reason);
        Notify(*victim, "task " + TaskId(s.job_id, s.index) + ": preempted: " + s.reason);
      }
    }
    return;
  }
  for (auto it = stops.rbegin(); it != stops.rend(); ++it) {  // undone in reverse
    JobEntry* victim = still_stopping(*it);
    if (victim == nullptr) continue;
    TaskRecord& t = victim->task(it->index).rec;
    Task& rt = victim->task(it->index);
    t.stop = it->before.stop;
    t.preempted_by = it->before.preempted_by;
    t.reason = it->before.reason;
    rt.stop_cause.clear();
    rt.reserved_for = 0;
    rt.preempted_by.erase(it->preemptor_job);
    victim->restarting = it->restarting_before;
  }
  for (int64_t rid : new_reservations) DropReservation(rid, "preemption not stored");
  if (!stops.empty()) {
    LogWarn("core", "preemption not stored; no victim was stopped",
            {{"victims", std::to_string(stops.size())}, {"error", stored.ToString()}});
  }
}

}  // namespace gpupool
