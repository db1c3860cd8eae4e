// NvmlBackend's MIG side: where each instance sits, and re-partitioning one GPU through NVML's
// MIG management calls (NVML reference, "Multi Instance GPU Management";
// https://docs.nvidia.com/deploy/nvml-api/group__nvmlMultiInstanceGPU.html).
//
// Profile names → NVML ids. The catalog names profiles ("3g.40gb"); NVML creates instances of
// a GPU instance profile id (NVML_GPU_INSTANCE_PROFILE_*). Only the driver knows which ids a GPU
// has and what each holds, so the map is asked of it on every call, for ids 0..9:
//  1. with nvmlDeviceGetGpuInstanceProfileInfoV (v2 info, R510+), the profile's name ("MIG
//     3g.40gb") after "MIG " equals the catalog's name, ignoring case;
//  2. without it, the id whose sliceCount is the profile's compute_slices and whose placements'
//     size is its memory_slices; the lowest such id wins, so the 1-slice variant with media
//     extensions (1_SLICE_REV1, id 7) never shadows the plain one (1_SLICE, id 0).
// An id the catalog does not name (e.g. "+me") is still read and restored, as "NVML profile N".
//
// Re-partitioning (DeviceBackend::ApplyMigLayout): read the GPU's instances, destroy every
// compute instance then every GPU instance, create each placement (the GPU instance at its
// start, then one compute instance of the profile whose slices are the whole GPU instance's).
// On a refusal, the GPU is brought back to what was read (instances not in it destroyed, the
// missing ones created, each with one whole compute instance); if that fails too, everything is
// destroyed and DATA_LOSS returned. A previous GPU instance split into several compute
// instances comes back as one: the agent only ever creates whole ones.
#include <algorithm>
#include <cctype>
#include <cstring>
#include <map>
#include <vector>

#include "agent/nvml_api.h"
#include "base/log.h"

namespace gpupool::agent {
namespace {

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

// The NVML profiles of one GPU.
struct ProfileMap {
  struct Entry {
    std::string name;  // the catalog's, or "NVML profile <id>"
    unsigned compute_slices = 0, memory_slices = 0, instance_count = 0;
  };
  std::map<unsigned, Entry> by_id;
  std::map<std::string, unsigned> id_of;  // Lower(catalog name) → id
};

// One GPU instance as read from the driver.
struct Instance {
  unsigned profile_id = 0, start = 0, id = 0;
  nvmlGpuInstance_t handle = nullptr;
};

// One ApplyMigLayout call's view of one GPU.
struct Gpu {
  const NvmlBackend::Api& a;
  nvmlDevice_t dev;
  std::string uuid;
  ProfileMap profiles;

