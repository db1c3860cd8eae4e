// Test support: the single simulated node of the one-node end-to-end tests — a gpupool-agent
// "node-a" with one simulated H100 (tests/support/agent_process.h, health polled every 50 ms)
// beside a test's gpupoold — and the two lookups those tests make over and over: the node
// (GetNode) and a job's first task (GetJob), each empty when the call fails.
//
// Start() after Stop() (or after the agent died) starts it again on the same data dir, as a real
// node restarts. The destructor stops a running agent.
//
// Thread safety: one test thread.
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "base/status.h"
#include "gpupool/v1/jobs.grpc.pb.h"
#include "gpupool/v1/pools.grpc.pb.h"
#include "tests/support/daemon_process.h"

namespace gpupool::testing {

class SingleAgent {
 public:
  // `dir`: the test's directory; `pool`: the agent's pool; `extra_config`: more agent YAML
  // (e.g. an `mps:` block).
  SingleAgent(std::string dir, std::string pool, std::string extra_config = "");
  ~SingleAgent();

  // Points the agent and the lookups at gpupoold's gRPC address (HOST:PORT).
  void Connect(const std::string& grpc_address);
  // Writes the agent's config and starts it; does not wait for it to register.
  Status Start();
  // SIGTERM, then waits up to 20 s for it to exit.
  void Stop();
  bool running() const { return process_ != nullptr; }

  static constexpr const char* kNode = "node-a";
  v1::Node Node();
  v1::Task Task(const std::string& job_id);

 private:
  std::string dir_, pool_, extra_config_, scheduler_;
  std::unique_ptr<ChildProcess> process_;
  std::unique_ptr<v1::JobService::Stub> jobs_;
  std::unique_ptr<v1::NodeService::Stub> nodes_;
};

}  // namespace gpupool::testing
