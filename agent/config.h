// AgentConfig: the agent's typed options, parsed once from YAML at the edge.
//
// Every error names the file, the key and the line ("agent.yaml:7:5: gpus[0].count: must be a
// positive integer, got 'eight'"); unknown keys are errors too, so typos do not pass silently.
// The full reference with an example is in docs/agent.md. Command-line flags override the file
// (cmd/gpupool_agent.cc); Validate() checks the merged result.
//
// Thread safety: plain values.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "agent/backend.h"
#include "agent/images.h"
#include "agent/mps/mps_manager.h"
#include "agent/networks.h"
#include "agent/sandbox/sandbox.h"
#include "agent/slices/slice_ledgers.h"
#include "base/status.h"
#include "pool/catalog.h"

namespace gpupool::agent {

enum class Topology { kAuto, kNvlinkAll, kNvlinkPairs, kPciePairs, kPcie, kNone };

// One `gpus:` entry: `count` GPUs of one catalog model; `mig` maps the entry-local GPU index to
// the MIG instances carved from it; `unhealthy` lists entry-local indexes reported unhealthy.
struct SimGpuGroup {
  std::string model;
  int32_t count = 1;
  std::map<int32_t, std::vector<std::string>> mig;
  std::vector<int32_t> unhealthy;
};

struct SimLayout {
  std::vector<SimGpuGroup> gpus;
  Topology topology = Topology::kAuto;
  std::vector<Link> links;  // explicit links, added over (and replacing) the topology's
  uint64_t seed = 1;
  // When set, the backend makes fake device files here (mknod, NVIDIA major 195), so the
  // sandbox's device rules is exercised exactly as with /dev/nvidia*. Needs root.
  std::string device_dir;
  // When set, health events are read from this file as lines are appended to it (the agent
  // sets <data_dir>/sim-events): "xid <uuid> <code>" or "ecc <uuid> corrected|uncorrected".
  std::string event_file;
};

// `nvml:` — where backend nvml finds the driver: its library, device nodes and capability files
// (agent/nvml_backend.h). The defaults are the driver's own; a node without GPUs can point them
// at tests/agent/fake_nvml_mig.cc's library and state directory.
struct NvmlOptions {
  std::string library = "libnvidia-ml.so.1";  // a soname (dlopen's search) or an absolute path
  std::string dev_dir = "/dev";
  std::string proc_dir = "/proc/driver/nvidia";
};

struct ReconnectOptions {
  int64_t initial_ms = 200;
  int64_t max_ms = 10'000;
  double jitter = 0.2;  // ± fraction applied to each delay
};

struct AgentConfig {
  std::string source = "<defaults>";  // the file it came from, for messages
  std::string scheduler = "127.0.0.1:7070";
  std::string node_name;  // empty → the host name
  std::string pool = "default";
  std::map<std::string, std::string> labels;
  // `time_slicing:` — time-slice slots per device, keyed by GPU index ("0") or UUID (a GPU's or a
  // MIG instance's): the device's default count, reported at registration; an admin's
  // `gpupoolctl nodes set-slots` overrides it (docs/agent.md, "Time-slicing").
  std::map<std::string, int32_t> time_slicing;
  // The join token (secure gpupoold: <data-dir>/node.token, or a token an admin created); from
  // `token`, or read from `token_file` (one line).
  std::string token;
  std::string token_file;  // where `token` came from, if from a file (the sandbox hides it)
  // gpupoold's CA certificate (<data-dir>/tls/ca.crt). Set: TLS, and the agent authenticates with
  // its own node certificate, joining with `token` as the join token (agent/enroll.h).
  std::string ca_file;
  int64_t cpu_milli = 0;   // 0 → detected from the host
  int64_t memory_mib = 0;  // 0 → detected from the host
  int64_t spill_budget_mib = 0;
  std::string backend = "simulated";  // "simulated" | "nvml"
  std::string data_dir = "/var/lib/gpupool-agent";
  int64_t heartbeat_interval_ms = 2000;
  int64_t stop_grace_period_ms = 10'000;  // default grace for StopTask without one and shutdown
  // false (default): a stopped agent leaves its tasks running under the lease keeper for the next
  // agent process to re-adopt (a restart or an upgrade kills no task); true: a node going away.
  bool stop_tasks_on_shutdown = false;
  int64_t output_tail_bytes = 4096;
  int64_t keepalive_ms = 0;  // gRPC keepalive pings; 0 = off (the server must permit them)
  ReconnectOptions reconnect;
  std::string catalog;  // optional catalog YAML path (pool/catalog.h's format)
  std::string log_level = "info";
  std::string metrics_listen;  // HOST:PORT of the agent's /metrics (DCGM names); empty = off
  Catalog models = Catalog::Builtin();  // pool/catalog.yaml, or the `catalog` file instead
  SimLayout sim;
  NvmlOptions nvml;                 // backend nvml only
  sandbox::SandboxOptions sandbox;  // `sandbox:` (docs/sandbox.md); off unless enabled
  // Zero a device's free VRAM before it changes tenant (CUDA driver API; simulated: a file per
  // device under sim_device_dir, sim_vram_mib long).
  bool vram_scrub = false;
  int64_t sim_vram_mib = 64;
  // How often the backend's XID/ECC events are drained (agent/health/health_monitor.h).
  int64_t health_poll_ms = 500;
  // `mps:` — run MPS control daemons for shared grants (agent/mps/mps_manager.h).
  MpsOptions mps;
  // Fractional slices held by the CUDA interposer and a ledger per task (agent/slices/).
  SliceOptions gpu_slices;
  // `images:` — OCI image tasks through runc (agent/images.h); needs the sandbox.
  ImageOptions images;
  // `network:` — what tasks' networks may reach (agent/networks.h, docs/network.md).
  NetworkConfig network;
};

// The most slots `time_slicing:` may give one device (gpupoold refuses more).
inline constexpr int32_t kMaxTimeSliceSlots = 64;

// Gives the discovered devices their `time_slicing:` counts (by index for GPUs, by UUID for GPUs
// and MIG instances). INVALID_ARGUMENT naming the key when it matches no device, or names a GPU
// partitioned into MIG instances (slice an instance instead).
Status ApplyTimeSlicing(const std::map<std::string, int32_t>& time_slicing,
                        std::vector<Device>* devices);

// Parses YAML text; `source` names it in errors (a file path).
Result<AgentConfig> ParseAgentConfig(const std::string& yaml, const std::string& source);
Result<AgentConfig> LoadAgentConfigFile(const std::string& path);
// The token in `path` (one line, surrounding whitespace dropped). NOT_FOUND naming the file when
// it cannot be read; INVALID_ARGUMENT when it is empty or holds more than one line.
Result<std::string> ReadTokenFile(const std::string& path);

// HOST:PORT with a port 1..65535, or empty (off). The error names what is wrong.
Status CheckListenAddress(const std::string& address);

// Checks the merged config (after flags) and fills detected defaults (host name, CPU, RAM).
Status ValidateAgentConfig(AgentConfig* config);

// The simulated layout from a short YAML fragment (the `gpus:`/`topology:`/`links:` keys), for
// tests and the fleet. Same validation as the full config.
Result<SimLayout> ParseSimLayout(const std::string& yaml, const Catalog& models,
                                 const std::string& source = "<sim>");

const char* TopologyName(Topology t);

}  // namespace gpupool::agent
