// Core::FindJobByIdempotencyKey: the lookup behind SubmitJob's idempotency key (api/
// service_impl.cc). A scan of the job table, which holds every stored job: keyed submissions are
// rare next to the scheduling work, and the store's unique index on (tenant, key) is what makes
// a key unique when two submissions race.
#include "scheduler/core.h"
#include "scheduler/core_state.h"

namespace gpupool {

std::optional<JobRecord> Core::FindJobByIdempotencyKey(const std::string& tenant,
                                                       const std::string& key) const {
  if (key.empty()) return std::nullopt;
  for (const auto& [id, entry] : s_->jobs) {
    if (entry.head.spec.idempotency_key == key && entry.head.spec.tenant == tenant) {
      return entry.Record();
    }
  }
  return std::nullopt;
}

}  // namespace gpupool
