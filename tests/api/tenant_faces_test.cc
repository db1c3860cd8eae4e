// Tenants and quotas end to end through both faces, wired as gpupoold wires them: PgStore on a
// real PostgreSQL, the Core on its CoreLoop, ServiceImpl, and the gRPC and REST servers on
// loopback with bearer tokens. Then the whole stack is rebuilt on the same database, as after a
// restart: what was acknowledged must be there.
#include <google/protobuf/util/json_util.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <prometheus/registry.h>

#include <memory>

#include "api/agent_hub.h"
#include "api/auth.h"
#include "api/grpc/grpc_server.h"
#include "api/rest/http_server.h"
#include "api/service_impl.h"
#include "gpupool/v1/tenants.grpc.pb.h"
#include "scheduler/core.h"
#include "scheduler/core_loop.h"
#include "store/pg_store.h"
#include "tests/api/http_client.h"
#include "tests/support/pg_fixture.h"

namespace gpupool::api {
namespace {

using testing::HttpCall;
using testing::HttpResult;
namespace http = testing::http;
using http::verb;

constexpr char kAdminToken[] = "admin-token-0123456789";
constexpr char kTenantToken[] = "tenant-token-0123456789";

// gpupoold's wiring, minus the process: store → core → service → both faces.
class Stack {
 public:
  static Result<std::unique_ptr<Stack>> Start(const std::string& uri) {
    std::unique_ptr<Stack> s(new Stack());
    PgStoreOptions options;
    options.uri = uri;
    GPUPOOL_ASSIGN_OR_RETURN(s->store, PgStore::Open(options));
    GPUPOOL_ASSIGN_OR_RETURN(int64_t epoch, s->store->AcquireLeadership());
    GPUPOOL_ASSIGN_OR_RETURN(RecoveredState state, s->store->Recover());
    s->hub = std::make_unique<AgentHub>(&s->loop, AgentHubOptions{});
    s->core = std::make_unique<Core>(s->scheduler, SystemClock::Get(), s->store.get(), s->hub.get(),
                                     s->loop.executor());
    s->hub->Attach(s->core.get());
    GPUPOOL_RETURN_IF_ERROR(s->core->Recover(state, epoch));
    s->loop.Start([core = s->core.get()] { core->Tick(); }, std::chrono::milliseconds(50));
    ServiceOptions service_options;
    service_options.scheduler = &s->scheduler;
    s->service =
        std::make_unique<ServiceImpl>(s->core.get(), &s->loop, s->hub.get(), service_options);
    s->service->SetRecovered(true);
    GPUPOOL_ASSIGN_OR_RETURN(
        s->auth, Authenticator::Create(
                     {{kAdminToken, "ops", true}, {kTenantToken, "acme/research", false}}));
    s->grpc = std::make_unique<GrpcServer>(*s->service, s->auth, "127.0.0.1:0");
    GPUPOOL_RETURN_IF_ERROR(s->grpc->Start());
    s->http = std::make_unique<HttpServer>(*s->service, s->auth,
                                           std::make_shared<prometheus::Registry>(), "127.0.0.1:0");
    GPUPOOL_RETURN_IF_ERROR(s->http->Start());
    return s;
  }

  // The order gpupoold stops in: faces, then the loop (no more core callbacks), then the store.
  ~Stack() {
    if (http) http->Shutdown();
    if (grpc) grpc->Shutdown();
    loop.Stop();
    service.reset();
    core.reset();
    hub.reset();
    store.reset();
  }

  std::unique_ptr<v1::TenantService::Stub> Tenants() const {
    return v1::TenantService::NewStub(grpc::CreateChannel(
        "127.0.0.1:" + std::to_string(grpc->port()), grpc::InsecureChannelCredentials()));
  }
  HttpResult Rest(verb v, const std::string& target, const std::string& body = "",
                  const std::string& token = kAdminToken) const {
    return HttpCall(http->port(), v, target, body, {{"Authorization", "Bearer " + token}});
  }

  SchedulerOptions scheduler = SchedulerOptions::Defaults();
  std::unique_ptr<PgStore> store;
  CoreLoop loop;
  std::unique_ptr<AgentHub> hub;
  std::unique_ptr<Core> core;
  std::unique_ptr<ServiceImpl> service;
  Authenticator auth;
  std::unique_ptr<GrpcServer> grpc;
  std::unique_ptr<HttpServer> http;

 private:
  Stack() = default;
};

std::unique_ptr<grpc::ClientContext> As(const char* token) {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->AddMetadata("authorization", std::string("Bearer ") + token);
  return ctx;
}

template <typename Message>
Message FromJson(const std::string& json) {
  Message m;
  EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(json, &m).ok()) << json;
  return m;
}

TEST(TenantFaces, RestAndGrpcRoundTripOnPostgresAndSurviveARestart) {
  ASSERT_OK_AND_ASSIGN(std::string uri, gpupool::testing::CreateTestDatabase());
  {
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<Stack> s, Stack::Start(uri));
    ASSERT_EQ(s->Rest(verb::post, "/v1/pools", R"({"pool": {"name": "gpu"}})").status, 200);

    // REST: the tree and its quotas.
    HttpResult r = s->Rest(verb::post, "/v1/tenants", R"({"tenant": {"path": "acme"}})");
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(FromJson<v1::Tenant>(r.body).path(), "acme");
    EXPECT_NE(r.body.find(R"("createTime":")"), std::string::npos) << r.body;
    ASSERT_EQ(s->Rest(verb::post, "/v1/tenants", R"({"tenant": {"path": "acme/research"}})").status,
              200);
    r = s->Rest(
        verb::put, "/v1/quotas/acme/gpu",
        R"({"quota": {"guaranteed": {"resources": {"milliTflops": "1000000", "vramMib": 409600}},
                              "limit": {"resources": {"milliTflops": 4000000}, "devices": 8}}})");
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_NE(r.body.find(R"("milliTflops":"4000000")"), std::string::npos) << r.body;
    EXPECT_NE(r.body.find(R"("used":{"resources":{"milliTflops":"0","vramMib":"0"},"devices":0)"),
              std::string::npos)
        << r.body;

