// Synthetic workloads with time (twin/synthetic.h, bench/workload_gen): the placement columns
// are what they were before the time columns existed, the GPU-cloud workload has the shape it
// claims (replicas that scale up and down, gangs, office-hours notebooks, the demand its load
// asks for), the twin reads it (owner, gang, copies) and a short one replays: tasks start and
// finish, gangs start whole, no quota is exceeded.
#include "twin/synthetic.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "twin/twin.h"
#include "twin/workload.h"

namespace gpupool::twin {
namespace {

[[maybe_unused]] uint64_t Fnv1a(std::string_view s) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return h;
}

[[maybe_unused]] std::string ReadAll(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The first six columns of every line: what gpupool-sim places.
[[maybe_unused]] std::string PlacementColumns(const std::string& csv) {
  std::string out;
  std::istringstream in(csv);
  for (std::string line; std::getline(in, line);) {
    size_t at = 0;
    for (int commas = 0; commas < 6 && at != std::string::npos; ++commas)
      at = line.find(',', at + (commas ? 1 : 0));
    out += line.substr(0, at) + "\n";
  }
  return out;
}

// Digests of workload_gen --seed 7 --tasks 500 from the commit before the time columns
// (pod lists cut to their six placement columns; node lists whole). A generator change that
// moves a placement draw changes them, and with them the placement tables of benchmarks.md.
TEST(WorkloadGenTest, TimeColumnsLeaveThePlacementColumnsAsTheyWere) {
#ifndef WORKLOAD_GEN_PATH
  GTEST_SKIP() << "built without bench/ (GPUPOOL_BUILD_BENCH=OFF): no workload_gen to run";
#else
  struct Expected {
    const char* name;
    uint64_t pods, nodes;
  };
  const Expected expected[] = {
      {"cloud-inference", 0x5f95757614797c1fULL, 0x673caa70a6b5cc27ULL},
      {"training-multigpu", 0x3230bb2d6d969524ULL, 0x0465289812d7833cULL},
      {"mixed-vendor", 0x0927edf3ece2e026ULL, 0x3b385eb86d94427fULL},
      {"cpu-scarce", 0x99ebbf037d6be65fULL, 0x357a075790b65287ULL},
      {"model-strict", 0xb2c642146e62894bULL, 0x2fde907f3333a420ULL},
      {"mig-heavy", 0xd22fa7d4cd490000ULL, 0x18004b27aba92ea3ULL},
  };
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() /
      ("workload_gen_test." + std::to_string(static_cast<long>(::getpid())));
  std::filesystem::remove_all(dir);
  const std::string cmd = std::string(WORKLOAD_GEN_PATH) + " --out-dir " + dir.string() +
                          " --seed 7 --tasks 500 > /dev/null";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  for (const Expected& e : expected) {
    const std::string pods = ReadAll(dir / ("openb_pod_list_" + std::string(e.name) + ".csv"));
    EXPECT_EQ(Fnv1a(PlacementColumns(pods)), e.pods) << e.name;
    EXPECT_EQ(Fnv1a(ReadAll(dir / ("nodes_" + std::string(e.name) + ".csv"))), e.nodes) << e.name;
    // Every pod has times the twin reads.
    Result<std::vector<TwinTask>> parsed = ParsePods(pods, e.name);
    ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
    ASSERT_EQ(parsed->size(), 500u);
    for (const TwinTask& t : *parsed) {
      EXPECT_LT(t.arrival_us, 7 * kDayS * 1'000'000) << t.name;
      EXPECT_GE(t.duration_us, 300'000'000) << t.name;  // 5 min at least
      EXPECT_FALSE(t.qos.empty()) << t.name;
      EXPECT_FALSE(t.owner.empty()) << t.name;
    }
  }
  EXPECT_TRUE(std::filesystem::exists(dir / "openb_pod_list_gpu-cloud.csv"));  // in "all"
  std::filesystem::remove_all(dir);
#endif
}

TEST(SyntheticTest, DailyCurves) {
  EXPECT_DOUBLE_EQ(DiurnalFactor(14 * 3600, 14), 1.0);
  EXPECT_NEAR(DiurnalFactor(2 * 3600, 14), 0.2, 1e-12);
  EXPECT_NEAR(DiurnalFactor(kDayS + 14 * 3600, 14), 1.0, 1e-12);
  EXPECT_NEAR(OfficeHoursFactor(13 * 3600 + 1800), 1.05, 1e-12);             // Monday 13:30
  EXPECT_NEAR(OfficeHoursFactor(3 * 3600), 0.05, 1e-12);                     // Monday 03:00
  EXPECT_NEAR(OfficeHoursFactor(5 * kDayS + 13 * 3600 + 1800), 0.2, 1e-12);  // Saturday
  EXPECT_NEAR(OfficeHoursFactor(-kDayS + 13 * 3600 + 1800), 0.2, 1e-12);     // Sunday, before 0
  // Weekdays: 11 h × 2/π of 1 per day; weekends 0.15 of it; plus 0.05 all week.
  EXPECT_NEAR(OfficeHoursMean(), 0.05 + (5 + 2 * 0.15) * 11 * (2 / 3.14159265358979) / 168, 1e-3);
}

// What each part of a GPU-cloud workload asks for on average over [0, span), in GPUs.
std::map<std::string, double> MeanDemand(const SynthCluster& c, int64_t span) {
  std::map<std::string, double> gpu_s;
  for (const SynthPod& p : c.pods) {
    const std::string part = p.name.find("-svc") != std::string::npos     ? "inference"
                             : p.name.find("-train") != std::string::npos ? "training"
                                                                          : "notebooks";
    const int64_t lasts = std::min(p.deletion_s, span) - p.creation_s;
    gpu_s[part] += static_cast<double>(lasts) * p.num_gpu * p.gpu_milli / 1000.0;
  }
  for (auto& [part, v] : gpu_s) v /= static_cast<double>(span);
  return gpu_s;
}

TEST(SyntheticTest, GpuCloudHasTheShapeItClaims) {
  GpuCloudOptions o;
  o.hours = 14 * 24;  // two weeks: long enough for the averages
  o.nodes_per_model = 8;
  const SynthCluster c = GenerateGpuCloud(o);
  ASSERT_EQ(c.nodes.size(), 32u);
  double gpus = 0;
  for (const SynthNode& n : c.nodes) gpus += n.gpus;
  ASSERT_EQ(gpus, 192);
  const int64_t span = o.hours * 3600;

  int64_t scaled_up = 0, scaled_down = 0, office = 0, notebooks = 0;
  std::map<std::string, std::vector<const SynthPod*>> gangs;
  for (const SynthPod& p : c.pods) {
    ASSERT_GE(p.creation_s, 0) << p.name;
    ASSERT_LT(p.creation_s, span) << p.name;
    ASSERT_GT(p.deletion_s, p.creation_s) << p.name;
    if (p.name.find("-svc") != std::string::npos) {
      EXPECT_EQ(p.qos, "LS");
      EXPECT_LT(p.gpu_milli, 1000);
      scaled_up += p.creation_s > 0;
      scaled_down += p.deletion_s < span;
    } else if (p.name.find("-train") != std::string::npos) {
      EXPECT_EQ(p.qos, "BE");
      EXPECT_TRUE(p.num_gpu == 8 || p.num_gpu == 4) << p.name;  // whole nodes
      if (!p.gang.empty()) gangs[p.gang].push_back(&p);
    } else {
      EXPECT_EQ(p.qos, "Burstable");
      ++notebooks;
      const int64_t day = p.creation_s / kDayS % 7, hour = p.creation_s % kDayS / 3600;
      office += day < 5 && hour >= 8 && hour < 19;
    }
  }
  EXPECT_GT(scaled_up, 1000);    // replicas created as the curve rises…
  EXPECT_GT(scaled_down, 1000);  // …and deleted as it falls
  EXPECT_GT(gangs.size(), 10u);
  for (const auto& [id, members] : gangs) {
    EXPECT_GE(members.size(), 2u) << id;
    for (const SynthPod* m : members) {
      EXPECT_EQ(m->creation_s, members[0]->creation_s) << m->name;
      EXPECT_EQ(m->deletion_s, members[0]->deletion_s) << m->name;
    }
  }
  // 11 weekday hours of 168 get most of the notebooks (70 % expected).
  EXPECT_GT(office * 100, notebooks * 55) << office << " of " << notebooks;

  // Demand as asked: 40 / 35 / 10 % of the GPUs at load 1. Training comes in few large bursts,
  // so its fortnight average is looser.
  std::map<std::string, double> d = MeanDemand(c, span);
  EXPECT_NEAR(d["inference"] / gpus, 0.40, 0.04);
  EXPECT_NEAR(d["training"] / gpus, 0.35, 0.12);
  EXPECT_NEAR(d["notebooks"] / gpus, 0.10, 0.025);

  // Same seed, same rows; load scales the work.
  EXPECT_EQ(PodListCsv(GenerateGpuCloud(o).pods), PodListCsv(c.pods));
  o.load = 2;
  std::map<std::string, double> d2 = MeanDemand(GenerateGpuCloud(o), span);
  EXPECT_NEAR(d2["inference"] / d["inference"], 2.0, 0.1);
  EXPECT_NEAR(d2["notebooks"] / d["notebooks"], 2.0, 0.3);
}

TEST(SyntheticTest, TheTwinReadsOwnersGangsAndCopies) {
  GpuCloudOptions o;
  o.hours = 24;
  o.nodes_per_model = 2;
  const SynthCluster c = GenerateGpuCloud(o);
  Result<std::vector<TwinTask>> pods = ParsePods(PodListCsv(c.pods), "gpu-cloud.csv");
  ASSERT_TRUE(pods.ok()) << pods.status().ToString();
  Result<std::vector<TwinNode>> nodes = ParseNodeList(NodeListCsv(c.nodes), "nodes.csv");
  ASSERT_TRUE(nodes.ok()) << nodes.status().ToString();
  const OrgTree org = DefaultOrgTree();
  Workload w = Shape("gpu-cloud", *nodes, *pods, LoadOptions{}, org);
  ASSERT_EQ(w.tasks.size(), c.pods.size());
  std::map<std::string, std::set<std::string>> tenants_of_owner;
  for (const TwinTask& t : w.tasks) tenants_of_owner[t.owner].insert(t.tenant);
  for (const auto& [owner, tenants] : tenants_of_owner)
    EXPECT_EQ(tenants.size(), 1u) << owner;  // a service's replicas are one tenant's
  for (const std::vector<size_t>& g : w.gangs) {
    ASSERT_GE(g.size(), 2u);
    for (size_t i : g) EXPECT_EQ(w.tasks[i].gang, w.tasks[g[0]].gang);
  }

  // Copies: times kept, X copies on average, a gang's members alike.
  LoadOptions copies;
  copies.load_mode = LoadMode::kCopies;
  copies.time_scale = 2.5;
  Workload w2 = Shape("gpu-cloud", *nodes, *pods, copies, org);
  EXPECT_NEAR(static_cast<double>(w2.tasks.size()) / static_cast<double>(w.tasks.size()), 2.5, 0.1);
  EXPECT_EQ(w2.tasks.back().arrival_us, w.tasks.back().arrival_us);
  for (const std::vector<size_t>& g : w2.gangs) {
    for (size_t i : g) {
      EXPECT_EQ(w2.tasks[i].gang, w2.tasks[g[0]].gang);
      EXPECT_EQ(w2.tasks[i].arrival_us, w2.tasks[g[0]].arrival_us);
    }
    const std::string& id = w2.tasks[g[0]].gang;
    const std::string base = id.substr(0, id.find('~'));
    size_t original = 0;
    for (const std::vector<size_t>& h : w.gangs)
      if (w.tasks[h[0]].gang == base) original = h.size();
    EXPECT_EQ(g.size(), original) << id;
  }
  copies.time_scale = 0.5;  // thins
  EXPECT_LT(Shape("gpu-cloud", *nodes, *pods, copies, org).tasks.size(), w.tasks.size() * 6 / 10);
  EXPECT_FALSE(ParseLoadMode("sideways").ok());
}

TEST(SyntheticTest, GangMembersMustAgree) {
  Result<std::vector<TwinTask>> r = ParsePods(
      "name,num_gpu,gpu_milli,creation_time,deletion_time,gang\n"
      "a-w0,8,1000,10,100,a\n"
      "a-w1,8,1000,10,200,a\n",
      "pods.csv");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "pods.csv:3: gang: 'a-w1' differs from 'a-w0' of gang 'a' in deletion_time");
}

TEST(SyntheticTest, AGangStartsWholeOnSeparateNodes) {
  Result<std::vector<TwinTask>> pods = ParsePods(
      "name,num_gpu,gpu_milli,creation_time,deletion_time,qos,owner,gang\n"
      "small,1,500,0,100,LS,svc0,\n"
      "g-w0,8,1000,5,65,BE,proj1,g\n"
      "g-w1,8,1000,5,65,BE,proj1,g\n",
      "pods.csv");
  ASSERT_TRUE(pods.ok()) << pods.status().ToString();
  std::vector<TwinNode> nodes = {{"n0", 192'000, 2'097'152, 8, "H100", {}},
                                 {"n1", 192'000, 2'097'152, 8, "H100", {}},
                                 {"n2", 192'000, 2'097'152, 8, "H100", {}}};
  const OrgTree org = DefaultOrgTree();
  Workload w = Shape("gang", nodes, *pods, LoadOptions{}, org);
  ASSERT_EQ(w.gangs.size(), 1u);
  TwinConfig config;
  config.record_starts = true;
  config.horizon_us = 200 * 1'000'000LL;
  Result<TwinReport> r = RunTwin(w, org, config);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  std::map<std::string, StartLog> starts;
  for (const StartLog& s : r->starts) starts[s.task] = s;
  ASSERT_EQ(starts.size(), 3u);
  EXPECT_EQ(starts["g-w0"].t_s, 5);
  EXPECT_EQ(starts["g-w1"].t_s, 5);
  EXPECT_NE(starts["g-w0"].node, starts["g-w1"].node);
  EXPECT_EQ(starts["g-w0"].devices.size(), 8u);
  // Finished by 65 s: at 200 s nothing is allocated.
  ASSERT_FALSE(r->series.empty());
  EXPECT_NEAR(r->series.back().alloc_pct, 0, 1e-9);
  EXPECT_EQ(r->quota_violations, 0);
}

// A day of a small GPU cloud (8 nodes, 48 GPUs) replayed to past its last deletion: every task
// starts, everything has ended by the horizon (replicas scaled down included), and no quota is
// exceeded.
TEST(SyntheticTest, AShortGpuCloudReplays) {
  GpuCloudOptions o;
  o.hours = 24;
  o.nodes_per_model = 2;
  o.load = 0.6;
  const SynthCluster c = GenerateGpuCloud(o);
  std::vector<TwinTask> pods = *ParsePods(PodListCsv(c.pods), "gpu-cloud.csv");
  const OrgTree org = DefaultOrgTree();
  Workload w =
      Shape("gpu-cloud", *ParseNodeList(NodeListCsv(c.nodes), "n.csv"), pods, LoadOptions{}, org);
  int64_t last_end = 0, replicas_scaled_down = 0;
  for (const SynthPod& p : c.pods) {
    last_end = std::max(last_end, p.deletion_s);
    replicas_scaled_down +=
        p.name.find("-svc") != std::string::npos && p.deletion_s < o.hours * 3600;
  }
  ASSERT_GT(replicas_scaled_down, 20);
  TwinConfig config;
  config.record_starts = true;
  config.horizon_us = (last_end + 3 * 24 * 3600) * 1'000'000LL;  // room for waits
  config.sample_ms = 60'000;
  Result<TwinReport> r = RunTwin(w, org, config);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  std::set<std::string> started;
  for (const StartLog& s : r->starts) started.insert(s.task);
  EXPECT_EQ(started.size(), w.tasks.size());
  for (const auto& [cls, wait] : r->wait_by_class) EXPECT_EQ(wait.never_started, 0) << cls;
  EXPECT_NEAR(r->series.back().alloc_pct, 0, 1e-9);  // all ended, scaled-down replicas too
  EXPECT_EQ(r->quota_violations, 0);
  EXPECT_EQ(r->overallocated_devices, 0);
  EXPECT_EQ(r->repreempted_within_min_runtime, 0);
}

}  // namespace
}  // namespace gpupool::twin
