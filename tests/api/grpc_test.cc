// The gRPC face over loopback: real gRPC clients against GrpcServer with a recording
// FakeApiService. Checks each RPC reaches its method with the request, statuses pass through
// unchanged, auth metadata, metrics, streams and shutdown.
#include <arpa/inet.h>
#include <google/protobuf/util/message_differencer.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <future>
#include <memory>
#include <thread>

#include "api/auth.h"
#include "api/grpc/grpc_server.h"
#include "gpupool/v1/agent.grpc.pb.h"
#include "gpupool/v1/jobs.grpc.pb.h"
#include "gpupool/v1/pools.grpc.pb.h"
#include "gpupool/v1/tenants.grpc.pb.h"
#include "tests/api/fake_api_service.h"
#include "tests/support/wait_for.h"

namespace gpupool::api {
namespace {

using google::protobuf::util::MessageDifferencer;
using testing::FakeApiService;

using ::gpupool::testing::WaitFor;  // shutdown and disconnects are asynchronous

class GrpcTest : public ::testing::Test {
 protected:
  void StartServer() {
    GrpcServerOptions options;
    options.metrics = registry_;
    server_ = std::make_unique<GrpcServer>(fake_, auth_, "127.0.0.1:0", options);
    ASSERT_TRUE(server_->Start().ok());
    ASSERT_GT(server_->port(), 0);
    channel_ = grpc::CreateChannel("127.0.0.1:" + std::to_string(server_->port()),
                                   grpc::InsecureChannelCredentials());
    jobs_ = v1::JobService::NewStub(channel_);
    pools_ = v1::PoolService::NewStub(channel_);
    nodes_ = v1::NodeService::NewStub(channel_);
    catalog_ = v1::CatalogService::NewStub(channel_);
    tenants_ = v1::TenantService::NewStub(channel_);
  }
  void SetUp() override { StartServer(); }
  void TearDown() override {
    if (server_) server_->Shutdown();
  }

  void ExpectLast(const std::string& method, const google::protobuf::Message& request) {
    const FakeApiService::Call call = fake_.last();
    EXPECT_EQ(call.method, method);
    ASSERT_NE(call.request, nullptr);
    EXPECT_TRUE(MessageDifferencer::Equals(request, *call.request))
        << method << " got " << call.request->ShortDebugString();
  }

