// Issue 27 in the scheduler: dynamic MIG. The owners alone first — the book that settles a
// layout against what an agent reports, and the planner that picks layouts for waiting work —
// then the core: an admin's layout is stored before the agent is asked and holds the GPU's
// instances out of placement until a registration settles it; a refusal leaves the GPU in
// service as it was; a restart mid-way asks again; bad input is refused with the reason; and a
// pool whose policy allows it re-lays out an idle GPU for MIG work that found no room.
#include "scheduler/mig_layouts.h"

#include <gtest/gtest.h>

#include <memory>

#include "pool/catalog.h"
#include "scheduler/mig_planner.h"
#include "tests/scheduler/core_harness.h"

namespace gpupool {
namespace {

using testing::CoreHarness;

const GpuModel& H100() { return *Catalog::Builtin().Find("H100-SXM"); }

MigLayout Layout(const std::string& text) {
  Result<MigLayout> l = ParseMigLayout(H100(), text);
  EXPECT_TRUE(l.ok()) << l.status().ToString();
  return l.ok() ? *l : MigLayout{};
}

// A node with one H100 in MIG mode laid out as `layout`; instance ids carry `gen` so a new
// layout's instances are new devices, as a driver's are.
AgentRegistration MigNode(const std::string& node, const std::string& pool,
                          const std::string& layout, int gen = 0) {
  AgentRegistration reg;
  reg.node.name = node;
  reg.node.pool = pool;
  reg.node.cpu_milli = 64'000;
  reg.node.memory_mib = 512 * 1024;
  DeviceRecord g;
  g.id = "GPU-" + node;
  g.model = "H100-SXM";
  g.physical = Resources{989'000, 81'920};
  g.mig_enabled = true;
  reg.node.devices.push_back(g);
  int j = 0;
  for (const MigPlacement& pl : Layout(layout)) {
    const MigProfile* p = H100().FindMig(pl.profile);
    DeviceRecord m;
    m.id = "MIG-" + node + "-" + std::to_string(gen) + "-" + std::to_string(j++);
    m.model = "H100-SXM";
    m.physical = Resources{p->milli_tflops, p->vram_mib};
    m.mig_profile = pl.profile;
    m.parent_id = g.id;
    m.mig_start = pl.start;
    reg.node.devices.push_back(m);
  }
  return reg;
}

Result<RegistrationResult> Register(CoreHarness& h, const AgentRegistration& reg) {
  h.agents.connected.insert(reg.node.name);
  return h.Sync<RegistrationResult>([&](auto cb) { h.core->OnAgentRegister(reg, cb); });
}

JobSpec Mig(const std::string& pool, const std::string& profile) {
  JobSpec s = CoreHarness::Fractional(pool, 0, 0);
  s.task_template.resources.shape = RequestShape::kMig;
  s.task_template.resources.mig_profile = profile;
  return s;
}

// An exclusive pool "mig" with the given re-layout policy.
Result<PoolView> CreateMigPool(CoreHarness& h, MigRelayout policy) {
  PoolRecord p;
  p.name = "mig";
  p.sharing_mode = SharingMode::kExclusive;
  p.placement_strategy = "first-fit";
  p.mig_relayout = policy;
  return h.Sync<PoolView>([&](auto cb) { h.core->CreatePool(p, cb); });
}

// A full pass (it counts the MIG work left without room), then a tick (it plans re-layouts).
void PassAndTick(CoreHarness& h) {
  h.core->Schedule();
  h.Drain();
  h.core->Tick();
  h.Drain();
}

Result<NodeView> SetLayout(CoreHarness& h, const std::string& node, const std::string& gpu,
                           const std::string& layout) {
  return h.Sync<NodeView>(
      [&](auto cb) { h.core->SetMigLayout(node, gpu, layout, "key admin-1", cb); });
}

std::optional<MigLayoutRecord> RowOf(const Result<NodeView>& v, const std::string& gpu) {
  if (v.ok())
    for (const MigGpuView& g : v->mig_gpus)
      if (g.gpu.id == gpu) return g.row;
  return std::nullopt;
}

MigLayoutRecord Row(const std::string& layout, MigLayoutState state, int64_t gen = 1) {
  MigLayoutRecord r;
  r.node = "m1";
  r.gpu = "GPU-m1";
  r.layout = FormatMigLayout(Layout(layout));
  r.generation = gen;
  r.state = state;
  r.set_by = "key admin-1";
  r.updated_us = 1;
  return r;
}

// ---- the book ----------------------------------------------------------------------------

TEST(MigLayoutBookTest, ARegistrationSettlesAppliedFailedAndUnansweredRows) {
  const auto idle = [](const std::string&) { return false; };
  MigLayoutBook book;
  book.Put(Row("3g.40gb@0+3g.40gb@4", MigLayoutState::kApplying));
  // The agent shows the layout: applied.
  auto s = book.Settle(MigNode("m1", "p", "3g.40gb@0+3g.40gb@4").node, {}, idle, 5);
  ASSERT_EQ(s.store.size(), 1u);
  EXPECT_EQ(s.store[0].state, MigLayoutState::kApplied);
  EXPECT_EQ(s.store[0].updated_us, 5);
  EXPECT_TRUE(s.ask.empty());
  // It says why not: failed, with the reason; faulted when the old layout was lost too.
  s = book.Settle(MigNode("m1", "p", "7g.80gb@0").node, {{"GPU-m1", 1, "NVML: in use", false}},
                  idle, 5);
  ASSERT_EQ(s.store.size(), 1u);
  EXPECT_EQ(s.store[0].state, MigLayoutState::kFailed);
  EXPECT_NE(s.store[0].reason.find("NVML: in use"), std::string::npos);
  EXPECT_NE(s.store[0].reason.find("kept its previous layout"), std::string::npos);
  EXPECT_TRUE(s.faulted.empty());
  s = book.Settle(MigNode("m1", "p", "").node, {{"GPU-m1", 1, "lost", true}}, idle, 5);
  ASSERT_EQ(s.faulted.size(), 1u);
  // An outcome for another generation, or none (a restarted agent): asked again.
  s = book.Settle(MigNode("m1", "p", "7g.80gb@0").node, {{"GPU-m1", 7, "old", false}}, idle, 5);
  EXPECT_TRUE(s.store.empty());
  ASSERT_EQ(s.ask.size(), 1u);
  EXPECT_EQ(s.ask[0].generation, 1);
  // A GPU the node no longer reports waits.
  AgentRegistration none = MigNode("m1", "p", "");
  none.node.devices.clear();
  s = book.Settle(none.node, {}, idle, 5);
  EXPECT_TRUE(s.store.empty() && s.ask.empty());
}

TEST(MigLayoutBookTest, AnAppliedLayoutTheNodeLostIsAskedAgainOnlyWhileIdle) {
  MigLayoutBook book;
  book.Put(Row("3g.40gb@0+3g.40gb@4", MigLayoutState::kApplied, 3));
  const AgentRegistration rebooted = MigNode("m1", "p", "");
  auto s = book.Settle(
      rebooted.node, {}, [](const std::string&) { return true; }, 9);
  EXPECT_TRUE(s.store.empty() && s.ask.empty());
  s = book.Settle(
      rebooted.node, {}, [](const std::string&) { return false; }, 9);
  ASSERT_EQ(s.ask.size(), 1u);
  EXPECT_EQ(s.ask[0].generation, 4);
  EXPECT_EQ(s.ask[0].state, MigLayoutState::kApplying);
  EXPECT_TRUE(book.HoldsOut("m1", "GPU-m1") == false);  // the book changes only once stored
  book.Put(s.store[0]);
  EXPECT_TRUE(book.HoldsOut("m1", "GPU-m1"));
}

// ---- the planner -------------------------------------------------------------------------

MigGpu Gpu(const std::string& node, const std::string& layout, int busy = 0, int64_t changed = 0) {
  return MigGpu{node, "GPU-" + node, &H100(), Layout(layout), busy, changed};
}

TEST(MigPlannerTest, AnIdleGpuIsReLaidOutForTheWaitingProfileAndTheDemandIsSharedOut) {
  MigPlanInput in;
  in.policy = MigRelayout::kIdle;
  in.gpus = {Gpu("a", "1g.10gb@0+1g.10gb@1+1g.10gb@2+1g.10gb@3+1g.10gb@4+1g.10gb@5+1g.10gb@6"),
             Gpu("b", "1g.10gb@0+1g.10gb@1+1g.10gb@2+1g.10gb@3+1g.10gb@4+1g.10gb@5+1g.10gb@6")};
  in.waiting = {{"3g.40gb", 2}};
  std::vector<MigRelayoutChoice> out = PlanMigRelayouts(in);
  ASSERT_EQ(out.size(), 1u);  // one GPU serves both: the second is left alone
  EXPECT_EQ(out[0].gpu, "GPU-a");
  EXPECT_EQ(FormatMigLayout(out[0].layout), "3g.40gb@0+3g.40gb@4");
  EXPECT_FALSE(out[0].drain);
  EXPECT_NE(out[0].reason.find("2 × 3g.40gb"), std::string::npos);
  // Three waiting: the second GPU too.
  in.waiting = {{"3g.40gb", 3}};
  EXPECT_EQ(PlanMigRelayouts(in).size(), 2u);
}

TEST(MigPlannerTest, TheLearnedMixShapesTheSpareSlices) {
  MigPlanInput in;
  in.policy = MigRelayout::kIdle;
  in.gpus = {Gpu("a", "7g.80gb@0")};
  in.waiting = {{"3g.40gb", 1}};
  in.mix = {{"1g.10gb", 10.0}};
  std::vector<MigRelayoutChoice> out = PlanMigRelayouts(in);
  ASSERT_EQ(out.size(), 1u);
  // One 3g for the waiting task; the rest in the 1g instances the pool usually asks for.
  EXPECT_EQ(MigInstanceCounts(H100(), out[0].layout)[0], 4) << FormatMigLayout(out[0].layout);
}

TEST(MigPlannerTest, BusyCoolingAndUselessGpusAreLeftAloneAndOffPlansNothing) {
  MigPlanInput in;
  in.policy = MigRelayout::kIdle;
  in.now_us = 100'000'000;
  in.cooldown_us = 30'000'000;
  in.waiting = {{"3g.40gb", 1}};
  in.gpus = {Gpu("busy", "1g.10gb@0", /*busy=*/1), Gpu("cool", "1g.10gb@0", 0, 90'000'000),
             Gpu("fine", "3g.40gb@0+1g.10gb@4")};  // serves the waiting 3g as it is
  EXPECT_TRUE(PlanMigRelayouts(in).empty());
  in.gpus.push_back(Gpu("free", "1g.10gb@0"));
  EXPECT_EQ(PlanMigRelayouts(in).size(), 1u);
  in.policy = MigRelayout::kOff;
  EXPECT_TRUE(PlanMigRelayouts(in).empty());
}

TEST(MigPlannerTest, DrainTakesOneBusyGpuWithTheFewestTasksWhenNoIdleOneServes) {
  MigPlanInput in;
  in.policy = MigRelayout::kDrain;
  in.waiting = {{"7g.80gb", 1}};
  in.gpus = {Gpu("x", "1g.10gb@0+1g.10gb@1+1g.10gb@2", 3), Gpu("y", "1g.10gb@0+1g.10gb@1", 1),
             Gpu("z", "1g.10gb@0+1g.10gb@1+1g.10gb@2", 2)};
  std::vector<MigRelayoutChoice> out = PlanMigRelayouts(in);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].gpu, "GPU-y");
  EXPECT_TRUE(out[0].drain);
  EXPECT_EQ(FormatMigLayout(out[0].layout), "7g.80gb@0");
  in.policy = MigRelayout::kIdle;
  EXPECT_TRUE(PlanMigRelayouts(in).empty());
}

