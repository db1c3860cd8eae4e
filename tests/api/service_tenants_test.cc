// ServiceImpl's tenant and quota methods against the real stack: the Scheduler, MemoryStore,
// AgentHub as gateway (tests/api/service_harness.h). The tree rules themselves are the core's and
// are tested in tests/scheduler; these check the edge: validation, rights, conversion (SKU units
// included) and that what is acknowledged is stored.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "api/service_impl.h"
#include "tests/api/service_harness.h"

namespace gpupool::api {
namespace {

using testing::Admin;
using ::testing::HasSubstr;
using testing::ServiceHarness;
using testing::Tenant;

// Synchronous calls of the tenancy methods.
class Tenancy {
 public:
  explicit Tenancy(ServiceHarness& h) : h_(h) {}

  Status Create(const std::string& path, const CallContext& ctx = Admin()) {
    v1::CreateTenantRequest req;
    req.mutable_tenant()->set_path(path);
    return h_.Call(&ApiService::CreateTenant, req, ctx).first;
  }
  std::pair<Status, v1::Tenant> Get(const std::string& path, const CallContext& ctx = Admin()) {
    v1::GetTenantRequest req;
    req.set_path(path);
    return h_.Call(&ApiService::GetTenant, req, ctx);
  }
  // The listed paths, or the error's message.
  std::vector<std::string> List(const std::string& prefix, const CallContext& ctx = Admin()) {
    v1::ListTenantsRequest req;
    req.set_prefix(prefix);
    auto [s, resp] = h_.Call(&ApiService::ListTenants, req, ctx);
    if (!s.ok()) return {s.ToString()};
    std::vector<std::string> out;
    for (const v1::Tenant& t : resp.tenants()) out.push_back(t.path());
    return out;
  }
  Status Delete(const std::string& path, const CallContext& ctx = Admin()) {
    v1::DeleteTenantRequest req;
    req.set_path(path);
    return h_.Call(&ApiService::DeleteTenant, req, ctx).first;
  }
  std::pair<Status, v1::Quota> Set(const v1::Quota& q, const CallContext& ctx = Admin()) {
    v1::SetQuotaRequest req;
    *req.mutable_quota() = q;
    return h_.Call(&ApiService::SetQuota, req, ctx);
  }
  std::pair<Status, v1::Quota> GetQuota(const std::string& tenant, const std::string& pool,
                                        const CallContext& ctx = Admin()) {
    v1::GetQuotaRequest req;
    req.set_tenant(tenant);
    req.set_pool(pool);
    return h_.Call(&ApiService::GetQuota, req, ctx);
  }
  // "tenant@pool" of each listed quota, or the error's message.
  std::vector<std::string> ListQuotas(const std::string& prefix, const std::string& pool,
                                      const CallContext& ctx = Admin()) {
    v1::ListQuotasRequest req;
    req.set_tenant_prefix(prefix);
    req.set_pool(pool);
    auto [s, resp] = h_.Call(&ApiService::ListQuotas, req, ctx);
    if (!s.ok()) return {s.ToString()};
    std::vector<std::string> out;
    for (const v1::Quota& q : resp.quotas()) out.push_back(q.tenant() + "@" + q.pool());
    return out;
  }
  Status DeleteQuota(const std::string& tenant, const std::string& pool,
                     const CallContext& ctx = Admin()) {
    v1::DeleteQuotaRequest req;
    req.set_tenant(tenant);
    req.set_pool(pool);
    return h_.Call(&ApiService::DeleteQuota, req, ctx).first;
  }

