// The usage report off the hot path (store/pg_report_pool.h), on real PostgreSQL. A report is
// held inside the database (another session holds an ACCESS EXCLUSIVE lock on the ledger, so
// the report's SELECT waits) — a stand-in for a report that scans a very large ledger, with no
// timing involved. While it waits: a second report is refused at once with RESOURCE_EXHAUSTED
// (bounded concurrency), a submission still commits through the writer, and the readiness ping
// and event reads still answer on the reader. With a short statement timeout, a held report is
// cancelled by PostgreSQL and answered DEADLINE_EXCEEDED naming the limit, and the connection
// serves the next report. Limits set later (a configuration reload) apply to the next report.
#include <gtest/gtest.h>

#include <pqxx/pqxx>
#include <thread>

#include "store/pg_store.h"
#include "tests/store/store_testing.h"
#include "tests/support/pg_fixture.h"
#include "tests/support/status_macros.h"
#include "tests/support/wait_for.h"

namespace gpupool::testing {
namespace {

// Holds an ACCESS EXCLUSIVE lock on usage_ledger until Release() (or destruction).
class LedgerLock {
 public:
  explicit LedgerLock(const std::string& uri) : conn_(uri), txn_(conn_) {
    txn_.exec("LOCK TABLE usage_ledger IN ACCESS EXCLUSIVE MODE");
  }
  void Release() { txn_.abort(); }

 private:
  pqxx::connection conn_;
  pqxx::work txn_;
};

// Sessions of the database waiting for a lock while running a statement on the ledger.
int WaitingReports(const std::string& uri) {
  pqxx::connection conn(uri);
  pqxx::nontransaction txn(conn);
  return txn
      .exec(
          "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND "
          "wait_event_type = 'Lock' AND query LIKE '%FROM usage_ledger%'")[0][0]
      .as<int>();
}

Result<std::unique_ptr<PgStore>> OpenStore(const std::string& uri, int64_t timeout_ms) {
  PgStoreOptions o;
  o.uri = uri;
  o.report_connections = 1;
  o.report_timeout_ms = timeout_ms;
  GPUPOOL_ASSIGN_OR_RETURN(std::unique_ptr<PgStore> store, PgStore::Open(o));
  GPUPOOL_RETURN_IF_ERROR(store->AcquireLeadership().status());
  return store;
}

TEST(PgReportPool, AHeldReportStallsNeitherWritesNorReadsAndBoundsConcurrency) {
  ASSERT_OK_AND_ASSIGN(std::string uri, CreateTestDatabase());
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<PgStore> store, OpenStore(uri, 10 * 60 * 1000));
  LedgerLock lock(uri);
  Result<std::vector<UsageReportRow>> held = Status::Internal("not run");
  std::thread report([&] { held = store->QueryUsage({}); });
  ASSERT_TRUE(WaitFor([&] { return WaitingReports(uri) == 1; }, std::chrono::seconds(60)));

  // The one report connection is busy: the next report is refused at once, not queued.
  Result<std::vector<UsageReportRow>> second = store->QueryUsage({});
  EXPECT_EQ(second.status().code(), StatusCode::kResourceExhausted) << second.status().ToString();
  EXPECT_NE(second.status().message().find("retry later"), std::string::npos);
  // A submission commits through the writer; the reader answers probes and event reads.
  JobRecord job = SampleJob(1, 2);
  EXPECT_OK(ApplyAndWait(*store, {UpsertPool{SamplePool(job.spec.pool)}, InsertJob{job}}));
  EXPECT_OK(store->Ping());
  EXPECT_OK(store->ListEvents("", 10).status());
  EXPECT_EQ(WaitingReports(uri), 1);  // the report was waiting all along

  lock.Release();
  report.join();
  EXPECT_OK(held.status());
  EXPECT_OK(store->QueryUsage({}).status());  // the connection is free again
}

TEST(PgReportPool, AReportPastItsTimeoutIsCancelledWithDeadlineExceeded) {
  ASSERT_OK_AND_ASSIGN(std::string uri, CreateTestDatabase());
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<PgStore> store, OpenStore(uri, 10 * 60 * 1000));
  store->SetReportLimits(1, 200);  // as a configuration reload does
  {
    LedgerLock lock(uri);  // held until the report gave up: no race with the clock
    Result<std::vector<UsageReportRow>> r = store->QueryUsage({});
    EXPECT_EQ(r.status().code(), StatusCode::kDeadlineExceeded) << r.status().ToString();
    EXPECT_NE(r.status().message().find("usage report ran past its time limit of 200 ms"),
              std::string::npos)
        << r.status().ToString();
    lock.Release();
  }
  EXPECT_OK(store->QueryUsage({}).status());  // the same connection serves the next one
}

}  // namespace
}  // namespace gpupool::testing
