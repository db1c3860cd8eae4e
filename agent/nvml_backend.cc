#include "agent/nvml_backend.h"

#include <dlfcn.h>
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstring>
#include <fstream>

#include "agent/driver_files.h"
#include "agent/nvml_api.h"
#include "base/log.h"

namespace gpupool::agent {

namespace {

template <typename F>
bool Resolve(void* handle, const char* name, F* out, std::string* missing) {
  *out = reinterpret_cast<F>(dlsym(handle, name));
  if (*out == nullptr && missing != nullptr) *missing = name;
  return *out != nullptr;
}

int32_t NumaNodeOf(const NvmlBackend::Api& api, nvmlDevice_t dev) {
  if (api.GetPciInfo == nullptr) return 0;
  NvmlPciInfo pci{};
  if (api.GetPciInfo(dev, &pci) != kNvmlSuccess) return 0;
  std::string bus(pci.bus_id, strnlen(pci.bus_id, sizeof(pci.bus_id)));
  if (bus.size() > 12) bus = bus.substr(bus.size() - 12);  // "00000000:18:00.0" → "0000:18:00.0"
  std::transform(bus.begin(), bus.end(), bus.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  std::ifstream in("/sys/bus/pci/devices/" + bus + "/numa_node");
  int n = 0;
  if (in >> n && n >= 0) return n;
  return 0;
}

std::string Cstr(const char* buf, size_t n) { return std::string(buf, strnlen(buf, n)); }

}  // namespace

Result<std::unique_ptr<NvmlBackend>> NvmlBackend::Open(Catalog models, const std::string& library,
                                                       NvmlDevicePaths paths) {
  void* handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* err = dlerror();
    return Status::Unavailable(
        "backend=nvml unavailable: " + std::string(err ? err : library + ": cannot be loaded") +
        "; use backend: simulated");
  }
  auto api = std::make_unique<Api>();
  std::string missing;
  bool ok = Resolve(handle, "nvmlInit_v2", &api->Init, &missing) &&
            Resolve(handle, "nvmlShutdown", &api->Shutdown, &missing) &&
            Resolve(handle, "nvmlErrorString", &api->ErrorString, &missing) &&
            Resolve(handle, "nvmlDeviceGetCount_v2", &api->GetCount, &missing) &&
            Resolve(handle, "nvmlDeviceGetHandleByIndex_v2", &api->GetHandleByIndex, &missing) &&
            Resolve(handle, "nvmlDeviceGetUUID", &api->GetUuid, &missing) &&
            Resolve(handle, "nvmlDeviceGetName", &api->GetName, &missing) &&
            Resolve(handle, "nvmlDeviceGetMemoryInfo", &api->GetMemoryInfo, &missing) &&
            Resolve(handle, "nvmlDeviceGetUtilizationRates", &api->GetUtilizationRates, &missing) &&
            Resolve(handle, "nvmlDeviceGetPowerUsage", &api->GetPowerUsage, &missing) &&
            Resolve(handle, "nvmlDeviceGetTemperature", &api->GetTemperature, &missing);
  if (!ok) {
    dlclose(handle);
    return Status::Unavailable("backend=nvml unavailable: " + library + " has no symbol " +
                               missing + " (driver too old?); use backend: simulated");
  }
  Resolve(handle, "nvmlDeviceGetTotalEccErrors", &api->GetTotalEccErrors, nullptr);
  Resolve(handle, "nvmlEventSetCreate", &api->EventSetCreate, nullptr);
  Resolve(handle, "nvmlDeviceRegisterEvents", &api->RegisterEvents, nullptr);
  Resolve(handle, "nvmlEventSetWait_v2", &api->EventSetWait, nullptr);
  Resolve(handle, "nvmlEventSetFree", &api->EventSetFree, nullptr);
  Resolve(handle, "nvmlDeviceGetMigMode", &api->GetMigMode, nullptr);
  Resolve(handle, "nvmlDeviceGetMaxMigDeviceCount", &api->GetMaxMigDeviceCount, nullptr);
  Resolve(handle, "nvmlDeviceGetMigDeviceHandleByIndex", &api->GetMigDeviceHandleByIndex, nullptr);
  Resolve(handle, "nvmlDeviceGetTopologyCommonAncestor", &api->GetTopologyCommonAncestor, nullptr);
  Resolve(handle, "nvmlDeviceGetP2PStatus", &api->GetP2PStatus, nullptr);
  Resolve(handle, "nvmlDeviceGetPciInfo_v3", &api->GetPciInfo, nullptr);
  Resolve(handle, "nvmlDeviceGetMinorNumber", &api->GetMinorNumber, nullptr);
  Resolve(handle, "nvmlDeviceGetGpuInstanceId", &api->GetGpuInstanceId, nullptr);
  Resolve(handle, "nvmlDeviceGetComputeInstanceId", &api->GetComputeInstanceId, nullptr);
  Resolve(handle, "nvmlDeviceGetGpuInstanceProfileInfo", &api->GetGpuInstanceProfileInfo, nullptr);
  Resolve(handle, "nvmlDeviceGetGpuInstanceProfileInfoV", &api->GetGpuInstanceProfileInfoV,
          nullptr);
  Resolve(handle, "nvmlDeviceGetGpuInstancePossiblePlacements_v2",
          &api->GetGpuInstancePossiblePlacements, nullptr);
  Resolve(handle, "nvmlDeviceCreateGpuInstanceWithPlacement", &api->CreateGpuInstanceWithPlacement,
          nullptr);
  Resolve(handle, "nvmlDeviceGetGpuInstances", &api->GetGpuInstances, nullptr);
  Resolve(handle, "nvmlDeviceGetGpuInstanceById", &api->GetGpuInstanceById, nullptr);
  Resolve(handle, "nvmlGpuInstanceGetInfo", &api->GpuInstanceGetInfo, nullptr);
  Resolve(handle, "nvmlGpuInstanceGetComputeInstanceProfileInfo",
          &api->GetComputeInstanceProfileInfo, nullptr);
  Resolve(handle, "nvmlGpuInstanceCreateComputeInstance", &api->CreateComputeInstance, nullptr);
  Resolve(handle, "nvmlGpuInstanceGetComputeInstances", &api->GetComputeInstances, nullptr);
  Resolve(handle, "nvmlComputeInstanceDestroy", &api->ComputeInstanceDestroy, nullptr);
  Resolve(handle, "nvmlGpuInstanceDestroy", &api->GpuInstanceDestroy, nullptr);
  api->library = library;
  const nvmlReturn_t r = api->Init();
  if (r != kNvmlSuccess) {
    std::string err = api->Error(r);
    dlclose(handle);
    return Status::Unavailable("backend=nvml unavailable: nvmlInit_v2: " + err +
                               "; use backend: simulated");
  }
  return std::unique_ptr<NvmlBackend>(
      new NvmlBackend(handle, std::move(api), std::move(models), std::move(paths)));
}

NvmlBackend::NvmlBackend(void* handle, std::unique_ptr<Api> api, Catalog models,
                         NvmlDevicePaths paths)
    : handle_(handle), api_(std::move(api)), models_(std::move(models)), paths_(std::move(paths)) {
  std::vector<std::string> dirs = paths_.driver_dirs;
  if (dirs.empty()) {
    if (std::string dir = LoadedLibraryDir(handle_); !dir.empty()) dirs.push_back(dir);
  }
  driver_files_ = FindDriverFiles(dirs, paths_.bin_dirs);
  if (driver_files_.empty()) {
    LogWarn("agent.nvml",
            "no driver library found next to NVML; GPU tasks from images will not find libcuda",
            {{"dirs", dirs.empty() ? std::string("(unknown)") : dirs.front()}});
  }
}

std::string NvmlBackend::CapabilityFile(const std::string& access) const {
  // The access file reads "DeviceFileMinor: 21\nDeviceFileMode: 292\nDeviceFileModify: 1".
  std::ifstream in(access);
  std::string line;
  while (std::getline(in, line)) {
    const std::string key = "DeviceFileMinor:";
    if (line.rfind(key, 0) != 0) continue;
    try {
      const int minor = std::stoi(line.substr(key.size()));
      if (minor >= 0) return paths_.dev_dir + "/nvidia-caps/nvidia-cap" + std::to_string(minor);
    } catch (const std::exception&) {
    }
  }
  LogWarn("agent.nvml", "no MIG capability minor; tasks cannot open this instance",
          {{"file", access}});
  return "";
}

NvmlBackend::~NvmlBackend() {
  if (event_set_ != nullptr && api_->EventSetFree != nullptr) api_->EventSetFree(event_set_);
  api_->Shutdown();
  dlclose(handle_);
}

Result<Inventory> NvmlBackend::Discover() {
  const Api& a = *api_;
  unsigned int count = 0;
  nvmlReturn_t r = a.GetCount(&count);
  if (r != kNvmlSuccess) return Status::Unavailable("nvmlDeviceGetCount_v2: " + a.Error(r));
  Inventory inv;
  devices_.clear();
  std::vector<nvmlDevice_t> gpus;
  for (unsigned int i = 0; i < count; ++i) {
    nvmlDevice_t dev = nullptr;
    r = a.GetHandleByIndex(i, &dev);
    if (r != kNvmlSuccess) {
      return Status::Unavailable("nvmlDeviceGetHandleByIndex_v2(" + std::to_string(i) +
                                 "): " + a.Error(r));
    }
    gpus.push_back(dev);
    char uuid[96] = {}, name[96] = {};
    a.GetUuid(dev, uuid, sizeof(uuid));
    a.GetName(dev, name, sizeof(name));
    const std::string nvml_name = Cstr(name, sizeof(name));
    Device d;
    d.uuid = Cstr(uuid, sizeof(uuid));
    d.index = static_cast<int32_t>(i);
    // The catalog lists the drivers' product names as aliases ("NVIDIA H100 80GB HBM3").
    const GpuModel* spec = models_.Find(nvml_name);
    d.model = spec != nullptr ? spec->name : nvml_name;
    if (spec == nullptr) {
      LogWarn("agent.nvml", "GPU model not in the catalog; gpupoold will refuse this node",
              {{"nvml_name", nvml_name}, {"index", std::to_string(i)}});
    }
    NvmlMemory mem{};
    if (a.GetMemoryInfo(dev, &mem) == kNvmlSuccess) {
      d.vram_mib = static_cast<int64_t>(mem.total / (1024 * 1024));
    } else if (spec) {
      d.vram_mib = spec->vram_mib;
    }
    d.milli_tflops = spec != nullptr ? spec->ComputeMilliTflops() : 0;
    d.numa_node = NumaNodeOf(a, dev);
    unsigned int minor = 0;
    const bool has_minor =
        a.GetMinorNumber != nullptr && a.GetMinorNumber(dev, &minor) == kNvmlSuccess;
    if (has_minor) {
      d.device_files = {paths_.dev_dir + "/nvidia" + std::to_string(minor)};
    } else {
      LogWarn("agent.nvml", "no minor number for the GPU; sandboxed tasks cannot open it",
              {{"uuid", d.uuid}, {"index", std::to_string(i)}});
    }
    unsigned int current = 0, pending = 0, max_mig = 0;
    d.mig_enabled = a.GetMigMode != nullptr &&
                    a.GetMigMode(dev, &current, &pending) == kNvmlSuccess && current == 1;
    inv.devices.push_back(d);
    devices_.emplace_back(d.uuid, dev);
    RegisterEvents(d.uuid, dev);
    if (!d.mig_enabled || a.GetMaxMigDeviceCount == nullptr ||
        a.GetMigDeviceHandleByIndex == nullptr ||
        a.GetMaxMigDeviceCount(dev, &max_mig) != kNvmlSuccess) {
      continue;
    }
    for (unsigned int j = 0; j < max_mig; ++j) {
      nvmlDevice_t mig = nullptr;
      if (a.GetMigDeviceHandleByIndex(dev, j, &mig) != kNvmlSuccess) continue;
      char muuid[96] = {}, mname[96] = {};
      a.GetUuid(mig, muuid, sizeof(muuid));
      a.GetName(mig, mname, sizeof(mname));
      Device m = d;
      m.mig_enabled = false;  // the instance is not itself re-partitionable
      m.uuid = Cstr(muuid, sizeof(muuid));
      m.parent_uuid = d.uuid;
      const std::string mn = Cstr(mname, sizeof(mname));
      const size_t at = mn.rfind("MIG ");
      m.mig_profile = at == std::string::npos ? mn : mn.substr(at + 4);
      NvmlMemory mm{};
      if (a.GetMemoryInfo(mig, &mm) == kNvmlSuccess) {
        m.vram_mib = static_cast<int64_t>(mm.total / (1024 * 1024));
      }
      const MigProfile* prof = spec != nullptr ? spec->FindMig(m.mig_profile) : nullptr;
      m.milli_tflops = prof != nullptr ? prof->milli_tflops : 0;
      // The parent's node (copied with `d`) plus the instance's two access capabilities.
      unsigned int gi = 0, ci = 0;
      if (has_minor && a.GetGpuInstanceId != nullptr && a.GetComputeInstanceId != nullptr &&
          a.GetGpuInstanceId(mig, &gi) == kNvmlSuccess &&
          a.GetComputeInstanceId(mig, &ci) == kNvmlSuccess) {
        m.mig_start = MigStartOf(dev, gi);
        const std::string gi_dir = paths_.proc_dir + "/capabilities/gpu" + std::to_string(minor) +
                                   "/mig/gi" + std::to_string(gi);
        for (const std::string& access :
             {gi_dir + "/access", gi_dir + "/ci" + std::to_string(ci) + "/access"}) {
          if (std::string f = CapabilityFile(access); !f.empty()) m.device_files.push_back(f);
        }
      } else {
        LogWarn("agent.nvml", "no GPU/compute instance id for a MIG device; tasks cannot open it",
                {{"uuid", m.uuid}});
      }
      inv.devices.push_back(m);
      devices_.emplace_back(m.uuid, mig);
    }
  }
  inv.driver_files = driver_files_;
  for (const char* f : {"nvidiactl", "nvidia-uvm", "nvidia-uvm-tools"}) {
    const std::string path = paths_.dev_dir + "/" + f;
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0 && S_ISCHR(st.st_mode)) {
      inv.control_device_files.push_back(path);
    } else if (!gpus.empty() && std::string(f) != "nvidia-uvm-tools") {
      LogWarn("agent.nvml", "a control device file is missing; sandboxed CUDA tasks will fail",
              {{"file", path}});
    }
  }
  for (size_t i = 0; i < gpus.size(); ++i) {
    for (size_t j = i + 1; j < gpus.size(); ++j) {
      Link l{static_cast<int32_t>(i), static_cast<int32_t>(j), LinkKind::kSystem, 0};
      int p2p = -1, level = -1;
      if (a.GetP2PStatus &&
          a.GetP2PStatus(gpus[i], gpus[j], kP2pCapsNvlink, &p2p) == kNvmlSuccess &&
          p2p == kP2pStatusOk) {
        l.kind = LinkKind::kNvlink;
      } else if (a.GetTopologyCommonAncestor &&
                 a.GetTopologyCommonAncestor(gpus[i], gpus[j], &level) == kNvmlSuccess) {
        l.kind = level <= kTopoMultiple && level >= kTopoSingle   ? LinkKind::kPcieSwitch
                 : level <= kTopoNode && level >= kTopoHostBridge ? LinkKind::kPcieHost
                 : level < kTopoSingle                            ? LinkKind::kNvlink
                                                                  : LinkKind::kSystem;
      }
      inv.links.push_back(l);
    }
  }
  return inv;
}

