// Agent: one node's end of the scheduler stream (AgentService.Connect).
//
// On Start() the agent discovers its devices and opens the stream: Register first (node, pool,
// labels, host CPU/RAM, devices, links, token, running tasks, backend, version, spill budget),
// then a Heartbeat every interval (device samples + running tasks) and a TaskUpdate on every
// task transition. It obeys RegisterAck (epoch, heartbeat interval, stop_task_ids), StartTask,
// StopTask and FetchLogs; a command whose epoch is older than the newest seen is ignored.
//
// When the stream breaks (the scheduler restarted, the network dropped) tasks keep running; the
// agent reconnects with exponential backoff and jitter and registers again with its running
// tasks so the scheduler can reconcile. Task updates are kept, latest per task, until they have
// been written on a stream that then stayed up for two more successful heartbeats; every
// reconnect re-sends what is still kept right after Register (the scheduler must treat updates
// idempotently, by task id and attempt). A final report (succeeded, failed, cancelled…) is kept
// longer: for 15 minutes after that confirmation (at most 256 of them). Register carries every
// final report still held (finished_tasks), so a scheduler that received one while its database
// was down and then restarted before storing it learns that the work is done — before it
// reconciles the running tasks — instead of running it again.
//
// Threading: all state lives on one Asio strand of the io_context the caller runs; gRPC's
// callback API feeds it (no thread per agent), so a SimFleet can run thousands in one process.
// The backend and runner must outlive the agent. Public methods are safe from any thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "agent/backend.h"
#include "agent/config.h"
#include "agent/task_runner.h"
#include "base/clock.h"
#include "base/status.h"

namespace boost::asio {
class io_context;
}
namespace grpc {
class Channel;
}

namespace gpupool::agent {

inline constexpr const char* kAgentVersion = "0.1.0";

struct AgentStats {
  bool connected = false;             // a stream is open and Register was written
  bool registered = false;            // RegisterAck received on the current stream
  int64_t epoch = 0;                  // newest leader epoch seen
  int64_t registrations = 0;          // Register messages sent (1 + reconnects)
  int64_t heartbeats = 0;             // Heartbeats written
  int64_t updates = 0;                // TaskUpdates written (re-sends included)
  int64_t ignored_commands = 0;       // commands dropped for an old epoch
  int64_t pending_updates = 0;        // updates kept for re-sending
  int64_t heartbeat_interval_ms = 0;  // in force (config, or RegisterAck's)
};

// A channel to config.scheduler with the agent's settings: gRPC's own reconnect backoff follows
// `reconnect` (so a restarted scheduler is found as fast as the agent retries) and keepalive
// pings when keepalive_ms > 0. `own_connection` gives the channel its own TCP connection.
std::shared_ptr<grpc::Channel> MakeAgentChannel(const AgentConfig& config,
                                                bool own_connection = false);

class Agent {
 public:
  // REQUIRES: config validated (ValidateAgentConfig); backend, runner and io outlive the agent;
  // someone runs `io`.
  Agent(AgentConfig config, DeviceBackend* backend, TaskRunner* runner,
        std::shared_ptr<grpc::Channel> channel, boost::asio::io_context& io,
        const Clock* clock = SystemClock::Get());
  ~Agent();  // Shutdown(false) if not done
  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;

  // Sees each heartbeat's device samples and the node's running tasks, on the agent's strand
  // (the agent's /metrics feeds on it). REQUIRES: called before Start().
  using SampleObserver = std::function<void(const Inventory&, const std::vector<DeviceSample>&,
                                            const std::vector<TaskStatus>&)>;
  void SetSampleObserver(SampleObserver observer);

  // Makes a channel to one scheduler address. Set before Start(), it lets the agent follow a
  // standby's NotLeader to the leader it names, and back to the configured list when that
  // leader is gone (api/client/leader_follow.h, docs/ha.md). Unset: the channel given is used
  // for every connection.
  using ChannelMaker = std::function<std::shared_ptr<grpc::Channel>(const std::string& target)>;
  void SetChannelMaker(ChannelMaker make);

  // Discovers devices and starts connecting. Fails if discovery fails.
  Status Start();

  // Leaves the stream. With stop_tasks, first stops this node's tasks with the configured grace
  // period and sends their final updates (a node going away); without, tasks keep running.
  // Blocks until done (bounded by the grace period plus a few seconds).
  void Shutdown(bool stop_tasks);

  AgentStats stats() const;
  const AgentConfig& config() const;

  class Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

}  // namespace gpupool::agent
