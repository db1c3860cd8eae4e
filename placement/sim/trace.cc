#include "placement/sim/trace.h"

#include <fstream>
#include <sstream>

#include "placement/sim/csv.h"

namespace gpupool::placement::sim {

Result<std::vector<TraceNode>> ParseNodes(std::string_view text, const std::string& source) {
  CsvRows csv(text, source);
  GPUPOOL_RETURN_IF_ERROR(csv.ReadHeader({"sn", "cpu_milli", "memory_mib", "gpu", "model"}));
  std::vector<TraceNode> out;
  while (csv.Next()) {
    TraceNode n;
    n.name = std::string(csv.Cell("sn"));
    GPUPOOL_ASSIGN_OR_RETURN(n.cpu_milli, csv.Int("cpu_milli", false));
    GPUPOOL_ASSIGN_OR_RETURN(n.memory_mib, csv.Int("memory_mib", false));
    GPUPOOL_ASSIGN_OR_RETURN(int64_t gpus, csv.Int("gpu", false));
    n.gpus = static_cast<int>(gpus);
    n.model = std::string(csv.Cell("model"));
    out.push_back(std::move(n));
  }
  return out;
}

Result<std::vector<TraceTask>> ParseTasks(std::string_view text, const std::string& source) {
  CsvRows csv(text, source);
  GPUPOOL_RETURN_IF_ERROR(
      csv.ReadHeader({"name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli"}));
  std::vector<TraceTask> out;
  while (csv.Next()) {
    TraceTask t;
    t.name = std::string(csv.Cell("name"));
    GPUPOOL_ASSIGN_OR_RETURN(t.cpu_milli, csv.Int("cpu_milli", false));
    GPUPOOL_ASSIGN_OR_RETURN(t.memory_mib, csv.Int("memory_mib", false));
    GPUPOOL_ASSIGN_OR_RETURN(int64_t num, csv.Int("num_gpu", false));
    GPUPOOL_ASSIGN_OR_RETURN(int64_t milli, csv.Int("gpu_milli", false));
    if (num < 0 || milli < 0 || milli > 1000 || (num > 1 && milli != 1000 && milli != 0)) {
      return csv.Error("gpu_milli", "num_gpu " + std::to_string(num) + " with gpu_milli " +
                                        std::to_string(milli) + " is not a trace shape");
    }
    t.num_gpu = static_cast<int>(num);
    t.gpu_milli = static_cast<int32_t>(milli);
    t.gpu_spec = std::string(csv.Cell("gpu_spec"));  // absent in the multigpu files
    out.push_back(std::move(t));
  }
  return out;
}

Result<std::string> LoadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound("cannot open '" + path + "'");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Resources TraceModel(std::string_view model) {
  // Nominal dense fp16 TFLOPS and VRAM; G2/G3 are undisclosed Alibaba models (placeholders).
  struct Entry {
    std::string_view name;
    int64_t tflops, vram_mib;
  };
  static constexpr Entry kModels[] = {
      {"P100", 19, 16384},
      {"T4", 65, 16384},
      {"V100M16", 125, 16384},
      {"V100M32", 125, 32768},
      {"A10", 125, 24576},
      {"G2", 100, 32768},
      {"G3", 150, 49152},
      // The synthetic clusters of bench/workload_gen.cc.
      {"H100", 989, 81920},
      {"A100", 312, 81920},
      {"L40S", 362, 49152},
      {"L4", 121, 24576},
      {"MI300X", 1307, 196608},
      {"MI250", 362, 131072},
  };
  for (const Entry& e : kModels)
    if (e.name == model) return Resources{e.tflops * 1000, e.vram_mib};
  return Resources{100'000, 32768};
}

NodeSpec ToNodeSpec(const TraceNode& n) {
  NodeSpec s;
  s.name = n.name;
  s.cpu_milli = n.cpu_milli;
  s.memory_mib = n.memory_mib;
  for (int i = 0; i < n.gpus; ++i) {
    DeviceSpec d;
    d.id = n.name + "/gpu" + std::to_string(i);
    d.model = n.model;
    d.physical = TraceModel(n.model);
    s.devices.push_back(std::move(d));
  }
  return s;
}

Request ToRequest(const TraceTask& t) {
  Request r;
  r.cpu_milli = t.cpu_milli;
  r.memory_mib = t.memory_mib;
  if (t.num_gpu == 0 || t.gpu_milli == 0) {
    r.kind = RequestKind::kCpuOnly;
    r.gpu_count = 0;
  } else if (t.gpu_milli < 1000) {
    r.kind = RequestKind::kFractional;
    r.share_milli = t.gpu_milli;
    r.gpu_count = 1;
  } else {
    r.kind = RequestKind::kWholeGpu;
    r.gpu_count = t.num_gpu;
  }
  size_t start = 0;
  while (start < t.gpu_spec.size()) {
    size_t end = t.gpu_spec.find('|', start);
    if (end == std::string::npos) end = t.gpu_spec.size();
    if (end > start) r.allowed_models.push_back(t.gpu_spec.substr(start, end - start));
    start = end + 1;
  }
  return r;
}

bool SpecAllowsModel(const std::string& spec, const std::string& model) {
  if (spec.empty()) return true;
  size_t start = 0;
  while (start <= spec.size()) {
    size_t end = spec.find('|', start);
    if (end == std::string::npos) end = spec.size();
    if (spec.compare(start, end - start, model) == 0) return true;
    start = end + 1;
  }
  return false;
}

}  // namespace gpupool::placement::sim
