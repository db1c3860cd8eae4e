// Workload (workload.h): the openb CSV readers (rows through placement/sim/csv.h) and the load
// and tenant shaping.
#include "twin/workload.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "placement/sim/csv.h"
#include "pool/yaml_error.h"

namespace gpupool::twin {
namespace {

using placement::sim::CsvRows;

// FNV-1a, then splitmix64's finalizer: a pod's copy draw, unrelated to its tenant's hash.
uint64_t CopyHash(std::string_view s) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ULL;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebULL;
  return h ^ (h >> 31);
}

// How many times a pod is submitted at load factor x in copies mode: ⌊x⌋, plus one with
// probability x − ⌊x⌋ (a fixed hash of `key`, so the same pods on every run).
int CopiesOf(double x, std::string_view key) {
  const double whole = std::floor(x);
  const double u = static_cast<double>(CopyHash(key) >> 11) / 9007199254740992.0;  // [0, 1)
  return static_cast<int>(whole) + (u < x - whole ? 1 : 0);
}

// Members of one gang must agree on everything the gang job submits once.
std::string GangMismatch(const TwinTask& a, const TwinTask& b) {
  if (a.arrival_us != b.arrival_us) return "creation_time";
  if (a.duration_us != b.duration_us) return "deletion_time";
  if (a.num_gpu != b.num_gpu || a.gpu_milli != b.gpu_milli) return "num_gpu/gpu_milli";
  if (a.cpu_milli != b.cpu_milli || a.memory_mib != b.memory_mib) return "cpu_milli/memory_mib";
  if (a.models != b.models) return "gpu_spec";
  if (a.qos != b.qos) return "qos";
  if (a.owner != b.owner) return "owner";
  return "";
}

}  // namespace

Result<LoadMode> ParseLoadMode(std::string_view name) {
  if (name == "compress") return LoadMode::kCompress;
  if (name == "copies") return LoadMode::kCopies;
  return Status::InvalidArgument("load mode: expected compress or copies, got '" +
                                 std::string(name) + "'");
}

Status CheckTwinMigGpu(const Catalog& catalog, const std::string& model_name,
                       const TwinMigGpu& mig) {
  const GpuModel* model = catalog.Find(model_name);
  if (model == nullptr) {
    return Status::InvalidArgument("MIG needs a catalog model, not '" + model_name + "'");
  }
  for (const MigPlacement& p : mig.layout) {
    if (model->FindMig(p.profile) == nullptr) {
      return Status::InvalidArgument("model " + model->name + " has no MIG profile '" + p.profile +
                                     "'");
    }
  }
  return mig.dynamic ? ValidateMigLayout(*model, mig.layout) : Status::Ok();
}

ResourceRequest TwinTask::Request(const Resources& gpu) const {
  ResourceRequest r;
  r.cpu_milli = cpu_milli;
  r.memory_mib = memory_mib;
  if (!mig_profile.empty()) {
    r.shape = RequestShape::kMig;
    r.mig_profile = mig_profile;
  } else if (gpu_milli < 1000) {
    r.shape = RequestShape::kFractional;
    r.fractional = Resources{gpu.milli_tflops * gpu_milli / 1000, gpu.vram_mib * gpu_milli / 1000};
  } else {
    r.shape = RequestShape::kWholeGpus;
    r.gpu_count = num_gpu;
    r.models = models;
  }
  return r;
}

int64_t Workload::GpuCount() const {
  int64_t n = 0;
  for (const TwinNode& node : nodes) n += node.gpus;
  return n;
}

