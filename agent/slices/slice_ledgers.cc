#include "agent/slices/slice_ledgers.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "agent/companion.h"
#include "agent/interposer/ledger/ledger_server.h"
#include "base/log.h"

namespace gpupool::agent {

namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;
constexpr const char* kComponent = "agent.slices";
// How often each ledger's spill so far is written beside it, for the next agent process if this
// one dies (at most this much spill goes unbilled).
constexpr int64_t kSpillCheckpointMs = 5000;

bool IsFile(const std::string& path) {
  struct stat st {};
  return !path.empty() && ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// A grant below the whole device it names. Unknown device size: a grant that leaves compute
// to others (thread_percentage < 100) is still a slice.
bool IsSlice(const DeviceGrant& g) {
  if (g.thread_percentage > 0 && g.thread_percentage < 100) return true;
  if (g.device_vram_mib > 0 && g.vram_mib > 0 && g.vram_mib < g.device_vram_mib) return true;
  return g.device_milli_tflops > 0 && g.milli_tflops > 0 && g.milli_tflops < g.device_milli_tflops;
}

}  // namespace

std::string SliceLedgers::DefaultLibrary(const std::string& agent_binary) {
  // In the build tree cmd/ and agent/interposer/ sit under one build dir.
  return FindCompanion(agent_binary, "libgpupool-cuda.so", "agent/interposer",
                       /*executable=*/false);
}

Result<std::unique_ptr<SliceLedgers>> SliceLedgers::Create(SliceOptions options) {
  if (!IsFile(options.library)) {
    return Status::FailedPrecondition(
        "gpu_slices: the CUDA interposer library " +
        (options.library.empty() ? std::string("libgpupool-cuda.so was not found beside the agent")
                                 : "'" + options.library + "' does not exist") +
        " (set gpu_slices.library, or gpu_slices.enabled: false to run slices unenforced)");
  }
  if (options.context_mib < 0) {
    return Status::InvalidArgument("gpu_slices.context_mib must not be negative");
  }
  if (options.watchdog_interval_ms <= 0) {
    return Status::InvalidArgument("gpu_slices.watchdog_interval_ms must be positive");
  }
  std::unique_ptr<SliceLedgers> slices(new SliceLedgers(std::move(options)));
  if (!slices->options_.watchdog_nvml.empty()) {
    std::string error;
    slices->memory_ = watchdog::NvmlProcessMemory::Open(slices->options_.watchdog_nvml, &error);
    if (slices->memory_ == nullptr) {
      return Status::FailedPrecondition("gpu_slices: the watchdog cannot read GPU memory through " +
                                        slices->options_.watchdog_nvml + ": " + error);
    }
  }
  SliceLedgers* raw = slices.get();
  slices->watch_thread_ = std::thread([raw] { raw->WatchLoop(); });
  return slices;
}

void SliceLedgers::Watch(const std::string& key, pid_t root) {
  if (memory_ == nullptr || root <= 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = running_.find(key);
  if (it == running_.end()) return;
  watchdog::Options o;
  o.vram_grant = it->second.server->limits().vram;  // spill lives in host memory, not here
  o.in_task = [root](pid_t pid) { return watchdog::IsDescendant(pid, root); };
  ledger::LedgerServer* server = it->second.server.get();
  o.ledger = [server] { return server->Snapshot(); };
  o.reconcile = [server](pid_t pid, uint64_t bytes) {
    return server->ReconcileDriverMemory(pid, bytes);
  };
  it->second.dog = std::make_unique<watchdog::Watchdog>(memory_.get(), std::move(o));
}

void SliceLedgers::SetBypassHandler(BypassHandler handler) {
  std::lock_guard<std::mutex> lock(handler_mu_);
  handler_ = std::move(handler);
}

void SliceLedgers::WatchLoop() {
  const int64_t interval_ms =
      memory_ != nullptr ? options_.watchdog_interval_ms : kSpillCheckpointMs;
  auto last_checkpoint = std::chrono::steady_clock::now();
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(stop_mu_);
      if (stop_cv_.wait_for(lock, std::chrono::milliseconds(interval_ms),
                            [this] { return stopping_; })) {
        return;
      }
    }
    const auto now = std::chrono::steady_clock::now();
    const bool checkpoint = now - last_checkpoint >= std::chrono::milliseconds(kSpillCheckpointMs);
    if (checkpoint) last_checkpoint = now;
    std::vector<std::pair<std::string, std::string>> killed;  // key, reason
    {
      // Ticks under mu_, so a task's watchdog and ledger cannot go away mid-tick (Stop()).
      std::lock_guard<std::mutex> lock(mu_);
      for (auto& [key, r] : running_) {
        if (checkpoint) WriteSpillCheckpoint(r);
        if (!r.dog) continue;
        bool ok = true;
        std::string error;
        for (const watchdog::Verdict& v : r.dog->Tick(&ok, &error)) {
          LogWarn(kComponent, "watchdog killed a process of a slice",
                  {{"task", key}, {"pid", std::to_string(v.pid)}, {"reason", v.reason}});
          killed.emplace_back(key, "gpu slice watchdog: " + v.reason);
        }
        if (!ok) LogWarn(kComponent, "watchdog cannot read GPU memory", {{"error", error}});
      }
    }
    std::lock_guard<std::mutex> lock(handler_mu_);
    for (const auto& [key, reason] : killed) {
      if (handler_) handler_(key, reason);
    }
  }
}