// ---- the core ----------------------------------------------------------------------------

constexpr char kSevenOnes[] =
    "1g.10gb@0+1g.10gb@1+1g.10gb@2+1g.10gb@3+1g.10gb@4+1g.10gb@5+1g.10gb@6";

TEST(CoreMigLayoutTest, AnAdminLayoutIsStoredHeldOutAskedForAndSettledByTheAgent) {
  std::shared_ptr<MemoryDatabase> db = MemoryStore().database();
  CoreHarness h(SchedulerOptions::Defaults(), db);
  ASSERT_TRUE(h.CreatePool("mig", SharingMode::kExclusive).ok());
  ASSERT_TRUE(Register(h, MigNode("m1", "mig", kSevenOnes)).ok());

  Result<NodeView> v = SetLayout(h, "m1", "GPU-m1", "3g.40gb@4+3g.40gb@0");
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  std::optional<MigLayoutRecord> row = RowOf(v, "GPU-m1");
  ASSERT_TRUE(row.has_value());
  EXPECT_EQ(row->state, MigLayoutState::kApplying);
  EXPECT_EQ(row->layout, "3g.40gb@0+3g.40gb@4");  // canonical
  // Stored before the agent was asked.
  Result<RecoveredState> stored = h.store->Recover();
  ASSERT_TRUE(stored.ok());
  ASSERT_EQ(stored->mig_layouts.size(), 1u);
  EXPECT_EQ(stored->mig_layouts[0], *row);
  ASSERT_EQ(h.agents.mig.size(), 1u);
  EXPECT_EQ(h.agents.mig[0].first, "m1");
  EXPECT_EQ(h.agents.mig[0].second.layout, "3g.40gb@0+3g.40gb@4");
  EXPECT_EQ(h.agents.mig[0].second.generation, 1);

  // Its old instances take no work meanwhile.
  auto one = h.Submit(Mig("mig", "1g.10gb"));
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  EXPECT_EQ(h.Task(one->id).state, TaskState::kPending);

  // The agent registers with the new instances: applied; the 3g work runs there.
  AgentRegistration after = MigNode("m1", "mig", "3g.40gb@0+3g.40gb@4", 1);
  after.mig_outcomes = {{"GPU-m1", 1, "", false}};
  ASSERT_TRUE(Register(h, after).ok());
  v = h.core->GetNode("m1");
  EXPECT_EQ(RowOf(v, "GPU-m1")->state, MigLayoutState::kApplied);
  ASSERT_EQ(v->mig_gpus.size(), 1u);
  EXPECT_EQ(v->mig_gpus[0].layout, "3g.40gb@0+3g.40gb@4");
  auto three = h.Submit(Mig("mig", "3g.40gb"));
  ASSERT_TRUE(three.ok());
  EXPECT_EQ(h.Task(three->id).state, TaskState::kScheduled);
  EXPECT_EQ(h.Task(three->id).allocations[0].device_id, "MIG-m1-1-0");
  EXPECT_EQ(h.store->Recover()->mig_layouts[0].state, MigLayoutState::kApplied);
  // A GPU in MIG mode never takes whole-GPU work, with or without instances.
  EXPECT_FALSE(h.Submit(CoreHarness::Whole("mig", 1)).ok());
}

