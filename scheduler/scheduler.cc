// Scheduler (scheduler.h): each call is one closure posted to the core's loop.
#include "scheduler/scheduler.h"

#include <optional>

#include "scheduler/core.h"
#include "scheduler/core_loop.h"

namespace gpupool {

Scheduler::Scheduler(SchedulerOptions options, Clock* clock, Store* store, AgentGateway* agents,
                     SchedulerMetrics* metrics)
    : loop_(std::make_unique<CoreLoop>()) {
  core_ =
      std::make_unique<Core>(std::move(options), clock, store, agents, loop_->executor(), metrics);
}

Scheduler::~Scheduler() { Stop(); }

Status Scheduler::Start(const RecoveredState& state, int64_t epoch,
                        std::chrono::milliseconds tick) {
  // The tick waits for recovery: it is armed only once Recover has run on the loop.
  auto recovered = std::make_shared<std::atomic<bool>>(false);
  Core* core = core_.get();
  std::function<void()> on_tick;
  if (tick.count() > 0) {
    on_tick = [core, recovered] {
      if (recovered->load()) core->Tick();
    };
  }
  loop_->Start(std::move(on_tick), tick.count() > 0 ? tick : std::chrono::milliseconds(1000));
  Status st = loop_->Call([&] { return core->Recover(state, epoch); });
  if (st.ok()) epoch_ = epoch;
  recovered->store(true);
  return st;
}

void Scheduler::Stop() { loop_->Stop(); }

void Scheduler::Post(std::function<void()> fn) { loop_->Post(std::move(fn)); }

void Scheduler::Tick() {
  Post([core = core_.get()] { core->Tick(); });
}

void Scheduler::Flush() {
  loop_->Call([] { return 0; });
}

int64_t Scheduler::epoch() const { return epoch_.load(); }

// ---- Jobs ----

void Scheduler::SubmitJob(JobSpec spec, SchedulerCallback<JobRecord> done) {
  Post([this, core = core_.get(), spec = std::move(spec), done = std::move(done)]() mutable {
    // A keyed submission whose key already names a job gets that job (api/idempotency.h tells
    // a retry from a different request by the digest the job keeps).
    const std::string tenant = spec.tenant, key = spec.idempotency_key;
    if (!key.empty()) {
      if (std::optional<JobRecord> prior = core->FindJobByIdempotencyKey(tenant, key)) {
        return done(std::move(*prior));
      }
    }
    core->SubmitJob(std::move(spec), [this, core, tenant, key, done](Result<JobRecord> r) {
      if (!r.ok() && !key.empty() && r.status().code() == StatusCode::kAlreadyExists) {
        // Another submission with the key committed first (the store's unique index said so):
        // answer with its job, on the loop thread, where it is now in the table.
        return Post([core, tenant, key, done, st = r.status()] {
          std::optional<JobRecord> prior = core->FindJobByIdempotencyKey(tenant, key);
          if (!prior) return done(st);
          done(std::move(*prior));
        });
      }
      done(std::move(r));
    });
  });
}

void Scheduler::GetJob(int64_t id, SchedulerCallback<JobRecord> done) {
  Post([core = core_.get(), id, done = std::move(done)] { done(core->GetJob(id)); });
}

void Scheduler::ListJobs(JobFilter filter, std::function<void(JobPage)> done) {
  Post([core = core_.get(), f = std::move(filter), done = std::move(done)] {
    done(core->ListJobs(f));
  });
}

void Scheduler::CancelJob(int64_t id, std::string reason, JobCheck check,
                          SchedulerCallback<JobRecord> done) {
  Post([core = core_.get(), id, reason = std::move(reason), check = std::move(check),
        done = std::move(done)]() mutable {
    if (check) {
      Result<JobRecord> job = core->GetJob(id);
      if (!job.ok()) return done(job.status());
      if (Status s = check(*job); !s.ok()) return done(s);
    }
    core->CancelJob(id, std::move(reason), std::move(done));
  });
}

void Scheduler::WatchJob(int64_t id, JobCheck check, WatchFn fn,
                         SchedulerCallback<int64_t> registered) {
  Post([core = core_.get(), id, check = std::move(check), fn = std::move(fn),
        registered = std::move(registered)]() mutable {
    if (check) {
      Result<JobRecord> job = core->GetJob(id);
      if (!job.ok()) return registered(job.status());
      if (Status s = check(*job); !s.ok()) return registered(s);
    }
    registered(core->WatchJob(id, std::move(fn)));
  });
}

void Scheduler::Unwatch(int64_t watch_id) {
  Post([core = core_.get(), watch_id] { core->Unwatch(watch_id); });
}

// ---- Pools and nodes ----

void Scheduler::CreatePool(PoolRecord pool, SchedulerCallback<PoolView> done) {
  Post([core = core_.get(), pool = std::move(pool), done = std::move(done)]() mutable {
    core->CreatePool(std::move(pool), std::move(done));
  });
}

void Scheduler::UpdatePool(std::string name, PoolEdit edit, SchedulerCallback<PoolView> done) {
  Post([core = core_.get(), name = std::move(name), edit = std::move(edit),
        done = std::move(done)]() mutable {
    Result<PoolView> current = core->GetPool(name);
    if (!current.ok()) return done(current.status());
    PoolRecord pool = current->pool;
    if (Status s = edit(&pool); !s.ok()) return done(s);
    core->UpdatePool(std::move(pool), std::move(done));
  });
}

void Scheduler::DeletePool(std::string name, SchedulerCallback<bool> done) {
  Post([core = core_.get(), name = std::move(name), done = std::move(done)]() mutable {
    core->DeletePool(name, std::move(done));
  });
}

void Scheduler::GetPool(std::string name, SchedulerCallback<PoolView> done) {
  Post([core = core_.get(), name = std::move(name), done = std::move(done)] {
    done(core->GetPool(name));
  });
}

void Scheduler::ListPools(std::function<void(std::vector<PoolView>)> done) {
  Post([core = core_.get(), done = std::move(done)] { done(core->ListPools()); });
}

void Scheduler::ListNodes(std::string pool, std::function<void(std::vector<NodeView>)> done) {
  Post([core = core_.get(), pool = std::move(pool), done = std::move(done)] {
    done(core->ListNodes(pool));
  });
}

void Scheduler::GetNode(std::string name, SchedulerCallback<NodeView> done) {
  Post([core = core_.get(), name = std::move(name), done = std::move(done)] {
    done(core->GetNode(name));
  });
}

void Scheduler::SetNodeState(std::string name, NodeState state, SchedulerCallback<NodeView> done) {
  Post([core = core_.get(), name = std::move(name), state, done = std::move(done)]() mutable {
    core->SetNodeState(name, state, std::move(done));
  });
}

void Scheduler::RecordEvent(EventRecord event, SchedulerCallback<bool> done) {
  Post([core = core_.get(), event = std::move(event), done = std::move(done)]() mutable {
    core->RecordEvent(std::move(event), std::move(done));
  });
}

void Scheduler::ClearDeviceFault(std::string node, std::string device, std::string by,
                                 SchedulerCallback<NodeView> done) {
  Post([core = core_.get(), node = std::move(node), device = std::move(device), by = std::move(by),
        done = std::move(done)]() mutable {
    core->ClearDeviceFault(node, device, by, std::move(done));
  });
}

void Scheduler::SetDeviceSlots(std::string node, std::string device, int32_t slots, std::string by,
                               SchedulerCallback<NodeView> done) {
  Post([core = core_.get(), node = std::move(node), device = std::move(device), slots,
        by = std::move(by), done = std::move(done)]() mutable {
    core->SetDeviceSlots(node, device, slots, by, std::move(done));
  });
}

void Scheduler::SetMigLayout(std::string node, std::string gpu, std::string layout, std::string by,
                             SchedulerCallback<NodeView> done) {
  Post([core = core_.get(), node = std::move(node), gpu = std::move(gpu),
        layout = std::move(layout), by = std::move(by), done = std::move(done)]() mutable {
    core->SetMigLayout(node, gpu, layout, by, std::move(done));
  });
}

void Scheduler::FenceNode(std::string name, std::string by, SchedulerCallback<NodeView> done) {
  Post([core = core_.get(), name = std::move(name), by = std::move(by),
        done = std::move(done)]() mutable { core->FenceNode(name, by, std::move(done)); });
}

// ---- Tenants and quotas ----

void Scheduler::CreateTenant(TenantRecord tenant, SchedulerCallback<TenantView> done) {
  Post([core = core_.get(), t = std::move(tenant), done = std::move(done)]() mutable {
    core->CreateTenant(std::move(t), std::move(done));
  });
}

void Scheduler::DeleteTenant(std::string path, SchedulerCallback<bool> done) {
  Post([core = core_.get(), path = std::move(path), done = std::move(done)]() mutable {
    core->DeleteTenant(path, std::move(done));
  });
}

void Scheduler::GetTenant(std::string path, SchedulerCallback<TenantView> done) {
  Post([core = core_.get(), path = std::move(path), done = std::move(done)] {
    done(core->GetTenant(path));
  });
}

void Scheduler::ListTenants(std::string prefix, std::function<void(std::vector<TenantView>)> done) {
  Post([core = core_.get(), prefix = std::move(prefix), done = std::move(done)] {
    done(core->ListTenants(prefix));
  });
}

void Scheduler::SetQuota(QuotaRecord quota, SchedulerCallback<QuotaView> done) {
  Post([core = core_.get(), q = std::move(quota), done = std::move(done)]() mutable {
    core->SetQuota(std::move(q), std::move(done));
  });
}

void Scheduler::DeleteQuota(std::string tenant, std::string pool, SchedulerCallback<bool> done) {
  Post([core = core_.get(), tenant = std::move(tenant), pool = std::move(pool),
        done = std::move(done)]() mutable { core->DeleteQuota(tenant, pool, std::move(done)); });
}

void Scheduler::GetQuota(std::string tenant, std::string pool, SchedulerCallback<QuotaView> done) {
  Post([core = core_.get(), tenant = std::move(tenant), pool = std::move(pool),
        done = std::move(done)] { done(core->GetQuota(tenant, pool)); });
}

void Scheduler::ListQuotas(std::string tenant_prefix, std::string pool,
                           std::function<void(std::vector<QuotaView>)> done) {
  Post([core = core_.get(), prefix = std::move(tenant_prefix), pool = std::move(pool),
        done = std::move(done)] { done(core->ListQuotas(prefix, pool)); });
}

void Scheduler::SetPolicy(SchedulerOptions policy, SchedulerCallback<bool> done) {
  Post([core = core_.get(), policy = std::move(policy), done = std::move(done)] {
    Status st = core->SetPolicy(policy);
    if (!st.ok()) return done(st);
    done(true);
  });
}

// ---- Agent events ----

void Scheduler::OnAgentRegister(AgentRegistration reg, SchedulerCallback<RegistrationResult> done) {
  Post([core = core_.get(), reg = std::move(reg), done = std::move(done)]() mutable {
    core->OnAgentRegister(std::move(reg), std::move(done));
  });
}

void Scheduler::OnHeartbeat(std::string node, std::vector<DeviceHealth> devices) {
  Post([core = core_.get(), node = std::move(node), devices = std::move(devices)] {
    core->OnHeartbeat(node, devices);
  });
}

void Scheduler::OnLeaseHeartbeat(std::string node, std::vector<DeviceHealth> devices,
                                 std::function<void(LeaseAnswer)> done) {
  Post([core = core_.get(), node = std::move(node), devices = std::move(devices),
        done = std::move(done)] { done(core->OnLeaseHeartbeat(node, devices)); });
}

void Scheduler::OnTaskReport(TaskReport report) {
  Post([core = core_.get(), r = std::move(report)] { core->OnTaskReport(r); });
}

void Scheduler::OnNodeImages(std::string node, std::vector<NodeImage> images) {
  Post([core = core_.get(), node = std::move(node), images = std::move(images)] {
    core->OnNodeImages(node, images);
  });
}

}  // namespace gpupool
