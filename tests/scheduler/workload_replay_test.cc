// The daemon places as `gpupool-sim --online` replays: a Core (memory store, simulated agents)
// with a pool created without a strategy gets a prefix of the Alibaba default trace submitted
// one job at a time, and each task's node must equal the sim's online replay of the same
// arrivals (placement/sim/replay.h ReplayOnline, the loop behind --online) with the pool's tie
// seed. Covers the default strategy, the tie order, the learned workload's feed (observed at
// submission, synced before placing) and what GetPool shows of it.
//
// The trace's shares become the daemon's absolute requests on one GPU model (G2: 100 TFLOPS,
// 32 GiB): g milli-GPU → ⌊100,000 · g / 1000⌋ milli-TFLOPS and ⌊32768 · g / 1000⌋ MiB, exactly what
// the engine grants a share g of that device, so both sides ask for the same amounts. Skips when
// the trace is absent.
#include <gtest/gtest.h>

#include <filesystem>

#include "placement/sim/replay.h"
#include "placement/sim/trace.h"
#include "placement/workload_feed.h"
#include "tests/scheduler/core_harness.h"

namespace gpupool {
namespace {

using testing::CoreHarness;

constexpr const char* kModel = "G2";
constexpr size_t kNodes = 40;
constexpr size_t kArrivals = 500;

struct Trace {
  std::vector<placement::sim::TraceNode> nodes;
  std::vector<placement::sim::TraceTask> arrivals;
};

// G2 nodes and GPU tasks that any model may take, shuffled and resampled as the protocol does.
Trace Load() {
  namespace sim = placement::sim;
  const std::string dir = GPUPOOL_TRACE_DIR;
  Trace t;
  Result<std::string> node_text = sim::LoadFile(dir + "/openb_node_list_gpu_node.csv");
  Result<std::string> task_text = sim::LoadFile(dir + "/openb_pod_list_default.csv");
  if (!node_text.ok() || !task_text.ok()) return t;
  Result<std::vector<sim::TraceNode>> nodes = sim::ParseNodes(*node_text);
  Result<std::vector<sim::TraceTask>> tasks = sim::ParseTasks(*task_text);
  if (!nodes.ok() || !tasks.ok()) return t;
  for (const sim::TraceNode& n : nodes.value())
    if (n.model == kModel && t.nodes.size() < kNodes) t.nodes.push_back(n);
  std::vector<sim::TraceTask> gpu_tasks;
  for (const sim::TraceTask& k : tasks.value())
    if (k.num_gpu > 0 && k.gpu_spec.empty()) gpu_tasks.push_back(k);
  t.arrivals = sim::Arrivals(gpu_tasks, 42, 1.3, sim::CapacityMilli(t.nodes));
  if (t.arrivals.size() > kArrivals) t.arrivals.resize(kArrivals);
  return t;
}

AgentRegistration Registration(const placement::sim::TraceNode& n, const std::string& pool) {
  AgentRegistration reg;
  reg.node.name = n.name;
  reg.node.pool = pool;
  reg.node.cpu_milli = n.cpu_milli;
  reg.node.memory_mib = n.memory_mib;
  for (int i = 0; i < n.gpus; ++i) {
    DeviceRecord d;
    d.id = n.name + "-gpu" + std::to_string(i);
    d.model = n.model;
    d.index = i;
    d.physical = placement::sim::TraceModel(n.model);
    reg.node.devices.push_back(d);
  }
  return reg;
}

JobSpec Job(const placement::sim::TraceTask& t, const std::string& pool) {
  const Resources gpu = placement::sim::TraceModel(kModel);
  JobSpec s = t.gpu_milli < 1000
                  ? CoreHarness::Fractional(pool, gpu.milli_tflops * t.gpu_milli / 1000,
                                            gpu.vram_mib * t.gpu_milli / 1000)
                  : CoreHarness::Whole(pool, t.num_gpu);
  s.task_template.resources.cpu_milli = t.cpu_milli;
  s.task_template.resources.memory_mib = t.memory_mib;
  return s;
}

TEST(WorkloadReplayTest, DaemonPlacesAsTheSimsOnlineReplay) {
  const Trace trace = Load();
  if (trace.nodes.size() < kNodes) GTEST_SKIP() << "trace not found at " << GPUPOOL_TRACE_DIR;

  const std::string pool = "trace";
  CoreHarness h;
  ASSERT_TRUE(h.CreatePool(pool, SharingMode::kFractional, /*strategy=*/"").ok());
  for (const auto& n : trace.nodes) {
    h.agents.connected.insert(n.name);
    AgentRegistration reg = Registration(n, pool);
    ASSERT_TRUE(
        h.Sync<RegistrationResult>([&](auto cb) { h.core->OnAgentRegister(reg, cb); }).ok());
  }

  std::vector<std::string> daemon;
  for (const auto& t : trace.arrivals) {
    Result<JobRecord> job = h.Submit(Job(t, pool));
    ASSERT_TRUE(job.ok()) << job.status().ToString();
    const TaskRecord task = h.Task(job->id);
    daemon.push_back(task.state == TaskState::kScheduled ? task.node : "");
  }

  std::vector<std::string> sim;
  Result<placement::sim::ReplayResult> r =
      placement::sim::ReplayOnline(trace.nodes, trace.arrivals, placement::Strategy::kFgdPack,
                                   placement::PoolTieSeed(pool), 0, &sim);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(sim.size(), daemon.size());
  int placed = 0, dropped = 0;
  for (size_t i = 0; i < sim.size(); ++i) {
    ASSERT_EQ(daemon[i], sim[i]) << "arrival " << i << " (" << trace.arrivals[i].name << ")";
    (sim[i].empty() ? dropped : placed) += 1;
  }
  // The prefix fills the nodes: decisions were made under pressure, and some tasks found no room.
  EXPECT_GT(placed, 300);
  EXPECT_GT(dropped, 0);

  // What an admin sees: every arrival observed, the heaviest classes first.
  Result<PoolView> view = h.core->GetPool(pool);
  ASSERT_TRUE(view.ok());
  EXPECT_EQ(view->learned.tasks_observed, static_cast<int64_t>(trace.arrivals.size()));
  ASSERT_FALSE(view->learned.top.empty());
  EXPECT_LE(view->learned.top.size(), 5u);
  EXPECT_FALSE(view->learned.top.front().prior);
  for (size_t i = 1; i < view->learned.top.size(); ++i)
    EXPECT_GE(view->learned.top[i - 1].weight, view->learned.top[i].weight);
}

TEST(WorkloadReplayTest, RestartRebuildsTheModelFromRetainedJobs) {
  // The model is not persisted: recovery observes the retained jobs again, in id order, so the
  // restarted daemon's model is the one it had.
  std::shared_ptr<MemoryDatabase> db = MemoryStore().database();
  LearnedWorkload before;
  {
    CoreHarness h(SchedulerOptions::Defaults(), db);
    ASSERT_TRUE(h.CreatePool("p", SharingMode::kFractional, "").ok());
    ASSERT_TRUE(h.Register("n0", "p", 8).ok());
    ASSERT_TRUE(h.Submit(CoreHarness::Fractional("p", 100'000, 8192, 3)).ok());
    ASSERT_TRUE(h.Submit(CoreHarness::Whole("p", 2)).ok());
    before = h.core->GetPool("p")->learned;
  }
  EXPECT_EQ(before.tasks_observed, 4);
  ASSERT_GE(before.top.size(), 2u);
  // 3 fractional tasks, then 1 of 2 GPUs: the fractional class leads.
  EXPECT_EQ(before.top[0].shape.per_device.milli_tflops, 100'000);
  EXPECT_EQ(before.top[0].shape.kind, placement::RequestKind::kFractional);

  CoreHarness h(SchedulerOptions::Defaults(), db);
  const LearnedWorkload after = h.core->GetPool("p")->learned;
  EXPECT_EQ(after.tasks_observed, before.tasks_observed);
  ASSERT_EQ(after.top.size(), before.top.size());
  for (size_t i = 0; i < after.top.size(); ++i) {
    EXPECT_EQ(after.top[i].shape.kind, before.top[i].shape.kind) << i;
    EXPECT_EQ(after.top[i].shape.gpu_count, before.top[i].shape.gpu_count) << i;
    EXPECT_DOUBLE_EQ(after.top[i].weight, before.top[i].weight) << i;
  }
}

}  // namespace
}  // namespace gpupool
