// The fake driver: streams, events, modules, launches (run by the engine, fake_engine.cc), graphs.
#include <sys/mman.h>
#include <time.h>

#include <algorithm>
#include <cstring>

#include "tests/fakes/cuda/fake_driver.h"

using namespace gpupool::fakecuda::driver;  // NOLINT: the fake's own internals

// ---- streams, events, modules, launches -------------------------------------------------------

// Stream capture, as the CUDA C++ Programming Guide ("CUDA Graphs", "Stream Capture") describes
// it: work sent to a capturing stream is recorded, not run; synchronizing or querying a stream
// being captured or an event recorded into a capture is prohibited, as is synchronizing the
// context while a capture is under way, and such a call invalidates the capture ("any associated
// capture graphs are invalidated"), which cuStreamEndCapture then reports. The legacy stream
// cannot be captured. Capture modes are not told apart (every capture acts as "global").
namespace {
Stream* AsStream(CUstream s) { return reinterpret_cast<Stream*>(s); }
std::vector<Stream*> g_capturing;  // guarded by g_mu

// REQUIRES: g_mu. Invalidates `s`'s capture; the prohibited call's error.
CUresult ProhibitedLocked(Stream* s) {
  if (s != nullptr && s->capture != nullptr) s->invalidated = true;
  return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
}
Stream* CapturingLocked(CUstream s) {
  Stream* st = AsStream(s);
  return st != nullptr && st->capture != nullptr ? st : nullptr;
}
}  // namespace

namespace gpupool::fakecuda::driver {
Graph* CaptureOfLocked(CUstream s) {
  Stream* st = CapturingLocked(s);
  return st != nullptr ? st->capture : nullptr;
}
CUresult CaptureProhibitsContextSyncLocked() {
  if (g_capturing.empty()) return CUDA_SUCCESS;
  for (Stream* st : g_capturing) st->invalidated = true;
  return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
}
}  // namespace gpupool::fakecuda::driver

