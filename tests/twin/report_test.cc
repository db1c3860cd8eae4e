// The report's JSON and SVG forms and the what-if comparison.
#include <gtest/gtest.h>

#include "tests/twin/twin_loop_test.h"
#include "twin/twin.h"
#include "twin/what_if.h"

namespace gpupool::twin {
namespace {

using testing::Make;
using testing::Org;
using testing::Task;

TwinReport Sample() {
  Workload w = Make(1, 1, {Task("low", 0, 100, "t/a", "low"), Task("high", 30, 10, "t/b", "high")});
  TwinConfig c;
  c.horizon_us = 200 * testing::kS;
  return *RunTwin(w, Org(), c);
}

TEST(ReportTest, JsonHasTheIssuesKeys) {
  std::string j = ToJson(Sample());
  for (const char* key : {"\"time_avg_gpu_allocation_pct\": 70",
                          "\"time_avg_gpu_allocation_offered_pct\"", "\"classes\": {",
                          "\"high\": {\"wait_s\": {\"count\": 1, \"never_started\": 0, \"p50\": 0, "
                          "\"p99\": 0",
                          "\"preemptions\": 1", "\"lost_gpu_s\": 30", "\"quota_violations\": 0",
                          "\"series\": {\"t_s\": [", "\"speedup_vs_real_time\""}) {
    EXPECT_NE(j.find(key), std::string::npos) << key << "\n" << j;
  }
}

TEST(ReportTest, WhatIfPutsBothSideBySideWithTheDifference) {
  TwinReport a = Sample();
  TwinReport b = a;
  b.label = "candidate";
  b.time_avg_gpu_allocation_pct = 60;
  std::string j = WhatIfJson(a, b);
  EXPECT_NE(j.find("\"baseline\": {"), std::string::npos);
  EXPECT_NE(j.find("\"candidate\": {"), std::string::npos);
  EXPECT_NE(j.find("\"time_avg_gpu_allocation_pct\": -10"), std::string::npos) << j;
}

TEST(ReportTest, SvgPlotsEachSeries) {
  TwinReport a = Sample();
  std::string svg = ToSvg(a, &a);
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  size_t lines = 0;
  for (size_t at = svg.find("<polyline"); at != std::string::npos;
       at = svg.find("<polyline", at + 1))
    ++lines;
  EXPECT_EQ(lines, 8u);  // 4 series × 2 replays
  EXPECT_NE(svg.find("stroke-dasharray"), std::string::npos);
}

TEST(ReportTest, WhatIfConfigChangesOnlyWhatItNames) {
  TwinConfig base;
  Result<WhatIf> w = ParseWhatIf("strategy: best-fit\npreemption: false\ncompute_overcommit: 1.5\n",
                                 "/etc/x/what.yaml", base);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  EXPECT_EQ(w->config.strategy, "best-fit");
  EXPECT_FALSE(w->config.preemption);
  EXPECT_EQ(w->config.compute_overcommit_permille, 1500);
  EXPECT_EQ(w->config.queue_order, base.queue_order);
  w = ParseWhatIf("org_tree: org2.yaml\n", "/etc/x/what.yaml", base);
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(*w->org_tree, "/etc/x/org2.yaml");
  w = ParseWhatIf("strategy: nope\n", "what.yaml", base);
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().message(), "what.yaml:1: strategy: unknown strategy 'nope'");
  w = ParseWhatIf("colour: red\n", "what.yaml", base);
  ASSERT_FALSE(w.ok());
}

}  // namespace
}  // namespace gpupool::twin