  std::string Name(unsigned profile_id, unsigned start) const {
    auto it = profiles.by_id.find(profile_id);
    const std::string name =
        it != profiles.by_id.end() ? it->second.name : "NVML profile " + std::to_string(profile_id);
    return name + "@" + std::to_string(start);
  }
};

// A refusal, named: the driver's reason becomes the status code the caller can act on.
Status Refused(const NvmlBackend::Api& a, nvmlReturn_t r, const std::string& what) {
  const std::string m = what + ": " + a.Error(r);
  switch (r) {
    case kNvmlErrorInsufficientResources:
      return Status::ResourceExhausted(m);
    case kNvmlErrorInUse:
      return Status::FailedPrecondition(m);
    case kNvmlErrorInvalidArgument:
    case kNvmlErrorNotSupported:
      return Status::InvalidArgument(m);
    case kNvmlErrorNoPermission:
      return Status::PermissionDenied(m);
    default:
      return Status::Unavailable(m);
  }
}

// The first MIG management entry point the library lacks, or nullptr.
const char* MissingMigCall(const NvmlBackend::Api& a) {
  const std::pair<const void*, const char*> calls[] = {
      {reinterpret_cast<const void*>(a.GetGpuInstanceProfileInfo),
       "nvmlDeviceGetGpuInstanceProfileInfo"},
      {reinterpret_cast<const void*>(a.GetGpuInstancePossiblePlacements),
       "nvmlDeviceGetGpuInstancePossiblePlacements_v2"},
      {reinterpret_cast<const void*>(a.CreateGpuInstanceWithPlacement),
       "nvmlDeviceCreateGpuInstanceWithPlacement"},
      {reinterpret_cast<const void*>(a.GetGpuInstances), "nvmlDeviceGetGpuInstances"},
      {reinterpret_cast<const void*>(a.GpuInstanceGetInfo), "nvmlGpuInstanceGetInfo"},
      {reinterpret_cast<const void*>(a.GetComputeInstanceProfileInfo),
       "nvmlGpuInstanceGetComputeInstanceProfileInfo"},
      {reinterpret_cast<const void*>(a.CreateComputeInstance),
       "nvmlGpuInstanceCreateComputeInstance"},
      {reinterpret_cast<const void*>(a.GetComputeInstances), "nvmlGpuInstanceGetComputeInstances"},
      {reinterpret_cast<const void*>(a.ComputeInstanceDestroy), "nvmlComputeInstanceDestroy"},
      {reinterpret_cast<const void*>(a.GpuInstanceDestroy), "nvmlGpuInstanceDestroy"},
  };
  for (const auto& [fn, name] : calls) {
    if (fn == nullptr) return name;
  }
  return nullptr;
}

// Every GPU instance profile the driver offers on `dev`, named after `model`'s (see the top).
ProfileMap MapProfiles(const NvmlBackend::Api& a, nvmlDevice_t dev, const GpuModel* model) {
  ProfileMap map;
  for (unsigned id = 0; id < kGpuInstanceProfileCount; ++id) {
    NvmlGpuInstanceProfileInfo info{};
    if (a.GetGpuInstanceProfileInfo(dev, id, &info) != kNvmlSuccess) continue;
    unsigned n = 0;
    NvmlPlacement placements[kMigMemorySlices] = {};
    ProfileMap::Entry e{"NVML profile " + std::to_string(id), info.slice_count, 0,
                        info.instance_count};
    if (a.GetGpuInstancePossiblePlacements(dev, id, nullptr, &n) == kNvmlSuccess && n > 0 &&
        n <= kMigMemorySlices &&
        a.GetGpuInstancePossiblePlacements(dev, id, placements, &n) == kNvmlSuccess) {
      e.memory_slices = placements[0].size;
    }
    std::string named;  // the catalog profile this id is
    NvmlGpuInstanceProfileInfoV2 v2{};
    v2.version = kGpuInstanceProfileInfoV2;
    if (a.GetGpuInstanceProfileInfoV != nullptr &&
        a.GetGpuInstanceProfileInfoV(dev, id, &v2) == kNvmlSuccess) {
      std::string name(v2.name, strnlen(v2.name, sizeof(v2.name)));
      if (name.rfind("MIG ", 0) == 0) name = name.substr(4);
      if (model != nullptr && model->FindMig(name) != nullptr) named = model->FindMig(name)->name;
    } else if (model != nullptr) {
      for (const MigProfile& p : model->mig_profiles) {
        if (static_cast<unsigned>(p.compute_slices) == e.compute_slices &&
            static_cast<unsigned>(p.memory_slices) == e.memory_slices &&
            !map.id_of.contains(Lower(p.name))) {
          named = p.name;
          break;
        }
      }
    }
    if (!named.empty() && !map.id_of.contains(Lower(named))) {
      e.name = named;
      map.id_of[Lower(named)] = id;
    }
    map.by_id[id] = e;
  }
  return map;
}

// The GPU's instances, sorted by start.
Result<std::vector<Instance>> ReadInstances(const Gpu& g) {
  std::vector<Instance> out;
  for (const auto& [id, e] : g.profiles.by_id) {
    std::vector<nvmlGpuInstance_t> handles(std::max(e.instance_count, 8u));
    unsigned n = 0;
    if (nvmlReturn_t r = g.a.GetGpuInstances(g.dev, id, handles.data(), &n); r != kNvmlSuccess) {
      return Refused(g.a, r, "GPU " + g.uuid + ": nvmlDeviceGetGpuInstances(" + e.name + ")");
    }
    for (unsigned i = 0; i < n && i < handles.size(); ++i) {
      NvmlGpuInstanceInfo info{};
      if (nvmlReturn_t r = g.a.GpuInstanceGetInfo(handles[i], &info); r != kNvmlSuccess) {
        return Refused(g.a, r, "GPU " + g.uuid + ": nvmlGpuInstanceGetInfo(" + e.name + ")");
      }
      out.push_back({id, info.placement.start, info.id, handles[i]});
    }
  }
  std::sort(out.begin(), out.end(),
            [](const Instance& x, const Instance& y) { return x.start < y.start; });
  return out;
}

std::vector<nvmlComputeInstance_t> ComputeInstancesOf(const Gpu& g, nvmlGpuInstance_t gi) {
  std::vector<nvmlComputeInstance_t> out;
  for (unsigned id = 0; id < kComputeInstanceProfileCount; ++id) {
    nvmlComputeInstance_t cis[kMigComputeSlices + 1] = {};
    unsigned n = 0;
    // A profile the GPU instance does not offer answers an error: it has none of those.
    if (g.a.GetComputeInstances(gi, id, cis, &n) != kNvmlSuccess) continue;
    out.insert(out.end(), cis, cis + std::min<unsigned>(n, kMigComputeSlices + 1));
  }
  return out;
}

// Destroys `gi`'s compute instances, then `gi`.
Status Destroy(const Gpu& g, const Instance& gi) {
  const std::string what = "GPU " + g.uuid + ": destroying " + g.Name(gi.profile_id, gi.start);
  for (nvmlComputeInstance_t ci : ComputeInstancesOf(g, gi.handle)) {
    if (nvmlReturn_t r = g.a.ComputeInstanceDestroy(ci); r != kNvmlSuccess) {
      return Refused(
          g.a, r,
          what + " (GPU instance " + std::to_string(gi.id) + "): nvmlComputeInstanceDestroy");
    }
  }
  if (nvmlReturn_t r = g.a.GpuInstanceDestroy(gi.handle); r != kNvmlSuccess) {
    return Refused(g.a, r,
                   what + " (GPU instance " + std::to_string(gi.id) + "): nvmlGpuInstanceDestroy");
  }
  return Status::Ok();
}

// One compute instance spanning all of `gi` (whose profile has `slices` compute slices).
Status CreateWholeComputeInstance(const Gpu& g, nvmlGpuInstance_t gi, unsigned slices,
                                  const std::string& what) {
  for (unsigned id = 0; id < kComputeInstanceProfileCount; ++id) {
    NvmlComputeInstanceProfileInfo info{};
    if (g.a.GetComputeInstanceProfileInfo(gi, id, kComputeInstanceEngineProfileShared, &info) !=
            kNvmlSuccess ||
        info.slice_count != slices) {
      continue;
    }
    nvmlComputeInstance_t ci = nullptr;
    if (nvmlReturn_t r = g.a.CreateComputeInstance(gi, id, &ci); r != kNvmlSuccess) {
      return Refused(g.a, r, what + ": nvmlGpuInstanceCreateComputeInstance");
    }
    return Status::Ok();
  }
  return Status::Unavailable(what + ": the driver offers no compute instance profile of " +
                             std::to_string(slices) + " slices in it");
}

// Creates a GPU instance of NVML profile `id` at `start`, and its whole compute instance.
Status Create(const Gpu& g, unsigned id, unsigned start, const std::string& step) {
  const ProfileMap::Entry& e = g.profiles.by_id.at(id);
  const std::string what = "GPU " + g.uuid + ": " + step + " " + g.Name(id, start);
  const NvmlPlacement placement{start, e.memory_slices};
  nvmlGpuInstance_t gi = nullptr;
  if (nvmlReturn_t r = g.a.CreateGpuInstanceWithPlacement(g.dev, id, &placement, &gi);
      r != kNvmlSuccess) {
    return Refused(g.a, r, what + ": nvmlDeviceCreateGpuInstanceWithPlacement");
  }
  return CreateWholeComputeInstance(g, gi, e.compute_slices, what);
}

// Brings the GPU to `want` from whatever it holds now (see the top).
Status Restore(const Gpu& g, const std::vector<Instance>& want) {
  auto now = ReadInstances(g);
  if (!now.ok()) return now.status();
  auto wanted = [&](const Instance& x) {
    return std::any_of(want.begin(), want.end(), [&](const Instance& w) {
      return w.profile_id == x.profile_id && w.start == x.start;
    });
  };
  for (const Instance& x : *now) {
    if (!wanted(x)) {
      if (Status s = Destroy(g, x); !s.ok()) return s;
    }
  }
  for (const Instance& w : want) {
    auto same = std::find_if(now->begin(), now->end(), [&](const Instance& x) {
      return w.profile_id == x.profile_id && w.start == x.start;
    });
    Status s = same == now->end() ? Create(g, w.profile_id, w.start, "re-creating")
               : ComputeInstancesOf(g, same->handle).empty()
                   ? CreateWholeComputeInstance(
                         g, same->handle, g.profiles.by_id.at(w.profile_id).compute_slices,
                         "GPU " + g.uuid + ": re-creating " + g.Name(w.profile_id, w.start))
                   : Status::Ok();
    if (!s.ok()) return s;
  }
  return Status::Ok();
}

std::string Format(const Gpu& g, const std::vector<Instance>& layout) {
  if (layout.empty()) return "(no instance)";
  std::string out;
  for (const Instance& x : layout) out += (out.empty() ? "" : "+") + g.Name(x.profile_id, x.start);
  return out;
}

// The GPU `uuid` of this node.
Result<nvmlDevice_t> FindGpu(const NvmlBackend::Api& a, const std::string& uuid) {
  unsigned count = 0;
  if (nvmlReturn_t r = a.GetCount(&count); r != kNvmlSuccess) {
    return Refused(a, r, "nvmlDeviceGetCount_v2");
  }
  for (unsigned i = 0; i < count; ++i) {
    nvmlDevice_t d = nullptr;
    char buf[96] = {};
    if (a.GetHandleByIndex(i, &d) == kNvmlSuccess &&
        a.GetUuid(d, buf, sizeof(buf)) == kNvmlSuccess &&
        std::string(buf, strnlen(buf, sizeof(buf))) == uuid) {
      return d;
    }
  }
  return Status::NotFound("no GPU " + uuid + " on this node");
}

// After `failed`: the GPU back to `old`, or, when that fails too, emptied and DATA_LOSS.
Status Rollback(const Gpu& g, const std::vector<Instance>& old, const Status& failed) {
  Status back = Restore(g, old);
  if (back.ok()) {
    return Status(failed.code(),
                  failed.message() + "; the previous layout " + Format(g, old) + " was restored");
  }
  // In no known layout: leave the GPU empty, so nothing runs on a half-made instance.
  std::string left;
  if (auto now = ReadInstances(g); now.ok()) {
    for (const Instance& x : *now) {
      if (Status d = Destroy(g, x); !d.ok()) left = "; " + d.message();
    }
  }
  return Status(StatusCode::kDataLoss, failed.message() + "; restoring the previous layout " +
                                           Format(g, old) + " failed too: " + back.message() +
                                           left);
}

// Tears down what is there and creates `layout` in order.
Status Replace(const Gpu& g, const std::vector<Instance>& old, const MigLayout& layout) {
  for (const Instance& x : old) {
    if (Status s = Destroy(g, x); !s.ok()) return s;
  }
  for (size_t i = 0; i < layout.size(); ++i) {
    const MigPlacement& p = layout[i];
    const std::string step = "creating placement " + std::to_string(i + 1) + " of " +
                             std::to_string(layout.size()) + ",";
    if (Status s =
            Create(g, g.profiles.id_of.at(Lower(p.profile)), static_cast<unsigned>(p.start), step);
        !s.ok()) {
      return s;
    }
  }
  return Status::Ok();
}

}  // namespace

int32_t NvmlBackend::MigStartOf(void* gpu, unsigned gpu_instance_id) const {
  const Api& a = *api_;
  nvmlGpuInstance_t gi = nullptr;
  NvmlGpuInstanceInfo info{};
  if (a.GetGpuInstanceById == nullptr || a.GpuInstanceGetInfo == nullptr ||
      a.GetGpuInstanceById(gpu, gpu_instance_id, &gi) != kNvmlSuccess ||
      a.GpuInstanceGetInfo(gi, &info) != kNvmlSuccess) {
    LogWarn("agent.nvml", "no placement for a GPU instance; its mig_start is reported as 0",
            {{"gpu_instance", std::to_string(gpu_instance_id)}});
    return 0;
  }
  return static_cast<int32_t>(info.placement.start);
}

Status NvmlBackend::ApplyMigLayout(const std::string& gpu_uuid, const MigLayout& layout) {
  const Api& a = *api_;
  if (const char* missing = MissingMigCall(a); missing != nullptr) {
    return Status::FailedPrecondition("cannot re-partition GPU " + gpu_uuid + ": " + a.library +
                                      " lacks MIG management (no " + missing +
                                      "); the driver is too old");
  }
  auto dev = FindGpu(a, gpu_uuid);
  if (!dev.ok()) return dev.status();
  unsigned current = 0, pending = 0;
  if (a.GetMigMode == nullptr || a.GetMigMode(*dev, &current, &pending) != kNvmlSuccess ||
      current != 1) {
    return Status::FailedPrecondition("cannot re-partition GPU " + gpu_uuid +
                                      ": its MIG mode is off (nvidia-smi -i <gpu> -mig 1)");
  }
  char buf[96] = {};
  a.GetName(*dev, buf, sizeof(buf));
  const std::string name(buf, strnlen(buf, sizeof(buf)));
  const GpuModel* model = models_.Find(name);
  if (model == nullptr) {
    // Layouts are stated in the catalog's profile names; without the model there are none.
    return Status::FailedPrecondition("cannot re-partition GPU " + gpu_uuid + ": its model (" +
                                      name + ") is not in the catalog");
  }
  const Gpu g{a, *dev, gpu_uuid, MapProfiles(a, *dev, model)};
  for (const MigPlacement& p : layout) {
    if (!g.profiles.id_of.contains(Lower(p.profile))) {
      return Status::InvalidArgument("cannot re-partition GPU " + gpu_uuid + " (" + name +
                                     "): the driver offers no MIG profile " + p.profile);
    }
  }
  auto old = ReadInstances(g);
  if (!old.ok()) return old.status();
  if (Status s = Replace(g, *old, layout); !s.ok()) return Rollback(g, *old, s);
  LogInfo("agent.nvml", "GPU re-partitioned",
          {{"uuid", gpu_uuid}, {"from", Format(g, *old)}, {"to", FormatMigLayout(layout)}});
  return Status::Ok();
}

}  // namespace gpupool::agent
