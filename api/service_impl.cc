#include "api/service_impl.h"

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include "api/convert.h"
#include "api/idempotency.h"
#include "api/service_internal.h"
#include "pool/catalog.h"
#include "scheduler/metrics.h"
#include "scheduler/scheduler.h"

namespace gpupool::api {

bool PoolVisible(const CallContext& ctx, const PoolRecord& pool) {
  if (ctx.admin() || pool.visibility == Visibility::kPublic) return true;
  for (const std::string& t : pool.allowed_tenants) {
    if (TenantWithin(ctx.scope, t)) return true;
  }
  return false;
}

namespace {

v1::Job JobProto(const JobRecord& j) {
  v1::Job out;
  ToProto(j, &out);
  return out;
}

}  // namespace

Status RequireAdmin(const CallContext& ctx, std::string_view what) {
  if (ctx.admin()) return Status::Ok();
  return Status::PermissionDenied(std::string(what) + ": requires an admin; '" + ctx.scope +
                                  "' is not one");
}

// A non-admin may act only for its own tenant or tenants below it.
Status RequireTenant(const CallContext& ctx, const std::string& tenant, std::string_view what) {
  if (ctx.admin()) return Status::Ok();
  if (ctx.scope.empty()) {
    return Status::PermissionDenied(std::string(what) + ": the caller has no tenant");
  }
  if (TenantWithin(tenant, ctx.scope)) return Status::Ok();
  return Status::PermissionDenied(std::string(what) + ": tenant '" + tenant + "' is not '" +
                                  ctx.scope + "' or below it");
}

Result<std::string> ListPrefix(const CallContext& ctx, std::string prefix, std::string_view field) {
  if (!prefix.empty()) GPUPOOL_RETURN_IF_ERROR(ValidateTenantPath(prefix, field));
  if (!ctx.admin()) {
    if (prefix.empty()) prefix = ctx.scope;
    GPUPOOL_RETURN_IF_ERROR(RequireTenant(ctx, prefix, field));
  }
  return prefix;
}

Status RequireRole(const CallContext& ctx, Role role, std::string_view what) {
  if (ctx.AtLeast(role)) return Status::Ok();
  return Status::PermissionDenied(std::string(what) + ": requires the role " +
                                  std::string(RoleName(role)) + " or above; the caller is " +
                                  std::string(RoleName(ctx.role)));
}

Status RequireTenantAdminBelow(const CallContext& ctx, const std::string& tenant,
                               std::string_view what) {
  if (ctx.admin()) return Status::Ok();
  GPUPOOL_RETURN_IF_ERROR(RequireRole(ctx, Role::kTenantAdmin, what));
  if (!ctx.scope.empty() && tenant != ctx.scope && TenantWithin(tenant, ctx.scope)) {
    return Status::Ok();
  }
  return Status::PermissionDenied(std::string(what) + ": tenant '" + tenant +
                                  "' is not below the caller's tenant '" + ctx.scope + "'");
}

Status RequireJobAccess(const CallContext& ctx, const JobRecord& job) {
  return RequireTenant(ctx, job.spec.tenant, "job " + std::to_string(job.id));
}

// A member cancels only the jobs it submitted; a tenant-admin any job of its subtree. The
// submitter is named: GetJob shows it to every reader of the job anyway.
Status RequireCancelAccess(const CallContext& ctx, const JobRecord& job) {
  GPUPOOL_RETURN_IF_ERROR(RequireJobAccess(ctx, job));
  if (ctx.AtLeast(Role::kTenantAdmin) || job.spec.submitted_by == ctx.key_id) return Status::Ok();
  const std::string by = job.spec.submitted_by.empty()
                             ? std::string("before submitters were recorded")
                             : "by '" + job.spec.submitted_by + "'";
  return Status::PermissionDenied("job " + std::to_string(job.id) + " was submitted " + by +
                                  ", not by this caller ('" + ctx.key_id +
                                  "'): a member may cancel only the jobs it submitted; ask a "
                                  "tenant-admin of '" +
                                  job.spec.tenant + "'");
}

ServiceImpl::Timers::Timers() : thread_([this] { io_.run(); }) {}

ServiceImpl::Timers::~Timers() {
  guard_.reset();
  io_.stop();
  thread_.join();
}

std::function<void()> ServiceImpl::Timers::After(std::chrono::milliseconds delay,
                                                 std::function<void()> fn) {
  auto timer = std::make_shared<boost::asio::steady_timer>(io_, delay);
  timer->async_wait([timer, fn = std::move(fn)](const boost::system::error_code& ec) {
    if (!ec) fn();
  });
  return [this, timer] { boost::asio::post(io_, [timer] { timer->cancel(); }); };
}

ServiceImpl::ServiceImpl(JobsPort* jobs, AdminPort* admin, LogFetcher* logs, ServiceOptions options)
    : jobs_(jobs),
      admin_(admin),
      logs_(logs),
      options_(std::move(options)),
      timers_(std::make_unique<Timers>()) {
  if (options_.catalog == nullptr) options_.catalog = &Catalog::Builtin();
  ServicePolicy policy;
  if (options_.scheduler != nullptr) policy.scheduler = *options_.scheduler;
  if (options_.priority_access != nullptr) policy.access = *options_.priority_access;
  SetPolicy(std::move(policy));
}

void ServiceImpl::SetPolicy(ServicePolicy policy) {
  auto p = std::make_shared<const ServicePolicy>(std::move(policy));
  std::lock_guard lock(policy_mu_);
  policy_ = std::move(p);
}

std::shared_ptr<const ServicePolicy> ServiceImpl::policy() const {
  std::lock_guard lock(policy_mu_);
  return policy_;
}

ServiceImpl::~ServiceImpl() = default;

// ---- Jobs ----

void ServiceImpl::SubmitJob(const CallContext& ctx, const v1::SubmitJobRequest& req,
                            Reply<v1::SubmitJobResponse> done) {
  // Refused at the edge never reaches the core, so it is counted here.
  auto refuse = [&](const char* outcome, Status st) {
    if (options_.metrics != nullptr) options_.metrics->Submission(outcome);
    Fail(done, std::move(st));
  };
  if (!req.has_spec()) return refuse("invalid", Invalid("spec", "must be set"));
  Result<JobSpec> spec = JobSpecFromProto(req.spec());
  if (!spec.ok()) return refuse("invalid", spec.status());
  if (!req.idempotency_key().empty()) {
    if (Status s = ValidateIdempotencyKey(req.idempotency_key()); !s.ok()) {
      return refuse("invalid", s);
    }
    spec->idempotency_key = req.idempotency_key();
    spec->request_digest = SpecDigest(req.spec());
  }
  spec->submitted_by = ctx.key_id;
  if (Status s = RequireRole(ctx, Role::kMember, "submit job"); !s.ok()) {
    return refuse("denied", s);
  }
  if (Status s = RequireTenant(ctx, spec->tenant, "spec.tenant"); !s.ok()) {
    return refuse("denied", s);
  }
  if (Status s = policy()->access.Check(ctx.admin(), spec->tenant, spec->priority_class); !s.ok()) {
    return refuse("denied", s);
  }
  // After the tenant check: a caller learns nothing of another tenant's credentials.
  if (Status s = CheckStoredRegistryCredential(*spec); !s.ok()) return refuse("invalid", s);
  if (options_.submit_limiter != nullptr && !ctx.admin()) {  // last: a refused call takes no token
    if (Status s = options_.submit_limiter->Admit(spec->tenant); !s.ok()) {
      return refuse("throttled", s);
    }
  }
  const std::string digest = spec->request_digest;
  const bool keyed = !spec->idempotency_key.empty();
  jobs_->SubmitJob(std::move(spec).value(),
                   [keyed, digest, done = std::move(done)](Result<JobRecord> r) {
                     if (!r.ok()) return Fail(done, r.status());
                     v1::SubmitJobResponse resp;
                     // A keyed submission may answer with the job an earlier request made
                     // (api/idempotency.h).
                     if (keyed) {
                       if (Status st = ReplayOf(*r, digest, &resp); !st.ok()) return Fail(done, st);
                       return done(Status::Ok(), std::move(resp));
                     }
                     resp.set_job_id(std::to_string(r->id));
                     ToProto(*r, resp.mutable_job());
                     done(Status::Ok(), std::move(resp));
                   });
}

void ServiceImpl::GetJob(const CallContext& ctx, const v1::GetJobRequest& req,
                         Reply<v1::Job> done) {
  Result<int64_t> id = JobIdFromString(req.job_id());
  if (!id.ok()) return Fail(done, id.status());
  jobs_->GetJob(*id, [ctx, done = std::move(done)](Result<JobRecord> job) {
    if (!job.ok()) return Fail(done, job.status());
    if (Status s = RequireJobAccess(ctx, *job); !s.ok()) return Fail(done, s);
    done(Status::Ok(), JobProto(*job));
  });
}

void ServiceImpl::ListJobs(const CallContext& ctx, const v1::ListJobsRequest& req,
                           Reply<v1::ListJobsResponse> done) {
  Result<JobFilter> filter = JobFilterFromProto(req);
  if (!filter.ok()) return Fail(done, filter.status());
  if (!ctx.admin()) {
    if (filter->tenant.empty()) filter->tenant = ctx.scope;
    if (Status s = RequireTenant(ctx, filter->tenant, "tenant"); !s.ok()) return Fail(done, s);
  }
  jobs_->ListJobs(std::move(filter).value(), [done = std::move(done)](const JobPage& page) {
    v1::ListJobsResponse resp;
    for (const JobRecord& j : page.jobs) ToProto(j, resp.add_jobs());
    resp.set_next_page_token(EncodePageToken(page.next_after_id));
    done(Status::Ok(), std::move(resp));
  });
}

void ServiceImpl::CancelJob(const CallContext& ctx, const v1::CancelJobRequest& req,
                            Reply<v1::Job> done) {
  if (Status s = RequireRole(ctx, Role::kMember, "cancel job"); !s.ok()) return Fail(done, s);
  Result<int64_t> id = JobIdFromString(req.job_id());
  if (!id.ok()) return Fail(done, id.status());
  if (req.reason().size() > 1024) return Fail(done, Invalid("reason", "longer than 1024 bytes"));
  std::string reason = req.reason();
  if (reason.empty()) {
    reason = "cancelled by " + (ctx.scope.empty() ? std::string("an admin") : ctx.scope);
  }
  jobs_->CancelJob(
      *id, std::move(reason), [ctx](const JobRecord& job) { return RequireCancelAccess(ctx, job); },
      ReplyWith<JobRecord, v1::Job>(done));
}

namespace {

// One WatchJob stream. `finished` is set once: by the terminal event, an error or Cancel.
struct WatchState {
  std::function<void(const v1::JobEvent&)> on_item;
  std::function<void(Status)> done;
  std::atomic<bool> finished{false};
  // Set once the watch is registered (on the core's thread); taken (exchanged to 0) by whoever
  // unwatches, so it is unwatched exactly once whether the stream ends before or after the
  // registration: the ender sets `finished` then takes the id; the registration stores the id
  // then checks `finished` (sequentially consistent atomics).
  std::atomic<int64_t> watch_id{0};

