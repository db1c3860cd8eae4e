// workload_gen: synthetic cluster + workload generators in the Alibaba trace's CSV format, so
// gpupool-sim and gpupool-twin can replay clusters unlike the trace's
// (docs/benchmarks-archive.md, "Synthetic clusters"; docs/twin.md, "Synthetic workloads").
//
//   workload_gen --out-dir DIR [--generator NAME|all] [--seed N] [--tasks N] [--days D]
//                [--hours H] [--load X] [--cloud-nodes N]
//
// writes DIR/nodes_NAME.csv (sn,cpu_milli,memory_mib,gpu,model) and DIR/openb_pod_list_NAME.csv
// (name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,creation_time,deletion_time,owner,
// gang); replay with
//   gpupool-sim --online --trace-dir DIR --nodes nodes_NAME.csv --workload NAME
//   gpupool-twin --trace-dir DIR --nodes nodes_NAME.csv --workload NAME --json OUT
// Deterministic for a seed (its own multiply-shift draws, not std distributions). The six
// placement generators draw their rows first from the seed's stream and their time columns
// afterwards from a stream of their own (twin/synthetic.h AssignTimes), so the placement columns
// are what they were before the time columns existed (tests/twin/synthetic_test.cc checks).
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "twin/synthetic.h"

namespace {

using gpupool::twin::SynthPod;

constexpr const char* kHelp = R"(usage: workload_gen --out-dir DIR [options]

Writes synthetic clusters and workloads in the Alibaba trace's CSV format:
DIR/nodes_NAME.csv and DIR/openb_pod_list_NAME.csv (with creation_time,
deletion_time, qos, owner and gang columns), replayed by
  gpupool-sim --online --trace-dir DIR --nodes nodes_NAME.csv --workload NAME
  gpupool-twin --trace-dir DIR --nodes nodes_NAME.csv --workload NAME --json OUT

generators:
  cloud-inference    GPU cloud: 8xH100/8xA100/4xL40S/4xL4/4xT4 nodes; 70% inference slices
                     (some pinned to small cards), 20% 1 GPU, 10% 2-8 GPU training
  training-multigpu  8xH100/8xA100 nodes (some 4x); mostly 8-, 4- and 2-GPU jobs, 12 cores/GPU
  mixed-vendor       NVIDIA H100/A100/L40S and AMD MI300X/MI250 nodes; 40% AMD-only, 40%
                     NVIDIA-only, 20% any vendor
  cpu-scarce         8-GPU nodes with 32-48 cores; tasks need 4-16 cores per GPU, plus CPU-only
  model-strict       six models; 90% of tasks pinned to one model, the rest to two
  mig-heavy          A100/H100 nodes; 80% MIG-sized slices (1/7, 2/7, 3/7, 4/7 of a GPU; the
                     trace format has no MIG geometry, so slices are shares), 20% whole GPUs
  gpu-cloud          dynamic GPU cloud: 16 nodes each of 8xH100, 8xA100,
                     4xL40S, 4xL4; diurnal inference services whose fractional-slice replicas
                     scale with a 24-h curve (40% of the GPUs on average), training gangs of
                     1-4 whole nodes for 2-48 h in bursts (35%), office-hours notebooks (10%);
                     demand 0.85 x --load of the GPUs on average, above them at the daily peak

held-out fleets (each seed draws its own fleet of T4, L4, L40S, A100 and H100 nodes of 1-8
GPUs, and its own mix of shares, whole GPUs, 2-8 GPU training and CPU-only work):
  fleet-cloud        about 1,200 GPUs; a fifth of the shares and whole GPUs pinned to models
  fleet-small-nodes  about 1,000 GPUs, mostly in nodes of 1 or 2; inference-heavy
  fleet-pinned       about 1,200 GPUs; half of the shares and whole GPUs pinned, more training

The six placement generators' tasks get times from a separate stream (the placement columns do
not change): GPU shares LS with diurnal arrivals and 10 min-12 h lifetimes, one whole GPU
Burstable in office hours for 30 min-8 h, 2+ GPUs and CPU-only BE, uniform, 1-48 h / 5 min-2 h;
arrivals over --days. docs/twin.md, "Synthetic workloads", has the processes.

