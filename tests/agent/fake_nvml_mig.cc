// A stand-in libnvidia-ml.so.1 that models MIG management, for NvmlBackend's re-partitioning
// tests (tests/agent/nvml_mig_test.cc) and for running the real agent binary on a node without
// GPUs. Loaded with dlopen; never linked.
//
// Behaviour follows NVIDIA's documentation:
//  - NVML API reference, "Multi Instance GPU Management"
//    (https://docs.nvidia.com/deploy/nvml-api/group__nvmlMultiInstanceGPU.html): the calls, their
//    structs and return codes (values from nvml.h, declared here, not copied).
//  - MIG User Guide (https://docs.nvidia.com/datacenter/tesla/mig-user-guide/), "Supported MIG
//    Profiles" and "Partitioning" (placements: a GPU has 8 memory slices; an instance takes
//    `size` contiguous slices from one of its profile's allowed starts and never overlaps
//    another), "Device Nodes and Capabilities" (access files and capability minors).
//
// The node (the driver's state in $GPUPOOL_FAKE_NVML_DIR, its files and fault injection) is
// tests/agent/fake_nvml_mig_node.h; this file is the NVML face over it.
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "tests/agent/fake_nvml_mig_node.h"

#define NVML_API extern "C" __attribute__((visibility("default")))

namespace {

using namespace fake_nvml_mig;  // NOLINT(google-build-using-namespace): this library's own model

// nvmlReturn_t values (nvml.h).
constexpr int kSuccess = 0, kUninitialized = 1, kInvalidArgument = 2, kNotSupported = 3,
              kNoPermission = 4, kNotFound = 6, kInsufficientSize = 7, kFunctionNotFound = 13,
              kInUse = 19, kInsufficientResources = 23, kArgumentVersionMismatch = 25,
              kUnknown = 999;
// NVML_GPU_INSTANCE_PROFILE_* ids: 1_SLICE 0, 2_SLICE 1, 3_SLICE 2, 4_SLICE 3, 7_SLICE 4,
// 8_SLICE 5, 6_SLICE 6, 1_SLICE_REV1 7 (+me), 2_SLICE_REV1 8, 1_SLICE_REV2 9, COUNT 10.
constexpr unsigned kGiProfileCount = 10;
constexpr unsigned kGiProfileInfoV2 = (2u << 24) | 152u;  // nvmlGpuInstanceProfileInfo_v2

struct GiProfileInfo {  // nvmlGpuInstanceProfileInfo_t
  unsigned id, isP2pSupported, sliceCount, instanceCount, multiprocessorCount, copyEngineCount,
      decoderCount, encoderCount, jpegCount, ofaCount;
  unsigned long long memorySizeMB;
};
struct GiProfileInfoV2 {  // nvmlGpuInstanceProfileInfo_v2_t
  unsigned version, id, isP2pSupported, sliceCount, instanceCount, multiprocessorCount,
      copyEngineCount, decoderCount, encoderCount, jpegCount, ofaCount;
  unsigned long long memorySizeMB;
  char name[96];
};
struct Placement {  // nvmlGpuInstancePlacement_t / nvmlComputeInstancePlacement_t
  unsigned start, size;
};
struct GiInfo {  // nvmlGpuInstanceInfo_t
  void* device;
  unsigned id, profileId;
  Placement placement;
};
struct CiProfileInfo {  // nvmlComputeInstanceProfileInfo_t
  unsigned id, sliceCount, instanceCount, multiprocessorCount, sharedCopyEngineCount,
      sharedDecoderCount, sharedEncoderCount, sharedJpegCount, sharedOfaCount;
};
struct CiInfo {  // nvmlComputeInstanceInfo_t
  void* device;
  void* gpuInstance;
  unsigned id, profileId;
  Placement placement;
};
struct Memory {
  unsigned long long total, free, used;
};
struct Utilization {
  unsigned gpu, memory;
};

// Handles are stable addresses: one per GPU, per GPU instance and per compute instance (keyed by
// creation serial, so a handle of a destroyed instance stays invalid even if its id is reused).
struct Handle {
  enum Kind { kGpu, kGi, kCi, kMig } kind;
  unsigned gpu, gi, ci;
  unsigned long long serial;
};

int g_init = 0;
std::map<std::tuple<int, unsigned, unsigned, unsigned, unsigned long long>, std::unique_ptr<Handle>>
    g_handles;

Handle* HandleFor(Handle::Kind k, unsigned gpu, unsigned gi = 0, unsigned ci = 0,
                  unsigned long long serial = 0) {
  auto& h = g_handles[{k, gpu, gi, ci, serial}];
  if (!h) h = std::make_unique<Handle>(Handle{k, gpu, gi, ci, serial});
  return h.get();
}

// A GPU handle's index, or -1 when `d` is not a whole GPU of this node.
int GpuOf(const Node& n, void* d) {
  const auto* h = static_cast<const Handle*>(d);
  if (h == nullptr || h->kind != Handle::kGpu || h->gpu >= n.gpus.size()) return -1;
  return static_cast<int>(h->gpu);
}

void Copy(char* buf, unsigned len, const std::string& s) {
  if (len > 0) std::snprintf(buf, len, "%s", s.c_str());
}

}  // namespace

