// Core: starvation reservations — nodes drained for big work that has waited too long
// (docs/tenancy.md, "Starvation reservations"; the book: scheduler/starvation_book.h).
//
// A pending task, or a whole gang, that has found no room for
// `tenancy.starvation_reserve_after_ms` while smaller work was placed in its pool (it is passed
// over for its size; one passed over only by work its own size or bigger is merely queued, and
// priority and fair share decide its turn) gets nodes reserved for it: those likely to drain
// soonest that could host it once empty. Run times are unknown, so a node's drain time is
// estimated by its oldest occupant's running time (for heavy-tailed run times the expected time
// left grows with the time run — a service's first replica, up for days, is not leaving), ties
// by the GPU share held, then the name. While the
// reservation stands, a placement for any other task avoids those nodes
// (placement::Engine::PlaceAvoiding: the engine is not changed, so no cached score goes stale); a
// task of a higher class than the reserver's may still land there, but only when nothing else fits.
// So the nodes drain as their tasks end, and the waiting work — placed like any task, the reserved
// nodes open to it — starts. Preemption is unchanged.
//
// Bounded: at most `tenancy.starvation_max_reservations` per pool, the longest waiting first;
// a reservation is dropped when its task starts (or moves on), is cancelled, a node of it stops
// being ready, or it outlives `tenancy.starvation_reservation_timeout_ms` — the task then
// reserves again only after another `starvation_reserve_after_ms`.
//
// Memory only, rebuilt deterministically: after a restart the first full pass finds the same
// tasks waiting (a first attempt waits since its job's stored submit time) and, on the same
// pool, reserves the same nodes. Only a requeued task's wait (and a timed-out task's cool-down)
// starts over at the restart.
#include <algorithm>
#include <set>
#include <tuple>
#include <utility>

#include "base/log.h"
#include "scheduler/core.h"
#include "scheduler/core_state.h"

