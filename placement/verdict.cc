// placement::VerdictOf (verdict.h).
#include "placement/verdict.h"

#include "placement/placement.h"

namespace gpupool::placement {

Verdict VerdictOf(const Decision& d, VerdictCode unplaced) {
  Verdict v;
  if (d.placed) return v;
  v.code = unplaced;
  for (const auto& [reason, nodes] : d.rejection_counts) {
    if (nodes > 0) v.nodes_by_reason.emplace_back(reason, nodes);
  }
  return v;
}

}  // namespace gpupool::placement
