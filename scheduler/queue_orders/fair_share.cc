// Fair share: the queue whose tenant is owed most goes first (docs/tenancy.md).
//
// The queues are merged by (share, head task): a min-heap of cursors, one per queue. A share
// grows as the pass places that tenant's tasks, so the heap is lazy: a popped cursor whose share
// has grown since it was pushed, and is no longer the lowest, is pushed back with its new share
// instead of being visited. Each visit re-reads at most two shares, so a level of n tasks over
// q queues costs O(n log q) share reads and heap operations. Ties go to the older task.
#include <queue>
#include <tuple>

#include "scheduler/queue_order.h"

namespace gpupool {
namespace {

class FairShareOrder final : public QueueOrder {
 public:
  std::string_view name() const override { return "fair-share"; }

  void Merge(const std::vector<std::vector<TaskKey>>& queues, const ShareFn& share,
             const VisitFn& visit) const override {
    struct Cursor {
      Share share;
      TaskKey head;
      size_t queue;
      size_t pos;
      bool operator>(const Cursor& o) const {
        return std::tie(share, head) > std::tie(o.share, o.head);
      }
    };
    std::priority_queue<Cursor, std::vector<Cursor>, std::greater<>> heap;
    for (size_t q = 0; q < queues.size(); ++q) {
      if (!queues[q].empty()) heap.push(Cursor{share(q), queues[q][0], q, 0});
    }
    while (!heap.empty()) {
      Cursor c = heap.top();
      heap.pop();
      Share now = share(c.queue);
      if (now > c.share && !heap.empty() && now > heap.top().share) {
        c.share = now;  // its tenant got more since: let the others go first
        heap.push(c);
        continue;
      }
      if (!visit(c.head)) return;
      if (++c.pos < queues[c.queue].size()) {
        c.head = queues[c.queue][c.pos];
        c.share = share(c.queue);
        heap.push(c);
      }
    }
  }
};

}  // namespace

std::unique_ptr<QueueOrder> MakeFairShareOrder() { return std::make_unique<FairShareOrder>(); }

}  // namespace gpupool
