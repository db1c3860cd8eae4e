// Services (docs/services.md): long-running replicas of one template, kept at a desired count by
// the service controller (scheduler/service_controller.h), scaled on the load the gateway reports
// (scheduler/autoscaler.h), placed, preempted, counted against quota and metered as jobs — each
// replica IS a one-task job (JobSpec::service_id), so every path a job takes, a replica takes.
//
// A service keeps its template as numbered revisions: a change of the template (or of the port
// or readiness check that go with it) is a new generation, rolled out replica by replica within
// the surge and unavailability limits; a rollback is a new generation with the previous
// revision's content. Scaling fields (min, max, target, idle period, limits) change in place.
//
// ServiceStore is the port that keeps them, beside the Store port (like RegistryCredentialStore):
// services change rarely, are read by the controller, not by the core, and must not queue behind
// the core's group commits. store/pg_services.h keeps them in PostgreSQL (tables `services` and
// `service_revisions`); store/memory_services.h in memory for tests.
//
// Errors: UNAVAILABLE when the database cannot be reached; ALREADY_EXISTS from Create of a name
// the tenant has; NOT_FOUND from Update or Delete of an unknown id; ABORTED from Update when the
// stored generation is no longer `expected_generation` (another change came first).
//
// Thread safety: implementations are thread-safe; every call is synchronous and durable when it
// returns OK.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "scheduler/model.h"

namespace gpupool {

// What a template change changes, as one numbered revision.
struct ServiceRevision {
  // The replica's template: a command or an image, its resources (fractional slices included),
  // env and ports. secret_env is not kept for services (refused at the edge).
  TaskTemplate task_template;
  // The container port requests are served on: one of task_template.ports.
  int32_t port = 0;
  // An HTTP GET path that answers 2xx once a replica is ready ("" = ready once its port accepts
  // a connection). The gateway probes it; the controller counts a replica ready when RUNNING.
  std::string readiness_path;
  friend bool operator==(const ServiceRevision&, const ServiceRevision&) = default;
};

struct ServiceSpec {
  std::string tenant;  // the owner, a tenant path; its replicas are its jobs
  std::string name;    // [a-z0-9][a-z0-9-]*, at most 63 characters; unique per tenant
  std::string pool;
  std::string priority_class;  // "" = the scheduler's default class
  bool preemptible = true;     // a higher class may preempt replicas (they are replaced)
  ServiceRevision revision;
  int32_t min_replicas = 0;  // 0: scales to zero after `idle_ms` without requests
  int32_t max_replicas = 1;
  int32_t target_in_flight = 1;  // requests in flight per replica the autoscaler aims for
  int64_t idle_ms = 300'000;     // no request for this long: down to min_replicas
  int32_t max_surge = 1;         // a rollout may run this many replicas beyond the desired count
  int32_t max_unavailable = 0;   // … and have this many fewer ready than desired
  std::string created_by;        // the credential that created it (api/caller.h key_id)
  friend bool operator==(const ServiceSpec&, const ServiceSpec&) = default;
};

struct ServiceRecord {
  int64_t id = 0;  // assigned by the store; never reused
  ServiceSpec spec;
  int64_t generation = 1;                   // the revision in spec.revision
  std::optional<ServiceRevision> previous;  // the revision before it, for a rollback
  int64_t create_ms = 0;
  int64_t update_ms = 0;
  friend bool operator==(const ServiceRecord&, const ServiceRecord&) = default;
};

class ServiceStore {
 public:
  virtual ~ServiceStore() = default;
  // Stores a new service: its id assigned, generation 1, revision 1 = spec.revision; returns it.
  virtual Result<ServiceRecord> Create(const ServiceRecord& s) = 0;
  // Replaces the service's scaling fields with `next`'s and, when next.generation is
  // expected_generation + 1, adds next.spec.revision as that revision (a rollout); `next.tenant`,
  // `name` and `pool` never change. Only while the stored generation is `expected_generation`.
  virtual Status Update(const ServiceRecord& next, int64_t expected_generation) = 0;
  virtual Status Delete(int64_t id) = 0;
  // Every service, by id, each with its current revision and the one before.
  virtual Result<std::vector<ServiceRecord>> List() = 0;
};

// INVALID_ARGUMENT naming the field ("service.name", "service.min_replicas", …) unless the
// service's own fields are sound: the name's grammar, 0 <= min <= max <= kMaxServiceReplicas,
// max >= 1, target >= 1, idle at least 10 s, surge and unavailable not both 0, the port one of
// the template's ports, a readiness path that starts with '/' (or is empty), no secret env.
// The template itself is checked at the edge as a job's is.
inline constexpr int32_t kMaxServiceReplicas = 1000;
Status CheckServiceSpec(const ServiceSpec& s);

}  // namespace gpupool
