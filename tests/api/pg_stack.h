// PgStack: gpupoold's wiring without the process, for tests of both faces on a real PostgreSQL —
// PgStore → the Scheduler → ServiceImpl with an AuditLog → the gRPC and REST servers on
// loopback with bearer tokens (an admin "ops"; tenant-admins of "acme/research", "acme" and
// "acme2").
#pragma once

#include <grpcpp/grpcpp.h>
#include <prometheus/registry.h>

#include <functional>
#include <memory>
#include <string>

#include "api/agent_hub.h"
#include "api/audit_log.h"
#include "api/auth.h"
#include "api/grpc/grpc_server.h"
#include "api/rest/http_server.h"
#include "api/service_impl.h"
#include "scheduler/scheduler.h"
#include "store/pg_store.h"
#include "tests/api/http_client.h"
#include "tests/support/test_keyring.h"

namespace gpupool::api::testing {

inline constexpr char kAdminToken[] = "admin-token-0123456789";
inline constexpr char kTenantToken[] = "tenant-token-0123456789";
inline constexpr char kOtherToken[] = "other-token-0123456789";
inline constexpr char kParentToken[] = "parent-token-0123456789";

class PgStack {
 public:
  // `customize` may add to the service's options (a store for webhooks, …) before it starts.
  static Result<std::unique_ptr<PgStack>> Start(
      const std::string& uri, const std::function<void(ServiceOptions*)>& customize = {}) {
    std::unique_ptr<PgStack> s(new PgStack());
    PgStoreOptions options;
    options.uri = uri;
    options.keyring = ::gpupool::testing::TestKeyring();  // as gpupoold: secrets are sealed at rest
    GPUPOOL_ASSIGN_OR_RETURN(s->store, PgStore::Open(options));
    GPUPOOL_ASSIGN_OR_RETURN(int64_t epoch, s->store->AcquireLeadership());
    GPUPOOL_ASSIGN_OR_RETURN(RecoveredState state, s->store->Recover());
    s->hub = std::make_unique<AgentHub>(AgentHubOptions{});
    s->scheduler =
        std::make_unique<Scheduler>(s->options, SystemClock::Get(), s->store.get(), s->hub.get());
    s->hub->Attach(s->scheduler.get());
    GPUPOOL_RETURN_IF_ERROR(s->scheduler->Start(state, epoch, std::chrono::milliseconds(50)));
    s->registry = std::make_shared<prometheus::Registry>();
    s->audit = std::make_unique<AuditLog>(s->store.get(), AuditLogOptions{s->registry});
    ServiceOptions service_options;
    service_options.scheduler = &s->options;
    service_options.audit = s->audit.get();
    if (customize) customize(&service_options);
    s->service = std::make_unique<ServiceImpl>(s->scheduler.get(), s->scheduler.get(), s->hub.get(),
                                               service_options);
    s->service->SetRecovered(true);
    GPUPOOL_ASSIGN_OR_RETURN(
        s->auth, Authenticator::Create({{kAdminToken, "ops", true},
                                        {kTenantToken, "acme/research", false, Role::kTenantAdmin},
                                        {kParentToken, "acme", false, Role::kTenantAdmin},
                                        {kOtherToken, "acme2", false, Role::kTenantAdmin}}));
    GrpcServerOptions grpc_options;
    grpc_options.audit = s->audit.get();
    s->grpc = std::make_unique<GrpcServer>(*s->service, s->auth, "127.0.0.1:0", grpc_options);
    GPUPOOL_RETURN_IF_ERROR(s->grpc->Start());
    HttpServerOptions http_options;
    http_options.audit = s->audit.get();
    s->http = std::make_unique<HttpServer>(*s->service, s->auth, s->registry, "127.0.0.1:0",
                                           http_options);
    GPUPOOL_RETURN_IF_ERROR(s->http->Start());
    return s;
  }

  // The order gpupoold stops in: faces, scheduler, audit log, store.
  ~PgStack() {
    if (http) http->Shutdown();
    if (grpc) grpc->Shutdown();
    if (scheduler) scheduler->Stop();
    service.reset();
    audit.reset();
    scheduler.reset();
    hub.reset();
    store.reset();
  }

  std::shared_ptr<grpc::Channel> Channel() const {
    return grpc::CreateChannel("127.0.0.1:" + std::to_string(grpc->port()),
                               grpc::InsecureChannelCredentials());
  }
  HttpResult Rest(http::verb v, const std::string& target, const std::string& body = "",
                  const std::string& token = kAdminToken,
                  std::vector<std::pair<std::string, std::string>> headers = {}) const {
    if (!token.empty()) headers.emplace_back("Authorization", "Bearer " + token);
    return HttpCall(http->port(), v, target, body, std::move(headers));
  }

  SchedulerOptions options = SchedulerOptions::Defaults();
  std::unique_ptr<PgStore> store;
  std::unique_ptr<AgentHub> hub;
  std::unique_ptr<Scheduler> scheduler;
  std::shared_ptr<prometheus::Registry> registry;
  std::unique_ptr<AuditLog> audit;
  std::unique_ptr<ServiceImpl> service;
  Authenticator auth;
  std::unique_ptr<GrpcServer> grpc;
  std::unique_ptr<HttpServer> http;

 private:
  PgStack() = default;
};

inline std::unique_ptr<grpc::ClientContext> As(const std::string& token,
                                               const std::string& request_id = "") {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->AddMetadata("authorization", "Bearer " + token);
  if (!request_id.empty()) ctx->AddMetadata("x-request-id", request_id);
  return ctx;
}

}  // namespace gpupool::api::testing
