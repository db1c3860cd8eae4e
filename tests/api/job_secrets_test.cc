// SubmitJob's idempotency key and secret env values, through both faces on a real PostgreSQL
// (tests/api/pg_stack.h), across a restart of the whole stack on the same database.
#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>

#include <thread>

#include "gpupool/v1/jobs.grpc.pb.h"
#include "gpupool/v1/pools.grpc.pb.h"
#include "tests/api/pg_stack.h"
#include "tests/support/pg_fixture.h"

namespace gpupool::api::testing {
namespace {

using http::verb;

constexpr char kSecret[] = "hf_s3cret_value_42";

v1::SubmitJobRequest Job(const std::string& tenant, const std::string& key = "") {
  v1::SubmitJobRequest req;
  v1::JobSpec* spec = req.mutable_spec();
  spec->set_tenant(tenant);
  spec->set_pool("gpu");
  spec->set_task_count(1);
  spec->mutable_template_()->add_command("true");
  auto* f = spec->mutable_template_()->mutable_resources()->mutable_fractional();
  f->set_milli_tflops(1000);
  f->set_vram_mib(1024);
  req.set_idempotency_key(key);
  return req;
}

grpc::Status Submit(const PgStack& s, const v1::SubmitJobRequest& req, v1::SubmitJobResponse* resp,
                    const std::string& token = kTenantToken) {
  auto ctx = As(token);
  return v1::JobService::NewStub(s.Channel())->SubmitJob(ctx.get(), req, resp);
}

void CreatePool(const PgStack& s) {
  ASSERT_EQ(s.Rest(verb::post, "/v1/pools", R"({"pool": {"name": "gpu"}})").status, 200);
}

TEST(Idempotency, ARetryReturnsTheSameJobAndADifferentRequestIsRefused) {
  ASSERT_OK_AND_ASSIGN(std::string uri, gpupool::testing::CreateTestDatabase());
  std::string first_id;
  {
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<PgStack> s, PgStack::Start(uri));
    CreatePool(*s);
    v1::SubmitJobResponse a, b;
    ASSERT_TRUE(Submit(*s, Job("acme/research", "nightly-1"), &a).ok());
    first_id = a.job_id();
    ASSERT_TRUE(Submit(*s, Job("acme/research", "nightly-1"), &b).ok());
    EXPECT_EQ(b.job_id(), first_id);
    EXPECT_EQ(b.job().spec().tenant(), "acme/research");

    // REST: the header, or the body field, names the same key.
    const std::string body =
        R"({"spec": {"tenant": "acme/research", "pool": "gpu", "taskCount": 1, "template":
            {"command": ["true"], "resources": {"fractional": {"milliTflops": "1000",
             "vramMib": 1024}}}}})";
    HttpResult r =
        s->Rest(verb::post, "/v1/jobs", body, kTenantToken, {{"Idempotency-Key", "nightly-1"}});
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_NE(r.body.find("\"jobId\":\"" + first_id + "\""), std::string::npos) << r.body;

    // The same key with another spec: refused, naming the key and the job.
    v1::SubmitJobRequest other = Job("acme/research", "nightly-1");
    other.mutable_spec()->set_task_count(2);
    v1::SubmitJobResponse c;
    grpc::Status st = Submit(*s, other, &c);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::ALREADY_EXISTS);
    EXPECT_EQ(st.error_message(),
              "idempotency_key: 'nightly-1' was already used by tenant 'acme/research' for a "
              "different request (job " +
                  first_id + "); use a new key for a new job");
    r = s->Rest(verb::post, "/v1/jobs",
                std::string(body).replace(body.find("\"taskCount\": 1"), 14, "\"taskCount\": 3"),
                kTenantToken, {{"Idempotency-Key", "nightly-1"}});
    EXPECT_EQ(r.status, 409) << r.body;

    // Keys are per tenant: another tenant's same key is its own job.
    v1::SubmitJobResponse d;
    ASSERT_TRUE(Submit(*s, Job("acme2", "nightly-1"), &d, kOtherToken).ok());
    EXPECT_NE(d.job_id(), first_id);

    // Bad keys and a header that contradicts the body.
    EXPECT_EQ(Submit(*s, Job("acme/research", "has space"), &c).error_code(),
              grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_EQ(Submit(*s, Job("acme/research", std::string(129, 'k')), &c).error_code(),
              grpc::StatusCode::INVALID_ARGUMENT);
    std::string keyed = body;
    keyed.insert(1, R"("idempotencyKey": "other", )");
    r = s->Rest(verb::post, "/v1/jobs", keyed, kTenantToken, {{"Idempotency-Key", "nightly-1"}});
    EXPECT_EQ(r.status, 400) << r.body;
    EXPECT_NE(r.body.find("Idempotency-Key"), std::string::npos) << r.body;
    r = s->Rest(verb::get, "/v1/pools", "", kAdminToken, {{"Idempotency-Key", "x"}});
    EXPECT_EQ(r.status, 400) << r.body;
  }
  // Durable: after a restart on the same database, the retry still finds its job.
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<PgStack> s, PgStack::Start(uri));
  v1::SubmitJobResponse again;
  ASSERT_TRUE(Submit(*s, Job("acme/research", "nightly-1"), &again).ok());
  EXPECT_EQ(again.job_id(), first_id);
}

