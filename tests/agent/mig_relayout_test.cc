// The node's half of dynamic MIG (agent/mig_relayout.h) on the simulated backend: a layout is
// applied all or nothing and its outcome kept for Register; bad requests and busy GPUs are
// refused with the reason and touch nothing; and a journal entry a dead agent left is finished
// before the next one registers — the layout asked for, else the one the GPU had, else no
// instance at all with the GPU reported faulted. Driver refusals come from a backend that wraps
// the simulated one and refuses what the test says (standing in for the NVML errors the fake
// NVML's own tests exercise).
#include "agent/mig_relayout.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "agent/sim_backend.h"
#include "pool/mig_layout.h"

namespace gpupool::agent {
namespace {

// The simulated backend, refusing layouts whose text is in `refuse` (all of them when it holds
// "*"), or losing every instance with DATA_LOSS for those in `lose`.
class RefusingBackend final : public DeviceBackend {
 public:
  explicit RefusingBackend(SimulatedBackend* inner) : inner_(inner) {}
  std::string Name() const override { return "refusing"; }
  Result<Inventory> Discover() override { return inner_->Discover(); }
  std::vector<DeviceSample> Sample(const std::vector<DeviceLoad>& l) override {
    return inner_->Sample(l);
  }
  Status ApplyMigLayout(const std::string& gpu, const MigLayout& layout) override {
    const std::string text = FormatMigLayout(layout);
    applied.push_back(text);
    if (lose.contains(text)) {
      (void)inner_->ApplyMigLayout(gpu, {});
      return Status(StatusCode::kDataLoss, "driver lost the GPU's instances");
    }
    if (refuse.contains("*") || refuse.contains(text))
      return Status::FailedPrecondition("driver refused " + text + ": Insufficient Resources");
    return inner_->ApplyMigLayout(gpu, layout);
  }
  std::set<std::string> refuse, lose;
  std::vector<std::string> applied;

