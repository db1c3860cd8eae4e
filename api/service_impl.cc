#include "api/service_impl.h"

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include "api/convert.h"
#include "api/service_internal.h"
#include "pool/catalog.h"
#include "scheduler/core.h"
#include "scheduler/core_loop.h"
#include "scheduler/metrics.h"

namespace gpupool::api {
namespace {

bool PoolVisible(const CallContext& ctx, const PoolRecord& pool) {
  if (ctx.admin() || pool.visibility == Visibility::kPublic) return true;
  for (const std::string& t : pool.allowed_tenants) {
    if (TenantWithin(ctx.scope, t)) return true;
  }
  return false;
}

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

ServiceImpl::ServiceImpl(Core* core, CoreLoop* loop, LogFetcher* logs, ServiceOptions options)
    : core_(core),
      loop_(loop),
      logs_(logs),
      options_(std::move(options)),
      timers_(std::make_unique<Timers>()) {
  if (options_.catalog == nullptr) options_.catalog = &Catalog::Builtin();
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
  if (Status s = RequireRole(ctx, Role::kMember, "submit job"); !s.ok()) {
    return refuse("denied", s);
  }
  if (Status s = RequireTenant(ctx, spec->tenant, "spec.tenant"); !s.ok()) {
    return refuse("denied", s);
  }
  if (options_.priority_access != nullptr) {
    Status s = options_.priority_access->Check(ctx.admin(), spec->tenant, spec->priority_class);
    if (!s.ok()) return refuse("denied", s);
  }
  if (options_.submit_limiter != nullptr && !ctx.admin()) {  // last: a refused call takes no token
    if (Status s = options_.submit_limiter->Admit(spec->tenant); !s.ok()) {
      return refuse("throttled", s);
    }
  }
  loop_->Post([core = core_, spec = std::move(spec).value(), done = std::move(done)]() mutable {
    core->SubmitJob(std::move(spec), [done = std::move(done)](Result<JobRecord> r) {
      if (!r.ok()) return Fail(done, r.status());
      v1::SubmitJobResponse resp;
      resp.set_job_id(std::to_string(r->id));
      ToProto(*r, resp.mutable_job());
      done(Status::Ok(), std::move(resp));
    });
  });
}

void ServiceImpl::GetJob(const CallContext& ctx, const v1::GetJobRequest& req,
                         Reply<v1::Job> done) {
  Result<int64_t> id = JobIdFromString(req.job_id());
  if (!id.ok()) return Fail(done, id.status());
  loop_->Post([core = core_, ctx, id = *id, done = std::move(done)] {
    Result<JobRecord> job = core->GetJob(id);
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
  loop_->Post([core = core_, f = std::move(filter).value(), done = std::move(done)] {
    JobPage page = core->ListJobs(f);
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
  loop_->Post([core = core_, ctx, id = *id, reason = std::move(reason), done = std::move(done)] {
    Result<JobRecord> job = core->GetJob(id);
    if (!job.ok()) return Fail(done, job.status());
    if (Status s = RequireJobAccess(ctx, *job); !s.ok()) return Fail(done, s);
    core->CancelJob(id, reason, ReplyWith<JobRecord, v1::Job>(done));
  });
}

namespace {

// One WatchJob stream. `finished` is set once: by the terminal event, an error or Cancel.
struct WatchState {
  std::function<void(const v1::JobEvent&)> on_item;
  std::function<void(Status)> done;
  std::atomic<bool> finished{false};
  std::atomic<bool> unwatch_posted{false};
  int64_t watch_id = 0;  // core thread only

  void Finish(Status s) {
    if (!finished.exchange(true)) done(std::move(s));
  }
  // Posts Unwatch once; the watch id is read on the core thread, after WatchJob returned.
  void PostUnwatch(Core* core, CoreLoop* loop, const std::shared_ptr<WatchState>& self) {
    if (unwatch_posted.exchange(true)) return;
    loop->Post([core, self] {
      if (self->watch_id != 0) core->Unwatch(self->watch_id);
      self->watch_id = 0;
    });
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
  Core* core = core_;
  CoreLoop* loop = loop_;
  loop_->Post([core, loop, ctx, id = *id, st] {
    if (st->finished) return;
    Result<JobRecord> job = core->GetJob(id);
    if (!job.ok()) return st->Finish(job.status());
    if (Status s = RequireJobAccess(ctx, *job); !s.ok()) return st->Finish(s);
    Result<int64_t> w = core->WatchJob(id, [core, loop, st](const JobChange& change) {
      if (st->finished) return;
      v1::JobEvent ev;
      ToProto(change, &ev);
      st->on_item(ev);
      if (IsTerminal(change.job.state)) {
        st->PostUnwatch(core, loop, st);
        st->Finish(Status::Ok());
      }
    });
    if (!w.ok()) return st->Finish(w.status());
    st->watch_id = *w;
    if (st->finished) st->PostUnwatch(core, loop, st);  // ended while registering
  });
  return [core, loop, st] {
    st->finished = true;
    st->PostUnwatch(core, loop, st);
  };
}

// ---- Pools ----

void ServiceImpl::CreatePool(const CallContext& ctx, const v1::CreatePoolRequest& req,
                             Reply<v1::Pool> done) {
  if (Status s = RequireAdmin(ctx, "create pool"); !s.ok()) return Fail(done, s);
  if (!req.has_pool()) return Fail(done, Invalid("pool", "must be set"));
  Result<PoolRecord> pool = PoolFromProto(req.pool());
  if (!pool.ok()) return Fail(done, pool.status());
  loop_->Post([core = core_, pool = std::move(pool).value(), done = std::move(done)]() mutable {
    core->CreatePool(std::move(pool), ReplyWith<PoolView, v1::Pool>(done));
  });
}

void ServiceImpl::GetPool(const CallContext& ctx, const v1::GetPoolRequest& req,
                          Reply<v1::Pool> done) {
  if (Status s = ValidateName(req.name(), "name"); !s.ok()) return Fail(done, s);
  loop_->Post([core = core_, ctx, name = req.name(), done = std::move(done)] {
    Result<PoolView> pool = core->GetPool(name);
    if (!pool.ok()) return Fail(done, pool.status());
    if (!PoolVisible(ctx, pool->pool)) {
      return Fail(done, Status::PermissionDenied("pool '" + name + "': private, and '" + ctx.scope +
                                                 "' is not allowed"));
    }
    if (!ctx.admin()) pool->learned = {};  // others' request mix is not a tenant's to see
    v1::Pool out;
    ToProto(*pool, &out);
    done(Status::Ok(), std::move(out));
  });
}

void ServiceImpl::ListPools(const CallContext& ctx, const v1::ListPoolsRequest&,
                            Reply<v1::ListPoolsResponse> done) {
  loop_->Post([core = core_, ctx, done = std::move(done)] {
    v1::ListPoolsResponse resp;
    for (PoolView& p : core->ListPools()) {
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
  loop_->Post([core = core_, patch = std::move(patch).value(), done = std::move(done)] {
    Result<PoolView> current = core->GetPool(patch.name);
    if (!current.ok()) return Fail(done, current.status());
    PoolRecord pool = current->pool;
    if (Status s = ApplyPoolPatch(patch, &pool); !s.ok()) return Fail(done, s);
    core->UpdatePool(std::move(pool), ReplyWith<PoolView, v1::Pool>(done));
  });
}

void ServiceImpl::DeletePool(const CallContext& ctx, const v1::DeletePoolRequest& req,
                             Reply<v1::DeletePoolResponse> done) {
  if (Status s = RequireAdmin(ctx, "delete pool"); !s.ok()) return Fail(done, s);
  if (Status s = ValidateName(req.name(), "name"); !s.ok()) return Fail(done, s);
  loop_->Post([core = core_, name = req.name(), done = std::move(done)] {
    core->DeletePool(name, [done](Result<bool> r) {
      if (!r.ok()) return Fail(done, r.status());
      done(Status::Ok(), v1::DeletePoolResponse{});
    });
  });
}

// ---- Nodes ----

void ServiceImpl::ListNodes(const CallContext& ctx, const v1::ListNodesRequest& req,
                            Reply<v1::ListNodesResponse> done) {
  if (Status s = RequireAdmin(ctx, "list nodes"); !s.ok()) return Fail(done, s);
  if (!req.pool().empty()) {
    if (Status s = ValidateName(req.pool(), "pool"); !s.ok()) return Fail(done, s);
  }
  loop_->Post([core = core_, pool = req.pool(), done = std::move(done)] {
    v1::ListNodesResponse resp;
    for (const NodeView& n : core->ListNodes(pool)) ToProto(n, resp.add_nodes());
    done(Status::Ok(), std::move(resp));
  });
}

void ServiceImpl::GetNode(const CallContext& ctx, const v1::GetNodeRequest& req,
                          Reply<v1::Node> done) {
  if (Status s = RequireAdmin(ctx, "get node"); !s.ok()) return Fail(done, s);
  if (Status s = ValidateName(req.name(), "name"); !s.ok()) return Fail(done, s);
  loop_->Post([core = core_, name = req.name(), done = std::move(done)] {
    Result<NodeView> node = core->GetNode(name);
    if (!node.ok()) return Fail(done, node.status());
    v1::Node out;
    ToProto(*node, &out);
    done(Status::Ok(), std::move(out));
  });
}

void ServiceImpl::SetNodeState(const CallContext& ctx, const v1::NodeActionRequest& req, int state,
                               Reply<v1::Node> done) {
  if (Status s = RequireAdmin(ctx, "change node state"); !s.ok()) return Fail(done, s);
  if (Status s = ValidateName(req.name(), "name"); !s.ok()) return Fail(done, s);
  loop_->Post([core = core_, name = req.name(), state, done = std::move(done)] {
    core->SetNodeState(name, static_cast<NodeState>(state), ReplyWith<NodeView, v1::Node>(done));
  });
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
  loop_->Post([core = core_, node = req.node(), device = req.device(), by = "key " + ctx.key_id,
               done = std::move(done)] {
    core->ClearDeviceFault(node, device, by, ReplyWith<NodeView, v1::Node>(done));
  });
}

// ---- Catalog and health ----

void ServiceImpl::ListGpuModels(const CallContext&, const v1::ListGpuModelsRequest&,
                                Reply<v1::ListGpuModelsResponse> done) {
  v1::ListGpuModelsResponse resp;
  for (const GpuModel& m : options_.catalog->models()) ToProto(m, resp.add_models());
  done(Status::Ok(), std::move(resp));
}

Status ServiceImpl::Ready() const {
  if (!recovered_) return Status::Unavailable("scheduler state is not recovered yet");
  if (options_.store_health) {
    Status s = options_.store_health();
    if (!s.ok()) return Status(s.code(), "store: " + s.message());
  }
  return Status::Ok();
}

}  // namespace gpupool::api
