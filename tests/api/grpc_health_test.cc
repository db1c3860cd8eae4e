// The standard gRPC health service on GrpcServer (what Kubernetes gRPC probes and
// grpc-health-probe ask) follows ApiService::Ready, needs no credential, and refuses unknown
// service names. Reflection is tested against a real gpupoold (tests/e2e/grpc_discovery_test.cc).
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "api/auth.h"
#include "api/grpc/grpc_server.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "tests/api/fake_api_service.h"

namespace gpupool::api {
namespace {

namespace health = ::grpc::health::v1;

class GrpcHealthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // A token is configured: health must answer without one.
    auto auth = Authenticator::Create({{"s3cret", "admin", true}});
    ASSERT_TRUE(auth.ok());
    auth_ = std::move(auth).value();
    server_ = std::make_unique<GrpcServer>(fake_, auth_, "127.0.0.1:0");
    ASSERT_TRUE(server_->Start().ok());
    channel_ = grpc::CreateChannel("127.0.0.1:" + std::to_string(server_->port()),
                                   grpc::InsecureChannelCredentials());
  }

  health::HealthCheckResponse::ServingStatus Check(const std::string& service,
                                                   grpc::Status* status = nullptr) {
    auto stub = health::Health::NewStub(channel_);
    grpc::ClientContext ctx;
    health::HealthCheckRequest req;
    req.set_service(service);
    health::HealthCheckResponse resp;
    grpc::Status st = stub->Check(&ctx, req, &resp);
    if (status != nullptr) *status = st;
    return resp.status();
  }

  testing::FakeApiService fake_;
  Authenticator auth_;
  std::unique_ptr<GrpcServer> server_;
  std::shared_ptr<grpc::Channel> channel_;
};

TEST_F(GrpcHealthTest, HealthFollowsReadiness) {
  EXPECT_EQ(Check(""), health::HealthCheckResponse::SERVING);
  EXPECT_EQ(Check("gpupool.v1.JobService"), health::HealthCheckResponse::SERVING);
  fake_.SetReady(Status::Unavailable("database unreachable"));
  EXPECT_EQ(Check(""), health::HealthCheckResponse::NOT_SERVING);
  fake_.SetReady(Status::Ok());
  EXPECT_EQ(Check("gpupool.v1.TenantService"), health::HealthCheckResponse::SERVING);
  grpc::Status st;
  Check("no.such.Service", &st);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::NOT_FOUND) << st.error_message();
}

}  // namespace
}  // namespace gpupool::api
