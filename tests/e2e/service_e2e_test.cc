// Issue 26 end to end: a service of small HTTP servers behind gpupoold's gateway, with real
// processes throughout — gpupoold (embedded PostgreSQL) with its gateway on, a sandboxed
// gpupool-agent with three simulated GPUs running every replica under runc in an isolated
// network (its port published on the node), a loopback registry holding the replicas' image, and
// HTTP clients that load the service through the gateway. Shown: the service scales 0 → 3 under
// load and back to 0 after its idle period; no request is lost while replicas start (held, then
// served) nor when a replica is killed mid-load (GETs are retried on another); a higher-priority
// job preempts a replica and the service says why it is below its desired count. Root only (the
// sandbox, runc and the node's NAT need it); skips saying why elsewhere.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gpupool/v1/jobs.grpc.pb.h"
#include "gpupool/v1/pools.grpc.pb.h"
#include "gpupool/v1/services.grpc.pb.h"
#include "tests/agent/net_fixture.h"
#include "tests/agent/oci_registry.h"
#include "tests/agent/sandbox_fixture.h"
#include "tests/api/http_client.h"
#include "tests/support/daemon_process.h"
#include "tests/support/free_port.h"
#include "tests/support/single_agent.h"
#include "tests/support/wait_for.h"

namespace gpupool {
namespace {

using testing::DaemonProcess;
using namespace std::chrono_literals;
namespace http = boost::beast::http;

constexpr char kTenant[] = "acme/e2e/tester";
constexpr char kPath[] = "/services/acme/e2e/tester/web/cgi-bin/slow";

bool WaitFor(const std::function<bool()>& done, std::chrono::seconds timeout) {
  return ::gpupool::testing::WaitFor(done, timeout, std::chrono::milliseconds(100));
}

// The replicas' server: busybox httpd on 8080, /index.html for readiness and a CGI that takes
// 300 ms per request, so that a few clients keep several requests in flight. Its header lines end
// in CRLF as HTTP requires (a bare LF is refused by the gateway's parser as a bad value).
constexpr char kServer[] =
    "mkdir -p /tmp/www/cgi-bin && echo ready > /tmp/www/index.html && "
    "printf '#!/bin/sh\\nsleep 0.3\\nprintf \"Content-Type: "
    "text/plain\\\\r\\\\n\\\\r\\\\nslow\\\\n\"\\n' "
    "> /tmp/www/cgi-bin/slow && busybox chmod 755 /tmp/www/cgi-bin/slow && "
    "exec busybox httpd -f -p 8080 -h /tmp/www";

constexpr char kDaemonConfig[] = R"(scheduler:
  default_priority_class: low
priority_classes:
  - {name: low, value: 0}
  - {name: high, value: 1000, may_preempt: true}
)";

// Clients that GET the service in a loop, each on a keep-alive connection to the gateway (a new
// one after the gateway closes it), until stopped; every answer is counted by its status.
class Load {
 public:
  Load(int gateway_port, int clients) {
    for (int i = 0; i < clients; ++i) {
      threads_.emplace_back([this, gateway_port] { Client(gateway_port); });
    }
  }
  ~Load() { Stop(); }
  void Stop() {
    stop_ = true;
    for (std::thread& t : threads_) t.join();
    threads_.clear();
  }
  // "200: 812" lines, and "errors: N" for requests that got no answer at all.
  std::string Summary() {
    std::lock_guard lock(mu_);
    std::ostringstream out;
    for (const auto& [status, n] : statuses_) out << status << ": " << n << "\n";
    out << "errors: " << errors_ << " (" << last_error_ << ")\n";
    return out.str();
  }
  int64_t Count(int status) {
    std::lock_guard lock(mu_);
    return statuses_[status];
  }
  int64_t Failed() {
    std::lock_guard lock(mu_);
    int64_t n = errors_;
    for (const auto& [status, count] : statuses_) n += status == 200 ? 0 : count;
    return n;
  }

 private:
  void Client(int port) {
    while (!stop_) {
      try {
        api::testing::HttpClient c(port);
        while (!stop_) {
          api::testing::HttpResult r = c.Send(http::verb::get, kPath);
          std::lock_guard lock(mu_);
          ++statuses_[r.body == "slow\n" || r.status != 200 ? r.status : -200];
          if (!r.keep_alive) break;
        }
      } catch (const std::exception& e) {
        std::lock_guard lock(mu_);
        ++errors_;
        last_error_ = e.what();
      }
    }
  }

