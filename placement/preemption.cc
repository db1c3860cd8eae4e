// Engine::FindVictims: the cheapest set of lower-priority tasks whose release makes a request fit.
//
// Per node, exactly: subsets of the node's lower-priority tasks by size, smallest first; the first
// size at which some subset makes the request fit is the fewest victims, and among the subsets of
// that size the cheapest wins (the lowest highest priority, then the least total work lost).
// Exact minimum sets are NP-hard in general, so the search is bounded (kMaxEvaluations per
// node); past the bound the node falls back to the greedy set: its tasks cheapest first until the
// request fits, then every victim it can spare put back, most expensive first. Across nodes the
// cheapest set wins in the same order. A request is placed on one node, so the best set for the
// pool is the best of the nodes' (tests/placement/victim_search_test.cc checks it against brute
// force over every subset of the pool's tasks).
#include <algorithm>
#include <map>
#include <tuple>

#include "placement/accounting.h"
#include "placement/engine_impl.h"

namespace gpupool::placement {
namespace {

// Evaluations one node's exact search may spend (a node with 12 candidates needs at most 4,095).
constexpr int kMaxEvaluations = 4096;

struct Cost {
  size_t count = 0;
  int32_t max_priority = INT32_MIN;
  int64_t work_lost = 0;
  bool operator<(const Cost& o) const {
    return std::tie(count, max_priority, work_lost) <
           std::tie(o.count, o.max_priority, o.work_lost);
  }
};

Cost CostOf(const std::vector<const RunningTask*>& victims) {
  Cost c{victims.size(), INT32_MIN, 0};
  for (const RunningTask* v : victims) {
    c.max_priority = std::max(c.max_priority, v->priority);
    c.work_lost += v->work_lost;
  }
  return c;
}

enum class Exact { kFound, kNone, kTooCostly };

// The exact search on one node (copy): fewest victims, then cheapest. kTooCostly when it would
// take more than kMaxEvaluations.
Exact ExactVictimsOnNode(const EngineImpl& engine, NodeState& node, const CompiledRequest& req,
                         const std::vector<const RunningTask*>& tasks,
                         std::vector<const RunningTask*>* victims, Scored* scored) {
  std::vector<const RunningTask*> cands;
  for (const RunningTask* t : tasks) {
    if (CheckUnapply(node, t->allocation).ok()) cands.push_back(t);  // else stale
  }
  const size_t n = cands.size();
  // Most nodes searched cannot make room at all, and proving it by enumeration costs 2^n - 1
  // evaluations (the twin's default replay: 96 % of node searches, 98 % of evaluations; see
  // docs/benchmarks-archive.md). Releasing tasks only frees resources, so when the request does
  // not fit with every candidate released, no subset makes it fit: one evaluation answers, and the
  // greedy fallback would end in this same state with the same answer. Skipped when the
  // candidates' grants overlap (not every one can be released), and for fractional requests:
  // a freed device can change which device is chosen and so the spill check.
  if (req.kind != RequestKind::kFractional) {
    size_t released = 0;
    for (; released < n; ++released) {
      if (!CheckUnapply(node, cands[released]->allocation).ok()) break;
      Unapply(node, cands[released]->allocation, engine.NextVersion());
    }
    Scored s;
    const bool room = released < n || engine.Evaluate(node, req, &s);
    while (released-- > 0) Apply(node, cands[released]->allocation, engine.NextVersion());
    if (!room) return Exact::kNone;
  }
  int budget = kMaxEvaluations;
  for (size_t k = 1; k <= n; ++k) {
    std::vector<size_t> pick(k);
    for (size_t i = 0; i < k; ++i) pick[i] = i;
    bool found = false;
    Cost best;
    for (;;) {
      if (--budget < 0) return Exact::kTooCostly;
      size_t applied = 0;
      for (; applied < k; ++applied) {
        const Allocation& a = cands[pick[applied]]->allocation;
        if (!CheckUnapply(node, a).ok()) break;  // overlapping grants: not a valid set
        Unapply(node, a, engine.NextVersion());
      }
      Scored s;
      if (applied == k && engine.Evaluate(node, req, &s)) {
        std::vector<const RunningTask*> set;
        for (size_t i : pick) set.push_back(cands[i]);
        Cost c = CostOf(set);
        if (!found || c < best) {
          found = true;
          best = c;
          *victims = std::move(set);
          *scored = s;
        }
      }
      while (applied-- > 0) Apply(node, cands[pick[applied]]->allocation, engine.NextVersion());
      // Next combination of k out of n, in lexicographic order.
      size_t i = k;
      while (i > 0 && pick[i - 1] == n - k + i - 1) --i;
      if (i == 0) break;
      ++pick[i - 1];
      for (size_t j = i; j < k; ++j) pick[j] = pick[j - 1] + 1;
    }
    if (found) return Exact::kFound;
  }
  return Exact::kNone;
}

// Victims on one node (copy), or false when even all of them do not make room.
bool VictimsOnNode(const EngineImpl& engine, NodeState node, const CompiledRequest& req,
                   std::vector<const RunningTask*> tasks, std::vector<const RunningTask*>* victims,
                   Scored* scored) {
  std::sort(tasks.begin(), tasks.end(), [](const RunningTask* a, const RunningTask* b) {
    return std::tie(a->priority, a->work_lost, a->task_id) <
           std::tie(b->priority, b->work_lost, b->task_id);
  });
  switch (ExactVictimsOnNode(engine, node, req, tasks, victims, scored)) {
    case Exact::kFound:
      return true;
    case Exact::kNone:
      return false;
    case Exact::kTooCostly:
      victims->clear();
      break;
  }
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
    Cost cost = CostOf(victims);
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
