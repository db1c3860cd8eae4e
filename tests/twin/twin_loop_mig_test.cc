// The twin's event loop on MIG GPUs (issue 27): tasks asking for a MIG profile run on the
// instances the simulated agents register; with a re-layout policy the production core re-lays an
// idle GPU out for what waits and the twin applies it as an agent would (registering again with
// the outcome); with the policy off nothing changes. Small enough to work out by hand.
#include <gtest/gtest.h>

#include "pool/catalog.h"
#include "pool/mig_layout.h"
#include "tests/twin/twin_loop_test.h"
#include "twin/twin.h"

namespace gpupool::twin {
namespace {

using testing::kS;
using testing::Org;
using testing::Task;

const GpuModel& H100() { return *Catalog::Builtin().Find("H100-SXM"); }

MigLayout Layout(const std::string& text) {
  Result<MigLayout> l = ParseMigLayout(H100(), text);
  EXPECT_TRUE(l.ok()) << l.status().ToString();
  return l.ok() ? *l : MigLayout{};
}

// One node with one H100 in MIG mode laid out as `layout`; GPU units are the H100's own.
Workload MigNode(const std::string& layout, std::vector<TwinTask> tasks, bool dynamic = true) {
  Workload w;
  w.name = "mig";
  TwinNode n{"n0", 64'000, 262'144, 1, "H100-SXM", {}};
  n.mig[0] = TwinMigGpu{Layout(layout), dynamic};
  w.nodes.push_back(std::move(n));
  w.gpu = Resources{H100().ComputeMilliTflops(), H100().vram_mib};
  w.tasks = std::move(tasks);
  return w;
}

// A task asking for one instance of `profile` (3g: 3/7 of the GPU's compute).
TwinTask Mig(const std::string& name, double arrival_s, double duration_s,
             const std::string& profile) {
  TwinTask t = Task(name, arrival_s, duration_s, "t/a", "normal");
  const MigProfile* p = H100().FindMig(profile);
  t.mig_profile = profile;
  t.gpu_milli = static_cast<int32_t>(p->compute_slices * 1000 / kMigComputeSlices);
  return t;
}

TwinConfig Horizon(double s, MigRelayout policy = MigRelayout::kOff) {
  TwinConfig c;
  c.horizon_us = static_cast<int64_t>(s * kS);
  c.sample_ms = 1000;
  c.tick_ms = 1000;
  c.mig_relayout = policy;
  c.scheduler.mig_relayout_cooldown_ms = 0;
  return c;
}

TwinReport Replay(const Workload& w, const TwinConfig& c) {
  Result<TwinReport> r = RunTwin(w, Org(), c);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : TwinReport{};
}

TEST(TwinLoopMigTest, TasksRunOnTheGpusInstancesAndWaitForOneToFree) {
  // Two 3g instances: m0 and m1 start at once, m2 waits for m0 to end at 10 s.
  Workload w = MigNode(
      "3g.40gb@0+3g.40gb@4",
      {Mig("m0", 0, 10, "3g.40gb"), Mig("m1", 0, 20, "3g.40gb"), Mig("m2", 1, 10, "3g.40gb")});
  TwinConfig c = Horizon(30);
  c.record_starts = true;
  TwinReport r = Replay(w, c);
  EXPECT_EQ(r.rejected, 0);
  EXPECT_EQ(r.mig_relayouts, 0);
  EXPECT_EQ(r.mig_relayout, "off");
  ASSERT_EQ(r.starts.size(), 3u);
  EXPECT_EQ(r.starts[0].devices.size(), 1u);
  EXPECT_NE(r.starts[0].devices[0], r.starts[1].devices[0]);  // one instance each
  EXPECT_EQ(r.starts[2].task, "m2");
  EXPECT_DOUBLE_EQ(r.starts[2].t_s, 10.0);
  EXPECT_EQ(r.starts[2].devices, r.starts[0].devices);  // m0's instance, freed
  EXPECT_DOUBLE_EQ(r.wait_by_class["normal"].max, 9.0);
  EXPECT_EQ(r.overallocated_devices, 0);
}

TEST(TwinLoopMigTest, WithThePolicyOffAProfileTheLayoutLacksIsRefused) {
  // Seven 1g instances and no re-layout: the pool offers no 3g, so the core refuses them.
  Workload w = MigNode("1g.10gb@0+1g.10gb@1+1g.10gb@2+1g.10gb@3+1g.10gb@4+1g.10gb@5+1g.10gb@6",
                       {Mig("m0", 0, 10, "3g.40gb"), Mig("m1", 0, 10, "3g.40gb")});
  TwinReport r = Replay(w, Horizon(60));
  EXPECT_EQ(r.rejected, 2);
  EXPECT_EQ(r.mig_relayouts, 0);
}

TEST(TwinLoopMigTest, AnIdleGpuIsReLaidOutForWhatWaitsAndTheTasksRun) {
  // The same workload with the idle policy: the core asks for a layout with two 3g instances,
  // the twin applies it 8 s later (the default re-layout time), and both tasks run on it.
  Workload w = MigNode("1g.10gb@0+1g.10gb@1+1g.10gb@2+1g.10gb@3+1g.10gb@4+1g.10gb@5+1g.10gb@6",
                       {Mig("m0", 0, 10, "3g.40gb"), Mig("m1", 0, 10, "3g.40gb")});
  TwinConfig c = Horizon(60, MigRelayout::kIdle);
  c.record_starts = true;
  TwinReport r = Replay(w, c);
  EXPECT_EQ(r.rejected, 0);
  EXPECT_EQ(r.mig_relayout, "idle");
  EXPECT_EQ(r.mig_relayouts, 1);
  ASSERT_EQ(r.starts.size(), 2u);
  EXPECT_NE(r.starts[0].devices, r.starts[1].devices);
  for (const StartLog& s : r.starts) {
    EXPECT_GE(s.t_s, 8.0) << s.task;  // not before the layout was in service
    EXPECT_LT(s.t_s, 12.0) << s.task;
    ASSERT_EQ(s.devices.size(), 1u);
    EXPECT_NE(s.devices[0].find("-g1"), std::string::npos) << s.devices[0];  // a new instance
  }
  EXPECT_EQ(r.wait_by_class["normal"].never_started, 0);
}

TEST(TwinLoopMigTest, AGpuBusyWithAnInstanceIsNotReLaidOutUnderTheIdlePolicy) {
  // m0 holds a 1g instance for 30 s; the 3g task waits until m0 ends and the GPU is re-laid
  // out: it starts at 30 s plus the re-layout time, never before.
  Workload w = MigNode("1g.10gb@0+1g.10gb@1+1g.10gb@2+1g.10gb@3+1g.10gb@4+1g.10gb@5+1g.10gb@6",
                       {Mig("m0", 0, 30, "1g.10gb"), Mig("m1", 1, 10, "3g.40gb")});
  TwinConfig c = Horizon(80, MigRelayout::kIdle);
  c.record_starts = true;
  TwinReport r = Replay(w, c);
  ASSERT_EQ(r.starts.size(), 2u);
  EXPECT_EQ(r.starts[1].task, "m1");
  EXPECT_GE(r.starts[1].t_s, 38.0);
  EXPECT_LT(r.starts[1].t_s, 42.0);
  EXPECT_EQ(r.mig_relayouts, 1);
}

TEST(TwinLoopMigTest, AStaticMigGpuIsNeverReLaidOut) {
  // Instances from config (not re-partitionable): the idle policy has nothing to change.
  Workload w = MigNode("3g.40gb@0+3g.40gb@4", {Mig("m0", 0, 10, "3g.40gb")}, /*dynamic=*/false);
  TwinReport r = Replay(w, Horizon(30, MigRelayout::kIdle));
  EXPECT_EQ(r.mig_relayouts, 0);
  EXPECT_EQ(r.wait_by_class["normal"].count, 1);
  EXPECT_EQ(r.wait_by_class["normal"].never_started, 0);
}

TEST(TwinLoopMigTest, AMigGpuTheCatalogCannotModelIsRefusedWithAReason) {
  Workload w = MigNode("3g.40gb@0", {});
  w.nodes[0].model = "G2";
  Result<TwinReport> r = RunTwin(w, Org(), Horizon(10));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("node n0: GPU 0: MIG needs a catalog model, not 'G2'"),
            std::string::npos)
      << r.status().message();
  w = MigNode("", {});
  w.nodes[0].mig[0].layout = {{"5g.60gb", 0}};
  r = RunTwin(w, Org(), Horizon(10));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("model H100-SXM has no MIG profile '5g.60gb'"),
            std::string::npos)
      << r.status().message();
}

}  // namespace
}  // namespace gpupool::twin