namespace gpupool {

namespace {

// The key a task reserves under: a gang reserves as one.
StarvingKey KeyOf(const JobEntry& job, int32_t index) {
  return {job.head.id, job.head.spec.gang ? -1 : index};
}

std::string Whose(const StarvingKey& key) {
  return key.second < 0 ? "gang " + std::to_string(key.first) : TaskId(key.first, key.second);
}

std::string Joined(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

// The nodes other tasks reserved in `pool`, split by whether `job` may use them when nothing
// else fits (reserved for a lower class: `soft`) or never (`hard`).
void ReservedFor(const StarvationBook& book, const std::string& pool, const JobEntry& job,
                 const StarvingKey& own, std::vector<std::string>* hard,
                 std::vector<std::string>* soft) {
  for (const auto& [key, r] : book.by_key()) {
    if (key == own || r.pool != pool) continue;
    std::vector<std::string>* to = r.priority < job.priority ? soft : hard;
    to->insert(to->end(), r.nodes.begin(), r.nodes.end());
  }
}

std::vector<std::string> Both(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// What holds a task back that only `node` would take.
std::string HeldText(const StarvationBook& book, const std::string& node) {
  const StarvationReservation* r = book.HolderOf(node);
  if (r == nullptr) return "room on " + node + " is reserved for a starving task";
  return "room on " + node + " is reserved for starving " +
         (r->key.second < 0 ? "gang " + std::to_string(r->key.first)
                            : "task " + TaskId(r->key.first, r->key.second)) +
         " (its nodes drain for it)";
}

}  // namespace

bool Core::State::ReservesForStarving(const JobEntry& job, int32_t index) const {
  return !starvation.empty() && starvation.Find(KeyOf(job, index)) != nullptr;
}

placement::Decision Core::State::PlaceAround(PoolEntry& pool, const JobEntry& job, int32_t index,
                                             const placement::Request& req, std::string* held) {
  if (starvation.empty()) return pool.engine->Place(req);
  std::vector<std::string> hard, soft;
  ReservedFor(starvation, pool.rec.name, job, KeyOf(job, index), &hard, &soft);
  if (hard.empty() && soft.empty()) return pool.engine->Place(req);
  placement::Decision d = pool.engine->PlaceAvoiding(req, Both(hard, soft));
  if (d.placed) return d;
  if (!soft.empty()) {  // a higher class: a lower class's reserved node rather than nothing
    placement::Decision f = pool.engine->PlaceAvoiding(req, hard, {.explain = false});
    if (f.placed) return f;
  }
  placement::Decision open = pool.engine->Place(req);  // is a reservation what holds it back?
  if (!open.placed) return open;                       // no: placement's own reasons
  *held = HeldText(starvation, open.allocation.node);
  return d;
}

placement::Engine::GangResult Core::State::PlaceGangAround(
    PoolEntry& pool, const JobEntry& job, const std::vector<placement::Request>& reqs,
    std::string* held) {
  if (starvation.empty()) return pool.engine->PlaceGang(reqs);
  std::vector<std::string> hard, soft;
  ReservedFor(starvation, pool.rec.name, job, KeyOf(job, 0), &hard, &soft);
  if (hard.empty() && soft.empty()) return pool.engine->PlaceGang(reqs);
  placement::Engine::GangResult g = pool.engine->PlaceGangAvoiding(reqs, Both(hard, soft));
  if (g.placed) return g;
  if (!soft.empty()) {
    placement::Engine::GangResult f = pool.engine->PlaceGangAvoiding(reqs, hard);
    if (f.placed) return f;
  }
  placement::Engine::GangResult open = pool.engine->PlaceGang(reqs);
  if (!open.placed) return open;
  for (const placement::Allocation& a : open.allocations) {
    if (starvation.HolderOf(a.node) != nullptr) {
      *held = HeldText(starvation, a.node);
      break;
    }
  }
  if (held->empty()) *held = "room is reserved for a starving task";
  return g;
}

void Core::State::NoteStarving(PassState& pass, JobEntry& job, int32_t index) {
  if (options.tenancy.starvation_reserve_after_ms <= 0) return;
  const Task& rt = job.task(index);
  const PendingCode code = rt.rec.pending.code;
  if (rt.reservation != 0 ||
      (code != PendingCode::kNoCapacity && code != PendingCode::kGangWaiting &&
       code != PendingCode::kDisruptionBudget)) {
    return;  // waits for victims, or for something other than room
  }
  const StarvingKey key = KeyOf(job, index);
  pass.starving.emplace(key, index);
  (void)WaitingSince(job, index, key);  // its wait as a requeued attempt starts here
  const StarvationReservation* r = starvation.Find(key);
  if (r == nullptr) return;
  const std::string note = "; starvation reservation: " + Joined(r->nodes) +
                           " drain for it (reserved " +
                           std::to_string((pass.now - r->created_us) / 1'000'000) + " s ago)";
  for (int32_t i = 0; i < job.size(); ++i) {
    if ((i == index || key.second < 0) && job.task(i).rec.state == TaskState::kPending)
      job.task(i).rec.reason += note;
  }
}

int64_t Core::State::WaitingSince(const JobEntry& job, int32_t index, const StarvingKey& key) {
  const TaskRecord& t = job.task(index).rec;
  if (t.attempt == 0) return job.head.submit_us;  // stored: the same after a restart
  return starvation.first_seen.emplace(std::make_pair(key, t.attempt), clock->NowMicros())
      .first->second;
}

// Why `r` no longer stands, as its metrics event, or "" while it does.
std::string Core::State::StaleStarvation(const StarvationReservation& r, int64_t now) const {
  const JobEntry* job = jobs.Find(r.key.first);
  if (job == nullptr || job->cancel_storing || CancelRequested(job->head.state)) return "cancelled";
  bool pending = false;
  for (int32_t i = 0; i < job->size(); ++i) {
    const TaskRecord& t = job->task(i).rec;
    if (r.key.second >= 0 && (i != r.key.second || t.attempt != r.attempt)) continue;
    pending |= t.state == TaskState::kPending;
  }
  if (!pending) return "started";
  for (const std::string& n : r.nodes) {
    auto node = nodes.find(n);
    if (node == nodes.end() || node->second.rec.pool != r.pool ||
        node->second.rec.state != NodeState::kReady) {
      return "node_lost";
    }
  }
  if (now - r.created_us > options.tenancy.starvation_reservation_timeout_ms * 1000)
    return "timed_out";
  return "";
}

// Reserves for task `index` of `job` (its gang, for a gang) the cheapest nodes to drain that
// could host it once empty. False when no such nodes are free of other reservations.
bool Core::State::ReserveForStarving(PassState& pass, JobEntry& job, int32_t index,
                                     const StarvingKey& key, int64_t since) {
  PoolEntry* pool = FindPool(job.head.spec.pool);
  if (pool == nullptr) return false;
  size_t count = 1;
  if (key.second < 0) {
    count = 0;
    for (const Task& t : job.tasks) count += t.rec.state == TaskState::kPending ? 1 : 0;
  }
  // (oldest occupant's running time, GPU share held, node): see the header comment.
  std::vector<std::tuple<int64_t, int64_t, std::string>> ranked;
  const std::set<std::string>& tried = starvation.tried[key];
  for (const std::string& name : pool->nodes) {
    auto node = nodes.find(name);
    if (node == nodes.end() || node->second.rec.state != NodeState::kReady ||
        starvation.HolderOf(name) != nullptr || tried.contains(name)) {
      continue;
    }
    Result<placement::NodeCapacity> cap = pool->engine->NodeCapacityOf(name);
    if (!cap.ok() || !cap->schedulable) continue;
    std::map<std::string, int64_t> offered;
    for (const placement::DeviceCapacity& d : cap->devices) offered[d.id] = d.offered.milli_tflops;
    int64_t oldest = 0, held = 0;
    for (const TaskKey& k : jobs.OnNode(name)) {
      const JobEntry* other = jobs.Find(k.first);
      if (other == nullptr || !other->task(k.second).holds) continue;
      const TaskRecord& o = other->task(k.second).rec;
      const int64_t since_us = o.started_us > 0 ? o.started_us : o.scheduled_us;
      oldest = std::max(oldest, (pass.now - since_us) / 1'000'000);
      int64_t milli = 1;  // a task with no GPU still has to end
      for (const placement::Grant& g : other->task(k.second).allocation.grants) {
        const int64_t off = offered[g.device_id];
        milli += g.exclusive ? 1000 : (off > 0 ? g.amount.milli_tflops * 1000 / off : 0);
      }
      held += milli;
    }
    ranked.emplace_back(oldest, held, name);
  }
  std::sort(ranked.begin(), ranked.end());
  // The fewest cheapest nodes that hold every member once empty: a scratch engine of empty
  // nodes, one more at a time.
  placement::Engine scratch(pool->engine->policy());
  const std::vector<placement::Request> reqs(count, ToPlacement(job.request));
  for (const auto& [oldest, held, name] : ranked) {
    if (!scratch.AddNode(ToNodeSpecForAgents(nodes.at(name).rec, slots)).ok()) continue;
    placement::Engine::GangResult g = scratch.PlaceGang(reqs);
    if (!g.placed) continue;
    std::set<std::string> used;
    for (const placement::Allocation& a : g.allocations) used.insert(a.node);
    StarvationReservation r;
    r.pool = pool->rec.name;
    r.key = key;
    r.attempt = job.task(index).rec.attempt;
    r.priority = job.priority;
    r.nodes.assign(used.begin(), used.end());
    r.created_us = pass.now;
    r.waiting_since_us = since;
    LogInfo("core", "starvation reservation made",
            {{"for", Whose(key)},
             {"nodes", Joined(r.nodes)},
             {"waited_s", std::to_string((pass.now - since) / 1'000'000)}});
    starvation.Add(std::move(r));
    if (metrics != nullptr) metrics->StarvationEvent("made");
    return true;
  }
  if (!tried.empty()) {  // every other node was tried: start over
    starvation.tried.erase(key);
    return ReserveForStarving(pass, job, index, key, since);
  }
  return false;
}

void Core::State::ProcessStarvation(PassState& pass, bool full) {
  const TenancyOptions& t = options.tenancy;
  bool changed = false;
  for (const StarvationReservation& r : starvation.All()) {
    const std::string why = StaleStarvation(r, pass.now);
    if (why.empty()) continue;
    if (why == "timed_out") {  // others get a turn, and it tries other nodes next time
      starvation.cooldown_until[r.key] = pass.now + t.starvation_reserve_after_ms * 1000;
      starvation.tried[r.key].insert(r.nodes.begin(), r.nodes.end());
    }
    LogInfo("core", "starvation reservation dropped",
            {{"for", Whose(r.key)}, {"nodes", Joined(r.nodes)}, {"why", why}});
    starvation.Erase(r.key);
    if (metrics != nullptr) metrics->StarvationEvent(why);
    changed = true;
  }
  if (full && t.starvation_reserve_after_ms > 0 && !starvation.seeded) {
    // After a start: the running tasks' stored placement times stand in for the placements
    // this core did not see.
    starvation.seeded = true;
    for (const auto& [id, job] : jobs) {
      for (const Task& task : job.tasks) {
        if (task.holds)
          starvation.Placed(job.head.spec.pool, SizeMilli(job), task.rec.scheduled_us);
      }
    }
  }
  if (full && t.starvation_reserve_after_ms > 0 && !pass.starving.empty()) {
    struct Candidate {
      int64_t since;
      StarvingKey key;
      int32_t index;
    };
    std::vector<Candidate> candidates;
    for (const auto& [key, index] : pass.starving) {
      JobEntry* job = jobs.Find(key.first);
      if (job == nullptr || starvation.Find(key) != nullptr) continue;
      const int64_t since = WaitingSince(*job, index, key);
      auto cool = starvation.cooldown_until.find(key);
      if (pass.now - since < t.starvation_reserve_after_ms * 1000 ||
          (cool != starvation.cooldown_until.end() && pass.now < cool->second) ||
          !starvation.Overtaken(job->head.spec.pool, SizeMilli(*job), since)) {
        continue;
      }
      candidates.push_back({since, key, index});
    }
    std::sort(candidates.begin(), candidates.end(), [](const Candidate& a, const Candidate& b) {
      return std::tie(a.since, a.key) < std::tie(b.since, b.key);
    });
    for (const Candidate& c : candidates) {
      JobEntry& job = jobs.at(c.key.first);
      if (starvation.CountIn(job.head.spec.pool) >= t.starvation_max_reservations) continue;
      changed |= ReserveForStarving(pass, job, c.index, c.key, c.since);
    }
  }
  if (full) {  // forget the waits of tasks no longer pending in that attempt
    for (auto it = starvation.first_seen.begin(); it != starvation.first_seen.end();) {
      const JobEntry* job = jobs.Find(it->first.first.first);
      const int32_t i = std::max(it->first.first.second, 0);
      bool keep = job != nullptr && job->Has(i) && job->task(i).rec.attempt == it->first.second &&
                  job->task(i).rec.state == TaskState::kPending;
      it = keep ? std::next(it) : starvation.first_seen.erase(it);
    }
    for (auto it = starvation.tried.begin(); it != starvation.tried.end();)
      it = jobs.Find(it->first.first) == nullptr ? starvation.tried.erase(it) : std::next(it);
    for (auto it = starvation.cooldown_until.begin(); it != starvation.cooldown_until.end();)
      it = it->second <= pass.now ? starvation.cooldown_until.erase(it) : std::next(it);
  }
  if (changed) PublishStarvationMetrics();
}

int64_t Core::State::SizeMilli(const JobEntry& job) const {
  const ResourceRequest& r = job.request;
  switch (r.shape) {
    case RequestShape::kWholeGpus:
      return 1000LL * r.gpu_count;
    case RequestShape::kMig:
      return 1;
    case RequestShape::kFractional:
    case RequestShape::kSku:
      break;
  }
  auto pool = pools.find(job.head.spec.pool);
  if (pool == pools.end()) return 1;
  const Resources& largest = pool->second.limits.largest_device;
  int64_t m = 1;
  if (largest.milli_tflops > 0)
    m = std::max(m, r.fractional.milli_tflops * 1000 / largest.milli_tflops);
  if (largest.vram_mib > 0) m = std::max(m, r.fractional.vram_mib * 1000 / largest.vram_mib);
  return m;
}

void Core::State::NotePlaced(const PassState& pass, const JobEntry& job) {
  if (options.tenancy.starvation_reserve_after_ms <= 0) return;
  starvation.Placed(job.head.spec.pool, SizeMilli(job), pass.now);
}

void Core::State::PublishStarvationMetrics() {
  if (metrics == nullptr) return;
  for (const auto& [pool, seen] : starvation.pools_seen()) {
    metrics->StarvationReservations(pool, starvation.CountIn(pool), starvation.NodesIn(pool));
  }
}

}  // namespace gpupool
