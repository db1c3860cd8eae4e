// Core: what a preemption may promise — room and quota that no other reservation has promised
// already (docs/tenancy.md, "Reservations").
//
// A reservation is a promise: once its victims are gone, its task gets its placement, within
// its quota. Two promises must not overlap:
//  * Room. Victims are searched on the pool as it will be once every standing reservation is
//    taken up (their victims gone, their placements committed), so a new preemptor cannot count
//    the free part of another's room — free CPU, memory, a share of a GPU — as its own. The
//    chosen room must also fit now, with only its own victims gone: the other victims may still
//    be stopping when its own are gone.
//  * Quota. A reservation holds its task's usage against the tenant chain's limits from the
//    moment its victims are chosen (TenantBook::Hold), and a task may preempt only if its chain
//    stays within every limit with that usage once its victims — some perhaps of its own chain
//    — are gone. Otherwise the room would come due over a limit, be given up, the victim would
//    restart in it and be preempted again at the next pass (the ping-pong the cluster twin saw:
//    one `low` task preempted 37 times in 37 s).
#include "base/log.h"
#include "placement/tentative.h"
#include "scheduler/core.h"
#include "scheduler/core_state.h"

namespace gpupool {

void Core::State::ReservedFuture(placement::Tentative& tx, const std::string& pool) {
  std::vector<int64_t> ids = reservations.IdsInPool(pool);
  if (ids.empty()) return;
  // Every victim gone first, then every promised placement: two rooms on one node may each
  // count on the other's victims only through the free space they share, which this checks.
  for (int64_t id : ids) {
    const Reservation& r = *reservations.Find(id);
    for (const std::string& v : r.victims) {
      int32_t i = 0;
      JobEntry* j = jobs.FindTask(v, &i);
      if (j != nullptr && j->task(i).holds) (void)tx.Release(j->task(i).allocation);
    }
    for (const placement::Allocation& a : r.held) (void)tx.Release(a);
  }
  for (int64_t id : ids) (void)tx.Commit(reservations.Find(id)->allocation);
}

bool Core::State::RoomNowWithout(PoolEntry& pool, const std::vector<std::string>& victims,
                                 const std::map<std::string, const PreemptionCandidate*>& by_id,
                                 const std::vector<placement::Allocation>& allocations) {
  placement::Tentative tx(*pool.engine);  // rolled back on return: this only looks
  for (const std::string& v : victims) {
    if (!tx.Release(by_id.at(v)->task.allocation).ok()) return false;
  }
  for (const placement::Allocation& a : allocations) {
    if (!tx.Commit(a).ok()) return false;
  }
  return true;
}

std::string Core::State::PreemptorOverLimit(
    const JobEntry& job, const QuotaAmount& need, const std::vector<std::string>& victims,
    const std::map<std::string, const PreemptionCandidate*>& by_id, std::string* binding) const {
  std::vector<std::pair<std::string, QuotaAmount>> freed;
  for (const std::string& v : victims) {
    const PreemptionCandidate& c = *by_id.at(v);
    const JobEntry& victim = jobs.at(c.job_id);
    freed.emplace_back(victim.head.spec.tenant, victim.task(c.index).usage);
  }
  return book.WhyOverLimitFreeing(job.head.spec.pool, job.head.spec.tenant, need, freed, binding);
}

}  // namespace gpupool
