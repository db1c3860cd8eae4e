// Recent workload (twin/recent_workload.h): a live pool's history and snapshots as a twin
// replay — arrivals, durations (censored at now for running and waiting tasks), request shapes in
// units of the pool's largest GPU, tenants with ancestors, quotas as shares, the live config —
// and a candidate change, with the expected numbers written out.
#include "twin/recent_workload.h"

#include <gtest/gtest.h>

#include "pool/catalog.h"
#include "pool/mig_layout.h"
#include "tests/support/status_macros.h"
#include "twin/twin.h"

namespace gpupool::twin {
namespace {

constexpr int64_t kS = 1'000'000;
constexpr int64_t kFrom = 1'800'000'000 * kS;  // the window's start
constexpr int64_t kNow = kFrom + 3600 * kS;    // an hour later

QuotaAmount Devices(int32_t n) {
  QuotaAmount a;
  a.devices = n;
  return a;
}

ResourceRequest Frac(int64_t milli_tflops, int64_t vram_mib) {
  ResourceRequest r;
  r.fractional = {milli_tflops, vram_mib};
  return r;
}

ResourceRequest Whole(int32_t gpus, std::vector<std::string> models = {}) {
  ResourceRequest r;
  r.shape = RequestShape::kWholeGpus;
  r.gpu_count = gpus;
  r.models = std::move(models);
  return r;
}

ResourceRequest Named(RequestShape shape, const std::string& name) {
  ResourceRequest r;
  r.shape = shape;
  (shape == RequestShape::kSku ? r.sku : r.mig_profile) = name;
  return r;
}

// A device as a snapshot shows it: in the node's record (every device its agent reported) and,
// unless it is a GPU in MIG mode, in placement's list.
void Add(NodeView* v, const DeviceRecord& d) {
  v->node.devices.push_back(d);
  if (d.mig_enabled) return;
  DeviceView dv;
  dv.device = d;
  v->devices.push_back(dv);
}

NodeView Node(const std::string& name, int gpus, Resources physical, const std::string& model) {
  NodeView v;
  v.node.name = name;
  v.node.pool = "gpu-a";
  v.node.cpu_milli = 64'000;
  v.node.memory_mib = 512 * 1024;
  for (int i = 0; i < gpus; ++i) {
    DeviceRecord d;
    d.id = name + "-GPU-" + std::to_string(i);
    d.model = model;
    d.index = i;
    d.physical = physical;
    Add(&v, d);
  }
  return v;
}

LivePool Live() {
  LivePool live;
  live.pool.name = "gpu-a";
  live.pool.placement_strategy = "best-fit";
  live.pool.compute_overcommit = Ratio{1500};
  // 2 GPUs of 400 TFLOPS / 80 GiB and 2 smaller ones: the unit is the larger GPU.
  live.nodes = {Node("n1", 2, {400'000, 81'920}, "H100"), Node("n2", 2, {200'000, 40'960}, "L40")};
  DeviceRecord mig;
  mig.id = "n2-MIG-0";
  mig.mig_profile = "1g.10gb";
  Add(&live.nodes[1], mig);  // MIG instances are not GPUs of the replay
  QuotaRecord q;
  q.tenant = "acme/ml";
  q.pool = "gpu-a";
  q.guaranteed.resources.milli_tflops = 400'000;  // one unit of four: 25 %
  q.limit.devices = 3;                            // three units: 75 %
  QuotaRecord elsewhere = q;
  elsewhere.pool = "gpu-b";
  elsewhere.tenant = "globex";
  live.quotas = {q, elsewhere};
  live.tenants = {"acme", "acme/ml", "acme/web", "globex"};
  live.scheduler.skus["medium"] = Sku{"medium", Whole(2)};
  live.from_us = kFrom;
  live.to_us = kNow;
  return live;
}

PoolHistoryTask Row(int64_t job, int64_t submit_s, int64_t start_s, int64_t end_s,
                    ResourceRequest request, const std::string& tenant = "acme/web") {
  PoolHistoryTask t;
  t.job_id = job;
  t.tenant = tenant;
  t.priority_class = "high";
  t.request = std::move(request);
  t.submit_us = kFrom + submit_s * kS;
  t.started_us = start_s < 0 ? 0 : kFrom + start_s * kS;
  t.finished_us = end_s < 0 ? 0 : kFrom + end_s * kS;
  return t;
}

PoolHistory History() {
  PoolHistory h;
  h.tasks = {
      // Ended: 100 s. 100 TFLOPS of 400 is 250 ‰; 30 GiB of 80 is 375 ‰: the larger wins.
      Row(1, 10, 20, 120, Frac(100'000, 30'720), "acme/ml"),
      // Running since t = 600 s: censored at now, 3000 s.
      Row(2, 500, 600, -1, Whole(2, {"H100"})),
      // Waiting since t = 3000 s: censored, 600 s.
      Row(3, 3000, -1, -1, Named(RequestShape::kSku, "medium")),
      // Cancelled before it started: left out.
      Row(4, 3100, -1, 3200, Frac(1000, 1000)),
      // MIG: left out.
      Row(5, 3300, 3300, 3400, Named(RequestShape::kMig, "1g.10gb")),
      // Ended within 0.2 s: at least 1 s.
      Row(6, 3500, 3500, 3500, Frac(400'000, 81'920)),
  };
  h.truncated = true;
  return h;
}

TEST(RecentWorkloadTest, HistoryBecomesAReplayOfThePool) {
  ASSERT_OK_AND_ASSIGN(RecentWorkload r, ExtractRecentWorkload(History(), Live()));
  const Workload& w = r.workload;
  EXPECT_EQ(w.gpu, (Resources{400'000, 81'920}));
  ASSERT_EQ(w.nodes.size(), 2u);
  EXPECT_EQ(w.nodes[1].gpus, 2);  // the MIG instance is not counted
  EXPECT_EQ(w.nodes[1].model, "L40");
  EXPECT_EQ(w.nodes[1].device_ids, (std::vector<std::string>{"n2-GPU-0", "n2-GPU-1"}));
  EXPECT_EQ(w.GpuCount(), 4);

  ASSERT_EQ(w.tasks.size(), 4u);
  const TwinTask& a = w.tasks[0];
  EXPECT_EQ(a.name, "job1.0");
  EXPECT_EQ(a.arrival_us, 10 * kS);
  EXPECT_EQ(a.duration_us, 100 * kS);
  EXPECT_EQ(a.gpu_milli, 375);
  EXPECT_EQ(a.num_gpu, 1);
  EXPECT_EQ(a.tenant, "acme/ml");
  EXPECT_EQ(a.priority_class, "high");
  const TwinTask& b = w.tasks[1];
  EXPECT_EQ(b.duration_us, 3000 * kS);
  EXPECT_EQ(b.gpu_milli, 1000);
  EXPECT_EQ(b.num_gpu, 2);
  EXPECT_EQ(b.models, (std::vector<std::string>{"H100"}));
  const TwinTask& c = w.tasks[2];
  EXPECT_EQ(c.arrival_us, 3000 * kS);
  EXPECT_EQ(c.duration_us, 600 * kS);
  EXPECT_EQ(c.num_gpu, 2);  // the SKU's two whole GPUs
  const TwinTask& d = w.tasks[3];
  EXPECT_EQ(d.duration_us, 1 * kS);
  EXPECT_EQ(d.gpu_milli, 1000);  // a whole unit's worth of fraction

  EXPECT_EQ(r.stats.tasks, 4);
  EXPECT_EQ(r.stats.running_censored, 1);
  EXPECT_EQ(r.stats.pending_censored, 1);
  EXPECT_EQ(r.stats.never_ran, 1);
  EXPECT_EQ(r.stats.unmodelled, 1);
  EXPECT_TRUE(r.stats.truncated);

  // Tenants with their ancestors, parents first; only this pool's quotas.
  ASSERT_EQ(r.org.tenants.size(), 3u);
  EXPECT_EQ(r.org.tenants[0].path, "acme");
  EXPECT_EQ(r.org.tenants[1].path, "acme/ml");
  EXPECT_EQ(r.org.tenants[1].guaranteed_pct_milli, 25'000);
  EXPECT_EQ(r.org.tenants[1].limit_pct_milli, 75'000);
  EXPECT_EQ(r.org.tenants[2].path, "acme/web");
  EXPECT_FALSE(r.org.tenants[2].HasQuota());

  EXPECT_EQ(r.baseline.pool, "gpu-a");
  EXPECT_EQ(r.baseline.strategy, "best-fit");
  EXPECT_EQ(r.baseline.compute_overcommit_permille, 1500);
  EXPECT_EQ(r.baseline.horizon_us, 3600 * kS);
  EXPECT_TRUE(r.baseline.preemption);
}

TEST(RecentWorkloadTest, APoolWithoutGpusIsRefused) {
  LivePool live = Live();
  live.nodes.clear();
  Result<RecentWorkload> r = ExtractRecentWorkload(History(), live);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(r.status().message(), "pool: 'gpu-a' has no GPU to replay on (no node with a GPU)");
}

TEST(RecentWorkloadTest, QuotaSharesRoundUpAndStopAtTheWholePool) {
  const Resources unit{400'000, 81'920};
  EXPECT_EQ(QuotaPctMilli({.resources = {100'000, 0}}, unit, 4), 6'250);  // 100 of 1600
  EXPECT_EQ(QuotaPctMilli({.resources = {1, 0}}, unit, 4), 1);            // rounded up
  EXPECT_EQ(QuotaPctMilli({.resources = {0, 81'920}}, unit, 4), 25'000);  // VRAM of one unit
  EXPECT_EQ(QuotaPctMilli(Devices(8), unit, 4), 100'000);                 // capped
  EXPECT_EQ(QuotaPctMilli({}, unit, 4), 0);
}

TEST(RecentWorkloadTest, ACandidateChangesOnlyWhatItNames) {
  const LivePool live = Live();
  ASSERT_OK_AND_ASSIGN(RecentWorkload base, ExtractRecentWorkload(History(), live));
  ConfigChange change;
  change.strategy = "fgd-pack";
  change.preemption = false;
  change.quotas["acme/ml"].limit = QuotaAmount{.resources = {800'000, 0}};
  change.quotas["globex"].guaranteed = Devices(1);
  ASSERT_OK_AND_ASSIGN(RecentWorkload cand, ApplyChange(base, live, change));
  EXPECT_EQ(cand.baseline.label, "candidate");
  EXPECT_EQ(cand.baseline.strategy, "fgd-pack");
  EXPECT_FALSE(cand.baseline.preemption);
  EXPECT_EQ(cand.baseline.compute_overcommit_permille, 1500);  // unchanged
  ASSERT_NE(cand.org.Find("acme/ml"), nullptr);
  EXPECT_EQ(cand.org.Find("acme/ml")->guaranteed_pct_milli, 25'000);  // unchanged
  EXPECT_EQ(cand.org.Find("acme/ml")->limit_pct_milli, 50'000);
  ASSERT_NE(cand.org.Find("globex"), nullptr);  // a tenant without tasks gets its quota
  EXPECT_EQ(cand.org.Find("globex")->guaranteed_pct_milli, 25'000);
  EXPECT_EQ(cand.workload.tasks.size(), base.workload.tasks.size());
}

TEST(RecentWorkloadTest, BadChangesNameTheField) {
  const LivePool live = Live();
  ASSERT_OK_AND_ASSIGN(RecentWorkload base, ExtractRecentWorkload(History(), live));
  auto message = [&](ConfigChange c) {
    Result<RecentWorkload> r = ApplyChange(base, live, c);
    EXPECT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    return r.status().message();
  };
  ConfigChange strategy;
  strategy.strategy = "tetris";
  EXPECT_EQ(message(strategy), "strategy: unknown placement strategy 'tetris'");
  ConfigChange overcommit;
  overcommit.compute_overcommit_permille = 999;
  EXPECT_EQ(message(overcommit), "compute_overcommit: must be at least 1");
  ConfigChange unknown;
  unknown.quotas["initech"].limit = Devices(1);
  EXPECT_EQ(message(unknown), "quota: unknown tenant 'initech'");
  ConfigChange inverted;
  inverted.quotas["acme/ml"].guaranteed = Devices(4);
  EXPECT_EQ(message(inverted), "quota: tenant 'acme/ml': the guarantee exceeds the limit");
}

TEST(RecentWorkloadTest, BothReplaysRunOnTheExtractedWorkload) {
  const LivePool live = Live();
  ASSERT_OK_AND_ASSIGN(RecentWorkload base, ExtractRecentWorkload(History(), live));
  ASSERT_OK_AND_ASSIGN(TwinReport a, RunTwin(base.workload, base.org, base.baseline));
  EXPECT_EQ(a.tasks, 4);
  EXPECT_EQ(a.gpus, 4);
  EXPECT_EQ(a.quota_violations, 0);
  EXPECT_EQ(a.wait_by_class.at("high").count, 4);
  ConfigChange change;
  change.preemption = false;
  ASSERT_OK_AND_ASSIGN(RecentWorkload cand, ApplyChange(base, live, change));
  ASSERT_OK_AND_ASSIGN(TwinReport b, RunTwin(cand.workload, cand.org, cand.baseline));
  EXPECT_EQ(b.label, "candidate");
  EXPECT_FALSE(b.preemption);
  EXPECT_EQ(b.tasks, 4);
}

// A pool of one H100 in MIG mode (two 3g instances, re-partitionable) beside a whole H100, and
// a GPU in MIG mode of a model the catalog lacks.
LivePool MigLive() {
  const GpuModel& h100 = *Catalog::Builtin().Find("H100-SXM");
  const Resources physical{h100.ComputeMilliTflops(), h100.vram_mib};
  LivePool live = Live();
  live.pool.mig_relayout = MigRelayout::kIdle;
  // In MIG mode: m1's first GPU (placement lists only its instances) and m2's only GPU.
  NodeView m1 = Node("m1", 0, physical, "H100-SXM"), m2 = Node("m2", 0, physical, "X9");
  for (auto [node, id] :
       {std::pair{&m1, "m1-GPU-0"}, std::pair{&m1, "m1-GPU-1"}, std::pair{&m2, "m2-GPU-0"}}) {
    DeviceRecord d;
    d.id = id;
    d.model = node == &m1 ? "H100-SXM" : "X9";
    d.index = static_cast<int32_t>(node->node.devices.size());
    d.physical = physical;
    d.mig_enabled = d.id != "m1-GPU-1";
    Add(node, d);
  }
  for (int start : {0, 4}) {
    DeviceRecord mig;
    mig.id = "m1-MIG-" + std::to_string(start);
    mig.model = "H100-SXM";
    mig.mig_profile = "3g.40gb";
    mig.mig_start = start;
    mig.parent_id = "m1-GPU-0";
    mig.physical = {h100.FindMig("3g.40gb")->milli_tflops, 40'960};
    Add(&m1, mig);
  }
  live.nodes = {m1, m2};
  return live;
}

TEST(RecentWorkloadTest, MigGpusKeepTheirLayoutAndMigRequestsTheirProfile) {
  const GpuModel& h100 = *Catalog::Builtin().Find("H100-SXM");
  PoolHistory h;
  h.tasks = {Row(1, 10, 20, 120, Named(RequestShape::kMig, "3g.40gb")),
             // Not laid out now, but the GPU can be re-laid out for it.
             Row(2, 30, -1, -1, Named(RequestShape::kMig, "1g.10gb")),
             // No GPU of the pool has this profile: left out.
             Row(3, 40, 50, 60, Named(RequestShape::kMig, "3g.71gb"))};
  const LivePool live = MigLive();
  ASSERT_OK_AND_ASSIGN(RecentWorkload r, ExtractRecentWorkload(h, live));
  const Workload& w = r.workload;
  ASSERT_EQ(w.nodes.size(), 1u);  // m2's only GPU is of a model the catalog lacks
  EXPECT_EQ(r.stats.unmodelled_gpus, 1);
  const TwinNode& n = w.nodes[0];
  EXPECT_EQ(n.gpus, 2);
  EXPECT_EQ(n.model, "H100-SXM");
  EXPECT_EQ(n.device_ids, (std::vector<std::string>{"m1-GPU-0", "m1-GPU-1"}));
  ASSERT_EQ(n.mig.size(), 1u);
  ASSERT_TRUE(n.mig.contains(0));
  EXPECT_TRUE(n.mig.at(0).dynamic);
  EXPECT_EQ(FormatMigLayout(n.mig.at(0).layout), "3g.40gb@0+3g.40gb@4");

  ASSERT_EQ(w.tasks.size(), 2u);
  EXPECT_EQ(w.tasks[0].mig_profile, "3g.40gb");
  EXPECT_EQ(w.tasks[0].num_gpu, 1);
  const int64_t unit = h100.ComputeMilliTflops();
  EXPECT_EQ(w.tasks[0].gpu_milli, (h100.FindMig("3g.40gb")->milli_tflops * 1000 + unit - 1) / unit);
  EXPECT_EQ(w.tasks[1].mig_profile, "1g.10gb");
  EXPECT_EQ(w.tasks[0].Request(w.gpu).shape, RequestShape::kMig);
  EXPECT_EQ(w.tasks[0].Request(w.gpu).mig_profile, "3g.40gb");
  EXPECT_EQ(r.stats.unmodelled, 1);
  EXPECT_EQ(r.baseline.mig_relayout, MigRelayout::kIdle);

  // The candidate turns re-layout off; both replay, and only the baseline re-lays out for the
  // 1g task that waits (the GPU is idle after the 3g task ends at 120 s).
  ConfigChange change;
  change.mig_relayout = MigRelayout::kOff;
  ASSERT_OK_AND_ASSIGN(RecentWorkload cand, ApplyChange(r, live, change));
  EXPECT_EQ(cand.baseline.mig_relayout, MigRelayout::kOff);
  ASSERT_OK_AND_ASSIGN(TwinReport a, RunTwin(r.workload, r.org, r.baseline));
  ASSERT_OK_AND_ASSIGN(TwinReport b, RunTwin(cand.workload, cand.org, cand.baseline));
  EXPECT_EQ(a.mig_relayout, "idle");
  EXPECT_GE(a.mig_relayouts, 1);
  EXPECT_EQ(a.wait_by_class.at("high").never_started, 0);
  EXPECT_EQ(b.mig_relayout, "off");
  EXPECT_EQ(b.mig_relayouts, 0);
  EXPECT_EQ(b.rejected, 1);  // no 1g instance and no re-layout: the core refuses it
}

}  // namespace
}  // namespace gpupool::twin
