// Test support: the simulated node of the end-to-end tests — a real gpupool-agent (by default
// "node-a" with one simulated H100 in pool "gpu", health polled every 50 ms;
// tests/support/agent_process.h) beside a test's gpupoold — and the calls those tests make over
// and over: submit a shell job (SubmitShellJob), look up the node (GetNode) and a job's first
// task (GetJob), each lookup empty when the call fails.
//
// Start() after Stop() (or after the agent died) starts it again on the same data dir, as a real
// node restarts; Kill() is a kill -9. The destructor stops a running agent.
//
// Thread safety: one test thread.
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "gpupool/v1/jobs.grpc.pb.h"
#include "gpupool/v1/pools.grpc.pb.h"
#include "tests/support/daemon_process.h"

namespace gpupool::testing {

// A one-task job running `/bin/sh -c script` on `gpus` whole GPUs.
struct ShellJob {
  std::string script;
  std::string tenant = "acme/e2e/tester";
  std::string pool = "gpu";
  int gpus = 1;
  int retries = 0;
  std::string priority_class;  // empty: the default
};

// Submits `job`; its id, or "" (and a test failure naming the error) when refused.
std::string SubmitShellJob(v1::JobService::Stub& jobs, const ShellJob& job);
// The first task of `job_id`; empty when the call fails or the job has none.
v1::Task FirstTask(v1::JobService::Stub& jobs, const std::string& job_id);
// The whole log of task `task_id` (GetTaskLogs, not following); a test failure when the call
// fails.
std::string TaskLogs(v1::JobService::Stub& jobs, const std::string& task_id);

class SingleAgent {
 public:
  struct Options {
    std::string dir;  // the test's directory
    std::string pool = "gpu";
    std::string node = "node-a";
    int gpus = 1;
    int64_t health_poll_ms = 50;  // 0: the agent's default
    std::string extra_config;     // more agent YAML (e.g. an `mps:` block, `ca_file:`)
    std::vector<std::string> extra_args;
    // Secure daemons: the join token file the agent joins with; empty = the daemon's node.token.
    std::string token_file;
  };
  explicit SingleAgent(Options options);
  // `dir`: the test's directory; `pool`: the agent's pool; `extra_config`: more agent YAML.
  SingleAgent(std::string dir, std::string pool, std::string extra_config = "");
  ~SingleAgent();

  // Points the agent at gpupoold's gRPC address (HOST:PORT, or a replicas' list) and the lookups
  // at `channel` (null: plaintext to `grpc_address`).
  void Connect(const std::string& grpc_address, std::shared_ptr<grpc::Channel> channel = nullptr);
  // Connect(daemon's address, daemon.AdminChannel()); a secure daemon's agent joins with its
  // node.token and registers with the certificate it gets (ca_file: the daemon's CA).
  void Connect(const DaemonProcess& daemon);
  // Writes the agent's config and starts it; does not wait for it to register.
  Status Start();
  // Start(), then waits up to `timeout` for the node to be READY; false if it is not.
  bool StartAndWaitReady(std::chrono::seconds timeout = std::chrono::seconds(60));
  // SIGTERM, then waits up to 20 s for it to exit.
  void Stop();
  // SIGKILL, and reaps it.
  void Kill();
  bool running() const { return process_ != nullptr; }
  const std::string& node() const { return options_.node; }

  static constexpr const char* kNode = "node-a";
  v1::Node Node();
  v1::Task Task(const std::string& job_id);
  std::string Submit(const ShellJob& job) { return SubmitShellJob(*jobs_, job); }

 private:
  Options options_;
  std::string scheduler_;
  std::string join_config_;  // token_file and ca_file, for a secure daemon
  std::unique_ptr<ChildProcess> process_;
  std::unique_ptr<v1::JobService::Stub> jobs_;
  std::unique_ptr<v1::NodeService::Stub> nodes_;
};

}  // namespace gpupool::testing
