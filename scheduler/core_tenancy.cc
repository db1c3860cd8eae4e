// Core: tenants and quotas (admin), quota accounting of tasks, fair-share keys, tenant metrics.
// The rules live in scheduler/tenancy.h; this file persists changes and keeps usage current.
#include <algorithm>

#include "base/log.h"
#include "scheduler/core.h"
#include "scheduler/core_state.h"

namespace gpupool {
namespace {

// The share of a pool a group without a guarantee is weighed against: 1% of what it offers.
constexpr int64_t kImplicitSharePermille = 10;

bool UnderPrefix(const std::string& path, const std::string& prefix) {
  return prefix.empty() || path == prefix ||
         (path.size() > prefix.size() && path.starts_with(prefix) && path[prefix.size()] == '/');
}

QuotaAmount Borrowed(const QuotaAmount& used, const QuotaAmount& guaranteed) {
  QuotaAmount b;
  b.resources.milli_tflops =
      std::max<int64_t>(0, used.resources.milli_tflops - guaranteed.resources.milli_tflops);
  b.resources.vram_mib =
      std::max<int64_t>(0, used.resources.vram_mib - guaranteed.resources.vram_mib);
  b.devices = std::max(0, used.devices - guaranteed.devices);
  return b;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Accounting

const PriorityClass* Core::State::ClassOf(const JobEntry& job) const {
  auto it = options.priority_classes.find(job.head.spec.priority_class);
  return it == options.priority_classes.end() ? nullptr : &it->second;
}

QuotaAmount Core::State::Estimate(const ResourceRequest& r) const {
  QuotaAmount a;
  switch (r.shape) {
    case RequestShape::kFractional:
    case RequestShape::kSku:
      a.resources = r.fractional;
      break;
    case RequestShape::kWholeGpus:
      a.devices = r.gpu_count;
      break;
    case RequestShape::kMig:
      a.devices = 1;
      break;
  }
  return a;
}

QuotaAmount Core::State::UsageOf(const placement::Allocation& a) {
  QuotaAmount u;
  for (const placement::Grant& g : a.grants) {
    u.resources += g.amount;
    u.devices += g.exclusive ? 1 : 0;
  }
  return u;
}

void Core::State::Charge(JobEntry& job, int32_t index) {
  Task& rt = job.task(index);
  if (rt.charged) return;
  rt.usage = UsageOf(rt.allocation);
  rt.charged = true;
  book.Charge(job.head.spec.pool, job.head.spec.tenant, rt.usage, +1, clock->NowMicros());
  active[job.head.spec.pool].insert({job.head.id, index});
}

void Core::State::Uncharge(JobEntry& job, int32_t index) {
  Task& rt = job.task(index);
  if (!rt.charged) return;
  rt.charged = false;
  book.Charge(job.head.spec.pool, job.head.spec.tenant, rt.usage, -1, clock->NowMicros());
  auto it = active.find(job.head.spec.pool);
  if (it != active.end()) it->second.erase({job.head.id, index});
}

std::pair<double, double> Core::State::ShareOf(PassState& pass, const FairKey& key) {
  auto implicit = pass.implicit_share.find(key.pool);
  if (implicit == pass.implicit_share.end()) {
    QuotaAmount w;
    if (const PoolEntry* pool = FindPool(key.pool)) {
      Resources offered = PoolCapacity(*pool).offered;
      w.resources.milli_tflops =
          std::max<int64_t>(1, offered.milli_tflops * kImplicitSharePermille / 1000);
      w.resources.vram_mib = std::max<int64_t>(1, offered.vram_mib * kImplicitSharePermille / 1000);
    }
    implicit = pass.implicit_share.emplace(key.pool, w).first;
  }
  auto [cached, fresh] = pass.shares.try_emplace(key);
  PassState::CachedShare& c = cached->second;
  if (fresh) c.group = book.GroupOf(key.pool, key.tenant);
  if (c.version != book.version()) {
    c.share.first = book.Share(key.pool, c.group, implicit->second, pass.now);
    c.share.second =
        c.group == key.tenant ? 0 : book.Share(key.pool, key.tenant, implicit->second, pass.now);
    c.version = book.version();
  }
  return c.share;
}

void Core::State::PublishTenantMetrics() {
  for (const auto& [key, q] : book.quotas()) {
    QuotaAmount used = book.Used(q.pool, q.tenant);
    metrics->TenantQuota(q.tenant, q.pool, q.guaranteed, q.limit, used,
                         Borrowed(used, q.guaranteed));
  }
}

// ---------------------------------------------------------------------------------------------
// Admin

namespace {

QuotaView ViewOfQuota(const TenantBook& book, const QuotaRecord& q) {
  QuotaAmount used = book.Used(q.pool, q.tenant);
  return QuotaView{q, used, Borrowed(used, q.guaranteed)};
}

TenantView ViewOfTenant(const TenantBook& book, const TenantRecord& t) {
  TenantView v{t, {}};
  auto& all = book.quotas();
  for (auto it = all.lower_bound({t.path, ""}); it != all.end() && it->first.first == t.path; ++it)
    v.quotas.push_back(ViewOfQuota(book, it->second));
  return v;
}

}  // namespace

void Core::CreateTenant(TenantRecord tenant, Callback<TenantView> done) {
  Status st = s_->book.CheckCreate(tenant);
  if (!st.ok()) {
    done(st);
    return;
  }
  tenant.create_us = s_->clock->NowMicros();
  std::vector<Mutation> batch{
      UpsertTenant{tenant},
      AppendEvent{s_->Event("tenant.created", "tenant/" + tenant.path, "created")}};
  s_->Persist(std::move(batch), [this, tenant, done = std::move(done)](Status stored) {
    if (!stored.ok()) {
      done(stored.WithContext("tenant not stored"));
      return;
    }
    s_->book.PutTenant(tenant);
    done(ViewOfTenant(s_->book, tenant));
  });
}

void Core::DeleteTenant(const std::string& path, Callback<bool> done) {
  Status st = s_->book.CheckDelete(path);
  if (!st.ok()) {
    done(st);
    return;
  }
  std::vector<Mutation> batch{
      gpupool::DeleteTenant{path},
      AppendEvent{s_->Event("tenant.deleted", "tenant/" + path, "deleted with its quotas")}};
  s_->Persist(std::move(batch), [this, path, done = std::move(done)](Status stored) {
    if (!stored.ok()) {
      done(stored.WithContext("tenant not deleted"));
      return;
    }
    s_->book.EraseTenant(path);
    done(true);
    s_->RequestSchedule(this);  // quotas that held work back are gone
  });
}

Result<TenantView> Core::GetTenant(const std::string& path) const {
  auto it = s_->book.tenants().find(path);
  if (it == s_->book.tenants().end()) return Status::NotFound("tenant '" + path + "' not found");
  return ViewOfTenant(s_->book, it->second);
}

std::vector<TenantView> Core::ListTenants(const std::string& prefix) const {
  std::vector<TenantView> out;
  for (auto it = s_->book.tenants().lower_bound(prefix); it != s_->book.tenants().end(); ++it) {
    if (!it->first.starts_with(prefix)) break;
    if (UnderPrefix(it->first, prefix)) out.push_back(ViewOfTenant(s_->book, it->second));
  }
  return out;
}

void Core::SetQuota(QuotaRecord quota, Callback<QuotaView> done) {
  if (s_->FindPool(quota.pool) == nullptr) {
    done(Status::NotFound("pool '" + quota.pool + "' not found"));
    return;
  }
  Status st = s_->book.CheckQuota(quota);
  if (!st.ok()) {
    done(st);
    return;
  }
  const std::string subject = "tenant/" + quota.tenant;
  std::string message = "quota in pool " + quota.pool + ": guaranteed ";
  for (int d = 0; d < 3; ++d) message += (d ? ", " : "") + FormatDimension(quota.guaranteed, d);
  message += "; limit ";
  for (int d = 0; d < 3; ++d) message += (d ? ", " : "") + FormatDimension(quota.limit, d);
  std::vector<Mutation> batch{gpupool::SetQuota{quota},
                              AppendEvent{s_->Event("tenant.quota", subject, message)}};
  s_->Persist(std::move(batch), [this, quota, done = std::move(done)](Status stored) {
    if (!stored.ok()) {
      done(stored.WithContext("quota not stored"));
      return;
    }
    s_->book.PutQuota(quota);
    done(ViewOfQuota(s_->book, quota));
    s_->RequestSchedule(this);
  });
}

void Core::DeleteQuota(const std::string& tenant, const std::string& pool, Callback<bool> done) {
  if (s_->book.Quota(tenant, pool) == nullptr) {
    done(Status::NotFound("quota of '" + tenant + "' in pool '" + pool + "' not found"));
    return;
  }
  std::vector<Mutation> batch{gpupool::DeleteQuota{tenant, pool},
                              AppendEvent{s_->Event("tenant.quota", "tenant/" + tenant,
                                                    "quota in pool " + pool + " deleted")}};
  s_->Persist(std::move(batch), [this, tenant, pool, done = std::move(done)](Status stored) {
    if (!stored.ok()) {
      done(stored.WithContext("quota not deleted"));
      return;
    }
    s_->book.EraseQuota(tenant, pool);
    done(true);
    s_->RequestSchedule(this);
  });
}

Result<QuotaView> Core::GetQuota(const std::string& tenant, const std::string& pool) const {
  const QuotaRecord* q = s_->book.Quota(tenant, pool);
  if (q == nullptr) {
    return Status::NotFound("quota of '" + tenant + "' in pool '" + pool + "' not found");
  }
  return ViewOfQuota(s_->book, *q);
}

std::vector<QuotaView> Core::ListQuotas(const std::string& tenant_prefix,
                                        const std::string& pool) const {
  std::vector<QuotaView> out;
  for (const auto& [key, q] : s_->book.quotas()) {
    if (UnderPrefix(q.tenant, tenant_prefix) && (pool.empty() || q.pool == pool))
      out.push_back(ViewOfQuota(s_->book, q));
  }
  return out;
}

}  // namespace gpupool
