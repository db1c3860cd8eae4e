// SliceLedgers: the node side of a fractional GPU slice (docs/interposer.md, docs/sandbox.md).
//
// For every task whose grant shares a GPU (a slice: less than a whole device), the agent runs the
// task's ledger (agent/interposer/ledger/ledger_server.h) on a thread of its own, with the grant
// as its limits, and starts the task with the CUDA interposer preloaded and pointed at it:
//
//   LD_PRELOAD=<library>             libgpupool-cuda.so
//   GPUPOOL_LEDGER_SOCKET=<socket>   the ledger, where the task reaches it
//
// The limits live only in the ledger (the task's environment names the socket, nothing else), so
// a task cannot raise them; VRAM is held to the grant on every CUDA allocation path, compute to
// the grant's share of the GPU (a strict cap by measured GPU time, each time-sliced moment split
// among the device's tenants by the device's arbiter). The socket sits in a
// root-owned directory (`<task dir>/ledger`, 0755; the socket 0666): a sandboxed task sees it
// bound at `<work dir>/.gpupool`, a mount point it cannot rename or replace, so its processes
// cannot be pointed at a ledger of its own making. When the task ends, Stop() gives the spill the
// ledger measured (MiB·s), which the agent reports and gpupoold bills.
//
// The watchdog (`watchdog_nvml` set; the agent sets libnvidia-ml.so.1 with `backend: nvml`): a
// thread reconciles, every `watchdog_interval_ms`, each running slice's processes' GPU memory as
// the driver reports it through NVML with what the task's ledger charged
// (agent/interposer/watchdog/watchdog.h). A process holding memory its ledger never charged (it
// went around the interposer) or a task over its grant is SIGKILLed there and then, and the
// bypass handler (the task runner) fails the task with the watchdog's reason. Processes are
// matched to a task by descent from its leader (Watch()), as NVML reports host pids.
//
// Agent restarts (docs/agent.md): a task keeps running when the agent process leaves. Its ledger
// stops with the process, but its directory stays, and the spill metered so far is kept beside it
// (written every few seconds and at exit); the restarted agent's Start() for the same directory
// listens there again and carries that spill on. The task's processes wait for it and reclaim
// what they held (agent/interposer/ledger/ledger_client.h).
//
// A task whose ledger cannot start fails before it runs: it never runs unconfined.
// Create() refuses a library that does not exist, so an agent configured to enforce slices but
// missing the library says so at start (and reports vram_cap / compute_share not enforced when
// it runs without).
//
// Thread safety: every method may be called from any thread.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "agent/interposer/ledger/device_arbiter.h"
#include "agent/interposer/ledger/ledger_server.h"
#include "agent/interposer/watchdog/watchdog.h"
#include "agent/sandbox/sandbox.h"
#include "agent/task_runner.h"
#include "base/status.h"

namespace gpupool::agent {

struct SliceOptions {
  // Enforce slices through the interposer (config `gpu_slices.enabled`, default true).
  bool enabled = true;
  // libgpupool-cuda.so; empty: beside the agent's binary (the build tree's
  // agent/interposer/libgpupool-cuda.so, or /usr/lib/gpupool/libgpupool-cuda.so).
  std::string library;
  // Device memory charged per CUDA context (a real driver's context costs hundreds of MiB; set
  // it from a measurement on the GPU, docs/interposer.md).
  int64_t context_mib = 0;
  // NVML library the watchdog reads per-process GPU memory from; empty: no watchdog.
  std::string watchdog_nvml;
  int64_t watchdog_interval_ms = 200;
};

class SliceLedgers {
 public:
  // FAILED_PRECONDITION naming the library when it does not exist or is not a file.
  static Result<std::unique_ptr<SliceLedgers>> Create(SliceOptions options);
  // The library the defaults find (`agent_binary`: this process's executable), or "".
  static std::string DefaultLibrary(const std::string& agent_binary);
  ~SliceLedgers();

  // Whether `spec` holds a slice of some GPU (a grant below the whole device).
  static bool Shared(const TaskSpec& spec);

  // Starts the ledger of task `key` with `spec`'s grant, its socket in `dir` (created root-owned
  // 0755; for a task re-adopted after an agent restart, the directory its previous ledger used);
  // returns the task's environment additions, naming the socket at its path in `dir` (a
  // container binds `dir` at the same path). FAILED_PRECONDITION naming the cause.
  Result<std::map<std::string, std::string>> Start(const std::string& key, const std::string& dir,
                                                   const TaskSpec& spec);
  // Stops the ledger of `key` (no-op when none) and returns the spill it measured, with what
  // earlier agent processes' ledgers measured for the task, in MiB·s.
  int64_t Stop(const std::string& key);

  // The watchdog watches task `key`'s processes — `root` and its descendants — from now on.
  void Watch(const std::string& key, pid_t root);
  // Called (from the watchdog's thread, no lock of ours held) with a task's key and the reason
  // when the watchdog killed a process of it; null: nobody is told.
  using BypassHandler = std::function<void(const std::string& key, const std::string& reason)>;
  void SetBypassHandler(BypassHandler handler);
  bool watchdog() const { return memory_ != nullptr; }

  // vram_cap, compute_share and spill, each with how (or why not).
  std::vector<sandbox::Capability> Capabilities() const;
  // The same three, not enforced, with `why` (slices off, or the library missing).
  static std::vector<sandbox::Capability> DisabledCapabilities(const std::string& why);
  const std::string& library() const { return options_.library; }

 private:
  explicit SliceLedgers(SliceOptions options) : options_(std::move(options)) {}
  struct Running {
    std::unique_ptr<ledger::LedgerServer> server;
    std::thread thread;
    std::string dir;
    std::unique_ptr<watchdog::Watchdog> dog;  // once Watch() named its processes
    uint64_t carried_spill_byte_seconds = 0;  // metered by a previous agent process's ledger
  };
  // Every watchdog interval (without a watchdog, every spill checkpoint): the watchdogs' ticks
  // and, every few seconds, each ledger's spill so far written beside it.
  void WatchLoop();
  // <dir>.spill: the task's spill so far, in byte·seconds.
  static std::string SpillCheckpointOf(const std::string& dir);
  void WriteSpillCheckpoint(const Running& r);

  const SliceOptions options_;
  std::unique_ptr<watchdog::ProcessMemorySource> memory_;  // null: no watchdog
  std::mutex mu_;
  std::map<std::string, Running> running_;  // guarded by mu_
  // One per device UUID, shared by the ledgers of its tenants (kept while the agent runs: a
  // device's arbiter holds its recent busy spans, which outlive any one task).
  std::map<std::string, std::shared_ptr<ledger::DeviceArbiter>> arbiters_;  // guarded by mu_
  std::mutex handler_mu_;  // held while the handler runs
  BypassHandler handler_;  // guarded by handler_mu_
  std::mutex stop_mu_;
  std::condition_variable stop_cv_;
  bool stopping_ = false;  // guarded by stop_mu_
  std::thread watch_thread_;
};

}  // namespace gpupool::agent