Result<std::vector<TwinTask>> ParsePods(std::string_view text, const std::string& source) {
  CsvRows csv(text, source);
  GPUPOOL_RETURN_IF_ERROR(
      csv.ReadHeader({"name", "num_gpu", "gpu_milli", "creation_time", "deletion_time"}));
  std::vector<TwinTask> out;
  std::map<std::string, size_t> gang_first;  // gang id → its first member in `out`
  while (csv.Next()) {
    TwinTask t;
    t.name = std::string(csv.Cell("name"));
    if (t.name.empty()) return csv.Error("name", "empty");
    GPUPOOL_ASSIGN_OR_RETURN(int64_t num_gpu, csv.Int("num_gpu"));
    GPUPOOL_ASSIGN_OR_RETURN(int64_t gpu_milli, csv.Int("gpu_milli"));
    GPUPOOL_ASSIGN_OR_RETURN(int64_t created, csv.Int("creation_time"));
    GPUPOOL_ASSIGN_OR_RETURN(int64_t deleted, csv.Int("deletion_time"));
    GPUPOOL_ASSIGN_OR_RETURN(t.cpu_milli, csv.Int("cpu_milli", false));
    GPUPOOL_ASSIGN_OR_RETURN(t.memory_mib, csv.Int("memory_mib", false));
    if (num_gpu < 0 || num_gpu > 64) return csv.Error("num_gpu", "must be 0..64");
    if (gpu_milli < 0 || gpu_milli > 1000) return csv.Error("gpu_milli", "must be 0..1000");
    if (num_gpu > 1 && gpu_milli != 1000)
      return csv.Error("gpu_milli", "a multi-GPU pod must ask for whole GPUs (1000)");
    if (created < 0) return csv.Error("creation_time", "must be >= 0");
    if (deleted < created) return csv.Error("deletion_time", "before creation_time");
    t.num_gpu = static_cast<int32_t>(num_gpu);
    t.gpu_milli = static_cast<int32_t>(gpu_milli);
    t.arrival_us = created * 1'000'000;
    t.duration_us = std::max<int64_t>(1, deleted - created) * 1'000'000;
    t.qos = std::string(csv.Cell("qos"));
    for (std::string_view m : placement::sim::SplitFields(csv.Cell("gpu_spec"), '|'))
      if (!m.empty()) t.models.emplace_back(m);
    t.owner = std::string(csv.Cell("owner"));
    t.gang = std::string(csv.Cell("gang"));
    if (!t.gang.empty()) {
      auto [it, first] = gang_first.emplace(t.gang, out.size());
      const std::string differs = first ? "" : GangMismatch(out[it->second], t);
      if (!differs.empty()) {
        return csv.Error("gang", "'" + t.name + "' differs from '" + out[it->second].name +
                                     "' of gang '" + t.gang + "' in " + differs);
      }
    }
    out.push_back(std::move(t));
  }
  return out;
}

Result<std::vector<TwinNode>> ParseNodeList(std::string_view text, const std::string& source) {
  CsvRows csv(text, source);
  GPUPOOL_RETURN_IF_ERROR(csv.ReadHeader({"sn", "gpu"}));
  std::vector<TwinNode> out;
  while (csv.Next()) {
    TwinNode n;
    n.name = std::string(csv.Cell("sn"));
    if (n.name.empty()) return csv.Error("sn", "empty");
    GPUPOOL_ASSIGN_OR_RETURN(n.cpu_milli, csv.Int("cpu_milli", false));
    GPUPOOL_ASSIGN_OR_RETURN(n.memory_mib, csv.Int("memory_mib", false));
    GPUPOOL_ASSIGN_OR_RETURN(int64_t gpus, csv.Int("gpu"));
    if (gpus < 0 || gpus > 64) return csv.Error("gpu", "must be 0..64");
    n.gpus = static_cast<int>(gpus);
    n.model = std::string(csv.Cell("model"));
    if (n.gpus > 0) out.push_back(std::move(n));  // CPU-only nodes serve no GPU task
  }
  if (out.empty()) return Status::InvalidArgument(source + ": no node with GPUs");
  return out;
}