TEST(CoreMigLayoutTest, ALayoutTheDriverRefusesFailsWithTheReasonAndTheGpuStaysInService) {
  CoreHarness h;
  ASSERT_TRUE(h.CreatePool("mig", SharingMode::kExclusive).ok());
  ASSERT_TRUE(Register(h, MigNode("m1", "mig", kSevenOnes)).ok());
  ASSERT_TRUE(SetLayout(h, "m1", "GPU-m1", "7g.80gb@0").ok());
  AgentRegistration same = MigNode("m1", "mig", kSevenOnes);
  same.mig_outcomes = {
      {"GPU-m1", 1, "nvmlDeviceCreateGpuInstanceWithPlacement(7g.80gb@0): In use", false}};
  ASSERT_TRUE(Register(h, same).ok());
  std::optional<MigLayoutRecord> row = RowOf(h.core->GetNode("m1"), "GPU-m1");
  ASSERT_TRUE(row.has_value());
  EXPECT_EQ(row->state, MigLayoutState::kFailed);
  EXPECT_NE(row->reason.find("In use"), std::string::npos);
  // The previous instances are back in service.
  auto one = h.Submit(Mig("mig", "1g.10gb"));
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(h.Task(one->id).state, TaskState::kScheduled);
  h.Report("m1", one->id, 0, TaskState::kSucceeded);
  // A refusal that lost the old layout too: the GPU is faulted, out of service until cleared.
  ASSERT_TRUE(SetLayout(h, "m1", "GPU-m1", "7g.80gb@0").ok());
  AgentRegistration lost = MigNode("m1", "mig", "", 2);
  lost.mig_outcomes = {{"GPU-m1", 2, "In use; the previous layout could not be restored", true}};
  ASSERT_TRUE(Register(h, lost).ok());
  Result<NodeView> v = h.core->GetNode("m1");
  ASSERT_TRUE(v.ok());
  ASSERT_EQ(v->mig_gpus.size(), 1u);
  EXPECT_EQ(v->mig_gpus[0].row->state, MigLayoutState::kFailed);
  ASSERT_TRUE(v->mig_gpus[0].fault.has_value());
  EXPECT_NE(v->mig_gpus[0].fault->reason.find("previous layout was lost"), std::string::npos);
}