  std::atomic<bool> stop_{false};
  std::vector<std::thread> threads_;
  std::mutex mu_;
  std::map<int, int64_t> statuses_;  // -200: a 200 whose body was not the replica's
  int64_t errors_ = 0;
  std::string last_error_;
};

// The host pids of the replicas' servers: busybox httpd on 8080, pid 1 of its container (the
// sandbox gives each container its own pid namespace).
std::vector<pid_t> ReplicaServers() {
  std::string expected;
  for (const char* word : {"busybox", "httpd", "-f", "-p", "8080", "-h", "/tmp/www"}) {
    expected += word;
    expected.push_back('\0');
  }
  std::vector<pid_t> out;
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    const std::string name = e.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(e.path() / "cmdline");
    std::string cmdline((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (cmdline != expected) continue;
    // httpd forks a child per connection with the same command line: the server is the one
    // that is pid 1 of its container ("NSpid: <host pid> 1").
    std::ifstream status(e.path() / "status");
    for (std::string line; std::getline(status, line);) {
      if (line.starts_with("NSpid:") && line.ends_with("\t1")) {
        out.push_back(static_cast<pid_t>(std::stol(name)));
      }
    }
  }
  return out;
}

class ServiceE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Root, a memory cgroup controller, runc, skopeo and umoci.
    if (std::string why = agent::testing::CannotRunContainers(); !why.empty()) GTEST_SKIP() << why;
    Status st = registry_.Start();
    if (!st.ok()) GTEST_SKIP() << "no local registry: " << st.message();
    address_ = agent::testing::NodeAddress(agent::net::Cidr{0, 32});
    if (address_.empty()) GTEST_SKIP() << "this host has no non-loopback IPv4 address";
    Result<std::string> dir = testing::MakeTempDir("gpupool-service-e2e");
    ASSERT_TRUE(dir.ok());
    dir_ = *dir;
    auto digest = testing::BuildAndPush(registry_, dir_ + "/build", "test/web", "1",
                                        {testing::BusyboxLayer()});
    ASSERT_TRUE(digest.ok()) << digest.status().ToString();
    std::ofstream(dir_ + "/gpupoold.yaml") << kDaemonConfig;
    gateway_port_ = testing::FreePort();
    auto d = DaemonProcess::Start(
        {.data_dir = "",
         .extra_args = {"--config", dir_ + "/gpupoold.yaml", "--gateway-listen",
                        "127.0.0.1:" + std::to_string(gateway_port_)},
         .secure = false});
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    daemon_ = std::move(d).value();
    auto channel = grpc::CreateChannel(daemon_->grpc_address(), grpc::InsecureChannelCredentials());
    jobs_ = v1::JobService::NewStub(channel);
    services_ = v1::ServiceService::NewStub(channel);
    ASSERT_TRUE(daemon_->CreatePool("gpu").ok());
    {
      // The replicas' network: their own, outbound only, their port published on the node.
      auto pools = v1::PoolService::NewStub(channel);
      grpc::ClientContext ctx;
      v1::UpdatePoolRequest req;
      req.mutable_pool()->set_name("gpu");
      req.mutable_pool()->set_network(v1::NETWORK_MODE_ISOLATED);
      req.mutable_update_mask()->add_paths("network");
      v1::Pool out;
      grpc::Status updated = pools->UpdatePool(&ctx, req, &out);
      ASSERT_TRUE(updated.ok()) << updated.error_message();
    }
    testing::SingleAgent::Options o;
    o.dir = dir_;
    o.gpus = 3;
    o.extra_config = "sandbox:\n  enabled: true\n  cgroup_parent: gpupool-service-e2e-" +
                     std::to_string(getpid()) +
                     "\n  uid_pool: {first: 64000, count: 100}\n"
                     "images:\n  tls_verify: false\n"
                     // Replicas' ports published on the node, reached at its address.
                     "network:\n  isolated: true\n  subnet: 10.218.0.0/24\n"
                     "  dns: [198.51.100.53]\n  advertise: " +
                     address_ + "\n";
    agent_ = std::make_unique<testing::SingleAgent>(std::move(o));
    agent_->Connect(daemon_->grpc_address());
    ASSERT_TRUE(agent_->StartAndWaitReady());
  }

  void TearDown() override {
    agent_.reset();
    daemon_.reset();
    if (!HasFailure() && !dir_.empty()) std::filesystem::remove_all(dir_);
  }

  v1::Service Get() {
    grpc::ClientContext ctx;
    v1::GetServiceRequest req;
    req.set_tenant(kTenant);
    req.set_name("web");
    v1::Service out;
    grpc::Status st = services_->GetService(&ctx, req, &out);
    EXPECT_TRUE(st.ok()) << st.error_message();
    return out;
  }
  grpc::Status Update(const v1::Service& svc) {
    grpc::ClientContext ctx;
    v1::UpdateServiceRequest req;
    *req.mutable_service() = svc;
    v1::Service out;
    return services_->UpdateService(&ctx, req, &out);
  }

  testing::LocalRegistry registry_;
  std::string address_;
  std::string dir_;
  int gateway_port_ = 0;
  std::unique_ptr<DaemonProcess> daemon_;
  std::unique_ptr<testing::SingleAgent> agent_;
  std::unique_ptr<v1::JobService::Stub> jobs_;
  std::unique_ptr<v1::ServiceService::Stub> services_;
};