NVML_API int nvmlInit_v2() {
  Node n;
  if (Dir().empty() || !n.ok) return kUnknown;
  SyncDeviceFiles(n.gpus, n.state);
  ++g_init;
  return kSuccess;
}

NVML_API int nvmlShutdown() {
  if (g_init == 0) return kUninitialized;
  --g_init;
  return kSuccess;
}

NVML_API const char* nvmlErrorString(int r) {
  switch (r) {
    case kSuccess:
      return "Success";
    case kUninitialized:
      return "Uninitialized";
    case kInvalidArgument:
      return "Invalid Argument";
    case kNotSupported:
      return "Not Supported";
    case kNoPermission:
      return "Insufficient Permissions";
    case kNotFound:
      return "Not Found";
    case kInsufficientSize:
      return "Insufficient Size";
    case kInUse:
      return "In use by another client";
    case kInsufficientResources:
      return "Insufficient resources";
    case kArgumentVersionMismatch:
      return "Argument version mismatch";
    case kFunctionNotFound:
      return "Function Not Found";
    default:
      return "Unknown Error";
  }
}

NVML_API int nvmlDeviceGetCount_v2(unsigned* count) {
  if (g_init == 0) return kUninitialized;
  Node n;
  *count = static_cast<unsigned>(n.gpus.size());
  return kSuccess;
}

NVML_API int nvmlDeviceGetHandleByIndex_v2(unsigned i, void** d) {
  if (g_init == 0) return kUninitialized;
  Node n;
  if (i >= n.gpus.size() || d == nullptr) return kInvalidArgument;
  *d = HandleFor(Handle::kGpu, i);
  return kSuccess;
}

NVML_API int nvmlDeviceGetUUID(void* d, char* buf, unsigned len) {
  Node n;
  const auto* h = static_cast<const Handle*>(d);
  if (h == nullptr || h->gpu >= n.gpus.size()) return kInvalidArgument;
  if (h->kind == Handle::kGpu) {
    Copy(buf, len, n.gpus[h->gpu].uuid);
  } else if (h->kind == Handle::kMig && n.FindCi(h->gpu, h->gi, h->ci, h->serial) != nullptr) {
    // Stable for one creation: a re-created instance gets a new UUID, as with a real driver.
    const std::string& gpu = n.gpus[h->gpu].uuid;
    Copy(buf, len,
         "MIG-" + (gpu.rfind("GPU-", 0) == 0 ? gpu.substr(4) : gpu) + "-" +
             std::to_string(h->serial));
  } else {
    return kInvalidArgument;
  }
  return kSuccess;
}

NVML_API int nvmlDeviceGetName(void* d, char* buf, unsigned len) {
  Node n;
  const auto* h = static_cast<const Handle*>(d);
  if (h == nullptr || h->gpu >= n.gpus.size()) return kInvalidArgument;
  const GpuConf& g = n.gpus[h->gpu];
  if (h->kind == Handle::kGpu) {
    Copy(buf, len, g.name);
    return kSuccess;
  }
  const Ci* ci = n.FindCi(h->gpu, h->gi, h->ci, h->serial);
  const Gi* gi = n.FindGi(h->gpu, h->gi);
  if (h->kind != Handle::kMig || ci == nullptr || gi == nullptr) return kInvalidArgument;
  const Profile* p = FindProfile(*g.model, gi->profile);
  // A compute instance smaller than its GPU instance is named "<c>c.<profile>".
  const int cs = kCiSlices[ci->profile];
  Copy(buf, len,
       g.name + " MIG " + (cs < p->slices ? std::to_string(cs) + "c." : "") + NameOf(*g.model, *p));
  return kSuccess;
}

