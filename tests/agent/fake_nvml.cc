// A stand-in libnvidia-ml for tests: the NVML entry points NvmlBackend resolves, answering for
// two "NVIDIA H100 80GB HBM3" GPUs joined by NVLink; GPU 0 is in MIG mode with two 3g.40gb
// instances; GPU 1 reports GPU_IS_LOST for its temperature (so it samples unhealthy). Events: GPU 1
// refuses ECC events (ECC off) but takes XIDs; the event set yields one critical XID 79 on GPU 1,
// one single-bit ECC event on GPU 0, then times out.
// Loaded with dlopen by config_test; never linked.
#include <cstdio>
#include <cstring>

namespace {

struct Dev {
  int gpu;  // 0 or 1
  int mig;  // -1 for the GPU itself
};
Dev g_devs[] = {{0, -1}, {1, -1}, {0, 0}, {0, 1}};
Dev* Gpu(unsigned i) { return &g_devs[i]; }
Dev* Mig(int gpu, unsigned j) { return gpu == 0 && j < 2 ? &g_devs[2 + j] : nullptr; }
int g_inits = 0;

struct Memory {
  unsigned long long total, free, used;
};
struct Utilization {
  unsigned int gpu, memory;
};

void Copy(char* buf, unsigned len, const char* s) { std::snprintf(buf, len, "%s", s); }

}  // namespace

