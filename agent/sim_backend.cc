#include "agent/sim_backend.h"

#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>

#include "base/log.h"

namespace gpupool::agent {
namespace {

// Datasheets give GB/s counted in both directions: NVLink's figure is kept whole (as links are
// compared, not divided), PCIe's is halved to one direction. Both in Gbit/s.
int32_t GpuLinkGbps(const GpuModel& m) { return m.gpu_link_gb_per_s * 8; }
int32_t PcieGbps(const GpuModel& m) { return m.pcie_gb_per_s * 8 / 2; }

uint64_t Fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

// The link kind between GPUs a < b of n under a generated topology; numa = first/second half.
LinkKind Between(Topology t, int32_t a, int32_t b, int32_t n) {
  const bool same_numa = (a < n / 2) == (b < n / 2) || n < 2;
  const bool pair = a / 2 == b / 2;
  switch (t) {
    case Topology::kNvlinkAll:
      return LinkKind::kNvlink;
    case Topology::kNvlinkPairs:
      if (pair) return LinkKind::kNvlink;
      return same_numa ? LinkKind::kPcieHost : LinkKind::kSystem;
    case Topology::kPciePairs:
      if (pair) return LinkKind::kPcieSwitch;
      return same_numa ? LinkKind::kPcieHost : LinkKind::kSystem;
    case Topology::kPcie:
    default:
      return same_numa ? LinkKind::kPcieHost : LinkKind::kSystem;
  }
}

}  // namespace

const char* LinkKindName(LinkKind kind) {
  switch (kind) {
    case LinkKind::kNvlink:
      return "nvlink";
    case LinkKind::kPcieSwitch:
      return "pcie-switch";
    case LinkKind::kPcieHost:
      return "pcie-host";
    case LinkKind::kSystem:
      return "system";
  }
  return "?";
}

std::string SimulatedBackend::GpuUuid(const std::string& node, int32_t index) {
  return "GPU-sim-" + node + "-" + std::to_string(index);
}

std::string SimulatedBackend::MigUuid(const std::string& node, int32_t index, int32_t instance) {
  return "MIG-sim-" + node + "-" + std::to_string(index) + "-" + std::to_string(instance);
}

SimulatedBackend::SimulatedBackend(std::string node_name, SimLayout layout, Catalog models)
    : node_(std::move(node_name)),
      layout_(std::move(layout)),
      models_(std::move(models)),
      rng_(layout_.seed ^ Fnv1a(node_)) {
  int32_t index = 0;
  for (const auto& g : layout_.gpus) {
    const GpuModel* spec = models_.Find(g.model);
    for (int32_t i = 0; i < g.count; ++i, ++index) {
      auto mig = g.mig.find(i);
      if (spec == nullptr || mig == g.mig.end()) continue;
      // Placed as a driver places instances created without a placement. A model whose
      // catalog entry states no placement rule (or a list that does not fit them) keeps the
      // listed instances in order, and its layout cannot be changed.
      Result<MigLayout> placed = PlaceMigProfiles(*spec, mig->second);
      MigGpu& m = mig_[index];
      m.dynamic = placed.ok();
      if (placed.ok()) {
        m.layout = *placed;
      } else {
        for (size_t j = 0; j < mig->second.size(); ++j)
          m.layout.push_back({mig->second[j], static_cast<int>(j)});
      }
    }
  }
  inventory_ = Build();
}

Status SimulatedBackend::ApplyMigLayout(const std::string& gpu_uuid, const MigLayout& layout) {
  for (const Device& d : inventory_.devices) {
    if (d.uuid != gpu_uuid || !d.mig_profile.empty()) continue;
    auto m = mig_.find(d.index);
    if (m == mig_.end() || !m->second.dynamic) {
      return Status::FailedPrecondition("GPU " + gpu_uuid + " is not in MIG mode");
    }
    const GpuModel* spec = models_.Find(d.model);
    if (spec == nullptr) return Status::FailedPrecondition("GPU " + gpu_uuid + ": unknown model");
    if (Status st = ValidateMigLayout(*spec, layout); !st.ok()) return st;
    m->second.layout = layout;
    ++m->second.generation;  // new instances get new UUIDs, as a driver's do
    inventory_ = Build();
    return Status::Ok();
  }
  return Status::NotFound("no GPU " + gpu_uuid + " on this node");
}

Inventory SimulatedBackend::Build() const {
  Inventory inv;
  int32_t n = 0;
  for (const auto& g : layout_.gpus) n += g.count;
  bool all_nvlink = n > 1;
  int32_t index = 0;
  for (const auto& g : layout_.gpus) {
    const GpuModel* spec = models_.Find(g.model);
    if (spec == nullptr) continue;  // validated at config parse time
    all_nvlink = all_nvlink && spec->gpu_link_gb_per_s > 0;
    for (int32_t i = 0; i < g.count; ++i, ++index) {
      Device d;
      d.uuid = GpuUuid(node_, index);
      d.model = spec->name;
      d.index = index;
      d.vram_mib = spec->vram_mib;
      d.milli_tflops = spec->ComputeMilliTflops();
      d.healthy = std::find(g.unhealthy.begin(), g.unhealthy.end(), i) == g.unhealthy.end();
      d.numa_node = n >= 2 && index >= n / 2 ? 1 : 0;
      if (!layout_.device_dir.empty()) {
        d.device_files = {layout_.device_dir + "/nvidia" + std::to_string(index)};
      }
      auto mig = mig_.find(index);
      d.mig_enabled = mig != mig_.end() && mig->second.dynamic;
      inv.devices.push_back(d);
      if (mig == mig_.end()) continue;
      int32_t j = 0;
      for (const MigPlacement& placement : mig->second.layout) {
        const std::string& profile = placement.profile;
        const MigProfile* p = spec->FindMig(profile);  // validated at config parse time
        Device m = d;
        m.mig_enabled = false;
        m.uuid = MigUuid(node_, index, j++);
        if (mig->second.generation > 0) m.uuid += "-g" + std::to_string(mig->second.generation);
        m.mig_profile = profile;
        m.mig_start = placement.start;
        m.parent_uuid = d.uuid;
        m.vram_mib = p != nullptr ? p->vram_mib : 0;
        m.milli_tflops = p != nullptr ? p->milli_tflops : 0;
        if (!layout_.device_dir.empty()) {
          // Like /dev/nvidia-caps/nvidia-capN: the instance's access capability.
          m.device_files.push_back(layout_.device_dir + "/nvidia-caps/nvidia-cap" +
                                   std::to_string(index * 8 + j));
        }
        inv.devices.push_back(m);
      }
    }
  }
  Topology topo = layout_.topology;
  if (topo == Topology::kAuto) topo = all_nvlink ? Topology::kNvlinkAll : Topology::kPciePairs;
  std::set<std::pair<int32_t, int32_t>> explicit_pairs;
  for (const Link& l : layout_.links) explicit_pairs.insert(std::minmax(l.a, l.b));
  std::vector<const GpuModel*> spec_of(static_cast<size_t>(n), nullptr);
  for (const Device& d : inv.devices) spec_of[static_cast<size_t>(d.index)] = models_.Find(d.model);
  if (topo != Topology::kNone) {
    for (int32_t a = 0; a < n; ++a) {
      for (int32_t b = a + 1; b < n; ++b) {
        if (explicit_pairs.count({a, b})) continue;
        Link l{a, b, Between(topo, a, b, n), 0};
        const GpuModel* sa = spec_of[static_cast<size_t>(a)];
        const GpuModel* sb = spec_of[static_cast<size_t>(b)];
        l.bandwidth_gbps =
            l.kind == LinkKind::kNvlink
                ? std::min(GpuLinkGbps(*sa), GpuLinkGbps(*sb))
                : std::min(PcieGbps(*sa), PcieGbps(*sb)) / (l.kind == LinkKind::kSystem ? 2 : 1);
        inv.links.push_back(l);
      }
    }
  }
  for (Link l : layout_.links) {
    if (l.a > l.b) std::swap(l.a, l.b);
    inv.links.push_back(l);
  }
  if (!layout_.device_dir.empty()) {
    for (const char* f : {"nvidiactl", "nvidia-uvm", "nvidia-uvm-tools"}) {
      inv.control_device_files.push_back(layout_.device_dir + "/" + f);
    }
  }
  return inv;
}

Status SimulatedBackend::MakeDeviceFiles() const {
  const std::string& dir = layout_.device_dir;
  // The NVIDIA driver's numbers: GPUs are 195:N, nvidiactl 195:255; the uvm and caps majors are
  // dynamic on a real host, fixed here.
  std::vector<std::pair<std::string, dev_t>> nodes = {{dir + "/nvidiactl", makedev(195, 255)},
                                                      {dir + "/nvidia-uvm", makedev(234, 0)},
                                                      {dir + "/nvidia-uvm-tools", makedev(234, 1)}};
  for (const Device& d : inventory_.devices) {
    const std::string& f = d.device_files.empty() ? std::string() : d.device_files.back();
    if (f.empty()) continue;
    if (d.parent_uuid.empty()) {
      nodes.push_back({f, makedev(195, static_cast<unsigned>(d.index))});
    } else {
      const unsigned cap = static_cast<unsigned>(std::stoi(f.substr(f.rfind("cap") + 3)));
      nodes.push_back({f, makedev(235, cap)});
    }
  }
  for (const std::string& sub : {dir, dir + "/nvidia-caps"}) {
    if (mkdir(sub.c_str(), 0755) != 0 && errno != EEXIST) {
      return Status::FailedPrecondition("sim_device_dir: cannot create " + sub + ": " +
                                        std::strerror(errno));
    }
  }
  for (const auto& [path, dev] : nodes) {
    if (mknod(path.c_str(), S_IFCHR | 0666, dev) != 0 && errno != EEXIST) {
      return Status::FailedPrecondition("sim_device_dir: cannot mknod " + path + ": " +
                                        std::strerror(errno) + " (fake device files need root)");
    }
  }
  return Status::Ok();
}

Result<Inventory> SimulatedBackend::Discover() {
  if (!layout_.device_dir.empty()) GPUPOOL_RETURN_IF_ERROR(MakeDeviceFiles());
  Inventory inv = inventory_;
  for (Device& d : inv.devices) {
    auto it = health_override_.find(d.uuid);
    if (it != health_override_.end()) d.healthy = it->second;
  }
  return inv;
}

void SimulatedBackend::SetHealthy(const std::string& uuid, bool healthy) {
  health_override_[uuid] = healthy;
}

std::vector<DeviceSample> SimulatedBackend::Sample(const std::vector<DeviceLoad>& load) {
  std::map<std::string, DeviceLoad> by_uuid;
  for (const DeviceLoad& l : load) {
    DeviceLoad& acc = by_uuid[l.uuid];
    acc.thread_percentage += l.thread_percentage;
    acc.vram_mib += l.vram_mib;
  }
  // A MIG parent carries its instances' load, weighted by their share of the GPU.
  for (const Device& d : inventory_.devices) {
    if (d.parent_uuid.empty()) continue;
    auto it = by_uuid.find(d.uuid);
    if (it == by_uuid.end()) continue;
    const Device* parent = nullptr;
    for (const Device& p : inventory_.devices) {
      if (p.uuid == d.parent_uuid) parent = &p;
    }
    if (parent == nullptr || parent->milli_tflops == 0) continue;
    DeviceLoad& acc = by_uuid[parent->uuid];
    acc.thread_percentage +=
        static_cast<int32_t>(std::min<int64_t>(100, it->second.thread_percentage) * d.milli_tflops /
                             parent->milli_tflops);
    acc.vram_mib += it->second.vram_mib;
  }
  ++samples_;
  std::uniform_int_distribution<int32_t> noise(-3, 3);
  std::vector<DeviceSample> out;
  out.reserve(inventory_.devices.size());
  for (const Device& d : inventory_.devices) {
    const GpuModel* spec = models_.Find(d.model);
    const DeviceLoad& l = by_uuid[d.uuid];
    DeviceSample s;
    s.uuid = d.uuid;
    int32_t util = std::min(100, l.thread_percentage);
    if (util > 0) util = std::clamp(util + noise(rng_), 1, 100);
    s.utilization_pct = util;
    s.memory_used_mib = std::min(d.vram_mib, l.vram_mib);
    const int32_t tdp = spec != nullptr && spec->tdp_watts > 0 ? spec->tdp_watts : 300;
    const int32_t idle = tdp / 8;
    // A MIG instance reports its share of the board's power.
    const int64_t card = spec != nullptr ? spec->ComputeMilliTflops() : 0;
    const int64_t share = d.parent_uuid.empty() || card == 0 ? 1000 : d.milli_tflops * 1000 / card;
    s.power_watts = static_cast<int32_t>((idle + (tdp - idle) * util / 100) * share / 1000);
    s.temperature_c = 32 + util * 45 / 100 + noise(rng_) / 2;
    auto h = health_override_.find(d.uuid);
    s.healthy = h != health_override_.end() ? h->second : d.healthy;
    s.xid_errors = s.healthy ? 0 : 1;  // an unhealthy simulated GPU has an XID on record
    s.last_xid = s.healthy ? 0 : 79;   // 79: "GPU has fallen off the bus"
    // Kernels that keep the SMs busy move memory too; about half as much as they compute.
    s.memory_util_pct = util / 2;
    out.push_back(s);
  }
  return out;
}

}  // namespace gpupool::agent

