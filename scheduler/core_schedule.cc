// Core: the scheduling pass, dispatch, and the end of a task's attempt.
#include <algorithm>
#include <chrono>
#include <queue>

#include "base/log.h"
#include "placement/tentative.h"
#include "scheduler/core.h"
#include "scheduler/core_state.h"
#include "scheduler/pool_workload.h"

namespace gpupool {
namespace {

std::string WhyNotPlaced(const placement::Decision& d) {
  std::string why = "waiting for capacity";
  if (!d.rejection_counts.empty()) {
    why += ": ";
    bool first = true;
    for (const auto& [kind, count] : d.rejection_counts) {
      why += (first ? "" : ", ") + std::to_string(count) + " node(s) short of " + kind;
      first = false;
    }
  }
  if (!d.rejections.empty())
    why += " (e.g. " + d.rejections.front().node + ": " + d.rejections.front().reason + ")";
  return why;
}

// When every node of the pool refused `d` for a capability (shared work on nodes that cannot
// enforce what the pool requires), the missing capabilities, "vram_cap, compute_share"; else "".
// Those every node lacks are named first; failing that, those some node lacks.
std::string MissingCapabilities(const placement::Decision& d, const PoolEntry& pool,
                                const std::map<std::string, NodeEntry>& nodes) {
  if (d.rejection_counts.empty()) return "";
  for (const auto& [kind, count] : d.rejection_counts) {
    if (count > 0 && kind != "capability") return "";
  }
  CapabilityMask any = 0, all = ~CapabilityMask{0};
  for (const std::string& name : pool.nodes) {
    auto it = nodes.find(name);
    if (it == nodes.end()) continue;
    const CapabilityMask caps = EnforcedCapabilities(it->second.rec);
    any |= caps;
    all &= caps;
  }
  const CapabilityMask required = pool.engine->policy().shared_requires;
  const CapabilityMask missing = (required & ~any) != 0 ? required & ~any : required & ~all;
  return CapabilityList(missing);
}

// A verdict the scheduler gives (quota, reservation, preemption); with `d`, placement's verdict
// on that decision (its node counts per reason) under `code`.
PendingVerdict Verdict(PendingCode code, std::string binding = {},
                       const placement::Decision* d = nullptr) {
  PendingVerdict v = d != nullptr ? placement::VerdictOf(*d, code) : PendingVerdict{code, {}, {}};
  v.code = code;
  v.binding = std::move(binding);
  return v;
}

std::vector<Allocation> ToRecord(const placement::Allocation& a) {
  std::vector<Allocation> out;
  for (const placement::Grant& g : a.grants) {
    out.push_back(Allocation{g.device_id, g.amount, g.slots, g.exclusive});
  }
  return out;
}

QuotaAmount Times(const QuotaAmount& a, int32_t n) {
  QuotaAmount out;
  out.resources.milli_tflops = a.resources.milli_tflops * n;
  out.resources.vram_mib = a.resources.vram_mib * n;
  out.devices = a.devices * n;
  return out;
}

}  // namespace

void Core::State::Reserve(PassState& pass, JobEntry& job, int32_t i,
                          const placement::Allocation& a) {
  TaskRecord& t = job.task(i).rec;
  Task& rt = job.task(i);
  rt.allocation = a;
  rt.holds = true;
  rt.committing = true;
  ++running;
  Charge(job, i);
  queue.Remove(job, i);
  t.state = TaskState::kScheduled;
  t.node = a.node;
  t.allocations = ToRecord(a);
  t.scheduled_us = pass.now;
  t.reason = "placed on " + a.node;
  t.pending = {};
  jobs.Reindex(job, i);
  pass.batch.emplace_back(UpdateTask{t});
  pass.placed.push_back({job.head.id, i, t.attempt});
  NotePlaced(pass, job);  // starvation reservations (core_starvation.cc)
}

// Sets why `members` of `job` wait (display text and verdict).
void Core::State::Wait(JobEntry& job, const std::vector<int32_t>& members, const std::string& why,
                       const PendingVerdict& verdict) {
  for (int32_t i : members) {
    job.task(i).rec.reason = why;
    job.task(i).rec.pending = verdict;
  }
}

// True (and `members` wait, naming the binding quota) when `amount` more would exceed a limit of
// the job's tenant chain.
bool Core::State::WaitOverQuota(JobEntry& job, const std::vector<int32_t>& members,
                                const QuotaAmount& amount) {
  std::string binding;
  std::string why = book.WhyOverLimit(job.head.spec.pool, job.head.spec.tenant, amount, &binding);
  if (why.empty()) return false;
  Wait(job, members, "waiting: " + why, Verdict(PendingCode::kOverQuota, binding));
  return true;
}

// A gang that does not fit whole waits, and may preempt for all of its members at once.
void Core::State::GangDoesNotFit(PassState& pass, JobEntry& job,
                                 const std::vector<int32_t>& members, const placement::Request& req,
                                 const placement::Engine::GangResult& g,
                                 const std::string& behind) {
  Wait(job, members,
       "gang of " + std::to_string(members.size()) + " waiting: task " +
           std::to_string(g.failed_index) + " does not fit; " + WhyNotPlaced(g.failed) + behind,
       Verdict(PendingCode::kGangWaiting, "", &g.failed));
  std::string held_back;
  if (!TryPreemptGang(pass, job, members, req, &held_back) && !held_back.empty()) {
    Wait(job, members, job.task(members.front()).rec.reason + "; " + held_back,
         Verdict(PendingCode::kDisruptionBudget, "", &g.failed));
  }
}

// All or nothing: commits every member, then makes sure no reserved room was taken; rolled back
// (the members wait) if either fails.
void Core::State::CommitGang(PassState& pass, JobEntry& job, PoolEntry& pool,
                             const std::vector<int32_t>& members,
                             const std::vector<placement::Allocation>& allocations) {
  placement::Tentative tx(*pool.engine);
  Status st;
  for (size_t k = 0; k < members.size() && st.ok(); ++k) st = tx.Commit(allocations[k]);
  for (size_t k = 0; st.ok() && !reservations.empty() && k < members.size(); ++k) {
    if (!ReservationsFit(pool, allocations[k].node)) {
      st = Status::FailedPrecondition("room on " + allocations[k].node +
                                      " is reserved for a preempting task");
    }
  }
  if (!st.ok()) {
    (void)tx.Rollback();
    return Wait(job, members,
                "gang of " + std::to_string(members.size()) + " waiting: " + st.message(),
                Verdict(PendingCode::kReserved));
  }
  tx.Keep();
  for (size_t k = 0; k < members.size(); ++k) Reserve(pass, job, members[k], allocations[k]);
}

// Places every pending member of a gang at once, or preempts for all of them, or says why not.
void Core::State::PlaceGang(PassState& pass, JobEntry& job, PoolEntry& pool,
                            const placement::Request& req, const std::string& behind) {
  std::vector<int32_t> members;
  bool active = false;
  for (int32_t i = 0; i < job.size(); ++i) {
    TaskState st = job.task(i).rec.state;
    if (st == TaskState::kPending) members.push_back(i);
    active |= st == TaskState::kScheduled || st == TaskState::kRunning;
  }
  if (job.restarting && active) {
    return Wait(job, members, "gang restarting: waiting for its preempted members to stop",
                Verdict(PendingCode::kGangRestarting));
  }
  job.restarting = false;
  auto n = static_cast<int32_t>(members.size());
  if (WaitOverQuota(job, members, Times(Estimate(job.request), n))) return;
  std::vector<placement::Request> reqs(members.size(), req);
  std::string held;  // by a starvation reservation (core_starvation.cc)
  placement::Engine::GangResult g = PlaceGangAround(pool, job, reqs, &held);
  if (!g.placed && !held.empty()) {
    return Wait(job, members, "gang of " + std::to_string(n) + " waiting: " + held + behind,
                Verdict(PendingCode::kReserved));
  }
  if (!g.placed) {
    GangDoesNotFit(pass, job, members, req, g, behind);
    return NoteStarving(pass, job, members.front());
  }
  QuotaAmount total;
  for (const placement::Allocation& a : g.allocations) total += UsageOf(a);
  if (WaitOverQuota(job, members, total)) return;
  CommitGang(pass, job, pool, members, g.allocations);
}

// True when the task preempted and its victims still stop: it waits for them (the reason says
// which), or for its gang's. A reservation that is gone is forgotten.
bool Core::State::WaitsForVictims(JobEntry& job, int32_t index) {
  Task& rt = job.task(index);
  if (rt.reservation == 0) return false;
  if (const Reservation* res = reservations.Find(rt.reservation); res != nullptr) {
    if (res->gang) return true;  // the gang's reason was set when it preempted
    std::string ids;
    for (const std::string& v : res->victims) ids += (ids.empty() ? "" : ", ") + v;
    rt.rec.reason = "waiting for " + std::to_string(res->victims.size()) +
                    " preempted task(s) to stop on " + res->allocation.node + ": " + ids;
    rt.rec.pending = Verdict(PendingCode::kWaitingForVictims);
    return true;
  }
  rt.reservation = 0;
  return false;
}

// Keeps a fresh placement of one task: within quota, committed in the engine, and not into room
// reserved for a preemptor. Otherwise the task waits and the engine is as before.
void Core::State::KeepPlacement(PassState& pass, JobEntry& job, int32_t index, PoolEntry& pool,
                                const placement::Allocation& a, const std::string& behind) {
  TaskRecord& task = job.task(index).rec;
  if (WaitOverQuota(job, {index}, UsageOf(a))) return;
  placement::Tentative tx(*pool.engine);
  if (Status st = tx.Commit(a); !st.ok()) {
    LogError("core", "commit of a fresh decision failed", {{"error", st.ToString()}});
    return;
  }
  if (!reservations.empty() && !ReservationsFit(pool, a.node)) {
    // The free part of a preemptor's room: not for this task (rolled back on return).
    task.reason = "waiting: room on " + a.node + " is reserved for a preempting task" + behind;
    task.pending = Verdict(PendingCode::kReserved);
    return;
  }
  tx.Keep();
  Reserve(pass, job, index, a);
}

// One task that does not fit now: it may preempt; if a disruption budget holds that back, the
// verdict says so.
void Core::State::PreemptOrWait(PassState& pass, JobEntry& job, int32_t index,
                                const placement::Request& req) {
  std::string why;
  if (TryPreempt(pass, job, index, req, &why)) return;
  if (!why.empty()) {
    TaskRecord& task = job.task(index).rec;
    task.reason += "; " + why;
    task.pending.code = PendingCode::kDisruptionBudget;
  }
}

// Places one pending task (or, for a gang, every pending member), or says why it waits.
void Core::State::TryPlace(PassState& pass, JobEntry& job, int32_t index) {
  PoolEntry* pool = FindPool(job.head.spec.pool);
  if (pool == nullptr || job.cancel_storing || CancelRequested(job.head.state)) return;
  TaskRecord& task = job.task(index).rec;
  std::string behind;
  if (int32_t n = pass.behind[job.head.spec.pool]; n > 0) {
    behind = "; behind " + std::to_string(n) + " task(s) of higher priority";
  }
  if (WaitsForVictims(job, index) || BacksOff(pass, job, index)) return;
  ShapeKey shape{job.head.spec.pool, job.request};
  placement::Request req = ToPlacement(job.request);
  // Cold start: among placements packing cannot tell apart, a node holding more of the image.
  if (!job.head.spec.gang && !job.head.spec.task_template.image.empty()) {
    req.warm = images.WarmFor(job.head.spec.task_template.image);
  }
  FeedEngine(*pool);
  if (job.head.spec.gang) {
    if (pass.gangs_tried.insert(job.head.id).second) PlaceGang(pass, job, *pool, req, behind);
    return;
  }
  if (WaitOverQuota(job, {index}, Estimate(job.request))) return;
  if (auto known = pass.failed.find(shape);
      known != pass.failed.end() && !ReservesForStarving(job, index)) {
    // The same shape found no room earlier in this pass, and nothing was released since.
    task.reason = known->second.first + behind;
    task.pending = known->second.second;
  } else {
    std::string held;  // by a starvation reservation (core_starvation.cc)
    placement::Decision d = PlaceAround(*pool, job, index, req, &held);
    if (d.placed) return KeepPlacement(pass, job, index, *pool, d.allocation, behind);
    if (!held.empty()) {
      task.reason = "waiting: " + held + behind;
      task.pending = Verdict(PendingCode::kReserved);
      return;
    }
    std::string why = WhyNotPlaced(d);
    task.pending = Verdict(PendingCode::kNoCapacity, "", &d);
    if (std::string missing = MissingCapabilities(d, *pool, nodes); !missing.empty()) {
      why = "waiting for a node that enforces " + missing + " (pool " + pool->rec.name +
            " requires it for shared work)";
      task.pending = Verdict(PendingCode::kMissingCapability, missing, &d);
    }
    pass.failed.emplace(shape, std::make_pair(why, task.pending));
    task.reason = why + behind;
  }
  PreemptOrWait(pass, job, index, req);
  NoteStarving(pass, job, index);
  if (job.request.shape == RequestShape::kMig && task.pending.code == PendingCode::kNoCapacity)
    ++pass.mig_waiting[pool->rec.name][job.request.mig_profile];
}

// Priority levels high to low; within one, the level's fair-share queues merged by the queue
// order (fair share by default: the tenants' shares, recomputed as placements add usage).
void Core::State::RunQueues(PassState& pass) {
  queue.Walk(
      jobs, *order, options.max_tasks_per_pass,
      [&](const FairKey& key) { return ShareOf(pass, key); },
      [&](JobEntry& job, int32_t index) { TryPlace(pass, job, index); }, &pass.behind);
}

bool Core::State::PeriodicPassDue() const {
  // Below this a pass is cheap enough to run on every tick (and tests stay deterministic).
  constexpr auto kCheap = std::chrono::milliseconds(2);
  if (!options.throttle_periodic_passes || last_full_pass_cost < kCheap) return true;
  return std::chrono::steady_clock::now() - last_full_pass_end >= 50 * last_full_pass_cost;
}

void Core::State::RecordPassCost(bool full, std::chrono::steady_clock::time_point started) {
  auto ended = std::chrono::steady_clock::now();
  if (full) {
    last_full_pass_end = ended;
    last_full_pass_cost = ended - started;
  }
  if (metrics != nullptr)
    metrics->PassDuration(std::chrono::duration<double>(ended - started).count());
}

void Core::Schedule() {
  GPUPOOL_DCHECK_ON_THREAD(s_->thread);
  s_->full_pass_needed = true;
  RunPass();
}

void Core::RunPass() {
  GPUPOOL_DCHECK_ON_THREAD(s_->thread);
  s_->schedule_posted = false;
  bool full = s_->full_pass_needed || !s_->reservations.empty();
  s_->full_pass_needed = false;
  if (full || (s_->queue.empty() && s_->reservations.empty())) s_->queue.ForgetFresh();
  if (s_->queue.empty() && s_->reservations.empty()) return;
  auto started = std::chrono::steady_clock::now();
  PassState pass;
  pass.now = s_->clock->NowMicros();
  s_->ProcessReservations(pass);  // first, and even with nothing pending: stale ones let go
  s_->ProcessStarvation(pass, false);

  if (full) {
    s_->RunQueues(pass);
  } else {
    s_->queue.WalkFresh(s_->jobs,
                        [&](JobEntry& job, int32_t index) { s_->TryPlace(pass, job, index); });
  }
  s_->ProcessStarvation(pass, full);  // reserves for what found no room (full passes only)
  if (full) s_->mig_waiting = std::move(pass.mig_waiting);  // core_mig_layouts.cc

  s_->RecordPassCost(full, started);
  if (pass.batch.empty()) return;
  // Refresh job states inside the same commit.
  std::set<int64_t> touched;
  for (const PassState::Placed& p : pass.placed) touched.insert(p.job_id);
  for (int64_t id : touched) {
    JobEntry& job = s_->jobs.at(id);
    if (s_->RefreshJobState(job))
      pass.batch.emplace_back(UpdateJob{id, job.head.state, job.head.reason, 0});
  }

  s_->Persist(std::move(pass.batch),
              [this, placed = std::move(pass.placed), stops = std::move(pass.stops),
               reservations = std::move(pass.new_reservations)](Status st) {
                s_->ActOnStops(st, stops, reservations);
                for (const PassState::Placed& p : placed) s_->ActOnPlaced(this, st, p);
                if (!st.ok())
                  LogWarn("core", "scheduling commit failed", {{"error", st.ToString()}});
              });
}

// One placement of a pass, once its batch was stored (start it) or refused (queue it again).
void Core::State::ActOnPlaced(Core* core, const Status& st, const PassState::Placed& p) {
  JobEntry* job = jobs.Find(p.job_id);
  if (job == nullptr) return;
  Task& rt = job->task(p.index);
  TaskRecord& t = rt.rec;
  if (t.attempt != p.attempt || !rt.committing) return;  // moved on meanwhile
  rt.committing = false;
  if (!st.ok()) {
    // Nothing was dispatched: give the reservation back and try again later.
    ReleaseTask(*job, p.index);
    t.state = TaskState::kPending;
    t.node.clear();
    t.allocations.clear();
    t.scheduled_us = 0;
    jobs.Reindex(*job, p.index);
    t.reason = "requeued: allocation not stored: " + st.message();
    t.pending = Verdict(PendingCode::kQueued);
    if (!CancelRequested(job->head.state)) queue.Add(*job, p.index);
    RefreshJobState(*job);  // back to what the store still holds
    return;
  }
  if (metrics != nullptr) {
    metrics->TaskTransition("SCHEDULED");
    metrics->SchedulingLatency(static_cast<double>(clock->NowMicros() - job->head.submit_us) / 1e6);
  }
  if (t.stop == StopIntent::kCancel || CancelRequested(job->head.state)) {
    // Cancelled while the commit was in flight: never start it.
    CommitTaskChanges(
        core, {PlanFinish(*job, p.index, TaskState::kCancelled, "cancelled before start", 0)});
    return;
  }
  dispatcher.Start(*job, p.index);
  Notify(*job, "task " + TaskId(p.job_id, p.index) + ": SCHEDULED on " + t.node);
}

}  // namespace gpupool