std::vector<DeviceSample> NvmlBackend::Sample(const std::vector<DeviceLoad>& /*load*/) {
  const Api& a = *api_;
  std::vector<DeviceSample> out;
  for (const auto& [uuid, dev] : devices_) {
    DeviceSample s;
    s.uuid = uuid;
    bool lost = false;
    auto check = [&](nvmlReturn_t r) {
      if (r == kNvmlErrorGpuIsLost) lost = true;
      return r == kNvmlSuccess;
    };
    NvmlUtilization u{};
    if (check(a.GetUtilizationRates(dev, &u))) {
      s.utilization_pct = static_cast<int32_t>(u.gpu);
      s.memory_util_pct = static_cast<int32_t>(u.memory);
    }
    NvmlMemory m{};
    if (check(a.GetMemoryInfo(dev, &m))) {
      s.memory_used_mib = static_cast<int64_t>(m.used / (1024 * 1024));
    }
    unsigned int mw = 0, temp = 0;
    if (check(a.GetPowerUsage(dev, &mw))) s.power_watts = static_cast<int32_t>(mw / 1000);
    if (check(a.GetTemperature(dev, kTemperatureGpu, &temp))) {
      s.temperature_c = static_cast<int32_t>(temp);
    }
    unsigned long long ecc = 0;
    if (a.GetTotalEccErrors &&
        check(a.GetTotalEccErrors(dev, kMemoryErrorUncorrected, kEccVolatile, &ecc))) {
      s.ecc_errors = static_cast<int64_t>(ecc);
    }
    s.healthy = !lost;
    out.push_back(s);
  }
  return out;
}

