// Compute hooks: the strict cap, charged by measured GPU time.
//
// Each launch (plain, Ex, cooperative, graph; legacy and per-thread-stream variants) is
// bracketed by two events on its stream. When the end event has completed, the pair is placed
// on the host's clock and merged with the pairs back to back with it into a busy span; spans
// are reported to the task's ledger, which charges each as the device's tenants shared it (a
// time-sliced device runs one context at a time, so a pair also holds the slices other tenants
// ran meanwhile: ledger/device_arbiter.h), keeps one token bucket for the whole task and
// answers how long to wait before the next launch. Completed pairs are collected at each launch
// without blocking; at most kMaxPending pairs are outstanding (the oldest is then waited for). With
// a 100 % grant nothing is measured.
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "agent/interposer/interposer.h"

namespace gi = gpupool::interposer;

namespace {

constexpr size_t kMaxPending = 64;
// GPU time is reported to the ledger in batches of at least this much (one round trip per
// batch, not per launch); the ledger's bucket (20 ms deep) absorbs the batching.
constexpr uint64_t kReportNs = 4'000'000;

struct Pair {
  CUcontext ctx;
  CUevent start, end;
  uint64_t recorded_ns;  // host time just before the start event was recorded
};

// The device's timer (what events measure) and the host's clock (on which the ledger refills GPU
// time) need not tick at one rate: on the H200 VM of docs/benchmarks.md the device's ran 1.34×
// the host's, and every cap under-delivered by as much. Each context keeps an anchor event,
// recorded and waited for at its first metered launch, with the host time then; each completed
// end event gives the device time since the anchor against the host time since. The host time
// is read when the completion is seen, never before it, so a sample can only underestimate the
// rate: the largest is kept. Until kCalibrateNs have passed the rate is taken as 1.
struct Clock {
  CUevent anchor = nullptr;
  uint64_t host_ns = 0;
  double rate = 1.0;  // device ns per host ns
};
constexpr uint64_t kCalibrateNs = 200'000'000;
// A float holds milliseconds to ~1 µs up to 16 s; the anchor moves forward well before.
constexpr float kReanchorMs = 8000;
// Pairs this close on the host's clock are one span (the gap is the host's launch overhead).
constexpr uint64_t kMergeGapNs = 20'000;

// GPUPOOL_CUDA_SPANS=PATH: every metered pair is appended to PATH.<pid> as "recorded_ns start_ns
// end_ns" (host CLOCK_MONOTONIC: when the start event was recorded, and the pair's span as mapped
// onto the host's clock), the raw material for
// studying how time-sliced contexts overlap on a real GPU (scripts/gpu-verify records it).
FILE* SpanFile() {
  static FILE* f = []() -> FILE* {
    const char* p = getenv("GPUPOOL_CUDA_SPANS");
    if (p == nullptr || *p == 0) return nullptr;
    std::string path = std::string(p) + "." + std::to_string(getpid());
    return fopen(path.c_str(), "we");
  }();
  return f;
}

std::mutex g_mu;  // guards everything below
std::map<CUcontext, Clock> g_clock;
std::deque<Pair> g_pending;
std::map<CUcontext, std::vector<CUevent>> g_spare;
uint64_t g_wait_until_ns = 0;
uint64_t g_unreported_ns = 0;  // GPU time measured since the last report
// Busy spans on the host's clock (CLOCK_MONOTONIC), not yet reported: the ledger charges each
// as the device's tenants shared it (ledger/device_arbiter.h). `g_span` is the latest, still
// growing while work follows back to back.
struct Span {
  uint64_t start = 0, end = 0;
};
Span g_span;
std::vector<Span> g_spans;
uint64_t g_reported_until = 0;  // the end of the last span reported: nothing before it again
uint64_t g_unplaced_ns = 0;     // GPU time of pairs that could not be placed on the host's clock

uint64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

bool Capped() {
  gpupool::ledger::LedgerClient* l = gi::Ledger();
  return l != nullptr && l->hello().compute_percent < 100;
}

// REQUIRES: g_mu.
CUevent TakeEvent(CUcontext ctx) {
  auto& spare = g_spare[ctx];
  if (!spare.empty()) {
    CUevent e = spare.back();
    spare.pop_back();
    return e;
  }
  CUevent e = nullptr;
  auto create = REAL(cuEventCreate);
  if (create == nullptr || create(&e, 0) != CUDA_SUCCESS) return nullptr;
  return e;
}

// REQUIRES: g_mu. Maps `ev` (completed) onto the host's clock through its context's anchor;
// false when it cannot. Recalibrates the rate, and moves the anchor forward to `ev` once the
// float milliseconds cuEventElapsedTime gives would lose precision (every kReanchorMs).
bool HostTimeLocked(CUcontext ctx, CUevent ev, bool may_reanchor, uint64_t* host_ns) {
  Clock& clock = g_clock[ctx];
  auto elapsed = REAL(cuEventElapsedTime);
  float since_ms = 0;
  if (clock.anchor == nullptr || elapsed(&since_ms, clock.anchor, ev) != CUDA_SUCCESS) return false;
  const uint64_t now = NowNs();
  const uint64_t host_since = now > clock.host_ns ? now - clock.host_ns : 0;
  if (host_since >= kCalibrateNs) {
    const double sample = static_cast<double>(since_ms) * 1e6 / static_cast<double>(host_since);
    clock.rate = std::max(clock.rate, std::min(sample, 4.0));
  }
  const double since_ns = std::max(0.0, static_cast<double>(since_ms) * 1e6 / clock.rate);
  *host_ns = clock.host_ns + static_cast<uint64_t>(since_ns);
  if (may_reanchor && since_ms > kReanchorMs) {
    g_spare[ctx].push_back(clock.anchor);
    clock.anchor = ev;
    clock.host_ns = *host_ns;
  }
  return true;
}

// REQUIRES: g_mu. Reports the spans of every completed pair (all pairs when `all`).
void CollectLocked(bool all) {
  auto query = REAL(cuEventQuery);
  auto sync = REAL(cuEventSynchronize);
  auto elapsed = REAL(cuEventElapsedTime);
  while (!g_pending.empty()) {
    Pair p = g_pending.front();
    bool must_wait = all || g_pending.size() > kMaxPending;
    CUresult r = must_wait ? sync(p.end) : query(p.end);
    if (r == CUDA_ERROR_NOT_READY) break;
    g_pending.pop_front();
    float ms = 0;
    bool anchored = false;
    if (r == CUDA_SUCCESS && elapsed(&ms, p.start, p.end) == CUDA_SUCCESS && ms > 0) {
      const uint64_t ns =
          static_cast<uint64_t>(static_cast<double>(ms) * 1e6 / g_clock[p.ctx].rate);
      uint64_t end_ns = 0;
      if (HostTimeLocked(p.ctx, p.end, true, &end_ns)) {
        anchored = g_clock[p.ctx].anchor == p.end;
        const uint64_t start_ns = end_ns > ns ? end_ns - ns : 0;
        if (FILE* f = SpanFile())
          fprintf(f, "%llu %llu %llu\n", static_cast<unsigned long long>(p.recorded_ns),
                  static_cast<unsigned long long>(start_ns),
                  static_cast<unsigned long long>(end_ns));
        // One span for work back to back (or overlapping, from several streams).
        if (g_span.end != 0 && start_ns <= g_span.end + kMergeGapNs &&
            end_ns + kMergeGapNs >= g_span.start) {
          g_span.start = std::min(g_span.start, start_ns);
          g_span.end = std::max(g_span.end, end_ns);
        } else {
          if (g_span.end > g_span.start) g_spans.push_back(g_span);
          g_span = {start_ns, end_ns};
        }
      } else {
        g_unplaced_ns += ns;
      }
      g_unreported_ns += ns;
    }
    g_spare[p.ctx].push_back(p.start);
    if (!anchored) g_spare[p.ctx].push_back(p.end);
  }
  if (g_unreported_ns < kReportNs && !all) return;
  gpupool::ledger::LedgerClient* l = gi::Ledger();
  gpupool::ledger::Response resp;
  if (g_span.end > g_span.start) g_spans.push_back(g_span);
  g_span.start = g_span.end;  // the rest of it, if work follows back to back, comes next time
  uint64_t wait_ns = 0;
  bool answered = false;
  auto report = [&](uint64_t ns, uint64_t start_ns) {
    if (l == nullptr || !l->Call(gpupool::ledger::Op::kCompute, gpupool::ledger::Kind::kNone, ns,
                                 &resp, gpupool::ledger::kReconnectWaitMs, start_ns))
      return;
    answered = true;
    wait_ns = resp.wait_ns;
  };
  for (Span sp : g_spans) {
    // Overlapping work of several streams can reach back into what was reported; a ledger
    // without an arbiter would charge that twice.
    sp.start = std::max(sp.start, g_reported_until);
    if (sp.end <= sp.start) continue;
    report(sp.end - sp.start, sp.start);
    g_reported_until = sp.end;
  }
  if (g_unplaced_ns != 0) report(g_unplaced_ns, 0);
  if (answered && wait_ns != 0) g_wait_until_ns = NowNs() + wait_ns;
  g_spans.clear();
  g_unplaced_ns = 0;
  g_unreported_ns = 0;
}

void Throttle() {
  uint64_t until;
  {
    std::lock_guard<std::mutex> l(g_mu);
    CollectLocked(false);
    until = g_wait_until_ns;
  }
  uint64_t now = NowNs();
  if (until <= now) return;
  uint64_t ns = until - now;
  timespec ts{static_cast<time_t>(ns / 1000000000ull), static_cast<long>(ns % 1000000000ull)};
  while (nanosleep(&ts, &ts) != 0) {
  }
}

template <typename Record, typename Launch>
CUresult Metered(CUstream stream, Record record, bool per_thread, Launch launch) {
  if (!Capped()) return launch();
  // A launch into a stream being captured runs nothing now: the graph's launches are metered.
  // Events recorded into the capture and then queried would invalidate it (CUDA C++ Programming
  // Guide, "Stream Capture": querying or synchronizing a captured event is prohibited), as
  // PyTorch's graph capture under a cap showed on driver 580.
  if (gi::StreamCapturing(stream, per_thread)) return launch();
  Throttle();
  CUcontext ctx = nullptr;
  auto current = REAL(cuCtxGetCurrent);
  if (current == nullptr || record == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  if (current(&ctx) != CUDA_SUCCESS || ctx == nullptr) return launch();  // the driver's error
  CUevent start = nullptr, end = nullptr, anchor = nullptr;
  {
    std::lock_guard<std::mutex> l(g_mu);
    start = TakeEvent(ctx);
    end = TakeEvent(ctx);
    if (g_clock[ctx].anchor == nullptr) anchor = g_clock[ctx].anchor = TakeEvent(ctx);
  }
  if (anchor != nullptr) {  // this context's first metered launch: the clocks' common origin
    auto sync = REAL(cuEventSynchronize);
    record(anchor, stream);
    if (sync != nullptr) sync(anchor);
    std::lock_guard<std::mutex> l(g_mu);
    g_clock[ctx].host_ns = NowNs();
  }
  if (start == nullptr || end == nullptr) return CUDA_ERROR_OUT_OF_MEMORY;  // cannot meter: refuse
  const uint64_t recorded_ns = NowNs();
  record(start, stream);
  CUresult r = launch();
  record(end, stream);
  std::lock_guard<std::mutex> l(g_mu);
  g_pending.push_back({ctx, start, end, recorded_ns});
  CollectLocked(false);
  return r;
}

}  // namespace

void gi::ForgetContext(CUcontext ctx) {
  std::lock_guard<std::mutex> l(g_mu);
  g_spare.erase(ctx);  // destroyed with their context
  g_clock.erase(ctx);
  for (auto it = g_pending.begin(); it != g_pending.end();)
    it = it->ctx == ctx ? g_pending.erase(it) : it + 1;
}

GPUPOOL_EXPORT CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                                       unsigned bx, unsigned by, unsigned bz, unsigned shared,
                                       CUstream s, void** params, void** extra) {
  auto real = REAL(cuLaunchKernel);
  if (real == nullptr) return CUDA_ERROR_NOT_FOUND;
  return Metered(s, REAL(cuEventRecord), false,
                 [&] { return real(f, gx, gy, gz, bx, by, bz, shared, s, params, extra); });
}