  void Unwatch(JobsPort* jobs) {
    if (int64_t id = watch_id.exchange(0); id != 0) jobs->Unwatch(id);
  }

  void Finish(Status s) {
    if (!finished.exchange(true)) done(std::move(s));
  }
};

}  // namespace

Cancel ServiceImpl::WatchJob(const CallContext& ctx, const v1::WatchJobRequest& req,
                             std::function<void(const v1::JobEvent&)> on_item,
                             std::function<void(Status)> done) {
  Result<int64_t> id = JobIdFromString(req.job_id());
  if (!id.ok()) {
    done(id.status());
    return [] {};
  }
  auto st = std::make_shared<WatchState>();
  st->on_item = std::move(on_item);
  st->done = std::move(done);
  JobsPort* jobs = jobs_;
  jobs_->WatchJob(
      *id, [ctx](const JobRecord& job) { return RequireJobAccess(ctx, job); },
      [jobs, st](const JobChange& change) {
        if (st->finished) return;
        v1::JobEvent ev;
        ToProto(change, &ev);
        st->on_item(ev);
        if (IsTerminal(change.job.state)) {
          st->Unwatch(jobs);
          st->Finish(Status::Ok());
        }
      },
      [jobs, st](Result<int64_t> w) {
        if (!w.ok()) return st->Finish(w.status());
        st->watch_id = *w;
        if (st->finished) st->Unwatch(jobs);  // ended while registering
      });
  return [jobs, st] {
    st->finished = true;
    st->Unwatch(jobs);
  };
}

// ---- Pools ----

void ServiceImpl::CreatePool(const CallContext& ctx, const v1::CreatePoolRequest& req,
                             Reply<v1::Pool> done) {
  if (Status s = RequireAdmin(ctx, "create pool"); !s.ok()) return Fail(done, s);
  if (!req.has_pool()) return Fail(done, Invalid("pool", "must be set"));
  Result<PoolRecord> pool = PoolFromProto(req.pool());
  if (!pool.ok()) return Fail(done, pool.status());
  admin_->CreatePool(std::move(pool).value(), ReplyWith<PoolView, v1::Pool>(done));
}

void ServiceImpl::GetPool(const CallContext& ctx, const v1::GetPoolRequest& req,
                          Reply<v1::Pool> done) {
  if (Status s = ValidateName(req.name(), "name"); !s.ok()) return Fail(done, s);
  admin_->GetPool(
      req.name(), [ctx, name = req.name(), done = std::move(done)](Result<PoolView> pool) {
        if (!pool.ok()) return Fail(done, pool.status());
        if (!PoolVisible(ctx, pool->pool)) {
          return Fail(done, Status::PermissionDenied("pool '" + name + "': private, and '" +
                                                     ctx.scope + "' is not allowed"));
        }
        if (!ctx.admin()) pool->learned = {};  // others' request mix is not a tenant's to see
        v1::Pool out;
        ToProto(*pool, &out);
        done(Status::Ok(), std::move(out));
      });
}

void ServiceImpl::ListPools(const CallContext& ctx, const v1::ListPoolsRequest&,
                            Reply<v1::ListPoolsResponse> done) {
  admin_->ListPools([ctx, done = std::move(done)](std::vector<PoolView> pools) {
    v1::ListPoolsResponse resp;
    for (PoolView& p : pools) {
      if (!ctx.admin()) p.learned = {};  // as GetPool
      if (PoolVisible(ctx, p.pool)) ToProto(p, resp.add_pools());
    }
    done(Status::Ok(), std::move(resp));
  });
}

void ServiceImpl::UpdatePool(const CallContext& ctx, const v1::UpdatePoolRequest& req,
                             Reply<v1::Pool> done) {
  if (Status s = RequireAdmin(ctx, "update pool"); !s.ok()) return Fail(done, s);
  if (!req.has_pool()) return Fail(done, Invalid("pool", "must be set"));
  Result<PoolPatch> patch = PoolPatchFromProto(req);
  if (!patch.ok()) return Fail(done, patch.status());
  std::string name = patch->name;
  admin_->UpdatePool(
      std::move(name),
      [patch = std::move(patch).value()](PoolRecord* pool) { return ApplyPoolPatch(patch, pool); },
      ReplyWith<PoolView, v1::Pool>(done));
}

void ServiceImpl::DeletePool(const CallContext& ctx, const v1::DeletePoolRequest& req,
                             Reply<v1::DeletePoolResponse> done) {
  if (Status s = RequireAdmin(ctx, "delete pool"); !s.ok()) return Fail(done, s);
  if (Status s = ValidateName(req.name(), "name"); !s.ok()) return Fail(done, s);
  admin_->DeletePool(req.name(), [done = std::move(done)](Result<bool> r) {
    if (!r.ok()) return Fail(done, r.status());
    done(Status::Ok(), v1::DeletePoolResponse{});
  });
}

// ---- Nodes ----

void ServiceImpl::ListNodes(const CallContext& ctx, const v1::ListNodesRequest& req,
                            Reply<v1::ListNodesResponse> done) {
  if (Status s = RequireAdmin(ctx, "list nodes"); !s.ok()) return Fail(done, s);
  if (!req.pool().empty()) {
    if (Status s = ValidateName(req.pool(), "pool"); !s.ok()) return Fail(done, s);
  }
  admin_->ListNodes(req.pool(), [done = std::move(done)](const std::vector<NodeView>& nodes) {
    v1::ListNodesResponse resp;
    for (const NodeView& n : nodes) ToProto(n, resp.add_nodes());
    done(Status::Ok(), std::move(resp));
  });
}

void ServiceImpl::GetNode(const CallContext& ctx, const v1::GetNodeRequest& req,
                          Reply<v1::Node> done) {
  if (Status s = RequireAdmin(ctx, "get node"); !s.ok()) return Fail(done, s);
  if (Status s = ValidateName(req.name(), "name"); !s.ok()) return Fail(done, s);
  admin_->GetNode(req.name(), ReplyWith<NodeView, v1::Node>(done));
}

void ServiceImpl::SetNodeState(const CallContext& ctx, const v1::NodeActionRequest& req, int state,
                               Reply<v1::Node> done) {
  if (Status s = RequireAdmin(ctx, "change node state"); !s.ok()) return Fail(done, s);
  if (Status s = ValidateName(req.name(), "name"); !s.ok()) return Fail(done, s);
  admin_->SetNodeState(req.name(), static_cast<NodeState>(state),
                       ReplyWith<NodeView, v1::Node>(done));
}

void ServiceImpl::CordonNode(const CallContext& ctx, const v1::NodeActionRequest& req,
                             Reply<v1::Node> done) {
  SetNodeState(ctx, req, static_cast<int>(NodeState::kCordoned), std::move(done));
}

void ServiceImpl::UncordonNode(const CallContext& ctx, const v1::NodeActionRequest& req,
                               Reply<v1::Node> done) {
  SetNodeState(ctx, req, static_cast<int>(NodeState::kReady), std::move(done));
}

void ServiceImpl::DrainNode(const CallContext& ctx, const v1::NodeActionRequest& req,
                            Reply<v1::Node> done) {
  SetNodeState(ctx, req, static_cast<int>(NodeState::kDraining), std::move(done));
}

void ServiceImpl::ClearDeviceFault(const CallContext& ctx, const v1::ClearDeviceFaultRequest& req,
                                   Reply<v1::Node> done) {
  if (Status s = RequireAdmin(ctx, "clear a device fault"); !s.ok()) return Fail(done, s);
  if (Status s = ValidateName(req.node(), "node"); !s.ok()) return Fail(done, s);
  if (req.device().empty() || req.device().size() > 128) {
    return Fail(done, Status::InvalidArgument("device: must be 1 to 128 characters"));
  }
  admin_->ClearDeviceFault(req.node(), req.device(), "key " + ctx.key_id,
                           ReplyWith<NodeView, v1::Node>(done));
}

void ServiceImpl::SetDeviceSlots(const CallContext& ctx, const v1::SetDeviceSlotsRequest& req,
                                 Reply<v1::Node> done) {
  if (Status s = RequireAdmin(ctx, "set a device's slots"); !s.ok()) return Fail(done, s);
  if (Status s = ValidateName(req.node(), "node"); !s.ok()) return Fail(done, s);
  if (req.device().empty() || req.device().size() > 128) {
    return Fail(done, Status::InvalidArgument("device: must be 1 to 128 characters"));
  }
  if (req.slots() < 0 || req.slots() > kMaxDeviceSlots) {
    return Fail(done, Status::InvalidArgument("slots: " + std::to_string(req.slots()) +
                                              " is outside 0.." + std::to_string(kMaxDeviceSlots)));
  }
  admin_->SetDeviceSlots(req.node(), req.device(), req.slots(), "key " + ctx.key_id,
                         ReplyWith<NodeView, v1::Node>(done));
}

void ServiceImpl::SetMigLayout(const CallContext& ctx, const v1::SetMigLayoutRequest& req,
                               Reply<v1::Node> done) {
  if (Status s = RequireAdmin(ctx, "set a GPU's MIG layout"); !s.ok()) return Fail(done, s);
  if (Status s = ValidateName(req.node(), "node"); !s.ok()) return Fail(done, s);
  if (req.gpu().empty() || req.gpu().size() > 128) {
    return Fail(done, Status::InvalidArgument("gpu: must be 1 to 128 characters"));
  }
  if (req.layout().size() > 256) {
    return Fail(done, Status::InvalidArgument("layout: longer than 256 characters"));
  }
  admin_->SetMigLayout(req.node(), req.gpu(), req.layout(), "key " + ctx.key_id,
                       ReplyWith<NodeView, v1::Node>(done));
}

void ServiceImpl::FenceNode(const CallContext& ctx, const v1::NodeActionRequest& req,
                            Reply<v1::Node> done) {
  if (Status s = RequireAdmin(ctx, "fence a node"); !s.ok()) return Fail(done, s);
  if (Status s = ValidateName(req.name(), "name"); !s.ok()) return Fail(done, s);
  admin_->FenceNode(req.name(), "key " + ctx.key_id, ReplyWith<NodeView, v1::Node>(done));
}

// ---- Health ----

Status ServiceImpl::Ready() const {
  if (!recovered_) return Status::Unavailable("scheduler state is not recovered yet");
  if (options_.store_health) {
    Status s = options_.store_health();
    if (!s.ok()) return Status(s.code(), "store: " + s.message());
  }
  // Changes wait for the audit log's backlog (api/audit.h): until it is written a submission
  // would be refused, so the daemon is not ready either.
  if (options_.audit != nullptr) {
    Status s = options_.audit->AdmitMutation();
    if (!s.ok()) return Status(s.code(), "audit log: " + s.message());
  }
  return Status::Ok();
}

}  // namespace gpupool::api
