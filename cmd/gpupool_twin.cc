// gpupool-twin: replays a trace workload through the production scheduler core with a simulated
// clock and writes what it measured. Wiring only: the replay is twin/twin.h, the workload
// twin/workload.h, the report twin/report.h.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>

#include "base/log.h"
#include "placement/strategy.h"
#include "twin/autoscale_replay.h"
#include "twin/mig_replay.h"
#include "twin/org_tree.h"
#include "twin/report.h"
#include "twin/twin.h"
#include "twin/what_if.h"
#include "twin/workload.h"

namespace {

using namespace gpupool;
using namespace gpupool::twin;

constexpr const char* kHelp = R"(usage: gpupool-twin --trace-dir DIR --json OUT [options]
       gpupool-twin autoscale [options]   (inference services' autoscaling: autoscale --help)
       gpupool-twin mig [options]         (static against dynamic MIG layouts: mig --help)

Replays a workload (Alibaba openb pod list, or one from bench/workload_gen: arrivals at
creation_time, durations up to deletion_time) through gpupoold's own scheduler core — queues, quotas, fair share, priorities,
preemption, placement with the daemon's online workload model — on a simulated clock, with the
in-memory store and simulated agents. Writes a JSON report (allocation, fragmentation, waits per
priority class and tenant, preemptions, quota and guarantee checks) and an SVG plot. See
docs/twin.md.

workload:
  --trace-dir DIR        folder with openb_pod_list_*.csv and the node list (required)
  --workload NAME        pod list openb_pod_list_NAME.csv (default: default); its optional
                         owner column is hashed to a tenant instead of the pod name, and pods
                         sharing a gang id are submitted as one gang job
  --nodes FILE           node list in the trace folder (default: openb_node_list_gpu_node.csv)
  --load-factor X        arrival times divided by X, durations kept (default: 1); with
                         --load-mode copies each pod is submitted X times on average instead
  --load-mode M          compress | copies (default: compress). copies keeps the times (a
                         diurnal workload such as workload_gen's gpu-cloud keeps its 24-h day)
                         and submits each pod floor(X) or ceil(X) times (X < 1 thins); a gang's
                         pods alike
  --replicas N           submit each pod N times, copy k arriving k × --replica-gap-s later
                         (default: 1)
  --replica-gap-s S      (default: 1)
  --max-nodes N          keep about N nodes (every k-th, model mix kept); 0: all
  --max-tasks N          only the first N pods; 0: all
  --org-tree FILE        tenants, quotas (percent of the pool's GPUs) and qos → priority class
                         (YAML; default: 4 orgs × 2 teams, guarantees 30/22/15/8 %)
config:
  --strategy S           the pool's placement strategy (default: fgd-pack)
  --preemption on|off    (default: on)
  --queue-order O        fair-share | fifo (default: fair-share)
  --overcommit R         the pool's compute overcommit ratio (default: 1)
  --starvation-after-s S starvation reservations: a task or gang passed over for its size
                         this long gets nodes drained for it (docs/tenancy.md; default: the
                         core's: 0, off)
  --starvation-max N     starvation reservations per pool at once (default: the core's, 2)
  --starvation-timeout-s S  a starvation reservation whose task has not started by then is
                         dropped (default: the core's, 21600)
  --resume full|remaining  a preempted task runs its full duration again (default) or what was
                         left
  --tick-ms N            the core's tick while tasks wait, simulated ms (default: 2000)
  --start-latency-ms N   StartTask → RUNNING (default: 0)
  --stop-latency-ms N    StopTask → exit (default: 0)
replay and report:
  --horizon-s S          stop at S simulated seconds (default: the last arrival)
  --warmup-s S           averages and checks start at S (default: 0)
  --sample-s S           sampling period of the time series and guarantee checks (default: 10)
  --json OUT             the report (required)
  --svg OUT              the plot (default: OUT with .svg for .json)
  --what-if FILE         also replay with FILE's changes (YAML: label, strategy, preemption,
                         queue_order, compute_overcommit, resume, org_tree) and write both side
                         by side, with the differences
  --progress on|off      a line on stderr every simulated hour (default: off)
  --help                 this text
strategies: first-fit best-fit spread dot-product gpu-packing gpu-clustering fgd fgd-pack random
)";

[[noreturn]] void Fail(const std::string& msg) {
  std::cerr << "gpupool-twin: " << msg << "\n";
  std::exit(2);
}

double Number(const std::string& flag, const std::string& v, double min) {
  char* end = nullptr;
  double x = std::strtod(v.c_str(), &end);
  if (v.empty() || *end != '\0' || !(x >= min))
    Fail(flag + ": expected a number >= " + std::to_string(min) + ", got '" + v + "'");
  return x;
}

bool Write(const std::string& path, const std::string& text) {
  std::ofstream f(path);
  f << text;
  return static_cast<bool>(f);
}

void PrintSummary(const TwinReport& r) {
  std::printf(
      "%-12s %-10s preempt=%-3s alloc=%.2f%% demand=%.1f%% frag=%.2f%% preemptions=%lld "
      "quota_violations=%lld speedup=%.0fx\n",
      r.label.c_str(), r.strategy.c_str(), r.preemption ? "on" : "off",
      r.time_avg_gpu_allocation_pct, r.time_avg_demand_pct, r.time_avg_frag_pct,
      static_cast<long long>(r.preemptions), static_cast<long long>(r.quota_violations), r.speedup);
  for (const auto& [cls, w] : r.wait_by_class) {
    std::printf(
        "    class %-8s tasks=%-7lld wait p50=%.2fs p99=%.2fs max=%.0fs never_started=%lld\n",
        cls.c_str(), static_cast<long long>(w.count), w.p50, w.p99, w.max,
        static_cast<long long>(w.never_started));
  }
}

constexpr const char* kAutoscaleHelp = R"(usage: gpupool-twin autoscale [options]

Replays inference services' request load on a simulated clock under gpupool's autoscaler
(scheduler/autoscaler.h) and the peers' policies re-implemented from their documentation — kpa
(Knative), hpa (Kubernetes), ray (Ray Serve) — with the same arrivals for each, and prints per
policy the GPU-seconds held, the requests, those that waited past their deadline, the p99 wait,
the count changes and direction changes, and the reaction to step bursts. See docs/twin.md,
"Autoscaling inference services".

  --workload W   diurnal | bursty | sparse (default: bursty)
  --services N   services drawn (default: 6)
  --hours H      simulated hours (default: 24)
  --seed S       (default: 1)
  --json FILE    also write the results as JSON
)";

int AutoscaleMain(int argc, char** argv) {
  std::string workload = "bursty", json;
  int services = 6;
  int64_t hours = 24;
  uint64_t seed = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::cout << kAutoscaleHelp;
      return 0;
    }
    if (i + 1 >= argc) Fail(a + ": needs a value (see gpupool-twin autoscale --help)");
    const std::string v = argv[++i];
    try {
      if (a == "--workload") {
        workload = v;
      } else if (a == "--services") {
        services = std::stoi(v);
      } else if (a == "--hours") {
        hours = std::stoll(v);
      } else if (a == "--seed") {
        seed = std::stoull(v);
      } else if (a == "--json") {
        json = v;
      } else {
        Fail("unknown option " + a + " (see gpupool-twin autoscale --help)");
      }
    } catch (const std::exception&) {
      Fail(a + ": not a number: '" + v + "'");
    }
  }
  auto loads = AutoscaleWorkload(workload, services, hours, seed);
  if (!loads.ok()) Fail(loads.status().message());
  std::printf("%-8s %12s %10s %8s %10s %7s %11s %13s %12s\n", "policy", "gpu-seconds", "requests",
              "late", "wait p99 s", "steps", "dir changes", "react mean s", "react max s");
  std::string out = "{\"workload\":\"" + workload + "\",\"services\":" + std::to_string(services) +
                    ",\"hours\":" + std::to_string(hours) + ",\"seed\":" + std::to_string(seed) +
                    ",\"policies\":[";
  for (const std::string& name : ScalingPolicyNames()) {
    auto r = ReplayAutoscale(*loads, name, hours, seed);
    if (!r.ok()) Fail(r.status().message());
    std::printf("%-8s %12.0f %10lld %8lld %10.2f %7lld %11lld %13.1f %12.1f\n", name.c_str(),
                r->gpu_seconds, static_cast<long long>(r->requests),
                static_cast<long long>(r->late), r->wait_p99_s, static_cast<long long>(r->steps),
                static_cast<long long>(r->direction_changes), r->reaction_mean_s,
                r->reaction_max_s);
    char buf[512];
    std::snprintf(buf, sizeof buf,
                  "%s{\"policy\":\"%s\",\"gpu_seconds\":%.1f,\"requests\":%lld,\"late\":%lld,"
                  "\"wait_p99_s\":%.2f,\"steps\":%lld,\"direction_changes\":%lld,"
                  "\"reaction_mean_s\":%.2f,\"reaction_max_s\":%.2f}",
                  name == ScalingPolicyNames().front() ? "" : ",", name.c_str(), r->gpu_seconds,
                  static_cast<long long>(r->requests), static_cast<long long>(r->late),
                  r->wait_p99_s, static_cast<long long>(r->steps),
                  static_cast<long long>(r->direction_changes), r->reaction_mean_s,
                  r->reaction_max_s);
    out += buf;
  }
  out += "]}\n";
  if (!json.empty()) {
    std::ofstream f(json);
    f << out;
    if (!f) Fail("cannot write " + json);
  }
  return 0;
}

constexpr const char* kMigHelp = R"(usage: gpupool-twin mig [options]

Replays a day of MIG requests whose profile mix shifts (night 7g training, morning 1g inference,
afternoon 3g/4g fine-tuning, evening a spread) on a fleet of MIG GPUs, on a simulated clock, and
prints per policy the share of the requested MIG work placed within the day, the wait p50/p99
and the re-layouts:
  - every uniform static layout (one per distinct instance mix; the best one is printed, all
    with --all-static),
  - a static mixed fleet planned with hindsight from the day's mean demand,
  - dynamic: idle GPUs re-laid out by the planner from the smoothed recent demand.
The same requests for every policy. See docs/twin.md, "MIG layouts".

  --model M          A100-80GB | A100-40GB | H100-SXM | H100-PCIe | H200 (default: A100-80GB)
  --gpus N           GPUs in the fleet (default: 32)
  --hours H          simulated hours (default: 24)
  --seed S           (default: 1)
  --load L           offered compute-slice load, share of the fleet (default: 0.7)
  --relayout-s S     seconds a GPU is out of service while re-laid out (default: 8)
  --replan-min M     dynamic: minutes between looks at idle GPUs (default: 5)
  --mix-tau-min M    dynamic: smoothing time constant of the demand estimate (default: 30)
  --all-static       print every uniform static layout, not only the best
  --json FILE        also write the results as JSON
)";

void PrintMigRow(const MigReplayResult& r, const std::string& label) {
  std::printf("%-28s %7.1f %% %7.1f %% %10.0f %10.0f %9lld  %s\n", label.c_str(),
              100 * r.placed_share(), 100 * r.placed_slice_share(), r.wait_p50_s, r.wait_p99_s,
              static_cast<long long>(r.relayouts), r.policy.c_str());
}

std::string MigJson(const MigReplayResult& r, const std::string& kind) {
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "{\"kind\":\"%s\",\"policy\":\"%s\",\"requests\":%lld,\"started\":%lld,"
                "\"placed_share\":%.4f,\"placed_slice_share\":%.4f,\"wait_p50_s\":%.0f,"
                "\"wait_p99_s\":%.0f,\"relayouts\":%lld}",
                kind.c_str(), r.policy.c_str(), static_cast<long long>(r.requests),
                static_cast<long long>(r.started), r.placed_share(), r.placed_slice_share(),
                r.wait_p50_s, r.wait_p99_s, static_cast<long long>(r.relayouts));
  return buf;
}