options:
  --out-dir DIR      where to write (required)
  --generator NAME   one of the above, or all (default: all)
  --seed N           (default: 1)
  --tasks N          tasks per workload (default: 8000; the sim resamples to 1.3 x capacity);
                     gpu-cloud's count follows from --hours and --load
  --days D           arrivals of the six placement generators spread over D days (default: 7)
  --hours H          gpu-cloud: arrivals in [0, H) hours (default: 96)
  --load X           gpu-cloud: demand scale, 1 = 85% of the GPUs on average (default: 1)
  --cloud-nodes N    gpu-cloud: nodes of each of the four kinds (default: 16: 64 nodes, 384
                     GPUs; the services, gangs and notebooks scale with it)
  --help             this text
)";

struct Node {
  int64_t cpu_milli, memory_mib;
  int gpus;
  std::string model;
};
struct Task {
  int64_t cpu_milli, memory_mib;
  int num_gpu;
  int32_t gpu_milli;
  std::string gpu_spec;
};

// The placement generators draw with the twin's generator (same stream, same draws).
using Rng = gpupool::twin::SynthRng;

constexpr int64_t kGiB = 1024;

void AddNodes(std::vector<Node>* out, int count, int64_t cores, int64_t mem_gib, int gpus,
              const std::string& model) {
  for (int i = 0; i < count; ++i) out->push_back(Node{cores * 1000, mem_gib * kGiB, gpus, model});
}

Task Share(Rng& r, int32_t lo, int32_t hi, int64_t cores_lo, int64_t cores_hi, std::string spec) {
  const int32_t g = static_cast<int32_t>(r.Between(lo, hi) / 10 * 10);
  const int64_t cores = r.Between(cores_lo, cores_hi);
  return Task{cores * 1000, r.Between(2, 8) * cores * kGiB / 2, 1, g, std::move(spec)};
}

Task Whole(Rng& r, int gpus, int64_t cores_per_gpu, std::string spec) {
  const int64_t cores = gpus * cores_per_gpu + r.Between(0, 2 * gpus);
  return Task{cores * 1000, r.Between(4, 12) * gpus * 8 * kGiB, gpus, 1000, std::move(spec)};
}

void CloudInference(Rng& r, int n, std::vector<Node>* nodes, std::vector<Task>* tasks) {
  AddNodes(nodes, 120, 192, 2048, 8, "H100");
  AddNodes(nodes, 100, 128, 1024, 8, "A100");
  AddNodes(nodes, 120, 64, 512, 4, "L40S");
  AddNodes(nodes, 140, 32, 256, 4, "L4");
  AddNodes(nodes, 120, 32, 192, 4, "T4");
  for (int i = 0; i < n; ++i) {
    switch (r.Pick({70, 20, 6, 3, 1})) {
      case 0: {  // inference slice; a third pinned to the small cards, a tenth to big ones
        const int where = static_cast<int>(r.Pick({6, 3, 1}));
        tasks->push_back(Share(r, 100, 500, 1, 8,
                               where == 1   ? "L4|T4"
                               : where == 2 ? "L40S|A100"
                                            : ""));
        break;
      }
      case 1:
        tasks->push_back(Whole(r, 1, 8, r.Chance(30) ? "H100|A100" : ""));
        break;
      case 2:
        tasks->push_back(Whole(r, 2, 12, "H100|A100"));
        break;
      case 3:
        tasks->push_back(Whole(r, 4, 12, "H100|A100"));
        break;
      default:
        tasks->push_back(Whole(r, 8, 16, "H100"));
    }
  }
}