  FakeApiService fake_;
  Authenticator auth_;
  std::shared_ptr<prometheus::Registry> registry_ = std::make_shared<prometheus::Registry>();
  std::unique_ptr<GrpcServer> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::JobService::Stub> jobs_;
  std::unique_ptr<v1::PoolService::Stub> pools_;
  std::unique_ptr<v1::NodeService::Stub> nodes_;
  std::unique_ptr<v1::CatalogService::Stub> catalog_;
  std::unique_ptr<v1::TenantService::Stub> tenants_;
};

TEST_F(GrpcTest, EveryUnaryRpcReachesItsMethodWithTheRequest) {
  v1::Job job;
  job.set_id("j-1");
  job.set_state(v1::JOB_STATE_PENDING);
  fake_.SetReply("GetJob", job);
  fake_.SetReply("CancelJob", job);

  {
    grpc::ClientContext ctx;
    v1::SubmitJobRequest req;
    req.mutable_spec()->set_tenant("acme");
    req.mutable_spec()->set_task_count(4);
    v1::SubmitJobResponse resp;
    ASSERT_TRUE(jobs_->SubmitJob(&ctx, req, &resp).ok());
    ExpectLast("SubmitJob", req);
  }
  {
    grpc::ClientContext ctx;
    v1::GetJobRequest req;
    req.set_job_id("j-1");
    v1::Job resp;
    ASSERT_TRUE(jobs_->GetJob(&ctx, req, &resp).ok());
    ExpectLast("GetJob", req);
    EXPECT_TRUE(MessageDifferencer::Equals(resp, job));
  }
  {
    grpc::ClientContext ctx;
    v1::ListJobsRequest req;
    req.set_pool("gpu-a");
    req.set_state(v1::JOB_STATE_RUNNING);
    req.set_page_size(5);
    v1::ListJobsResponse resp;
    ASSERT_TRUE(jobs_->ListJobs(&ctx, req, &resp).ok());
    ExpectLast("ListJobs", req);
  }
  {
    grpc::ClientContext ctx;
    v1::CancelJobRequest req;
    req.set_job_id("j-1");
    req.set_reason("done");
    v1::Job resp;
    ASSERT_TRUE(jobs_->CancelJob(&ctx, req, &resp).ok());
    ExpectLast("CancelJob", req);
    EXPECT_EQ(resp.id(), "j-1");
  }
  {
    grpc::ClientContext ctx;
    v1::CreatePoolRequest req;
    req.mutable_pool()->set_name("gpu-a");
    req.mutable_pool()->set_compute_overcommit(1.5);
    v1::Pool resp;
    ASSERT_TRUE(pools_->CreatePool(&ctx, req, &resp).ok());
    ExpectLast("CreatePool", req);
  }
  {
    grpc::ClientContext ctx;
    v1::GetPoolRequest req;
    req.set_name("gpu-a");
    v1::Pool resp;
    ASSERT_TRUE(pools_->GetPool(&ctx, req, &resp).ok());
    ExpectLast("GetPool", req);
  }
  {
    grpc::ClientContext ctx;
    v1::ListPoolsRequest req;
    v1::ListPoolsResponse resp;
    ASSERT_TRUE(pools_->ListPools(&ctx, req, &resp).ok());
    ExpectLast("ListPools", req);
  }
  {
    grpc::ClientContext ctx;
    v1::UpdatePoolRequest req;
    req.mutable_pool()->set_name("gpu-a");
    req.mutable_update_mask()->add_paths("compute_overcommit");
    v1::Pool resp;
    ASSERT_TRUE(pools_->UpdatePool(&ctx, req, &resp).ok());
    ExpectLast("UpdatePool", req);
  }
  {
    grpc::ClientContext ctx;
    v1::DeletePoolRequest req;
    req.set_name("gpu-a");
    v1::DeletePoolResponse resp;
    ASSERT_TRUE(pools_->DeletePool(&ctx, req, &resp).ok());
    ExpectLast("DeletePool", req);
  }
  {
    grpc::ClientContext ctx;
    v1::ListNodesRequest req;
    req.set_pool("gpu-a");
    v1::ListNodesResponse resp;
    ASSERT_TRUE(nodes_->ListNodes(&ctx, req, &resp).ok());
    ExpectLast("ListNodes", req);
  }
  {
    grpc::ClientContext ctx;
    v1::GetNodeRequest req;
    req.set_name("node-1");
    v1::Node resp;
    ASSERT_TRUE(nodes_->GetNode(&ctx, req, &resp).ok());
    ExpectLast("GetNode", req);
  }
  v1::NodeActionRequest action;
  action.set_name("node-1");
  {
    grpc::ClientContext ctx;
    v1::Node resp;
    ASSERT_TRUE(nodes_->CordonNode(&ctx, action, &resp).ok());
    ExpectLast("CordonNode", action);
  }
  {
    grpc::ClientContext ctx;
    v1::Node resp;
    ASSERT_TRUE(nodes_->UncordonNode(&ctx, action, &resp).ok());
    ExpectLast("UncordonNode", action);
  }
  {
    grpc::ClientContext ctx;
    v1::Node resp;
    ASSERT_TRUE(nodes_->DrainNode(&ctx, action, &resp).ok());
    ExpectLast("DrainNode", action);
  }
  {
    grpc::ClientContext ctx;
    v1::ListGpuModelsRequest req;
    v1::ListGpuModelsResponse resp;
    ASSERT_TRUE(catalog_->ListGpuModels(&ctx, req, &resp).ok());
    ExpectLast("ListGpuModels", req);
  }
  EXPECT_EQ(fake_.call_count(), 15u);
}

TEST_F(GrpcTest, TenantServiceRpcsReachTheirMethodsWithTheRequestAndReply) {
  v1::Tenant tenant;
  tenant.set_path("acme/research");
  tenant.mutable_create_time()->set_seconds(1'795'362'018);
  v1::Quota quota;
  quota.set_tenant("acme/research");
  quota.set_pool("gpu-a");
  quota.mutable_limit()->mutable_resources()->set_milli_tflops(400'000);
  quota.mutable_used()->set_devices(2);
  fake_.SetReply("GetTenant", tenant);
  fake_.SetReply("SetQuota", quota);

  // Calls `rpc` on the tenants stub and checks the fake saw `req`; returns the reply.
  auto call = [&](auto rpc, const char* method, const auto& req, auto resp) {
    grpc::ClientContext ctx;
    grpc::Status st = ((*tenants_).*rpc)(&ctx, req, &resp);
    EXPECT_TRUE(st.ok()) << method << ": " << st.error_message();
    ExpectLast(method, req);
    return resp;
  };
  using S = v1::TenantService::Stub;
  v1::CreateTenantRequest create;
  create.mutable_tenant()->set_path("acme/research");
  call(&S::CreateTenant, "CreateTenant", create, v1::Tenant{});
  v1::GetTenantRequest get;
  get.set_path("acme/research");
  EXPECT_TRUE(
      MessageDifferencer::Equals(call(&S::GetTenant, "GetTenant", get, v1::Tenant{}), tenant));
  v1::ListTenantsRequest list;
  list.set_prefix("acme");
  call(&S::ListTenants, "ListTenants", list, v1::ListTenantsResponse{});
  v1::DeleteTenantRequest del;
  del.set_path("acme/research");
  call(&S::DeleteTenant, "DeleteTenant", del, v1::DeleteTenantResponse{});
  v1::SetQuotaRequest set;
  set.mutable_quota()->set_tenant("acme/research");
  set.mutable_quota()->set_pool("gpu-a");
  set.mutable_quota()->mutable_guaranteed()->set_sku("medium");
  set.mutable_quota()->mutable_guaranteed()->set_sku_count(4);
  EXPECT_TRUE(MessageDifferencer::Equals(call(&S::SetQuota, "SetQuota", set, v1::Quota{}), quota));
  v1::GetQuotaRequest get_quota;
  get_quota.set_tenant("acme/research");
  get_quota.set_pool("gpu-a");
  call(&S::GetQuota, "GetQuota", get_quota, v1::Quota{});
  v1::ListQuotasRequest list_quotas;
  list_quotas.set_tenant_prefix("acme");
  list_quotas.set_pool("gpu-a");
  call(&S::ListQuotas, "ListQuotas", list_quotas, v1::ListQuotasResponse{});
  v1::DeleteQuotaRequest del_quota;
  del_quota.set_tenant("acme/research");
  del_quota.set_pool("gpu-a");
  call(&S::DeleteQuota, "DeleteQuota", del_quota, v1::DeleteQuotaResponse{});
  EXPECT_EQ(fake_.call_count(), 8u);

  // Errors pass through with their code and message.
  fake_.FailWith(Status::FailedPrecondition("tenant 'acme' still has child 'acme/research'"));
  grpc::ClientContext ctx;
  v1::DeleteTenantResponse resp;
  del.set_path("acme");
  grpc::Status st = tenants_->DeleteTenant(&ctx, del, &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(st.error_message(), "tenant 'acme' still has child 'acme/research'");
}

TEST_F(GrpcTest, StatusesPassThroughUnchanged) {
  fake_.ReplyAsync(true);
  for (int code = 1; code <= 16; ++code) {
    fake_.FailWith(
        Status(static_cast<StatusCode>(code), "pool 'gpu-a': reason " + std::to_string(code)));
    grpc::ClientContext ctx;
    v1::GetPoolRequest req;
    v1::Pool resp;
    const grpc::Status st = pools_->GetPool(&ctx, req, &resp);
    EXPECT_EQ(static_cast<int>(st.error_code()), code);
    EXPECT_EQ(st.error_message(), "pool 'gpu-a': reason " + std::to_string(code));
  }
}

// Issue 16: a request that is not a protobuf message got UNIMPLEMENTED with no message, as if the
// method did not exist.
TEST_F(GrpcTest, UnparseableRequestIsInvalidArgumentWithAMessage) {
  grpc::GenericStub generic(channel_);
  const std::string garbage = "\xff\xff\xff\xff\xff\x0f not protobuf";
  grpc::Slice slice(garbage);
  grpc::ByteBuffer request(&slice, 1);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  std::promise<grpc::Status> done;
  grpc::ByteBuffer response;
  generic.UnaryCall(&ctx, "/gpupool.v1.JobService/SubmitJob", grpc::StubOptions(), &request,
                    &response, [&](grpc::Status s) { done.set_value(std::move(s)); });
  const grpc::Status st = done.get_future().get();
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << st.error_message();
  EXPECT_EQ(st.error_message(),
            "request: the message is not a valid gpupool.v1.SubmitJobRequest (protobuf encoding)");
  EXPECT_EQ(fake_.call_count(), 0u);

  // A method no service has stays UNIMPLEMENTED.
  grpc::ClientContext ctx2;
  ctx2.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  std::promise<grpc::Status> done2;
  generic.UnaryCall(&ctx2, "/gpupool.v1.JobService/Explode", grpc::StubOptions(), &request,
                    &response, [&](grpc::Status s) { done2.set_value(std::move(s)); });
  EXPECT_EQ(done2.get_future().get().error_code(), grpc::StatusCode::UNIMPLEMENTED);
}

// Issue 16: idle connections that never speak held the gRPC port's descriptors.
TEST_F(GrpcTest, ConnectionsThatNeverHandshakeAreClosed) {
  server_->Shutdown();
  GrpcServerOptions options;
  options.handshake_timeout = std::chrono::milliseconds(200);
  server_ = std::make_unique<GrpcServer>(fake_, auth_, "127.0.0.1:0", options);
  ASSERT_TRUE(server_->Start().ok());
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(server_->port()));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  timeval tv{60, 0};  // a bound for a broken server, not the expectation
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  char buf[256];
  ssize_t n = 0;
  do {  // the server may send its SETTINGS first; then it must hang up
    n = ::recv(fd, buf, sizeof buf, 0);
  } while (n > 0);
  EXPECT_EQ(n, 0) << "the server did not close a connection that never handshook";
  ::close(fd);
}

TEST_F(GrpcTest, AuthenticationFromMetadata) {
  server_->Shutdown();
  auto auth = Authenticator::Create({{"alice-secret", "acme/alice", false}});
  ASSERT_TRUE(auth.ok());
  auth_ = std::move(auth).value();
  StartServer();

  for (const std::string header : {"", "Bearer nope", "Token alice-secret"}) {
    grpc::ClientContext ctx;
    if (!header.empty()) ctx.AddMetadata("authorization", header);
    v1::GetJobRequest req;
    v1::Job resp;
    const grpc::Status st = jobs_->GetJob(&ctx, req, &resp);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAUTHENTICATED) << header;
  }
  EXPECT_EQ(fake_.call_count(), 0u);
  {
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer alice-secret");
    v1::GetJobRequest req;
    v1::Job resp;
    ASSERT_TRUE(jobs_->GetJob(&ctx, req, &resp).ok());
    EXPECT_EQ(fake_.last().ctx.scope, "acme/alice");
    EXPECT_FALSE(fake_.last().ctx.admin());
  }
  {  // streams check too
    grpc::ClientContext ctx;
    v1::WatchJobRequest req;
    auto reader = jobs_->WatchJob(&ctx, req);
    v1::JobEvent e;
    EXPECT_FALSE(reader->Read(&e));
    EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::UNAUTHENTICATED);
  }
}

v1::JobEvent Event(const std::string& message) {
  v1::JobEvent e;
  e.set_message(message);
  e.mutable_job()->set_id("j-1");
  return e;
}

TEST_F(GrpcTest, WatchJobStreamsEventsThenTheStatus) {
  std::vector<v1::JobEvent> events;
  for (int i = 0; i < 50; ++i) events.push_back(Event("event " + std::to_string(i)));
  fake_.SetStream(events, Status::Ok());
  {
    grpc::ClientContext ctx;
    v1::WatchJobRequest req;
    req.set_job_id("j-1");
    auto reader = jobs_->WatchJob(&ctx, req);
    v1::JobEvent e;
    int n = 0;
    while (reader->Read(&e)) EXPECT_EQ(e.message(), "event " + std::to_string(n++));
    EXPECT_EQ(n, 50);
    EXPECT_TRUE(reader->Finish().ok());
    ExpectLast("WatchJob", req);
  }
  fake_.SetStream({Event("a")}, Status::Unavailable("scheduler restarting"));
  {
    grpc::ClientContext ctx;
    auto reader = jobs_->WatchJob(&ctx, v1::WatchJobRequest());
    v1::JobEvent e;
    EXPECT_TRUE(reader->Read(&e));
    EXPECT_FALSE(reader->Read(&e));
    const grpc::Status st = reader->Finish();
    EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAVAILABLE);
    EXPECT_EQ(st.error_message(), "scheduler restarting");
  }
  v1::TaskLogChunk chunk;
  chunk.set_data("hello\n");
  chunk.set_eof(true);
  fake_.SetLogChunks({chunk});
  fake_.SetStream({}, Status::Ok());
  {
    grpc::ClientContext ctx;
    v1::GetTaskLogsRequest req;
    req.set_task_id("j-1.0");
    req.set_follow(true);
    auto reader = jobs_->GetTaskLogs(&ctx, req);
    v1::TaskLogChunk got;
    ASSERT_TRUE(reader->Read(&got));
    EXPECT_EQ(got.data(), "hello\n");
    EXPECT_FALSE(reader->Read(&got));
    EXPECT_TRUE(reader->Finish().ok());
    ExpectLast("GetTaskLogs", req);
  }
}

TEST_F(GrpcTest, ClientCancelCancelsTheStream) {
  fake_.SetStream({Event("a")}, Status::Ok(), /*hold=*/true);
  grpc::ClientContext ctx;
  auto reader = jobs_->WatchJob(&ctx, v1::WatchJobRequest());
  v1::JobEvent e;
  ASSERT_TRUE(reader->Read(&e));
  ctx.TryCancel();
  EXPECT_FALSE(reader->Read(&e));
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_TRUE(WaitFor([&] { return fake_.cancels() == 1; }));
}

TEST_F(GrpcTest, ShutdownEndsOpenStreamsQuickly) {
  fake_.SetStream({Event("a")}, Status::Ok(), /*hold=*/true);
  grpc::ClientContext ctx;
  auto reader = jobs_->WatchJob(&ctx, v1::WatchJobRequest());
  v1::JobEvent e;
  ASSERT_TRUE(reader->Read(&e));
  const auto start = std::chrono::steady_clock::now();
  server_->Shutdown();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(1500));
  EXPECT_FALSE(reader->Read(&e));
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(fake_.cancels(), 1);
}