TEST_F(ServiceE2eTest, ScalesFromZeroUnderLoadLosesNoRequestAndSaysWhyItIsShort) {
  v1::Service svc;
  svc.set_name("web");
  svc.set_tenant(kTenant);
  svc.set_pool("gpu");
  svc.set_priority_class("low");
  svc.set_preemptible(true);
  v1::TaskTemplate* t = svc.mutable_template_();
  t->set_image(registry_.host() + "/test/web:1");
  for (const char* a : {"/bin/sh", "-c", kServer}) t->add_command(a);
  t->mutable_resources()->mutable_whole_gpus()->set_count(1);
  v1::Port* port = t->add_ports();
  port->set_port(8080);
  port->set_name("http");
  svc.set_port(8080);
  svc.set_readiness_path("/index.html");
  svc.set_min_replicas(0);
  svc.set_max_replicas(3);
  svc.set_target_in_flight(1);
  svc.mutable_idle()->set_seconds(10);
  {
    grpc::ClientContext ctx;
    v1::CreateServiceRequest req;
    *req.mutable_service() = svc;
    v1::Service out;
    grpc::Status st = services_->CreateService(&ctx, req, &out);
    ASSERT_TRUE(st.ok()) << st.error_message();
  }
  EXPECT_EQ(Get().status().desired(), 0);
  EXPECT_EQ(Get().status().replicas_size(), 0);

  // The gateway reads the services every 200 ms: until then the new one is unknown to it (404).
  std::this_thread::sleep_for(500ms);
  // 0 → 3 under six clients: the first requests are held while the replicas start.
  Load load(gateway_port_, 6);
  v1::Service seen;
  ASSERT_TRUE(WaitFor(
      [&] {
        seen = Get();
        return seen.status().ready() == 3;
      },
      120s))
      << seen.DebugString() << load.Summary();
  EXPECT_EQ(seen.status().desired(), 3);
  // The held requests' wait is reported once the first of them is answered.
  EXPECT_TRUE(WaitFor(
      [&] {
        seen = Get();
        return seen.status().cold_starts() >= 1 && seen.status().has_last_cold_start();
      },
      10s))
      << seen.DebugString();
  // Serving through all three.
  const int64_t served_before = load.Count(200);
  ASSERT_TRUE(WaitFor([&] { return load.Count(200) >= served_before + 30; }, 30s))
      << load.Summary();

  // One replica's server killed mid-load: its requests go to the others, it is replaced.
  std::vector<pid_t> servers = ReplicaServers();
  ASSERT_EQ(servers.size(), 3u) << "replica servers found on the host";
  ASSERT_EQ(::kill(servers[0], SIGKILL), 0);
  std::set<std::string> before;
  for (const auto& r : seen.status().replicas()) before.insert(r.job_id());
  ASSERT_TRUE(WaitFor(
      [&] {
        seen = Get();
        int replaced = 0;
        for (const auto& r : seen.status().replicas()) replaced += !before.contains(r.job_id());
        return replaced >= 1 && seen.status().ready() == 3;
      },
      120s))
      << seen.DebugString() << load.Summary();
  const int64_t served_after = load.Count(200);
  ASSERT_TRUE(WaitFor([&] { return load.Count(200) >= served_after + 30; }, 30s)) << load.Summary();
  load.Stop();
  EXPECT_EQ(load.Failed(), 0) << load.Summary();
  EXPECT_GE(load.Count(200), 60) << load.Summary();  // the two waits above
  std::cout << "load through the gateway:\n" << load.Summary();

  // Idle for its period: back to zero.
  ASSERT_TRUE(WaitFor(
      [&] {
        seen = Get();
        return seen.status().desired() == 0 && seen.status().replicas_size() == 0;
      },
      90s))
      << seen.DebugString();
  EXPECT_TRUE(WaitFor([&] { return ReplicaServers().empty(); }, 30s));

  // Held at three, then a higher class takes a GPU: a replica is preempted and the service says
  // so.
  svc = Get();
  svc.set_min_replicas(3);
  ASSERT_TRUE(Update(svc).ok());
  ASSERT_TRUE(WaitFor(
      [&] {
        seen = Get();
        return seen.status().ready() == 3;
      },
      120s))
      << seen.DebugString();
  testing::ShellJob high;
  high.script = "sleep 600";
  high.tenant = "globex/prod";
  high.priority_class = "high";
  const std::string high_id = agent_->Submit(high);
  ASSERT_FALSE(high_id.empty());
  ASSERT_TRUE(WaitFor(
      [&] {
        seen = Get();
        return seen.status().below_code() == "PREEMPTED";
      },
      120s))
      << seen.DebugString();
  EXPECT_NE(seen.status().below_reason().find("2 of 3 replicas ready"), std::string::npos)
      << seen.DebugString();
  EXPECT_NE(seen.status().below_reason().find("preempted"), std::string::npos)
      << seen.DebugString();
  // The job runs once its victim has stopped.
  EXPECT_TRUE(WaitFor([&] { return agent_->Task(high_id).state() == v1::TASK_STATE_RUNNING; }, 60s))
      << agent_->Task(high_id).DebugString();

  grpc::ClientContext ctx;
  v1::DeleteServiceRequest del;
  del.set_tenant(kTenant);
  del.set_name("web");
  v1::DeleteServiceResponse gone;
  EXPECT_TRUE(services_->DeleteService(&ctx, del, &gone).ok());
}

}  // namespace
}  // namespace gpupool
