// The usage ledger part of the Store conformance suite (scheduler/usage_ledger.h,
// scheduler/usage_report.h): intervals are stored once per key (a retry changes nothing), the
// report sums exactly per period and group with every filter, Recover() gives the marks of
// active attempts, and a roll-up into daily rows keeps every whole-day total.
#include "tests/store/store_conformance.h"
#include "tests/support/status_macros.h"

namespace gpupool::testing {
namespace {

constexpr int64_t kS = 1'000'000;
constexpr int64_t kHour = 3600 * kS;
constexpr int64_t kDay = 24 * kHour;
// 2026-11-23 00:00:00 UTC.
constexpr int64_t kNov23 = 1'795'392'000 * kS;

UsageInterval Row(int64_t job, int32_t index, int32_t attempt, int64_t start_us, int64_t end_us,
                  const std::string& tenant, int64_t milli_tflops_per_s = 500) {
  UsageInterval u;
  u.job_id = job;
  u.task_index = index;
  u.attempt = attempt;
  u.start_us = start_us;
  u.end_us = end_us;
  u.tenant = tenant;
  u.pool = "gpu-a";
  u.node = "node-0";
  u.model = "H100-SXM";
  u.sharing_mode = SharingMode::kFractional;
  u.priority_class = "normal";
  const int64_t s = MeteredSeconds(start_us, end_us);
  u.totals.milli_tflops_seconds = milli_tflops_per_s * s;
  u.totals.physical_milli_tflops_seconds = milli_tflops_per_s * s / 2;
  u.totals.vram_mib_seconds = 1024 * s;
  u.totals.spill_mib_seconds = 512 * s;
  u.totals.intervals = 1;
  return u;
}

UsageTotals Sum(const std::vector<UsageReportRow>& rows) {
  UsageTotals t;
  for (const UsageReportRow& r : rows) t += r.totals;
  return t;
}

TEST_P(StoreConformanceTest, UsageIntervalsAreStoredOncePerKey) {
  UsageInterval a = Row(1, 0, 0, kNov23, kNov23 + 60 * kS, "acme/ml/o'brien");
  UsageInterval b = Row(1, 0, 0, kNov23 + 60 * kS, kNov23 + 90 * kS, "acme/ml/o'brien");
  b.end = AttemptEnd::kSucceeded;
  b.totals.cpu_usage_us = 7'000'000;
  b.totals.peak_memory_bytes = 1 << 30;
  ASSERT_OK(ApplyAndWait(*store_, {AppendUsage{{a, b}}}));
  // A retried batch and an overlapping one: the keys stored already are skipped, not errors.
  UsageInterval a_again = a;
  a_again.totals.milli_tflops_seconds = 999;  // a different body under the same key is ignored
  ASSERT_OK(ApplyAndWait(*store_, {AppendUsage{{a_again, b}}}));
  ASSERT_OK(ApplyAndWait(*store_, {AppendUsage{{b}}}));

  UsageQuery q;
  ASSERT_OK_AND_ASSIGN(std::vector<UsageReportRow> rows, store_->QueryUsage(q));
  ASSERT_EQ(rows.size(), 1u);
  const UsageReportRow& r = rows[0];
  EXPECT_EQ(r.period_start_us, kNov23);
  EXPECT_EQ(r.tenant, "acme/ml/o'brien");
  EXPECT_EQ(r.pool, "gpu-a");
  EXPECT_EQ(r.model, "H100-SXM");
  EXPECT_EQ(r.priority_class, "normal");
  EXPECT_EQ(r.mig_profile, "");
  // 0.5 TFLOPS × (60 + 30) s = 45 TFLOPS-s = 45,000 milli-TFLOPS-s.
  EXPECT_EQ(r.totals.milli_tflops_seconds, 45'000);
  EXPECT_EQ(r.totals.physical_milli_tflops_seconds, 22'500);
  EXPECT_EQ(r.totals.vram_mib_seconds, 1024 * 90);
  EXPECT_EQ(r.totals.spill_mib_seconds, 512 * 90);
  EXPECT_EQ(r.totals.cpu_usage_us, 7'000'000);
  EXPECT_EQ(r.totals.peak_memory_bytes, 1 << 30);
  EXPECT_EQ(r.totals.intervals, 2);
  EXPECT_DOUBLE_EQ(r.totals.TflopsSeconds(), 45.0);
  EXPECT_DOUBLE_EQ(r.totals.VramGibSeconds(), 90.0);
}

TEST_P(StoreConformanceTest, UsageRefusesMalformedIntervalsWholeBatch) {
  UsageInterval good = Row(1, 0, 0, kNov23, kNov23 + kS, "acme");
  UsageInterval backwards = Row(1, 0, 0, kNov23 + 5 * kS, kNov23, "acme");
  Status st = ApplyAndWait(*store_, {AppendUsage{{good, backwards}}});
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
  EXPECT_NE(st.message().find("is not after its start"), std::string::npos) << st.ToString();
  // An empty interval is only an attempt's last one (it ended on a boundary).
  UsageInterval empty = Row(2, 0, 0, kNov23, kNov23, "acme");
  EXPECT_EQ(ApplyAndWait(*store_, {AppendUsage{{empty}}}).code(), StatusCode::kInvalidArgument);
  empty.end = AttemptEnd::kPreempted;
  ASSERT_OK(ApplyAndWait(*store_, {AppendUsage{{empty}}}));
  UsageInterval bad_text = good;
  bad_text.tenant = std::string("a\0b", 3);
  EXPECT_EQ(ApplyAndWait(*store_, {AppendUsage{{bad_text}}}).code(), StatusCode::kInvalidArgument);
  ASSERT_OK_AND_ASSIGN(std::vector<UsageReportRow> rows, store_->QueryUsage({}));
  ASSERT_EQ(rows.size(), 1u);  // only the empty last interval
  EXPECT_EQ(rows[0].totals.milli_tflops_seconds, 0);
  EXPECT_EQ(rows[0].totals.intervals, 1);
  // Bad queries name the field.
  UsageQuery q;
  q.from_us = 10;
  q.to_us = 5;
  EXPECT_EQ(store_->QueryUsage(q).status().code(), StatusCode::kInvalidArgument);
  q = {};
  q.tenant_depth = -1;
  EXPECT_EQ(store_->QueryUsage(q).status().code(), StatusCode::kInvalidArgument);
}

TEST_P(StoreConformanceTest, UsageReportGroupsAndFilters) {
  std::vector<UsageInterval> rows;
  // acme/ml/alice: two intervals in hour 0, one in hour 1 (day 0); one on day 1; one in December.
  rows.push_back(Row(1, 0, 0, kNov23, kNov23 + 60 * kS, "acme/ml/alice"));
  rows.push_back(Row(1, 0, 0, kNov23 + 60 * kS, kNov23 + 120 * kS, "acme/ml/alice"));
  rows.push_back(Row(1, 0, 0, kNov23 + kHour, kNov23 + kHour + 30 * kS, "acme/ml/alice"));
  rows.push_back(Row(2, 0, 0, kNov23 + kDay, kNov23 + kDay + 10 * kS, "acme/ml/alice"));
  rows.push_back(Row(3, 0, 0, kNov23 + 8 * kDay, kNov23 + 8 * kDay + 10 * kS, "acme/ml/alice"));
  // acme/mlx (not below acme/ml), acme/ops/bob (another project), globex.
  rows.push_back(Row(4, 0, 0, kNov23, kNov23 + 10 * kS, "acme/mlx"));
  rows.push_back(Row(5, 0, 0, kNov23, kNov23 + 10 * kS, "acme/ops/bob"));
  UsageInterval g = Row(6, 1, 2, kNov23, kNov23 + 10 * kS, "globex");
  g.pool = "gpu-b";
  g.model = "A100-80GB";
  g.priority_class = "high";
  g.mig_profile = "3g.40gb";
  g.totals.mig_instance_seconds = 10;
  g.totals.slot_seconds = 20;  // issue 27: slots of time-sliced devices, stored and summed
  rows.push_back(g);
  ASSERT_OK(ApplyAndWait(*store_, {AppendUsage{rows}}));

  UsageQuery q;
  q.tenant = "acme/ml";
  q.period = UsagePeriod::kHour;
  ASSERT_OK_AND_ASSIGN(std::vector<UsageReportRow> hourly, store_->QueryUsage(q));
  ASSERT_EQ(hourly.size(), 4u);
  EXPECT_EQ(hourly[0].period_start_us, kNov23);
  EXPECT_EQ(hourly[0].totals.milli_tflops_seconds, 500 * 120);
  EXPECT_EQ(hourly[0].totals.intervals, 2);
  EXPECT_EQ(hourly[1].period_start_us, kNov23 + kHour);
  EXPECT_EQ(hourly[2].period_start_us, kNov23 + kDay);
  EXPECT_EQ(hourly[3].period_start_us, kNov23 + 8 * kDay);
  for (const UsageReportRow& r : hourly) EXPECT_EQ(r.tenant, "acme/ml/alice");

  q.period = UsagePeriod::kDay;
  ASSERT_OK_AND_ASSIGN(std::vector<UsageReportRow> daily, store_->QueryUsage(q));
  ASSERT_EQ(daily.size(), 3u);
  EXPECT_EQ(daily[0].totals.milli_tflops_seconds, 500 * 150);
  EXPECT_EQ(Sum(daily), Sum(hourly));

  q.period = UsagePeriod::kMonth;
  ASSERT_OK_AND_ASSIGN(std::vector<UsageReportRow> monthly, store_->QueryUsage(q));
  ASSERT_EQ(monthly.size(), 2u);
  EXPECT_EQ(monthly[0].period_start_us, kNov23 - 22 * kDay);  // 2026-11-01
  EXPECT_EQ(monthly[1].period_start_us, kNov23 + 8 * kDay);   // 2026-12-01
  EXPECT_EQ(Sum(monthly), Sum(hourly));

  // [from, to) by interval start.
  q.from_us = kNov23 + 60 * kS;
  q.to_us = kNov23 + kDay;
  ASSERT_OK_AND_ASSIGN(std::vector<UsageReportRow> window, store_->QueryUsage(q));
  ASSERT_EQ(window.size(), 1u);
  EXPECT_EQ(window[0].totals.intervals, 2);

  // Every tenant at depth 2, one day: acme/ml (alice), acme/mlx, acme/ops, globex.
  UsageQuery d;
  d.tenant_depth = 2;
  d.to_us = kNov23 + kDay;
  ASSERT_OK_AND_ASSIGN(std::vector<UsageReportRow> by_project, store_->QueryUsage(d));
  std::vector<std::string> tenants;
  for (const UsageReportRow& r : by_project) tenants.push_back(r.tenant);
  EXPECT_EQ(tenants, (std::vector<std::string>{"acme/ml", "acme/mlx", "acme/ops", "globex"}));
  const UsageReportRow& gx = by_project.back();
  EXPECT_EQ(gx.pool, "gpu-b");
  EXPECT_EQ(gx.model, "A100-80GB");
  EXPECT_EQ(gx.priority_class, "high");
  EXPECT_EQ(gx.mig_profile, "3g.40gb");
  EXPECT_EQ(gx.totals.mig_instance_seconds, 10);
  EXPECT_EQ(gx.totals.slot_seconds, 20);

  // Exact filters.
  UsageQuery f;
  f.pool = "gpu-b";
  ASSERT_OK_AND_ASSIGN(std::vector<UsageReportRow> b, store_->QueryUsage(f));
  ASSERT_EQ(b.size(), 1u);
  f = {};
  f.model = "H100-SXM";
  f.priority_class = "normal";
  ASSERT_OK_AND_ASSIGN(std::vector<UsageReportRow> h, store_->QueryUsage(f));
  EXPECT_EQ(Sum(h).intervals, 7);
  f.priority_class = "high";
  ASSERT_OK_AND_ASSIGN(std::vector<UsageReportRow> none, store_->QueryUsage(f));
  EXPECT_TRUE(none.empty());
}

TEST_P(StoreConformanceTest, RecoverGivesTheMarksOfActiveAttempts) {
  JobRecord j = SampleJob(7, 3);  // tasks SCHEDULED, attempt 1
  j.tasks[2].state = TaskState::kSucceeded;
  ASSERT_OK(ApplyAndWait(*store_, {UpsertPool{SamplePool(j.spec.pool)}, InsertJob{j}}));
  ASSERT_OK(ApplyAndWait(
      *store_, {AppendUsage{{Row(7, 0, 0, kNov23, kNov23 + 60 * kS, "a"),  // an older attempt
                             Row(7, 0, 1, kNov23 + 60 * kS, kNov23 + 120 * kS, "a"),
                             Row(7, 0, 1, kNov23 + 120 * kS, kNov23 + 180 * kS, "a"),
                             Row(7, 2, 1, kNov23, kNov23 + 60 * kS, "a")}}}));
  ASSERT_OK_AND_ASSIGN(RecoveredState s, store_->Recover());
  // Task 0's attempt 1 resumes at 180 s; task 1 has no rows; task 2 has ended.
  EXPECT_EQ(s.usage_marks, (std::vector<UsageMark>{{7, 0, 1, kNov23 + 180 * kS}}));
}

TEST_P(StoreConformanceTest, RollUpKeepsWholeDayTotals) {
  JobRecord j = SampleJob(9, 1);  // task 0 SCHEDULED, attempt 1: its rows stay
  ASSERT_OK(ApplyAndWait(*store_, {UpsertPool{SamplePool(j.spec.pool)}, InsertJob{j}}));
  std::vector<UsageInterval> rows;
  for (int i = 0; i < 30; ++i) {  // ended attempts over three days, 20 minutes apart
    UsageInterval u = Row(100 + i, 0, 0, kNov23 + i * 2 * kHour + i * 40 * 60 * kS,
                          kNov23 + i * 2 * kHour + i * 40 * 60 * kS + 45 * kS,
                          i % 2 == 0 ? "acme/ml" : "acme/ops", 100 + i);
    u.end = AttemptEnd::kSucceeded;
    u.totals.peak_memory_bytes = i;
    rows.push_back(u);
  }
  rows.push_back(Row(9, 0, 1, kNov23, kNov23 + 60 * kS, "acme/ml"));
  ASSERT_OK(ApplyAndWait(*store_, {AppendUsage{rows}}));
  UsageQuery q;
  q.period = UsagePeriod::kDay;
  ASSERT_OK_AND_ASSIGN(std::vector<UsageReportRow> before, store_->QueryUsage(q));
  q.period = UsagePeriod::kMonth;
  ASSERT_OK_AND_ASSIGN(std::vector<UsageReportRow> month_before, store_->QueryUsage(q));

  EXPECT_EQ(ApplyAndWait(*store_, {RollUpUsage{kNov23 + 5}}).code(), StatusCode::kInvalidArgument);
  ASSERT_OK(ApplyAndWait(*store_, {RollUpUsage{kNov23 + 2 * kDay}}));
  ASSERT_OK(ApplyAndWait(*store_, {RollUpUsage{kNov23 + 2 * kDay}}));  // nothing left to move
  q.period = UsagePeriod::kDay;
  ASSERT_OK_AND_ASSIGN(std::vector<UsageReportRow> after, store_->QueryUsage(q));
  EXPECT_EQ(after, before);  // same groups, same sums, same interval counts
  q.period = UsagePeriod::kMonth;
  ASSERT_OK_AND_ASSIGN(std::vector<UsageReportRow> month_after, store_->QueryUsage(q));
  EXPECT_EQ(month_after, month_before);
  // The active attempt's row stayed in the ledger: its mark is still there.
  ASSERT_OK_AND_ASSIGN(RecoveredState s, store_->Recover());
  EXPECT_EQ(s.usage_marks, (std::vector<UsageMark>{{9, 0, 1, kNov23 + 60 * kS}}));
  // Intervals stored after a roll-up add to the day's totals.
  UsageInterval late = Row(200, 0, 0, kNov23 + 3 * kHour, kNov23 + 3 * kHour + 10 * kS, "acme/ml");
  ASSERT_OK(ApplyAndWait(*store_, {AppendUsage{{late}}, RollUpUsage{kNov23 + 2 * kDay}}));
  ASSERT_OK_AND_ASSIGN(std::vector<UsageReportRow> later, store_->QueryUsage(q));
  EXPECT_EQ(Sum(later).milli_tflops_seconds, Sum(month_before).milli_tflops_seconds + 500 * 10);
}

// Preemption credits (docs/billing.md): with split_preempted, every interval of an attempt whose
// last interval ended PREEMPTED is reported apart — its earlier intervals too, and an empty last
// row (an attempt preempted right on a boundary) marks the attempt all the same. A roll-up into
// daily rows keeps the split.
TEST_P(StoreConformanceTest, UsageReportSplitsPreemptedAttempts) {
  // Job 1 attempt 0: 60 s + 60 s + 30 s, preempted. 500 milli-TFLOPS/s: 75,000 in all.
  UsageInterval a0 = Row(1, 0, 0, kNov23, kNov23 + 60 * kS, "acme/ml");
  UsageInterval a1 = Row(1, 0, 0, kNov23 + 60 * kS, kNov23 + 120 * kS, "acme/ml");
  UsageInterval a2 = Row(1, 0, 0, kNov23 + 120 * kS, kNov23 + 150 * kS, "acme/ml");
  a2.end = AttemptEnd::kPreempted;
  // Its requeued attempt 1: 60 s + 10 s, succeeded: 35,000.
  UsageInterval b0 = Row(1, 0, 1, kNov23 + 180 * kS, kNov23 + 240 * kS, "acme/ml");
  UsageInterval b1 = Row(1, 0, 1, kNov23 + 240 * kS, kNov23 + 250 * kS, "acme/ml");
  b1.end = AttemptEnd::kSucceeded;
  // Job 2: 60 s, then preempted on the boundary (an empty last row): 30,000 at 500.
  UsageInterval c0 = Row(2, 0, 0, kNov23, kNov23 + 60 * kS, "acme/ml");
  UsageInterval c1 = Row(2, 0, 0, kNov23 + 60 * kS, kNov23 + 60 * kS, "acme/ml");
  c1.end = AttemptEnd::kPreempted;
  // Job 3: 60 s, lost with its node (not credited): 60,000 at 1000.
  UsageInterval d0 = Row(3, 0, 0, kNov23, kNov23 + 60 * kS, "acme/ml", 1000);
  d0.end = AttemptEnd::kLost;
  ASSERT_OK(ApplyAndWait(*store_, {AppendUsage{{a0, a1, a2, b0, b1, c0, c1, d0}}}));

  UsageQuery q;
  q.period = UsagePeriod::kDay;
  ASSERT_OK_AND_ASSIGN(std::vector<UsageReportRow> whole, store_->QueryUsage(q));
  ASSERT_EQ(whole.size(), 1u);
  EXPECT_FALSE(whole[0].preempted);
  EXPECT_EQ(whole[0].totals.milli_tflops_seconds, 75'000 + 35'000 + 30'000 + 60'000);

  q.split_preempted = true;
  ASSERT_OK_AND_ASSIGN(std::vector<UsageReportRow> split, store_->QueryUsage(q));
  ASSERT_EQ(split.size(), 2u);
  EXPECT_FALSE(split[0].preempted);  // not preempted first
  EXPECT_EQ(split[0].totals.milli_tflops_seconds, 35'000 + 60'000);
  EXPECT_EQ(split[0].totals.intervals, 3);
  EXPECT_TRUE(split[1].preempted);
  EXPECT_EQ(split[1].totals.milli_tflops_seconds, 75'000 + 30'000);
  EXPECT_EQ(split[1].totals.vram_mib_seconds, 1024 * (150 + 60));
  EXPECT_EQ(split[1].totals.intervals, 5);

  // Rolled up into daily rows (no task of these attempts is active): the split is unchanged.
  ASSERT_OK(ApplyAndWait(*store_, {RollUpUsage{kNov23 + kDay}}));
  ASSERT_OK_AND_ASSIGN(std::vector<UsageReportRow> rolled, store_->QueryUsage(q));
  EXPECT_EQ(rolled, split);
  q.split_preempted = false;
  ASSERT_OK_AND_ASSIGN(std::vector<UsageReportRow> rolled_whole, store_->QueryUsage(q));
  EXPECT_EQ(rolled_whole, whole);
}

// Services (docs/services.md, "Billing"): a replica's intervals carry its service's name, the
// report groups by it (after the MIG profile, before the preempted split) with jobs under "",
// and a roll-up into daily rows keeps each service's totals apart.
TEST_P(StoreConformanceTest, UsageReportGroupsByServiceAndRollUpsKeepIt) {
  UsageInterval job = Row(1, 0, 0, kNov23, kNov23 + 60 * kS, "acme/ml");
  job.end = AttemptEnd::kSucceeded;
  UsageInterval chat0 = Row(2, 0, 0, kNov23, kNov23 + 60 * kS, "acme/ml", 250);
  chat0.service = "chat";
  UsageInterval chat1 = Row(3, 0, 0, kNov23 + 60 * kS, kNov23 + 100 * kS, "acme/ml", 250);
  chat1.service = "chat";
  chat1.end = AttemptEnd::kCancelled;
  UsageInterval embed = Row(4, 0, 0, kNov23, kNov23 + 30 * kS, "acme/ml", 1000);
  embed.service = "embed";
  embed.end = AttemptEnd::kPreempted;
  ASSERT_OK(ApplyAndWait(*store_, {AppendUsage{{job, chat0, chat1, embed}}}));

  UsageQuery q;
  q.period = UsagePeriod::kDay;
  ASSERT_OK_AND_ASSIGN(std::vector<UsageReportRow> rows, store_->QueryUsage(q));
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].service, "");  // jobs first, then services by name
  EXPECT_EQ(rows[0].totals.milli_tflops_seconds, 500 * 60);
  EXPECT_EQ(rows[1].service, "chat");
  EXPECT_EQ(rows[1].totals.milli_tflops_seconds, 250 * (60 + 40));
  EXPECT_EQ(rows[1].totals.intervals, 2);
  EXPECT_EQ(rows[2].service, "embed");
  EXPECT_EQ(rows[2].totals.milli_tflops_seconds, 1000 * 30);

  q.split_preempted = true;
  ASSERT_OK_AND_ASSIGN(std::vector<UsageReportRow> split, store_->QueryUsage(q));
  ASSERT_EQ(split.size(), 3u);
  EXPECT_EQ(split[2].service, "embed");
  EXPECT_TRUE(split[2].preempted);

  ASSERT_OK(ApplyAndWait(*store_, {RollUpUsage{kNov23 + kDay}}));
  ASSERT_OK_AND_ASSIGN(std::vector<UsageReportRow> rolled, store_->QueryUsage(q));
  EXPECT_EQ(rolled, split);
  q.split_preempted = false;
  ASSERT_OK_AND_ASSIGN(std::vector<UsageReportRow> rolled_whole, store_->QueryUsage(q));
  EXPECT_EQ(rolled_whole, rows);
}

}  // namespace
}  // namespace gpupool::testing
