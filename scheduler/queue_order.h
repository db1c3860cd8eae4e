// QueueOrder: the policy that orders the pending tasks of one priority level for a scheduling
// pass. Priority levels always go high to low (the TaskQueue walks them); within a level the
// tasks sit in fair-share queues, one per (pool, tenant), each oldest first, and the policy
// merges those queues into one order.
//
// Contract (tests/scheduler/queue_order_contract_test.cc holds every implementation to it):
//  * every task of every queue is visited exactly once, unless `visit` asks to stop;
//  * the tasks of one queue are visited in their queue order (oldest first);
//  * after `visit` returns false nothing more is visited;
//  * `share(q)` is the current share of queue q's tenant, lower is owed more; it may change
//    between visits (the caller charges usage as it places), so a policy that uses it re-reads
//    it, and a policy must not assume it is cheap (at most O(1) calls per visit).
// Policies hold no state between calls and do no I/O.
//
// The registry (queue_order.cc) lists every policy by name; `scheduler.queue_order` in the
// daemon's config picks one (docs/tenancy.md).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"

namespace gpupool {

using TaskKey = std::pair<int64_t, int32_t>;  // (job id, index): lower is older

class QueueOrder {
 public:
  using Share = std::pair<double, double>;  // (share group's share, tenant's own usage)
  using ShareFn = std::function<Share(size_t queue)>;
  using VisitFn = std::function<bool(const TaskKey&)>;  // false: stop

  virtual ~QueueOrder() = default;
  virtual std::string_view name() const = 0;
  // Visits the tasks of `queues` (each non-empty, oldest first) in the policy's order.
  virtual void Merge(const std::vector<std::vector<TaskKey>>& queues, const ShareFn& share,
                     const VisitFn& visit) const = 0;
};

enum class QueueOrderKind { kFairShare, kFifo };

// Every policy, in registry order.
std::span<const QueueOrderKind> AllQueueOrders();
std::string_view QueueOrderName(QueueOrderKind kind);
// "fair-share" or "fifo"; INVALID_ARGUMENT naming the known ones otherwise.
Result<QueueOrderKind> ParseQueueOrder(std::string_view name);
std::unique_ptr<QueueOrder> MakeQueueOrder(QueueOrderKind kind);

// The implementations (scheduler/queue_orders/).
std::unique_ptr<QueueOrder> MakeFairShareOrder();
std::unique_ptr<QueueOrder> MakeFifoOrder();

}  // namespace gpupool