void TrainingMultiGpu(Rng& r, int n, std::vector<Node>* nodes, std::vector<Task>* tasks) {
  AddNodes(nodes, 200, 192, 2048, 8, "H100");
  AddNodes(nodes, 150, 128, 1024, 8, "A100");
  AddNodes(nodes, 100, 64, 512, 4, "A100");
  for (int i = 0; i < n; ++i) {
    switch (r.Pick({30, 25, 20, 15, 10})) {
      case 0:
        tasks->push_back(Whole(r, 8, 12, r.Chance(50) ? "H100" : ""));
        break;
      case 1:
        tasks->push_back(Whole(r, 4, 12, ""));
        break;
      case 2:
        tasks->push_back(Whole(r, 2, 12, ""));
        break;
      case 3:
        tasks->push_back(Whole(r, 1, 12, ""));
        break;
      default:
        tasks->push_back(Share(r, 200, 600, 2, 8, ""));
    }
  }
}

void MixedVendor(Rng& r, int n, std::vector<Node>* nodes, std::vector<Task>* tasks) {
  AddNodes(nodes, 120, 192, 2048, 8, "H100");
  AddNodes(nodes, 100, 128, 1024, 8, "A100");
  AddNodes(nodes, 100, 64, 512, 4, "L40S");
  AddNodes(nodes, 120, 192, 2048, 8, "MI300X");
  AddNodes(nodes, 100, 128, 1024, 4, "MI250");
  const std::vector<std::string> vendor = {"MI300X|MI250", "H100|A100|L40S", ""};
  for (int i = 0; i < n; ++i) {
    const std::string spec = vendor[r.Pick({40, 40, 20})];
    switch (r.Pick({45, 30, 15, 10})) {
      case 0:
        tasks->push_back(Share(r, 100, 700, 1, 8, spec));
        break;
      case 1:
        tasks->push_back(Whole(r, 1, 8, spec));
        break;
      case 2:
        tasks->push_back(Whole(r, static_cast<int>(2 << r.Below(2)), 12, spec));  // 2 or 4
        break;
      default:
        tasks->push_back(Whole(r, 8, 12, spec == "" ? "H100|MI300X" : spec));
    }
  }
}

void CpuScarce(Rng& r, int n, std::vector<Node>* nodes, std::vector<Task>* tasks) {
  AddNodes(nodes, 250, 32, 512, 8, "A100");
  AddNodes(nodes, 200, 48, 768, 8, "H100");
  AddNodes(nodes, 150, 64, 512, 4, "L40S");
  for (int i = 0; i < n; ++i) {
    switch (r.Pick({40, 30, 15, 15})) {
      case 0:
        tasks->push_back(Share(r, 200, 800, 2, 12, ""));
        break;
      case 1:
        tasks->push_back(Whole(r, 1, r.Between(4, 16), ""));
        break;
      case 2:
        tasks->push_back(Whole(r, static_cast<int>(2 << r.Below(2)), r.Between(4, 8), ""));
        break;
      default:  // CPU-only: competes for the scarce cores
        tasks->push_back(Task{r.Between(2, 16) * 1000, r.Between(4, 64) * kGiB, 0, 0, ""});
    }
  }
}

void ModelStrict(Rng& r, int n, std::vector<Node>* nodes, std::vector<Task>* tasks) {
  const std::vector<std::string> models = {"H100", "A100", "L40S", "A10", "L4", "T4"};
  const std::vector<int> gpus = {8, 8, 4, 4, 4, 2};
  const std::vector<int> counts = {80, 100, 100, 120, 120, 150};
  for (size_t m = 0; m < models.size(); ++m)
    AddNodes(nodes, counts[m], gpus[m] * 12, gpus[m] * 128, gpus[m], models[m]);
  for (int i = 0; i < n; ++i) {
    const size_t m = r.Below(models.size());
    std::string spec = models[m];
    if (r.Chance(10)) spec += "|" + models[(m + 1) % models.size()];
    const int most = gpus[m];
    switch (r.Pick({50, 30, 20})) {
      case 0:
        tasks->push_back(Share(r, 100, 900, 1, 6, spec));
        break;
      case 1:
        tasks->push_back(Whole(r, 1, 8, spec));
        break;
      default:
        tasks->push_back(Whole(r, std::min(most, static_cast<int>(2 << r.Below(2))), 8, spec));
    }
  }
}