Workload Shape(std::string name, std::vector<TwinNode> nodes, std::vector<TwinTask> pods,
               const LoadOptions& options, const OrgTree& org) {
  Workload w;
  w.name = std::move(name);
  if (options.max_nodes > 0 && static_cast<size_t>(options.max_nodes) < nodes.size()) {
    // Every k-th node (k rounded up), so the model mix of the whole list is kept.
    size_t step = (nodes.size() + static_cast<size_t>(options.max_nodes) - 1) /
                  static_cast<size_t>(options.max_nodes);
    for (size_t i = 0; i < nodes.size(); i += step) w.nodes.push_back(nodes[i]);
  } else {
    w.nodes = std::move(nodes);
  }
  if (options.max_tasks > 0 && static_cast<size_t>(options.max_tasks) < pods.size())
    pods.resize(static_cast<size_t>(options.max_tasks));
  const double factor = options.time_scale > 0 ? options.time_scale : 1.0;
  const bool copies = options.load_mode == LoadMode::kCopies;
  const double scale = copies ? 1.0 : factor;
  const int replicas = std::max(1, options.replicas);
  for (const TwinTask& pod : pods) {
    if (pod.GpuMilli() == 0) {
      ++w.skipped;
      continue;
    }
    // A gang's members are copied alike: the draw is the gang's.
    const int n =
        copies ? CopiesOf(factor, pod.gang.empty() ? pod.name : pod.gang) * replicas : replicas;
    for (int k = 0; k < n; ++k) {
      TwinTask t = pod;
      const std::string suffix = k > 0 ? "~" + std::to_string(k) : "";
      t.name += suffix;
      if (!t.gang.empty()) t.gang += suffix;
      if (!t.owner.empty()) t.owner += suffix;
      t.arrival_us =
          static_cast<int64_t>(std::llround(static_cast<double>(pod.arrival_us) / scale)) +
          (copies ? 0 : k * options.replica_gap_us);
      t.tenant = org.PickTenant(t.owner.empty() ? t.name : t.owner);
      t.priority_class = org.ClassOf(t.qos);
      if (t.gpu_milli < 1000) t.models.clear();  // a share takes any model (see the header)
      w.tasks.push_back(std::move(t));
    }
  }
  std::stable_sort(w.tasks.begin(), w.tasks.end(), [](const TwinTask& a, const TwinTask& b) {
    return a.arrival_us != b.arrival_us ? a.arrival_us < b.arrival_us : a.name < b.name;
  });
  std::map<std::string, size_t> gang_index;
  for (size_t i = 0; i < w.tasks.size(); ++i) {
    TwinTask& t = w.tasks[i];
    if (t.gang.empty()) continue;
    auto [it, added] = gang_index.emplace(t.gang, w.gangs.size());
    if (added) w.gangs.emplace_back();
    t.gang_index = static_cast<int64_t>(it->second);
    w.gangs[it->second].push_back(i);
  }
  return w;
}

Result<Workload> LoadTrace(const LoadOptions& options, const OrgTree& org) {
  const std::string pods_path = options.trace_dir + "/openb_pod_list_" + options.workload + ".csv";
  const std::string nodes_path = options.trace_dir + "/" + options.nodes_file;
  Result<std::string> pods_text = ReadTextFile(pods_path);
  if (!pods_text.ok())
    return Status::NotFound("workload '" + options.workload + "': cannot read " + pods_path);
  Result<std::string> nodes_text = ReadTextFile(nodes_path);
  if (!nodes_text.ok()) return Status::NotFound("nodes: cannot read " + nodes_path);
  GPUPOOL_ASSIGN_OR_RETURN(std::vector<TwinTask> pods, ParsePods(*pods_text, pods_path));
  GPUPOOL_ASSIGN_OR_RETURN(std::vector<TwinNode> nodes, ParseNodeList(*nodes_text, nodes_path));
  return Shape(options.workload, std::move(nodes), std::move(pods), options, org);
}

}  // namespace gpupool::twin