GPUPOOL_EXPORT CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                                            unsigned bx, unsigned by, unsigned bz, unsigned shared,
                                            CUstream s, void** params, void** extra) {
  auto real = REAL(cuLaunchKernel_ptsz);
  if (real == nullptr) return CUDA_ERROR_NOT_FOUND;
  return Metered(s, REAL(cuEventRecord_ptsz), true,
                 [&] { return real(f, gx, gy, gz, bx, by, bz, shared, s, params, extra); });
}

GPUPOOL_EXPORT CUresult cuLaunchKernelEx(const CUlaunchConfig* c, CUfunction f, void** params,
                                         void** extra) {
  auto real = REAL(cuLaunchKernelEx);
  if (real == nullptr) return CUDA_ERROR_NOT_FOUND;
  if (c == nullptr) return real(c, f, params, extra);
  return Metered(c->hStream, REAL(cuEventRecord), false, [&] { return real(c, f, params, extra); });
}

GPUPOOL_EXPORT CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig* c, CUfunction f, void** params,
                                              void** extra) {
  auto real = REAL(cuLaunchKernelEx_ptsz);
  if (real == nullptr) return CUDA_ERROR_NOT_FOUND;
  if (c == nullptr) return real(c, f, params, extra);
  return Metered(c->hStream, REAL(cuEventRecord_ptsz), true,
                 [&] { return real(c, f, params, extra); });
}

