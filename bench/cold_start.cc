// cold_start: submit → running of tasks from OCI images, against the same tasks as plain commands
// (issue 25, docs/benchmarks.md "Cold start").
//
// Starts a docker-registry on loopback, gpupoold (embedded PostgreSQL, fsync on) and one
// gpupool-agent with its sandbox and images on (simulated GPUs; needs root, runc, skopeo, umoci),
// and pushes test images built from local files (busybox-static plus --payload-mib of random
// bytes). Then --jobs rounds, each submitting, one after another and each once the previous one
// has started:
//   cold   a task of an image the node has never seen (every cold image is unique: its one layer
//          holds a distinct payload), so the pull from the registry is on the path;
//   warm   a task of one image the node pulled in a warm-up job before the rounds;
//   plain  the same program as a plain command: on this node, which runs containers, under runc
//          too, on the host's directories (one sandbox path, docs/sandbox.md);
//   unconfined the same plain command on a second node of another pool without the sandbox
//          (images and sandbox off: a bare process group), so the difference is what the
//          sandbox costs a start. (Before the one sandbox path this mode was "native", the
//          hand-written sandbox, which is gone.)
// Modes alternate within each round so all four see the same load. A task's latency is its
// start_time − its job's submit_time, both stamped by gpupoold (submission's durable commit,
// placement, durable allocation, StartTask, on the node: pull or not, bundle, runc, and the
// RUNNING report). Prints p50/p90/p99/max per mode and warm p50/p99 over plain's; --json FILE
// writes them.
#include <google/protobuf/util/time_util.h>
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <thread>

#include "gpupool/v1/jobs.grpc.pb.h"
#include "gpupool/v1/pools.grpc.pb.h"
#include "tests/agent/oci_registry.h"
#include "tests/support/daemon_process.h"
#include "tests/support/single_agent.h"