TEST_F(GrpcTest, RequestMetricsByMethodAndCode) {
  {
    grpc::ClientContext ctx;
    v1::Job resp;
    ASSERT_TRUE(jobs_->GetJob(&ctx, v1::GetJobRequest(), &resp).ok());
  }
  fake_.FailWith(Status::NotFound("job 'x': not found"));
  {
    grpc::ClientContext ctx;
    v1::Job resp;
    EXPECT_FALSE(jobs_->GetJob(&ctx, v1::GetJobRequest(), &resp).ok());
  }
  std::string text;
  ASSERT_TRUE(WaitFor([&] {
    text = prometheus::TextSerializer().Serialize(registry_->Collect());
    return text.find(R"(code="NOT_FOUND")") != std::string::npos;
  })) << text;
  EXPECT_NE(
      text.find(
          R"(gpupool_grpc_requests_total{code="OK",method="/gpupool.v1.JobService/GetJob"} 1)"),
      std::string::npos)
      << text;
  EXPECT_NE(
      text.find(
          R"(gpupool_grpc_requests_total{code="NOT_FOUND",method="/gpupool.v1.JobService/GetJob"} 1)"),
      std::string::npos)
      << text;
  EXPECT_NE(
      text.find(
          R"(gpupool_grpc_request_duration_seconds_count{method="/gpupool.v1.JobService/GetJob"} 2)"),
      std::string::npos)
      << text;
}

