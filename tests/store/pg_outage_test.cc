// PgStore while PostgreSQL goes away and comes back: callers get UNAVAILABLE with a clear
// message, nothing crashes, and the store reconnects by itself.
#include <gtest/gtest.h>

#include <thread>

#include "store/pg_store.h"
#include "tests/store/store_testing.h"
#include "tests/support/pg_fixture.h"
#include "tests/support/wait_for.h"

namespace gpupool::testing {
namespace {

PgStoreOptions Pg(const std::string& uri) {
  PgStoreOptions o;
  o.uri = uri;
  return o;
}

TEST(PgOutageTest, UnavailableWhileDownThenRecoversByItself) {
  ASSERT_OK_AND_ASSIGN(auto pg, TestPostgres::Start());
  ASSERT_OK_AND_ASSIGN(std::string uri, pg->CreateDatabase());
  ASSERT_OK_AND_ASSIGN(auto store, PgStore::Open(Pg(uri)));
  ASSERT_OK(store->AcquireLeadership().status());
  ASSERT_OK(ApplyAndWait(*store, {InsertJob{SampleJob(1, 1)}}));
  ASSERT_OK(store->Ping());

  ASSERT_OK(pg->server().Stop());
  const std::string want = "database unavailable: 127.0.0.1:" + std::to_string(pg->server().port());
  for (int i = 0; i < 3; ++i) {
    Status st = ApplyAndWait(*store, {InsertJob{SampleJob(2, 1)}});
    EXPECT_EQ(st.code(), StatusCode::kUnavailable) << st.ToString();
    EXPECT_NE(st.message().find(want), std::string::npos) << st.message();
    EXPECT_NE(st.message().find("retrying"), std::string::npos) << st.message();
  }
  Status rst = store->Recover().status();
  EXPECT_EQ(rst.code(), StatusCode::kUnavailable) << rst.ToString();
  EXPECT_EQ(store->ListEvents("job/", 10).status().code(), StatusCode::kUnavailable);
  Status ping = store->Ping();  // what /readyz reports
  EXPECT_EQ(ping.code(), StatusCode::kUnavailable) << ping.ToString();
  EXPECT_NE(ping.message().find(want), std::string::npos) << ping.message();

  ASSERT_OK(pg->server().Restart());
  // Backoff is at most 5 s; the store must be writing again well within 30 s.
  Status st;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  do {
    st = ApplyAndWait(*store, {InsertJob{SampleJob(2, 1)}});
    if (st.ok()) break;
    EXPECT_EQ(st.code(), StatusCode::kUnavailable) << st.ToString();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  } while (std::chrono::steady_clock::now() < deadline);
  ASSERT_OK(st);
  RecoveredState state;
  deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  for (;;) {
    auto r = store->Recover();
    if (r.ok()) {
      state = std::move(r).value();
      break;
    }
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << r.status().ToString();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_EQ(state.jobs.size(), 2u);
  EXPECT_EQ(state.jobs[1], SampleJob(2, 1));
  EXPECT_OK(store->Ping());
}

TEST(PgOutageTest, ServerRestartWhileIdleIsInvisibleAfterReconnect) {
  ASSERT_OK_AND_ASSIGN(auto pg, TestPostgres::Start());
  ASSERT_OK_AND_ASSIGN(std::string uri, pg->CreateDatabase());
  ASSERT_OK_AND_ASSIGN(auto store, PgStore::Open(Pg(uri)));
  ASSERT_OK(store->AcquireLeadership().status());
  ASSERT_OK(ApplyAndWait(*store, {InsertJob{SampleJob(1, 1)}}));
  ASSERT_OK(pg->server().Stop());
  ASSERT_OK(pg->server().Restart());
  // The old connections are dead, but they were working: the store reconnects at once and the
  // very first calls after the restart succeed.
  EXPECT_OK(ApplyAndWait(*store, {InsertJob{SampleJob(2, 1)}}));
  EXPECT_OK(store->Recover().status());
  EXPECT_OK(store->ListEvents("job/", 1).status());
}

TEST(PgOutageTest, CheckWritableSaysWhetherAWriteWouldCommit) {
  ASSERT_OK_AND_ASSIGN(auto pg, TestPostgres::Start());
  ASSERT_OK_AND_ASSIGN(std::string uri, pg->CreateDatabase());
  ASSERT_OK_AND_ASSIGN(auto store, PgStore::Open(Pg(uri)));
  // Before leadership nothing may be written, so nothing would commit.
  EXPECT_EQ(store->CheckWritable().code(), StatusCode::kFailedPrecondition);
  ASSERT_OK(store->AcquireLeadership().status());
  EXPECT_OK(store->CheckWritable());

  ASSERT_OK(pg->server().Stop());
  Status down = store->CheckWritable();
  EXPECT_EQ(down.code(), StatusCode::kUnavailable) << down.ToString();
  // Grow the writer's backoff, then bring the server back: the reader answers at once, but
  // CheckWritable is OK only when a write really commits — and then a write does.
  for (int i = 0; i < 4; ++i) (void)ApplyAndWait(*store, {InsertJob{SampleJob(2, 1)}});
  ASSERT_OK(pg->server().Restart());
  ASSERT_TRUE(WaitFor([&] { return store->CheckWritable().ok(); }, std::chrono::seconds(30),
                      std::chrono::milliseconds(20)));
  EXPECT_OK(ApplyAndWait(*store, {InsertJob{SampleJob(2, 1)}}));

  // Fenced: another leader took the lease, so no write of ours would commit.
  ASSERT_OK_AND_ASSIGN(auto other, PgStore::Open(Pg(uri)));
  ASSERT_OK(other->AcquireLeadership().status());
  EXPECT_EQ(store->CheckWritable().code(), StatusCode::kAborted);
}

}  // namespace
}  // namespace gpupool::testing
