// The org tree: the default is valid, parse errors name file, line and key, and the pod → tenant
// hash is fixed and follows the weights.
#include "twin/org_tree.h"

#include <gtest/gtest.h>

#include <map>

namespace gpupool::twin {
namespace {

TEST(OrgTreeTest, DefaultTreeHasFourQuotaGroupsAndEightLeaves) {
  OrgTree t = DefaultOrgTree();
  EXPECT_EQ(t.Leaves().size(), 8u);
  EXPECT_EQ(t.GroupOf("search/web"), "search");
  EXPECT_EQ(t.GroupOf("nobody"), "");
  EXPECT_EQ(t.ClassOf("LS"), "high");
  EXPECT_EQ(t.ClassOf("BE"), "low");
  EXPECT_EQ(t.ClassOf("unknown"), "normal");
}

TEST(OrgTreeTest, PickTenantIsFixedAndFollowsTheWeights) {
  Result<OrgTree> t = ParseOrgTree(R"(
tenants:
  - {path: a, guaranteed_pct: 50}
  - {path: a/x, weight: 3}
  - {path: a/y, weight: 1}
)",
                                   "org.yaml");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  std::map<std::string, int> n;
  for (int i = 0; i < 4000; ++i) n[t->PickTenant("pod-" + std::to_string(i))]++;
  EXPECT_EQ(t->PickTenant("pod-7"), t->PickTenant("pod-7"));
  // 3:1 within a few percent.
  EXPECT_NEAR(n["a/x"] / 4000.0, 0.75, 0.03);
  EXPECT_EQ(n["a/x"] + n["a/y"], 4000);
}

TEST(OrgTreeTest, ErrorsNameTheFileLineAndKey) {
  struct Case {
    const char* yaml;
    const char* want;
  };
  const Case cases[] = {
      {"tenants:\n  - {path: a/b}\n",
       "org.yaml:2: tenants[0].path: parent 'a' of 'a/b' must be listed before it"},
      {"tenants:\n  - {path: a, colour: red}\n", "colour"},
      {"tenants:\n  - {path: a, guaranteed_pct: 60, limit_pct: 50}\n",
       "guaranteed_pct: above limit_pct"},
      {"tenants:\n  - {path: a, guaranteed_pct: 101}\n", "guaranteed_pct"},
      {"tenants:\n  - {path: A}\n", "tenants[0].path"},
      {"tenants:\n  - {path: a, guaranteed_pct: 10}\n  - {path: a/b, guaranteed_pct: 20}\n",
       "the guarantees below 'a' sum above its own"},
      {"tenants:\n  - {path: a, weight: 0}\n", "no leaf tenant with a positive weight"},
      {"qos_classes: {LS: high}\n", "tenants: missing required key"},
  };
  for (const Case& c : cases) {
    Result<OrgTree> t = ParseOrgTree(c.yaml, "org.yaml");
    ASSERT_FALSE(t.ok()) << c.yaml;
    EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(t.status().message().find(c.want), std::string::npos)
        << "got: " << t.status().message() << "\nwant: " << c.want;
  }
}

}  // namespace
}  // namespace gpupool::twin