NVML_API int nvmlDeviceGetMemoryInfo(void* d, Memory* m) {
  Node n;
  const auto* h = static_cast<const Handle*>(d);
  if (h == nullptr || h->gpu >= n.gpus.size() || m == nullptr) return kInvalidArgument;
  const Model& model = *n.gpus[h->gpu].model;
  unsigned long long mib = model.total_mib;
  if (h->kind != Handle::kGpu) {
    const Gi* gi = n.FindGi(h->gpu, h->gi);
    if (gi == nullptr) return kInvalidArgument;
    mib = model.slice_mib * static_cast<unsigned>(FindProfile(model, gi->profile)->memory_slices);
  }
  m->total = mib << 20;
  m->used = 0;
  m->free = m->total;
  return kSuccess;
}

NVML_API int nvmlDeviceGetUtilizationRates(void* d, Utilization* u) {
  if (static_cast<Handle*>(d)->kind != Handle::kGpu) return kNotSupported;
  *u = {0, 0};
  return kSuccess;
}
NVML_API int nvmlDeviceGetPowerUsage(void* /*d*/, unsigned* mw) {
  *mw = 90'000;
  return kSuccess;
}
NVML_API int nvmlDeviceGetTemperature(void* /*d*/, int /*sensor*/, unsigned* t) {
  *t = 40;
  return kSuccess;
}

NVML_API int nvmlDeviceGetMinorNumber(void* d, unsigned* minor) {
  Node n;
  const int g = GpuOf(n, d);
  if (g < 0)
    return static_cast<Handle*>(d)->kind == Handle::kMig ? kNotSupported : kInvalidArgument;
  *minor = n.gpus[static_cast<unsigned>(g)].minor;
  return kSuccess;
}

NVML_API int nvmlDeviceGetMigMode(void* d, unsigned* current, unsigned* pending) {
  Node n;
  const int g = GpuOf(n, d);
  if (g < 0) return kInvalidArgument;
  *current = *pending = n.gpus[static_cast<unsigned>(g)].mig ? 1 : 0;
  return kSuccess;
}

NVML_API int nvmlDeviceGetMaxMigDeviceCount(void* d, unsigned* count) {
  Node n;
  if (GpuOf(n, d) < 0) return kInvalidArgument;
  *count = 7;
  return kSuccess;
}

NVML_API int nvmlDeviceGetMigDeviceHandleByIndex(void* d, unsigned index, void** mig) {
  Node n;
  const int g = GpuOf(n, d);
  if (g < 0 || mig == nullptr) return kInvalidArgument;
  if (!n.gpus[static_cast<unsigned>(g)].mig) return kNotSupported;
  const auto devs = n.MigDevices(static_cast<unsigned>(g));
  if (index >= devs.size()) return kNotFound;
  const Ci& c = *devs[index];
  *mig = HandleFor(Handle::kMig, c.gpu, c.gi, c.id, c.serial);
  return kSuccess;
}

NVML_API int nvmlDeviceGetGpuInstanceId(void* d, unsigned* id) {
  const auto* h = static_cast<const Handle*>(d);
  if (h == nullptr || h->kind != Handle::kMig) return kInvalidArgument;
  *id = h->gi;
  return kSuccess;
}

NVML_API int nvmlDeviceGetComputeInstanceId(void* d, unsigned* id) {
  const auto* h = static_cast<const Handle*>(d);
  if (h == nullptr || h->kind != Handle::kMig) return kInvalidArgument;
  *id = h->ci;
  return kSuccess;
}

// --- MIG management -------------------------------------------------------------------------