 private:
  SimulatedBackend* inner_;
};

class MigRelayoutTest : public ::testing::Test {
 protected:
  MigRelayoutTest() : sim_("n1", Layout(), Catalog::Builtin()), backend_(&sim_) {
    dir_ = std::filesystem::temp_directory_path() /
           ("gpupool-mig-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
  }
  ~MigRelayoutTest() override { std::filesystem::remove_all(dir_); }

  static SimLayout Layout() {
    SimLayout l;
    SimGpuGroup g;
    g.model = "H100-SXM";
    g.count = 2;
    g.mig[0] = {"1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb", "1g.10gb"};
    l.gpus.push_back(g);
    return l;
  }

  Inventory Now() { return *sim_.Discover(); }
  std::string LayoutOf(const std::string& gpu) {
    MigLayout out;
    for (const Device& d : Now().devices)
      if (d.parent_uuid == gpu) out.push_back({d.mig_profile, d.mig_start});
    return FormatMigLayout(out);  // canonical
  }
  static v1::SetMigLayout Req(const std::string& layout, int64_t gen = 1) {
    v1::SetMigLayout r;
    r.set_gpu_uuid(kGpu);
    r.set_layout(layout);
    r.set_generation(gen);
    return r;
  }
  void WriteJournal(const std::string& wanted, const std::string& previous, int64_t gen) {
    std::filesystem::create_directories(dir_);
    std::ofstream(dir_ / "GPU-sim-n1-0") << kGpu << "\n"
                                         << gen << "\n"
                                         << wanted << "\n"
                                         << previous << "\n";
  }

  static constexpr char kGpu[] = "GPU-sim-n1-0";
  static constexpr char kOnes[] =
      "1g.10gb@0+1g.10gb@1+1g.10gb@2+1g.10gb@3+1g.10gb@4+1g.10gb@5+1g.10gb@6";
  const MigRelayouter::BusyFn idle_ = [](const std::string&) { return false; };
  SimulatedBackend sim_;
  RefusingBackend backend_;
  std::filesystem::path dir_;
};

TEST_F(MigRelayoutTest, TheSimulatedGpuReportsItsModeAndPlacements) {
  const Inventory inv = Now();
  int enabled = 0;
  for (const Device& d : inv.devices) enabled += d.mig_enabled ? 1 : 0;
  EXPECT_EQ(enabled, 1);  // GPU 0 only; its instances and GPU 1 are not re-partitionable
  EXPECT_EQ(LayoutOf(kGpu), kOnes);
}

TEST_F(MigRelayoutTest, ALayoutIsAppliedWithNewInstancesAndItsOutcomeKept) {
  MigRelayouter mig(&backend_, Catalog::Builtin(), dir_.string());
  const std::string before = Now().devices[1].uuid;
  v1::MigLayoutOutcome o = mig.Apply(Req("3g.40gb@0+3g.40gb@4"), Now(), idle_);
  EXPECT_EQ(o.error(), "");
  EXPECT_FALSE(o.faulted());
  EXPECT_EQ(LayoutOf(kGpu), "3g.40gb@0+3g.40gb@4");
  for (const Device& d : Now().devices) EXPECT_NE(d.uuid, before);  // new instances, new ids
  EXPECT_TRUE(std::filesystem::is_empty(dir_));                     // the journal entry went
  v1::Register r;
  mig.FillRegister(&r);
  ASSERT_EQ(r.mig_outcomes_size(), 1);
  EXPECT_EQ(r.mig_outcomes(0).gpu_uuid(), kGpu);
  EXPECT_EQ(r.mig_outcomes(0).generation(), 1);
}

TEST_F(MigRelayoutTest, BadRequestsAndBusyGpusAreRefusedAndTouchNothing) {
  MigRelayouter mig(&backend_, Catalog::Builtin(), dir_.string());
  auto error = [&](const v1::SetMigLayout& r, const MigRelayouter::BusyFn& busy) {
    return mig.Apply(r, Now(), busy).error();
  };
  EXPECT_NE(error(Req("5g.50gb@0"), idle_).find("not a MIG profile"), std::string::npos);
  EXPECT_NE(error(Req("4g.40gb@0+3g.40gb@0"), idle_).find("overlaps"), std::string::npos);
  v1::SetMigLayout plain = Req("7g.80gb@0");
  plain.set_gpu_uuid("GPU-sim-n1-1");
  EXPECT_NE(error(plain, idle_).find("not in MIG mode"), std::string::npos);
  plain.set_gpu_uuid("GPU-elsewhere");
  EXPECT_NE(error(plain, idle_).find("no GPU GPU-elsewhere"), std::string::npos);
  EXPECT_NE(error(Req("7g.80gb@0"), [](const std::string&) { return true; }).find("running"),
            std::string::npos);
  EXPECT_TRUE(backend_.applied.empty());
  EXPECT_EQ(LayoutOf(kGpu), kOnes);
}

TEST_F(MigRelayoutTest, ADriverRefusalLeavesThePreviousLayoutAndALossFaultsTheGpu) {
  MigRelayouter mig(&backend_, Catalog::Builtin(), dir_.string());
  backend_.refuse = {"7g.80gb@0"};
  v1::MigLayoutOutcome o = mig.Apply(Req("7g.80gb@0"), Now(), idle_);
  EXPECT_NE(o.error().find("Insufficient Resources"), std::string::npos);
  EXPECT_FALSE(o.faulted());
  EXPECT_EQ(LayoutOf(kGpu), kOnes);
  // Lost, and the old layout refused too: no instance at all, faulted.
  backend_.lose = {"4g.40gb@0"};
  backend_.refuse = {kOnes};
  o = mig.Apply(Req("4g.40gb@0", 2), Now(), idle_);
  EXPECT_TRUE(o.faulted());
  EXPECT_NE(o.error().find("lost"), std::string::npos);
  EXPECT_EQ(LayoutOf(kGpu), "");
}

TEST_F(MigRelayoutTest, AJournalEntryADeadAgentLeftIsFinishedBeforeRegistering) {
  // The agent died after destroying some instances: the GPU is half-way.
  ASSERT_TRUE(sim_.ApplyMigLayout(kGpu, *ParseMigLayout(*Catalog::Builtin().Find("H100-SXM"),
                                                        "1g.10gb@0+1g.10gb@1"))
                  .ok());
  WriteJournal("3g.40gb@0+3g.40gb@4", kOnes, 5);
  MigRelayouter mig(&backend_, Catalog::Builtin(), dir_.string());
  mig.Recover(Now(), idle_);
  EXPECT_EQ(LayoutOf(kGpu), "3g.40gb@0+3g.40gb@4");
  EXPECT_TRUE(std::filesystem::is_empty(dir_));
  v1::Register r;
  mig.FillRegister(&r);
  ASSERT_EQ(r.mig_outcomes_size(), 1);
  EXPECT_EQ(r.mig_outcomes(0).generation(), 5);
  EXPECT_EQ(r.mig_outcomes(0).error(), "");
}

TEST_F(MigRelayoutTest, AnUnfinishableEntryRestoresThePreviousLayoutElseEmptiesTheGpu) {
  const GpuModel& h100 = *Catalog::Builtin().Find("H100-SXM");
  ASSERT_TRUE(sim_.ApplyMigLayout(kGpu, *ParseMigLayout(h100, "1g.10gb@0")).ok());
  WriteJournal("7g.80gb@0", kOnes, 6);
  backend_.refuse = {"7g.80gb@0"};
  {
    MigRelayouter mig(&backend_, Catalog::Builtin(), dir_.string());
    mig.Recover(Now(), idle_);
    EXPECT_EQ(LayoutOf(kGpu), kOnes);  // the layout it had before the dead agent began
    v1::Register r;
    mig.FillRegister(&r);
    ASSERT_EQ(r.mig_outcomes_size(), 1);
    EXPECT_NE(r.mig_outcomes(0).error().find("Insufficient Resources"), std::string::npos);
    EXPECT_FALSE(r.mig_outcomes(0).faulted());
  }
  // Neither layout can be made: no instance, faulted, never half.
  ASSERT_TRUE(sim_.ApplyMigLayout(kGpu, *ParseMigLayout(h100, "1g.10gb@0")).ok());
  WriteJournal("7g.80gb@0", kOnes, 7);
  backend_.refuse = {"7g.80gb@0", kOnes};
  MigRelayouter mig(&backend_, Catalog::Builtin(), dir_.string());
  mig.Recover(Now(), idle_);
  EXPECT_EQ(LayoutOf(kGpu), "");
  v1::Register r;
  mig.FillRegister(&r);
  ASSERT_EQ(r.mig_outcomes_size(), 1);
  EXPECT_TRUE(r.mig_outcomes(0).faulted());
  EXPECT_TRUE(std::filesystem::is_empty(dir_));
}

TEST_F(MigRelayoutTest, AnEntryForABusyGpuWaitsAndIsReportedFaulted) {
  WriteJournal("7g.80gb@0", kOnes, 8);
  MigRelayouter mig(&backend_, Catalog::Builtin(), dir_.string());
  mig.Recover(Now(), [](const std::string&) { return true; });
  EXPECT_TRUE(backend_.applied.empty());
  EXPECT_FALSE(std::filesystem::is_empty(dir_));
  v1::Register r;
  mig.FillRegister(&r);
  ASSERT_EQ(r.mig_outcomes_size(), 1);
  EXPECT_TRUE(r.mig_outcomes(0).faulted());
}

}  // namespace
}  // namespace gpupool::agent
