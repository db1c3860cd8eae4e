// FIFO: oldest task first across every tenant of the level (job id, then task index), shares
// ignored. A k-way merge of the already-ordered queues: O(n log q).
#include <queue>

#include "scheduler/queue_order.h"

namespace gpupool {
namespace {

class FifoOrder final : public QueueOrder {
 public:
  std::string_view name() const override { return "fifo"; }

  void Merge(const std::vector<std::vector<TaskKey>>& queues, const ShareFn& /*share*/,
             const VisitFn& visit) const override {
    using Cursor = std::pair<TaskKey, std::pair<size_t, size_t>>;  // head, (queue, pos)
    std::priority_queue<Cursor, std::vector<Cursor>, std::greater<>> heap;
    for (size_t q = 0; q < queues.size(); ++q) {
      if (!queues[q].empty()) heap.push({queues[q][0], {q, 0}});
    }
    while (!heap.empty()) {
      auto [head, at] = heap.top();
      heap.pop();
      if (!visit(head)) return;
      auto [q, pos] = at;
      if (++pos < queues[q].size()) heap.push({queues[q][pos], {q, pos}});
    }
  }
};

}  // namespace

std::unique_ptr<QueueOrder> MakeFifoOrder() { return std::make_unique<FifoOrder>(); }

}  // namespace gpupool
