// Tests of pool/mig_layout: NVIDIA's placement rules as the catalog states them, the layouts the
// MIG User Guide documents, refusals with their reason, the enumeration's counts, and the
// planner's choice for one-profile and mixed demand.
#include "pool/mig_layout.h"

#include <gtest/gtest.h>

#include <set>

namespace gpupool {
namespace {

const GpuModel& Model(const char* name) {
  const GpuModel* m = Catalog::Builtin().Find(name);
  EXPECT_NE(m, nullptr) << name;
  return *m;
}

MigLayout Parse(const GpuModel& m, const std::string& text) {
  auto l = ParseMigLayout(m, text);
  EXPECT_TRUE(l.ok()) << text << ": " << l.status().ToString();
  return l.ok() ? *l : MigLayout{};
}

// The `nvidia-smi mig -lgipp` rules (MIG User Guide, "List GPU Instance Profiles"), per model.
TEST(MigLayoutTest, CatalogStatesThePlacementRuleOfEveryLaidOutProfile) {
  struct Row {
    const char* model;
    const char* profile;
    int memory_slices;
    std::vector<int> starts;
  };
  const Row rows[] = {
      {"A100-80GB", "1g.10gb", 1, {0, 1, 2, 3, 4, 5, 6}},
      {"A100-80GB", "1g.20gb", 2, {0, 2, 4, 6}},
      {"A100-80GB", "2g.20gb", 2, {0, 2, 4}},
      {"A100-80GB", "3g.40gb", 4, {0, 4}},
      {"A100-80GB", "4g.40gb", 4, {0}},
      {"A100-80GB", "7g.80gb", 8, {0}},
      {"A100-40GB", "1g.5gb", 1, {0, 1, 2, 3, 4, 5, 6}},
      {"A100-40GB", "1g.10gb", 2, {0, 2, 4, 6}},
      {"A100-40GB", "3g.20gb", 4, {0, 4}},
      {"H100-SXM", "2g.20gb", 2, {0, 2, 4}},
      {"H100-PCIe", "1g.20gb", 2, {0, 2, 4, 6}},  // the SXM table, shared
      {"H200", "1g.18gb", 1, {0, 1, 2, 3, 4, 5, 6}},
      {"H200", "1g.35gb", 2, {0, 2, 4, 6}},
      {"H200", "3g.71gb", 4, {0, 4}},
      {"H200", "7g.141gb", 8, {0}},
  };
  for (const Row& r : rows) {
    const MigProfile* p = Catalog::Builtin().FindMig(r.model, r.profile);
    ASSERT_NE(p, nullptr) << r.model << " " << r.profile;
    EXPECT_EQ(p->memory_slices, r.memory_slices) << r.model << " " << r.profile;
    EXPECT_EQ(p->starts, r.starts) << r.model << " " << r.profile;
  }
}

TEST(MigLayoutTest, DocumentedLayoutsAreValid) {
  const GpuModel& a100 = Model("A100-80GB");
  for (const char* text : {
           "1g.10gb@0+1g.10gb@1+1g.10gb@2+1g.10gb@3+1g.10gb@4+1g.10gb@5+1g.10gb@6",  // 7 × 1g
           "3g.40gb@0+3g.40gb@4",                      // the guide's -cgi 9,9
           "4g.40gb@0+3g.40gb@4",                      // supported since R510 (guide, Partitioning)
           "2g.20gb@0+2g.20gb@2+2g.20gb@4+1g.10gb@6",  // 3 × 2g + 1g
           "1g.20gb@0+1g.20gb@2+1g.20gb@4+1g.20gb@6",  // 4 × 1g.20gb
           "7g.80gb@0",
           "3g.40gb@4+2g.20gb@0+1g.10gb@2+1g.10gb@3",  // any order in, canonical out
           "",                                         // MIG on, nothing carved
       }) {
    auto l = ParseMigLayout(a100, text);
    EXPECT_TRUE(l.ok()) << text << ": " << l.status().ToString();
  }
  // H200 and H100: the same geometry under their own names.
  EXPECT_TRUE(ParseMigLayout(Model("H200"), "4g.71gb@0+3g.71gb@4").ok());
  EXPECT_TRUE(ParseMigLayout(Model("H100"), "2g.20gb@0+1g.20gb@2+3g.40gb@4").ok());
  EXPECT_EQ(FormatMigLayout(Parse(a100, "3g.40gb@4+2g.20gb@0+1g.10gb@3+1g.10gb@2")),
            "2g.20gb@0+1g.10gb@2+1g.10gb@3+3g.40gb@4");
}

TEST(MigLayoutTest, BadLayoutsAreRefusedWithTheirReason) {
  const GpuModel& a100 = Model("A100-80GB");
  struct Row {
    const char* text;
    const char* reason;
  };
  const Row rows[] = {
      {"1g.5gb@0",
       "1g.5gb@0: '1g.5gb' is not a MIG profile of A100-80GB (it has: 1g.10gb, 1g.20gb, 2g.20gb, "
       "3g.40gb, 4g.40gb, 7g.80gb)"},
      {"3g.40gb@2", "3g.40gb@2: 3g.40gb may start only at memory slice {0,4}"},
      {"1g.10gb@7", "1g.10gb@7: 1g.10gb may start only at memory slice {0,1,2,3,4,5,6}"},
      {"2g.20gb@1", "2g.20gb@1: 2g.20gb may start only at memory slice {0,2,4}"},
      {"4g.40gb@0+2g.20gb@2", "2g.20gb@2 (memory slices 2-3) overlaps 4g.40gb@0 at memory slice 2"},
      {"1g.10gb@5+3g.40gb@4", "3g.40gb@4 (memory slices 4-7) overlaps 1g.10gb@5 at memory slice 5"},
      {"7g.80gb@0+1g.10gb@0", "1g.10gb@0 (memory slices 0-0) overlaps 7g.80gb@0 at memory slice 0"},
  };
  for (const Row& r : rows) {
    auto l = ParseMigLayout(a100, r.text);
    ASSERT_FALSE(l.ok()) << r.text;
    EXPECT_EQ(l.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(l.status().message(), std::string("MIG layout of A100-80GB: ") + r.reason);
  }
  auto bad = ParseMigLayout(a100, "3g.40gb");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "MIG layout '3g.40gb': '3g.40gb' is not PROFILE@START (START a memory slice 0-7)");
  // A card without MIG refuses every profile.
  auto l40s = ValidateMigLayout(Model("L40S"), {{"1g.10gb", 0}});
  ASSERT_FALSE(l40s.ok());
  EXPECT_EQ(l40s.message(),
            "MIG layout of L40S: 1g.10gb@0: '1g.10gb' is not a MIG profile of L40S (it has: none)");
}

TEST(MigLayoutTest, AProfileWithoutAPlacementRuleIsNotLaidOut) {
  GpuModel m = Model("A100-80GB");
  m.mig_profiles[0].memory_slices = 0;  // as an operator catalog without the rule
  m.mig_profiles[0].starts.clear();
  EXPECT_EQ(ValidateMigLayout(m, {{"1g.10gb", 0}}).message(),
            "MIG layout of A100-80GB: 1g.10gb@0: the catalog states no placement rule for 1g.10gb");
  for (const MigLayout& l : EnumerateMaximalMigLayouts(m)) {
    for (const MigPlacement& p : l) EXPECT_NE(p.profile, "1g.10gb");
  }
}

// The guide's A100 figure ("MIG Profiles on A100") builds combinations from 1g, 2g, 3g, 4g and
// 7g: on the 8 memory slices with the starts above that gives 19 maximal placements, the count
// usually quoted for the A100. The 80GB/H100/H200 tables add the 1g profile with two memory
// slices ({0,2,4,6}:2), which brings it to 78 placements with 38 distinct instance counts. The
// counts were checked against an independent enumeration that applies the memory rule alone (no
// compute limit): the same 19 and 78, so the memory rule keeps every layout within 7 slices.
TEST(MigLayoutTest, EnumerationCountsWhatTheGuideImplies) {
  GpuModel five = Model("A100-40GB");
  std::erase_if(five.mig_profiles, [](const MigProfile& p) { return p.name == "1g.10gb"; });
  const std::vector<MigLayout> a100 = EnumerateMaximalMigLayouts(five);
  EXPECT_EQ(a100.size(), 19u);
  for (const char* model : {"A100-80GB", "A100-40GB", "H100-SXM", "H100-PCIe", "H200"}) {
    const GpuModel& m = Model(model);
    const std::vector<MigLayout> all = EnumerateMaximalMigLayouts(m);
    EXPECT_EQ(all.size(), 78u) << model;
    std::set<std::vector<int>> counts;
    std::set<std::string> seen;
    for (const MigLayout& l : all) {
      EXPECT_TRUE(ValidateMigLayout(m, l).ok()) << model << " " << FormatMigLayout(l);
      EXPECT_TRUE(seen.insert(FormatMigLayout(l)).second) << "twice: " << FormatMigLayout(l);
      counts.insert(MigInstanceCounts(m, l));
      int compute = 0;
      for (const MigPlacement& p : l) compute += m.FindMig(p.profile)->compute_slices;
      EXPECT_LE(compute, kMigComputeSlices);
    }
    EXPECT_EQ(counts.size(), 38u) << model;
  }
  EXPECT_TRUE(EnumerateMaximalMigLayouts(Model("L40S")).empty());
}

MigLayout PlanFor(const GpuModel& m, const std::vector<std::pair<std::string, double>>& mix) {
  auto want = MigWantFromMix(m, mix);
  EXPECT_TRUE(want.ok()) << want.status().ToString();
  auto l = PlanMigLayout(m, *want);
  EXPECT_TRUE(l.ok()) << l.status().ToString();
  return l.ok() ? *l : MigLayout{};
}

TEST(MigLayoutTest, PlannerPicksTheObviousLayoutForOneProfile) {
  const GpuModel& m = Model("A100-80GB");
  EXPECT_EQ(FormatMigLayout(PlanFor(m, {{"1g.10gb", 1}})),
            "1g.10gb@0+1g.10gb@1+1g.10gb@2+1g.10gb@3+1g.10gb@4+1g.10gb@5+1g.10gb@6");
  EXPECT_EQ(FormatMigLayout(PlanFor(m, {{"3g.40gb", 1}})), "3g.40gb@0+3g.40gb@4");
  EXPECT_EQ(FormatMigLayout(PlanFor(m, {{"7g.80gb", 5}})), "7g.80gb@0");
  EXPECT_EQ(FormatMigLayout(PlanFor(m, {{"2g.20gb", 1}})),
            "2g.20gb@0+2g.20gb@2+2g.20gb@4+1g.10gb@6");
  // 4g: the one 4g instance, and the spare 3g beside it (more compute for the same served).
  EXPECT_EQ(FormatMigLayout(PlanFor(m, {{"4g.40gb", 1}})), "4g.40gb@0+3g.40gb@4");
  EXPECT_EQ(FormatMigLayout(PlanFor(Model("H200"), {{"1g.35gb", 1}})),
            "1g.35gb@0+1g.35gb@2+1g.35gb@4+1g.35gb@6");
}

TEST(MigLayoutTest, PlannerServesAMix) {
  const GpuModel& m = Model("A100-80GB");
  // Half the compute 3g, half 1g: one 3g (3 slices) and four 1g (4 slices) serve all 7.
  const MigLayout half = PlanFor(m, {{"3g.40gb", 1}, {"1g.10gb", 1}});
  EXPECT_EQ(MigInstanceCounts(m, half), (std::vector<int>{4, 0, 0, 1, 0, 0}));
  // 4g and 3g demand in equal compute: both fit on one GPU.
  EXPECT_EQ(FormatMigLayout(PlanFor(m, {{"4g.40gb", 1}, {"3g.40gb", 1}})), "4g.40gb@0+3g.40gb@4");
  // Want in instances: 1 × 2g and 5 × 1g → 2g + five 1g (7 slices, all served).
  auto l = PlanMigLayout(m, {5, 0, 1, 0, 0, 0});
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(MigInstanceCounts(m, *l), (std::vector<int>{5, 0, 1, 0, 0, 0}));
  EXPECT_DOUBLE_EQ(MigServedSlices(m, MigInstanceCounts(m, *l), {5, 0, 1, 0, 0, 0}), 7);
  // Served arithmetic: 2 × 3g against a want of one 3g and three 1g serves 3 of 6 wanted slices.
  EXPECT_DOUBLE_EQ(MigServedSlices(m, {0, 0, 0, 2, 0, 0}, {3, 0, 0, 1, 0, 0}), 3);
}

TEST(MigLayoutTest, PlannerRefusesBadInput) {
  const GpuModel& m = Model("A100-80GB");
  EXPECT_EQ(PlanMigLayout(m, {1, 2}).status().message(),
            "MIG want has 2 entries; A100-80GB has 6 profiles");
  EXPECT_EQ(PlanMigLayout(m, {1, 0, 0, -1, 0, 0}).status().message(),
            "MIG want entries must be finite numbers ≥ 0");
  EXPECT_EQ(PlanMigLayout(Model("L40S"), {}).status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(MigWantFromMix(m, {{"9g.99gb", 1}}).status().message(),
            "'9g.99gb' is not a MIG profile of A100-80GB");
}

}  // namespace
}  // namespace gpupool

namespace gpupool {
namespace {

// Instances created without a placement (a static config's list) go where a driver puts them:
// each at its lowest free allowed start, in the order given.
TEST(MigLayoutTest, ProfilesArePlacedFirstFitInTheirOrder) {
  const GpuModel& h100 = Model("H100-SXM");
  Result<MigLayout> l = PlaceMigProfiles(h100, {"1g.10gb", "3g.40gb", "2g.20gb"});
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  EXPECT_EQ(FormatMigLayout(*l), "1g.10gb@0+2g.20gb@2+3g.40gb@4");
  // A second 1g finds no start left: a 1g may not start at slice 7 (MIG User Guide).
  l = PlaceMigProfiles(h100, {"3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"});
  ASSERT_FALSE(l.ok());
  EXPECT_NE(l.status().message().find("no room left for 1g.10gb"), std::string::npos);
  l = PlaceMigProfiles(h100, {"3g.40gb", "3g.40gb", "1g.10gb"});
  ASSERT_FALSE(l.ok());
  EXPECT_NE(l.status().message().find("no room left for 1g.10gb"), std::string::npos);
  l = PlaceMigProfiles(h100, {"9g.90gb"});
  ASSERT_FALSE(l.ok());
  EXPECT_NE(l.status().message().find("'9g.90gb' is not a MIG profile"), std::string::npos);
  EXPECT_TRUE(PlaceMigProfiles(h100, {})->empty());
}

}  // namespace
}  // namespace gpupool