TEST(CoreMigLayoutTest, BadLayoutsAndBusyOrPlainGpusAreRefusedWithTheReason) {
  CoreHarness h;
  ASSERT_TRUE(h.CreatePool("mig", SharingMode::kExclusive).ok());
  ASSERT_TRUE(Register(h, MigNode("m1", "mig", kSevenOnes)).ok());
  ASSERT_TRUE(h.Register("plain", "mig", 1).ok());
  auto code = [&](const std::string& node, const std::string& gpu, const std::string& layout) {
    Result<NodeView> v = SetLayout(h, node, gpu, layout);
    return v.ok() ? StatusCode::kOk : v.status().code();
  };
  Result<NodeView> bad = SetLayout(h, "m1", "GPU-m1", "5g.50gb@0");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("'5g.50gb' is not a MIG profile"), std::string::npos);
  bad = SetLayout(h, "m1", "GPU-m1", "4g.40gb@0+3g.40gb@0");
  EXPECT_NE(bad.status().message().find("overlaps"), std::string::npos);
  EXPECT_EQ(code("m1", "GPU-m1", "3g.40gb"), StatusCode::kInvalidArgument);  // no start
  EXPECT_EQ(code("m1", "MIG-m1-0-0", "7g.80gb@0"), StatusCode::kFailedPrecondition);
  EXPECT_EQ(code("plain", "GPU-plain-0", "7g.80gb@0"), StatusCode::kFailedPrecondition);
  EXPECT_EQ(code("m1", "GPU-none", "7g.80gb@0"), StatusCode::kNotFound);
  EXPECT_EQ(code("nowhere", "GPU-m1", "7g.80gb@0"), StatusCode::kNotFound);
  // Busy: a task on one instance.
  auto one = h.Submit(Mig("mig", "1g.10gb"));
  ASSERT_TRUE(one.ok());
  ASSERT_EQ(h.Task(one->id).state, TaskState::kScheduled);
  bad = SetLayout(h, "m1", "GPU-m1", "7g.80gb@0");
  EXPECT_EQ(bad.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(bad.status().message().find("running work"), std::string::npos);
  EXPECT_TRUE(h.agents.mig.empty());  // nothing was asked of the agent
  EXPECT_TRUE(h.store->Recover()->mig_layouts.empty());
}