// Higher placed share first, then the lower p99 wait.
bool MigBetter(const MigReplayResult& a, const MigReplayResult& b) {
  if (a.placed_share() != b.placed_share()) return a.placed_share() > b.placed_share();
  return a.wait_p99_s < b.wait_p99_s;
}

int MigMain(int argc, char** argv) {
  std::string model_name = "A100-80GB", json;
  MigReplayOptions o;
  bool all_static = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::cout << kMigHelp;
      return 0;
    }
    if (a == "--all-static") {
      all_static = true;
      continue;
    }
    if (i + 1 >= argc) Fail(a + ": needs a value (see gpupool-twin mig --help)");
    const std::string v = argv[++i];
    try {
      if (a == "--model") {
        model_name = v;
      } else if (a == "--gpus") {
        o.gpus = std::stoi(v);
      } else if (a == "--hours") {
        o.hours = std::stoll(v);
      } else if (a == "--seed") {
        o.seed = std::stoull(v);
      } else if (a == "--load") {
        o.load = std::stod(v);
      } else if (a == "--relayout-s") {
        o.relayout_s = std::stod(v);
      } else if (a == "--replan-min") {
        o.replan_every_s = std::stoll(v) * 60;
      } else if (a == "--mix-tau-min") {
        o.mix_tau_s = std::stod(v) * 60;
      } else if (a == "--json") {
        json = v;
      } else {
        Fail("unknown option " + a + " (see gpupool-twin mig --help)");
      }
    } catch (const std::exception&) {
      Fail(a + ": not a number: '" + v + "'");
    }
  }
  const GpuModel* model = Catalog::Builtin().Find(model_name);
  if (model == nullptr) Fail("--model: unknown GPU model '" + model_name + "'");
  auto requests = MigShiftingDay(*model, o);
  if (!requests.ok()) Fail(requests.status().message());
  auto replay = [&](const MigFleetPolicy& p) {
    auto r = ReplayMig(*model, *requests, p, o);
    if (!r.ok()) Fail(r.status().message());
    return *r;
  };
  std::printf("%s × %d, %lld h, seed %llu, load %.2f: %zu requests\n", model->name.c_str(), o.gpus,
              static_cast<long long>(o.hours), static_cast<unsigned long long>(o.seed), o.load,
              requests->size());
  std::printf("%-28s %9s %9s %10s %10s %9s  %s\n", "policy", "placed", "slice-s", "wait p50 s",
              "wait p99 s", "relayouts", "layout");
  // Every uniform static layout, one per distinct instance mix.
  std::vector<MigReplayResult> uniform;
  std::vector<std::vector<int>> seen;
  for (const MigLayout& l : EnumerateMaximalMigLayouts(*model)) {
    const std::vector<int> counts = MigInstanceCounts(*model, l);
    if (std::find(seen.begin(), seen.end(), counts) != seen.end()) continue;
    seen.push_back(counts);
    uniform.push_back(replay(UniformStaticFleet(l, o.gpus)));
    if (all_static) PrintMigRow(uniform.back(), "static (uniform)");
  }
  if (uniform.empty()) Fail(model->name + " has no MIG layout");
  const MigReplayResult best_uniform = *std::min_element(uniform.begin(), uniform.end(), MigBetter);
  auto planned = PlanMigFleet(*model, MeanDemand(*model, *requests, o.hours), o.gpus);
  if (!planned.ok()) Fail(planned.status().message());
  const MigReplayResult mixed = replay(
      MigFleetPolicy{"static planned from the day's mean demand", *planned, false, false, 0});
  auto dynamic_policy = DynamicMigFleet(*model, o.gpus);
  if (!dynamic_policy.ok()) Fail(dynamic_policy.status().message());
  const MigReplayResult dynamic = replay(*dynamic_policy);
  auto scheduler_policy = SchedulerMigFleet(*model, o.gpus);
  if (!scheduler_policy.ok()) Fail(scheduler_policy.status().message());
  const MigReplayResult planner = replay(*scheduler_policy);
  PrintMigRow(best_uniform, "best uniform static");
  PrintMigRow(mixed, "static mixed (hindsight)");
  PrintMigRow(dynamic, "dynamic");
  PrintMigRow(planner, "dynamic (gpupoold's planner)");
  const MigReplayResult& best_static = MigBetter(mixed, best_uniform) ? mixed : best_uniform;
  std::printf(
      "best static: %.1f %% placed, wait p99 %.0f s; dynamic: %.1f %% placed, wait p99 "
      "%.0f s, %lld re-layouts\n",
      100 * best_static.placed_share(), best_static.wait_p99_s, 100 * dynamic.placed_share(),
      dynamic.wait_p99_s, static_cast<long long>(dynamic.relayouts));
  std::printf("gpupoold's planner: %.1f %% placed, wait p99 %.0f s, %lld re-layouts\n",
              100 * planner.placed_share(), planner.wait_p99_s,
              static_cast<long long>(planner.relayouts));
  if (!json.empty()) {
    std::string out = "{\"model\":\"" + model->name + "\",\"gpus\":" + std::to_string(o.gpus) +
                      ",\"hours\":" + std::to_string(o.hours) +
                      ",\"seed\":" + std::to_string(o.seed) +
                      ",\"requests\":" + std::to_string(requests->size()) + ",\"policies\":[" +
                      MigJson(best_uniform, "best_uniform_static") + "," +
                      MigJson(mixed, "static_mixed_hindsight") + "," + MigJson(dynamic, "dynamic") +
                      "," + MigJson(planner, "dynamic_scheduler_planner");
    for (const MigReplayResult& r : uniform) out += "," + MigJson(r, "uniform_static");
    out += "]}\n";
    std::ofstream f(json);
    f << out;
    if (!f) Fail("cannot write " + json);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "autoscale") return AutoscaleMain(argc - 1, argv + 1);
  if (argc > 1 && std::string(argv[1]) == "mig") return MigMain(argc - 1, argv + 1);
  // The core logs every preemption at info; GPUPOOL_TWIN_LOG=info shows them (and the
  // starvation reservations made and dropped).
  SetLogLevel(std::getenv("GPUPOOL_TWIN_LOG") != nullptr &&
                      std::string(std::getenv("GPUPOOL_TWIN_LOG")) == "info"
                  ? LogLevel::kInfo
                  : LogLevel::kWarn);
  LoadOptions load;
  TwinConfig config;
  std::string json, svg, org_path, what_if;
  double horizon_s = 0, warmup_s = 0;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::cout << kHelp;
      return 0;
    }
    if (i + 1 >= argc) Fail(a + ": needs a value (see --help)");
    std::string v = argv[++i];
    if (a == "--trace-dir")
      load.trace_dir = v;
    else if (a == "--workload")
      load.workload = v;
    else if (a == "--nodes")
      load.nodes_file = v;
    else if (a == "--load-factor")
      load.time_scale = Number(a, v, 0.001);
    else if (a == "--load-mode") {
      Result<LoadMode> m = ParseLoadMode(v);
      if (!m.ok()) Fail("--load-mode: " + m.status().message());
      load.load_mode = *m;
    } else if (a == "--replicas")
      load.replicas = static_cast<int>(Number(a, v, 1));
    else if (a == "--replica-gap-s")
      load.replica_gap_us = static_cast<int64_t>(Number(a, v, 0) * 1e6);
    else if (a == "--max-nodes")
      load.max_nodes = static_cast<int>(Number(a, v, 0));
    else if (a == "--max-tasks")
      load.max_tasks = static_cast<int64_t>(Number(a, v, 0));
    else if (a == "--org-tree")
      org_path = v;
    else if (a == "--strategy") {
      if (!placement::ParseStrategy(v).ok()) Fail("--strategy: unknown strategy '" + v + "'");
      config.strategy = v;
    } else if (a == "--preemption") {
      if (v != "on" && v != "off") Fail("--preemption: expected on or off, got '" + v + "'");
      config.preemption = v == "on";
    } else if (a == "--queue-order") {
      Result<QueueOrderKind> k = ParseQueueOrder(v);
      if (!k.ok()) Fail("--queue-order: " + k.status().message());
      config.queue_order = *k;
    } else if (a == "--overcommit") {
      config.compute_overcommit_permille = static_cast<int64_t>(Number(a, v, 1) * 1000 + 0.5);
    } else if (a == "--resume") {
      if (v != "full" && v != "remaining")
        Fail("--resume: expected full or remaining, got '" + v + "'");
      config.resume_remaining = v == "remaining";
    } else if (a == "--starvation-after-s") {
      config.scheduler.tenancy.starvation_reserve_after_ms =
          static_cast<int64_t>(Number(a, v, 0) * 1000);
    } else if (a == "--starvation-max") {
      config.scheduler.tenancy.starvation_max_reservations = static_cast<int32_t>(Number(a, v, 1));
    } else if (a == "--starvation-timeout-s") {
      config.scheduler.tenancy.starvation_reservation_timeout_ms =
          static_cast<int64_t>(Number(a, v, 1) * 1000);
    } else if (a == "--tick-ms")
      config.tick_ms = static_cast<int64_t>(Number(a, v, 1));
    else if (a == "--start-latency-ms")
      config.start_latency_ms = static_cast<int64_t>(Number(a, v, 0));
    else if (a == "--stop-latency-ms")
      config.stop_latency_ms = static_cast<int64_t>(Number(a, v, 0));
    else if (a == "--horizon-s")
      horizon_s = Number(a, v, 0);
    else if (a == "--warmup-s")
      warmup_s = Number(a, v, 0);
    else if (a == "--sample-s")
      config.sample_ms = static_cast<int64_t>(Number(a, v, 0.001) * 1000);
    else if (a == "--json")
      json = v;
    else if (a == "--progress")
      config.progress = v == "on";
    else if (a == "--svg")
      svg = v;
    else if (a == "--what-if")
      what_if = v;
    else
      Fail("unknown option '" + a + "' (see --help)");
  }
  if (load.trace_dir.empty()) Fail("--trace-dir is required (see --help)");
  if (json.empty()) Fail("--json is required (see --help)");
  if (svg.empty()) {
    svg = json;
    if (svg.size() > 5 && svg.ends_with(".json")) svg.resize(svg.size() - 5);
    svg += ".svg";
  }
  config.horizon_us = static_cast<int64_t>(horizon_s * 1e6);
  if (load.load_mode == LoadMode::kCopies && !(load.time_scale > 0 && load.time_scale <= 100))
    Fail("--load-factor: with --load-mode copies it must be in (0, 100] (copies of each pod)");
  config.warmup_us = static_cast<int64_t>(warmup_s * 1e6);

  OrgTree org = DefaultOrgTree();
  if (!org_path.empty()) {
    Result<OrgTree> parsed = LoadOrgTree(org_path);
    if (!parsed.ok()) Fail(parsed.status().ToString());
    org = std::move(*parsed);
  }
  Result<Workload> w = LoadTrace(load, org);
  if (!w.ok()) Fail(w.status().ToString());
  std::printf(
      "workload %s: %zu nodes, %lld GPUs, %zu tasks, %zu gangs (%lld CPU-only pods left out)\n",
      w->name.c_str(), w->nodes.size(), static_cast<long long>(w->GpuCount()), w->tasks.size(),
      w->gangs.size(), static_cast<long long>(w->skipped));

  Result<TwinReport> base = RunTwin(*w, org, config);
  if (!base.ok()) Fail(base.status().ToString());
  PrintSummary(*base);
  if (what_if.empty()) {
    if (!Write(json, ToJson(*base))) Fail("cannot write " + json);
    if (!Write(svg, ToSvg(*base))) Fail("cannot write " + svg);
    return 0;
  }
  Result<WhatIf> wi = LoadWhatIf(what_if, config);
  if (!wi.ok()) Fail(wi.status().ToString());
  OrgTree org2 = org;
  Workload w2 = *w;
  if (wi->org_tree) {
    Result<OrgTree> parsed = LoadOrgTree(*wi->org_tree);
    if (!parsed.ok()) Fail(parsed.status().ToString());
    org2 = std::move(*parsed);
    Result<Workload> reloaded = LoadTrace(load, org2);  // tenants and classes follow the tree
    if (!reloaded.ok()) Fail(reloaded.status().ToString());
    w2 = std::move(*reloaded);
  }
  Result<TwinReport> cand = RunTwin(w2, org2, wi->config);
  if (!cand.ok()) Fail(cand.status().ToString());
  PrintSummary(*cand);
  if (!Write(json, WhatIfJson(*base, *cand))) Fail("cannot write " + json);
  if (!Write(svg, ToSvg(*base, &*cand))) Fail("cannot write " + svg);
  return 0;
}
