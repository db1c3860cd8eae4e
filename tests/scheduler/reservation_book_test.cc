// ReservationBook: ids, lookups by node and pool, and a gang's reservations standing together.
#include "scheduler/reservation_book.h"

#include <gtest/gtest.h>

namespace gpupool {
namespace {

Reservation On(const std::string& pool, const std::string& node, int64_t job, bool gang,
               std::set<std::string> victims) {
  Reservation r;
  r.pool = pool;
  r.job_id = job;
  r.allocation.node = node;
  r.gang = gang;
  r.victims = std::move(victims);
  return r;
}

TEST(ReservationBookTest, IdsLookupsAndGangs) {
  ReservationBook b;
  int64_t solo = b.Add(On("gpu", "n1", 7, false, {"3.0"}));
  int64_t g1 = b.Add(On("gpu", "n1", 8, true, {"4.0"}));
  int64_t g2 = b.Add(On("gpu", "n2", 8, true, {}));
  int64_t other = b.Add(On("cpu", "n1", 9, false, {}));
  EXPECT_LT(solo, g1);  // increasing, never reused
  EXPECT_EQ(b.Ids(), (std::vector<int64_t>{solo, g1, g2, other}));
  EXPECT_EQ(b.OnNode("gpu", "n1").size(), 2u);
  EXPECT_EQ(b.OnNode("", "n1").size(), 3u);
  EXPECT_EQ(b.IdsOnNode("n2"), (std::vector<int64_t>{g2}));
  EXPECT_EQ(b.IdsInPool("cpu"), (std::vector<int64_t>{other}));

  EXPECT_EQ(b.GroupOf(solo), (std::vector<int64_t>{solo}));
  EXPECT_EQ(b.GroupOf(g2), (std::vector<int64_t>{g1, g2}));
  EXPECT_FALSE(b.GroupReady(g2));  // g1 still waits for task 4.0
  b.Find(g1)->victims.clear();
  EXPECT_TRUE(b.GroupReady(g2));
  EXPECT_TRUE(b.GroupReady(other));

  b.Erase(g1);
  EXPECT_EQ(b.Find(g1), nullptr);
  EXPECT_EQ(b.GroupOf(g2), (std::vector<int64_t>{g2}));
  int64_t next = b.Add(On("gpu", "n3", 10, false, {}));
  EXPECT_GT(next, other);
  EXPECT_EQ(b.size(), 4u);
}

}  // namespace
}  // namespace gpupool
