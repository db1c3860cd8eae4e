#include "store/memory_services.h"

#include <iterator>

#include "store/validate.h"

namespace gpupool {

MemoryServices::MemoryServices() : table_(std::make_shared<Table>()) {}

std::unique_ptr<MemoryServices> MemoryServices::Share() const {
  return std::unique_ptr<MemoryServices>(new MemoryServices(table_));
}

Result<ServiceRecord> MemoryServices::Create(const ServiceRecord& s) {
  GPUPOOL_RETURN_IF_ERROR(ValidateService(s));
  MutexLock lock(&table_->mu);
  for (const auto& [_, row] : table_->rows) {
    if (row.service.spec.tenant == s.spec.tenant && row.service.spec.name == s.spec.name) {
      return Status::AlreadyExists(ServiceExistsMessage(s.spec.tenant, s.spec.name));
    }
  }
  ServiceRecord out = s;
  out.id = ++table_->last_id;
  out.generation = 1;
  out.previous.reset();
  Row& row = table_->rows[out.id];
  row.service = out;
  row.service.spec.revision = {};
  row.revisions[1] = out.spec.revision;
  return out;
}

Status MemoryServices::Update(const ServiceRecord& next, int64_t expected_generation) {
  GPUPOOL_RETURN_IF_ERROR(ValidateServiceUpdate(next, expected_generation));
  MutexLock lock(&table_->mu);
  auto it = table_->rows.find(next.id);
  if (it == table_->rows.end()) return Status::NotFound(ServiceNotFoundMessage(next.id));
  Row& row = it->second;
  ServiceRecord& s = row.service;
  if (s.generation != expected_generation) {
    return Status::Aborted(ServiceChangedMessage(next.id, s.generation));
  }
  // The scaling fields; tenant, name, pool, creator and creation time stay.
  const ServiceSpec& n = next.spec;
  s.spec.priority_class = n.priority_class;
  s.spec.preemptible = n.preemptible;
  s.spec.min_replicas = n.min_replicas;
  s.spec.max_replicas = n.max_replicas;
  s.spec.target_in_flight = n.target_in_flight;
  s.spec.idle_ms = n.idle_ms;
  s.spec.max_surge = n.max_surge;
  s.spec.max_unavailable = n.max_unavailable;
  s.update_ms = next.update_ms;
  if (next.generation == expected_generation + 1) {
    s.generation = next.generation;
    row.revisions[next.generation] = n.revision;
    row.revisions.erase(row.revisions.begin(),
                        row.revisions.upper_bound(next.generation - kServiceRevisionsKept));
  }
  return Status::Ok();
}

Status MemoryServices::Delete(int64_t id) {
  MutexLock lock(&table_->mu);
  if (table_->rows.erase(id) == 0) return Status::NotFound(ServiceNotFoundMessage(id));
  return Status::Ok();
}

Result<std::vector<ServiceRecord>> MemoryServices::List() {
  MutexLock lock(&table_->mu);
  std::vector<ServiceRecord> out;
  for (const auto& [id, row] : table_->rows) {
    ServiceRecord s = row.service;
    auto current = row.revisions.find(s.generation);
    if (current == row.revisions.end()) {
      return Status::Internal("service " + std::to_string(id) + ": revision " +
                              std::to_string(s.generation) + " is missing");
    }
    s.spec.revision = current->second;
    if (current != row.revisions.begin()) s.previous = std::prev(current)->second;
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace gpupool