TEST(Idempotency, ConcurrentRetriesAllGetTheOneJob) {
  ASSERT_OK_AND_ASSIGN(std::string uri, gpupool::testing::CreateTestDatabase());
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<PgStack> s, PgStack::Start(uri));
  CreatePool(*s);
  constexpr int kClients = 8;
  std::vector<std::string> ids(kClients);
  std::vector<grpc::Status> codes(kClients);
  std::vector<std::thread> threads;
  for (int i = 0; i < kClients; ++i) {
    threads.emplace_back([&, i] {
      v1::SubmitJobResponse resp;
      codes[i] = Submit(*s, Job("acme/research", "burst"), &resp);
      ids[i] = resp.job_id();
    });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < kClients; ++i) {
    EXPECT_TRUE(codes[i].ok()) << codes[i].error_message();
    EXPECT_EQ(ids[i], ids[0]);
  }
  v1::ListJobsRequest list;
  v1::ListJobsResponse jobs;
  auto ctx = As(kAdminToken);
  ASSERT_TRUE(v1::JobService::NewStub(s->Channel())->ListJobs(ctx.get(), list, &jobs).ok());
  EXPECT_EQ(jobs.jobs_size(), 1);
}

// Every way a job comes back, for every reader that may see it: never the secret value.
void ExpectNoSecret(const PgStack& s, const std::string& id) {
  for (const char* token : {kTenantToken, kParentToken, kAdminToken}) {
    SCOPED_TRACE(token);
    v1::GetJobRequest get;
    get.set_job_id(id);
    v1::Job job;
    auto ctx = As(token);
    ASSERT_TRUE(v1::JobService::NewStub(s.Channel())->GetJob(ctx.get(), get, &job).ok());
    EXPECT_EQ(job.spec().template_().secret_env().at("HF_TOKEN"), "<redacted>");
    EXPECT_EQ(job.spec().template_().env().at("EPOCHS"), "3");
    EXPECT_EQ(job.DebugString().find(kSecret), std::string::npos);

    v1::ListJobsRequest list;
    v1::ListJobsResponse jobs;
    auto ctx2 = As(token);
    ASSERT_TRUE(v1::JobService::NewStub(s.Channel())->ListJobs(ctx2.get(), list, &jobs).ok());
    EXPECT_EQ(jobs.DebugString().find(kSecret), std::string::npos);

    v1::WatchJobRequest watch;
    watch.set_job_id(id);
    auto ctx3 = As(token);
    ctx3->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    auto reader = v1::JobService::NewStub(s.Channel())->WatchJob(ctx3.get(), watch);
    v1::JobEvent event;
    ASSERT_TRUE(reader->Read(&event));  // the current state comes first
    EXPECT_EQ(event.DebugString().find(kSecret), std::string::npos);
    ctx3->TryCancel();
    (void)reader->Finish();

    for (const std::string& target : {"/v1/jobs/" + id, std::string("/v1/jobs")}) {
      HttpResult r = s.Rest(verb::get, target, "", token);
      ASSERT_EQ(r.status, 200) << r.body;
      EXPECT_EQ(r.body.find(kSecret), std::string::npos) << r.body;
      // protobuf's JSON printer escapes '<' and '>'.
      EXPECT_NE(r.body.find(R"("secretEnv":{"HF_TOKEN":"\u003credacted\u003e"})"),
                std::string::npos)
          << r.body;
    }
  }
}

TEST(SecretEnv, NoReaderEverSeesTheValue) {
  ASSERT_OK_AND_ASSIGN(std::string uri, gpupool::testing::CreateTestDatabase());
  std::string id;
  {
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<PgStack> s, PgStack::Start(uri));
    CreatePool(*s);
    v1::SubmitJobRequest req = Job("acme/research");
    (*req.mutable_spec()->mutable_template_()->mutable_env())["EPOCHS"] = "3";
    (*req.mutable_spec()->mutable_template_()->mutable_secret_env())["HF_TOKEN"] = kSecret;
    v1::SubmitJobResponse resp;
    ASSERT_TRUE(Submit(*s, req, &resp).ok());
    id = resp.job_id();
    EXPECT_EQ(resp.DebugString().find(kSecret), std::string::npos) << "not even in the reply";
    ExpectNoSecret(*s, id);

    // A name in both maps is refused, naming the name and never a value.
    (*req.mutable_spec()->mutable_template_()->mutable_env())["HF_TOKEN"] = "plain";
    grpc::Status st = Submit(*s, req, &resp);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_EQ(st.error_message(), "spec.template.secret_env: 'HF_TOKEN' is also in env");
  }
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<PgStack> s, PgStack::Start(uri));  // recovered
  ExpectNoSecret(*s, id);
}

}  // namespace
}  // namespace gpupool::api::testing
