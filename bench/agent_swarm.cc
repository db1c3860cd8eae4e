// agent_swarm: N simulated agents (default 1000) from one process against a scheduler, for scale
// tests. Every agent is a full gpupool Agent with a simulated backend; they share a few threads
// and one TCP connection per --per-channel agents (see agent/sim_fleet.h).
//
//   agent_swarm --scheduler 127.0.0.1:7070 --agents 1000 --duration-s 30 [--json out.json]
//   agent_swarm --loopback --agents 1000 --duration-s 10     # against an in-process stub server
//
// Prints a table (time until every agent's Register is written and acknowledged, heartbeat rate)
// and, with --json, writes the same numbers. Usage and flags: docs/agent.md.
#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>

#include "agent/config.h"
#include "agent/sim_fleet.h"
#include "base/log.h"
#include "gpupool/v1/agent.grpc.pb.h"

namespace {

using namespace gpupool;
using namespace gpupool::agent;
using Clock = std::chrono::steady_clock;

constexpr const char* kUsage = R"(usage: agent_swarm [flags]
  --scheduler ADDR     scheduler agent endpoint (default 127.0.0.1:7070)
  --loopback           start an in-process stub AgentService and use it instead
  --agents N           number of simulated agents (default 1000)
  --prefix P           node name prefix (default "swarm-")
  --pool NAME          pool (repeat for round-robin over several pools; default "default")
  --token T            node token
  --gpus YAML          GPU layout, e.g. '[{model: H100-SXM, count: 8}]' (default 8×H100-SXM)
  --catalog FILE       catalog YAML for model numbers
  --heartbeat-ms MS    heartbeat interval (default 2000)
  --duration-s S       how long to stay connected after registration (default 10)
  --threads N          io threads (default 2)
  --per-channel N      agents per TCP connection (default 100)
  --data-dir DIR       task directories (default /tmp/gpupool-swarm)
  --json FILE          write the results as JSON
)";

// An in-process AgentService on the callback API: acknowledges Register, counts messages.
class StubService final : public v1::AgentService::CallbackService {
 public:
  std::atomic<int64_t> registers{0}, heartbeats{0}, others{0};

  grpc::ServerBidiReactor<v1::AgentMessage, v1::SchedulerMessage>* Connect(
      grpc::CallbackServerContext* /*ctx*/) override {
    return new Reactor(this);
  }

 private:
  class Reactor final : public grpc::ServerBidiReactor<v1::AgentMessage, v1::SchedulerMessage> {
   public:
    explicit Reactor(StubService* s) : s_(s) { StartRead(&in_); }
    void OnReadDone(bool ok) override {
      if (!ok) return Finish(grpc::Status::OK);
      if (in_.has_register_()) {
        ++s_->registers;
        if (!acked_) {
          acked_ = true;
          out_.mutable_register_ack()->set_epoch(1);
          StartWrite(&out_);
        }
      } else if (in_.has_heartbeat()) {
        ++s_->heartbeats;
      } else {
        ++s_->others;
      }
      StartRead(&in_);
    }
    void OnWriteDone(bool) override {}
    void OnDone() override { delete this; }

   private:
    StubService* s_;
    v1::AgentMessage in_;
    v1::SchedulerMessage out_;
    bool acked_ = false;
  };
};

int CountThreads() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("Threads:", 0) == 0) return std::stoi(line.substr(8));
  }
  return -1;
}

struct Args {
  std::string scheduler = "127.0.0.1:7070";
  bool loopback = false;
  int agents = 1000;
  std::string prefix = "swarm-";
  std::vector<std::string> pools;
  std::string token, gpus = "[{model: H100-SXM, count: 8}]", catalog, json;
  int64_t heartbeat_ms = 2000;
  int duration_s = 10, threads = 2, per_channel = 100;
  std::string data_dir = "/tmp/gpupool-swarm";
};

bool Parse(int argc, char** argv, Args* a) {
  for (int i = 1; i < argc; ++i) {
    const std::string f = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::cerr << "agent_swarm: " << f << " needs a value\n";
        std::exit(2);
      }
      return argv[++i];
    };
    if (f == "--help" || f == "-h") {
      std::cout << kUsage;
      std::exit(0);
    } else if (f == "--scheduler") {
      a->scheduler = next();
    } else if (f == "--loopback") {
      a->loopback = true;
    } else if (f == "--agents") {
      a->agents = std::stoi(next());
    } else if (f == "--prefix") {
      a->prefix = next();
    } else if (f == "--pool") {
      a->pools.push_back(next());
    } else if (f == "--token") {
      a->token = next();
    } else if (f == "--gpus") {
      a->gpus = next();
    } else if (f == "--catalog") {
      a->catalog = next();
    } else if (f == "--heartbeat-ms") {
      a->heartbeat_ms = std::stoll(next());
    } else if (f == "--duration-s") {
      a->duration_s = std::stoi(next());
    } else if (f == "--threads") {
      a->threads = std::stoi(next());
    } else if (f == "--per-channel") {
      a->per_channel = std::stoi(next());
    } else if (f == "--data-dir") {
      a->data_dir = next();
    } else if (f == "--json") {
      a->json = next();
    } else {
      std::cerr << "agent_swarm: unknown flag " << f << "\n" << kUsage;
      return false;
    }
  }
  return a->agents > 0;
}

