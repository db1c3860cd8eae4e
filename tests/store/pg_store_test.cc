// PgStore: the conformance suite on a real PostgreSQL, plus migrations and connection errors.
#include "store/pg_store.h"

#include <gtest/gtest.h>

#include <future>
#include <pqxx/pqxx>
#include <thread>

#include "store/migrations.h"
#include "tests/store/store_conformance.h"
#include "tests/support/pg_fixture.h"

namespace gpupool::testing {
namespace {

PgStoreOptions Pg(const std::string& uri) {
  PgStoreOptions o;
  o.uri = uri;
  return o;
}

class PgHarness : public StoreHarness {
 public:
  Status NewDatabase() override {
    GPUPOOL_ASSIGN_OR_RETURN(uri_, CreateTestDatabase());
    return Status::Ok();
  }
  Result<std::unique_ptr<Store>> Open() override {
    GPUPOOL_ASSIGN_OR_RETURN(auto store, PgStore::Open(Pg(uri_)));
    return std::unique_ptr<Store>(std::move(store));
  }

 private:
  std::string uri_;
};

INSTANTIATE_TEST_SUITE_P(Pg, StoreConformanceTest,
                         ::testing::Values(HarnessFactory{
                             "pg", [] { return std::make_unique<PgHarness>(); }}));

int AppliedMigrations(const std::string& uri) {
  pqxx::connection c(uri);
  pqxx::nontransaction n(c);
  return n.exec("SELECT count(*) FROM schema_migrations")[0][0].as<int>();
}

TEST(PgStoreTest, MigrationsAreIdempotent) {
  ASSERT_OK_AND_ASSIGN(std::string uri, CreateTestDatabase());
  for (int i = 0; i < 3; ++i) {
    auto store = PgStore::Open(Pg(uri));
    ASSERT_OK(store.status());
  }
  EXPECT_EQ(AppliedMigrations(uri), static_cast<int>(Migrations().size()));
}

TEST(PgStoreTest, TwoStoresMigrateOneFreshDatabaseAtOnce) {
  for (int round = 0; round < 3; ++round) {
    ASSERT_OK_AND_ASSIGN(std::string uri, CreateTestDatabase());
    constexpr int kDaemons = 4;
    std::vector<Status> results(kDaemons);
    std::vector<std::thread> threads;
    for (int i = 0; i < kDaemons; ++i) {
      threads.emplace_back([&, i] { results[i] = PgStore::Open(Pg(uri)).status(); });
    }
    for (auto& t : threads) t.join();
    for (const Status& st : results) EXPECT_OK(st);
    EXPECT_EQ(AppliedMigrations(uri), static_cast<int>(Migrations().size()));
  }
}

TEST(PgStoreTest, RefusesASchemaNewerThanItKnows) {
  ASSERT_OK_AND_ASSIGN(std::string uri, CreateTestDatabase());
  ASSERT_OK(PgStore::Open(Pg(uri)).status());
  {
    pqxx::connection c(uri);
    pqxx::nontransaction n(c);
    n.exec("INSERT INTO schema_migrations (version, name) VALUES (999, 'from the future')");
  }
  Status st = PgStore::Open(Pg(uri)).status();
  EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition) << st.ToString();
  EXPECT_NE(st.message().find("999"), std::string::npos) << st.message();
}

TEST(PgStoreTest, MalformedUriIsInvalidArgument) {
  Status st = PgStore::Open(Pg("postgresql://[::1")).status();
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
}

TEST(PgStoreTest, UnreachableDatabaseIsUnavailableWithAClearMessage) {
  // Port 1 on loopback: nothing listens there.
  Status st = PgStore::Open(Pg("postgresql://postgres@127.0.0.1:1/x")).status();
  EXPECT_EQ(st.code(), StatusCode::kUnavailable) << st.ToString();
  EXPECT_NE(st.message().find("database unavailable: 127.0.0.1:1/x: Connection refused"),
            std::string::npos)
      << st.message();
}

TEST(PgStoreTest, GroupCommitKeepsPerCallerOrder) {
  ASSERT_OK_AND_ASSIGN(std::string uri, CreateTestDatabase());
  ASSERT_OK_AND_ASSIGN(auto store, PgStore::Open(Pg(uri)));
  ASSERT_OK(store->AcquireLeadership().status());
  // Fire many Apply() calls without waiting: each done must come in enqueue order, and a later
  // batch may depend on an earlier one (UpdateJob after InsertJob).
  constexpr int kJobs = 500;
  std::mutex mu;
  std::vector<int> order;
  std::atomic<int> failures{0};
  std::promise<void> all_done;
  for (int i = 1; i <= kJobs; ++i) {
    store->Apply({InsertJob{SampleJob(i, 1)}}, [&, i](Status st) {
      if (!st.ok()) failures++;
      std::lock_guard lock(mu);
      order.push_back(i);
    });
    store->Apply({UpdateJob{i, JobState::kSucceeded, "done", i}}, [&, i](Status st) {
      if (!st.ok()) failures++;
      std::lock_guard lock(mu);
      order.push_back(-i);
      if (i == kJobs) all_done.set_value();
    });
  }
  ASSERT_EQ(all_done.get_future().wait_for(std::chrono::seconds(60)), std::future_status::ready);
  EXPECT_EQ(failures.load(), 0);
  ASSERT_EQ(order.size(), 2u * kJobs);
  for (int i = 1; i <= kJobs; ++i) {
    EXPECT_EQ(order[2 * (i - 1)], i);
    EXPECT_EQ(order[2 * (i - 1) + 1], -i);
  }
  auto state = store->Recover();
  ASSERT_OK(state.status());
  ASSERT_EQ(state->jobs.size(), static_cast<size_t>(kJobs));
  for (const auto& j : state->jobs) EXPECT_EQ(j.state, JobState::kSucceeded);
}

}  // namespace
}  // namespace gpupool::testing
