#include "placement/sim/trace.h"

#include <charconv>
#include <fstream>
#include <sstream>

namespace gpupool::placement::sim {
namespace {

std::vector<std::string_view> Split(std::string_view line, char sep) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (true) {
    const size_t pos = line.find(sep, start);
    out.push_back(
        line.substr(start, pos == std::string_view::npos ? std::string_view::npos : pos - start));
    if (pos == std::string_view::npos) return out;
    start = pos + 1;
  }
}

// Rows of a CSV with a header, as (column → field) lookups; trailing '\r' trimmed.
class Csv {
 public:
  explicit Csv(std::string_view text) {
    size_t start = 0;
    while (start < text.size()) {
      size_t end = text.find('\n', start);
      if (end == std::string_view::npos) end = text.size();
      std::string_view line = text.substr(start, end - start);
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      if (!line.empty()) lines_.push_back(line);
      start = end + 1;
    }
    if (!lines_.empty()) header_ = Split(lines_[0], ',');
  }
  int Column(std::string_view name) const {
    for (size_t i = 0; i < header_.size(); ++i)
      if (header_[i] == name) return static_cast<int>(i);
    return -1;
  }
  size_t rows() const { return lines_.empty() ? 0 : lines_.size() - 1; }
  std::vector<std::string_view> Row(size_t i) const { return Split(lines_[i + 1], ','); }

 private:
  std::vector<std::string_view> lines_;
  std::vector<std::string_view> header_;
};

Status Int(std::string_view field, int64_t* out, size_t row, std::string_view column) {
  if (field.empty()) {
    *out = 0;
    return Status::Ok();
  }
  auto [p, ec] = std::from_chars(field.data(), field.data() + field.size(), *out);
  if (ec != std::errc() || p != field.data() + field.size())
    return Status::InvalidArgument("row " + std::to_string(row + 2) + ", column " +
                                   std::string(column) + ": not an integer: '" +
                                   std::string(field) + "'");
  return Status::Ok();
}

// Column indices by name; an error names the first one missing.
Result<std::vector<int>> Columns(const Csv& csv, std::initializer_list<std::string_view> names) {
  std::vector<int> idx;
  for (std::string_view n : names) {
    const int c = csv.Column(n);
    if (c < 0) return Status::InvalidArgument("missing column '" + std::string(n) + "'");
    idx.push_back(c);
  }
  return idx;
}

std::string_view Field(const std::vector<std::string_view>& row, int col) {
  return col >= 0 && static_cast<size_t>(col) < row.size() ? row[static_cast<size_t>(col)]
                                                           : std::string_view{};
}

}  // namespace

Result<std::vector<TraceNode>> ParseNodes(std::string_view text) {
  const Csv csv(text);
  GPUPOOL_ASSIGN_OR_RETURN(std::vector<int> c,
                           Columns(csv, {"sn", "cpu_milli", "memory_mib", "gpu", "model"}));
  std::vector<TraceNode> out;
  for (size_t i = 0; i < csv.rows(); ++i) {
    const auto row = csv.Row(i);
    TraceNode n;
    n.name = std::string(Field(row, c[0]));
    int64_t gpus = 0;
    GPUPOOL_RETURN_IF_ERROR(Int(Field(row, c[1]), &n.cpu_milli, i, "cpu_milli"));
    GPUPOOL_RETURN_IF_ERROR(Int(Field(row, c[2]), &n.memory_mib, i, "memory_mib"));
    GPUPOOL_RETURN_IF_ERROR(Int(Field(row, c[3]), &gpus, i, "gpu"));
    n.gpus = static_cast<int>(gpus);
    n.model = std::string(Field(row, c[4]));
    out.push_back(std::move(n));
  }
  return out;
}

Result<std::vector<TraceTask>> ParseTasks(std::string_view text) {
  const Csv csv(text);
  GPUPOOL_ASSIGN_OR_RETURN(std::vector<int> c, Columns(csv, {"name", "cpu_milli", "memory_mib",
                                                             "num_gpu", "gpu_milli"}));
  const int spec = csv.Column("gpu_spec");  // absent in the multigpu files
  std::vector<TraceTask> out;
  out.reserve(csv.rows());
  for (size_t i = 0; i < csv.rows(); ++i) {
    const auto row = csv.Row(i);
    TraceTask t;
    int64_t num = 0, milli = 0;
    t.name = std::string(Field(row, c[0]));
    GPUPOOL_RETURN_IF_ERROR(Int(Field(row, c[1]), &t.cpu_milli, i, "cpu_milli"));
    GPUPOOL_RETURN_IF_ERROR(Int(Field(row, c[2]), &t.memory_mib, i, "memory_mib"));
    GPUPOOL_RETURN_IF_ERROR(Int(Field(row, c[3]), &num, i, "num_gpu"));
    GPUPOOL_RETURN_IF_ERROR(Int(Field(row, c[4]), &milli, i, "gpu_milli"));
    if (num < 0 || milli < 0 || milli > 1000 || (num > 1 && milli != 1000 && milli != 0))
      return Status::InvalidArgument("row " + std::to_string(i + 2) + ": num_gpu " +
                                     std::to_string(num) + " with gpu_milli " +
                                     std::to_string(milli) + " is not a trace shape");
    t.num_gpu = static_cast<int>(num);
    t.gpu_milli = static_cast<int32_t>(milli);
    t.gpu_spec = std::string(Field(row, spec));
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