 private:
  ServiceHarness& h_;
};

// A quota in TFLOPS only (guaranteed, limit; 0 = unset).
v1::Quota TflopsQuota(const std::string& tenant, const std::string& pool, int64_t guaranteed,
                      int64_t limit) {
  v1::Quota q;
  q.set_tenant(tenant);
  q.set_pool(pool);
  q.mutable_guaranteed()->mutable_resources()->set_milli_tflops(guaranteed * 1000);
  q.mutable_limit()->mutable_resources()->set_milli_tflops(limit * 1000);
  return q;
}

TEST(ServiceTenants, CreateGetListDeleteAndWhatIsStored) {
  ServiceHarness h;
  Tenancy t(h);
  h.clock.Set(1'795'362'018'000'000);
  for (const char* path : {"acme", "acme/research", "acme/research/alice", "globex"}) {
    ASSERT_TRUE(t.Create(path).ok()) << path;
  }
  auto [gs, alice] = t.Get("acme/research/alice");
  ASSERT_TRUE(gs.ok()) << gs.ToString();
  EXPECT_EQ(alice.path(), "acme/research/alice");
  EXPECT_EQ(alice.create_time().seconds(), 1'795'362'018);
  EXPECT_EQ(alice.quotas_size(), 0);

  using V = std::vector<std::string>;
  EXPECT_EQ(t.List(""), (V{"acme", "acme/research", "acme/research/alice", "globex"}));
  EXPECT_EQ(t.List("acme/research"), (V{"acme/research", "acme/research/alice"}));
  EXPECT_EQ(t.List("glob"), V{});  // a prefix ends at a segment

  // Acknowledged means stored.
  Result<RecoveredState> stored = h.store.Recover();
  ASSERT_TRUE(stored.ok());
  ASSERT_EQ(stored->tenants.size(), 4u);
  EXPECT_EQ(stored->tenants[2].path, "acme/research/alice");

  ASSERT_TRUE(t.Delete("acme/research/alice").ok());
  EXPECT_EQ(t.Get("acme/research/alice").first,
            Status::NotFound("tenant 'acme/research/alice' not found"));
  EXPECT_EQ(t.Delete("acme/research/alice"),
            Status::NotFound("tenant 'acme/research/alice' not found"));
  EXPECT_EQ(h.store.Recover()->tenants.size(), 3u);
}

TEST(ServiceTenants, TreeRulesComeBackAsClearErrors) {
  ServiceHarness h;
  Tenancy t(h);
  EXPECT_EQ(t.Create("acme/research"),
            Status::FailedPrecondition(
                "tenant 'acme/research': parent 'acme' does not exist; create it first"));
  ASSERT_TRUE(t.Create("acme").ok());
  EXPECT_EQ(t.Create("acme"), Status::AlreadyExists("tenant 'acme' already exists"));
  ASSERT_TRUE(t.Create("acme/research").ok());
  EXPECT_EQ(t.Delete("acme"),
            Status::FailedPrecondition(
                "tenant 'acme' still has child 'acme/research'; delete the children first"));
  EXPECT_EQ(t.List(""), (std::vector<std::string>{"acme", "acme/research"}));
}

struct BadCase {
  const char* name;
  std::function<Status(Tenancy&)> call;
  Status want;
};

TEST(ServiceTenants, BadInputNamesTheFieldAndNothingIsStored) {
  ServiceHarness h;
  ASSERT_TRUE(h.CreatePool("gpu-a").first.ok());
  Tenancy t(h);
  ASSERT_TRUE(t.Create("acme").ok());
  auto set = [](std::function<void(v1::Quota*)> edit) {
    return [edit](Tenancy& x) {
      v1::Quota q = TflopsQuota("acme", "gpu-a", 10, 20);
      edit(&q);
      return x.Set(q).first;
    };
  };
  const BadCase cases[] = {
      {"create without tenant",
       [&h](Tenancy&) {
         return h.Call(&ApiService::CreateTenant, v1::CreateTenantRequest{}).first;
       },
       Status::InvalidArgument("tenant: must be set")},
      {"create upper case", [](Tenancy& x) { return x.Create("Acme"); },
       Status::InvalidArgument(
           "tenant.path: 'Acme': segment 1 'Acme' must match [a-z0-9][a-z0-9-_.]*")},
      {"create too deep", [](Tenancy& x) { return x.Create("a/b/c/d"); },
       Status::InvalidArgument("tenant.path: 'a/b/c/d' has more than 3 segments "
                               "(org/project/user)")},
      {"create with quotas",
       [&h](Tenancy&) {
         v1::CreateTenantRequest req;
         req.mutable_tenant()->set_path("globex");
         req.mutable_tenant()->add_quotas()->set_pool("gpu-a");
         return h.Call(&ApiService::CreateTenant, req).first;
       },
       Status::InvalidArgument("tenant.quotas: output only; set quotas with SetQuota")},
      {"get empty path", [](Tenancy& x) { return x.Get("").first; },
       Status::InvalidArgument("path: must not be empty (a tenant path like org/project/user)")},
      {"delete bad path", [](Tenancy& x) { return x.Delete("acme//x"); },
       Status::InvalidArgument("path: 'acme//x': segment 2 must not be empty")},
      {"list bad prefix",
       [&h](Tenancy&) {
         v1::ListTenantsRequest req;
         req.set_prefix("a b");
         return h.Call(&ApiService::ListTenants, req).first;
       },
       Status::InvalidArgument("prefix: 'a b': segment 1 'a b' must match [a-z0-9][a-z0-9-_.]*")},
      {"set without quota",
       [&h](Tenancy&) { return h.Call(&ApiService::SetQuota, v1::SetQuotaRequest{}).first; },
       Status::InvalidArgument("quota: must be set")},
      {"set bad tenant", set([](v1::Quota* q) { q->set_tenant(""); }),
       Status::InvalidArgument(
           "quota.tenant: must not be empty (a tenant path like org/project/user)")},
      {"set bad pool", set([](v1::Quota* q) { q->set_pool("GPU"); }),
       Status::InvalidArgument("quota.pool: 'GPU' must match [a-z0-9][a-z0-9-_.]*")},
      {"set negative",
       set([](v1::Quota* q) { q->mutable_limit()->mutable_resources()->set_vram_mib(-1); }),
       Status::InvalidArgument("quota.limit.resources.vram_mib: must be between 0 and "
                               "1125899906842624, got -1")},
      {"set negative devices", set([](v1::Quota* q) { q->mutable_guaranteed()->set_devices(-2); }),
       Status::InvalidArgument("quota.guaranteed.devices: must be between 0 and 10000000, got -2")},
      {"set sku and resources", set([](v1::Quota* q) { q->mutable_limit()->set_sku("small"); }),
       Status::InvalidArgument(
           "quota.limit: give either resources and devices, or sku and sku_count, not both")},
      {"set sku without count", set([](v1::Quota* q) {
         q->clear_guaranteed();
         q->mutable_guaranteed()->set_sku("small");
       }),
       Status::InvalidArgument("quota.guaranteed.sku_count: must be between 1 and 1000000, got 0")},
      {"set count without sku", set([](v1::Quota* q) {
         q->clear_guaranteed();
         q->mutable_guaranteed()->set_sku_count(3);
       }),
       Status::InvalidArgument("quota.guaranteed.sku_count: only with sku, got 3 and no sku")},
      {"set unknown sku", set([](v1::Quota* q) {
         q->clear_limit();
         q->mutable_limit()->set_sku("huge");
         q->mutable_limit()->set_sku_count(1);
       }),
       Status::NotFound("quota.limit.sku: sku 'huge' not found")},
      {"get quota bad pool", [](Tenancy& x) { return x.GetQuota("acme", "").first; },
       Status::InvalidArgument("pool: must not be empty")},
      {"delete quota bad tenant", [](Tenancy& x) { return x.DeleteQuota("-x", "gpu-a"); },
       Status::InvalidArgument("tenant: '-x': segment 1 '-x' must match [a-z0-9][a-z0-9-_.]*")},
      {"list quotas bad pool",
       [&h](Tenancy&) {
         v1::ListQuotasRequest req;
         req.set_pool("a/b");
         return h.Call(&ApiService::ListQuotas, req).first;
       },
       Status::InvalidArgument("pool: 'a/b' must match [a-z0-9][a-z0-9-_.]*")},
  };
  for (const BadCase& c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_EQ(c.call(t), c.want);
  }
  Result<RecoveredState> stored = h.store.Recover();
  ASSERT_TRUE(stored.ok());
  EXPECT_EQ(stored->tenants.size(), 1u);
  EXPECT_TRUE(stored->quotas.empty());
}

TEST(ServiceTenants, MutationsNeedAnAdmin) {
  ServiceHarness h;
  ASSERT_TRUE(h.CreatePool("gpu-a").first.ok());
  Tenancy t(h);
  ASSERT_TRUE(t.Create("acme").ok());
  ASSERT_TRUE(t.Set(TflopsQuota("acme", "gpu-a", 10, 20)).first.ok());
  const CallContext acme = Tenant("acme");  // a member
  EXPECT_EQ(t.Create("acme/research", acme),
            Status::PermissionDenied(
                "create tenant: requires the role tenant-admin or above; the caller is member"));
  EXPECT_EQ(t.Delete("acme", acme),
            Status::PermissionDenied(
                "delete tenant: requires the role tenant-admin or above; the caller is member"));
  EXPECT_EQ(t.Set(TflopsQuota("acme", "gpu-a", 100, 200), acme).first,
            Status::PermissionDenied(
                "set quota: requires the role tenant-admin or above; the caller is member"));
  EXPECT_EQ(t.DeleteQuota("acme", "gpu-a", acme),
            Status::PermissionDenied(
                "delete quota: requires the role tenant-admin or above; the caller is member"));
  // A tenant-admin changes only what lies strictly below it: never its own node or quota.
  const CallContext owner = Tenant("acme", Role::kTenantAdmin);
  EXPECT_EQ(t.Delete("acme", owner),
            Status::PermissionDenied(
                "delete tenant: tenant 'acme' is not below the caller's tenant 'acme'"));
  EXPECT_EQ(
      t.Set(TflopsQuota("acme", "gpu-a", 100, 200), owner).first,
      Status::PermissionDenied("set quota: tenant 'acme' is not below the caller's tenant 'acme'"));
  EXPECT_EQ(t.Create("globex", owner),
            Status::PermissionDenied(
                "create tenant: tenant 'globex' is not below the caller's tenant 'acme'"));
  // Nothing changed.
  EXPECT_EQ(t.List(""), std::vector<std::string>{"acme"});
  auto [s, q] = t.GetQuota("acme", "gpu-a");
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(q.limit().resources().milli_tflops(), 20'000);
}

TEST(ServiceTenants, TenantsReadTheirOwnSubtreeOnly) {
  ServiceHarness h;
  ASSERT_TRUE(h.CreatePool("gpu-a").first.ok());
  Tenancy t(h);
  for (const char* path : {"acme", "acme/research", "acme/research/alice", "acme/vision"}) {
    ASSERT_TRUE(t.Create(path).ok()) << path;
  }
  ASSERT_TRUE(t.Set(TflopsQuota("acme", "gpu-a", 100, 400)).first.ok());
  ASSERT_TRUE(t.Set(TflopsQuota("acme/research", "gpu-a", 50, 200)).first.ok());
  ASSERT_TRUE(t.Set(TflopsQuota("acme/vision", "gpu-a", 50, 200)).first.ok());

  using V = std::vector<std::string>;
  const CallContext research = Tenant("acme/research");
  EXPECT_EQ(t.List("", research), (V{"acme/research", "acme/research/alice"}));
  EXPECT_EQ(t.List("acme/research/alice", research), V{"acme/research/alice"});
  EXPECT_EQ(t.List("acme", research),
            V{"PERMISSION_DENIED: prefix: tenant 'acme' is not 'acme/research' or below it"});
  EXPECT_TRUE(t.Get("acme/research/alice", research).first.ok());
  EXPECT_EQ(
      t.Get("acme/vision", research).first,
      Status::PermissionDenied("path: tenant 'acme/vision' is not 'acme/research' or below it"));

  EXPECT_EQ(t.ListQuotas("", "", research), V{"acme/research@gpu-a"});
  EXPECT_TRUE(t.GetQuota("acme/research", "gpu-a", research).first.ok());
  EXPECT_EQ(t.GetQuota("acme", "gpu-a", research).first,
            Status::PermissionDenied("tenant: tenant 'acme' is not 'acme/research' or below it"));
  EXPECT_EQ(t.ListQuotas("", "", Tenant("")),
            V{"PERMISSION_DENIED: tenant_prefix: the caller has no tenant"});
  // An admin sees everything.
  EXPECT_EQ(t.ListQuotas("", ""), (V{"acme@gpu-a", "acme/research@gpu-a", "acme/vision@gpu-a"}));
}

TEST(ServiceTenants, QuotasSetGetListDeleteWithSkuUnits) {
  ServiceHarness h;
  ASSERT_TRUE(h.CreatePool("gpu-a").first.ok());
  ASSERT_TRUE(h.CreatePool("gpu-b").first.ok());
  Tenancy t(h);
  ASSERT_TRUE(t.Create("acme").ok());
  ASSERT_TRUE(t.Create("acme/research").ok());

  // acme guarantees VRAM too: its children's guarantees must fit in its own, per dimension.
  v1::Quota acme = TflopsQuota("acme", "gpu-a", 2000, 4000);
  acme.mutable_guaranteed()->mutable_resources()->set_vram_mib(409'600);
  acme.mutable_limit()->set_devices(8);
  auto [s1, set] = t.Set(acme);
  ASSERT_TRUE(s1.ok()) << s1.ToString();
  EXPECT_EQ(set.limit().devices(), 8);
  EXPECT_EQ(set.used().resources().milli_tflops(), 0);

  // 4 x medium (200 TFLOPS, 40 GiB each) → 800 TFLOPS and 160 GiB; 2 x large (one whole GPU
  // each) → 2 devices. Amounts read back in normalized units.
  v1::Quota research;
  research.set_tenant("acme/research");
  research.set_pool("gpu-a");
  research.mutable_guaranteed()->set_sku("medium");
  research.mutable_guaranteed()->set_sku_count(4);
  research.mutable_limit()->set_sku("large");
  research.mutable_limit()->set_sku_count(2);
  auto [s2, converted] = t.Set(research);
  ASSERT_TRUE(s2.ok()) << s2.ToString();
  EXPECT_EQ(converted.guaranteed().resources().milli_tflops(), 800'000);
  EXPECT_EQ(converted.guaranteed().resources().vram_mib(), 163'840);
  EXPECT_EQ(converted.guaranteed().sku(), "");
  EXPECT_EQ(converted.limit().devices(), 2);
  ASSERT_TRUE(t.Set(TflopsQuota("acme", "gpu-b", 0, 100)).first.ok());

  auto [gs, got] = t.GetQuota("acme/research", "gpu-a");
  ASSERT_TRUE(gs.ok());
  EXPECT_EQ(got.guaranteed().resources().vram_mib(), 163'840);
  auto [ts, tenant] = t.Get("acme");
  ASSERT_TRUE(ts.ok());
  ASSERT_EQ(tenant.quotas_size(), 2);
  EXPECT_EQ(tenant.quotas(0).pool(), "gpu-a");
  EXPECT_EQ(tenant.quotas(1).pool(), "gpu-b");

  using V = std::vector<std::string>;
  EXPECT_EQ(t.ListQuotas("", ""), (V{"acme@gpu-a", "acme@gpu-b", "acme/research@gpu-a"}));
  EXPECT_EQ(t.ListQuotas("", "gpu-b"), V{"acme@gpu-b"});
  EXPECT_EQ(t.ListQuotas("acme/research", ""), V{"acme/research@gpu-a"});
  Result<RecoveredState> stored = h.store.Recover();
  ASSERT_TRUE(stored.ok());
  ASSERT_EQ(stored->quotas.size(), 3u);
  EXPECT_EQ(stored->quotas[2].guaranteed.resources.milli_tflops, 800'000);

  ASSERT_TRUE(t.DeleteQuota("acme", "gpu-b").ok());
  EXPECT_EQ(t.GetQuota("acme", "gpu-b").first,
            Status::NotFound("quota of 'acme' in pool 'gpu-b' not found"));
  EXPECT_EQ(t.DeleteQuota("acme", "gpu-b"),
            Status::NotFound("quota of 'acme' in pool 'gpu-b' not found"));
  EXPECT_EQ(h.store.Recover()->quotas.size(), 2u);

  // Deleting a tenant deletes its quotas.
  ASSERT_TRUE(t.Delete("acme/research").ok());
  EXPECT_EQ(t.ListQuotas("", ""), V{"acme@gpu-a"});
}

TEST(ServiceTenants, QuotaRulesAreRefusedNamingTheQuota) {
  ServiceHarness h;
  ASSERT_TRUE(h.CreatePool("gpu-a").first.ok());
  Tenancy t(h);
  ASSERT_TRUE(t.Create("acme").ok());
  ASSERT_TRUE(t.Create("acme/research").ok());
  ASSERT_TRUE(t.Create("acme/vision").ok());
  ASSERT_TRUE(t.Set(TflopsQuota("acme", "gpu-a", 1000, 4000)).first.ok());

  EXPECT_EQ(t.Set(TflopsQuota("acme/research", "gpu-a", 0, 5000)).first,
            Status::FailedPrecondition("quota of acme/research in pool gpu-a: limit 5000 TFLOPS "
                                       "exceeds the limit of parent acme (4000 TFLOPS)"));
  ASSERT_TRUE(t.Set(TflopsQuota("acme/research", "gpu-a", 600, 4000)).first.ok());
  // 600 + 500 guaranteed under acme, which guarantees 1000.
  EXPECT_EQ(t.Set(TflopsQuota("acme/vision", "gpu-a", 500, 0)).first,
            Status::FailedPrecondition("quota of acme/vision in pool gpu-a: guarantees under acme "
                                       "would total 1100 TFLOPS, more than its own guaranteed "
                                       "1000 TFLOPS"));
  EXPECT_EQ(t.Set(TflopsQuota("acme/vision", "gpu-a", 300, 200)).first,
            Status::InvalidArgument(
                "quota of acme/vision in pool gpu-a: guaranteed 300 TFLOPS exceeds limit 200 "
                "TFLOPS"));
  EXPECT_EQ(t.Set(TflopsQuota("acme", "gpu-a", 1000, 3000)).first,
            Status::FailedPrecondition("quota of acme in pool gpu-a: limit 3000 TFLOPS is below "
                                       "the limit of child acme/research (4000 TFLOPS)"));
  EXPECT_EQ(t.Set(TflopsQuota("acme", "nope", 1, 2)).first,
            Status::NotFound("pool 'nope' not found"));
  EXPECT_EQ(t.Set(TflopsQuota("globex", "gpu-a", 1, 2)).first,
            Status::NotFound("tenant 'globex' not found"));

  // The refused quotas left nothing behind.
  auto [s, vision] = t.GetQuota("acme/vision", "gpu-a");
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_EQ(t.GetQuota("acme", "gpu-a").second.limit().resources().milli_tflops(), 4'000'000);
}

TEST(ServiceTenants, QuotaShowsWhatTheSubtreeUsesAndBorrows) {
  ServiceHarness h;
  ASSERT_TRUE(h.CreatePool("gpu-a").first.ok());
  Tenancy t(h);
  ASSERT_TRUE(t.Create("acme").ok());
  ASSERT_TRUE(t.Set(TflopsQuota("acme", "gpu-a", 60, 500)).first.ok());

  // A node registered straight with the core; a 100 TFLOPS / 1 GiB task of acme/research/alice
  // is placed on it and charged to acme's subtree.
  ASSERT_TRUE(h.RegisterNode("n1", "gpu-a").ok());
  auto [s, sub] = h.Submit(ServiceHarness::Job("acme/research/alice", "gpu-a"));
  ASSERT_TRUE(s.ok()) << s.ToString();
  v1::Job job =
      h.WaitJob(sub.job_id(), [](const v1::Job& j) { return !j.tasks(0).node().empty(); });
  ASSERT_EQ(job.tasks(0).node(), "n1");

  auto [qs, q] = t.GetQuota("acme", "gpu-a");
  ASSERT_TRUE(qs.ok()) << qs.ToString();
  EXPECT_EQ(q.used().resources().milli_tflops(), 100'000);
  EXPECT_EQ(q.used().resources().vram_mib(), 1024);
  EXPECT_EQ(q.borrowed().resources().milli_tflops(), 40'000);  // 100 used - 60 guaranteed
  EXPECT_EQ(q.borrowed().resources().vram_mib(), 1024);        // nothing guaranteed
}

}  // namespace
}  // namespace gpupool::api
