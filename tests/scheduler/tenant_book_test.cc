// TenantBook: the tenant tree, quota consistency, usage roll-up and fair-share arithmetic.
#include <gtest/gtest.h>

#include "scheduler/options.h"
#include "scheduler/tenancy.h"

namespace gpupool {
namespace {

QuotaAmount T(int64_t tflops, int32_t devices = 0) {
  return QuotaAmount{Resources{tflops * 1000, 0}, devices};
}

TenantBook Tree() {
  TenantBook b;
  for (const char* p :
       {"acme", "acme/research", "acme/research/alice", "acme/research/bob", "acme/vision"}) {
    EXPECT_TRUE(b.CheckCreate(TenantRecord{p, 0}).ok()) << p;
    b.PutTenant(TenantRecord{p, 0});
  }
  return b;
}

TEST(QuotaAmountTest, AddSubtractAndFits) {
  QuotaAmount a{Resources{400'000, 40'960}, 1}, b{Resources{100'000, 8'192}, 2};
  EXPECT_EQ(a + b, (QuotaAmount{Resources{500'000, 49'152}, 3}));
  EXPECT_EQ(a + b - b, a);
  EXPECT_TRUE((a - a).IsZero());
  // 0 in a dimension of the cap: not capped.
  EXPECT_TRUE(a.Fits(QuotaAmount{}));
  EXPECT_TRUE(a.Fits(QuotaAmount{Resources{400'000, 0}, 0}));        // equal is within
  EXPECT_EQ(a.FirstOver(QuotaAmount{Resources{399'999, 0}, 0}), 0);  // TFLOPS
  EXPECT_EQ(a.FirstOver(QuotaAmount{Resources{0, 40'959}, 5}), 1);   // VRAM
  EXPECT_EQ((a + b).FirstOver(QuotaAmount{Resources{0, 0}, 2}), 2);  // devices: 3 > 2
  EXPECT_FALSE((a + b).Fits(QuotaAmount{Resources{0, 0}, 2}));
}

TEST(TenantBookTest, PathsAndTree) {
  struct Case {
    std::string path;
    StatusCode code;
  };
  TenantBook b = Tree();
  std::vector<Case> cases{
      {"globex", StatusCode::kOk},
      {"acme/ml", StatusCode::kOk},
      {"acme", StatusCode::kAlreadyExists},
      {"initech/x", StatusCode::kFailedPrecondition},           // parent missing
      {"acme/research/alice/x", StatusCode::kInvalidArgument},  // four levels
      {"Acme", StatusCode::kInvalidArgument},
      {"acme//x", StatusCode::kInvalidArgument},
      {"", StatusCode::kInvalidArgument},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(b.CheckCreate(TenantRecord{c.path, 0}).code(), c.code) << c.path;
  }
  EXPECT_EQ(b.CheckDelete("acme/research").code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(b.CheckDelete("acme/vision").ok());
  EXPECT_EQ(b.CheckDelete("nope").code(), StatusCode::kNotFound);
}

TEST(TenantBookTest, ChildNeverExceedsParent) {
  TenantBook b = Tree();
  b.PutQuota(QuotaRecord{"acme", "gpu", T(300), T(400)});
  b.PutQuota(QuotaRecord{"acme/research", "gpu", T(200), T(300)});
  struct Case {
    std::string name;
    QuotaRecord quota;
    StatusCode code;
    std::string message_part;
  };
  std::vector<Case> cases{
      {"fits", {"acme/vision", "gpu", T(100), T(400)}, StatusCode::kOk, ""},
      {"guaranteed above limit",
       {"acme/vision", "gpu", T(200), T(100)},
       StatusCode::kInvalidArgument,
       "guaranteed 200 TFLOPS exceeds limit 100 TFLOPS"},
      {"limit above parent's",
       {"acme/vision", "gpu", T(0), T(500)},
       StatusCode::kFailedPrecondition,
       "exceeds the limit of parent acme (400 TFLOPS)"},
      // research 200 + vision 150 = 350 > acme's 300.
      {"siblings' guarantees above parent's",
       {"acme/vision", "gpu", T(150), T(0)},
       StatusCode::kFailedPrecondition,
       "guarantees under acme would total 350 TFLOPS"},
      // Alice's nearest quota above is research (limit 300), not acme.
      {"grandchild under research",
       {"acme/research/alice", "gpu", T(100), T(350)},
       StatusCode::kFailedPrecondition,
       "limit of parent acme/research (300 TFLOPS)"},
      // Lowering research below what it already gives out is refused too.
      {"parent below child",
       {"acme", "gpu", T(100), T(400)},
       StatusCode::kFailedPrecondition,
       "below what its children are guaranteed"},
      {"unknown tenant", {"nope", "gpu", T(1), T(1)}, StatusCode::kNotFound, "not found"},
  };
  for (const Case& c : cases) {
    Status st = b.CheckQuota(c.quota);
    EXPECT_EQ(st.code(), c.code) << c.name << ": " << st.ToString();
    EXPECT_NE(st.message().find(c.message_part), std::string::npos)
        << c.name << ": " << st.message();
  }
}

TEST(TenantBookTest, UsageRollsUpAndLimitsBindTheChain) {
  TenantBook b = Tree();
  b.PutQuota(QuotaRecord{"acme/research", "gpu", T(100), T(200)});
  b.Charge("gpu", "acme/research/alice", T(120), +1, 0);
  b.Charge("gpu", "acme/research/bob", T(60), +1, 0);
  // Usage rolls up: research = 120 + 60 = 180; acme too; alice alone 120.
  EXPECT_EQ(b.Used("gpu", "acme/research").resources.milli_tflops, 180'000);
  EXPECT_EQ(b.Used("gpu", "acme").resources.milli_tflops, 180'000);
  EXPECT_EQ(b.Used("gpu", "acme/research/alice").resources.milli_tflops, 120'000);
  // Bob needs 40 more: 180 + 40 = 220 > 200.
  EXPECT_EQ(b.WhyOverLimit("gpu", "acme/research/bob", T(40)),
            "quota acme/research at 180/200 TFLOPS in pool gpu (task needs 40 TFLOPS)");
  EXPECT_EQ(b.WhyOverLimit("gpu", "acme/research/bob", T(20)), "");      // 200 ≤ 200
  EXPECT_EQ(b.WhyOverLimit("other", "acme/research/bob", T(4000)), "");  // no quota there
  EXPECT_EQ(b.CheckNeverFits("gpu", "acme/research/carol", T(400)).message(),
            "quota of acme/research in pool gpu: limit 200 TFLOPS, job needs 400 TFLOPS");
  EXPECT_EQ(b.GroupOf("gpu", "acme/research/carol"), "acme/research");
  EXPECT_EQ(b.GroupOf("gpu", "globex/x"), "globex/x");
  b.Charge("gpu", "acme/research/alice", T(120), -1, 0);
  EXPECT_EQ(b.Used("gpu", "acme").resources.milli_tflops, 60'000);
}

TEST(TenantBookTest, ShareDecaysWithHalfLife) {
  TenantBook b(/*half_life_ms=*/60'000);
  for (const char* p : {"a", "b"}) b.PutTenant(TenantRecord{p, 0});
  b.PutQuota(QuotaRecord{"a", "gpu", T(0, 2), T(0)});
  b.PutQuota(QuotaRecord{"b", "gpu", T(0, 1), T(0)});
  QuotaAmount implicit = T(1);
  b.Charge("gpu", "a", T(0, 2), +1, 0);
  // At once: decayed 0, current 2 → (0 + 2) / 2 / guaranteed 2 = 0.5.
  EXPECT_DOUBLE_EQ(b.Share("gpu", "a", implicit, 0), 0.5);
  // One half-life later the decayed average is half-way to 2: (1 + 2) / 2 / 2 = 0.75.
  EXPECT_DOUBLE_EQ(b.Share("gpu", "a", implicit, 60'000'000), 0.75);
  b.Charge("gpu", "a", T(0, 2), -1, 60'000'000);
  // Released: current 0, decayed 1, then halves again: (0.5 + 0) / 2 / 2 = 0.125.
  EXPECT_DOUBLE_EQ(b.Share("gpu", "a", implicit, 120'000'000), 0.125);
  EXPECT_DOUBLE_EQ(b.Share("gpu", "b", implicit, 120'000'000), 0);  // never used anything
}

TEST(TenantBookTest, QuotaInSkuUnits) {
  SchedulerOptions o = SchedulerOptions::Defaults();
  // 4 × medium (200 TFLOPS, 40 GiB) = 800 TFLOPS, 163840 MiB; 3 × large (1 GPU) = 3 devices.
  EXPECT_EQ(*QuotaInSkuUnits(o, "medium", 4), (QuotaAmount{Resources{800'000, 163'840}, 0}));
  EXPECT_EQ(*QuotaInSkuUnits(o, "large", 3), (QuotaAmount{Resources{}, 3}));
  EXPECT_EQ(QuotaInSkuUnits(o, "huge", 1).status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace gpupool