// XID and ECC events: one event set for every GPU (MIG instances share their GPU's events).
// Registration is tried once per GPU; a GPU or driver that refuses it is logged and the
// xid_events capability says so.
void NvmlBackend::RegisterEvents(const std::string& uuid, void* dev) {
  const Api& a = *api_;
  if (events_tried_.contains(uuid)) return;
  events_tried_.insert(uuid);
  if (a.EventSetCreate == nullptr || a.RegisterEvents == nullptr || a.EventSetWait == nullptr) {
    event_error_ = "this libnvidia-ml has no event API (nvmlEventSetWait_v2)";
    return;
  }
  if (event_set_ == nullptr) {
    if (nvmlReturn_t r = a.EventSetCreate(&event_set_); r != kNvmlSuccess) {
      event_set_ = nullptr;
      event_error_ = "nvmlEventSetCreate: " + a.Error(r);
      return;
    }
  }
  const unsigned long long types = kEventXidCritical | kEventDoubleBitEcc | kEventSingleBitEcc;
  nvmlReturn_t r = a.RegisterEvents(dev, types, event_set_);
  if (r != kNvmlSuccess) {
    // ECC events are refused where ECC is off: XIDs alone are still worth watching.
    r = a.RegisterEvents(dev, kEventXidCritical, event_set_);
  }
  if (r != kNvmlSuccess) {
    event_error_ = "nvmlDeviceRegisterEvents(" + uuid + "): " + a.Error(r);
    LogWarn("agent.nvml", "XID events not watched on a GPU",
            {{"uuid", uuid}, {"error", a.Error(r)}});
    return;
  }
  watched_.insert(uuid);
}

