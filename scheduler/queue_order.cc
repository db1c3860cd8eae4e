// The queue-order registry: every policy's name and factory, in one place.
#include "scheduler/queue_order.h"

#include <array>
#include <string>

namespace gpupool {
namespace {

struct Entry {
  QueueOrderKind kind;
  std::string_view name;
};

constexpr std::array<Entry, 2> kRegistry{{
    {QueueOrderKind::kFairShare, "fair-share"},
    {QueueOrderKind::kFifo, "fifo"},
}};

constexpr std::array<QueueOrderKind, kRegistry.size()> kAll = [] {
  std::array<QueueOrderKind, kRegistry.size()> a{};
  for (size_t i = 0; i < kRegistry.size(); ++i) a[i] = kRegistry[i].kind;
  return a;
}();

}  // namespace

std::span<const QueueOrderKind> AllQueueOrders() { return kAll; }

std::string_view QueueOrderName(QueueOrderKind kind) {
  for (const Entry& e : kRegistry)
    if (e.kind == kind) return e.name;
  return "unknown";
}

Result<QueueOrderKind> ParseQueueOrder(std::string_view name) {
  std::string known;
  for (const Entry& e : kRegistry) {
    if (e.name == name) return e.kind;
    known += known.empty() ? "" : ", ";
    known += e.name;
  }
  return Status::InvalidArgument("unknown queue order '" + std::string(name) +
                                 "' (known: " + known + ")");
}

std::unique_ptr<QueueOrder> MakeQueueOrder(QueueOrderKind kind) {
  switch (kind) {
    case QueueOrderKind::kFairShare:
      return MakeFairShareOrder();
    case QueueOrderKind::kFifo:
      return MakeFifoOrder();
  }
  return MakeFairShareOrder();
}

}  // namespace gpupool
