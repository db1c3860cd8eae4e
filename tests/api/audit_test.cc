// The audit log end to end: both faces on a real PostgreSQL (tests/api/pg_stack.h). Mutating
// calls and denied calls are recorded with actor, verb, resource, outcome, request id and source;
// successful reads are not; AuditService and GET /v1/audit filter and page; a tenant sees only its
// own subtree; and while the log cannot be written, changes are refused (fail closed) until the
// backlog is written.
#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>

#include "gpupool/v1/audit.grpc.pb.h"
#include "gpupool/v1/jobs.grpc.pb.h"
#include "gpupool/v1/pools.grpc.pb.h"
#include "store/memory_store.h"
#include "tests/api/pg_stack.h"
#include "tests/support/pg_fixture.h"
#include "tests/support/wait_for.h"

namespace gpupool::api::testing {
namespace {

using http::verb;

constexpr char kJob[] =
    R"({"spec": {"tenant": "acme/research", "pool": "gpu", "taskCount": 1,
        "template": {"command": ["true"],
        "resources": {"fractional": {"milliTflops": "1000", "vramMib": 1024}}}}})";

v1::ListAuditRecordsResponse Audit(const PgStack& s, v1::ListAuditRecordsRequest req,
                                   const std::string& token = kAdminToken) {
  v1::ListAuditRecordsResponse resp;
  auto ctx = As(token);
  grpc::Status st = v1::AuditService::NewStub(s.Channel())->ListAuditRecords(ctx.get(), req, &resp);
  EXPECT_TRUE(st.ok()) << st.error_message();
  return resp;
}

v1::ListAuditRecordsResponse ByVerb(const PgStack& s, const std::string& v) {
  v1::ListAuditRecordsRequest req;
  req.set_verb(v);
  return Audit(s, req);
}

v1::ListAuditRecordsResponse FromJson(const std::string& json) {
  v1::ListAuditRecordsResponse m;
  EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(json, &m).ok()) << json;
  return m;
}