namespace gpupool {
namespace {

using google::protobuf::util::TimeUtil;
using testing::DaemonProcess;

double Pct(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

std::string RandomBytes(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::string s(n, '\0');
  for (size_t i = 0; i + 8 <= n; i += 8) {
    const uint64_t r = rng();
    std::memcpy(&s[i], &r, 8);
  }
  return s;
}

// The value of `key=` in an agent log line, or -1.
double Field(const std::string& line, const std::string& key) {
  const size_t at = line.find(" " + key + "=");
  return at == std::string::npos ? -1 : std::atof(line.c_str() + at + key.size() + 2);
}
std::string TextField(const std::string& line, const std::string& key) {
  const size_t at = line.find(" " + key + "=");
  if (at == std::string::npos) return "";
  const size_t from = at + key.size() + 2;
  return line.substr(from, line.find(' ', from) - from);
}

// submit → RUNNING of one job, in ms; -1 when it did not start within 120 s. `task` gets its
// first task's id.
double SubmitAndWait(v1::JobService::Stub& jobs, const v1::SubmitJobRequest& req,
                     std::string* task = nullptr) {
  grpc::ClientContext ctx;
  v1::SubmitJobResponse resp;
  grpc::Status st = jobs.SubmitJob(&ctx, req, &resp);
  if (!st.ok()) {
    std::fprintf(stderr, "submit: %s\n", st.error_message().c_str());
    return -1;
  }
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (std::chrono::steady_clock::now() < end) {
    grpc::ClientContext gctx;
    v1::GetJobRequest get;
    get.set_job_id(resp.job_id());
    v1::Job job;
    if (jobs.GetJob(&gctx, get, &job).ok() && job.tasks_size() > 0) {
      const v1::Task& t = job.tasks(0);
      if (task != nullptr) *task = t.id();
      if (t.has_start_time()) {
        return static_cast<double>(
                   TimeUtil::DurationToMicroseconds(t.start_time() - job.submit_time())) /
               1000.0;
      }
      if (t.state() == v1::TASK_STATE_FAILED) {
        std::fprintf(stderr, "job %s failed: %s\n", resp.job_id().c_str(), t.reason().c_str());
        return -1;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return -1;
}

int Run(int argc, char** argv) {
  int jobs = 30, payload_mib = 8;
  int64_t tag_ttl_ms = -1;  // -1: the agent's default
  std::string json;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string { return i + 1 < argc ? argv[++i] : "0"; };
    if (a == "--jobs") {
      jobs = std::stoi(value());
    } else if (a == "--payload-mib") {
      payload_mib = std::stoi(value());
    } else if (a == "--tag-ttl-ms") {
      tag_ttl_ms = std::stoll(value());
    } else if (a == "--json") {
      json = value();
    } else {
      std::printf(
          "usage: cold_start [--jobs N] [--payload-mib N] [--tag-ttl-ms N] [--json FILE]\n"
          "  --jobs N         rounds of cold, warm, plain and unconfined tasks (default 30)\n"
          "  --payload-mib N  random bytes in each test image besides busybox (default 8)\n"
          "  --tag-ttl-ms N   the agent's images.tag_ttl_ms (0: every pull asks the registry)\n"
          "needs root, runc, skopeo, umoci, docker-registry and busybox-static "
          "(scripts/install-deps)\n");
      return a == "--help" ? 0 : 2;
    }
  }
  if (geteuid() != 0) {
    std::fprintf(stderr, "cold_start needs root (the agent's sandbox and runc)\n");
    return 2;
  }
  testing::LocalRegistry registry;
  if (Status st = registry.Start(); !st.ok()) {
    std::fprintf(stderr, "registry: %s\n", st.ToString().c_str());
    return 1;
  }
  const std::string work = testing::MakeScratchDir("/tmp/gpupool-coldstart-");
  const size_t payload = static_cast<size_t>(payload_mib) << 20;
  auto push = [&](const std::string& repo, uint64_t seed) {
    testing::TestLayer layer = testing::BusyboxLayer();
    layer.files["/payload"] = RandomBytes(payload, seed);
    return testing::BuildAndPush(registry, work, repo, "1", {layer});
  };
  std::printf("pushing %d cold images and one warm image of %d MiB each…\n", jobs, payload_mib);
  for (int i = 0; i < jobs; ++i) {
    if (auto d = push("bench/cold-" + std::to_string(i), 1000 + i); !d.ok()) {
      std::fprintf(stderr, "push: %s\n", d.status().ToString().c_str());
      return 1;
    }
  }
  if (auto d = push("bench/warm", 1); !d.ok()) return 1;

  auto started = DaemonProcess::Start({});
  if (!started.ok()) {
    std::fprintf(stderr, "cannot start gpupoold: %s\n", started.status().ToString().c_str());
    return 1;
  }
  DaemonProcess& daemon = **started;
  if (Status st = daemon.CreatePool("bench-unconfined"); !st.ok()) {
    std::fprintf(stderr, "%s\n", st.ToString().c_str());
    return 1;
  }
  if (Status st = daemon.CreatePool("bench"); !st.ok()) {
    std::fprintf(stderr, "%s\n", st.ToString().c_str());
    return 1;
  }
  auto stub = v1::JobService::NewStub(
      grpc::CreateChannel(daemon.grpc_address(), grpc::InsecureChannelCredentials()));
  // One node, sandboxed, with images on (the loopback registry speaks plain HTTP).
  testing::SingleAgent agent(
      {.dir = daemon.data_dir(),
       .pool = "bench",
       .node = "coldstart-node",
       .gpus = 8,
       .health_poll_ms = 0,
       .extra_config =
           "sandbox:\n  enabled: true\n  cgroup_parent: gpupool-coldstart-" +
           std::to_string(getpid()) +
           "\n  uid_pool: {first: 65000, count: 1000}\nimages:\n  tls_verify: false\n" +
           (tag_ttl_ms >= 0 ? "  tag_ttl_ms: " + std::to_string(tag_ttl_ms) + "\n" : ""),
       .extra_args = {},
       .token_file = ""});
  agent.Connect(daemon.grpc_address());
  if (!agent.StartAndWaitReady()) {
    std::fprintf(stderr, "the agent did not register (log: %s/coldstart-node.log)\n",
                 daemon.data_dir().c_str());
    return 1;
  }
  const std::string log_path = daemon.data_dir() + "/coldstart-node.log";
  // The node without the sandbox: plain commands as bare process groups.
  testing::SingleAgent unconfined({.dir = daemon.data_dir(),
                                   .pool = "bench-unconfined",
                                   .node = "unconfined-node",
                                   .gpus = 8,
                                   .health_poll_ms = 0,
                                   .extra_config = "images:\n  enabled: false\n",
                                   .extra_args = {},
                                   .token_file = ""});
  unconfined.Connect(daemon.grpc_address());
  if (!unconfined.StartAndWaitReady()) {
    std::fprintf(stderr, "the unconfined agent did not register (log: %s/unconfined-node.log)\n",
                 daemon.data_dir().c_str());
    return 1;
  }

  auto job = [&](const std::string& image, const std::string& pool = "bench") {
    v1::SubmitJobRequest req;
    v1::JobSpec* s = req.mutable_spec();
    s->set_tenant("bench/coldstart/client");
    s->set_pool(pool);
    s->set_task_count(1);
    v1::TaskTemplate* t = s->mutable_template_();
    t->set_image(image);
    t->add_command("/bin/true");
    t->mutable_resources()->set_memory_mib(256);
    t->mutable_resources()->mutable_whole_gpus()->set_count(1);
    return req;
  };
  if (SubmitAndWait(*stub, job(registry.host() + "/bench/warm:1")) < 0) return 1;  // warm-up

  std::map<std::string, std::vector<double>> ms;
  std::map<std::string, std::string> mode_of;  // task id →
  int failed = 0;
  for (int i = 0; i < jobs; ++i) {
    for (const std::string mode : {"cold", "warm", "plain", "unconfined"}) {
      const std::string image = mode == "cold"
                                    ? registry.host() + "/bench/cold-" + std::to_string(i) + ":1"
                                : mode == "warm" ? registry.host() + "/bench/warm:1"
                                                 : "";
      std::string task;
      const double t = SubmitAndWait(
          *stub, job(image, mode == "unconfined" ? "bench-unconfined" : "bench"), &task);
      mode_of[task] = mode;
      if (t < 0) {
        ++failed;
      } else {
        ms[mode].push_back(t);
      }
    }
  }
  std::printf("%-6s %6s %8s %8s %8s %8s\n", "mode", "tasks", "p50 ms", "p90 ms", "p99 ms",
              "max ms");
  for (const std::string mode : {"cold", "warm", "plain", "unconfined"}) {
    const auto& v = ms[mode];
    std::printf("%-6s %6zu %8.1f %8.1f %8.1f %8.1f\n", mode.c_str(), v.size(), Pct(v, 0.5),
                Pct(v, 0.9), Pct(v, 0.99), Pct(v, 1.0));
  }
  // Where an image task's time goes on the node, from the agent's log: prepare (pull or cache
  // hit, uid, rootfs, bundle) and runtime (shim start to the container's program running).
  std::map<std::string, std::vector<double>> prepare, runtime;
  std::ifstream log(log_path);
  for (std::string line; std::getline(log, line);) {
    auto mode = mode_of.find(TextField(line, "task"));
    if (mode == mode_of.end()) continue;
    if (const double v = Field(line, "prepare_ms"); v >= 0) prepare[mode->second].push_back(v);
    if (const double v = Field(line, "runtime_ms"); v >= 0) runtime[mode->second].push_back(v);
  }
  for (const std::string mode : {"cold", "warm"}) {
    std::printf(
        "%-6s on the node: prepare p50 %.1f ms, runtime (runc create + start) p50 %.1f ms\n",
        mode.c_str(), Pct(prepare[mode], 0.5), Pct(runtime[mode], 0.5));
  }
  const double p50 = Pct(ms["warm"], 0.5) / std::max(1e-9, Pct(ms["plain"], 0.5));
  const double p99 = Pct(ms["warm"], 0.99) / std::max(1e-9, Pct(ms["plain"], 0.99));
  std::printf("warm / plain: p50 %.2fx, p99 %.2fx; failed %d\n", p50, p99, failed);
  std::printf("warm / unconfined: p50 %.2fx, p99 %.2fx\n",
              Pct(ms["warm"], 0.5) / std::max(1e-9, Pct(ms["unconfined"], 0.5)),
              Pct(ms["warm"], 0.99) / std::max(1e-9, Pct(ms["unconfined"], 0.99)));
  if (!json.empty()) {
    std::ofstream out(json);
    out << "{\"benchmark\":\"cold_start\",\"payload_mib\":" << payload_mib;
    for (const std::string mode : {"cold", "warm", "plain", "unconfined"}) {
      const auto& v = ms[mode];
      out << ",\"" << mode << "\":{\"tasks\":" << v.size() << ",\"p50_ms\":" << Pct(v, 0.5)
          << ",\"p90_ms\":" << Pct(v, 0.9) << ",\"p99_ms\":" << Pct(v, 0.99)
          << ",\"max_ms\":" << Pct(v, 1.0) << "}";
    }
    out << ",\"warm_over_plain_p50\":" << p50 << ",\"warm_over_plain_p99\":" << p99
        << ",\"failed\":" << failed << "}\n";
  }
  agent.Stop();
  unconfined.Stop();
  std::error_code ec;
  std::filesystem::remove_all(work, ec);
  return failed == 0 ? 0 : 1;
}

}  // namespace
}  // namespace gpupool

int main(int argc, char** argv) { return gpupool::Run(argc, argv); }