extern "C" {

int nvmlInit_v2() {
  ++g_inits;
  return 0;
}
int nvmlShutdown() {
  --g_inits;
  return 0;
}
const char* nvmlErrorString(int r) { return r == 15 ? "GPU is lost" : "Unknown Error"; }
int nvmlDeviceGetCount_v2(unsigned* n) {
  *n = 2;
  return 0;
}
int nvmlDeviceGetHandleByIndex_v2(unsigned i, void** d) {
  if (i > 1) return 2;  // NVML_ERROR_INVALID_ARGUMENT
  *d = Gpu(i);
  return 0;
}
int nvmlDeviceGetUUID(void* d, char* buf, unsigned len) {
  const Dev* v = static_cast<Dev*>(d);
  char s[96];
  if (v->mig < 0) {
    std::snprintf(s, sizeof(s), "GPU-fake-%d", v->gpu);
  } else {
    std::snprintf(s, sizeof(s), "MIG-fake-%d-%d", v->gpu, v->mig);
  }
  Copy(buf, len, s);
  return 0;
}
int nvmlDeviceGetName(void* d, char* buf, unsigned len) {
  const Dev* v = static_cast<Dev*>(d);
  Copy(buf, len, v->mig < 0 ? "NVIDIA H100 80GB HBM3" : "NVIDIA H100 80GB HBM3 MIG 3g.40gb");
  return 0;
}
int nvmlDeviceGetMemoryInfo(void* d, Memory* m) {
  const Dev* v = static_cast<Dev*>(d);
  const unsigned long long mib = 1024ull * 1024ull;
  m->total = (v->mig < 0 ? 81559ull : 40448ull) * mib;  // what a driver reports, not 80 GiB
  m->used = (v->mig < 0 ? 1024ull : 512ull) * mib;
  m->free = m->total - m->used;
  return 0;
}
int nvmlDeviceGetUtilizationRates(void* d, Utilization* u) {
  const Dev* v = static_cast<Dev*>(d);
  if (v->mig >= 0) return 3;  // NVML_ERROR_NOT_SUPPORTED on MIG instances
  u->gpu = v->gpu == 0 ? 42 : 7;
  u->memory = 10;
  return 0;
}
int nvmlDeviceGetPowerUsage(void* d, unsigned* mw) {
  *mw = static_cast<Dev*>(d)->gpu == 0 ? 350'500 : 90'000;
  return 0;
}
int nvmlDeviceGetTemperature(void* d, int /*sensor*/, unsigned* t) {
  if (static_cast<Dev*>(d)->gpu == 1) return 15;  // NVML_ERROR_GPU_IS_LOST
  *t = 61;
  return 0;
}
int nvmlDeviceGetTotalEccErrors(void* d, int /*type*/, int /*counter*/, unsigned long long* n) {
  *n = static_cast<Dev*>(d)->gpu == 0 ? 2 : 0;
  return 0;
}
int nvmlDeviceGetMigMode(void* d, unsigned* current, unsigned* pending) {
  *current = *pending = static_cast<Dev*>(d)->gpu == 0 ? 1 : 0;
  return 0;
}
int nvmlDeviceGetMaxMigDeviceCount(void* /*d*/, unsigned* n) {
  *n = 7;
  return 0;
}
int nvmlDeviceGetMigDeviceHandleByIndex(void* d, unsigned j, void** mig) {
  Dev* m = Mig(static_cast<Dev*>(d)->gpu, j);
  if (m == nullptr) return 6;  // NVML_ERROR_NOT_FOUND
  *mig = m;
  return 0;
}
// nvmlDeviceGetMinorNumber (NVML API reference, "Device Queries"): the GPU's node is
// /dev/nvidia<minor>. Minors need not follow NVML's indices (they follow the driver's probe
// order; NVML's follow PCI bus ids), so GPU 0 answers 3 and GPU 1 answers 0. A MIG device
// handle has no node of its own: NOT_SUPPORTED.
int nvmlDeviceGetMinorNumber(void* d, unsigned* minor) {
  const Dev* v = static_cast<Dev*>(d);
  if (v->mig >= 0) return 3;
  *minor = v->gpu == 0 ? 3 : 0;
  return 0;
}
// nvmlDeviceGetGpuInstanceId / nvmlDeviceGetComputeInstanceId ("MIG Management"): valid on MIG
// device handles only (INVALID_ARGUMENT otherwise). Instance j of GPU 0 is GPU instance j + 1
// with compute instance 0, as nvidia-smi numbers two 3g.40gb instances.
int nvmlDeviceGetGpuInstanceId(void* d, unsigned* id) {
  const Dev* v = static_cast<Dev*>(d);
  if (v->mig < 0) return 2;
  *id = static_cast<unsigned>(v->mig) + 1;
  return 0;
}
int nvmlDeviceGetComputeInstanceId(void* d, unsigned* id) {
  if (static_cast<Dev*>(d)->mig < 0) return 2;
  *id = 0;
  return 0;
}
int nvmlDeviceGetP2PStatus(void* /*a*/, void* /*b*/, int caps, int* status) {
  *status = caps == 2 ? 0 : 1;  // NVLink: OK
  return 0;
}
int nvmlDeviceGetTopologyCommonAncestor(void* /*a*/, void* /*b*/, int* level) {
  *level = 50;
  return 0;
}
struct EventData {
  void* device;
  unsigned long long type, data;
  unsigned gi, ci;
};
int g_event_set = 0;
int g_events_sent = 0;
int nvmlEventSetCreate(void** set) {
  *set = &g_event_set;
  return 0;
}
int nvmlDeviceRegisterEvents(void* d, unsigned long long types, void* /*set*/) {
  if (static_cast<Dev*>(d)->gpu == 1 && (types & 0x3) != 0) return 3;  // NOT_SUPPORTED: ECC off
  return 0;
}
int nvmlEventSetWait_v2(void* /*set*/, EventData* e, unsigned /*timeout_ms*/) {
  switch (g_events_sent++) {
    case 0:
      *e = {Gpu(1), 0x8, 79, 0, 0};
      return 0;
    case 1:
      *e = {Gpu(0), 0x1, 0, 0, 0};
      return 0;
    default:
      return 10;  // NVML_ERROR_TIMEOUT
  }
}
int nvmlEventSetFree(void* /*set*/) { return 0; }
int FakeNvmlInits() { return g_inits; }

}  // extern "C"
