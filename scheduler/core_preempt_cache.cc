// Core: the preemption candidates of a pass, computed once per change (docs/architecture.md).
//
// Every pending task that does not fit and may preempt asks for the pool's candidates — every
// running task with its eligibility and borrowed flag, O(running · log) with strings built per
// task. Under a deep backlog a pass asks hundreds of times with nothing changed in between (a
// profile of the cluster twin's openb replay spent ~90% of its time there). Within a pass the
// candidates change only when the pass places a task (Reserve: its usage is charged, it becomes
// active and committing) or stops a victim (its stop intent is set); the clock, quotas and tenant
// tree do not move. So the list is kept per pool and computed again only when the pass's count of
// placements or stops has changed since.
#include "scheduler/core.h"
#include "scheduler/core_state.h"

namespace gpupool {

const std::vector<PreemptionCandidate>& Core::State::PassCandidates(PassState& pass,
                                                                    const std::string& pool) {
  auto [it, fresh] = pass.candidates.try_emplace(pool);
  PassState::CachedCandidates& c = it->second;
  if (fresh || c.placed != pass.placed.size() || c.stops != pass.stops.size()) {
    c.list = Candidates(pool, pass.now, &c.groups);
    c.placed = pass.placed.size();
    c.stops = pass.stops.size();
  }
  return c.list;
}

}  // namespace gpupool