// A stand-in for the agent stream service that gpupoold registers beside the API.
class FakeAgentService final : public v1::AgentService::CallbackService {
 public:
  grpc::ServerBidiReactor<v1::AgentMessage, v1::SchedulerMessage>* Connect(
      grpc::CallbackServerContext*) override {
    class Reject final : public grpc::ServerBidiReactor<v1::AgentMessage, v1::SchedulerMessage> {
     public:
      Reject() { Finish(grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "agent service")); }
      void OnDone() override { delete this; }
    };
    return new Reject;
  }

 private:
  v1::AgentMessage linked_;  // links agent.pb.o, whose descriptors name the method in metrics
};

TEST(GrpcServerTest, PortInUseIsAClearError) {
  FakeApiService fake;
  Authenticator auth;
  GrpcServer first(fake, auth, "127.0.0.1:0");
  ASSERT_TRUE(first.Start().ok());
  GrpcServer second(fake, auth, "127.0.0.1:" + std::to_string(first.port()));
  const Status st = second.Start();
  EXPECT_EQ(st.code(), StatusCode::kUnavailable);
  EXPECT_NE(st.message().find("Address already in use"), std::string::npos) << st.message();
  EXPECT_EQ(first.Start().code(), StatusCode::kFailedPrecondition);
}