namespace {

// The profile `id` of GPU `d`, or the NVML error for asking: INVALID_ARGUMENT for a bad handle or
// an id beyond the header's, NOT_SUPPORTED for one this GPU lacks.
int Lookup(const Node& n, void* d, unsigned id, const Profile** out) {
  const int g = GpuOf(n, d);
  if (g < 0 || id >= kGiProfileCount) return kInvalidArgument;
  *out = FindProfile(*n.gpus[static_cast<unsigned>(g)].model, id);
  return *out != nullptr ? kSuccess : kNotSupported;
}

void Fill(const Model& m, const Profile& p, GiProfileInfo* info) {
  *info = {p.id,
           0,
           static_cast<unsigned>(p.slices),
           static_cast<unsigned>(p.max_instances),
           static_cast<unsigned>(p.slices * m.sms_per_slice),
           static_cast<unsigned>(p.slices),
           static_cast<unsigned>(p.slices),
           0,
           static_cast<unsigned>(p.slices == 7 || p.id == 7),
           static_cast<unsigned>(p.slices == 7 || p.id == 7),
           m.slice_mib * static_cast<unsigned>(p.memory_slices)};
}

// A live GPU instance handle's record, or nullptr.
const Gi* GiOf(const Node& n, void* gi) {
  const auto* h = static_cast<const Handle*>(gi);
  if (h == nullptr || h->kind != Handle::kGi) return nullptr;
  return n.FindGi(h->gpu, h->gi, h->serial);
}

}  // namespace

NVML_API int nvmlDeviceGetGpuInstanceProfileInfo(void* d, unsigned id, GiProfileInfo* info) {
  Node n;
  const Profile* p = nullptr;
  if (info == nullptr) return kInvalidArgument;
  if (int r = Lookup(n, d, id, &p); r != kSuccess) return r;
  Fill(*n.gpus[static_cast<Handle*>(d)->gpu].model, *p, info);
  return kSuccess;
}

NVML_API int nvmlDeviceGetGpuInstanceProfileInfoV(void* d, unsigned id, GiProfileInfoV2* info) {
  Node n;
  const Profile* p = nullptr;
  if (info == nullptr) return kInvalidArgument;
  if (V1Only()) return kFunctionNotFound;
  if (info->version != kGiProfileInfoV2) return kArgumentVersionMismatch;
  if (int r = Lookup(n, d, id, &p); r != kSuccess) return r;
  const Model& m = *n.gpus[static_cast<Handle*>(d)->gpu].model;
  GiProfileInfo v1{};
  Fill(m, *p, &v1);
  *info = {kGiProfileInfoV2,
           v1.id,
           v1.isP2pSupported,
           v1.sliceCount,
           v1.instanceCount,
           v1.multiprocessorCount,
           v1.copyEngineCount,
           v1.decoderCount,
           v1.encoderCount,
           v1.jpegCount,
           v1.ofaCount,
           v1.memorySizeMB,
           {}};
  Copy(info->name, sizeof(info->name), "MIG " + NameOf(m, *p));
  return kSuccess;
}

// "Returns all the possible placements for the given profile regardless of whether MIG is enabled
// or not"; placements == NULL asks for the count.
NVML_API int nvmlDeviceGetGpuInstancePossiblePlacements_v2(void* d, unsigned id,
                                                           Placement* placements, unsigned* count) {
  Node n;
  const Profile* p = nullptr;
  if (count == nullptr) return kInvalidArgument;
  if (int r = Lookup(n, d, id, &p); r != kSuccess) return r;
  if (placements != nullptr && *count < p->starts.size()) return kInsufficientSize;
  *count = static_cast<unsigned>(p->starts.size());
  if (placements == nullptr) return kSuccess;
  for (size_t i = 0; i < p->starts.size(); ++i) {
    placements[i] = {static_cast<unsigned>(p->starts[i]), static_cast<unsigned>(p->memory_slices)};
  }
  return kSuccess;
}

