// What tools find on a real gpupoold's gRPC port without its protos: server reflection, as
// `grpcurl list` and `grpcurl describe` ask for it, and the standard health service. The client
// side of reflection is a test-only proto (tests/e2e/proto), so this binary links no server.
#include <google/protobuf/descriptor.pb.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <set>

#include "gpupool/v1/jobs.grpc.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpc/reflection/v1alpha/reflection.grpc.pb.h"
#include "tests/support/daemon_process.h"

namespace gpupool {
namespace {

namespace reflection = ::grpc::reflection::v1alpha;

class GrpcDiscoveryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto d = testing::DaemonProcess::Start({});
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    daemon_ = std::move(d).value();
    channel_ = grpc::CreateChannel(daemon_->grpc_address(), grpc::InsecureChannelCredentials());
  }

  // One reflection exchange on its own stream, as grpcurl does it.
  reflection::ServerReflectionResponse Ask(const reflection::ServerReflectionRequest& req) {
    auto stub = reflection::ServerReflection::NewStub(channel_);
    grpc::ClientContext ctx;
    auto stream = stub->ServerReflectionInfo(&ctx);
    EXPECT_TRUE(stream->Write(req));
    stream->WritesDone();
    reflection::ServerReflectionResponse resp;
    EXPECT_TRUE(stream->Read(&resp));
    const grpc::Status st = stream->Finish();
    EXPECT_TRUE(st.ok()) << st.error_message();
    return resp;
  }

  std::unique_ptr<testing::DaemonProcess> daemon_;
  std::shared_ptr<grpc::Channel> channel_;
};

TEST_F(GrpcDiscoveryTest, GrpcurlCanListAndDescribeTheApiAndProbesSeeItServing) {
  reflection::ServerReflectionRequest list;
  list.set_list_services("*");
  const reflection::ServerReflectionResponse resp = Ask(list);
  ASSERT_TRUE(resp.has_list_services_response()) << resp.DebugString();
  std::set<std::string> names;
  for (const auto& s : resp.list_services_response().service()) names.insert(s.name());
  for (const char* want :
       {"gpupool.v1.JobService", "gpupool.v1.PoolService", "gpupool.v1.NodeService",
        "gpupool.v1.CatalogService", "gpupool.v1.TenantService", "gpupool.v1.AgentService",
        "grpc.health.v1.Health", "grpc.reflection.v1alpha.ServerReflection"}) {
    EXPECT_TRUE(names.count(want)) << want << " missing from " << resp.DebugString();
  }

  // `grpcurl describe gpupool.v1.JobService`: the file that defines it, with its methods.
  reflection::ServerReflectionRequest describe;
  describe.set_file_containing_symbol("gpupool.v1.JobService");
  const reflection::ServerReflectionResponse file = Ask(describe);
  ASSERT_TRUE(file.has_file_descriptor_response()) << file.DebugString();
  bool found = false;
  for (const std::string& bytes : file.file_descriptor_response().file_descriptor_proto()) {
    google::protobuf::FileDescriptorProto fd;
    ASSERT_TRUE(fd.ParseFromString(bytes));
    for (const auto& svc : fd.service()) {
      if (svc.name() != "JobService") continue;
      for (const auto& m : svc.method()) found |= m.name() == "SubmitJob";
    }
  }
  EXPECT_TRUE(found) << "JobService.SubmitJob not described";

  auto health = grpc::health::v1::Health::NewStub(channel_);
  grpc::ClientContext ctx;
  grpc::health::v1::HealthCheckRequest req;
  grpc::health::v1::HealthCheckResponse status;
  ASSERT_TRUE(health->Check(&ctx, req, &status).ok());
  EXPECT_EQ(status.status(), grpc::health::v1::HealthCheckResponse::SERVING);
}

}  // namespace
}  // namespace gpupool
