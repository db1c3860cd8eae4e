// ServiceImpl: services (ServiceService; scheduler/service_controller.h, docs/services.md).
//
// Rights: a member creates services for its own tenant subtree, at a priority class it may use,
// in a pool it may see, and changes, rolls back or deletes the services it created; a
// tenant-admin any service of its subtree; a viewer reads. A service outside the caller's
// subtree is NOT_FOUND, as if it did not exist.
//
// Steps: validate and convert at the edge (each error names its field: the template as a job's
// is checked), check the caller, look the pool up on the scheduler's loop, then hand the change
// to the controller on the timer thread — never on the loop (the controller writes to the
// store synchronously).
#include "api/convert.h"
#include "api/convert_service.h"
#include "api/service_impl.h"
#include "api/service_internal.h"
#include "api/validate.h"
#include "scheduler/service_controller.h"
#include "scheduler/tenancy.h"

namespace gpupool::api {
namespace {

v1::Service ServiceProto(const ServiceView& v) {
  v1::Service out;
  const ServiceSpec& s = v.record.spec;
  out.set_name(s.name);
  out.set_tenant(s.tenant);
  out.set_pool(s.pool);
  out.set_priority_class(s.priority_class);
  out.set_preemptible(s.preemptible);
  ToProto(s.revision.task_template, out.mutable_template_());
  out.set_port(static_cast<uint32_t>(s.revision.port));
  out.set_readiness_path(s.revision.readiness_path);
  out.set_min_replicas(s.min_replicas);
  out.set_max_replicas(s.max_replicas);
  out.set_target_in_flight(s.target_in_flight);
  out.mutable_idle()->set_seconds(s.idle_ms / 1000);
  out.mutable_idle()->set_nanos(static_cast<int32_t>(s.idle_ms % 1000) * 1'000'000);
  out.set_max_surge(s.max_surge);
  out.set_max_unavailable(s.max_unavailable);
  out.set_id(std::to_string(v.record.id));
  out.set_generation(v.record.generation);
  out.set_has_previous(v.record.previous.has_value());
  out.set_created_by(s.created_by);
  SetTimestamp(v.record.create_ms * 1000, out.mutable_create_time());
  SetTimestamp(v.record.update_ms * 1000, out.mutable_update_time());
  v1::ServiceStatus* st = out.mutable_status();
  st->set_desired(v.desired);
  st->set_desired_reason(v.desired_reason);
  st->set_ready(v.ready);
  st->set_updated(v.updated);
  st->set_below_code(v.below_code);
  st->set_below_reason(v.below_reason);
  st->set_consecutive_failures(v.consecutive_failures);
  st->set_cold_starts(v.cold_starts);
  if (v.cold_starts > 0) {
    st->mutable_last_cold_start()->set_seconds(v.last_cold_start_ms / 1000);
    st->mutable_last_cold_start()->set_nanos(static_cast<int32_t>(v.last_cold_start_ms % 1000) *
                                             1'000'000);
  }
  for (const ServiceReplicaView& r : v.replicas) {
    v1::ServiceReplica* p = st->add_replicas();
    p->set_job_id(std::to_string(r.job_id));
    p->set_generation(r.generation);
    p->set_state(ToProto(r.state));
    p->set_ready(r.ready);
    p->set_node(r.node);
    EndpointsToProto(r.endpoints, p->mutable_endpoints());
    p->set_reason(r.reason);
  }
  return out;
}

// The view as the reply, or the error.
void Answer(const Reply<v1::Service>& done, const Result<ServiceView>& v) {
  if (!v.ok()) return Fail(done, v.status());
  done(Status::Ok(), ServiceProto(*v));
}

// Reads: the service's tenant within the caller's reach (else NOT_FOUND, as if absent).
Status RequireVisible(const CallContext& ctx, const std::string& tenant, const std::string& name) {
  if (ctx.admin() || (!ctx.scope.empty() && TenantWithin(tenant, ctx.scope))) return Status::Ok();
  return Status::NotFound("service '" + name + "' of tenant '" + tenant + "' not found");
}

// Changes: a member only those it created, a tenant-admin any of its subtree's.
ServiceController::ServiceCheck ChangeCheck(const CallContext& ctx) {
  return [ctx](const ServiceRecord& r) {
    GPUPOOL_RETURN_IF_ERROR(RequireVisible(ctx, r.spec.tenant, r.spec.name));
    if (ctx.AtLeast(Role::kTenantAdmin) || r.spec.created_by == ctx.key_id) return Status::Ok();
    return Status::PermissionDenied("service '" + r.spec.name + "' was created by '" +
                                    r.spec.created_by +
                                    "': a member may change only the services it created; ask "
                                    "a tenant-admin of '" +
                                    r.spec.tenant + "'");
  };
}

Status CheckNamed(const std::string& tenant, const std::string& name) {
  GPUPOOL_RETURN_IF_ERROR(ValidateTenantPath(tenant, "tenant"));
  if (name.empty()) return Invalid("name", "required");
  return Status::Ok();
}

}  // namespace

// The class and stored registry credential a service names, the caller's to use.
Status ServiceImpl::CheckServiceUse(const CallContext& ctx, const ServiceSpec& spec) const {
  GPUPOOL_RETURN_IF_ERROR(policy()->access.Check(ctx.admin(), spec.tenant, spec.priority_class));
  JobSpec as_job;
  as_job.tenant = spec.tenant;
  as_job.task_template = spec.revision.task_template;
  return CheckStoredRegistryCredential(as_job);
}

void ServiceImpl::CreateService(const CallContext& ctx, const v1::CreateServiceRequest& req,
                                Reply<v1::Service> done) {
  ServiceController* services = options_.services;
  if (services == nullptr) return ApiService::CreateService(ctx, req, std::move(done));
  if (Status s = RequireRole(ctx, Role::kMember, "create service"); !s.ok()) return Fail(done, s);
  Result<ServiceSpec> spec = ServiceSpecFromProto(req.service());
  if (!spec.ok()) return Fail(done, spec.status());
  if (Status s = RequireTenant(ctx, spec->tenant, "service.tenant"); !s.ok()) {
    return Fail(done, s);
  }
  if (Status s = CheckServiceUse(ctx, *spec); !s.ok()) return Fail(done, s);
  spec->created_by = ctx.key_id;
  // The pool must exist and be the caller's to use: a replica would otherwise be refused at
  // every start.
  const std::string pool = spec->pool;
  admin_->GetPool(pool, [this, ctx, services, spec = std::move(spec).value(),
                         done = std::move(done)](Result<PoolView> p) mutable {
    if (!p.ok() || !PoolVisible(ctx, p->pool)) {
      return Fail(done, Invalid("service.pool", "no pool '" + spec.pool + "' this caller may use"));
    }
    timers_->After(std::chrono::milliseconds(0),
                   [services, spec = std::move(spec), done = std::move(done)]() mutable {
                     Answer(done, services->Create(std::move(spec)));
                   });
  });
}

void ServiceImpl::GetService(const CallContext& ctx, const v1::GetServiceRequest& req,
                             Reply<v1::Service> done) {
  ServiceController* services = options_.services;
  if (services == nullptr) return ApiService::GetService(ctx, req, std::move(done));
  if (Status s = CheckNamed(req.tenant(), req.name()); !s.ok()) return Fail(done, s);
  if (Status s = RequireVisible(ctx, req.tenant(), req.name()); !s.ok()) return Fail(done, s);
  Answer(done, services->Get(req.tenant(), req.name()));
}

void ServiceImpl::ListServices(const CallContext& ctx, const v1::ListServicesRequest& req,
                               Reply<v1::ListServicesResponse> done) {
  ServiceController* services = options_.services;
  if (services == nullptr) return ApiService::ListServices(ctx, req, std::move(done));
  Result<std::string> tenant = ListPrefix(ctx, req.tenant(), "tenant");
  if (!tenant.ok()) return Fail(done, tenant.status());
  v1::ListServicesResponse resp;
  for (const ServiceView& v : services->List(*tenant)) *resp.add_services() = ServiceProto(v);
  done(Status::Ok(), std::move(resp));
}

void ServiceImpl::UpdateService(const CallContext& ctx, const v1::UpdateServiceRequest& req,
                                Reply<v1::Service> done) {
  ServiceController* services = options_.services;
  if (services == nullptr) return ApiService::UpdateService(ctx, req, std::move(done));
  if (Status s = RequireRole(ctx, Role::kMember, "update service"); !s.ok()) return Fail(done, s);
  Result<ServiceSpec> spec = ServiceSpecFromProto(req.service());
  if (!spec.ok()) return Fail(done, spec.status());
  if (Status s = RequireVisible(ctx, spec->tenant, spec->name); !s.ok()) return Fail(done, s);
  if (Status s = CheckServiceUse(ctx, *spec); !s.ok()) return Fail(done, s);
  timers_->After(std::chrono::milliseconds(0),
                 [ctx, services, spec = std::move(spec).value(), done = std::move(done)]() mutable {
                   Result<ServiceView> v = services->Update(
                       spec.tenant, spec.name, ChangeCheck(ctx), [&spec](ServiceSpec* current) {
                         spec.created_by = current->created_by;
                         *current = spec;
                         return Status::Ok();
                       });
                   Answer(done, v);
                 });
}

void ServiceImpl::RollbackService(const CallContext& ctx, const v1::RollbackServiceRequest& req,
                                  Reply<v1::Service> done) {
  ServiceController* services = options_.services;
  if (services == nullptr) return ApiService::RollbackService(ctx, req, std::move(done));
  if (Status s = RequireRole(ctx, Role::kMember, "roll back service"); !s.ok()) {
    return Fail(done, s);
  }
  if (Status s = CheckNamed(req.tenant(), req.name()); !s.ok()) return Fail(done, s);
  timers_->After(std::chrono::milliseconds(0), [ctx, services, req, done = std::move(done)] {
    Answer(done, services->Rollback(req.tenant(), req.name(), ChangeCheck(ctx)));
  });
}

void ServiceImpl::DeleteService(const CallContext& ctx, const v1::DeleteServiceRequest& req,
                                Reply<v1::DeleteServiceResponse> done) {
  ServiceController* services = options_.services;
  if (services == nullptr) return ApiService::DeleteService(ctx, req, std::move(done));
  if (Status s = RequireRole(ctx, Role::kMember, "delete service"); !s.ok()) return Fail(done, s);
  if (Status s = CheckNamed(req.tenant(), req.name()); !s.ok()) return Fail(done, s);
  timers_->After(std::chrono::milliseconds(0), [ctx, services, req, done = std::move(done)] {
    Status s = services->Delete(req.tenant(), req.name(), ChangeCheck(ctx));
    if (!s.ok()) return Fail(done, s);
    done(Status::Ok(), v1::DeleteServiceResponse{});
  });
}

}  // namespace gpupool::api