TEST(CoreMigLayoutTest, ARestartMidRelayoutAsksTheAgentAgainAndSettlesIt) {
  std::shared_ptr<MemoryDatabase> db = MemoryStore().database();
  {
    CoreHarness h(SchedulerOptions::Defaults(), db);
    ASSERT_TRUE(h.CreatePool("mig", SharingMode::kExclusive).ok());
    ASSERT_TRUE(Register(h, MigNode("m1", "mig", kSevenOnes)).ok());
    ASSERT_TRUE(SetLayout(h, "m1", "GPU-m1", "4g.40gb@0+3g.40gb@4").ok());
  }  // gpupoold stops before the agent answered
  CoreHarness h(SchedulerOptions::Defaults(), db);
  // The agent (restarted too, mid-way: no outcome) reports the old layout.
  ASSERT_TRUE(Register(h, MigNode("m1", "mig", kSevenOnes)).ok());
  ASSERT_EQ(h.agents.mig.size(), 1u);
  EXPECT_EQ(h.agents.mig[0].second.layout, "4g.40gb@0+3g.40gb@4");
  EXPECT_EQ(h.agents.mig[0].second.generation, 1);
  EXPECT_EQ(RowOf(h.core->GetNode("m1"), "GPU-m1")->state, MigLayoutState::kApplying);
  auto one = h.Submit(Mig("mig", "1g.10gb"));  // still held out
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(h.Task(one->id).state, TaskState::kPending);
  ASSERT_TRUE(Register(h, MigNode("m1", "mig", "4g.40gb@0+3g.40gb@4", 1)).ok());
  EXPECT_EQ(RowOf(h.core->GetNode("m1"), "GPU-m1")->state, MigLayoutState::kApplied);
}