void MigHeavy(Rng& r, int n, std::vector<Node>* nodes, std::vector<Task>* tasks) {
  AddNodes(nodes, 250, 128, 1024, 8, "A100");
  AddNodes(nodes, 150, 192, 2048, 8, "H100");
  const std::vector<int32_t> slices = {142, 285, 428, 571};  // 1g, 2g, 3g, 4g of 7
  for (int i = 0; i < n; ++i) {
    if (r.Chance(80)) {
      const int32_t g = slices[r.Pick({45, 25, 15, 15})];
      const int64_t cores = r.Between(1, 4) * (g / 142);
      tasks->push_back(Task{cores * 1000, (g / 142) * 10 * kGiB, 1, g, ""});
    } else {
      tasks->push_back(Whole(r, r.Chance(70) ? 1 : 2, 12, ""));
    }
  }
}

// Held-out fleets (issue 31, docs/placement.md "Tuning and held-out fleets"): unlike the six
// above, each seed draws its own fleet as well as its work, so a seed never used while tuning is
// a fleet placement has never seen. Five models from T4 to H100 in nodes of 1 to 8 GPUs; the host
// per GPU grows with the model, with the node's size varying around it.
struct FleetModel {
  const char* name;
  std::vector<int> shapes;  // GPUs per node this model comes in
  int64_t cores_per_gpu, mem_gib_per_gpu;
};

const std::vector<FleetModel>& FleetModels() {
  static const std::vector<FleetModel> m = {
      {"T4", {1, 2, 4}, 8, 48},        {"L4", {1, 2, 4, 8}, 12, 64},    {"L40S", {2, 4, 8}, 16, 96},
      {"A100", {1, 2, 4, 8}, 16, 128}, {"H100", {1, 2, 4, 8}, 24, 256},
  };
  return m;
}

// Nodes of every model and shape, `small_bias` percent more likely to take a shape of 1 or 2
// GPUs; about `gpus` GPUs in all. A node's cores are the model's per GPU × 0.75–1.5.
void DrawFleet(Rng& r, int gpus, int small_bias, std::vector<Node>* nodes) {
  std::vector<int> weight;  // per model, how much of the fleet it is
  for (size_t m = 0; m < FleetModels().size(); ++m)
    weight.push_back(static_cast<int>(r.Between(1, 6)));
  int total = 0;
  while (total < gpus) {
    const FleetModel& m = FleetModels()[r.Pick(weight)];
    std::vector<int> shape_weight;
    for (int s : m.shapes) shape_weight.push_back(s <= 2 ? 10 + small_bias : 10);
    const int g = m.shapes[r.Pick(shape_weight)];
    const int64_t cores = g * m.cores_per_gpu * r.Between(3, 6) / 4;
    nodes->push_back(Node{cores * 1000, g * m.mem_gib_per_gpu * kGiB, g, m.name});
    total += g;
  }
}

// A model pin: one model, or a group of neighbours (small cards, big cards).
std::string DrawPin(Rng& r) {
  static const std::vector<std::string> pins = {"T4",    "L4",      "L40S",      "A100",     "H100",
                                                "T4|L4", "L4|L40S", "A100|H100", "L40S|A100"};
  return pins[r.Below(pins.size())];
}

// The work: weights of shares, one whole GPU, 2–8 GPUs and CPU-only, drawn per seed inside the
// given ranges; `pinned` percent of the shares (and of whole-GPU work) name models.
struct FleetMix {
  int share_lo, share_hi, whole_lo, whole_hi, multi_lo, multi_hi, cpu_lo, cpu_hi, pinned;
};

