#include "tests/support/agent_process.h"

#include <fstream>

namespace gpupool::testing {

Result<std::unique_ptr<ChildProcess>> StartAgentProcess(const AgentProcessOptions& o) {
  const std::string config = o.dir + "/" + o.node + ".yaml";
  {
    std::ofstream out(config);
    out << "node_name: " << o.node << "\npool: " << o.pool
        << "\ncpu_milli: 64000\nmemory_mib: 262144\nbackend: simulated\n"
        << "heartbeat_interval_ms: " << o.heartbeat_interval_ms
        << "\nstop_grace_period_ms: " << o.stop_grace_period_ms
        << "\nreconnect: {initial_ms: 100, max_ms: 500}\n"
        << "stop_tasks_on_shutdown: " << (o.stop_tasks_on_shutdown ? "true" : "false") << "\n"
        << "gpus:\n";
    if (o.gpus_yaml.empty()) {
      out << "  - model: H100-SXM\n    count: " << o.gpus << "\n";
    } else {
      out << o.gpus_yaml;
    }
    if (o.health_poll_ms > 0) out << "health_poll_ms: " << o.health_poll_ms << "\n";
    out << o.extra_config;
    if (!out) return Status::Internal("cannot write " + config);
  }
  std::vector<std::string> argv = {
      BinaryPath("gpupool-agent"), "--config", config, "--scheduler", o.scheduler, "--data-dir",
      o.dir + "/" + o.node};
  argv.insert(argv.end(), o.extra_args.begin(), o.extra_args.end());
  return ChildProcess::Spawn(argv, o.dir + "/" + o.node + ".log");
}

}  // namespace gpupool::testing
