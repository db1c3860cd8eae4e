// interposer_bench — what libgpupool-cuda adds to a CUDA program, measured on the fake driver.
// Runs each workload in child processes, natively and with the interposer preloaded (against a
// ledger on a thread of this process), three times each alternating, and prints the least time
// per operation of each (medians of 5 batches inside each run); --json FILE writes the table.
//   interposer_bench [--iters N] [--json FILE]
// Workloads: a kernel launch of a 0 µs kernel uncapped and capped at 99 % (two events and a
// collection per launch), cuCtxSynchronize, cuGetProcAddress,
// cuMemGetInfo, cuMemAlloc+cuMemFree of 4 KiB (exact reservations, and with a 2 MiB lease);
// then spin-up (cuInit + primary context) of a lone
// process (30 runs) and of 100 processes started at once.
// Standalone: depends only on the fake driver and the ledger library.
// GPUPOOL_BENCH_INTERPOSER=PATH preloads another build of libgpupool-cuda.so (an older commit's,
// for a before/after comparison of a hot path on one machine in one sitting).
#include <fcntl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "agent/interposer/cuda_api.h"
#include "agent/interposer/ledger/ledger_server.h"

namespace {

uint64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

// ---- child side ------------------------------------------------------------------------------

CUcontext Setup() {
  CUcontext c = nullptr;
  if (cuInit(0) != CUDA_SUCCESS || cuDevicePrimaryCtxRetain(&c, 0) != CUDA_SUCCESS ||
      cuCtxSetCurrent(c) != CUDA_SUCCESS) {
    fprintf(stderr, "setup failed\n");
    exit(3);
  }
  return c;
}

// Median over 5 batches of the per-operation time, in ns.
template <typename Op>
double PerOp(long iters, Op op) {
  std::vector<double> batches;
  for (int b = 0; b < 5; ++b) {
    uint64_t t0 = NowNs();
    for (long i = 0; i < iters; ++i) op();
    batches.push_back(static_cast<double>(NowNs() - t0) / static_cast<double>(iters));
  }
  std::sort(batches.begin(), batches.end());
  return batches[2];
}

int Child(const std::string& what, long iters) {
  if (what == "init") {  // spin-up: cuInit + primary context, in ns
    uint64_t t0 = NowNs();
    Setup();
    printf("%llu\n", static_cast<unsigned long long>(NowNs() - t0));
    return 0;
  }
  Setup();
  double ns = 0;
  if (what == "launch") {
    CUmodule m = nullptr;
    CUfunction f = nullptr;
    cuModuleLoadData(&m, "bench");
    cuModuleGetFunction(&f, m, "empty_0us");
    ns = PerOp(iters, [&] { cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, nullptr, nullptr, nullptr); });
  } else if (what == "ctxsync") {
    ns = PerOp(iters, [] { cuCtxSynchronize(); });
  } else if (what == "getproc") {
    ns = PerOp(iters, [] {
      void* fn = nullptr;
      cuGetProcAddress_v2("cuMemAlloc", &fn, 12080, 0, nullptr);
    });
  } else if (what == "meminfo") {
    ns = PerOp(iters, [] {
      size_t f = 0, t = 0;
      cuMemGetInfo_v2(&f, &t);
    });
  } else if (what == "alloc_free") {
    ns = PerOp(iters, [] {
      CUdeviceptr p = 0;
      cuMemAlloc_v2(&p, 4096);
      cuMemFree_v2(p);
    });
  } else {
    return 2;
  }
  printf("%.1f\n", ns);
  return 0;
}

// ---- parent side -----------------------------------------------------------------------------

struct Env {
  std::string dir;
  std::vector<std::string> native, interposed;
};

pid_t Spawn(const std::vector<std::string>& args, const std::vector<std::string>& env, int* out) {
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) abort();
  std::vector<char*> a, e;
  for (const auto& s : args) a.push_back(const_cast<char*>(s.c_str()));
  a.push_back(nullptr);
  for (const auto& s : env) e.push_back(const_cast<char*>(s.c_str()));
  e.push_back(nullptr);
  pid_t pid = fork();
  if (pid == 0) {
    dup2(p[1], 1);
    execve(a[0], a.data(), e.data());
    _exit(127);
  }
  close(p[1]);
  *out = p[0];
  return pid;
}