int Run(int argc, char** argv) {
  Args a;
  if (!Parse(argc, argv, &a)) return 2;
  SetLogLevel(LogLevel::kWarn);

  StubService stub;
  std::unique_ptr<grpc::Server> server;
  if (a.loopback) {
    int port = 0;
    grpc::ServerBuilder b;
    b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    b.RegisterService(&stub);
    server = b.BuildAndStart();
    a.scheduler = "127.0.0.1:" + std::to_string(port);
  }

  std::ostringstream yaml;
  if (!a.catalog.empty()) yaml << "catalog: " << a.catalog << "\n";
  yaml << "gpus: " << a.gpus << "\n";
  auto base = ParseAgentConfig(yaml.str(), "--gpus");
  if (!base.ok()) {
    std::cerr << "agent_swarm: " << base.status().message() << "\n";
    return 2;
  }
  SimFleetOptions o;
  o.base = *base;
  o.base.scheduler = a.scheduler;
  o.base.token = a.token;
  o.base.heartbeat_interval_ms = a.heartbeat_ms;
  o.base.data_dir = a.data_dir;
  o.base.pool = a.pools.empty() ? "default" : a.pools[0];
  o.pools = a.pools;
  o.agents = a.agents;
  o.name_prefix = a.prefix;
  o.threads = a.threads;
  o.agents_per_channel = a.per_channel;
  std::filesystem::create_directories(a.data_dir);

  SimFleet fleet(o);
  const auto t0 = Clock::now();
  if (Status st = fleet.Start(); !st.ok()) {
    std::cerr << "agent_swarm: " << st.message() << "\n";
    return 3;
  }
  const auto start_returned = Clock::now();
  double connected_ms = -1, registered_ms = -1;
  const auto give_up = t0 + std::chrono::seconds(60);
  while (Clock::now() < give_up) {
    const FleetStats s = fleet.stats();
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    if (connected_ms < 0 && s.connected == a.agents) connected_ms = ms;
    if (registered_ms < 0 && s.registered == a.agents) registered_ms = ms;
    if (registered_ms >= 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  const FleetStats before = fleet.stats();
  const auto window_start = Clock::now();
  std::this_thread::sleep_for(std::chrono::seconds(a.duration_s));
  const FleetStats after = fleet.stats();
  const int threads_running = CountThreads();
  const double window_s = std::chrono::duration<double>(Clock::now() - window_start).count();
  const double hb_rate = static_cast<double>(after.heartbeats - before.heartbeats) / window_s;
  const auto shutdown_start = Clock::now();
  fleet.Shutdown(false);
  const double shutdown_ms =
      std::chrono::duration<double, std::milli>(Clock::now() - shutdown_start).count();
  const double start_ms = std::chrono::duration<double, std::milli>(start_returned - t0).count();
  const int channels = (a.agents + a.per_channel - 1) / a.per_channel;
  // RegisterAck may set another interval than --heartbeat-ms.
  const int64_t interval_ms =
      after.heartbeat_interval_ms > 0 ? after.heartbeat_interval_ms : a.heartbeat_ms;
  const double expected_rate = a.agents * 1000.0 / static_cast<double>(interval_ms);

  std::printf("agent_swarm: %d simulated agents, %d connections, %d io threads → %s%s\n", a.agents,
              channels, a.threads, a.scheduler.c_str(), a.loopback ? " (loopback stub)" : "");
  std::printf("| metric | value |\n|---|---|\n");
  std::printf("| Start() returned (create + start all agents) | %.1f ms |\n", start_ms);
  auto ms_or = [](double ms) {
    if (ms < 0) return std::string("not reached in 60 s");
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.1f ms", ms);
    return std::string(buf);
  };
  std::printf("| all Registers written | %s |\n", ms_or(connected_ms).c_str());
  std::printf("| all RegisterAcks received | %s |\n", ms_or(registered_ms).c_str());
  std::printf("| process threads (all agents connected) | %d |\n", threads_running);
  std::printf("| connected / registered at end | %d / %d |\n", after.connected, after.registered);
  std::printf("| heartbeats/s (expected %.0f) | %.1f |\n", expected_rate, hb_rate);
  std::printf("| registrations (reconnects show here) | %lld |\n",
              static_cast<long long>(after.registrations));
  std::printf("| shutdown | %.1f ms |\n", shutdown_ms);
  if (a.loopback) {
    std::printf("| stub server: registers / heartbeats | %lld / %lld |\n",
                static_cast<long long>(stub.registers.load()),
                static_cast<long long>(stub.heartbeats.load()));
  }
  if (!a.json.empty()) {
    std::ofstream j(a.json);
    j << "{\"bench\":\"agent_swarm\",\"agents\":" << a.agents << ",\"connections\":" << channels
      << ",\"threads\":" << a.threads << ",\"heartbeat_ms\":" << a.heartbeat_ms
      << ",\"start_ms\":" << start_ms << ",\"all_connected_ms\":" << connected_ms
      << ",\"all_registered_ms\":" << registered_ms << ",\"connected_end\":" << after.connected
      << ",\"registered_end\":" << after.registered << ",\"heartbeats_per_s\":" << hb_rate
      << ",\"expected_heartbeats_per_s\":" << expected_rate
      << ",\"registrations\":" << after.registrations << ",\"process_threads\":" << threads_running
      << ",\"shutdown_ms\":" << shutdown_ms << ",\"loopback\":" << (a.loopback ? "true" : "false")
      << "}\n";
  }
  if (server) server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  return registered_ms < 0 && a.loopback ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) { return Run(argc, argv); }
