// frag_diag: where a strategy leaves GPUs unallocated at arrived = 100 % (a diagnosis aid for
// docs/benchmarks.md, not a benchmark figure of its own).
//
//   frag_diag --trace-dir DIR --nodes FILE --workload NAME [--strategy S] [--seeds A-B]
//
// Replays each seed online exactly as `gpupool-sim --online` does (same arrivals, same
// WorkloadFeed, same tie seed) and stops at the last arrival of the bin arrived = 100 %. Then,
// per GPU model, it prints the idle GPU split by why it is idle — whole idle devices on nodes
// whose free CPU (or memory) could not feed even one more whole-GPU task of the workload's
// lightest kind, whole idle devices on nodes that still could, and partial slivers — and per task
// kind (share / 1 / 2 / 4 / 8 GPUs, pinned or not) how many arrivals were dropped up to that
// point, and whether GPU share alone would have fitted somewhere (then CPU or memory blocked it).
// It also prints the CPU horizon — the arrived % at which the arrivals so far ask for every core
// of the pool — beside the first drop of any task: where the two meet, the CPU, not the policy,
// ended the placing.
// Figures are summed over the seeds and divided by their number.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "placement/sim/replay.h"
#include "placement/sim/trace.h"
#include "placement/strategy.h"
#include "placement/workload_feed.h"

namespace {

using namespace gpupool::placement;
using namespace gpupool::placement::sim;

constexpr const char* kHelp = R"(usage: frag_diag --trace-dir DIR --nodes FILE --workload NAME
                 [--strategy NAME] [--seeds A-B] [--tune X] [--by-cores]

Replays like gpupool-sim --online and reports, at arrived = 100%, the idle GPU per model by
cause (whole devices on CPU- or memory-exhausted nodes, whole devices elsewhere, slivers) and
the dropped arrivals per task kind with whether GPU share alone would have fitted, the cores
they asked for and the arrived % at the kind's first drop (mean over the seeds). It also
prints the CPU horizon (the arrived % at which the arrivals ask for every core of the pool)
beside the first drop of any task, with the GPU allocated and the CPU free then.
  --by-cores   split every kind by the task's cores (rounded down)
)";

// The task's kind; with `by_cores` also its cores (rounded down), which tells apart the CPU-only
// tasks that a nearly full node can still take from those it cannot.
std::string Kind(const TraceTask& t, bool by_cores) {
  std::string k = t.num_gpu == 0       ? "cpu-only"
                  : t.gpu_milli < 1000 ? "share"
                                       : std::to_string(t.num_gpu) + " GPU";
  if (by_cores) k += " " + std::to_string(t.cpu_milli / 1000) + "c";
  return k + (t.gpu_spec.empty() ? "" : " [" + t.gpu_spec + "]");
}

struct ModelIdle {
  int nodes = 0;
  double gpus = 0;
  double idle_whole_starved = 0;  // idle devices on nodes whose CPU/memory feeds no whole GPU
  double idle_whole_fed = 0;      // idle devices elsewhere
  double sliver = 0;              // idle share on partly used devices, milli/1000
  double cpu_free_cores = 0;
  double cpu_total_cores = 0;
  double partial_devices = 0;
};

struct Placed {
  double tasks = 0, gpu = 0, cpu = 0;  // GPUs and cores
};

struct Drops {
  double arrived = 0, dropped = 0, gpu_fit = 0;  // gpu_fit: GPU share alone would fit somewhere
  double cores_dropped = 0;
  double first_drop_pct = 0;  // Σ over seeds of the arrived % at the kind's first drop (or 100)
  int seeds_seen = 0;
};

}  // namespace

