// service_cold_start: a service's scale from zero, as its first caller sees it — from the request
// sent to the gateway to its answer (issue 26, docs/benchmarks.md "Services: scale from zero").
//
// Starts a docker-registry on loopback, gpupoold (embedded PostgreSQL, fsync on) with its
// gateway, and one gpupool-agent with its sandbox, images and isolated networks on (simulated
// GPUs; needs root, runc, skopeo, umoci, iptables), its published ports advertised at the host's
// address. Each round creates, per mode, a new service at zero replicas, sends one GET through
// the gateway — which holds it while the autoscaler asks for a replica, the scheduler places it,
// the node starts it and the gateway's readiness probe passes — and times the answer; then deletes
// the service and waits for its replica to end. Modes, alternated within a round:
//   image     busybox httpd from an image the node has already pulled (a warm node);
//   cold      the same from an image the node has never seen (unique per round: the pull is on
//             the path);
//   command   busybox httpd as a plain command (under runc on the host's directories).
// Prints p50/p90/max per mode; --json FILE writes every sample.
//   build/bench/service_cold_start [--rounds 5] [--json FILE]
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "gpupool/v1/jobs.grpc.pb.h"
#include "gpupool/v1/pools.grpc.pb.h"
#include "gpupool/v1/services.grpc.pb.h"
#include "tests/agent/net_fixture.h"
#include "tests/agent/oci_registry.h"
#include "tests/api/http_client.h"
#include "tests/support/daemon_process.h"
#include "tests/support/free_port.h"
#include "tests/support/single_agent.h"

namespace gpupool {
namespace {

using Clock = std::chrono::steady_clock;
using testing::DaemonProcess;
namespace http = boost::beast::http;

constexpr char kTenant[] = "bench/services";
// The replica: an index page for readiness and for the request timed; the work dir (a plain
// command's) or the image's root (an image's) is writable.
constexpr char kServer[] =
    "mkdir -p www && echo ready > www/index.html && exec busybox httpd -f -p 8080 -h www";

double Pct(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

int Fail(const std::string& what) {
  std::fprintf(stderr, "service_cold_start: %s\n", what.c_str());
  return 1;
}

int Run(int argc, char** argv) {
  int rounds = 5;
  std::string json;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--rounds" && i + 1 < argc) {
      rounds = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--json" && i + 1 < argc) {
      json = argv[++i];
    } else {
      std::fprintf(stderr, "usage: service_cold_start [--rounds N] [--json FILE]\n");
      return a == "--help" ? 0 : 2;
    }
  }
  if (geteuid() != 0) return Fail("needs root (the agent's sandbox, runc and NAT)");
  const std::string address = agent::testing::NodeAddress(agent::net::Cidr{0, 32});
  if (address.empty()) return Fail("this host has no non-loopback IPv4 address");
  testing::LocalRegistry registry;
  if (Status st = registry.Start(); !st.ok()) return Fail("registry: " + st.ToString());
  const std::string work = testing::MakeScratchDir("/tmp/gpupool-service-cold-");
  std::printf("pushing %d cold images and one warm image…\n", rounds);
  auto push = [&](const std::string& repo, const std::string& marker) {
    testing::TestLayer mark;
    mark.files["/etc/marker"] = marker + "\n";  // a layer of its own: a digest of its own
    return testing::BuildAndPush(registry, work, repo, "1", {testing::BusyboxLayer(), mark});
  };
  for (int i = 0; i < rounds; ++i) {
    if (auto d = push("bench/cold-" + std::to_string(i), "cold " + std::to_string(i)); !d.ok()) {
      return Fail("push: " + d.status().ToString());
    }
  }
  if (auto d = push("bench/warm", "warm"); !d.ok()) return Fail("push: " + d.status().ToString());

  const int gateway_port = testing::FreePort();
  auto started = DaemonProcess::Start(
      {.data_dir = "",
       .extra_args = {"--gateway-listen", "127.0.0.1:" + std::to_string(gateway_port)}});
  if (!started.ok()) return Fail("cannot start gpupoold: " + started.status().ToString());
  DaemonProcess& daemon = **started;
  if (Status st = daemon.CreatePool("bench"); !st.ok()) return Fail(st.ToString());
  auto channel = grpc::CreateChannel(daemon.grpc_address(), grpc::InsecureChannelCredentials());
  {
    auto pools = v1::PoolService::NewStub(channel);
    grpc::ClientContext ctx;
    v1::UpdatePoolRequest req;
    req.mutable_pool()->set_name("bench");
    req.mutable_pool()->set_network(v1::NETWORK_MODE_ISOLATED);
    req.mutable_update_mask()->add_paths("network");
    v1::Pool out;
    if (grpc::Status st = pools->UpdatePool(&ctx, req, &out); !st.ok()) {
      return Fail("pool network: " + st.error_message());
    }
  }
  auto services = v1::ServiceService::NewStub(channel);
  auto jobs = v1::JobService::NewStub(channel);
  testing::SingleAgent agent(
      {.dir = daemon.data_dir(),
       .pool = "bench",
       .node = "service-node",
       .gpus = 4,
       .health_poll_ms = 0,
       .extra_config = "sandbox:\n  enabled: true\n  cgroup_parent: gpupool-service-cold-" +
                       std::to_string(getpid()) +
                       "\n  uid_pool: {first: 66000, count: 1000}\nimages:\n  tls_verify: false\n"
                       "network:\n  isolated: true\n  subnet: 10.219.0.0/24\n"
                       "  dns: [198.51.100.53]\n  advertise: " +
                       address + "\n",
       .extra_args = {},
       .token_file = ""});
  agent.Connect(daemon.grpc_address());
  if (!agent.StartAndWaitReady()) {
    return Fail("the agent did not register (log: " + daemon.data_dir() + "/service-node.log)");
  }

