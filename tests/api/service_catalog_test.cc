// ServiceImpl's catalog methods on the real core: priority classes cut to what a tenant may use,
// the SKU table, GPU models with the fleet counted over the pools the caller may use, and a
// policy replaced at run time (the daemon's config reload).
#include <gtest/gtest.h>

#include "api/service_impl.h"
#include "tests/api/service_harness.h"

namespace gpupool::api {
namespace {

using testing::Admin;
using testing::ServiceHarness;
using testing::Tenant;

std::vector<std::string> Names(const v1::ListPriorityClassesResponse& r) {
  std::vector<std::string> out;
  for (const v1::PriorityClass& c : r.priority_classes()) out.push_back(c.name());
  return out;
}

// acme may use low and normal, acme/batch (below it, so it may only narrow) low alone; globex has
// no list: the defaults.
ServiceOptions RestrictedOptions(const SchedulerOptions& sched, PriorityAccess* access) {
  *access = PriorityAccess::Create(sched).value();
  EXPECT_TRUE(access->Add("acme", {"low", "normal"}).ok());
  EXPECT_TRUE(access->Add("acme/batch", {"low"}).ok());
  ServiceOptions o;
  o.scheduler = &sched;
  o.priority_access = access;
  return o;
}

TEST(ServiceCatalog, AnAdminSeesEveryClassHighestFirstWithTheDefaultMarked) {
  const SchedulerOptions sched = SchedulerOptions::Defaults();
  PriorityAccess access;
  ServiceHarness h({}, RestrictedOptions(sched, &access));
  auto [s, resp] = h.Call(&ApiService::ListPriorityClasses, v1::ListPriorityClassesRequest{});
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(Names(resp), (std::vector<std::string>{"system", "high", "normal", "low"}));
  EXPECT_EQ(resp.default_class(), "normal");
  const v1::PriorityClass& system = resp.priority_classes(0);
  EXPECT_EQ(system.value(), 10000);
  EXPECT_FALSE(system.preemptible());
  EXPECT_TRUE(system.may_preempt());
  EXPECT_FALSE(system.is_default());
  EXPECT_TRUE(resp.priority_classes(2).is_default());
}

TEST(ServiceCatalog, ATenantSeesOnlyTheClassesItMayUse) {
  const SchedulerOptions sched = SchedulerOptions::Defaults();
  PriorityAccess access;
  ServiceHarness h({}, RestrictedOptions(sched, &access));
  v1::ListPriorityClassesRequest req;
  auto [s1, acme] = h.Call(&ApiService::ListPriorityClasses, req, Tenant("acme/ml"));
  ASSERT_TRUE(s1.ok()) << s1.ToString();
  EXPECT_EQ(Names(acme), (std::vector<std::string>{"normal", "low"}));  // inherited from acme
  auto [s2, batch] = h.Call(&ApiService::ListPriorityClasses, req, Tenant("acme/batch"));
  ASSERT_TRUE(s2.ok()) << s2.ToString();
  EXPECT_EQ(Names(batch), (std::vector<std::string>{"low"}));
  // No list anywhere above: the preemptible classes up to the default one (high is granted;
  // system is an operator's tool).
  auto [s3, globex] = h.Call(&ApiService::ListPriorityClasses, req, Tenant("globex"));
  ASSERT_TRUE(s3.ok()) << s3.ToString();
  EXPECT_EQ(Names(globex), (std::vector<std::string>{"normal", "low"}));

  // A tenant may ask for one below it, never for another; an admin for anyone.
  req.set_tenant("acme/batch");
  auto [s4, below] = h.Call(&ApiService::ListPriorityClasses, req, Tenant("acme"));
  ASSERT_TRUE(s4.ok()) << s4.ToString();
  EXPECT_EQ(Names(below), (std::vector<std::string>{"low"}));
  auto [s5, other] = h.Call(&ApiService::ListPriorityClasses, req, Tenant("globex"));
  EXPECT_EQ(s5.code(), StatusCode::kPermissionDenied) << s5.ToString();
  auto [s6, admin] = h.Call(&ApiService::ListPriorityClasses, req, Admin());
  ASSERT_TRUE(s6.ok()) << s6.ToString();
  EXPECT_EQ(Names(admin), (std::vector<std::string>{"low"}));
  req.set_tenant("acme//x");
  auto [s7, bad] = h.Call(&ApiService::ListPriorityClasses, req, Admin());
  EXPECT_EQ(s7.code(), StatusCode::kInvalidArgument) << s7.ToString();
  EXPECT_NE(s7.message().find("tenant"), std::string::npos) << s7.ToString();
}

TEST(ServiceCatalog, ListSkusShowsTheSkuTableByName) {
  ServiceHarness h;
  auto [s, resp] = h.Call(&ApiService::ListSkus, v1::ListSkusRequest{}, Tenant("a"));
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_EQ(resp.skus_size(), 3);
  EXPECT_EQ(resp.skus(0).name(), "large");
  EXPECT_EQ(resp.skus(1).name(), "medium");
  EXPECT_EQ(resp.skus(2).name(), "small");
  const SchedulerOptions defaults = SchedulerOptions::Defaults();
  for (const v1::Sku& sku : resp.skus()) {
    const ResourceRequest& want = defaults.skus.at(sku.name()).request;
    EXPECT_NE(sku.request().shape_case(), v1::ResourceRequest::SHAPE_NOT_SET) << sku.name();
    if (want.shape == RequestShape::kFractional) {
      EXPECT_EQ(sku.request().fractional().milli_tflops(), want.fractional.milli_tflops);
      EXPECT_EQ(sku.request().fractional().vram_mib(), want.fractional.vram_mib);
    } else {
      EXPECT_EQ(sku.request().whole_gpus().count(), want.gpu_count);
    }
  }
}

TEST(ServiceCatalog, TheFleetIsCountedOverThePoolsTheCallerMayUse) {
  ServiceHarness h;
  ASSERT_TRUE(h.CreatePool("shared").first.ok());
  ASSERT_TRUE(h.CreatePool("private", v1::VISIBILITY_PRIVATE, {"acme"}).first.ok());
  ASSERT_TRUE(h.RegisterNode("n1", "shared").ok());
  ASSERT_TRUE(h.RegisterNode("n2", "shared").ok());
  ASSERT_TRUE(h.RegisterNode("p1", "private").ok());
  auto h100 = [&](const CallContext& ctx) {
    auto [s, resp] = h.Call(&ApiService::ListGpuModels, v1::ListGpuModelsRequest{}, ctx);
    EXPECT_TRUE(s.ok()) << s.ToString();
    for (const v1::GpuModel& m : resp.models()) {
      if (m.name() == "H100-SXM") return std::pair{m.fleet_devices(), m.fleet_nodes()};
      EXPECT_EQ(m.fleet_devices(), 0) << m.name();
    }
    return std::pair{-1, -1};
  };
  EXPECT_EQ(h100(Admin()), std::pair(3, 3));
  EXPECT_EQ(h100(Tenant("acme/ml")), std::pair(3, 3));
  EXPECT_EQ(h100(Tenant("globex")), std::pair(2, 2));  // the private pool's node is not shown
}

TEST(ServiceCatalog, SetPolicyReplacesClassesSkusAndAccessAtOnce) {
  const SchedulerOptions sched = SchedulerOptions::Defaults();
  PriorityAccess access;
  ServiceHarness h({}, RestrictedOptions(sched, &access));
  ServicePolicy next;
  next.scheduler = sched;
  next.scheduler.priority_classes["batch"] = PriorityClass{"batch", 50, true, false, 0};
  next.scheduler.skus.erase("large");
  next.access = PriorityAccess::Create(next.scheduler).value();
  ASSERT_TRUE(next.access.Add("acme", {"batch"}).ok());
  h.service->SetPolicy(std::move(next));

  auto [s1, classes] =
      h.Call(&ApiService::ListPriorityClasses, v1::ListPriorityClassesRequest{}, Tenant("acme"));
  ASSERT_TRUE(s1.ok()) << s1.ToString();
  EXPECT_EQ(Names(classes), (std::vector<std::string>{"batch"}));
  auto [s2, skus] = h.Call(&ApiService::ListSkus, v1::ListSkusRequest{});
  ASSERT_TRUE(s2.ok()) << s2.ToString();
  EXPECT_EQ(skus.skus_size(), 2);
}

}  // namespace
}  // namespace gpupool::api