int main(int argc, char** argv) {
  std::string dir = "../shared/traces/alibaba-gpu-v2023",
              nodes_file = "openb_node_list_gpu_node.csv", workload = "default",
              strategy_name = "fgd-pack";
  uint64_t seed_lo = 42, seed_hi = 46;
  double tune = 1.3;
  bool by_cores = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::cerr << "frag_diag: " << a << " needs a value\n";
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--trace-dir")
      dir = next();
    else if (a == "--nodes")
      nodes_file = next();
    else if (a == "--workload")
      workload = next();
    else if (a == "--strategy")
      strategy_name = next();
    else if (a == "--tune" || a == "--seeds") {
      const std::string s = next();
      try {
        if (a == "--tune") {
          tune = std::stod(s);
        } else {
          const size_t dash = s.find('-');
          seed_lo = std::stoull(s.substr(0, dash));
          seed_hi = dash == std::string::npos ? seed_lo : std::stoull(s.substr(dash + 1));
        }
      } catch (const std::exception&) {
        std::cerr << "frag_diag: " << a << " " << s << ": not a number (or range A-B)\n";
        return 2;
      }
      if (tune <= 0 || seed_hi < seed_lo) {
        std::cerr << "frag_diag: " << a << " " << s << ": out of range\n";
        return 2;
      }
    } else if (a == "--by-cores") {
      by_cores = true;
    } else if (a == "--help") {
      std::cout << kHelp;
      return 0;
    } else {
      std::cerr << "frag_diag: unknown option " << a << "\n" << kHelp;
      return 2;
    }
  }
  auto strategy = ParseStrategy(strategy_name);
  if (!strategy.ok()) {
    std::cerr << "frag_diag: " << strategy.status().ToString() << "\n";
    return 2;
  }
  auto ntext = LoadFile(dir + "/" + nodes_file);
  auto ttext = LoadFile(dir + "/openb_pod_list_" + workload + ".csv");
  if (!ntext.ok() || !ttext.ok()) {
    std::cerr << "frag_diag: cannot read the node or pod list in " << dir << "\n";
    return 1;
  }
  auto nodes = ParseNodes(*ntext);
  auto trace = ParseTasks(*ttext);
  if (!nodes.ok() || !trace.ok()) {
    std::cerr << "frag_diag: cannot parse the node or pod list\n";
    return 1;
  }
  std::map<std::string, std::string> model_of;
  for (const TraceNode& n : *nodes) model_of[n.name] = n.model;
  const int64_t capacity = CapacityMilli(*nodes);
  // The lightest whole-GPU task's CPU and memory: a node that cannot give that has GPUs only
  // shares can use.
  int64_t min_whole_cpu = INT64_MAX, min_whole_mem = INT64_MAX;
  for (const TraceTask& t : *trace)
    if (t.gpu_milli >= 1000 && t.num_gpu == 1) {
      min_whole_cpu = std::min(min_whole_cpu, t.cpu_milli);
      min_whole_mem = std::min(min_whole_mem, t.memory_mib);
    }
  std::map<std::string, ModelIdle> idle;
  std::map<std::string, Drops> drops;
  std::map<std::pair<std::string, std::string>, Placed> placed_on;  // (model, kind)
  double unalloc = 0;
  // The CPU horizon: where the arrivals so far ask for every core of the pool. A policy that
  // drops a task only when no node can host it places everything up to about there, so the GPU
  // arrived by then (less what was dropped before) is what the CPU lets any such policy place.
  int64_t pool_cpu = 0;
  for (const TraceNode& n : *nodes) pool_cpu += n.cpu_milli;
  double horizon_pct = 0, first_any_pct = 0, used_at_first = 0, cpu_free_at_first = 0;
  const double seeds = static_cast<double>(seed_hi - seed_lo + 1);
  for (uint64_t seed = seed_lo; seed <= seed_hi; ++seed) {
    const std::vector<TraceTask> arrivals = Arrivals(*trace, seed, tune, capacity);
    PoolPolicy policy;
    policy.strategy = *strategy;
    policy.tie_seed = ReplayTieSeed(*strategy, seed);
    Engine engine(policy);
    for (const TraceNode& n : *nodes)
      if (!engine.AddNode(ToNodeSpec(n)).ok()) return 1;
    WorkloadFeed feed;
    feed.Sync(engine);
    int64_t arrived = 0, used = 0, cpu_arrived = 0, cpu_used = 0;
    bool horizon_seen = false, dropped_any = false;
    std::map<std::string, double> first_drop;  // kind → arrived % at its first drop this seed
    for (const TraceTask& t : arrivals) {
      // Stop after the last arrival of bin 100 (the next one would round to 101).
      if (std::lround(100.0 * static_cast<double>(arrived + t.GpuMilli()) /
                      static_cast<double>(capacity)) > 100)
        break;
      cpu_arrived += t.cpu_milli;
      if (!horizon_seen && cpu_arrived >= pool_cpu) {
        horizon_seen = true;
        horizon_pct += 100.0 * static_cast<double>(arrived) / static_cast<double>(capacity);
      }
      const Request req = ToRequest(t);
      feed.Observe(req, 1);
      feed.Sync(engine);
      const Decision d = engine.Place(req, PlaceOptions{false});
      const bool placed = d.placed && engine.Commit(d.allocation).ok();
      const std::string kind = Kind(t, by_cores);
      Drops& dr = drops[kind];
      dr.arrived += 1;
      if (placed) {
        used += t.GpuMilli();
        cpu_used += t.cpu_milli;
        Placed& p = placed_on[{model_of[d.allocation.node], kind}];
        p.tasks += 1;
        p.gpu += static_cast<double>(t.GpuMilli()) / 1000;
        p.cpu += static_cast<double>(t.cpu_milli) / 1000;
      } else {
        dr.dropped += 1;
        if (!dropped_any) {
          dropped_any = true;
          first_any_pct += 100.0 * static_cast<double>(arrived) / static_cast<double>(capacity);
          used_at_first += 100.0 * static_cast<double>(used) / static_cast<double>(capacity);
          cpu_free_at_first +=
              100.0 * static_cast<double>(pool_cpu - cpu_used) / static_cast<double>(pool_cpu);
        }
        dr.cores_dropped += static_cast<double>(t.cpu_milli) / 1000;
        first_drop.emplace(kind,
                           100.0 * static_cast<double>(arrived) / static_cast<double>(capacity));
        // Would GPU share alone have fitted? Same request without CPU and memory.
        Request bare = req;
        bare.cpu_milli = 0;
        bare.memory_mib = 0;
        if (engine.Place(bare, PlaceOptions{false}).placed) dr.gpu_fit += 1;
      }
      arrived += t.GpuMilli();
    }
    if (!horizon_seen) horizon_pct += 100.0;
    if (!dropped_any) {
      first_any_pct += 100.0;
      used_at_first += 100.0 * static_cast<double>(used) / static_cast<double>(capacity);
    }
    for (auto& [kind, dr] : drops) {
      const auto it = first_drop.find(kind);
      dr.first_drop_pct += it != first_drop.end() ? it->second : 100.0;
      dr.seeds_seen += 1;
    }
    unalloc += 100.0 - 100.0 * static_cast<double>(used) / static_cast<double>(capacity);
    for (const NodeCapacity& n : engine.Capacity()) {
      if (n.devices.empty()) continue;
      ModelIdle& m = idle[model_of[n.name]];
      m.nodes += 1;
      const int64_t cpu_free = n.cpu_milli - n.cpu_allocated;
      const int64_t mem_free = n.memory_mib - n.memory_allocated;
      const bool starved = cpu_free < min_whole_cpu || mem_free < min_whole_mem;
      m.cpu_free_cores += static_cast<double>(cpu_free) / 1000;
      m.cpu_total_cores += static_cast<double>(n.cpu_milli) / 1000;
      for (const DeviceCapacity& d : n.devices) {
        m.gpus += 1;
        const double total = static_cast<double>(d.offered.milli_tflops);
        const double used_share =
            total > 0 ? static_cast<double>(d.allocated.milli_tflops) / total : 0;
        if (d.exclusive_taken || used_share >= 0.9995) continue;
        if (used_share <= 0.0005) {
          (starved ? m.idle_whole_starved : m.idle_whole_fed) += 1;
        } else {
          m.sliver += 1 - used_share;
          m.partial_devices += 1;
        }
      }
    }
  }
  std::printf(
      "workload %s, strategy %s, seeds %llu-%llu: unallocated at the last arrival of bin "
      "100: %.2f %%\n\n",
      workload.c_str(), strategy_name.c_str(), static_cast<unsigned long long>(seed_lo),
      static_cast<unsigned long long>(seed_hi), unalloc / seeds);
  std::printf(
      "CPU horizon (the arrivals ask for every core) at %.1f %% arrived; first drop of any task "
      "at %.1f %% arrived, with %.1f %% of the GPU allocated and %.1f %% of the CPU free\n\n",
      horizon_pct / seeds, first_any_pct / seeds, used_at_first / seeds, cpu_free_at_first / seeds);
  std::printf("%-10s %6s %7s | %10s %10s %9s %9s | %10s\n", "model", "nodes", "GPUs", "idle:starv",
              "idle:fed", "slivers", "partial", "CPU free %");
  for (const auto& [model, m] : idle)
    std::printf("%-10s %6.0f %7.0f | %10.1f %10.1f %9.1f %9.1f | %10.1f\n", model.c_str(),
                m.nodes / seeds, m.gpus / seeds, m.idle_whole_starved / seeds,
                m.idle_whole_fed / seeds, m.sliver / seeds, m.partial_devices / seeds,
                100.0 * m.cpu_free_cores / std::max(1.0, m.cpu_total_cores));
  std::printf(
      "\n(idle:starv = idle devices on nodes whose free CPU < %.1f cores or memory < %lld "
      "MiB, the lightest 1-GPU task's)\n\n",
      static_cast<double>(min_whole_cpu) / 1000, static_cast<long long>(min_whole_mem));
  std::printf("%-28s %9s %9s %14s %13s %11s\n", "kind", "arrived", "dropped", "GPU-share fit",
              "cores dropped", "first drop");
  for (const auto& [kind, d] : drops)
    std::printf("%-28s %9.1f %9.1f %14.1f %13.1f %10.1f%%\n", kind.c_str(), d.arrived / seeds,
                d.dropped / seeds, d.gpu_fit / seeds, d.cores_dropped / seeds,
                d.first_drop_pct / std::max(1, d.seeds_seen));
  std::printf("\n%-10s %-28s %9s %9s %9s %11s\n", "model", "placed kind", "tasks", "GPUs", "cores",
              "cores/GPU");
  for (const auto& [key, p] : placed_on) {
    std::printf("%-10s %-28s %9.1f %9.1f %9.1f", key.first.c_str(), key.second.c_str(),
                p.tasks / seeds, p.gpu / seeds, p.cpu / seeds);
    if (p.gpu > 0) {
      std::printf(" %11.1f\n", p.cpu / p.gpu);
    } else {
      std::printf(" %11s\n", "-");
    }
  }
  return 0;
}
