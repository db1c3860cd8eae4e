// Starvation reservations (scheduler/core_starvation.cc, docs/tenancy.md): whole-node work that
// small tasks keep nibbling at never finds an empty node unless nodes are reserved — drained —
// for it once it has waited `tenancy.starvation_reserve_after_ms`. The scenarios run on the
// deterministic core: nodes of four GPUs, first-fit, one-GPU tasks ending one at a time and new
// ones arriving as fast.
#include <gtest/gtest.h>
#include <prometheus/registry.h>

#include <memory>
#include <string>

#include "scheduler/core.h"
#include "scheduler/metrics.h"
#include "tests/scheduler/core_harness.h"

namespace gpupool::testing {
namespace {

constexpr int64_t kAfterS = 60;

SchedulerOptions Options(int64_t after_s, int32_t max_reservations = 2) {
  SchedulerOptions o = SchedulerOptions::Defaults();
  o.tenancy.starvation_reserve_after_ms = after_s * 1000;
  o.tenancy.starvation_max_reservations = max_reservations;
  o.tenancy.starvation_reservation_timeout_ms = 24LL * 3600 * 1000;
  o.heartbeat_timeout_ms = 1000LL * 86'400 * 365;  // agents without heartbeats stay ready
  return o;
}

double Gauge(prometheus::Registry& registry, const std::string& name, const std::string& label,
             const std::string& value) {
  for (const prometheus::MetricFamily& f : registry.Collect()) {
    if (f.name != name) continue;
    for (const prometheus::ClientMetric& m : f.metric) {
      for (const prometheus::ClientMetric::Label& l : m.label) {
        if (l.name == label && l.value == value)
          return f.type == prometheus::MetricType::Counter ? m.counter.value : m.gauge.value;
      }
    }
  }
  return 0;
}

class Cluster {
 public:
  explicit Cluster(SchedulerOptions o, int nodes, SchedulerMetrics* metrics = nullptr)
      : h(o, nullptr, metrics) {
    EXPECT_TRUE(h.CreatePool("gpu").ok());  // first-fit
    for (int i = 0; i < nodes; ++i) EXPECT_TRUE(h.Register(Node(i), "gpu", 4).ok());
  }
  static std::string Node(int i) { return "n" + std::to_string(i); }

  // One-GPU tasks of `cls` until every node is full.
  void Fill(int nodes, const std::string& cls = "low") {
    for (int i = 0; i < 4 * nodes; ++i) Small(cls);
    h.RunStarted();
  }
  int64_t Small(const std::string& cls = "low") {
    Result<JobRecord> j = h.Submit(Of(cls, CoreHarness::Whole("gpu", 1)));
    EXPECT_TRUE(j.ok());
    smalls.push_back(j->id);
    return j->id;
  }
  int64_t WholeNode(int members = 1) {
    JobSpec s = Of("low", CoreHarness::Whole("gpu", 4, members));
    s.gang = members > 1;
    Result<JobRecord> j = h.Submit(s);
    EXPECT_TRUE(j.ok());
    return j->id;
  }
  // `steps` times, 10 s apart: the oldest running small task ends and a new one arrives.
  void Churn(int steps) {
    for (int s = 0; s < steps; ++s) {
      h.clock.Advance(10 * kSecond);
      for (int64_t id : smalls) {
        TaskRecord t = h.Task(id);
        if (t.state != TaskState::kRunning) continue;
        h.Report(t.node, id, 0, TaskState::kSucceeded);
        break;
      }
      Small();
      h.core->Tick();
      h.Drain();
      h.RunStarted();
    }
  }