  // One scale from zero: the service created, one GET timed, the service deleted and its
  // replica gone. Milliseconds, or < 0 on failure.
  int serial = 0;
  auto once = [&](const std::string& image) -> double {
    const std::string name = "cold-" + std::to_string(++serial);
    v1::Service svc;
    svc.set_name(name);
    svc.set_tenant(kTenant);
    svc.set_pool("bench");
    v1::TaskTemplate* t = svc.mutable_template_();
    if (!image.empty()) t->set_image(image);
    for (const char* a : {"/bin/busybox", "sh", "-c", kServer}) t->add_command(a);
    t->mutable_resources()->set_memory_mib(256);
    t->mutable_resources()->mutable_whole_gpus()->set_count(1);
    t->add_ports()->set_port(8080);
    svc.set_port(8080);
    svc.set_readiness_path("/index.html");
    svc.set_max_replicas(1);
    v1::Service created;
    {
      grpc::ClientContext ctx;
      v1::CreateServiceRequest req;
      *req.mutable_service() = svc;
      if (grpc::Status st = services->CreateService(&ctx, req, &created); !st.ok()) {
        std::fprintf(stderr, "create: %s\n", st.error_message().c_str());
        return -1;
      }
    }
    // The gateway reads the directory every 200 ms: a request before it knows the service is a
    // 404, not a cold start.
    std::this_thread::sleep_for(std::chrono::milliseconds(400));
    const Clock::time_point t0 = Clock::now();
    api::testing::HttpResult r;
    try {
      api::testing::HttpClient c(gateway_port);
      r = c.Send(http::verb::get, std::string("/services/") + kTenant + "/" + name + "/");
    } catch (const std::exception& e) {
      std::fprintf(stderr, "request: %s\n", e.what());
    }
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    if (r.status != 200 || r.body != "ready\n") {
      std::fprintf(stderr, "%s answered %d: %s\n", name.c_str(), r.status, r.body.c_str());
    }
    {
      grpc::ClientContext ctx;
      v1::DeleteServiceRequest req;
      req.set_tenant(kTenant);
      req.set_name(name);
      v1::DeleteServiceResponse resp;
      if (grpc::Status st = services->DeleteService(&ctx, req, &resp); !st.ok()) {
        std::fprintf(stderr, "delete: %s\n", st.error_message().c_str());
        return -1;
      }
    }
    // Its replica ends (cancelled) before the next round starts on a quiet node.
    for (int i = 0; i < 600; ++i) {
      grpc::ClientContext ctx;
      v1::ListJobsRequest req;
      req.set_tenant(kTenant);
      v1::ListJobsResponse resp;
      bool live = false;
      if (jobs->ListJobs(&ctx, req, &resp).ok()) {
        for (const v1::Job& j : resp.jobs()) {
          live =
              live || (j.service_id() == created.id() && j.state() != v1::JOB_STATE_SUCCEEDED &&
                       j.state() != v1::JOB_STATE_FAILED && j.state() != v1::JOB_STATE_CANCELLED);
        }
      }
      if (!live) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return r.status == 200 ? ms : -1;
  };

  // A warm-up: the node pulls the warm image, and every path runs once.
  if (once(registry.host() + "/bench/warm:1") < 0 || once("") < 0) return Fail("warm-up failed");
  std::map<std::string, std::vector<double>> ms;
  int failed = 0;
  for (int i = 0; i < rounds; ++i) {
    for (const std::string mode : {"image", "cold", "command"}) {
      const std::string image = mode == "image" ? registry.host() + "/bench/warm:1"
                                : mode == "cold"
                                    ? registry.host() + "/bench/cold-" + std::to_string(i) + ":1"
                                    : "";
      const double t = once(image);
      if (t < 0) {
        ++failed;
      } else {
        ms[mode].push_back(t);
      }
    }
  }
  std::printf("%-8s %7s %8s %8s %8s\n", "mode", "samples", "p50 ms", "p90 ms", "max ms");
  for (const std::string mode : {"image", "cold", "command"}) {
    const auto& v = ms[mode];
    std::printf("%-8s %7zu %8.1f %8.1f %8.1f\n", mode.c_str(), v.size(), Pct(v, 0.5), Pct(v, 0.9),
                Pct(v, 1.0));
  }
  if (!json.empty()) {
    std::ofstream f(json);
    f << "{\"rounds\":" << rounds << ",\"failed\":" << failed << ",\"ms\":{";
    bool first = true;
    for (const auto& [mode, v] : ms) {
      f << (first ? "" : ",") << "\"" << mode << "\":[";
      for (size_t i = 0; i < v.size(); ++i) f << (i ? "," : "") << v[i];
      f << "]";
      first = false;
    }
    f << "}}\n";
  }
  std::filesystem::remove_all(work);
  return failed == 0 ? 0 : 1;
}

}  // namespace
}  // namespace gpupool

int main(int argc, char** argv) { return gpupool::Run(argc, argv); }