SliceLedgers::~SliceLedgers() {
  {
    std::lock_guard<std::mutex> lock(stop_mu_);
    stopping_ = true;
  }
  stop_cv_.notify_all();
  if (watch_thread_.joinable()) watch_thread_.join();
  // Tasks still running here outlive this agent process (docs/agent.md, "Agent restarts"): their
  // ledgers stop, but their directories stay (a sandboxed task has the directory bound in; the
  // next agent's ledger listens there again) with the spill metered so far.
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [key, r] : running_) {
    r.server->Stop();
    if (r.thread.joinable()) r.thread.join();
    WriteSpillCheckpoint(r);
    r.server.reset();
  }
  running_.clear();
}

std::string SliceLedgers::SpillCheckpointOf(const std::string& dir) { return dir + ".spill"; }

void SliceLedgers::WriteSpillCheckpoint(const Running& r) {
  const uint64_t byte_seconds =
      r.carried_spill_byte_seconds + r.server->Snapshot().spill_byte_seconds;
  if (byte_seconds == 0) return;  // nothing spilled yet: nothing to carry over
  const std::string path = SpillCheckpointOf(r.dir);
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << byte_seconds << "\n";
    if (!out.flush()) return;  // the last checkpoint stays
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
}

bool SliceLedgers::Shared(const TaskSpec& spec) {
  return std::any_of(spec.devices.begin(), spec.devices.end(), IsSlice);
}