void FleetWork(Rng& r, int n, const FleetMix& x, std::vector<Task>* tasks) {
  const std::vector<int> mix = {
      static_cast<int>(r.Between(x.share_lo, x.share_hi)),
      static_cast<int>(r.Between(x.whole_lo, x.whole_hi)),
      static_cast<int>(r.Between(x.multi_lo, x.multi_hi)),
      static_cast<int>(r.Between(x.cpu_lo, x.cpu_hi)),
  };
  for (int i = 0; i < n; ++i) {
    switch (r.Pick(mix)) {
      case 0:
        tasks->push_back(Share(r, 50, 700, 1, 8, r.Chance(x.pinned) ? DrawPin(r) : ""));
        break;
      case 1:
        tasks->push_back(Whole(r, 1, r.Between(4, 12), r.Chance(x.pinned) ? DrawPin(r) : ""));
        break;
      case 2: {  // training: big ones on the big cards
        const int g = static_cast<int>(2 << r.Pick({50, 35, 15}));  // 2, 4 or 8
        tasks->push_back(Whole(r, g, 12, r.Chance(50) ? "A100|H100" : ""));
        break;
      }
      default:
        tasks->push_back(Task{r.Between(1, 16) * 1000, r.Between(2, 64) * kGiB, 0, 0, ""});
    }
  }
}

// The issue's shape: a general GPU cloud, a fifth of the shares pinned.
void FleetCloud(Rng& r, int n, std::vector<Node>* nodes, std::vector<Task>* tasks) {
  DrawFleet(r, 1200, 0, nodes);
  FleetWork(r, n, {40, 60, 15, 25, 5, 15, 5, 15, 20}, tasks);
}

// Cloud-VM shapes: most nodes hold 1 or 2 GPUs, inference-heavy.
void FleetSmallNodes(Rng& r, int n, std::vector<Node>* nodes, std::vector<Task>* tasks) {
  DrawFleet(r, 1000, 40, nodes);
  FleetWork(r, n, {50, 70, 15, 25, 3, 8, 5, 15, 20}, tasks);
}

// Tenants who care which card they get: half of the GPU work pinned, more training.
void FleetPinned(Rng& r, int n, std::vector<Node>* nodes, std::vector<Task>* tasks) {
  DrawFleet(r, 1200, 0, nodes);
  FleetWork(r, n, {30, 50, 15, 30, 10, 20, 3, 10, 50}, tasks);
}

struct Generator {
  const char* name;
  std::function<void(Rng&, int, std::vector<Node>*, std::vector<Task>*)> make;
};

const std::vector<Generator>& Generators() {
  static const std::vector<Generator> g = {
      {"cloud-inference", CloudInference}, {"training-multigpu", TrainingMultiGpu},
      {"mixed-vendor", MixedVendor},       {"cpu-scarce", CpuScarce},
      {"model-strict", ModelStrict},       {"mig-heavy", MigHeavy},
      {"fleet-cloud", FleetCloud},         {"fleet-small-nodes", FleetSmallNodes},
      {"fleet-pinned", FleetPinned},
  };
  return g;
}

struct Params {
  uint64_t seed = 1;
  int tasks = 8000;
  int64_t days = 7;
  gpupool::twin::GpuCloudOptions cloud;
};

bool WriteFiles(const std::string& dir, const std::string& name, const std::string& nodes,
                const std::string& pods) {
  std::ofstream nf(dir + "/nodes_" + name + ".csv");
  nf << nodes;
  std::ofstream tf(dir + "/openb_pod_list_" + name + ".csv");
  tf << pods;
  return static_cast<bool>(nf) && static_cast<bool>(tf);
}