TEST(AuditLog, MutatingAndDeniedCallsAreRecordedByBothFaces) {
  ASSERT_OK_AND_ASSIGN(std::string uri, gpupool::testing::CreateTestDatabase());
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<PgStack> s, PgStack::Start(uri));

  // gRPC, admin, with the caller's request id.
  {
    v1::CreatePoolRequest req;
    req.mutable_pool()->set_name("gpu");
    v1::Pool pool;
    auto ctx = As(kAdminToken, "req-create-1");
    ASSERT_TRUE(v1::PoolService::NewStub(s->Channel())->CreatePool(ctx.get(), req, &pool).ok());
    auto it = ctx->GetServerInitialMetadata().find("x-request-id");
    ASSERT_NE(it, ctx->GetServerInitialMetadata().end());
    EXPECT_EQ(std::string(it->second.data(), it->second.size()), "req-create-1");
  }
  v1::ListAuditRecordsResponse r = ByVerb(*s, "CreatePool");
  ASSERT_EQ(r.records_size(), 1);
  const v1::AuditRecord& created = r.records(0);
  EXPECT_EQ(created.principal(), "token:ops");
  EXPECT_EQ(created.key_id(), "token:ops");
  EXPECT_EQ(created.role(), "admin");
  EXPECT_EQ(created.resource(), "pool/gpu");
  EXPECT_EQ(created.outcome(), "OK");
  EXPECT_EQ(created.request_id(), "req-create-1");
  EXPECT_TRUE(created.source().starts_with("ipv4:127.0.0.1:")) << created.source();
  EXPECT_GT(created.time().seconds(), 1'700'000'000);

  // REST, tenant: a submission; the reply carries the new request id, the record the new job.
  HttpResult sub = s->Rest(verb::post, "/v1/jobs", kJob, kTenantToken);
  ASSERT_EQ(sub.status, 200) << sub.body;
  const std::string rid(sub.headers["X-Request-Id"]);
  EXPECT_EQ(rid.size(), 16u);
  r = ByVerb(*s, "SubmitJob");
  ASSERT_EQ(r.records_size(), 1);
  EXPECT_EQ(r.records(0).principal(), "acme/research");
  EXPECT_EQ(r.records(0).role(), "tenant-admin");
  EXPECT_EQ(r.records(0).key_id(), "token:acme/research");
  EXPECT_EQ(r.records(0).tenant(), "acme/research");
  EXPECT_TRUE(r.records(0).resource().starts_with("job/")) << r.records(0).resource();
  EXPECT_EQ(r.records(0).request_id(), rid);
  EXPECT_TRUE(r.records(0).source().starts_with("127.0.0.1:")) << r.records(0).source();

  // Successful reads are not recorded.
  ASSERT_EQ(s->Rest(verb::get, "/v1/pools/gpu").status, 200);
  EXPECT_EQ(ByVerb(*s, "GetPool").records_size(), 0);

  // Denied: a bad credential (REST and gRPC), a tenant calling an admin verb, a failed mutation.
  EXPECT_EQ(s->Rest(verb::get, "/v1/jobs", "", "wrong-token").status, 401);
  {
    v1::ListJobsRequest req;
    v1::ListJobsResponse resp;
    auto ctx = As("wrong-token");
    EXPECT_EQ(v1::JobService::NewStub(s->Channel())->ListJobs(ctx.get(), req, &resp).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
  }
  EXPECT_EQ(s->Rest(verb::delete_, "/v1/pools/gpu", "", kTenantToken).status, 403);
  EXPECT_EQ(s->Rest(verb::delete_, "/v1/pools/nope").status, 404);

  v1::ListAuditRecordsRequest q;
  q.set_outcome("UNAUTHENTICATED");
  r = Audit(*s, q);
  ASSERT_EQ(r.records_size(), 2);
  for (const auto& rec : r.records()) {
    EXPECT_EQ(rec.verb(), "ListJobs");
    EXPECT_EQ(rec.role(), "anonymous");
    EXPECT_EQ(rec.principal(), "");
    EXPECT_EQ(rec.message().find("wrong-token"), std::string::npos) << "no token in the log";
  }
  r = ByVerb(*s, "DeletePool");
  ASSERT_EQ(r.records_size(), 2);
  EXPECT_EQ(r.records(0).outcome(), "NOT_FOUND");  // newest first
  EXPECT_EQ(r.records(0).resource(), "pool/nope");
  EXPECT_EQ(r.records(1).outcome(), "PERMISSION_DENIED");
  EXPECT_EQ(r.records(1).principal(), "acme/research");

  // REST: the same log with filters; paging by token.
  HttpResult page = s->Rest(verb::get, "/v1/audit?pageSize=2");
  ASSERT_EQ(page.status, 200) << page.body;
  v1::ListAuditRecordsResponse p1 = FromJson(page.body);
  ASSERT_EQ(p1.records_size(), 2);
  ASSERT_FALSE(p1.next_page_token().empty());
  page = s->Rest(verb::get, "/v1/audit?pageSize=10&pageToken=" + p1.next_page_token());
  ASSERT_EQ(page.status, 200) << page.body;
  v1::ListAuditRecordsResponse p2 = FromJson(page.body);
  EXPECT_EQ(p1.records_size() + p2.records_size(), 6) << page.body;
  EXPECT_TRUE(p2.next_page_token().empty());
  page = s->Rest(verb::get, "/v1/audit?resource=pool%2Fgpu&principal=token:ops");
  EXPECT_EQ(FromJson(page.body).records_size(), 1) << page.body;
  EXPECT_EQ(s->Rest(verb::get, "/v1/audit?since=yesterday").status, 400);
  EXPECT_EQ(s->Rest(verb::get, "/v1/audit?outcome=NOPE").status, 400);
  page = s->Rest(verb::get, "/v1/audit?since=2000-01-01T00:00:00Z&until=2001-01-01T00:00:00Z");
  EXPECT_EQ(FromJson(page.body).records_size(), 0) << page.body;

  // A tenant sees its own subtree only; its parent sees it too; another tenant sees nothing.
  r = Audit(*s, {}, kTenantToken);
  ASSERT_EQ(r.records_size(), 2);  // its submission and its denied DeletePool
  for (const auto& rec : r.records()) EXPECT_EQ(rec.tenant(), "acme/research");
  EXPECT_EQ(Audit(*s, {}, kParentToken).records_size(), 2);
  EXPECT_EQ(Audit(*s, {}, kOtherToken).records_size(), 0);
}

TEST(AuditLog, ChangesAreRefusedWhileTheLogCannotBeWritten) {
  MemoryStore store;
  auto registry = std::make_shared<prometheus::Registry>();
  AuditLog log(&store, {registry});
  auto entry = [](std::string verb) {
    AuditEntry e;
    e.verb = std::move(verb);
    e.actor.principal = "ops";
    e.request_id = "r";
    return e;
  };

  store.SetUnavailable(Status::Unavailable("database unavailable: test"));
  std::promise<void> durable;
  log.Record(entry("CreatePool"), true, [&durable] { durable.set_value(); });
  durable.get_future().get();  // the reply is not held forever: the record is queued for retry
  EXPECT_TRUE(gpupool::testing::WaitFor([&] { return !log.AdmitMutation().ok(); }));
  Status refused = log.AdmitMutation();
  EXPECT_EQ(refused.code(), StatusCode::kUnavailable);
  EXPECT_NE(refused.message().find("audit log cannot be written"), std::string::npos)
      << refused.ToString();
  EXPECT_EQ(log.pending(), 1u);

  store.SetUnavailable(Status::Ok());
  EXPECT_TRUE(gpupool::testing::WaitFor([&] { return log.pending() == 0; }));
  EXPECT_OK(log.AdmitMutation());
  ASSERT_OK_AND_ASSIGN(AuditPage page, store.ListAudit({}));
  ASSERT_EQ(page.records.size(), 1u);
  EXPECT_EQ(page.records[0].verb, "CreatePool");
}

TEST(AuditLog, DeniedReadsAreDroppedAndCountedWhenTheQueueIsFull) {
  MemoryStore store;
  auto registry = std::make_shared<prometheus::Registry>();
  AuditLog log(&store, {registry, 500, /*max_pending=*/1});
  store.SetUnavailable(Status::Unavailable("database unavailable: test"));
  AuditEntry e;
  e.verb = "ListJobs";
  e.code = StatusCode::kUnauthenticated;
  e.message = std::string("bad \xff bytes\0", 13);
  log.Record(e, false, nullptr);
  EXPECT_TRUE(gpupool::testing::WaitFor([&] { return !log.AdmitMutation().ok(); }));
  log.Record(e, false, nullptr);  // dropped: the queue is full
  EXPECT_EQ(log.pending(), 1u);
  store.SetUnavailable(Status::Ok());
  EXPECT_TRUE(gpupool::testing::WaitFor([&] { return log.pending() == 0; }));
  ASSERT_OK_AND_ASSIGN(AuditPage page, store.ListAudit({}));
  ASSERT_EQ(page.records.size(), 1u);
  EXPECT_EQ(page.records[0].message, "bad \xEF\xBF\xBD bytes") << "cleaned, not refused";
  double dropped = 0;
  for (const auto& family : registry->Collect()) {
    if (family.name != "gpupool_audit_records_dropped_total") continue;
    for (const auto& m : family.metric) dropped += m.counter.value;
  }
  EXPECT_EQ(dropped, 1);
}

}  // namespace
}  // namespace gpupool::api::testing
