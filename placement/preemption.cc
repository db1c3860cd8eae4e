// Engine::FindVictims: the cheapest set of lower-priority tasks whose release makes a request fit.
//
// Per node: take the node's preemptible tasks cheapest first (lowest priority, then least work
// lost), release them on a copy of the node until the request fits, then put back every victim
// the request can do without (most expensive first). Across nodes the cheapest set wins: fewest
// victims, then the lowest highest priority among them, then the least total work lost. Greedy
// per node — exact minimum sets are NP-hard in general — but never evicts a task it can spare.
#include <algorithm>
#include <map>
#include <tuple>

#include "placement/accounting.h"
#include "placement/engine_impl.h"

namespace gpupool::placement {
namespace {

struct Cost {
  size_t count = 0;
  int32_t max_priority = INT32_MIN;
  int64_t work_lost = 0;
  bool operator<(const Cost& o) const {
    return std::tie(count, max_priority, work_lost) <
           std::tie(o.count, o.max_priority, o.work_lost);
  }
};

// Victims on one node (copy), or false when even all of them do not make room.
bool VictimsOnNode(const EngineImpl& engine, NodeState node, const CompiledRequest& req,
                   std::vector<const RunningTask*> tasks, std::vector<const RunningTask*>* victims,
                   Scored* scored) {
  std::sort(tasks.begin(), tasks.end(), [](const RunningTask* a, const RunningTask* b) {
    return std::tie(a->priority, a->work_lost, a->task_id) <
           std::tie(b->priority, b->work_lost, b->task_id);
  });
  bool fits = false;
  for (const RunningTask* t : tasks) {
    if (!CheckUnapply(node, t->allocation).ok()) continue;  // stale: not on this node's books
    Unapply(node, t->allocation, engine.NextVersion());
    victims->push_back(t);
    if ((fits = engine.Evaluate(node, req, scored))) break;
  }
  if (!fits) return false;
  // Spare whoever is not needed, most expensive first.
  for (size_t i = victims->size(); i-- > 0;) {
    const RunningTask* t = (*victims)[i];
    if (!CheckApply(node, t->allocation).ok()) continue;
    Apply(node, t->allocation, engine.NextVersion());
    Scored s;
    if (engine.Evaluate(node, req, &s)) {
      victims->erase(victims->begin() + static_cast<long>(i));
    } else {
      Unapply(node, t->allocation, engine.NextVersion());
    }
  }
  return engine.Evaluate(node, req, scored);
}

}  // namespace

VictimSet Engine::FindVictims(const Request& request, int32_t priority,
                              std::span<const RunningTask> running) const {
  VictimSet best;
  best.decision = impl_->Place(request, PlaceOptions{false});
  if (best.decision.placed) {
    best.found = true;  // fits already: no victim needed
    return best;
  }
  const CompiledRequest req = impl_->Compile(request);
  std::map<std::string, std::vector<const RunningTask*>> by_node;
  for (const RunningTask& t : running)
    if (t.priority < priority) by_node[t.allocation.node].push_back(&t);
  Cost best_cost;
  for (const auto& [name, tasks] : by_node) {
    const NodeState* node = impl_->FindNode(name);
    if (node == nullptr) continue;
    std::vector<const RunningTask*> victims;
    Scored scored;
    if (!VictimsOnNode(*impl_, *node, req, tasks, &victims, &scored)) continue;
    Cost cost{victims.size(), INT32_MIN, 0};
    for (const RunningTask* v : victims) {
      cost.max_priority = std::max(cost.max_priority, v->priority);
      cost.work_lost += v->work_lost;
    }
    if (best.found && !(cost < best_cost)) continue;
    best.found = true;
    best_cost = cost;
    best.task_ids.clear();
    for (const RunningTask* v : victims) best.task_ids.push_back(v->task_id);
    best.decision = Decision{};
    best.decision.placed = true;
    best.decision.score = scored.score;
    // Devices are indices, identical on the copy and the real node.
    best.decision.allocation = MakeAllocation(*node, req, scored.devices);
  }
  return best;
}

}  // namespace gpupool::placement