TEST(CoreMigLayoutTest, APoolWithTheIdlePolicyReLaysOutAnIdleGpuForWaitingWork) {
  SchedulerOptions options = SchedulerOptions::Defaults();
  options.mig_relayout_cooldown_ms = 0;
  CoreHarness h(options);
  ASSERT_TRUE(CreateMigPool(h, MigRelayout::kIdle).ok());
  ASSERT_TRUE(Register(h, MigNode("m1", "mig", kSevenOnes)).ok());
  // No 3g instance exists, but the GPU can be laid out for one: admitted, and waiting.
  auto a = h.Submit(Mig("mig", "3g.40gb"));
  auto b = h.Submit(Mig("mig", "3g.40gb"));
  ASSERT_TRUE(a.ok() && b.ok()) << a.status().ToString();
  EXPECT_EQ(h.Task(a->id).state, TaskState::kPending);
  EXPECT_EQ(h.Task(a->id).pending.code, PendingCode::kNoCapacity);
  PassAndTick(h);
  ASSERT_EQ(h.agents.mig.size(), 1u);
  EXPECT_EQ(h.agents.mig[0].second.layout, "3g.40gb@0+3g.40gb@4");
  std::optional<MigLayoutRecord> row = RowOf(h.core->GetNode("m1"), "GPU-m1");
  ASSERT_TRUE(row.has_value());
  EXPECT_EQ(row->set_by, "scheduler");
  EXPECT_NE(row->reason.find("2 × 3g.40gb"), std::string::npos);
  AgentRegistration after = MigNode("m1", "mig", "3g.40gb@0+3g.40gb@4", 1);
  after.mig_outcomes = {{"GPU-m1", 1, "", false}};
  ASSERT_TRUE(Register(h, after).ok());
  EXPECT_EQ(h.Task(a->id).state, TaskState::kScheduled);
  EXPECT_EQ(h.Task(b->id).state, TaskState::kScheduled);
  h.core->Tick();  // nothing waits: nothing more is asked
  h.Drain();
  EXPECT_EQ(h.agents.mig.size(), 1u);
}

