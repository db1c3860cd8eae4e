// ledger_server.h — one task's GPU ledger: the agent runs one per task (embedded, or as the
// gpupool-ledger binary) and every process of the task connects to it through the interposer.
//
// Invariants (under mu_):
//   - vram_used == sum of every connection's and orphan's vram; likewise spill;
//   - vram_used <= limits.vram and spill_used <= limits.spill: a reservation that would pass
//     either is refused, never granted in part. Only reclaims (protocol.h, kReclaim: what a
//     process held under a previous ledger, after an agent restart) may take a task past them,
//     and then every reservation is refused until enough is released;
//   - a connection's charge is released only when its process has ended (pidfd readable or the
//     pid gone): a dropped connection of a live process becomes an orphan charge, so a client
//     cannot shed its usage by misbehaving;
//   - at most 1024 connections; each is served at most 64 frames per poll round.
// Thread safety: Run() serves on the calling thread; Stop() and Snapshot() may be called from
// any thread.
#ifndef GPUPOOL_AGENT_INTERPOSER_LEDGER_LEDGER_SERVER_H_
#define GPUPOOL_AGENT_INTERPOSER_LEDGER_LEDGER_SERVER_H_

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "agent/interposer/ledger/device_arbiter.h"
#include "agent/interposer/ledger/protocol.h"

namespace gpupool::ledger {

struct Limits {
  uint64_t vram = 0;           // bytes of device memory
  uint64_t spill = 0;          // bytes of host memory that plain allocations may spill to
  uint64_t context_bytes = 0;  // charged per CUDA context
  uint32_t compute_percent = 100;
  bool compute_fair = false;  // burst into idle time (needs the device's arbiter); else strict
  // VRAM each process may hold reserved ahead of its allocations, so most of them need no round
  // trip (docs/interposer.md, "Lease"). 0: every allocation is reserved exactly.
  uint64_t lease_bytes = 0;
};

struct ProcessUsage {
  pid_t pid;
  uint64_t vram, spill;
  bool orphan;  // its connection is gone, its process not yet
};

struct Usage {
  uint64_t vram = 0, spill = 0;
  uint64_t refused = 0;          // reservations refused for the grant
  uint64_t protocol_errors = 0;  // malformed frames (their connections were dropped)
  uint64_t gpu_ns = 0;           // GPU time charged over kCompute (its share of time-sliced spans)
  uint64_t spill_byte_seconds = 0;      // integral of spill_used over time, for metering
  std::vector<ProcessUsage> processes;  // one row per connection or orphan
};

class LedgerServer {
 public:
  // Listens on `socket_path` (an existing socket file there is replaced). nullptr and `*error`
  // when it cannot.
  // `arbiter`: the device's, shared by the ledgers of all its tenants (the agent's); without
  // one the compute share is a strict cap.
  static std::unique_ptr<LedgerServer> Create(const std::string& socket_path, const Limits& limits,
                                              std::string* error,
                                              std::shared_ptr<DeviceArbiter> arbiter = nullptr);
  ~LedgerServer();
  LedgerServer(const LedgerServer&) = delete;
  LedgerServer& operator=(const LedgerServer&) = delete;

  void Run();   // serves until Stop()
  void Stop();  // thread-safe; Run() returns soon after
  Usage Snapshot() const;
  // Charges `pid` for the device memory the driver holds for it beyond what its connections
  // reserved (`nvml_bytes` is NVML's figure for the process): its contexts and the code and data
  // of the modules it loaded, which no allocation call names (520 MiB per context, ~150 MiB of
  // PyTorch's modules on an H200, driver 580). The charge is absolute (it follows NVML down as
  // well as up), counts against the grant, and ends with the process. False, and nothing
  // charged, for a pid the ledger does not know (it never connected: the watchdog's bypass).
  bool ReconcileDriverMemory(pid_t pid, uint64_t nvml_bytes);
  const Limits& limits() const { return limits_; }

 private:
  struct Conn;
  struct Orphan;
  LedgerServer(int listen_fd, int wake_fd, const std::string& path, const Limits& limits,
               std::shared_ptr<DeviceArbiter> arbiter);
  void Accept();
  bool Serve(Conn* c);  // false: drop the connection
  Response Handle(Conn* c, const Request& req);
  void Drop(size_t index);
  void ReapOrphans();
  // REQUIRES: mu_. Whether `pid` has a connection or an orphan here; `*reserved` (if not null)
  // what they reserved of VRAM.
  bool KnownLocked(pid_t pid, uint64_t* reserved) const;
  void AccrueSpill();

  const int listen_fd_;
  const int wake_fd_;
  const std::string path_;
  const Limits limits_;
  const std::shared_ptr<DeviceArbiter> arbiter_;
  const int arbiter_id_;
  mutable std::mutex mu_;  // guards everything below
  std::vector<std::unique_ptr<Conn>> conns_;
  std::vector<Orphan> orphans_;
  std::map<pid_t, uint64_t> driver_;  // ReconcileDriverMemory's charges, included in totals_
  Usage totals_;                      // processes left empty; filled by Snapshot()
  uint64_t last_accrual_ns_ = 0;
  uint64_t spill_byte_ns_rem_ = 0;
  // Strict compute cap: a token bucket of GPU time refilled at compute_percent of wall time.
  int64_t compute_credit_ns_ = 0;
  uint64_t compute_refill_ns_ = 0;
  uint64_t accept_pause_until_ns_ = 0;  // Run()'s thread only
};

}  // namespace gpupool::ledger

#endif  // GPUPOOL_AGENT_INTERPOSER_LEDGER_LEDGER_SERVER_H_
