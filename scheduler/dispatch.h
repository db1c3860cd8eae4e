// Ports through which the core acts on the outside world without knowing how: commands to node
// agents (AgentGateway) and an executor to get back onto the core's thread (Executor).
//
// The core builds commands only after the allocation they carry is durable; the gateway sends
// them over the agent's stream (api/agent_hub.h) or, in tests, records them.
//
// Thread safety: the core calls the gateway from its own thread; implementations must not block.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "scheduler/model.h"

namespace gpupool {

struct DeviceGrantCommand {
  std::string uuid;
  int64_t milli_tflops = 0;
  int64_t vram_mib = 0;
  int32_t thread_percentage = 100;  // share of the device's compute, 1..100
};

struct StartTaskCommand {
  std::string task_id;
  int64_t job_id = 0;
  std::string tenant;
  int32_t attempt = 0;
  std::vector<std::string> argv;
  std::map<std::string, std::string> env;
  std::vector<DeviceGrantCommand> devices;
  int64_t max_runtime_ms = 0;
  int64_t epoch = 0;
  int64_t cpu_milli = 0;   // the task's host CPU request: the node sandbox's CPU quota
  int64_t memory_mib = 0;  // the task's host memory request: the node sandbox's memory limit
  bool mps_tenant_isolation = false;    // the pool's: shared grants use the tenant's own MPS daemon
  bool compute_fair = false;            // the pool's: slices burst into idle time, not strict caps
  std::string image;                    // the task's OCI image; empty = a plain command
  std::string registry_credential_env;  // the env entry that is the image's pull credential
  std::vector<std::string> entrypoint;  // replaces the image's (empty = the image's)
  std::string working_dir;              // empty = the image's
  std::map<std::string, std::string> volumes;       // mount path → dataset ("" = scratch)
  std::vector<TaskPort> ports;                      // published by the node
  TaskNetwork network = TaskNetwork::kNodeDefault;  // the pool's
};

struct StopTaskCommand {
  std::string task_id;
  int32_t attempt = 0;
  int64_t grace_period_ms = 0;
  std::string reason;
  int64_t epoch = 0;
};

// The images a node's pool pins (PoolRecord::pinned_images): the whole list, which replaces the
// one the node holds.
struct PinImagesCommand {
  std::vector<std::string> images;
  int64_t epoch = 0;
};

// Re-partition one of the node's GPUs (MigLayoutRecord, stored first): pool/mig_layout.h's text.
struct MigLayoutCommand {
  std::string gpu;
  std::string layout;
  int64_t generation = 0;
  int64_t epoch = 0;
};

class AgentGateway {
 public:
  virtual ~AgentGateway() = default;
  // Returns false when the node has no connected agent (the command is dropped; reconciliation
  // on reconnect repairs the difference).
  virtual bool StartTask(const std::string& node, const StartTaskCommand& cmd) = 0;
  virtual bool StopTask(const std::string& node, const StopTaskCommand& cmd) = 0;
  // Advisory: a node that misses it gets the list again with its next registration
  // (RegistrationResult::pinned_images). Gateways without image-running nodes (the twin's
  // simulated agents) drop it.
  virtual bool PinImages(const std::string& /*node*/, const PinImagesCommand& /*cmd*/) {
    return false;
  }
  // A node that misses it is asked again when it next registers (the row is still applying).
  // Gateways whose nodes cannot re-partition drop it.
  virtual bool SetMigLayout(const std::string& /*node*/, const MigLayoutCommand& /*cmd*/) {
    return false;
  }
};

// Runs a closure on the core's thread, later. The daemon posts to an Asio strand; tests queue.
using Executor = std::function<void(std::function<void()>)>;

}  // namespace gpupool