bool Write(const std::string& dir, const Generator& g, const Params& p) {
  Rng r(p.seed);
  std::vector<Node> nodes;
  std::vector<Task> tasks;
  g.make(r, p.tasks, &nodes, &tasks);
  std::vector<gpupool::twin::SynthNode> out_nodes;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node& x = nodes[i];
    out_nodes.push_back({std::string(g.name) + "-node-" + std::to_string(i), x.cpu_milli,
                         x.memory_mib, x.gpus, x.model});
  }
  std::vector<SynthPod> pods;
  for (size_t i = 0; i < tasks.size(); ++i) {
    const Task& t = tasks[i];
    SynthPod pod;
    pod.name = std::string(g.name) + "-pod-" + std::to_string(i);
    pod.cpu_milli = t.cpu_milli;
    pod.memory_mib = t.memory_mib;
    pod.num_gpu = t.num_gpu;
    pod.gpu_milli = t.gpu_milli;
    pod.gpu_spec = t.gpu_spec;
    pods.push_back(std::move(pod));
  }
  // After every placement draw, from a stream of its own: the rows above stay as they were.
  gpupool::twin::AssignTimes(p.seed, p.days * gpupool::twin::kDayS, &pods);
  std::cout << g.name << ": " << nodes.size() << " nodes, " << tasks.size() << " tasks\n";
  return WriteFiles(dir, g.name, gpupool::twin::NodeListCsv(out_nodes),
                    gpupool::twin::PodListCsv(pods));
}

bool WriteGpuCloud(const std::string& dir, const Params& p) {
  gpupool::twin::GpuCloudOptions o = p.cloud;
  o.seed = p.seed;
  gpupool::twin::SynthCluster c = gpupool::twin::GenerateGpuCloud(o);
  std::cout << "gpu-cloud: " << c.nodes.size() << " nodes, " << c.pods.size() << " pods over "
            << o.hours << " h at load " << o.load << "\n";
  return WriteFiles(dir, "gpu-cloud", gpupool::twin::NodeListCsv(c.nodes),
                    gpupool::twin::PodListCsv(c.pods));
}

}  // namespace

int main(int argc, char** argv) {
  std::string out_dir, which = "all";
  Params p;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::cout << kHelp;
      return 0;
    }
    if (i + 1 >= argc) {
      std::cerr << "workload_gen: " << a << ": missing value (see --help)\n";
      return 2;
    }
    const std::string v = argv[++i];
    if (a == "--out-dir") {
      out_dir = v;
    } else if (a == "--generator") {
      which = v;
    } else if (a == "--seed" || a == "--tasks" || a == "--days" || a == "--hours" ||
               a == "--load" || a == "--cloud-nodes") {
      try {
        size_t used = 0;
        if (a == "--seed") p.seed = std::stoull(v, &used);
        if (a == "--tasks") p.tasks = std::stoi(v, &used);
        if (a == "--days") p.days = std::stoll(v, &used);
        if (a == "--hours") p.cloud.hours = std::stoll(v, &used);
        if (a == "--load") p.cloud.load = std::stod(v, &used);
        if (a == "--cloud-nodes") p.cloud.nodes_per_model = std::stoi(v, &used);
        if (used != v.size()) throw std::invalid_argument(v);
      } catch (const std::exception&) {
        std::cerr << "workload_gen: " << a << ": not a number: '" << v << "'\n";
        return 2;
      }
    } else {
      std::cerr << "workload_gen: unknown option '" << a << "' (see --help)\n";
      return 2;
    }
  }
  if (out_dir.empty() || p.tasks <= 0 || p.days <= 0 || p.cloud.hours <= 0 ||
      p.cloud.nodes_per_model <= 0 || p.cloud.nodes_per_model > 1000 ||
      !(p.cloud.load > 0 && p.cloud.load <= 100)) {
    std::cerr << "workload_gen: --out-dir is required; --tasks, --days and --hours must be "
                 "positive, --cloud-nodes 1..1000, --load in (0, 100] (see --help)\n";
    return 2;
  }
  std::filesystem::create_directories(out_dir);
  bool known = false;
  for (const Generator& g : Generators()) {
    if (which != "all" && which != g.name) continue;
    known = true;
    if (!Write(out_dir, g, p)) {
      std::cerr << "workload_gen: cannot write into '" << out_dir << "'\n";
      return 2;
    }
  }
  if (which == "all" || which == "gpu-cloud") {
    known = true;
    if (!WriteGpuCloud(out_dir, p)) {
      std::cerr << "workload_gen: cannot write into '" << out_dir << "'\n";
      return 2;
    }
  }
  if (!known) {
    std::cerr << "workload_gen: unknown generator '" << which << "' (see --help)\n";
    return 2;
  }
  return 0;
}
