// SimFleet: many simulated agents in one process, for the demo, scale tests and the spin-up
// benchmark.
//
// Each agent is a full Agent (the same code as gpupool-agent) with its own SimulatedBackend and
// node name (<prefix><index>, zero-padded: "sim-0007"); they share one TaskRunner (tasks are real
// child processes under <data_dir>/tasks), one io_context run by a few threads, and a few gRPC
// channels (one TCP connection per `agents_per_channel` agents) carrying their streams — no
// thread per agent.
//
// Thread safety: Start/Shutdown from one thread; stats() from any.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "agent/agent.h"
#include "agent/config.h"
#include "agent/sim_backend.h"
#include "agent/task_runner.h"

namespace gpupool::agent {

// One explicitly described node of a heterogeneous fleet (the demo: two 8×H100 nodes, one with
// MIG, and a 4×L4 node). Empty pool → base.pool; labels are added to base.labels.
struct SimNodeSpec {
  std::string name;
  std::string pool;
  SimLayout layout;
  std::map<std::string, std::string> labels;
};

struct SimFleetOptions {
  // Scheduler address, pool, token, labels, data dir, heartbeat, reconnect, GPU layout (sim),
  // catalog (models): shared by every agent. node_name is ignored.
  AgentConfig base;
  int32_t agents = 1000;
  std::string name_prefix = "sim-";
  // When non-empty, agent i joins pools[i % pools.size()] instead of base.pool.
  std::vector<std::string> pools;
  // When non-empty: exactly these agents; agents, name_prefix, pools and base.sim are ignored.
  std::vector<SimNodeSpec> nodes;
  int32_t agents_per_channel = 100;
  int32_t threads = 2;
};

struct FleetStats {
  int32_t agents = 0;
  int32_t connected = 0;
  int32_t registered = 0;
  int64_t registrations = 0;
  int64_t heartbeats = 0;
  int64_t updates = 0;
  int64_t ignored_commands = 0;
  int64_t heartbeat_interval_ms = 0;  // the first agent's interval in force
};

class SimFleet {
 public:
  explicit SimFleet(SimFleetOptions options);
  ~SimFleet();  // Shutdown(false) if not done
  SimFleet(const SimFleet&) = delete;
  SimFleet& operator=(const SimFleet&) = delete;

  // Creates and starts every agent; they connect in the background.
  Status Start();
  // Shuts every agent down (optionally stopping its tasks), then the threads.
  void Shutdown(bool stop_tasks);

  FleetStats stats() const;
  size_t size() const { return agents_.size(); }
  Agent& agent(size_t i) { return *agents_[i]; }
  SimulatedBackend& backend(size_t i) { return *backends_[i]; }
  TaskRunner& runner() { return *runner_; }
  static std::string NodeName(const std::string& prefix, int32_t index, int32_t count);

 private:
  struct Io;
  SimFleetOptions options_;
  std::unique_ptr<Io> io_;
  std::unique_ptr<TaskRunner> runner_;
  std::vector<std::unique_ptr<SimulatedBackend>> backends_;
  std::vector<std::unique_ptr<Agent>> agents_;
  std::vector<std::thread> threads_;
  bool shut_down_ = false;
};

}  // namespace gpupool::agent
