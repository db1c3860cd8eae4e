// The metering arithmetic (scheduler/metering.h), written out: rates from allocations, spans cut
// at interval boundaries into whole seconds that telescope, and the book of marks that counts
// every stored row once.
#include "scheduler/metering.h"

#include <gtest/gtest.h>

namespace gpupool {
namespace {

constexpr int64_t kS = 1'000'000;

TEST(MeteringRates, FractionalOnAnOvercommittedPool) {
  // An H100 (989 TFLOPS, 81920 MiB) offered at 2× compute and 1.5× memory: 1978 TFLOPS and
  // 122880 MiB. A slice of 300 TFLOPS / 61440 MiB is backed by 300 × 989/1978 = 150 physical
  // TFLOPS. Holding 60 GiB of an 80 GiB GPU spills nothing: spill is what the node measures when
  // allocations outgrow the device (Split), never a share of what is held (the old figure here,
  // 20480 MiB, was physically false).
  MeteredDevice h100{"H100-SXM", "", Resources{989'000, 81'920}};
  std::vector<Allocation> a{{"GPU-0", Resources{300'000, 61'440}, 0, false}};
  std::string model, profile;
  UsageTotals r = RatesOf(
      a, Ratio{2000}, Ratio{1500},
      [&](const std::string&) -> const MeteredDevice* { return &h100; }, &model, &profile);
  EXPECT_EQ(model, "H100-SXM");
  EXPECT_EQ(profile, "");
  EXPECT_EQ(r.milli_tflops_seconds, 300'000);
  EXPECT_EQ(r.physical_milli_tflops_seconds, 150'000);
  EXPECT_EQ(r.vram_mib_seconds, 61'440);
  EXPECT_EQ(r.spill_mib_seconds, 0);
  EXPECT_EQ(r.device_seconds, 0);
}

TEST(MeteringRates, WholeDevicesAndMigInstances) {
  MeteredDevice a100{"A100-SXM4-80GB", "", Resources{312'000, 81'920}};
  MeteredDevice h100{"H100-SXM", "", Resources{989'000, 81'920}};
  MeteredDevice mig{"A100-SXM4-80GB", "3g.40gb", Resources{156'000, 40'960}};
  auto lookup = [&](const std::string& id) -> const MeteredDevice* {
    if (id == "a") return &a100;
    if (id == "h") return &h100;
    if (id == "m") return &mig;
    return nullptr;
  };
  std::string model, profile;
  UsageTotals whole = RatesOf({{"a", a100.physical, 0, true}, {"h", h100.physical, 0, true}},
                              Ratio{1000}, Ratio{1000}, lookup, &model, &profile);
  EXPECT_EQ(model, "A100-SXM4-80GB+H100-SXM");  // distinct models, sorted, joined
  EXPECT_EQ(whole.device_seconds, 2);
  EXPECT_EQ(whole.milli_tflops_seconds, 312'000 + 989'000);
  EXPECT_EQ(whole.physical_milli_tflops_seconds, 312'000 + 989'000);
  EXPECT_EQ(whole.spill_mib_seconds, 0);
  UsageTotals m =
      RatesOf({{"m", mig.physical, 0, true}}, Ratio{1000}, Ratio{1000}, lookup, &model, &profile);
  EXPECT_EQ(profile, "3g.40gb");
  EXPECT_EQ(m.mig_instance_seconds, 1);
  EXPECT_EQ(m.device_seconds, 0);  // a MIG instance is not a whole device
  // Time-slice slots (issue 27): a slot of a sliced GPU or MIG instance is a slot-second, not a
  // device- or instance-second; its share is metered as TFLOPS and VRAM like any slice, and the
  // instance's profile still names the row.
  UsageTotals slots = RatesOf(
      {{"m", Resources{78'000, 20'480}, 1, false}, {"h", Resources{247'250, 20'480}, 1, false}},
      Ratio{1000}, Ratio{1000}, lookup, &model, &profile);
  EXPECT_EQ(profile, "3g.40gb");
  EXPECT_EQ(slots.slot_seconds, 2);
  EXPECT_EQ(slots.mig_instance_seconds, 0);
  EXPECT_EQ(slots.device_seconds, 0);
  EXPECT_EQ(slots.milli_tflops_seconds, 78'000 + 247'250);
  EXPECT_EQ(slots.vram_mib_seconds, 2 * 20'480);
  // An unknown device: its model says so, and what it holds counts as physical.
  UsageTotals u = RatesOf({{"gone", Resources{1000, 10}, 0, false}}, Ratio{2000}, Ratio{2000},
                          lookup, &model, &profile);
  EXPECT_EQ(model, "unknown");
  EXPECT_EQ(u.physical_milli_tflops_seconds, 1000);
}

TEST(MeteringSplit, CutsAtBoundariesAndTelescopes) {
  UsageInterval rates;
  rates.totals.milli_tflops_seconds = 500;
  rates.totals.vram_mib_seconds = 1024;
  // [10.25 s, 135.75 s) with 60-s intervals: [10.25, 60), [60, 120), [120, 135.75).
  const int64_t from = 10 * kS + 250'000, to = 135 * kS + 750'000;
  std::vector<UsageInterval> rows = Split(rates, from, to, 60 * kS);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].start_us, from);
  EXPECT_EQ(rows[0].end_us, 60 * kS);
  EXPECT_EQ(rows[1].start_us, 60 * kS);
  EXPECT_EQ(rows[2].end_us, to);
  // Whole seconds between floored ends: 60 − 10 = 50, 60, 135 − 120 = 15; total 125 = 135 − 10.
  EXPECT_EQ(rows[0].totals.milli_tflops_seconds, 500 * 50);
  EXPECT_EQ(rows[1].totals.milli_tflops_seconds, 500 * 60);
  EXPECT_EQ(rows[2].totals.milli_tflops_seconds, 500 * 15);
  EXPECT_EQ(rows[2].totals.vram_mib_seconds, 1024 * 15);
  for (const UsageInterval& r : rows) EXPECT_EQ(r.end, AttemptEnd::kNone);
  // Closing in two steps gives the same rows.
  std::vector<UsageInterval> a = Split(rates, from, 120 * kS, 60 * kS);
  std::vector<UsageInterval> b = Split(rates, 120 * kS, to, 60 * kS);
  a.insert(a.end(), b.begin(), b.end());
  EXPECT_EQ(a, rows);
}

TEST(MeteringSplit, TheLastRowSaysHowTheAttemptEnded) {
  UsageInterval rates;
  rates.totals.device_seconds = 2;
  std::vector<UsageInterval> rows =
      Split(rates, 30 * kS, 70 * kS, 60 * kS, AttemptEnd::kPreempted, {4'000'000, 1 << 30, 0, 7});
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].end, AttemptEnd::kNone);
  EXPECT_EQ(rows[0].totals.cpu_usage_us, 0);
  EXPECT_EQ(rows[0].totals.spill_mib_seconds, 0);
  EXPECT_EQ(rows[1].totals.spill_mib_seconds, 7);  // what the node measured, once
  EXPECT_EQ(rows[1].end, AttemptEnd::kPreempted);
  EXPECT_EQ(rows[1].totals.device_seconds, 20);
  EXPECT_EQ(rows[1].totals.cpu_usage_us, 4'000'000);
  EXPECT_EQ(rows[1].totals.peak_memory_bytes, 1 << 30);
  // Ended exactly on a boundary that was already closed: one empty row still carries the end.
  rows = Split(rates, 120 * kS, 120 * kS, 60 * kS, AttemptEnd::kSucceeded);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].start_us, rows[0].end_us);
  EXPECT_EQ(rows[0].totals.device_seconds, 0);
  EXPECT_EQ(rows[0].end, AttemptEnd::kSucceeded);
}

