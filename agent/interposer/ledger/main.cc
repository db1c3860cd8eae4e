// gpupool-ledger — task GPU ledgers as a standalone process, for tests and scripts (the agent
// embeds LedgerServer instead). Serves until SIGTERM/SIGINT; prints "ready" on stdout once every
// socket accepts connections, and each ledger's usage when it stops.
//   gpupool-ledger --socket PATH --vram BYTES [--spill BYTES] [--context-bytes BYTES]
//                  [--lease-bytes BYTES] [--compute-percent 1..100] [--fair]
//                  [--next --socket PATH2 …] [--status-ms N]
//                  [--watch-root PID [--nvml LIB] [--watch-ms N]]
// Ledgers separated by --next are tenants of one device: they share its compute arbiter, as the
// agent's ledgers of one GPU do (scripts/gpu-verify runs two capped tenants side by side so).
// --status-ms N prints every ledger's usage every N ms ("usage <socket> vram=… spill=…").
// --watch-root PID runs the agent's watchdog over one ledger (no --next): the descendants of PID
// are the task, their GPU memory is read from NVML (--nvml, default libnvidia-ml.so.1) every
// --watch-ms (default 200), the driver's own memory of a known process is charged to it, and a
// bypass is killed and printed ("killed pid=… <reason>").
#include <errno.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "agent/interposer/ledger/device_arbiter.h"
#include "agent/interposer/ledger/ledger_server.h"
#include "agent/interposer/watchdog/process_memory.h"
#include "agent/interposer/watchdog/watchdog.h"

namespace {

volatile sig_atomic_t g_stop = 0;

void OnSignal(int) { g_stop = 1; }

bool ParseU64(const char* s, uint64_t* out) {
  if (s == nullptr || *s < '0' || *s > '9') return false;
  char* end = nullptr;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno != 0 || *end != 0) return false;
  *out = v;
  return true;
}

int Usage(const std::string& why) {
  fprintf(stderr,
          "gpupool-ledger: %s\nusage: gpupool-ledger --socket PATH --vram BYTES [--spill BYTES] "
          "[--context-bytes BYTES] [--lease-bytes BYTES] [--compute-percent 1..100] [--fair] "
          "[--next --socket PATH2 …] [--status-ms N] [--watch-root PID [--nvml LIB] "
          "[--watch-ms N]]\n",
          why.c_str());
  return 2;
}

struct Spec {
  std::string socket;
  gpupool::ledger::Limits limits;
  bool have_vram = false;
};

