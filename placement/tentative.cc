// Tentative (tentative.h).
#include "placement/tentative.h"

namespace gpupool::placement {

Status Tentative::Commit(const Allocation& allocation) {
  Status st = engine_.Commit(allocation);
  if (st.ok()) log_.push_back({true, allocation});
  return st;
}

Status Tentative::Release(const Allocation& allocation) {
  Status st = engine_.Release(allocation);
  if (st.ok()) log_.push_back({false, allocation});
  return st;
}

Status Tentative::Rollback() {
  Status first;
  for (auto it = log_.rbegin(); it != log_.rend(); ++it) {
    Status st = it->committed ? engine_.Release(it->allocation) : engine_.Commit(it->allocation);
    if (!st.ok() && first.ok()) first = st;
  }
  log_.clear();
  return first;
}

}  // namespace gpupool::placement