std::string Drain(int fd) {
  std::string s;
  char buf[256];
  ssize_t n;
  while ((n = read(fd, buf, sizeof buf)) > 0) s.append(buf, static_cast<size_t>(n));
  close(fd);
  return s;
}

double RunOne(const std::string& self, const std::vector<std::string>& env, const std::string& what,
              long iters) {
  int fd;
  pid_t pid = Spawn({self, "--child", what, std::to_string(iters)}, env, &fd);
  std::string out = Drain(fd);
  int st = 0;
  waitpid(pid, &st, 0);
  return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? strtod(out.c_str(), nullptr) : -1;
}

// p50 and p99 of spin-up over `n` processes, all at once when `together`.
std::pair<double, double> SpinUp(const std::string& self, const std::vector<std::string>& env,
                                 int n, bool together) {
  std::vector<double> us;
  std::vector<std::pair<pid_t, int>> running;
  auto reap = [&] {
    for (auto& [pid, fd] : running) {
      std::string out = Drain(fd);
      waitpid(pid, nullptr, 0);
      us.push_back(strtod(out.c_str(), nullptr) / 1000.0);
    }
    running.clear();
  };
  for (int i = 0; i < n; ++i) {
    int fd;
    pid_t pid = Spawn({self, "--child", "init", "0"}, env, &fd);
    running.push_back({pid, fd});
    if (!together) reap();
  }
  reap();
  std::sort(us.begin(), us.end());
  auto pct = [&](double p) {
    return us[std::min(us.size() - 1, static_cast<size_t>(p * static_cast<double>(us.size())))];
  };
  return {pct(0.5), pct(0.99)};
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 4 && std::string(argv[1]) == "--child") return Child(argv[2], atol(argv[3]));
  long iters = 20000;
  std::string json;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::string(argv[i]) == "--iters") iters = atol(argv[i + 1]);
    if (std::string(argv[i]) == "--json") json = argv[i + 1];
  }
  char tmpl[] = "/tmp/gpupool-interposer-bench-XXXXXX";
  std::string dir = mkdtemp(tmpl);
  gpupool::ledger::Limits limits;
  limits.vram = 512ull << 20;  // room for 100 contexts of 1 MiB
  limits.context_bytes = 1ull << 20;
  std::string error;
  auto server = gpupool::ledger::LedgerServer::Create(dir + "/ledger.sock", limits, &error);
  if (server == nullptr) {
    fprintf(stderr, "%s\n", error.c_str());
    return 1;
  }
  std::thread serve([&] { server->Run(); });
  // A second task ledger with a 2 MiB lease: allocations mostly without a round trip.
  gpupool::ledger::Limits leased = limits;
  leased.lease_bytes = 2ull << 20;
  auto lease_server = gpupool::ledger::LedgerServer::Create(dir + "/lease.sock", leased, &error);
  if (lease_server == nullptr) {
    fprintf(stderr, "%s\n", error.c_str());
    return 1;
  }
  std::thread serve_lease([&] { lease_server->Run(); });
  // A third with a compute cap: every launch is metered.
  gpupool::ledger::Limits capped = limits;
  capped.compute_percent = 99;
  auto capped_server = gpupool::ledger::LedgerServer::Create(dir + "/capped.sock", capped, &error);
  if (capped_server == nullptr) {
    fprintf(stderr, "%s\n", error.c_str());
    return 1;
  }
  std::thread serve_capped([&] { capped_server->Run(); });
  const char* other_lib = getenv("GPUPOOL_BENCH_INTERPOSER");
  const std::string lib =
      other_lib != nullptr && *other_lib != 0 ? other_lib : GPUPOOL_INTERPOSER_LIB;
  std::vector<std::string> native = {
      "GPUPOOL_FAKE_CUDA_STATE=" + dir,
      "GPUPOOL_FAKE_CUDA_DEVICES=bench,1073741824,8,1048576",
      "GPUPOOL_LEDGER_SOCKET=" + dir + "/ledger.sock",
      std::string("LD_LIBRARY_PATH=") + GPUPOOL_FAKE_CUDA_DIR,
  };
  std::vector<std::string> interposed = native;
  interposed.push_back("LD_PRELOAD=" + lib);
  std::vector<std::string> interposed_lease = interposed;
  interposed_lease[2] = "GPUPOOL_LEDGER_SOCKET=" + dir + "/lease.sock";
  std::vector<std::string> interposed_capped = interposed;
  interposed_capped[2] = "GPUPOOL_LEDGER_SOCKET=" + dir + "/capped.sock";
  std::string self = "/proc/self/exe";
  char exe[4096];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n > 0) self.assign(exe, static_cast<size_t>(n));

  std::string rows;
  printf("%-17s %14s %14s %14s\n", "workload", "native ns/op", "interposed", "added ns/op");
  struct Work {
    const char* name;
    const char* child;
    const std::vector<std::string>* env;
  } works[] = {
      {"launch", "launch", &interposed},
      {"launch_capped", "launch", &interposed_capped},
      {"ctxsync", "ctxsync", &interposed},
      {"getproc", "getproc", &interposed},
      {"meminfo", "meminfo", &interposed},
      {"alloc_free", "alloc_free", &interposed},
      {"alloc_free_lease", "alloc_free", &interposed_lease},
  };
  for (const Work& w : works) {
    std::string child = w.child;
    long it = child == "alloc_free" || child == "meminfo" ? iters / 10 : iters;
    // The least of three runs each, alternating: the figure a quiet moment of the machine gives.
    double a = 1e18, b = 1e18;
    for (int r = 0; r < 3; ++r) {
      a = std::min(a, RunOne(self, native, child, it));
      b = std::min(b, RunOne(self, *w.env, child, it));
    }
    printf("%-17s %14.1f %14.1f %14.1f\n", w.name, a, b, b - a);
    rows += std::string(rows.empty() ? "" : ",\n") + "    {\"workload\": \"" + w.name +
            "\", \"native_ns\": " + std::to_string(a) +
            ", \"interposed_ns\": " + std::to_string(b) + "}";
  }
  printf("\n%-28s %10s %10s\n", "spin-up (cuInit + context)", "p50 us", "p99 us");
  std::string spin;
  for (int preload = 0; preload < 2; ++preload) {
    const auto& env = preload ? interposed : native;
    auto lone = SpinUp(self, env, 30, false);
    auto hundred = SpinUp(self, env, 100, true);
    const char* name = preload ? "interposed" : "native";
    printf("%-12s %-15s %10.0f %10.0f\n", name, "lone (30 runs)", lone.first, lone.second);
    printf("%-12s %-15s %10.0f %10.0f\n", name, "100 at once", hundred.first, hundred.second);
    spin += std::string(spin.empty() ? "" : ",\n") + "    {\"mode\": \"" + name +
            "\", \"lone_p50_us\": " + std::to_string(lone.first) +
            ", \"lone_p99_us\": " + std::to_string(lone.second) +
            ", \"hundred_p50_us\": " + std::to_string(hundred.first) +
            ", \"hundred_p99_us\": " + std::to_string(hundred.second) + "}";
  }
  server->Stop();
  serve.join();
  lease_server->Stop();
  serve_lease.join();
  capped_server->Stop();
  serve_capped.join();
  if (!json.empty()) {
    FILE* f = fopen(json.c_str(), "w");
    if (f != nullptr) {
      fprintf(f, "{\n  \"iters\": %ld,\n  \"calls\": [\n%s\n  ],\n  \"spin_up\": [\n%s\n  ]\n}\n",
              iters, rows.c_str(), spin.c_str());
      fclose(f);
    }
  }
  std::string rm = "rm -rf " + dir;
  return system(rm.c_str()) == 0 ? 0 : 1;
}