void PrintUsage(const char* what, const std::string& socket,
                const gpupool::ledger::LedgerServer& server) {
  gpupool::ledger::Usage u = server.Snapshot();
  printf(
      "%s %s vram=%llu spill=%llu refused=%llu protocol_errors=%llu gpu_ns=%llu "
      "spill_byte_seconds=%llu processes=%zu\n",
      what, socket.c_str(), static_cast<unsigned long long>(u.vram),
      static_cast<unsigned long long>(u.spill), static_cast<unsigned long long>(u.refused),
      static_cast<unsigned long long>(u.protocol_errors), static_cast<unsigned long long>(u.gpu_ns),
      static_cast<unsigned long long>(u.spill_byte_seconds), u.processes.size());
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<Spec> specs(1);
  uint64_t status_ms = 0, watch_root = 0, watch_ms = 200;
  std::string nvml = "libnvidia-ml.so.1";
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      Usage("task GPU ledgers for tests and scripts (docs/interposer.md)");
      return 0;
    }
    if (a == "--next") {
      specs.emplace_back();
      continue;
    }
    if (a == "--fair") {
      specs.back().limits.compute_fair = true;
      continue;
    }
    const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
    uint64_t n = 0;
    gpupool::ledger::Limits& limits = specs.back().limits;
    if (a == "--socket" && v != nullptr) {
      specs.back().socket = v;
    } else if (a == "--vram" && ParseU64(v, &n)) {
      limits.vram = n;
      specs.back().have_vram = true;
    } else if (a == "--spill" && ParseU64(v, &n)) {
      limits.spill = n;
    } else if (a == "--lease-bytes" && ParseU64(v, &n)) {
      limits.lease_bytes = n;
    } else if (a == "--context-bytes" && ParseU64(v, &n)) {
      limits.context_bytes = n;
    } else if (a == "--compute-percent" && ParseU64(v, &n) && n >= 1 && n <= 100) {
      limits.compute_percent = static_cast<uint32_t>(n);
    } else if (a == "--status-ms" && ParseU64(v, &n) && n > 0) {
      status_ms = n;
    } else if (a == "--watch-root" && ParseU64(v, &n) && n > 1) {
      watch_root = n;
    } else if (a == "--watch-ms" && ParseU64(v, &n) && n >= 10) {
      watch_ms = n;
    } else if (a == "--nvml" && v != nullptr) {
      nvml = v;
    } else {
      return Usage("bad or incomplete option: " + a);
    }
    ++i;
  }
  for (size_t k = 0; k < specs.size(); ++k) {
    if (specs[k].socket.empty() || !specs[k].have_vram)
      return Usage("ledger " + std::to_string(k + 1) + ": --socket and --vram are required");
  }
  if (watch_root != 0 && specs.size() > 1) return Usage("--watch-root watches one ledger");
  // One arbiter for all of them: tenants of one device. A lone strict ledger needs none.
  auto arbiter = specs.size() > 1 || specs[0].limits.compute_fair
                     ? std::make_shared<gpupool::ledger::DeviceArbiter>()
                     : nullptr;
  std::vector<std::unique_ptr<gpupool::ledger::LedgerServer>> servers;
  for (const Spec& s : specs) {
    std::string error;
    auto server = gpupool::ledger::LedgerServer::Create(s.socket, s.limits, &error, arbiter);
    if (server == nullptr) {
      fprintf(stderr, "gpupool-ledger: %s: %s\n", s.socket.c_str(), error.c_str());
      return 1;
    }
    servers.push_back(std::move(server));
  }
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  std::vector<std::thread> threads;
  for (auto& s : servers) threads.emplace_back([&s] { s->Run(); });
  std::unique_ptr<gpupool::watchdog::NvmlProcessMemory> memory;
  std::unique_ptr<gpupool::watchdog::Watchdog> dog;
  if (watch_root != 0) {
    std::string error;
    memory = gpupool::watchdog::NvmlProcessMemory::Open(nvml, &error);
    if (memory == nullptr) {
      fprintf(stderr, "gpupool-ledger: --watch-root: %s\n", error.c_str());
      for (auto& s : servers) s->Stop();
      for (auto& t : threads) t.join();
      return 1;
    }
    gpupool::watchdog::Options o;
    gpupool::ledger::LedgerServer* server = servers[0].get();
    o.vram_grant = server->limits().vram;
    const pid_t root = static_cast<pid_t>(watch_root), self = getpid();
    o.in_task = [root, self](pid_t pid) {
      return pid != self && gpupool::watchdog::IsDescendant(pid, root);
    };
    o.ledger = [server] { return server->Snapshot(); };
    o.reconcile = [server](pid_t pid, uint64_t bytes) {
      return server->ReconcileDriverMemory(pid, bytes);
    };
    dog = std::make_unique<gpupool::watchdog::Watchdog>(memory.get(), std::move(o));
  }
  printf("ready\n");
  fflush(stdout);
  auto next_status = std::chrono::steady_clock::now();
  auto next_watch = next_status;
  while (g_stop == 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (dog != nullptr && std::chrono::steady_clock::now() >= next_watch) {
      next_watch += std::chrono::milliseconds(watch_ms);
      for (const auto& v : dog->Tick()) printf("killed pid=%d %s\n", v.pid, v.reason.c_str());
      fflush(stdout);
    }
    if (status_ms > 0 && std::chrono::steady_clock::now() >= next_status) {
      next_status += std::chrono::milliseconds(status_ms);
      for (size_t k = 0; k < servers.size(); ++k) PrintUsage("usage", specs[k].socket, *servers[k]);
      fflush(stdout);
    }
  }
  for (auto& s : servers) s->Stop();
  for (auto& t : threads) t.join();
  for (size_t k = 0; k < servers.size(); ++k) PrintUsage("final", specs[k].socket, *servers[k]);
  return 0;
}
