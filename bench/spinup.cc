// spinup: submit → process started latency, with a real gpupoold and real agents on loopback.
//
// Starts gpupoold (embedded PostgreSQL, fsync on) and --agents simulated gpupool-agent processes
// (8x H100 each), then submits --jobs one-task jobs one after another (each a fractional slice
// running /bin/true), waiting --gap-ms between submissions so each measures an idle system. The
// latency of a task is its start_time − its job's submit_time, both stamped by gpupoold: from the
// moment the submission arrived, through its durable commit, the scheduling pass, the durable
// allocation, StartTask over the agent stream, fork/exec on the node, to the RUNNING report.
// Prints p50/p90/p99/max; --json FILE writes them. --sandbox runs the agents with the task
// sandbox on (agent/sandbox/: cgroup, uid, namespaces; needs root), the same jobs otherwise.
// The daemon runs in its secure default (TLS on both ports; the agents join with its node token
// and speak mTLS; every call carries a credential); --insecure measures plaintext instead.
#include <google/protobuf/util/time_util.h>
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <thread>

#include "gpupool/v1/jobs.grpc.pb.h"
#include "gpupool/v1/pools.grpc.pb.h"
#include "tests/support/daemon_process.h"

namespace gpupool {
namespace {

using google::protobuf::util::TimeUtil;
using testing::ChildProcess;
using testing::DaemonProcess;

std::string AgentConfig(const std::string& node, bool sandboxed, int index,
                        const DaemonProcess& daemon) {
  std::string c = "node_name: " + node +
                  "\npool: bench\ncpu_milli: 192000\nmemory_mib: 1048576\nbackend: simulated\n"
                  "heartbeat_interval_ms: 500\ngpus:\n  - model: H100-SXM\n    count: 8\n"
                  "topology: nvlink-all\n";
  if (daemon.secure())
    c += "token_file: " + daemon.node_token_path() + "\nca_file: " + daemon.ca_path() + "\n";
  if (sandboxed) {
    c += "sandbox:\n  enabled: true\n  cgroup_parent: gpupool-spinup-" + std::to_string(getpid()) +
         "-" + std::to_string(index) +
         "\n  uid_pool: {first: " + std::to_string(64000 + index * 1000) + ", count: 1000}\n";
  }
  return c;
}

int Run(int argc, char** argv) {
  int agents = 2, jobs = 200, gap_ms = 20;
  bool sandboxed = false, secure = true;
  std::string json, daemon_config;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string { return i + 1 < argc ? argv[++i] : "0"; };
    if (a == "--agents")
      agents = std::stoi(value());
    else if (a == "--jobs")
      jobs = std::stoi(value());
    else if (a == "--gap-ms")
      gap_ms = std::stoi(value());
    else if (a == "--json")
      json = value();
    else if (a == "--sandbox")
      sandboxed = true;
    else if (a == "--daemon-config")
      daemon_config = value();
    else if (a == "--insecure")
      secure = false;
    else {
      std::printf(
          "usage: spinup [--agents N] [--jobs N] [--gap-ms MS] [--sandbox] [--daemon-config FILE] "
          "[--insecure] [--json FILE]\n"
          "  --sandbox  agents run every task in its sandbox (cgroup, uid, namespaces; root)\n"
          "  --insecure  a plaintext daemon and agents, no credentials (default: TLS, tokens)\n"
          "  --daemon-config FILE  the gpupoold.yaml to start it with (e.g. metering: {enabled: "
          "false})\n");
      return a == "--help" ? 0 : 2;
    }
  }
  DaemonProcess::Options daemon_options;
  daemon_options.secure = secure;
  if (!daemon_config.empty()) daemon_options.extra_args = {"--config", daemon_config};
  auto started = DaemonProcess::Start(daemon_options);
  if (!started.ok()) {
    std::fprintf(stderr, "cannot start gpupoold: %s\n", started.status().ToString().c_str());
    return 1;
  }
  DaemonProcess& daemon = **started;
  auto channel = daemon.AdminChannel();
  auto pools = v1::PoolService::NewStub(channel);
  auto nodes = v1::NodeService::NewStub(channel);
  auto stub = v1::JobService::NewStub(channel);
  {
    grpc::ClientContext ctx;
    v1::CreatePoolRequest req;
    req.mutable_pool()->set_name("bench");
    req.mutable_pool()->set_placement_strategy("first-fit");
    // Shared work needs a node that enforces the slice; the sandbox only where it is measured
    // (a pool requires it for shared work by default).
    req.mutable_pool()->add_required_capabilities("vram_cap");
    req.mutable_pool()->add_required_capabilities("compute_share");
    if (sandboxed) req.mutable_pool()->add_required_capabilities("sandbox");
    v1::Pool out;
    grpc::Status st = pools->CreatePool(&ctx, req, &out);
    if (!st.ok()) {
      std::fprintf(stderr, "create pool: %s\n", st.error_message().c_str());
      return 1;
    }
  }
  std::vector<std::unique_ptr<ChildProcess>> children;
  for (int i = 0; i < agents; ++i) {
    std::string node = "spinup-" + std::to_string(i);
    std::string dir = daemon.data_dir() + "/" + node;
    std::string config = dir + ".yaml";
    std::ofstream(config) << AgentConfig(node, sandboxed, i, daemon);
    auto child = ChildProcess::Spawn(
        {testing::BinaryPath("gpupool-agent"), "--config", config, "--scheduler",
         daemon.grpc_address(), "--data-dir", dir, "--log-level", "warn"},
        dir + ".log");
    if (!child.ok()) return 1;
    children.push_back(std::move(child).value());
  }
  bool registered = false;
  for (int i = 0; i < 300 && !registered; ++i) {
    grpc::ClientContext ctx;
    v1::ListNodesResponse resp;
    registered =
        nodes->ListNodes(&ctx, v1::ListNodesRequest{}, &resp).ok() && resp.nodes_size() == agents;
    if (!registered) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (!registered) {
    std::ifstream log(daemon.data_dir() + "/spinup-0.log");
    std::fprintf(stderr, "the agents did not register within 30 s; the first one's log:\n%s\n",
                 std::string(std::istreambuf_iterator<char>(log), {}).c_str());
    return 1;
  }

  v1::SubmitJobRequest req;
  v1::JobSpec* s = req.mutable_spec();
  s->set_tenant("bench/spinup/client");
  s->set_pool("bench");
  s->set_task_count(1);
  s->mutable_template_()->add_command("/bin/true");
  // A host CPU and memory request: the sandbox turns them into a CFS quota and a memory limit.
  s->mutable_template_()->mutable_resources()->set_cpu_milli(1000);
  s->mutable_template_()->mutable_resources()->set_memory_mib(512);
  auto* f = s->mutable_template_()->mutable_resources()->mutable_fractional();
  f->set_milli_tflops(10'000);
  f->set_vram_mib(1024);
  std::vector<std::string> ids;
  for (int i = 0; i < jobs; ++i) {
    grpc::ClientContext ctx;
    v1::SubmitJobResponse resp;
    grpc::Status st = stub->SubmitJob(&ctx, req, &resp);
    if (st.ok()) {
      ids.push_back(resp.job_id());
    } else if (i == 0) {
      std::fprintf(stderr, "submit: %s\n", st.error_message().c_str());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(gap_ms));
  }
  std::this_thread::sleep_for(std::chrono::seconds(2));
  std::vector<double> ms;
  int not_started = 0;
  for (const std::string& id : ids) {
    grpc::ClientContext ctx;
    v1::GetJobRequest get;
    get.set_job_id(id);
    v1::Job job;
    if (!stub->GetJob(&ctx, get, &job).ok() || job.tasks_size() == 0 ||
        !job.tasks(0).has_start_time()) {
      if (not_started++ == 0)  // why, once
        std::fprintf(stderr, "job %s not started: %s\n", id.c_str(), job.DebugString().c_str());
      continue;
    }
    ms.push_back(static_cast<double>(TimeUtil::DurationToMicroseconds(job.tasks(0).start_time() -
                                                                      job.submit_time())) /
                 1000.0);
  }
  std::sort(ms.begin(), ms.end());
  auto pct = [&](double p) {
    return ms.empty() ? 0.0
                      : ms[std::min(ms.size() - 1,
                                    static_cast<size_t>(p * static_cast<double>(ms.size())))];
  };
  std::printf("sandbox: %s\n", sandboxed ? "on" : "off");
  std::printf("%-8s %8s %8s %8s %8s %8s %12s\n", "agents", "jobs", "p50 ms", "p90 ms", "p99 ms",
              "max ms", "not started");
  std::printf("%-8d %8zu %8.2f %8.2f %8.2f %8.2f %12d\n", agents, ms.size(), pct(0.5), pct(0.9),
              pct(0.99), ms.empty() ? 0 : ms.back(), not_started);
  if (!json.empty()) {
    std::ofstream(json) << "{\"benchmark\":\"spinup\",\"sandbox\":"
                        << (sandboxed ? "true" : "false") << ",\"agents\":" << agents
                        << ",\"jobs\":" << ms.size() << ",\"p50_ms\":" << pct(0.5)
                        << ",\"p90_ms\":" << pct(0.9) << ",\"p99_ms\":" << pct(0.99)
                        << ",\"max_ms\":" << (ms.empty() ? 0 : ms.back())
                        << ",\"not_started\":" << not_started << "}\n";
  }
  for (auto& c : children) c->Signal(SIGTERM);
  for (auto& c : children) c->Wait(std::chrono::seconds(10));
  return not_started == 0 ? 0 : 1;
}

}  // namespace
}  // namespace gpupool

int main(int argc, char** argv) { return gpupool::Run(argc, argv); }