  CoreHarness h;
  std::vector<int64_t> smalls;
};

// A cluster whose core reports to its own metrics registry, for the scenarios that read the
// starvation gauges and counters.
struct OwnMetrics {
  std::shared_ptr<prometheus::Registry> registry = std::make_shared<prometheus::Registry>();
  SchedulerMetrics metrics{registry, "test"};
};
class MeteredCluster : private OwnMetrics, public Cluster {
 public:
  MeteredCluster(SchedulerOptions o, int nodes) : Cluster(o, nodes, &metrics) {}
  double Gauge(const std::string& name, const std::string& label, const std::string& value) {
    return testing::Gauge(*registry, name, label, value);
  }
};

// Today's behaviour, kept with the feature off: the whole-node task is older than every small
// task, yet each GPU that frees is taken again at once, and it never starts.
TEST(StarvationTest, WholeNodeTaskStarvesWithoutReservations) {
  Cluster c(Options(0), 2);
  c.Fill(2);
  const int64_t w = c.WholeNode();
  c.Churn(30);
  EXPECT_EQ(c.h.Task(w).state, TaskState::kPending) << c.h.Task(w).reason;
  EXPECT_EQ(c.h.Task(w).pending.code, PendingCode::kNoCapacity);
}

// With the feature: after a minute the task reserves a node; nothing new lands there, it drains
// and the task starts on it while the small tasks keep running on the other node.
TEST(StarvationTest, WholeNodeTaskStartsOnTheNodeReservedForIt) {
  MeteredCluster c(Options(kAfterS), 2);
  c.Fill(2);
  const int64_t w = c.WholeNode();
  c.Churn(5);  // 50 s: not yet
  EXPECT_EQ(c.Gauge("gpupool_starvation_reservations", "pool", "gpu"), 0);
  c.Churn(2);
  EXPECT_EQ(c.Gauge("gpupool_starvation_reservations", "pool", "gpu"), 1);
  EXPECT_EQ(c.Gauge("gpupool_starvation_reserved_nodes", "pool", "gpu"), 1);
  EXPECT_NE(c.h.Task(w).reason.find("starvation reservation: n"), std::string::npos)
      << c.h.Task(w).reason;
  // New small tasks that only the reserved node would take wait, and say for whom.
  bool named = false;
  for (int step = 0; step < 8 && !named; ++step) {
    c.Churn(1);
    for (int64_t id : c.smalls) {
      TaskRecord t = c.h.Task(id);
      if (t.state == TaskState::kPending && t.pending.code == PendingCode::kReserved) {
        named |= t.reason.find("reserved for starving task " + TaskId(w, 0)) != std::string::npos;
      }
    }
  }
  EXPECT_TRUE(named);
  c.Churn(12);
  ASSERT_NE(c.h.Task(w).state, TaskState::kPending) << c.h.Task(w).reason;
  EXPECT_EQ(c.h.Task(w).allocations.size(), 4u);
  EXPECT_EQ(c.Gauge("gpupool_starvation_reservations", "pool", "gpu"), 0);
  EXPECT_EQ(c.Gauge("gpupool_starvation_reservation_events_total", "event", "started"), 1);
}

// A gang of two whole nodes on three: two nodes are reserved as one reservation, both drain,
// the gang starts whole.
TEST(StarvationTest, GangAcrossTwoNodesStartsOnReservedNodes) {
  MeteredCluster c(Options(kAfterS), 3);
  c.Fill(3);
  const int64_t g = c.WholeNode(2);
  c.Churn(7);
  EXPECT_EQ(c.Gauge("gpupool_starvation_reservations", "pool", "gpu"), 1);
  EXPECT_EQ(c.Gauge("gpupool_starvation_reserved_nodes", "pool", "gpu"), 2);
  c.Churn(20);
  EXPECT_NE(c.h.Task(g, 0).state, TaskState::kPending) << c.h.Task(g, 0).reason;
  EXPECT_NE(c.h.Task(g, 1).state, TaskState::kPending) << c.h.Task(g, 1).reason;
  EXPECT_NE(c.h.Task(g, 0).node, c.h.Task(g, 1).node);
}

TEST(StarvationTest, GangStarvesWithoutReservations) {
  Cluster c(Options(0), 3);
  c.Fill(3);
  const int64_t g = c.WholeNode(2);
  c.Churn(27);
  EXPECT_EQ(c.h.Task(g, 0).state, TaskState::kPending);
}

// At most starvation_max_reservations per pool, the longest waiting first.
TEST(StarvationTest, ReservationsPerPoolAreCapped) {
  MeteredCluster c(Options(kAfterS, 1), 3);
  c.Fill(3);
  const int64_t first = c.WholeNode();
  const int64_t second = c.WholeNode();
  c.Churn(7);
  EXPECT_EQ(c.Gauge("gpupool_starvation_reservations", "pool", "gpu"), 1);
  EXPECT_EQ(c.Gauge("gpupool_starvation_reserved_nodes", "pool", "gpu"), 1);
  EXPECT_NE(c.h.Task(first).reason.find("starvation reservation"), std::string::npos);
  EXPECT_EQ(c.h.Task(second).reason.find("starvation reservation"), std::string::npos);
  // Once the first starts, the second reserves in its turn.
  c.Churn(40);
  EXPECT_NE(c.h.Task(first).state, TaskState::kPending);
  EXPECT_NE(c.h.Task(second).reason.find("starvation reservation"), std::string::npos)
      << c.h.Task(second).reason;
}

// Cancelling the starving task drops its reservation: the node takes small tasks again.
TEST(StarvationTest, CancelDropsTheReservation) {
  MeteredCluster c(Options(kAfterS), 2);
  c.Fill(2);
  const int64_t w = c.WholeNode();
  c.Churn(7);
  ASSERT_EQ(c.Gauge("gpupool_starvation_reservations", "pool", "gpu"), 1);
  ASSERT_TRUE(c.h.Sync<JobRecord>([&](auto cb) { c.h.core->CancelJob(w, "", cb); }).ok());
  c.Churn(1);
  EXPECT_EQ(c.Gauge("gpupool_starvation_reservations", "pool", "gpu"), 0);
  EXPECT_EQ(c.Gauge("gpupool_starvation_reservation_events_total", "event", "cancelled"), 1);
  c.Churn(4);
  for (int64_t id : c.smalls) {
    TaskRecord t = c.h.Task(id);
    EXPECT_NE(t.pending.code, PendingCode::kReserved) << t.reason;
  }
}

// A higher class still lands on a reserved node when nothing else fits, and still preempts as
// before when nothing fits at all.
TEST(StarvationTest, HigherClassesStillPlaceAndPreempt) {
  Cluster c(Options(kAfterS), 2);
  c.Fill(2);
  const int64_t w = c.WholeNode();
  c.Churn(7);
  ASSERT_NE(c.h.Task(w).reason.find("starvation reservation: n"), std::string::npos);
  const std::string reserved =
      c.h.Task(w).reason.substr(c.h.Task(w).reason.find("starvation reservation: ") + 24, 2);
  // A GPU frees on the reserved node: the pending low tasks may not take it…
  for (int64_t id : c.smalls) {
    TaskRecord t = c.h.Task(id);
    if (t.state == TaskState::kRunning && t.node == reserved) {
      c.h.Report(t.node, id, 0, TaskState::kSucceeded);
      break;
    }
  }
  for (int64_t id : c.smalls) {
    TaskRecord t = c.h.Task(id);
    if (t.state == TaskState::kPending) {
      EXPECT_EQ(t.pending.code, PendingCode::kReserved) << t.reason;
    }
  }
  // …high tasks may: nothing else fits. They fill the reserved node…
  int busy = 0;
  for (int64_t id : c.smalls) {
    TaskRecord t = c.h.Task(id);
    busy += t.node == reserved && t.state == TaskState::kRunning ? 1 : 0;
  }
  for (int i = busy; i < 4; ++i) {
    Result<JobRecord> hi = c.h.Submit(Of("high", CoreHarness::Whole("gpu", 1)));
    ASSERT_TRUE(hi.ok());
    EXPECT_EQ(c.h.Task(hi->id).state, TaskState::kScheduled) << c.h.Task(hi->id).reason;
    EXPECT_EQ(c.h.Task(hi->id).node, reserved);
  }
  // …and once nothing is free at all, the next preempts a low task, as without reservations.
  EXPECT_TRUE(c.h.agents.stops.empty());
  Result<JobRecord> last = c.h.Submit(Of("high", CoreHarness::Whole("gpu", 1)));
  ASSERT_TRUE(last.ok());
  EXPECT_EQ(c.h.agents.stops.size(), 1u) << c.h.Task(last->id).reason;
}

// The reservations are memory only and rebuilt from the store: after a restart the first full
// pass reserves the same node for the same task (a first attempt waits since its submission).
TEST(StarvationTest, RebuiltAfterARestart) {
  std::shared_ptr<MemoryDatabase> db = MemoryStore().database();
  int64_t w = 0, now = 0;
  std::string before;
  {
    CoreHarness h(Options(kAfterS), db);
    ASSERT_TRUE(h.CreatePool("gpu").ok());
    ASSERT_TRUE(h.Register("n0", "gpu", 4).ok());
    ASSERT_TRUE(h.Register("n1", "gpu", 4).ok());
    for (int i = 0; i < 8; ++i) ASSERT_TRUE(h.Submit(Of("low", CoreHarness::Whole("gpu", 1))).ok());
    h.RunStarted();
    h.clock.Advance(kSecond);
    Result<JobRecord> j = h.Submit(Of("low", CoreHarness::Whole("gpu", 4)));
    ASSERT_TRUE(j.ok());
    w = j->id;
    h.clock.Advance(kSecond);  // a GPU frees and a small task takes it: w is passed over
    h.Report(h.Task(w - 1).node, w - 1, 0, TaskState::kSucceeded);
    ASSERT_TRUE(h.Submit(Of("low", CoreHarness::Whole("gpu", 1))).ok());
    h.RunStarted();
    h.clock.Advance(2 * kAfterS * kSecond);
    h.core->Tick();
    h.Drain();
    h.core->Schedule();
    h.Drain();
    before = h.Task(w).reason;
    ASSERT_NE(before.find("starvation reservation: n"), std::string::npos) << before;
    now = h.clock.NowMicros();
  }
  CoreHarness h(Options(kAfterS), db, nullptr, now);
  ASSERT_TRUE(h.Reconnect("n0", "gpu", 4).ok());
  ASSERT_TRUE(h.Reconnect("n1", "gpu", 4).ok());
  h.core->Schedule();  // reserves
  h.Drain();
  h.core->Schedule();  // says so
  h.Drain();
  const std::string after = h.Task(w).reason;
  const auto nodes = [](const std::string& r) {
    size_t at = r.find("starvation reservation: ");
    return at == std::string::npos ? std::string() : r.substr(at, 26);
  };
  EXPECT_EQ(nodes(after), nodes(before)) << after;
}

}  // namespace
}  // namespace gpupool::testing
