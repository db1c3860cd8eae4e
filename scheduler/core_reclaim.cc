// Core: reclaim by group — which running tasks of other groups a pending task may take
// (docs/tenancy.md, "Preemption").
//
// Borrowing is a property of a share group's total, not of a task: a group holding more than its
// guarantee borrows the difference, whichever of its tasks started last. So another group may
// take any of its tasks as long as it keeps at least its guarantee without them:
//
//   keeps − lost ≥ guaranteed   in every dimension the group is guaranteed,
//
// where `keeps` is the usage of the group's running tasks that are not stopping already and
// `lost` is what the chosen victims hold (a gang member: its whole gang, which stops with it).
// A group with no guarantee keeps nothing back: all it runs is borrowed. Both rules obey it
// across groups — reclaim (a group within its guarantee takes back what others borrow) and
// priority (a higher class takes a lower one) — so no preemption pushes another group below its
// guarantee, and a group that lost tasks to reclaim holds nothing the reclaimer could not
// take back at once: no ping-pong. Within its own group the priority rule is unchanged.
//
// A victim set lies on one node (a request is placed on one node), so the core marks, per group
// and node, the tasks whose loss all together still spares the group — the cheapest first: lowest
// class, then youngest — and FindVictims may pick any subset of them. A gang's sets span nodes;
// ReclaimSparesGroups checks the sum once they are chosen. Reclaim's victims: of a class up to
// the task's own first; only when those cannot make room, of any preemptible class (a group above
// its guarantee lends its surplus whatever the class of the tasks that hold it; TryPreempt).
#include "scheduler/core.h"
#include "scheduler/core_state.h"

namespace gpupool {
namespace {

struct Item {
  int64_t since_us;
  TaskKey key;
  QuotaAmount usage;
  bool eligible;
  bool stopping;
  PreemptionCandidate candidate;
};

}  // namespace

bool GroupStanding::Spares(const QuotaAmount& lost) const {
  const QuotaAmount left = keeps - lost;
  const QuotaAmount& g = guaranteed;
  return (g.resources.milli_tflops <= 0 ||
          left.resources.milli_tflops >= g.resources.milli_tflops) &&
         (g.resources.vram_mib <= 0 || left.resources.vram_mib >= g.resources.vram_mib) &&
         (g.devices <= 0 || left.devices >= g.devices);
}

QuotaAmount Core::State::LostWith(const JobEntry& victim, int32_t index) const {
  if (!victim.head.spec.gang) return victim.task(index).usage;
  QuotaAmount all;
  for (const Task& m : victim.tasks) {
    if (m.charged) all += m.usage;
  }
  return all;
}

// Running tasks of `pool` that may be preempted. Within a share group the oldest tasks fill the
// guarantee and the later ones are `borrowed` (a tie-break for the priority rule); `reclaimable`
// as in the header comment.
std::vector<PreemptionCandidate> Core::State::Candidates(
    const std::string& pool, int64_t now, std::map<std::string, GroupStanding>* groups) {
  std::vector<PreemptionCandidate> out;
  groups->clear();
  auto it = active.find(pool);
  if (it == active.end()) return out;
  std::map<std::string, std::vector<Item>> by_group;
  for (const TaskKey& key : it->second) {
    const Task& rt = jobs.at(key.first).task(key.second);
    int64_t since = rt.rec.started_us != 0 ? rt.rec.started_us : rt.rec.scheduled_us;
    bool eligible = false;
    PreemptionCandidate c = CandidateOf(pool, key, now, &eligible);
    by_group[c.group].push_back(
        Item{since, key, rt.usage, eligible, rt.rec.stop != StopIntent::kNone, std::move(c)});
  }
  for (auto& [group, items] : by_group) {
    std::sort(items.begin(), items.end(), [](const Item& a, const Item& b) {
      return std::tie(a.since_us, a.key) < std::tie(b.since_us, b.key);
    });
    const QuotaRecord* q = book.Quota(group, pool);
    const bool guaranteed = q != nullptr && !q->guaranteed.IsZero();
    GroupStanding& standing = (*groups)[group];
    if (guaranteed) standing.guaranteed = q->guaranteed;
    QuotaAmount cum;
    for (Item& item : items) {
      cum += item.usage;
      item.candidate.borrowed = !guaranteed || !cum.Fits(q->guaranteed);
      if (!item.stopping) standing.keeps += item.usage;
    }
    // Per node, the cheapest first (lowest class, then youngest): each task whose loss, with
    // the ones marked before it on that node, still spares the group.
    std::vector<Item*> order;
    for (Item& item : items) {
      if (item.eligible) order.push_back(&item);
    }
    std::sort(order.begin(), order.end(), [](const Item* a, const Item* b) {
      return std::tie(a->candidate.value, b->since_us, b->key) <
             std::tie(b->candidate.value, a->since_us, a->key);
    });
    std::map<std::string, QuotaAmount> lost_on;
    for (Item* item : order) {
      const JobEntry& j = jobs.at(item->key.first);
      QuotaAmount& lost = lost_on[j.task(item->key.second).allocation.node];
      const QuotaAmount with = lost + LostWith(j, item->key.second);
      if (!standing.Spares(with)) continue;
      lost = with;
      item->candidate.reclaimable = true;
    }
    for (Item& item : items) {
      if (item.eligible) out.push_back(std::move(item.candidate));
    }
  }
  return out;
}

bool Core::State::ReclaimSparesGroups(
    PassState& pass, const JobEntry& job, const PreemptorRules& rules,
    const std::vector<std::string>& ids,
    const std::map<std::string, const PreemptionCandidate*>& by_id) {
  const std::map<std::string, GroupStanding>& groups =
      pass.candidates.at(job.head.spec.pool).groups;
  std::map<std::string, QuotaAmount> lost;
  std::set<int64_t> gangs;  // a gang counts once, whole
  for (const std::string& id : ids) {
    const PreemptionCandidate& c = *by_id.at(id);
    if (c.group == rules.group) continue;  // the task's own group: its own business
    const JobEntry& victim = jobs.at(c.job_id);
    if (victim.head.spec.gang && !gangs.insert(c.job_id).second) continue;
    lost[c.group] += LostWith(victim, c.index);
  }
  for (const auto& [g, amount] : lost) {
    auto it = groups.find(g);
    if (it == groups.end() || !it->second.Spares(amount)) return false;
  }
  return true;
}

}  // namespace gpupool
