// Leader election on PostgreSQL (store/pg_leader_lease.h, docs/ha.md): one replica leads at a
// time; a standby learns the leader's address; the lease expires on the database's clock and a
// standby then takes it with a newer epoch; the old leader can neither renew nor write (gp_fence);
// a leader's writes are refused once its own lease has expired even if nobody took over; a
// released lease is taken at once; a single daemon's AcquireLeadership is not subject to expiry.
#include "store/pg_leader_lease.h"

#include <gtest/gtest.h>

#include <thread>

#include "store/pg_store.h"
#include "tests/store/store_testing.h"
#include "tests/support/pg_fixture.h"
#include "tests/support/wait_for.h"

namespace gpupool::testing {
namespace {

using namespace std::chrono_literals;

constexpr int64_t kLeaseMs = 1000;

std::unique_ptr<PgStore> OpenStore(const std::string& uri) {
  PgStoreOptions o;
  o.uri = uri;
  auto s = PgStore::Open(o);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? std::move(s).value() : nullptr;
}

TEST(PgLeaderLeaseTest, OneLeaderThenTakeoverAfterExpiryFencesTheOld) {
  ASSERT_OK_AND_ASSIGN(std::string uri, CreateTestDatabase());
  std::unique_ptr<PgStore> store_a = OpenStore(uri);  // migrates
  ASSERT_NE(store_a, nullptr);
  ASSERT_OK_AND_ASSIGN(auto a,
                       PgLeaderLease::Open(uri, "a:1", "10.0.0.1:7070", "https://10.0.0.1:7080"));
  ASSERT_OK_AND_ASSIGN(auto b, PgLeaderLease::Open(uri, "b:2", "10.0.0.2:7070"));

  ASSERT_OK_AND_ASSIGN(LeaderClaim ca, a->TryAcquire(kLeaseMs));
  ASSERT_TRUE(ca.leading);
  ASSERT_OK_AND_ASSIGN(LeaderClaim cb, b->TryAcquire(kLeaseMs));
  EXPECT_FALSE(cb.leading);
  EXPECT_EQ(cb.leader_address, "10.0.0.1:7070");
  EXPECT_EQ(cb.leader_http, "https://10.0.0.1:7080");  // migration 51
  EXPECT_TRUE(cb.leader_live);
  EXPECT_EQ(cb.leader_holder, "a:1");
  EXPECT_EQ(cb.epoch, ca.epoch);
  ASSERT_OK(a->Renew(ca.epoch, kLeaseMs));
  store_a->UseEpoch(ca.epoch);
  ASSERT_OK(ApplyAndWait(*store_a, {InsertJob{SampleJob(1, 1)}}));

  // a stops renewing (killed): b takes over once the lease has expired on the database's clock.
  LeaderClaim taken;
  ASSERT_TRUE(WaitFor(
      [&] {
        Result<LeaderClaim> c = b->TryAcquire(kLeaseMs);
        if (c.ok() && c->leading) taken = *c;
        return c.ok() && c->leading;
      },
      30s, 20ms));
  EXPECT_GT(taken.epoch, ca.epoch);
  // The old leader can neither renew nor write.
  Status renew = a->Renew(ca.epoch, kLeaseMs);
  EXPECT_EQ(renew.code(), StatusCode::kAborted) << renew.ToString();
  Status write = ApplyAndWait(*store_a, {InsertJob{SampleJob(2, 1)}});
  EXPECT_EQ(write.code(), StatusCode::kAborted) << write.ToString();
  // The new one can.
  std::unique_ptr<PgStore> store_b = OpenStore(uri);
  store_b->UseEpoch(taken.epoch);
  EXPECT_OK(ApplyAndWait(*store_b, {InsertJob{SampleJob(3, 1)}}));
  ASSERT_OK_AND_ASSIGN(LeaderClaim seen, a->TryAcquire(kLeaseMs));
  EXPECT_FALSE(seen.leading);
  EXPECT_EQ(seen.leader_address, "10.0.0.2:7070");

  // A clean shutdown releases the lease: a standby takes it on its next try (and a standby that
  // only looked would see the row name nobody live).
  b->Release(taken.epoch);
  ASSERT_OK_AND_ASSIGN(LeaderClaim again, a->TryAcquire(kLeaseMs));
  EXPECT_TRUE(again.leading);
  EXPECT_GT(again.epoch, taken.epoch);
}

TEST(PgLeaderLeaseTest, AnExpiredLeaseFencesItsOwnWritesEvenWithoutATakeover) {
  ASSERT_OK_AND_ASSIGN(std::string uri, CreateTestDatabase());
  std::unique_ptr<PgStore> store = OpenStore(uri);
  ASSERT_NE(store, nullptr);
  ASSERT_OK_AND_ASSIGN(auto a, PgLeaderLease::Open(uri, "a:1", "10.0.0.1:7070"));
  ASSERT_OK_AND_ASSIGN(LeaderClaim ca, a->TryAcquire(200));
  ASSERT_TRUE(ca.leading);
  store->UseEpoch(ca.epoch);
  // Once the 200 ms lease has run out, the same epoch's writes are refused.
  EXPECT_TRUE(WaitFor(
      [&] {
        return ApplyAndWait(*store, {AppendEvent{EventRecord{1, "t", "x", "y", ""}}}).code() ==
               StatusCode::kAborted;
      },
      30s, 50ms));
  EXPECT_EQ(a->Renew(ca.epoch, kLeaseMs).code(), StatusCode::kAborted);
}

TEST(PgLeaderLeaseTest, ASingleDaemonIsNotSubjectToExpiry) {
  ASSERT_OK_AND_ASSIGN(std::string uri, CreateTestDatabase());
  std::unique_ptr<PgStore> store = OpenStore(uri);
  ASSERT_NE(store, nullptr);
  ASSERT_OK_AND_ASSIGN(auto a, PgLeaderLease::Open(uri, "a:1", "10.0.0.1:7070"));
  ASSERT_OK_AND_ASSIGN(LeaderClaim ca, a->TryAcquire(100));
  ASSERT_TRUE(ca.leading);
  // An embedded single daemon takes over unconditionally and is never fenced by time.
  ASSERT_OK_AND_ASSIGN(int64_t epoch, store->AcquireLeadership());
  EXPECT_GT(epoch, ca.epoch);
  std::this_thread::sleep_for(300ms);  // past the replica's 100 ms lease (not an assertion)
  EXPECT_OK(ApplyAndWait(*store, {InsertJob{SampleJob(1, 1)}}));
}

}  // namespace
}  // namespace gpupool::testing