UsageInterval At(int32_t attempt, int64_t start_s, int64_t end_s,
                 AttemptEnd end = AttemptEnd::kNone) {
  UsageInterval u;
  u.job_id = 1;
  u.attempt = attempt;
  u.start_us = start_s * kS;
  u.end_us = end_s * kS;
  u.end = end;
  return u;
}

TEST(UsageMeterBook, MarksMoveWhenStoredAndEveryRowCountsOnce) {
  UsageMeter m;
  const TaskKey k{1, 0};
  EXPECT_EQ(m.Mark(k, 0, 5 * kS), 5 * kS);  // nothing stored: the attempt's start
  m.SetInFlight(k, 0, 5 * kS);
  EXPECT_TRUE(m.InFlight(k));
  int counted = 0;
  auto count = [&](const UsageInterval&) { ++counted; };
  m.Stored({At(0, 5, 60)}, count);
  EXPECT_FALSE(m.InFlight(k));
  EXPECT_EQ(m.Mark(k, 0, 5 * kS), 60 * kS);
  EXPECT_EQ(counted, 1);
  // The attempt ends while a periodic batch [60, 120) is in flight: its last rows repeat it.
  m.SetInFlight(k, 0, 60 * kS);
  m.Stored({At(0, 60, 120), At(0, 120, 130, AttemptEnd::kSucceeded)}, count);
  EXPECT_EQ(counted, 3);
  EXPECT_EQ(m.size(), 0u);            // the attempt is over
  m.Stored({At(0, 60, 120)}, count);  // the late periodic batch: stored twice, counted once
  EXPECT_EQ(counted, 3);
  // After a restart the marks come from the store.
  m.Load({{1, 0, 1, 240 * kS}});
  EXPECT_EQ(m.Mark(k, 1, 200 * kS), 240 * kS);
  EXPECT_EQ(m.Mark(k, 2, 300 * kS), 300 * kS);  // another attempt starts afresh
}

}  // namespace
}  // namespace gpupool