NVML_API int nvmlDeviceCreateGpuInstanceWithPlacement(void* d, unsigned id,
                                                      const Placement* placement, void** out) {
  Node n;
  const Profile* p = nullptr;
  if (placement == nullptr || out == nullptr) return kInvalidArgument;
  if (int r = Lookup(n, d, id, &p); r != kSuccess) return r;
  const unsigned gpu = static_cast<Handle*>(d)->gpu;
  const GpuConf& g = n.gpus[gpu];
  if (!g.mig) return kNotSupported;
  if (Unprivileged()) return kNoPermission;
  if (placement->size != static_cast<unsigned>(p->memory_slices) ||
      std::find(p->starts.begin(), p->starts.end(), static_cast<int>(placement->start)) ==
          p->starts.end()) {
    return kInvalidArgument;  // not one of nvmlDeviceGetGpuInstancePossiblePlacements_v2's
  }
  int same = 0;
  unsigned used = 0;  // memory slices taken, as a bit mask
  for (const Gi& gi : n.state.gis) {
    if (gi.gpu != gpu) continue;
    const Profile* q = FindProfile(*g.model, gi.profile);
    same += gi.profile == id;
    used |= ((1u << q->memory_slices) - 1) << gi.start;
  }
  const unsigned want = ((1u << p->memory_slices) - 1) << placement->start;
  if ((used & want) != 0 || same >= p->max_instances) return kInsufficientResources;
  if (RefuseCreate(NameOf(*g.model, *p))) return kInsufficientResources;
  unsigned gid = p->memory_slices == 8 ? 0 : 1;
  while (n.FindGi(gpu, gid) != nullptr) ++gid;
  const Gi made{gpu, gid, id, placement->start, n.state.next_serial++};
  n.state.gis.push_back(made);
  if (!n.Save()) return kUnknown;
  *out = HandleFor(Handle::kGi, gpu, made.id, 0, made.serial);
  return kSuccess;
}

// "gpuInstances … must be large enough to accommodate the instances supported by the profile".
NVML_API int nvmlDeviceGetGpuInstances(void* d, unsigned id, void** gis, unsigned* count) {
  Node n;
  const Profile* p = nullptr;
  if (gis == nullptr || count == nullptr) return kInvalidArgument;
  if (int r = Lookup(n, d, id, &p); r != kSuccess) return r;
  const unsigned gpu = static_cast<Handle*>(d)->gpu;
  if (!n.gpus[gpu].mig) return kNotSupported;
  unsigned k = 0;
  for (const Gi& gi : n.state.gis) {
    if (gi.gpu == gpu && gi.profile == id)
      gis[k++] = HandleFor(Handle::kGi, gpu, gi.id, 0, gi.serial);
  }
  *count = k;
  return kSuccess;
}

NVML_API int nvmlDeviceGetGpuInstanceById(void* d, unsigned id, void** gi) {
  Node n;
  const int g = GpuOf(n, d);
  if (g < 0 || gi == nullptr) return kInvalidArgument;
  if (!n.gpus[static_cast<unsigned>(g)].mig) return kNotSupported;
  const Gi* found = n.FindGi(static_cast<unsigned>(g), id);
  if (found == nullptr) return kNotFound;
  *gi = HandleFor(Handle::kGi, found->gpu, found->id, 0, found->serial);
  return kSuccess;
}

NVML_API int nvmlGpuInstanceGetInfo(void* gi, GiInfo* info) {
  Node n;
  const Gi* g = GiOf(n, gi);
  if (g == nullptr || info == nullptr) return kInvalidArgument;
  const Profile* p = FindProfile(*n.gpus[g->gpu].model, g->profile);
  *info = {HandleFor(Handle::kGpu, g->gpu),
           g->id,
           g->profile,
           {g->start, static_cast<unsigned>(p->memory_slices)}};
  return kSuccess;
}

NVML_API int nvmlGpuInstanceDestroy(void* gi) {
  Node n;
  const Gi* g = GiOf(n, gi);
  if (g == nullptr) return kInvalidArgument;
  if (Unprivileged()) return kNoPermission;
  for (const Ci& c : n.state.cis) {
    if (c.gpu == g->gpu && c.gi == g->id) return kInUse;  // "has active compute instances"
  }
  if (InUse(g->gpu, g->id, -1)) return kInUse;
  n.state.gis.erase(n.state.gis.begin() + (g - n.state.gis.data()));
  return n.Save() ? kSuccess : kUnknown;
}

namespace {

// Compute instance profile `id` in GPU instance `g`: the slice sizes a GI of that many slices
// offers (MIG User Guide, "Supported MIG Profiles": 7g: 1,2,3,4,7c; 4g: 1,2,4c; 3g: 1,2,3c;
// 2g: 1,2c; 1g: 1c).
int CiLookup(const Node& n, const Gi& g, unsigned id, unsigned eng, int* slices, int* of) {
  if (id >= kCiProfileCount || eng != 0) return kInvalidArgument;
  *of = FindProfile(*n.gpus[g.gpu].model, g.profile)->slices;
  *slices = kCiSlices[id];
  const bool offered =
      id != 7 && *slices <= *of && (*slices == *of || *slices <= 2 || (*of == 7 && *slices <= 4));
  return offered ? kSuccess : kNotSupported;
}

}  // namespace

