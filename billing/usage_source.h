// UsageSource: where rating gets metered quantities from — the port the usage ledger's aggregate
// query is adapted to (the daemon wires it; tests may feed fixed quantities).
//
// Usage(tenant, start, end) returns the quantities of `tenant`'s subtree ("" = every tenant)
// whose period starts in [start_ms, end_ms), bucketed no coarser than the shortest time a price
// plan version can be in effect for (an hour is fine). UNAVAILABLE when the ledger cannot be
// read.
//
// Thread safety: implementations are thread-safe.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "billing/usage.h"

namespace gpupool::billing {

class UsageSource {
 public:
  virtual ~UsageSource() = default;
  virtual Result<std::vector<MeteredQuantity>> Usage(const std::string& tenant, int64_t start_ms,
                                                     int64_t end_ms) = 0;
};

}  // namespace gpupool::billing
