// End to end: gpupool_job_submissions_total counts every refused submission, including those
// refused by field validation at the API edge (before the core), over gRPC and REST alike, as a
// Prometheus scrape of the real gpupoold's /metrics shows.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <regex>

#include "gpupool/v1/jobs.grpc.pb.h"
#include "gpupool/v1/pools.grpc.pb.h"
#include "tests/api/http_client.h"
#include "tests/support/daemon_process.h"

namespace gpupool {
namespace {

using api::testing::HttpClient;
using api::testing::http::verb;
using testing::DaemonProcess;

// The value of gpupool_job_submissions_total{outcome="<outcome>"} in a scrape; 0 when absent.
double Submissions(const std::string& scrape, const std::string& outcome) {
  std::regex line("gpupool_job_submissions_total\\{outcome=\"" + outcome + "\"\\} ([0-9.e+]+)");
  std::smatch m;
  return std::regex_search(scrape, m, line) ? std::stod(m[1]) : 0;
}

v1::SubmitJobRequest ValidJob() {
  v1::SubmitJobRequest req;
  v1::JobSpec* s = req.mutable_spec();
  s->set_tenant("acme/metrics");
  s->set_pool("gpu");
  s->set_task_count(1);
  s->mutable_template_()->add_command("/bin/true");
  s->mutable_template_()->mutable_resources()->mutable_whole_gpus()->set_count(1);
  return req;
}

TEST(MetricsE2eTest, SubmissionsRefusedAtTheEdgeAreCountedAsInvalid) {
  auto started = DaemonProcess::Start({});
  ASSERT_TRUE(started.ok()) << started.status().ToString();
  DaemonProcess& daemon = **started;
  auto channel = grpc::CreateChannel(daemon.grpc_address(), grpc::InsecureChannelCredentials());
  auto pools = v1::PoolService::NewStub(channel);
  auto jobs = v1::JobService::NewStub(channel);
  {
    grpc::ClientContext ctx;
    v1::CreatePoolRequest req;
    req.mutable_pool()->set_name("gpu");
    v1::Pool pool;
    ASSERT_TRUE(pools->CreatePool(&ctx, req, &pool).ok());
  }
  auto submit = [&](const v1::SubmitJobRequest& req) {
    grpc::ClientContext ctx;
    v1::SubmitJobResponse resp;
    return jobs->SubmitJob(&ctx, req, &resp);
  };

  // gRPC: no spec; zero tasks; no command — each refused by field validation.
  v1::SubmitJobRequest no_spec;
  EXPECT_EQ(submit(no_spec).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  v1::SubmitJobRequest zero_tasks = ValidJob();
  zero_tasks.mutable_spec()->set_task_count(0);
  EXPECT_EQ(submit(zero_tasks).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  v1::SubmitJobRequest no_command = ValidJob();
  no_command.mutable_spec()->mutable_template_()->clear_command();
  EXPECT_EQ(submit(no_command).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  // REST: a bad tenant path.
  HttpClient http(daemon.http_port());
  auto rest = http.Send(verb::post, "/v1/jobs",
                        R"({"spec":{"tenant":"acme//x","pool":"gpu","taskCount":1,)"
                        R"("template":{"command":["/bin/true"],)"
                        R"("resources":{"wholeGpus":{"count":1}}}}})");
  EXPECT_EQ(rest.status, 400) << rest.body;
  // The core still counts what it refuses and what it accepts.
  v1::SubmitJobRequest unknown_pool = ValidJob();
  unknown_pool.mutable_spec()->set_pool("nope");
  EXPECT_EQ(submit(unknown_pool).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_TRUE(submit(ValidJob()).ok());

  auto scrape = http.Send(verb::get, "/metrics");
  ASSERT_EQ(scrape.status, 200);
  EXPECT_EQ(Submissions(scrape.body, "invalid"), 4) << scrape.body;
  EXPECT_EQ(Submissions(scrape.body, "not_found"), 1);
  EXPECT_EQ(Submissions(scrape.body, "accepted"), 1);
  EXPECT_EQ(daemon.Stop(), 0) << daemon.LogTail(20);
}

}  // namespace
}  // namespace gpupool