TEST(GrpcServerTest, ExtraServicesShareThePort) {
  FakeApiService fake;
  Authenticator auth;
  FakeAgentService agent;
  auto registry = std::make_shared<prometheus::Registry>();
  GrpcServerOptions options;
  options.metrics = registry;
  GrpcServer server(fake, auth, "127.0.0.1:0", options);
  server.AddService(&agent);
  ASSERT_TRUE(server.Start().ok());
  auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(server.port()),
                                     grpc::InsecureChannelCredentials());
  {
    grpc::ClientContext ctx;
    auto stream = v1::AgentService::NewStub(channel)->Connect(&ctx);
    stream->WritesDone();
    const grpc::Status st = stream->Finish();
    EXPECT_EQ(st.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
    EXPECT_EQ(st.error_message(), "agent service");
  }
  {
    grpc::ClientContext ctx;
    v1::ListGpuModelsResponse resp;
    EXPECT_TRUE(v1::CatalogService::NewStub(channel)
                    ->ListGpuModels(&ctx, v1::ListGpuModelsRequest(), &resp)
                    .ok());
  }
  server.Shutdown();
  const std::string text = prometheus::TextSerializer().Serialize(registry->Collect());
  EXPECT_NE(text.find(R"(method="/gpupool.v1.AgentService/Connect")"), std::string::npos) << text;
}

}  // namespace
}  // namespace gpupool::api
