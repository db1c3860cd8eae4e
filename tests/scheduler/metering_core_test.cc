// The usage ledger inside the core (in-memory store, injected clock): retention forgets a
// finished job but never its usage; the core's roll-up moves old intervals into daily rows
// without changing the totals; the usage counters on /metrics count each stored interval once,
// labelled with the tenant cut to metering.metrics_tenant_depth; metering switched off writes
// nothing.
#include <gtest/gtest.h>
#include <prometheus/registry.h>

#include <map>
#include <string>

#include "scheduler/metrics.h"
#include "tests/scheduler/core_harness.h"

namespace gpupool::testing {
namespace {

constexpr int64_t kDay = 24 * 3600 * kSecond;
// 2026-11-23 00:00:00.5 UTC.
constexpr int64_t kT0 = 1'795'392'000 * kSecond + 500'000;

UsageTotals Total(MemoryStore& store, UsageQuery q = {}) {
  auto rows = store.QueryUsage(q);
  EXPECT_TRUE(rows.ok()) << rows.status().ToString();
  UsageTotals t;
  if (rows.ok())
    for (const UsageReportRow& r : *rows) t += r.totals;
  return t;
}

// Runs one whole H100 for `seconds` (ticking every 10 s), then ends it SUCCEEDED.
int64_t RunOneGpu(CoreHarness& h, int64_t seconds) {
  Result<JobRecord> j = h.Submit(CoreHarness::Whole("gpu", 1));
  EXPECT_TRUE(j.ok());
  h.RunStarted();
  for (int64_t s = 0; s < seconds; s += 10) {
    h.clock.Advance(10 * kSecond);
    h.core->OnHeartbeat("n0", {});
    h.core->Tick();
    h.Drain();
  }
  h.Report("n0", j->id, 0, TaskState::kSucceeded);
  return j->id;
}

double Counter(prometheus::Registry& registry, const std::string& name, const std::string& tenant) {
  for (const prometheus::MetricFamily& f : registry.Collect()) {
    if (f.name != name) continue;
    for (const prometheus::ClientMetric& m : f.metric) {
      std::map<std::string, std::string> labels;
      for (const prometheus::ClientMetric::Label& l : m.label) labels[l.name] = l.value;
      if (labels["tenant"] == tenant && labels["pool"] == "gpu") return m.counter.value;
    }
  }
  return -1;
}

TEST(MeteringCore, RetentionForgetsTheJobButNotItsUsage) {
  SchedulerOptions o = SchedulerOptions::Defaults();
  o.job_retention_ms = 60'000;
  CoreHarness h(o, nullptr, nullptr, kT0);
  ASSERT_TRUE(h.CreatePool("gpu").ok());
  ASSERT_TRUE(h.Register("n0", "gpu", 1).ok());
  const int64_t job = RunOneGpu(h, 300);
  // 300 s of one device, 989 TFLOPS, 81920 MiB.
  EXPECT_EQ(Total(*h.store).device_seconds, 300);
  EXPECT_EQ(Total(*h.store).milli_tflops_seconds, 989'000 * 300);
  h.clock.Advance(120 * kSecond);
  h.core->Tick();
  h.Drain();
  EXPECT_EQ(h.core->GetJob(job).status().code(), StatusCode::kNotFound);  // forgotten
  UsageTotals t = Total(*h.store);
  EXPECT_EQ(t.device_seconds, 300);
  EXPECT_EQ(t.vram_mib_seconds, 81'920 * 300);
}

TEST(MeteringCore, RollUpAfterDaysKeepsTotals) {
  SchedulerOptions o = SchedulerOptions::Defaults();
  o.metering.rollup_after_days = 1;
  o.job_retention_ms = 0;  // the harness's RunStarted looks at every job started so far
  CoreHarness h(o, nullptr, nullptr, kT0);
  ASSERT_TRUE(h.CreatePool("gpu").ok());
  ASSERT_TRUE(h.Register("n0", "gpu", 1).ok());
  RunOneGpu(h, 600);  // day 0: ten 60-s intervals and the first partial one
  UsageQuery month;
  month.period = UsagePeriod::kMonth;
  const UsageTotals before = Total(*h.store, month);
  EXPECT_EQ(before.device_seconds, 600);
  EXPECT_GT(before.intervals, 10);
  // Two days later a tick rolls day 0 up (intervals older than one whole day).
  h.clock.Advance(2 * kDay);
  h.core->OnHeartbeat("n0", {});
  h.core->Tick();
  h.Drain();
  EXPECT_EQ(Total(*h.store, month), before);
  UsageQuery day0;
  day0.from_us = kT0 / kDay * kDay;
  day0.to_us = day0.from_us + kDay;
  EXPECT_EQ(Total(*h.store, day0), before);
  // The next one runs on day 2 and stays in the ledger beside the daily row.
  RunOneGpu(h, 60);
  EXPECT_EQ(Total(*h.store, month).device_seconds, 660);
}

// A service's replica is a job the controller marks with the service (JobSpec::service_name):
// its intervals carry the name, so the report (and an invoice) gives the service its own rows
// beside the tenant's jobs.
TEST(MeteringCore, AReplicasUsageIsReportedUnderItsService) {
  CoreHarness h(SchedulerOptions::Defaults(), nullptr, nullptr, kT0);
  ASSERT_TRUE(h.CreatePool("gpu").ok());
  ASSERT_TRUE(h.Register("n0", "gpu", 2).ok());
  JobSpec replica = CoreHarness::Whole("gpu", 1);
  replica.service_id = 7;
  replica.service_generation = 1;
  replica.service_name = "chat";
  Result<JobRecord> r = h.Submit(replica);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  Result<JobRecord> j = h.Submit(CoreHarness::Whole("gpu", 1));
  ASSERT_TRUE(j.ok());
  h.RunStarted();
  for (int s = 0; s < 120; s += 10) {
    h.clock.Advance(10 * kSecond);
    h.core->OnHeartbeat("n0", {});
    h.core->Tick();
    h.Drain();
  }
  h.Report("n0", r->id, 0, TaskState::kSucceeded);
  h.clock.Advance(30 * kSecond);
  h.Report("n0", j->id, 0, TaskState::kSucceeded);
  auto rows = h.store->QueryUsage({});
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  ASSERT_EQ(rows->size(), 2u);
  EXPECT_EQ((*rows)[0].service, "");
  EXPECT_EQ((*rows)[0].totals.device_seconds, 150);
  EXPECT_EQ((*rows)[1].service, "chat");
  EXPECT_EQ((*rows)[1].totals.device_seconds, 120);
}

TEST(MeteringCore, UsageCountersByTenantAtDepth) {
  auto registry = std::make_shared<prometheus::Registry>();
  SchedulerMetrics metrics(registry, "test");
  CoreHarness h(SchedulerOptions::Defaults(), nullptr, &metrics, kT0);
  ASSERT_TRUE(h.CreatePool("gpu").ok());
  ASSERT_TRUE(h.Register("n0", "gpu", 1).ok());
  RunOneGpu(h, 130);
  // The harness's tenant is acme/research/alice; depth 2 by default.
  EXPECT_EQ(Counter(*registry, "gpupool_usage_device_seconds_total", "acme/research"), 130);
  EXPECT_EQ(Counter(*registry, "gpupool_usage_tflops_seconds_total", "acme/research"), 989 * 130);
  EXPECT_EQ(Counter(*registry, "gpupool_usage_vram_gib_seconds_total", "acme/research"), 80 * 130);
  EXPECT_EQ(Counter(*registry, "gpupool_usage_device_seconds_total", "acme/research/alice"), -1);
  EXPECT_EQ(Counter(*registry, "gpupool_usage_intervals_total", "acme/research"),
            static_cast<double>(Total(*h.store).intervals));
}

TEST(MeteringCore, SwitchedOffWritesNothing) {
  SchedulerOptions o = SchedulerOptions::Defaults();
  o.metering.enabled = false;
  CoreHarness h(o, nullptr, nullptr, kT0);
  ASSERT_TRUE(h.CreatePool("gpu").ok());
  ASSERT_TRUE(h.Register("n0", "gpu", 1).ok());
  RunOneGpu(h, 130);
  EXPECT_EQ(Total(*h.store).intervals, 0);
}

}  // namespace
}  // namespace gpupool::testing
