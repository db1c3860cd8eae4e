// gpupool-sim: replays Alibaba GPU trace workloads through the placement engine under FGD's
// protocol and compares strategies. Wiring only: the protocol is placement/sim/replay.h, the
// output placement/sim/report.h.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "placement/sim/bound.h"
#include "placement/sim/replay.h"
#include "placement/sim/report.h"
#include "placement/sim/trace.h"

namespace {

using namespace gpupool;
using namespace gpupool::placement;

constexpr const char* kHelp = R"(usage: gpupool-sim [options]

Replays a workload of the Alibaba GPU trace v2023 through the placement engine, following FGD's
protocol (traces/alibaba-gpu-v2023/PROTOCOL.md): per seed, shuffle the tasks, append uniform
resamples until the GPU request reaches TUNE × capacity, place online, drop what does not fit.
Prints unallocated GPU % at arrived = 100% per strategy (mean ± sd over seeds).

options:
  --trace-dir DIR    folder with openb_*.csv (default: ../shared/traces/alibaba-gpu-v2023)
  --workload NAME    pod list openb_pod_list_NAME.csv; "all" = every pod list in the folder
                     (default: default)
  --nodes FILE       node list inside the trace folder (default: openb_node_list_gpu_node.csv)
  --strategy LIST    comma-separated strategy names, or "all" (default: all)
  --seeds A-B|A,B,…  seeds (default: 42-51)
  --tune X           stop resampling at X × capacity (default: 1.3)
  --limit N          place only the first N arrivals of each run (quick checks)
  --out-dir DIR      write DIR/sim-WORKLOAD.json and DIR/sim-WORKLOAD.svg
  --bound-stride N   also compute a proven lower bound on unallocated % (placement/sim/bound.h),
                     from LPs every N events of the bin at arrived = 100% and at its last
                     (default: 40; 0 = skip the bound). CPU-only nodes count: they host
                     CPU-only tasks in its LP. Refused only for a node list with no GPU
  --bound KIND       protocol (default): no policy that follows the protocol's rule — drop a
                     task only when no node can host it — can beat it; a policy that may refuse
                     tasks is not bound by it. packing: no policy at all, even one that refuses
                     tasks, can beat it (weaker)
  --bound-keys LIST  protocol bound: comma-separated cover shares in (0, 1] (default:
                     0.7,0.95); a task is a key when later arrivals needing at least as much
                     bring that share of capacity; each share gives a valid bound and the least
                     is kept
  --bound-classes N  protocol and packing bound: a workload with more task classes than N is
                     grouped more coarsely (memory left out, CPU rounded down, then left out):
                     still a valid bound, looser, and faster (default: 4000; every workload
                     of the trace and of bench/workload_gen has fewer: exact classes)
  --bound-timed      protocol bound: also the time-indexed scenarios (docs/placement.md, "A
                     provable bound", part 4): a dropped task proves every node full, bounded
                     by an LP that splits the arrivals at the drop. Valid and never looser,
                     but measured: cpu300 unchanged, cpu-scarce +0.03 point at most for 3x
                     the CPU time (off by default)
  --per-seed         also print every seed's result, the bound and the gap to it
  --online           place as gpupoold does: each strategy learns the workload from the
                     arrivals so far (placement/workload_feed.h), no peek at the future.
                     Without it: oracle mode, the workload taken from the whole trace up front
                     (FGD's artifact does this; no daemon can) — for comparison only
  --help             this text
strategies: first-fit best-fit spread dot-product gpu-packing gpu-clustering fgd fgd-pack random
)";

struct Options {
  std::string trace_dir = "../shared/traces/alibaba-gpu-v2023";
  std::string workload = "default";
  std::string nodes = "openb_node_list_gpu_node.csv";
  std::vector<Strategy> strategies;
  std::vector<uint64_t> seeds;
  double tune = 1.3;
  size_t limit = 0;
  std::string out_dir;
  int bound_stride = 40;
  bool bound_protocol = true;
  std::vector<double> bound_keys;  // empty: BoundOptions' default
  size_t bound_classes = sim::kMaxBoundClasses;
  bool bound_timed = false;
  bool per_seed = false;
  bool online = false;
};

std::vector<std::string> SplitList(const std::string& s) {
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

Status ParseSeeds(const std::string& s, std::vector<uint64_t>* out) {
  const size_t dash = s.find('-');
  try {
    if (dash != std::string::npos) {
      for (uint64_t x = std::stoull(s.substr(0, dash)); x <= std::stoull(s.substr(dash + 1)); ++x)
        out->push_back(x);
    } else {
      for (const std::string& p : SplitList(s)) out->push_back(std::stoull(p));
    }
  } catch (const std::exception&) {
    return Status::InvalidArgument("--seeds: expected A-B or A,B,…, got '" + s + "'");
  }
  return out->empty() ? Status::InvalidArgument("--seeds: no seed in '" + s + "'") : Status::Ok();
}

Result<Options> ParseArgs(int argc, char** argv) {
  Options o;
  std::string strategies = "all", seeds = "42-51";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::cout << kHelp;
      std::exit(0);
    }
    if (a == "--per-seed") {
      o.per_seed = true;
      continue;
    }
    if (a == "--online") {
      o.online = true;
      continue;
    }
    if (a == "--bound-timed") {
      o.bound_timed = true;
      continue;
    }
    if (i + 1 >= argc) return Status::InvalidArgument(a + ": missing value (see --help)");
    const std::string v = argv[++i];
    if (a == "--trace-dir")
      o.trace_dir = v;
    else if (a == "--workload")
      o.workload = v;
    else if (a == "--nodes")
      o.nodes = v;
    else if (a == "--strategy")
      strategies = v;
    else if (a == "--seeds")
      seeds = v;
    else if (a == "--tune")
      o.tune = std::atof(v.c_str());
    else if (a == "--limit")
      o.limit = static_cast<size_t>(std::atoll(v.c_str()));
    else if (a == "--out-dir")
      o.out_dir = v;
    else if (a == "--bound-stride")
      o.bound_stride = std::atoi(v.c_str());
    else if (a == "--bound" && (v == "protocol" || v == "packing"))
      o.bound_protocol = v == "protocol";
    else if (a == "--bound-keys") {
      for (const std::string& k : SplitList(v)) {
        char* end = nullptr;
        const double x = std::strtod(k.c_str(), &end);
        if (end == k.c_str() || *end != '\0' || !(x > 0 && x <= 1))
          return Status::InvalidArgument("--bound-keys: expected shares in (0, 1], got '" + k +
                                         "'");
        o.bound_keys.push_back(x);
      }
    } else if (a == "--bound-classes") {
      char* end = nullptr;
      const long long n = std::strtoll(v.c_str(), &end, 10);
      if (end == v.c_str() || *end != '\0' || n < 1)
        return Status::InvalidArgument("--bound-classes: expected a positive count, got '" + v +
                                       "'");
      o.bound_classes = static_cast<size_t>(n);
    } else if (a == "--bound")
      return Status::InvalidArgument("--bound: expected protocol or packing, got '" + v + "'");
    else
      return Status::InvalidArgument("unknown option '" + a + "' (see --help)");
  }
  if (strategies == "all") {
    o.strategies.assign(AllStrategies().begin(), AllStrategies().end());
  } else {
    for (const std::string& name : SplitList(strategies)) {
      GPUPOOL_ASSIGN_OR_RETURN(Strategy s, ParseStrategy(name));
      o.strategies.push_back(s);
    }
  }
  GPUPOOL_RETURN_IF_ERROR(ParseSeeds(seeds, &o.seeds));
  if (o.tune <= 0) return Status::InvalidArgument("--tune: must be positive");
  return o;
}

std::vector<std::string> Workloads(const Options& o) {
  if (o.workload != "all") return {o.workload};
  std::vector<std::string> out;
  const std::string prefix = "openb_pod_list_";
  for (const auto& e : std::filesystem::directory_iterator(o.trace_dir)) {
    const std::string f = e.path().filename().string();
    if (f.rfind(prefix, 0) == 0 && e.path().extension() == ".csv")
      out.push_back(f.substr(prefix.size(), f.size() - prefix.size() - 4));
  }
  std::sort(out.begin(), out.end());
  return out;
}

Status WriteFile(const std::string& path, const std::string& text) {
  std::ofstream f(path);
  f << text;
  return f ? Status::Ok() : Status::Unavailable("cannot write '" + path + "'");
}

Status RunWorkload(const Options& o, const std::vector<sim::TraceNode>& nodes,
                   const std::string& workload) {
  GPUPOOL_ASSIGN_OR_RETURN(std::string text,
                           sim::LoadFile(o.trace_dir + "/openb_pod_list_" + workload + ".csv"));
  GPUPOOL_ASSIGN_OR_RETURN(std::vector<sim::TraceTask> tasks, sim::ParseTasks(text));
  const int64_t capacity = sim::CapacityMilli(nodes);
  std::vector<sim::ReplayResult> results;
  std::vector<sim::Summary> rows;
  for (Strategy s : o.strategies) {
    const std::vector<WorkloadClass> target =
        o.online ? std::vector<WorkloadClass>{} : sim::WorkloadFor(s, tasks);
    double seconds = 0, cpu_seconds = 0;
    int64_t decisions = 0;
    for (uint64_t seed : o.seeds) {
      const std::vector<sim::TraceTask> arrivals = sim::Arrivals(tasks, seed, o.tune, capacity);
      const auto t0 = std::chrono::steady_clock::now();
      const std::clock_t c0 = std::clock();
      GPUPOOL_ASSIGN_OR_RETURN(sim::ReplayResult r,
                               o.online ? sim::ReplayOnline(nodes, arrivals, s, seed, o.limit)
                                        : sim::Replay(nodes, arrivals, target, s, seed, o.limit));
      cpu_seconds += static_cast<double>(std::clock() - c0) / CLOCKS_PER_SEC;
      seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      decisions += r.tasks;
      results.push_back(std::move(r));
    }
    sim::Summary sum = sim::Summarize(s, results);
    sum.seconds_per_replay = seconds / static_cast<double>(o.seeds.size());
    sum.cpu_seconds_per_replay = cpu_seconds / static_cast<double>(o.seeds.size());
    sum.decisions_per_second = cpu_seconds > 0 ? static_cast<double>(decisions) / cpu_seconds : 0;
    rows.push_back(sum);
  }
  std::vector<sim::SeedBound> bounds;
  const std::string refused = sim::BoundRefusal(nodes);
  if (o.bound_stride > 0 && o.limit == 0 && !refused.empty())
    std::cout << "bound: not computed: " << refused << "\n";
  if (o.bound_stride > 0 && o.limit == 0 && refused.empty()) {
    double seconds = 0, cpu_seconds = 0;
    for (uint64_t seed : o.seeds) {
      const std::vector<sim::TraceTask> arrivals = sim::Arrivals(tasks, seed, o.tune, capacity);
      const auto t0 = std::chrono::steady_clock::now();
      const std::clock_t c0 = std::clock();
      sim::BoundOptions bo;
      bo.stride = o.bound_stride;
      bo.protocol = o.bound_protocol;
      if (!o.bound_keys.empty()) bo.key_covers = o.bound_keys;
      bo.max_classes = o.bound_classes;
      bo.timed = o.bound_timed;
      bounds.push_back(sim::SeedBound{seed, sim::UnallocatedLowerBound(nodes, arrivals, 100, bo)});
      cpu_seconds += static_cast<double>(std::clock() - c0) / CLOCKS_PER_SEC;
      seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
    sim::Summary b = sim::SummarizeBound(bounds);
    b.label = o.bound_protocol ? "bound" : "packing bound";
    b.seconds_per_replay = seconds / static_cast<double>(o.seeds.size());
    b.cpu_seconds_per_replay = cpu_seconds / static_cast<double>(o.seeds.size());
    rows.push_back(b);
  }
  const std::string mode = o.online ? "online" : "oracle";
  std::cout << sim::Table(workload, rows, mode) << std::endl;
  if (o.per_seed) std::cout << sim::PerSeedTable(workload, results, bounds) << std::endl;
  if (!o.out_dir.empty()) {
    std::filesystem::create_directories(o.out_dir);
    GPUPOOL_RETURN_IF_ERROR(WriteFile(o.out_dir + "/sim-" + workload + ".json",
                                      sim::Json(workload, o.tune, results, rows, bounds, mode)));
    GPUPOOL_RETURN_IF_ERROR(
        WriteFile(o.out_dir + "/sim-" + workload + ".svg", sim::Svg(workload, results)));
  }
  return Status::Ok();
}

Status Run(int argc, char** argv) {
  GPUPOOL_ASSIGN_OR_RETURN(Options o, ParseArgs(argc, argv));
  GPUPOOL_ASSIGN_OR_RETURN(std::string node_text, sim::LoadFile(o.trace_dir + "/" + o.nodes));
  GPUPOOL_ASSIGN_OR_RETURN(std::vector<sim::TraceNode> nodes, sim::ParseNodes(node_text));
  for (const std::string& w : Workloads(o))
    GPUPOOL_RETURN_IF_ERROR(RunWorkload(o, nodes, w).WithContext(w));
  return Status::Ok();
}

}  // namespace

int main(int argc, char** argv) {
  const Status st = Run(argc, argv);
  if (!st.ok()) {
    std::fprintf(stderr, "gpupool-sim: %s\n", st.ToString().c_str());
    return 2;
  }
  return 0;
}