namespace gpupool::agent {
namespace {

// One line of the event file; false (and a log line) when malformed.
bool ParseEventLine(const std::string& line, DeviceEvent* e) {
  std::istringstream in(line);
  std::string kind, uuid, arg, extra;
  if (!(in >> kind >> uuid >> arg) || (in >> extra)) return false;
  e->uuid = uuid;
  if (kind == "xid") {
    char* end = nullptr;
    const long code = std::strtol(arg.c_str(), &end, 10);
    if (end == arg.c_str() || *end != '\0' || code <= 0 || code > 100000) return false;
    e->kind = DeviceEvent::Kind::kXid;
    e->xid = static_cast<int32_t>(code);
    return true;
  }
  if (kind == "ecc" && (arg == "corrected" || arg == "uncorrected")) {
    e->kind =
        arg == "corrected" ? DeviceEvent::Kind::kEccCorrected : DeviceEvent::Kind::kEccUncorrected;
    return true;
  }
  return false;
}

}  // namespace

void SimulatedBackend::InjectEvent(DeviceEvent event) { injected_.push_back(std::move(event)); }

std::string SimulatedBackend::EventSource() const {
  if (layout_.event_file.empty()) return "simulated: events injected in-process only";
  return "simulated: events read from " + layout_.event_file +
         " (\"xid <uuid> <code>\" or \"ecc <uuid> corrected|uncorrected\" per line)";
}

std::vector<DeviceEvent> SimulatedBackend::PollEvents() {
  std::vector<DeviceEvent> out = std::move(injected_);
  injected_.clear();
  if (layout_.event_file.empty()) return out;
  std::ifstream f(layout_.event_file, std::ios::binary);
  if (!f) return out;  // not written yet
  f.seekg(event_offset_);
  std::string rest((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  const size_t end = rest.rfind('\n');
  if (end == std::string::npos) return out;  // no complete line yet
  event_offset_ += static_cast<int64_t>(end + 1);
  const int64_t now = std::chrono::duration_cast<std::chrono::microseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  std::istringstream lines(rest.substr(0, end + 1));
  std::string line;
  while (std::getline(lines, line)) {
    if (line.empty() || line[0] == '#') continue;
    DeviceEvent e;
    if (!ParseEventLine(line, &e)) {
      LogWarn("agent.sim", "ignoring a malformed line of the simulated event file",
              {{"file", layout_.event_file},
               {"line", line},
               {"expected", "xid <uuid> <code> | ecc <uuid> corrected|uncorrected"}});
      continue;
    }
    e.time_us = now;
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace gpupool::agent
