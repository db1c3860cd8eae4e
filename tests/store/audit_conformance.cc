// The audit log part of the Store conformance suite (scheduler/audit_record.h): appends assign
// increasing ids, pages come newest first and resume by token, every filter narrows, a tenant
// subtree is matched on whole path segments, and text that is not UTF-8 is refused.
#include <future>

#include "tests/store/store_conformance.h"
#include "tests/support/status_macros.h"

namespace gpupool::testing {
namespace {

AuditRecord Rec(int64_t t, std::string principal, std::string tenant, std::string verb,
                std::string resource, int32_t code) {
  AuditRecord r;
  r.time_us = t;
  r.principal = std::move(principal);
  r.role = r.principal == "ops" ? "admin" : "tenant";
  r.tenant = std::move(tenant);
  r.verb = std::move(verb);
  r.resource = std::move(resource);
  r.code = code;
  r.request_id = "req-" + std::to_string(t);
  r.source = "127.0.0.1:4000";
  return r;
}

Status Append(Store& store, std::vector<AuditRecord> records) {
  std::promise<Status> p;
  store.AppendAudit(std::move(records), [&p](Status st) { p.set_value(std::move(st)); });
  return p.get_future().get();
}

std::vector<int64_t> Times(const AuditPage& page) {
  std::vector<int64_t> out;
  for (const AuditRecord& r : page.records) out.push_back(r.time_us);
  return out;
}

Result<AuditPage> List(Store& store, AuditQuery q) { return store.ListAudit(q); }

TEST_P(StoreConformanceTest, AuditLogAppendsAndFilters) {
  ASSERT_OK(Append(*store_, {Rec(1, "ops", "", "CreatePool", "pool/gpu", 0),
                             Rec(2, "acme", "acme", "SubmitJob", "job/4", 0),
                             Rec(3, "acme/research", "acme/research", "SubmitJob", "job/42", 0)}));
  ASSERT_OK(Append(*store_, {Rec(4, "acme2", "acme2", "CreatePool", "pool/x", 7),
                             Rec(5, "", "", "ListJobs", "jobs", 16)}));

  // Everything, newest first, ids increasing in append order.
  ASSERT_OK_AND_ASSIGN(AuditPage all, List(*store_, {}));
  EXPECT_EQ(Times(all), (std::vector<int64_t>{5, 4, 3, 2, 1}));
  for (size_t i = 1; i < all.records.size(); ++i) {
    EXPECT_GT(all.records[i - 1].id, all.records[i].id);
  }
  EXPECT_EQ(all.next_before_id, 0);
  AuditRecord want = Rec(3, "acme/research", "acme/research", "SubmitJob", "job/42", 0);
  want.id = all.records[2].id;
  EXPECT_EQ(all.records[2], want);

  AuditQuery q;
  q.verb = "SubmitJob";
  ASSERT_OK_AND_ASSIGN(AuditPage page, List(*store_, q));
  EXPECT_EQ(Times(page), (std::vector<int64_t>{3, 2}));
  q = {};
  q.principal = "acme";  // exact, not a prefix
  ASSERT_OK_AND_ASSIGN(page, List(*store_, q));
  EXPECT_EQ(Times(page), (std::vector<int64_t>{2}));
  q = {};
  q.resource = "job/4";  // a text prefix
  ASSERT_OK_AND_ASSIGN(page, List(*store_, q));
  EXPECT_EQ(Times(page), (std::vector<int64_t>{3, 2}));
  q = {};
  q.resource = "job/_";  // LIKE's wildcards are literal text
  ASSERT_OK_AND_ASSIGN(page, List(*store_, q));
  EXPECT_TRUE(page.records.empty());
  q = {};
  q.code = 7;
  ASSERT_OK_AND_ASSIGN(page, List(*store_, q));
  EXPECT_EQ(Times(page), (std::vector<int64_t>{4}));
  q = {};
  q.since_us = 2;  // inclusive
  q.until_us = 4;  // exclusive
  ASSERT_OK_AND_ASSIGN(page, List(*store_, q));
  EXPECT_EQ(Times(page), (std::vector<int64_t>{3, 2}));

  // A subtree is the tenant and the paths below it, on whole segments ("acme2" is not in it).
  q = {};
  q.tenant_subtree = "acme";
  ASSERT_OK_AND_ASSIGN(page, List(*store_, q));
  EXPECT_EQ(Times(page), (std::vector<int64_t>{3, 2}));
  q.tenant_subtree = "acme/research";
  ASSERT_OK_AND_ASSIGN(page, List(*store_, q));
  EXPECT_EQ(Times(page), (std::vector<int64_t>{3}));

  // Pages of two, resumed by the token.
  q = {};
  q.limit = 2;
  ASSERT_OK_AND_ASSIGN(page, List(*store_, q));
  EXPECT_EQ(Times(page), (std::vector<int64_t>{5, 4}));
  ASSERT_NE(page.next_before_id, 0);
  q.before_id = page.next_before_id;
  ASSERT_OK_AND_ASSIGN(page, List(*store_, q));
  EXPECT_EQ(Times(page), (std::vector<int64_t>{3, 2}));
  q.before_id = page.next_before_id;
  ASSERT_OK_AND_ASSIGN(page, List(*store_, q));
  EXPECT_EQ(Times(page), (std::vector<int64_t>{1}));
  EXPECT_EQ(page.next_before_id, 0);
}

TEST_P(StoreConformanceTest, AuditLogRefusesBadTextAndBadQueries) {
  AuditRecord bad = Rec(1, "ops", "", "CreatePool", "pool/\xff", 0);
  Status st = Append(*store_, {Rec(0, "ops", "", "CreatePool", "pool/a", 0), bad});
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
  EXPECT_EQ(st.message(), "audit.resource: text must be UTF-8 without NUL bytes");
  ASSERT_OK_AND_ASSIGN(AuditPage page, List(*store_, {}));
  EXPECT_TRUE(page.records.empty()) << "all or nothing";

  AuditQuery q;
  q.limit = 0;
  EXPECT_EQ(List(*store_, q).status().code(), StatusCode::kInvalidArgument);
  q.limit = 1001;
  EXPECT_EQ(List(*store_, q).status().code(), StatusCode::kInvalidArgument);
}

TEST_P(StoreConformanceTest, AuditLogIsNotFencedByTheEpoch) {
  std::unique_ptr<Store> other = OpenStore();
  ASSERT_NE(other, nullptr);
  ASSERT_OK(other->AcquireLeadership().status());  // store_ is fenced off now
  EXPECT_OK(Append(*store_, {Rec(1, "", "", "SubmitJob", "", 16)}));
  ASSERT_OK_AND_ASSIGN(AuditPage page, List(*other, {}));
  EXPECT_EQ(Times(page), (std::vector<int64_t>{1}));
}

}  // namespace
}  // namespace gpupool::testing
