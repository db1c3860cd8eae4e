// The Store conformance suite: one set of tests that every Store implementation must pass
// (MemoryStore in memory_store_test.cc, PgStore in pg_store_test.cc), so the scheduler's
// scenario tests on MemoryStore say something true about PgStore.
//
// It covers: every mutation round-trips through Recover(); batches are all-or-nothing with the
// documented error codes; fencing by epoch; event listing by prefix and limit; many concurrent
// Apply() calls all acknowledged and all recovered, with bad batches failing alone.
//
// To run it on a store, implement StoreHarness and instantiate:
//   INSTANTIATE_TEST_SUITE_P(Pg, StoreConformanceTest,
//                            ::testing::Values(HarnessFactory{"pg", &MakePgHarness}));
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <ostream>
#include <string>

#include "scheduler/store.h"
#include "tests/store/store_testing.h"

namespace gpupool::testing {

class StoreHarness {
 public:
  virtual ~StoreHarness() = default;
  // Makes a fresh, empty database; Open() then opens handles on it (several may be open at once,
  // like several daemons on one database).
  virtual Status NewDatabase() = 0;
  virtual Result<std::unique_ptr<Store>> Open() = 0;
};

struct HarnessFactory {
  std::string name;
  std::function<std::unique_ptr<StoreHarness>()> make;
  friend void PrintTo(const HarnessFactory& f, std::ostream* os) { *os << f.name; }
};

class StoreConformanceTest : public ::testing::TestWithParam<HarnessFactory> {
 protected:
  void SetUp() override;
  // A new handle on this test's database.
  std::unique_ptr<Store> OpenStore();

  std::unique_ptr<StoreHarness> harness_;
  std::unique_ptr<Store> store_;  // opened, leader
};

}  // namespace gpupool::testing