FAKE_API CUresult cuStreamCreate(CUstream* s, unsigned) {
  REQUIRE_CTX();
  if (s == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *s = reinterpret_cast<CUstream>(new Stream);
  return CUDA_SUCCESS;
}
FAKE_API CUresult cuStreamDestroy_v2(CUstream s) {
  REQUIRE_INIT();
  std::lock_guard<std::mutex> l(g_mu);
  g_capturing.erase(std::remove(g_capturing.begin(), g_capturing.end(), AsStream(s)),
                    g_capturing.end());
  delete AsStream(s);
  return CUDA_SUCCESS;
}
FAKE_API CUresult cuStreamBeginCapture_v2(CUstream s, int mode) {
  REQUIRE_CTX();
  if (mode < 0 || mode > 2) return CUDA_ERROR_INVALID_VALUE;
  if (s == nullptr) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;  // the legacy stream
  std::lock_guard<std::mutex> l(g_mu);
  Stream* st = AsStream(s);
  if (st->capture != nullptr) return CUDA_ERROR_INVALID_VALUE;
  st->capture = new Graph;
  st->invalidated = false;
  g_capturing.push_back(st);
  return CUDA_SUCCESS;
}
FAKE_API CUresult cuStreamEndCapture(CUstream s, CUgraph* graph) {
  REQUIRE_INIT();
  if (graph == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> l(g_mu);
  Stream* st = CapturingLocked(s);
  if (st == nullptr) return CUDA_ERROR_INVALID_VALUE;  // not capturing
  g_capturing.erase(std::remove(g_capturing.begin(), g_capturing.end(), st), g_capturing.end());
  Graph* g = st->capture;
  st->capture = nullptr;
  if (st->invalidated) {
    for (Node* n : g->nodes) delete n;
    delete g;
    *graph = nullptr;
    return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
  }
  *graph = reinterpret_cast<CUgraph>(g);
  return CUDA_SUCCESS;
}
FAKE_API CUresult cuStreamIsCapturing(CUstream s, CUstreamCaptureStatus* status) {
  REQUIRE_INIT();
  if (status == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> l(g_mu);
  Stream* st = CapturingLocked(s);
  *status = st == nullptr     ? CU_STREAM_CAPTURE_STATUS_NONE
            : st->invalidated ? CU_STREAM_CAPTURE_STATUS_INVALIDATED
                              : CU_STREAM_CAPTURE_STATUS_ACTIVE;
  return CUDA_SUCCESS;
}
FAKE_API CUresult cuStreamIsCapturing_ptsz(CUstream s, CUstreamCaptureStatus* status) {
  return cuStreamIsCapturing(s, status);
}
FAKE_API CUresult cuStreamSynchronize(CUstream s) {
  REQUIRE_INIT();
  std::lock_guard<std::mutex> l(g_mu);
  if (Stream* st = CapturingLocked(s)) return ProhibitedLocked(st);
  ReleasePoolsLocked();
  return CUDA_SUCCESS;
}
FAKE_API CUresult cuStreamSynchronize_ptsz(CUstream s) { return cuStreamSynchronize(s); }
FAKE_API CUresult cuStreamQuery(CUstream s) {
  REQUIRE_INIT();
  std::lock_guard<std::mutex> l(g_mu);
  if (Stream* st = CapturingLocked(s)) return ProhibitedLocked(st);
  return CUDA_SUCCESS;
}

namespace {
// REQUIRES: g_mu.
void ForgetPendingLocked(Event* e) {
  if (auto* c = reinterpret_cast<Ctx*>(t_ctx))
    c->pending.erase(std::remove(c->pending.begin(), c->pending.end(), e), c->pending.end());
}
// REQUIRES: g_mu. An event still waiting for its context counts as processed when recorded
// (nothing of its context followed it onto the device).
uint64_t SettleLocked(CUevent h) {
  auto* e = reinterpret_cast<Event*>(h);
  if (e->stamp_ns == 0 && e->recorded_ns != 0) {
    e->stamp_ns = e->recorded_ns;
    ForgetPendingLocked(e);
  }
  return e->stamp_ns;
}
}  // namespace

FAKE_API CUresult cuEventCreate(CUevent* e, unsigned) {
  REQUIRE_CTX();
  if (e == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *e = reinterpret_cast<CUevent>(new Event{0, 0});
  return CUDA_SUCCESS;
}
FAKE_API CUresult cuEventRecord(CUevent h, CUstream s) {
  REQUIRE_CTX();
  if (h == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  auto* e = reinterpret_cast<Event*>(h);
  {
    std::lock_guard<std::mutex> l(g_mu);
    if (Stream* st = CapturingLocked(s)) {  // an event record node of the capture
      ForgetPendingLocked(e);
      e->captured_in = st;
      e->recorded_ns = e->stamp_ns = 0;
      return CUDA_SUCCESS;
    }
  }
  bool resident = ResidentNow();
  std::lock_guard<std::mutex> l(g_mu);
  ForgetPendingLocked(e);
  e->captured_in = nullptr;
  e->recorded_ns = NowNs();
  e->stamp_ns = resident ? e->recorded_ns : 0;
  if (!resident) reinterpret_cast<Ctx*>(t_ctx)->pending.push_back(e);
  return CUDA_SUCCESS;
}
FAKE_API CUresult cuEventRecord_ptsz(CUevent e, CUstream s) { return cuEventRecord(e, s); }
FAKE_API CUresult cuEventSynchronize(CUevent e) {
  REQUIRE_INIT();
  if (e == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  std::lock_guard<std::mutex> l(g_mu);
  if (auto* in = reinterpret_cast<Event*>(e)->captured_in)
    return ProhibitedLocked(static_cast<Stream*>(in));
  SettleLocked(e);
  ReleasePoolsLocked();
  return CUDA_SUCCESS;
}
FAKE_API CUresult cuEventQuery(CUevent e) {
  REQUIRE_INIT();
  if (e == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  std::lock_guard<std::mutex> l(g_mu);
  if (auto* in = reinterpret_cast<Event*>(e)->captured_in)
    return ProhibitedLocked(static_cast<Stream*>(in));
  SettleLocked(e);
  return CUDA_SUCCESS;
}
FAKE_API CUresult cuEventElapsedTime(float* ms, CUevent a, CUevent b) {
  REQUIRE_INIT();
  if (ms == nullptr || a == nullptr || b == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> l(g_mu);
  for (CUevent h : {a, b})
    if (auto* in = reinterpret_cast<Event*>(h)->captured_in)
      return ProhibitedLocked(static_cast<Stream*>(in));
  uint64_t ta = SettleLocked(a), tb = SettleLocked(b);
  if (ta == 0 || tb == 0) return CUDA_ERROR_INVALID_HANDLE;  // never recorded
  // GPUPOOL_FAKE_CUDA_CLOCK_RATE: the device's timer ticks this many ns per host ns (1.34 on the
  // H200 VM of docs/benchmarks.md, "GPU runs"; 1 by default).
  static const double rate = [] {
    const char* v = getenv("GPUPOOL_FAKE_CUDA_CLOCK_RATE");
    double r = v != nullptr ? strtod(v, nullptr) : 1.0;
    return r > 0 ? r : 1.0;
  }();
  *ms = static_cast<float>((static_cast<double>(tb) - static_cast<double>(ta)) * rate / 1e6);
  return CUDA_SUCCESS;
}
FAKE_API CUresult cuEventDestroy_v2(CUevent e) {
  REQUIRE_INIT();
  {
    std::lock_guard<std::mutex> l(g_mu);
    ForgetPendingLocked(reinterpret_cast<Event*>(e));
  }
  delete reinterpret_cast<Event*>(e);
  return CUDA_SUCCESS;
}

namespace {
// A launch's shape within compute capability 9.0's limits (CUDA C++ Programming Guide, "Compute
// Capabilities", table "Technical Specifications"): at most 1024 threads per block, block
// dimensions up to 1024 × 1024 × 64, grid dimensions up to (2³¹−1) × 65535 × 65535.
bool ValidShape(uint64_t gx, uint64_t gy, uint64_t gz, uint64_t bx, uint64_t by, uint64_t bz) {
  if (gx == 0 || gy == 0 || gz == 0 || bx == 0 || by == 0 || bz == 0) return false;
  if (bx > 1024 || by > 1024 || bz > 64 || bx * by * bz > 1024) return false;
  return gx <= 0x7fffffffu && gy <= 65535 && gz <= 65535;
}
}  // namespace

FAKE_API CUresult cuModuleLoadData(CUmodule* m, const void* image) {
  REQUIRE_CTX();
  if (m == nullptr || image == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *m = reinterpret_cast<CUmodule>(new char(0));
  return CUDA_SUCCESS;
}
FAKE_API CUresult cuModuleUnload(CUmodule m) {
  REQUIRE_INIT();
  delete reinterpret_cast<char*>(m);
  return CUDA_SUCCESS;
}
FAKE_API CUresult cuModuleGetFunction(CUfunction* f, CUmodule m, const char* name) {
  REQUIRE_INIT();
  if (f == nullptr || m == nullptr || name == nullptr) return CUDA_ERROR_INVALID_VALUE;
  uint64_t us = EnvU64("GPUPOOL_FAKE_CUDA_KERNEL_US", 50);
  const char* us_at = strstr(name, "us");
  const char* underscore = strrchr(name, '_');
  if (underscore != nullptr && us_at != nullptr && us_at > underscore && us_at[2] == 0)
    us = strtoull(underscore + 1, nullptr, 10);
  *f = reinterpret_cast<CUfunction>(new Function{us * 1000});
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                 unsigned by, unsigned bz, unsigned, CUstream s, void**, void**) {
  REQUIRE_CTX();
  if (f == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  if (!ValidShape(gx, gy, gz, bx, by, bz)) return CUDA_ERROR_INVALID_VALUE;
  {
    std::lock_guard<std::mutex> l(g_mu);
    if (Stream* st = CapturingLocked(s)) {  // a kernel node of the capture, run at replay
      st->capture->nodes.push_back(new Node{Node::kKernel, f, 0, 0});
      return CUDA_SUCCESS;
    }
  }
  RunKernel(f);
  return CUDA_SUCCESS;
}
FAKE_API CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                                      unsigned bx, unsigned by, unsigned bz, unsigned sh,
                                      CUstream s, void** p, void** e) {
  return cuLaunchKernel(f, gx, gy, gz, bx, by, bz, sh, s, p, e);
}
FAKE_API CUresult cuLaunchKernelEx(const CUlaunchConfig* c, CUfunction f, void** p, void** e) {
  if (c == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return cuLaunchKernel(f, c->gridDimX, c->gridDimY, c->gridDimZ, c->blockDimX, c->blockDimY,
                        c->blockDimZ, c->sharedMemBytes, c->hStream, p, e);
}
FAKE_API CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig* c, CUfunction f, void** p, void** e) {
  return cuLaunchKernelEx(c, f, p, e);
}
FAKE_API CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                                            unsigned bx, unsigned by, unsigned bz, unsigned sh,
                                            CUstream s, void** p) {
  REQUIRE_CTX();
  // Documented: the grid must fit on the device at once (here: one block per SM at most).
  if (static_cast<uint64_t>(gx) * gy * gz > static_cast<uint64_t>(g_profiles[CurrentDev()].sms))
    return 720;  // CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE
  return cuLaunchKernel(f, gx, gy, gz, bx, by, bz, sh, s, p, nullptr);
}
FAKE_API CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned gx, unsigned gy,
                                                 unsigned gz, unsigned bx, unsigned by, unsigned bz,
                                                 unsigned sh, CUstream s, void** p) {
  return cuLaunchCooperativeKernel(f, gx, gy, gz, bx, by, bz, sh, s, p);
}

// ---- graphs --------------------------------------------------------------------------------

FAKE_API CUresult cuGraphCreate(CUgraph* g, unsigned flags) {
  REQUIRE_INIT();
  if (g == nullptr || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  *g = reinterpret_cast<CUgraph>(new Graph);
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuGraphDestroy(CUgraph g) {
  REQUIRE_INIT();
  auto* graph = reinterpret_cast<Graph*>(g);
  if (graph == nullptr) return CUDA_ERROR_INVALID_VALUE;
  for (Node* n : graph->nodes) delete n;
  delete graph;
  return CUDA_SUCCESS;
}

namespace {
CUresult AddNode(CUgraphNode* out, CUgraph g, Node* n) {
  if (out == nullptr || g == nullptr) {
    delete n;
    return CUDA_ERROR_INVALID_VALUE;
  }
  reinterpret_cast<Graph*>(g)->nodes.push_back(n);
  *out = reinterpret_cast<CUgraphNode>(n);
  return CUDA_SUCCESS;
}
}  // namespace

FAKE_API CUresult cuGraphAddKernelNode_v2(CUgraphNode* out, CUgraph g, const CUgraphNode*, size_t,
                                          const CUDA_KERNEL_NODE_PARAMS* p) {
  REQUIRE_INIT();
  if (p == nullptr || p->func == nullptr ||
      !ValidShape(p->gridDimX, p->gridDimY, p->gridDimZ, p->blockDimX, p->blockDimY, p->blockDimZ))
    return CUDA_ERROR_INVALID_VALUE;  // checked when the node is added (driver 580 did so too)
  return AddNode(out, g, new Node{Node::kKernel, p->func, 0, 0});
}

FAKE_API CUresult cuGraphAddMemAllocNode(CUgraphNode* out, CUgraph g, const CUgraphNode*, size_t,
                                         CUDA_MEM_ALLOC_NODE_PARAMS* p) {
  REQUIRE_INIT();
  if (p == nullptr || p->bytesize == 0) return CUDA_ERROR_INVALID_VALUE;
  {
    std::lock_guard<std::mutex> l(g_mu);
    p->dptr = NewVa(p->bytesize);  // fixed for the graph's lifetime, as documented
  }
  return AddNode(out, g, new Node{Node::kAlloc, nullptr, p->bytesize, p->dptr});
}

FAKE_API CUresult cuGraphAddMemFreeNode(CUgraphNode* out, CUgraph g, const CUgraphNode*, size_t,
                                        CUdeviceptr dptr) {
  REQUIRE_INIT();
  return AddNode(out, g, new Node{Node::kFree, nullptr, 0, dptr});
}

FAKE_API CUresult cuGraphGetNodes(CUgraph g, CUgraphNode* nodes, size_t* count) {
  REQUIRE_INIT();
  if (g == nullptr || count == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto& all = reinterpret_cast<Graph*>(g)->nodes;
  if (nodes != nullptr) {  // documented: at most *count are written, *count becomes the number
    size_t n = std::min(*count, all.size());
    for (size_t i = 0; i < n; ++i) nodes[i] = reinterpret_cast<CUgraphNode>(all[i]);
    *count = n;
  } else {
    *count = all.size();
  }
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuGraphNodeGetType(CUgraphNode node, int* type) {
  REQUIRE_INIT();
  if (node == nullptr || type == nullptr) return CUDA_ERROR_INVALID_VALUE;
  switch (reinterpret_cast<Node*>(node)->type) {
    case Node::kKernel:
      *type = CU_GRAPH_NODE_TYPE_KERNEL;
      break;
    case Node::kAlloc:
      *type = CU_GRAPH_NODE_TYPE_MEM_ALLOC;
      break;
    case Node::kFree:
      *type = CU_GRAPH_NODE_TYPE_MEM_FREE;
      break;
    default:
      *type = CU_GRAPH_NODE_TYPE_EMPTY;
      break;
  }
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuGraphMemAllocNodeGetParams(CUgraphNode node, CUDA_MEM_ALLOC_NODE_PARAMS* out) {
  REQUIRE_INIT();
  auto* n = reinterpret_cast<Node*>(node);
  if (n == nullptr || out == nullptr || n->type != Node::kAlloc) return CUDA_ERROR_INVALID_VALUE;
  std::memset(out, 0, sizeof *out);
  out->bytesize = n->bytes;
  out->dptr = n->dptr;
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuGraphInstantiateWithFlags(CUgraphExec* out, CUgraph g, unsigned long long);
// The CUDA 10 (v1) and 11 (_v2) ABIs: an error node and a log buffer, no flags.
FAKE_API CUresult cuGraphInstantiate(CUgraphExec* out, CUgraph g, CUgraphNode* error_node,
                                     char* log, size_t log_size) {
  if (error_node != nullptr) *error_node = nullptr;
  if (log != nullptr && log_size > 0) log[0] = 0;
  return cuGraphInstantiateWithFlags(out, g, 0);
}
FAKE_API CUresult cuGraphInstantiate_v2(CUgraphExec* out, CUgraph g, CUgraphNode* error_node,
                                        char* log, size_t log_size) {
  return cuGraphInstantiate(out, g, error_node, log, log_size);
}

FAKE_API CUresult cuGraphInstantiateWithFlags(CUgraphExec* out, CUgraph g, unsigned long long) {
  REQUIRE_CTX();
  if (out == nullptr || g == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto* e = new Exec{CurrentDev(), {}, 0};
  for (Node* n : reinterpret_cast<Graph*>(g)->nodes) {
    if (n->type == Node::kKernel) e->kernels.push_back(n->func);
    if (n->type == Node::kAlloc) e->alloc_bytes += n->bytes;
  }
  if (e->alloc_bytes != 0) {
    CUresult r = Charge(e->dev, e->alloc_bytes);
    if (r != CUDA_SUCCESS) {
      delete e;
      return r;
    }
    std::lock_guard<std::mutex> l(g_mu);
    g_graph_mem[e->dev] += e->alloc_bytes;
  }
  *out = reinterpret_cast<CUgraphExec>(e);
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuGraphLaunch(CUgraphExec x, CUstream s) {
  REQUIRE_CTX();
  if (x == nullptr) return CUDA_ERROR_INVALID_VALUE;
  {
    std::lock_guard<std::mutex> l(g_mu);
    if (Stream* st = CapturingLocked(s)) {  // captured as its kernels
      for (CUfunction f : reinterpret_cast<Exec*>(x)->kernels)
        st->capture->nodes.push_back(new Node{Node::kKernel, f, 0, 0});
      return CUDA_SUCCESS;
    }
  }
  for (CUfunction f : reinterpret_cast<Exec*>(x)->kernels) RunKernel(f);
  return CUDA_SUCCESS;
}
FAKE_API CUresult cuGraphLaunch_ptsz(CUgraphExec x, CUstream s) { return cuGraphLaunch(x, s); }

FAKE_API CUresult cuGraphExecDestroy(CUgraphExec x) {
  REQUIRE_INIT();
  auto* e = reinterpret_cast<Exec*>(x);
  if (e == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (e->alloc_bytes != 0) {
    Uncharge(e->dev, e->alloc_bytes);
    std::lock_guard<std::mutex> l(g_mu);
    g_graph_mem[e->dev] -= e->alloc_bytes;
  }
  delete e;
  return CUDA_SUCCESS;
}

FAKE_API CUresult cuDeviceGraphMemTrim(CUdevice dev) {
  REQUIRE_INIT();
  // Memory of live executable graphs stays; the fake keeps no other graph memory.
  return dev < 0 || dev >= static_cast<int>(g_devs.size()) ? CUDA_ERROR_INVALID_DEVICE
                                                           : CUDA_SUCCESS;
}

FAKE_API CUresult cuDeviceGetGraphMemAttribute(CUdevice dev, int attr, void* value) {
  REQUIRE_INIT();
  if (dev < 0 || dev >= static_cast<int>(g_devs.size())) return CUDA_ERROR_INVALID_DEVICE;
  if (value == nullptr || attr < 0 || attr > 3) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> l(g_mu);
  *static_cast<cuuint64_t*>(value) = g_graph_mem[dev];
  return CUDA_SUCCESS;
}