GPUPOOL_EXPORT CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned gx, unsigned gy,
                                                  unsigned gz, unsigned bx, unsigned by,
                                                  unsigned bz, unsigned shared, CUstream s,
                                                  void** params) {
  auto real = REAL(cuLaunchCooperativeKernel);
  if (real == nullptr) return CUDA_ERROR_NOT_FOUND;
  return Metered(s, REAL(cuEventRecord), false,
                 [&] { return real(f, gx, gy, gz, bx, by, bz, shared, s, params); });
}

GPUPOOL_EXPORT CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned gx, unsigned gy,
                                                       unsigned gz, unsigned bx, unsigned by,
                                                       unsigned bz, unsigned shared, CUstream s,
                                                       void** params) {
  auto real = REAL(cuLaunchCooperativeKernel_ptsz);
  if (real == nullptr) return CUDA_ERROR_NOT_FOUND;
  return Metered(s, REAL(cuEventRecord_ptsz), true,
                 [&] { return real(f, gx, gy, gz, bx, by, bz, shared, s, params); });
}

GPUPOOL_EXPORT CUresult cuGraphLaunch(CUgraphExec exec, CUstream s) {
  auto real = REAL(cuGraphLaunch);
  if (real == nullptr) return CUDA_ERROR_NOT_FOUND;
  return Metered(s, REAL(cuEventRecord), false, [&] { return real(exec, s); });
}

GPUPOOL_EXPORT CUresult cuGraphLaunch_ptsz(CUgraphExec exec, CUstream s) {
  auto real = REAL(cuGraphLaunch_ptsz);
  if (real == nullptr) return CUDA_ERROR_NOT_FOUND;
  return Metered(s, REAL(cuEventRecord_ptsz), true, [&] { return real(exec, s); });
}
