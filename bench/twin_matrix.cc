// twin_matrix: replays trace workloads through the cluster twin (twin/twin.h) for every
// strategy × preemption setting asked for, prints one table row per replay and writes every
// report as one JSON array (docs/benchmarks.md, "Cluster twin").
//
//   twin_matrix --trace-dir DIR [--workloads default,gpushare80] [--strategies fgd-pack,best-fit]
//               [--preemption on,off] [--load-factor X] [--load-mode compress|copies]
//               [--replicas N] [--max-nodes N] [--horizon-s S] [--warmup-s S] [--json OUT]
//
// A workload NAME=NODES reads its node list from NODES in the trace folder (workload_gen's
// synthetic workloads: gpu-cloud=nodes_gpu-cloud.csv); otherwise every workload uses --nodes.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "base/log.h"
#include "twin/twin.h"
#include "twin/workload.h"

namespace {

using namespace gpupool;
using namespace gpupool::twin;

std::vector<std::string> Split(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t end = s.find(',', start);
    if (end == std::string::npos) end = s.size();
    if (end > start) out.push_back(s.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

constexpr const char* kHelp = R"(usage: twin_matrix --trace-dir DIR [options]

Replays each workload through the cluster twin for every strategy x preemption setting, prints
one row per replay and writes every report as one JSON array (docs/benchmarks.md, "Cluster twin").

  --workloads LIST     comma-separated pod lists openb_pod_list_NAME.csv (default: default);
                       NAME=NODES reads that workload's nodes from NODES in DIR (workload_gen:
                       gpu-cloud=nodes_gpu-cloud.csv)
  --nodes FILE         node list for the others (default: openb_node_list_gpu_node.csv)
  --strategies LIST    (default: fgd-pack)
  --preemption LIST    on, off or on,off (default: on,off)
  --load-factor X      (default: 1)
  --load-mode M        compress | copies, as gpupool-twin's (default: compress)
  --starvation-after-s LIST  starvation reservations after S s of waiting, one replay per
                       value; 0 = off (default: the core's, 600)
  --replicas N  --max-nodes N  --horizon-s S  --warmup-s S  --json OUT   as gpupool-twin's
)";

[[noreturn]] void Fail(const std::string& msg) {
  std::cerr << "twin_matrix: " << msg << "\n";
  std::exit(2);
}

double P99(const TwinReport& r, const std::string& cls) {
  auto it = r.wait_by_class.find(cls);
  return it == r.wait_by_class.end() ? 0 : it->second.p99;
}

}  // namespace

int main(int argc, char** argv) {
  SetLogLevel(LogLevel::kWarn);  // the core logs every preemption at info
  LoadOptions load;
  std::vector<std::string> workloads = {"default"}, strategies = {"fgd-pack"};
  std::vector<bool> preemption = {true, false};
  std::string json;
  double horizon_s = 0, warmup_s = 0;
  std::vector<int64_t> starvation_ms = {
      SchedulerOptions::Defaults().tenancy.starvation_reserve_after_ms};
  for (int i = 1; i < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::cout << kHelp;
      return 0;
    }
    if (i + 1 >= argc) Fail(a + ": needs a value (see --help)");
    std::string v = argv[i + 1];
    if (a == "--trace-dir")
      load.trace_dir = v;
    else if (a == "--workloads")
      workloads = Split(v);
    else if (a == "--strategies")
      strategies = Split(v);
    else if (a == "--preemption") {
      preemption.clear();
      for (const std::string& p : Split(v)) {
        if (p != "on" && p != "off") Fail("--preemption: on and/or off, got '" + p + "'");
        preemption.push_back(p == "on");
      }
    } else if (a == "--load-factor")
      load.time_scale = std::atof(v.c_str());
    else if (a == "--load-mode") {
      Result<LoadMode> m = ParseLoadMode(v);
      if (!m.ok()) Fail("--load-mode: " + m.status().message());
      load.load_mode = *m;
    } else if (a == "--nodes")
      load.nodes_file = v;
    else if (a == "--replicas")
      load.replicas = std::atoi(v.c_str());
    else if (a == "--max-nodes")
      load.max_nodes = std::atoi(v.c_str());
    else if (a == "--horizon-s")
      horizon_s = std::atof(v.c_str());
    else if (a == "--warmup-s")
      warmup_s = std::atof(v.c_str());
    else if (a == "--json")
      json = v;
    else if (a == "--starvation-after-s") {
      starvation_ms.clear();
      for (const std::string& x : Split(v)) {
        char* end = nullptr;
        const double sec = std::strtod(x.c_str(), &end);
        if (end == x.c_str() || *end != '\0' || sec < 0)
          Fail("--starvation-after-s: seconds >= 0, got '" + x + "'");
        starvation_ms.push_back(static_cast<int64_t>(sec * 1000));
      }
    } else
      Fail("unknown option '" + a + "' (see --help)");
  }
  if (load.trace_dir.empty()) Fail("--trace-dir is required");
  if (load.load_mode == LoadMode::kCopies && !(load.time_scale > 0 && load.time_scale <= 100))
    Fail("--load-factor: with --load-mode copies it must be in (0, 100] (copies of each pod)");
  OrgTree org = DefaultOrgTree();
  std::string all = "[";
  std::printf("%-17s %-14s %-4s %7s %7s %6s %9s %9s %9s %6s %9s %5s %6s %8s\n", "workload",
              "strategy", "pre", "alloc%", "demand%", "frag%", "p99 high", "p99 norm", "p99 low",
              "preem", "lost GPUs", "quota", "below", "speedup");
  const std::string default_nodes = load.nodes_file;
  for (const std::string& spec : workloads) {
    const size_t eq = spec.find('=');
    const std::string name = spec.substr(0, eq);
    load.workload = name;
    load.nodes_file = eq == std::string::npos ? default_nodes : spec.substr(eq + 1);
    Result<Workload> w = LoadTrace(load, org);
    if (!w.ok()) Fail(w.status().ToString());
    for (const std::string& s : strategies) {
      for (bool p : preemption) {
        for (int64_t starve : starvation_ms) {
          TwinConfig c;
          c.label = name + "/" + s + "/" + (p ? "preempt" : "no-preempt");
          if (starvation_ms.size() > 1 || starve != starvation_ms.front() ||
              starve != SchedulerOptions::Defaults().tenancy.starvation_reserve_after_ms)
            c.label += "/starve-" + std::to_string(starve / 1000);
          c.scheduler.tenancy.starvation_reserve_after_ms = starve;
          c.strategy = s;
          c.preemption = p;
          c.horizon_us = static_cast<int64_t>(horizon_s * 1e6);
          c.warmup_us = static_cast<int64_t>(warmup_s * 1e6);
          Result<TwinReport> r = RunTwin(*w, org, c);
          if (!r.ok()) Fail(r.status().ToString());
          int64_t below = 0;
          for (const TenantReport& t : r->tenants) below += t.below_guarantee_samples;
          std::printf(
              "%-17s %-14s %-4s %7.2f %7.1f %6.2f %9.2f %9.1f %9.1f %6lld %9.0f %5lld %6lld "
              "%7.0fx\n",
              name.c_str(), (s + (starve > 0 ? "" : "/nostarve")).c_str(), p ? "on" : "off",
              r->time_avg_gpu_allocation_pct, r->time_avg_demand_pct, r->time_avg_frag_pct,
              P99(*r, "high"), P99(*r, "normal"), P99(*r, "low"),
              static_cast<long long>(r->preemptions), r->lost_gpu_s,
              static_cast<long long>(r->quota_violations), static_cast<long long>(below),
              r->speedup);
          std::fflush(stdout);
          all += (all.size() > 1 ? ",\n" : "\n") + ToJson(*r);
        }
      }
    }
  }
  all += "]\n";
  if (!json.empty()) std::ofstream(json) << all;
  return 0;
}
