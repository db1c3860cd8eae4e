// Test support: a real gpupool-agent child process with simulated H100s, configured the way the
// end-to-end tests need it (short heartbeats, fast reconnects), and its log beside its data.
//
// The agent's config is <dir>/<node>.yaml, its data dir <dir>/<node>, its log <dir>/<node>.log;
// start it again with the same options after a kill -9 (the data dir carries over, as on a real
// node). The returned ChildProcess is in a process group of its own.
//
// Thread safety: one test thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "tests/support/daemon_process.h"

namespace gpupool::testing {

struct AgentProcessOptions {
  std::string dir;        // the test's directory
  std::string node;       // node name
  std::string scheduler;  // HOST:PORT of gpupoold's gRPC
  std::string pool = "gpu";
  int gpus = 1;
  // The `gpus:` entries as YAML list items ("  - {model: H100-SXM, count: 2, mig: …}\n");
  // empty: `gpus` H100s.
  std::string gpus_yaml;
  int64_t heartbeat_interval_ms = 200;
  int64_t stop_grace_period_ms = 1000;
  int64_t health_poll_ms = 0;  // > 0: the agent's health_poll_ms
  // A test's SIGTERM ends its agent's tasks too, unless it tests a restart that keeps them.
  bool stop_tasks_on_shutdown = true;
  std::string extra_config;  // more agent YAML, appended (e.g. an `mps:` block)
  std::vector<std::string> extra_args;
};

// Writes the config and starts the agent; does not wait for it to register.
Result<std::unique_ptr<ChildProcess>> StartAgentProcess(const AgentProcessOptions& options);

}  // namespace gpupool::testing