Result<std::map<std::string, std::string>> SliceLedgers::Start(const std::string& key,
                                                               const std::string& dir,
                                                               const TaskSpec& spec) {
  // The grant as the ledger's limits. The ledger is per task: VRAM is the sum of the slices'
  // (each at most its device), compute the largest share; VRAM granted beyond a device's own may
  // spill to host memory.
  ledger::Limits limits;
  int32_t pct = 0;
  for (const DeviceGrant& g : spec.devices) {
    const uint64_t grant = static_cast<uint64_t>(std::max<int64_t>(g.vram_mib, 0));
    const uint64_t device =
        g.device_vram_mib > 0 ? static_cast<uint64_t>(g.device_vram_mib) : grant;
    limits.vram += std::min(grant, device) * kMiB;
    limits.spill += (grant > device ? grant - device : 0) * kMiB;
    pct =
        std::max(pct, g.thread_percentage <= 0 ? 100 : std::min<int32_t>(100, g.thread_percentage));
  }
  limits.compute_percent = static_cast<uint32_t>(pct > 0 ? pct : 100);
  limits.compute_fair = spec.compute_fair && limits.compute_percent < 100;
  // The tenants of one device share its arbiter, which splits time-sliced moments among them
  // (agent/interposer/ledger/device_arbiter.h). A task's ledger joins the arbiter of the device
  // it holds the largest share of (a slice is almost always one device).
  std::string device;
  int32_t best = -1;
  for (const DeviceGrant& g : spec.devices) {
    const int32_t share = g.thread_percentage <= 0 ? 100 : g.thread_percentage;
    if (share > best) {
      best = share;
      device = g.uuid;
    }
  }
  limits.context_bytes = static_cast<uint64_t>(options_.context_mib) * kMiB;

  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec || ::chmod(dir.c_str(), 0755) != 0) {
    return Status::FailedPrecondition("gpu slice: cannot create the ledger directory " + dir +
                                      ": " + (ec ? ec.message() : std::strerror(errno)));
  }
  constexpr const char* kSocket = "/ledger.sock";
  const std::string socket = dir + kSocket;
  std::string error;
  std::shared_ptr<ledger::DeviceArbiter> arbiter;
  {
    std::lock_guard<std::mutex> lock(mu_);
    std::shared_ptr<ledger::DeviceArbiter>& a = arbiters_[device];
    if (a == nullptr) a = std::make_shared<ledger::DeviceArbiter>();
    arbiter = a;
  }
  std::unique_ptr<ledger::LedgerServer> server =
      ledger::LedgerServer::Create(socket, limits, &error, arbiter);
  if (server == nullptr) {
    return Status::FailedPrecondition("gpu slice: cannot start the task's ledger at " + socket +
                                      ": " + error);
  }
  // Any uid may connect (the task's is not the agent's); only root may replace it (the dir).
  ::chmod(socket.c_str(), 0666);
  // The spill a previous agent process's ledger metered for this task (none for a new task).
  uint64_t carried = 0;
  std::ifstream(SpillCheckpointOf(dir)) >> carried;
  ledger::LedgerServer* raw = server.get();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (running_.count(key) != 0) {
      return Status::FailedPrecondition("gpu slice: task " + key + " already has a ledger");
    }
    Running& r = running_[key];
    r.server = std::move(server);
    r.dir = dir;
    r.carried_spill_byte_seconds = carried;
    r.thread = std::thread([raw] { raw->Run(); });
  }
  LogInfo(kComponent, "slice ledger started",
          {{"task", key},
           {"vram_mib", std::to_string(limits.vram / kMiB)},
           {"spill_mib", std::to_string(limits.spill / kMiB)},
           {"compute_percent", std::to_string(limits.compute_percent)}});
  return std::map<std::string, std::string>{{"LD_PRELOAD", options_.library},
                                            {ledger::kSocketEnv, socket}};
}

int64_t SliceLedgers::Stop(const std::string& key) {
  Running r;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = running_.find(key);
    if (it == running_.end()) return 0;
    r = std::move(it->second);
    running_.erase(it);
  }
  r.server->Stop();
  if (r.thread.joinable()) r.thread.join();
  const ledger::Usage usage = r.server->Snapshot();
  r.server.reset();  // closes the socket
  std::error_code ec;
  std::filesystem::remove_all(r.dir, ec);
  std::filesystem::remove(SpillCheckpointOf(r.dir), ec);
  return static_cast<int64_t>((r.carried_spill_byte_seconds + usage.spill_byte_seconds) / kMiB);
}

std::vector<sandbox::Capability> SliceLedgers::Capabilities() const {
  const std::string how = "CUDA interposer " + options_.library + ", one ledger per task";
  std::vector<sandbox::Capability> out = {
      {"vram_cap", true,
       how + ": VRAM reserved before every CUDA allocation path, one byte over "
             "the grant is CUDA_ERROR_OUT_OF_MEMORY"},
      {"compute_share", true,
       how + ": a strict cap of the grant's share of GPU time, measured around every launch "
             "(cooperative: launches made around the interposer are not metered)"},
      {"spill", false,
       "per-task only: VRAM granted beyond a device's own is served from host memory and "
       "metered; spill when a shared device is full is not arbitrated yet"},
  };
  out.push_back(
      memory_ != nullptr
          ? sandbox::Capability{"bypass_watchdog", true,
                                "every " + std::to_string(options_.watchdog_interval_ms) +
                                    " ms, each slice's processes' GPU memory (NVML, " +
                                    options_.watchdog_nvml +
                                    ") against its ledger: a process around the interposer or a "
                                    "task over its grant is killed and the task failed"}
          : sandbox::Capability{"bypass_watchdog", false,
                                "no NVML to read per-process GPU memory from (simulated backend): "
                                "a process that goes around the interposer is not caught"});
  return out;
}

std::vector<sandbox::Capability> SliceLedgers::DisabledCapabilities(const std::string& why) {
  return {{"vram_cap", false, why},
          {"compute_share", false, why},
          {"spill", false, why},
          {"bypass_watchdog", false, why}};
}

}  // namespace gpupool::agent