// A GPU whose re-layout the driver refused is not tried again at once: the planner leaves it
// alone for ten minutes, then tries again.
TEST(CoreMigLayoutTest, TheIdlePolicyBacksOffAGpuWhoseLayoutFailed) {
  SchedulerOptions options = SchedulerOptions::Defaults();
  options.mig_relayout_cooldown_ms = 0;
  CoreHarness h(options);
  ASSERT_TRUE(CreateMigPool(h, MigRelayout::kIdle).ok());
  ASSERT_TRUE(Register(h, MigNode("m1", "mig", kSevenOnes)).ok());
  auto big = h.Submit(Mig("mig", "7g.80gb"));
  ASSERT_TRUE(big.ok());
  PassAndTick(h);
  ASSERT_EQ(h.agents.mig.size(), 1u);
  AgentRegistration refused = MigNode("m1", "mig", kSevenOnes);
  refused.mig_outcomes = {{"GPU-m1", 1, "Insufficient Resources", false}};
  ASSERT_TRUE(Register(h, refused).ok());
  ASSERT_EQ(RowOf(h.core->GetNode("m1"), "GPU-m1")->state, MigLayoutState::kFailed);
  h.clock.Advance(5LL * 60 * 1'000'000);
  ASSERT_TRUE(Register(h, MigNode("m1", "mig", kSevenOnes)).ok());  // its agent stays connected
  PassAndTick(h);
  EXPECT_EQ(h.agents.mig.size(), 1u);  // within the back-off
  h.clock.Advance(6LL * 60 * 1'000'000);
  ASSERT_TRUE(Register(h, MigNode("m1", "mig", kSevenOnes)).ok());
  PassAndTick(h);
  ASSERT_EQ(h.agents.mig.size(), 2u);
  EXPECT_EQ(h.agents.mig[1].second.generation, 2);
}

}  // namespace
}  // namespace gpupool

namespace gpupool {
namespace {

// The drain policy: no idle GPU can serve a waiting 7g.80gb, so the busy GPU with the fewest
// tasks is drained — stored as draining, its instances out of placement, its running task left
// alone, nothing asked of the agent — and once that task has ended it is re-laid out.
TEST(CoreMigLayoutTest, TheDrainPolicyDrainsABusyGpuAndReLaysItOutOnceIdle) {
  SchedulerOptions options = SchedulerOptions::Defaults();
  options.mig_relayout_cooldown_ms = 0;
  CoreHarness h(options);
  ASSERT_TRUE(CreateMigPool(h, MigRelayout::kDrain).ok());
  ASSERT_TRUE(Register(h, MigNode("m1", "mig", kSevenOnes)).ok());
  auto small = h.Submit(Mig("mig", "1g.10gb"));
  ASSERT_TRUE(small.ok());
  ASSERT_EQ(h.Task(small->id).state, TaskState::kScheduled);
  h.RunStarted();
  auto big = h.Submit(Mig("mig", "7g.80gb"));
  ASSERT_TRUE(big.ok()) << big.status().ToString();
  PassAndTick(h);
  std::optional<MigLayoutRecord> row = RowOf(h.core->GetNode("m1"), "GPU-m1");
  ASSERT_TRUE(row.has_value());
  EXPECT_EQ(row->state, MigLayoutState::kDraining);
  EXPECT_EQ(row->layout, "7g.80gb@0");
  EXPECT_TRUE(h.agents.mig.empty());                        // not yet
  EXPECT_EQ(h.Task(small->id).state, TaskState::kRunning);  // left alone
  EXPECT_EQ(h.store->Recover()->mig_layouts[0].state, MigLayoutState::kDraining);
  auto another = h.Submit(Mig("mig", "1g.10gb"));  // the draining GPU takes no new work
  ASSERT_TRUE(another.ok());
  EXPECT_EQ(h.Task(another->id).state, TaskState::kPending);
  // Its task ends: the next tick re-lays it out.
  h.Report("m1", small->id, 0, TaskState::kSucceeded);
  h.core->Tick();
  h.Drain();
  ASSERT_EQ(h.agents.mig.size(), 1u);
  EXPECT_EQ(h.agents.mig[0].second.layout, "7g.80gb@0");
  EXPECT_EQ(h.agents.mig[0].second.generation, 2);
  EXPECT_EQ(RowOf(h.core->GetNode("m1"), "GPU-m1")->state, MigLayoutState::kApplying);
  AgentRegistration after = MigNode("m1", "mig", "7g.80gb@0", 2);
  after.mig_outcomes = {{"GPU-m1", 2, "", false}};
  ASSERT_TRUE(Register(h, after).ok());
  EXPECT_EQ(h.Task(big->id).state, TaskState::kScheduled);
}

}  // namespace
}  // namespace gpupool
