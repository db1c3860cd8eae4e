// MemoryStore: the conformance suite, plus what only the in-memory store offers.
#include "store/memory_store.h"

#include <gtest/gtest.h>

#include "tests/store/store_conformance.h"
#include "tests/support/status_macros.h"

namespace gpupool::testing {
namespace {

class MemoryHarness : public StoreHarness {
 public:
  Status NewDatabase() override {
    db_ = MemoryStore().database();
    return Status::Ok();
  }
  Result<std::unique_ptr<Store>> Open() override {
    return std::unique_ptr<Store>(std::make_unique<MemoryStore>(db_));
  }

 private:
  std::shared_ptr<MemoryDatabase> db_;
};

INSTANTIATE_TEST_SUITE_P(Memory, StoreConformanceTest,
                         ::testing::Values(HarnessFactory{
                             "memory", [] { return std::make_unique<MemoryHarness>(); }}));

TEST(MemoryStoreTest, SimulatedOutage) {
  MemoryStore store;
  ASSERT_OK(store.AcquireLeadership().status());
  store.SetUnavailable(Status::Unavailable("database unavailable: test"));
  Status st = ApplyAndWait(store, {InsertJob{SampleJob(1, 1)}});
  EXPECT_EQ(st.code(), StatusCode::kUnavailable);
  EXPECT_EQ(store.Recover().status().code(), StatusCode::kUnavailable);
  store.SetUnavailable(Status::Ok());
  ASSERT_OK(ApplyAndWait(store, {InsertJob{SampleJob(1, 1)}}));
  EXPECT_EQ(store.Recover()->jobs.size(), 1u);
}

}  // namespace
}  // namespace gpupool::testing