NVML_API int nvmlGpuInstanceGetComputeInstanceProfileInfo(void* gi, unsigned id, unsigned eng,
                                                          CiProfileInfo* info) {
  Node n;
  const Gi* g = GiOf(n, gi);
  if (g == nullptr || info == nullptr) return kInvalidArgument;
  int s = 0, of = 0;
  if (int r = CiLookup(n, *g, id, eng, &s, &of); r != kSuccess) return r;
  const Model& m = *n.gpus[g->gpu].model;
  *info = {id,
           static_cast<unsigned>(s),
           static_cast<unsigned>(of / s),
           static_cast<unsigned>(s * m.sms_per_slice),
           1,
           1,
           0,
           0,
           0};
  return kSuccess;
}

NVML_API int nvmlGpuInstanceCreateComputeInstance(void* gi, unsigned id, void** out) {
  Node n;
  const Gi* g = GiOf(n, gi);
  if (g == nullptr || out == nullptr) return kInvalidArgument;
  int s = 0, of = 0;
  if (int r = CiLookup(n, *g, id, 0, &s, &of); r != kSuccess) return r;
  if (Unprivileged()) return kNoPermission;
  int taken = 0;
  unsigned cid = 0;
  for (const Ci& c : n.state.cis) {
    if (c.gpu == g->gpu && c.gi == g->id) taken += kCiSlices[c.profile];
  }
  if (taken + s > of) return kInsufficientResources;
  while (n.FindCi(g->gpu, g->id, cid) != nullptr) ++cid;
  const Ci made{g->gpu, g->id, cid, id, n.state.next_serial++};
  n.state.cis.push_back(made);
  if (!n.Save()) return kUnknown;
  *out = HandleFor(Handle::kCi, made.gpu, made.gi, made.id, made.serial);
  return kSuccess;
}

NVML_API int nvmlGpuInstanceGetComputeInstances(void* gi, unsigned id, void** cis,
                                                unsigned* count) {
  Node n;
  const Gi* g = GiOf(n, gi);
  if (g == nullptr || cis == nullptr || count == nullptr || id >= kCiProfileCount) {
    return kInvalidArgument;
  }
  unsigned k = 0;
  for (const Ci& c : n.state.cis) {
    if (c.gpu == g->gpu && c.gi == g->id && c.profile == id) {
      cis[k++] = HandleFor(Handle::kCi, c.gpu, c.gi, c.id, c.serial);
    }
  }
  *count = k;
  return kSuccess;
}

NVML_API int nvmlComputeInstanceGetInfo_v2(void* ci, CiInfo* info) {
  Node n;
  const auto* h = static_cast<const Handle*>(ci);
  const Ci* c =
      h != nullptr && h->kind == Handle::kCi ? n.FindCi(h->gpu, h->gi, h->ci, h->serial) : nullptr;
  if (c == nullptr || info == nullptr) return kInvalidArgument;
  const Gi* g = n.FindGi(c->gpu, c->gi);
  *info = {HandleFor(Handle::kGpu, c->gpu),
           HandleFor(Handle::kGi, c->gpu, g->id, 0, g->serial),
           c->id,
           c->profile,
           {0, static_cast<unsigned>(kCiSlices[c->profile])}};
  return kSuccess;
}

NVML_API int nvmlComputeInstanceDestroy(void* ci) {
  Node n;
  const auto* h = static_cast<const Handle*>(ci);
  const Ci* c =
      h != nullptr && h->kind == Handle::kCi ? n.FindCi(h->gpu, h->gi, h->ci, h->serial) : nullptr;
  if (c == nullptr) return kInvalidArgument;
  if (Unprivileged()) return kNoPermission;
  if (InUse(c->gpu, c->gi, static_cast<int>(c->id))) return kInUse;
  n.state.cis.erase(n.state.cis.begin() + (c - n.state.cis.data()));
  return n.Save() ? kSuccess : kUnknown;
}