std::vector<DeviceEvent> NvmlBackend::PollEvents() {
  std::vector<DeviceEvent> out;
  const Api& a = *api_;
  if (event_set_ == nullptr) return out;
  const int64_t now = std::chrono::duration_cast<std::chrono::microseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  for (int i = 0; i < 256; ++i) {  // bounded: the strand has other work
    NvmlEventData data{};
    const nvmlReturn_t r = a.EventSetWait(event_set_, &data, 0);
    if (r == kNvmlErrorTimeout) break;
    if (r != kNvmlSuccess) {
      LogWarn("agent.nvml", "nvmlEventSetWait_v2 failed", {{"error", a.Error(r)}});
      break;
    }
    DeviceEvent e;
    for (const auto& [uuid, dev] : devices_) {
      if (dev == data.device) e.uuid = uuid;
    }
    if (e.uuid.empty()) continue;
    e.time_us = now;
    if (data.event_type & kEventXidCritical) {
      e.kind = DeviceEvent::Kind::kXid;
      e.xid = static_cast<int32_t>(data.event_data);
    } else if (data.event_type & kEventDoubleBitEcc) {
      e.kind = DeviceEvent::Kind::kEccUncorrected;
    } else if (data.event_type & kEventSingleBitEcc) {
      e.kind = DeviceEvent::Kind::kEccCorrected;
    } else {
      continue;
    }
    out.push_back(std::move(e));
  }
  return out;
}

std::string NvmlBackend::EventSource() const {
  if (!watched_.empty() && event_error_.empty()) {
    return "NVML events (XID, ECC) on " + std::to_string(watched_.size()) + " GPU(s)";
  }
  if (!watched_.empty()) {
    return "NVML events on " + std::to_string(watched_.size()) +
           " GPU(s); not all: " + event_error_;
  }
  return "";
}

std::string NvmlBackend::EventError() const { return event_error_; }

}  // namespace gpupool::agent