    // A child above its parent is refused, naming the quota; nothing is stored.
    r = s->Rest(verb::put, "/v1/quotas/acme%2Fresearch/gpu",
                R"({"quota": {"limit": {"resources": {"milliTflops": 5000000}}}})");
    EXPECT_EQ(r.status, 400);
    EXPECT_EQ(r.body,
              R"js({"code":9,"message":"quota of acme/research in pool gpu: limit 5000 TFLOPS )js"
              R"js(exceeds the limit of parent acme (4000 TFLOPS)","details":[]})js");
    r = s->Rest(verb::put, "/v1/quotas/acme%2Fresearch/gpu",
                R"({"quota": {"guaranteed": {"sku": "medium", "skuCount": 2}}})");
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(FromJson<v1::Quota>(r.body).guaranteed().resources().milli_tflops(), 400'000);

    // A parent with children stays; a tenant token may read its subtree but change nothing.
    r = s->Rest(verb::delete_, "/v1/tenants/acme");
    EXPECT_EQ(r.status, 400);
    EXPECT_NE(r.body.find("still has child 'acme/research'"), std::string::npos) << r.body;
    r = s->Rest(verb::post, "/v1/tenants", R"({"tenant": {"path": "acme/research/bob"}})",
                kTenantToken);
    EXPECT_EQ(r.status, 403) << r.body;
    r = s->Rest(verb::get, "/v1/quotas", "", kTenantToken);
    ASSERT_EQ(r.status, 200) << r.body;
    auto mine = FromJson<v1::ListQuotasResponse>(r.body);
    ASSERT_EQ(mine.quotas_size(), 1);
    EXPECT_EQ(mine.quotas(0).tenant(), "acme/research");
    EXPECT_EQ(s->Rest(verb::get, "/v1/tenants/acme", "", kTenantToken).status, 403);
    EXPECT_EQ(s->Rest(verb::get, "/v1/tenants/acme", "", "wrong-token-0123456789").status, 401);

    // gRPC: the same service behind the other face.
    auto stub = s->Tenants();
    v1::Tenant acme;
    v1::GetTenantRequest get;
    get.set_path("acme");
    grpc::Status st = stub->GetTenant(As(kAdminToken).get(), get, &acme);
    ASSERT_TRUE(st.ok()) << st.error_message();
    ASSERT_EQ(acme.quotas_size(), 1);
    EXPECT_EQ(acme.quotas(0).limit().devices(), 8);
    v1::SetQuotaRequest set;
    set.mutable_quota()->set_tenant("acme/research");
    set.mutable_quota()->set_pool("gpu");
    v1::Quota quota;
    st = stub->SetQuota(As(kTenantToken).get(), set, &quota);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::PERMISSION_DENIED);
    EXPECT_EQ(st.error_message(),
              "set quota: requires the role tenant-admin or above; the caller is member");
    v1::CreateTenantRequest create;
    create.mutable_tenant()->set_path("acme/research/alice");
    v1::Tenant alice;
    st = stub->CreateTenant(As(kAdminToken).get(), create, &alice);
    ASSERT_TRUE(st.ok()) << st.error_message();
    v1::DeleteQuotaRequest del;
    del.set_tenant("acme/research");
    del.set_pool("gpu");
    v1::DeleteQuotaResponse deleted;
    st = stub->DeleteQuota(As(kAdminToken).get(), del, &deleted);
    ASSERT_TRUE(st.ok()) << st.error_message();
  }

  // A new stack on the same database: the acknowledged state is back.
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Stack> s, Stack::Start(uri));
  HttpResult r = s->Rest(verb::get, "/v1/tenants");
  ASSERT_EQ(r.status, 200) << r.body;
  auto tenants = FromJson<v1::ListTenantsResponse>(r.body);
  ASSERT_EQ(tenants.tenants_size(), 3);
  EXPECT_EQ(tenants.tenants(0).path(), "acme");
  EXPECT_EQ(tenants.tenants(2).path(), "acme/research/alice");
  r = s->Rest(verb::get, "/v1/quotas");
  ASSERT_EQ(r.status, 200) << r.body;
  auto quotas = FromJson<v1::ListQuotasResponse>(r.body);
  ASSERT_EQ(quotas.quotas_size(), 1);
  EXPECT_EQ(quotas.quotas(0).tenant(), "acme");
  EXPECT_EQ(quotas.quotas(0).guaranteed().resources().milli_tflops(), 1'000'000);
  EXPECT_EQ(quotas.quotas(0).limit().devices(), 8);
  EXPECT_EQ(s->Rest(verb::get, "/v1/quotas/acme%2Fresearch/gpu").status, 404);
}

}  // namespace
}  // namespace gpupool::api
