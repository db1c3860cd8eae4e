// The twin places as gpupoold does: a short workload runs through the twin (simulated clock,
// in-memory store, simulated agents) and through a real gpupoold on embedded PostgreSQL with real
// gpupool-agent processes (simulated GPUs), and both give the same placements (node and devices
// of every task) and the same order of starts.
//
// The twin goes first and gives the timeline: arrivals, and each task's end at its start plus
// its duration. The test then plays that timeline on the daemon one event at a time — a
// submission over gRPC, or an end: the task's process waits for a file, which the test creates —
// and after each event waits until the daemon's running set (SCHEDULED or RUNNING tasks with
// their node and devices) is the twin's at that moment; a different decision never converges and
// fails with both sets printed. Wall time does not matter: only the order of events does. One
// tenant and one priority class, so fair share's time-decayed usage (wall time on one side,
// simulated on the other) cannot order the queue differently.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "gpupool/v1/jobs.grpc.pb.h"
#include "gpupool/v1/pools.grpc.pb.h"
#include "tests/support/agent_process.h"
#include "tests/support/daemon_process.h"
#include "tests/support/wait_for.h"
#include "twin/twin.h"

namespace gpupool {
namespace {

using testing::ChildProcess;
using testing::DaemonProcess;

constexpr char kTenant[] = "acme/e2e/tester";

// Where each task holds devices: task name → "node:dev1,dev2".
using Placements = std::map<std::string, std::string>;

std::string Describe(const Placements& p) {
  std::string out;
  for (const auto& [k, v] : p) out += "  " + k + " → " + v + "\n";
  return out.empty() ? "  (none)\n" : out;
}

class DaemonConsistencyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Result<std::string> dir = testing::MakeTempDir("gpupool-twin-e2e");
    ASSERT_TRUE(dir.ok());
    dir_ = *dir;
    std::ofstream(dir_ + "/gpupoold.yaml")
        << "scheduler:\n  heartbeat_interval_ms: 200\n  heartbeat_timeout_ms: 20000\n  "
           "node_lease_ms: 20000\n"
           "  stop_grace_period_ms: 1000\n";
    auto d =
        DaemonProcess::Start({.data_dir = "", .extra_args = {"--config", dir_ + "/gpupoold.yaml"}});
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    daemon_ = std::move(d).value();
    auto channel = daemon_->Channel();
    jobs_ = v1::JobService::NewStub(channel);
    nodes_ = v1::NodeService::NewStub(channel);
    ASSERT_TRUE(daemon_->CreatePool("gpu").ok());
  }

  void TearDown() override {
    std::filesystem::create_directories(dir_ + "/done");
    for (const auto& [name, _] : job_ids_) std::ofstream(dir_ + "/done/" + name) << "";
    for (auto& agent : agents_) {
      agent->Signal(SIGTERM);
      agent->Wait(std::chrono::seconds(10));
    }
    agents_.clear();
    daemon_.reset();
    if (!HasFailure()) std::filesystem::remove_all(dir_);
  }

  void StartAgent(const std::string& node, int gpus) {
    testing::AgentProcessOptions o;
    o.dir = dir_;
    o.node = node;
    o.scheduler = daemon_->grpc_address();
    o.gpus = gpus;
    auto child = testing::StartAgentProcess(o);
    ASSERT_TRUE(child.ok());
    agents_.push_back(std::move(child).value());
    ASSERT_TRUE(testing::WaitFor([&] { return Node(node).state() == v1::NODE_STATE_READY; },
                                 std::chrono::seconds(60)))
        << "agent " << node << " did not register";
  }

  v1::Node Node(const std::string& name) {
    grpc::ClientContext ctx;
    v1::ListNodesResponse resp;
    if (!nodes_->ListNodes(&ctx, v1::ListNodesRequest{}, &resp).ok()) return {};
    for (const v1::Node& n : resp.nodes())
      if (n.name() == name) return n;
    return {};
  }

  // The twin's node for a registered agent: same name, CPU, memory and device ids.
  twin::TwinNode TwinNodeOf(const std::string& name, Resources* gpu) {
    v1::Node n = Node(name);
    twin::TwinNode t{name, n.cpu_milli(), n.memory_mib(), n.devices_size(), "", {}};
    for (const v1::Device& d : n.devices()) {
      t.device_ids.push_back(d.id());
      t.model = d.model();
      *gpu = Resources{d.capacity().physical().milli_tflops(), d.capacity().physical().vram_mib()};
    }
    return t;
  }

  void Submit(const twin::TwinTask& t, const Resources& gpu) {
    v1::SubmitJobRequest req;
    v1::JobSpec* s = req.mutable_spec();
    s->set_tenant(kTenant);
    s->set_pool("gpu");
    s->set_task_count(1);
    auto* tpl = s->mutable_template_();
    tpl->add_command("/bin/sh");
    tpl->add_command("-c");
    tpl->add_command("while [ ! -e " + dir_ + "/done/" + t.name + " ]; do sleep 0.05; done");
    auto* r = tpl->mutable_resources();
    r->set_cpu_milli(t.cpu_milli);
    r->set_memory_mib(t.memory_mib);
    ResourceRequest want = t.Request(gpu);
    if (want.shape == RequestShape::kFractional) {
      r->mutable_fractional()->set_milli_tflops(want.fractional.milli_tflops);
      r->mutable_fractional()->set_vram_mib(want.fractional.vram_mib);
    } else {
      r->mutable_whole_gpus()->set_count(want.gpu_count);
    }
    grpc::ClientContext ctx;
    v1::SubmitJobResponse resp;
    grpc::Status st = jobs_->SubmitJob(&ctx, req, &resp);
    ASSERT_TRUE(st.ok()) << st.error_message();
    job_ids_[t.name] = resp.job_id();
  }

  v1::Task TaskOf(const std::string& name) {
    grpc::ClientContext ctx;
    v1::GetJobRequest req;
    req.set_job_id(job_ids_[name]);
    v1::Job job;
    if (!jobs_->GetJob(&ctx, req, &job).ok() || job.tasks_size() == 0) return {};
    return job.tasks(0);
  }

  Placements DaemonRunning() {
    Placements p;
    for (const auto& [name, _] : job_ids_) {
      v1::Task t = TaskOf(name);
      if (t.state() != v1::TASK_STATE_SCHEDULED && t.state() != v1::TASK_STATE_RUNNING) continue;
      std::string where = t.node() + ":";
      for (int i = 0; i < t.allocations_size(); ++i)
        where += (i ? "," : "") + t.allocations(i).device_id();
      p[name] = where;
    }
    return p;
  }

  std::string dir_;
  std::unique_ptr<DaemonProcess> daemon_;
  std::vector<std::unique_ptr<ChildProcess>> agents_;
  std::unique_ptr<v1::JobService::Stub> jobs_;
  std::unique_ptr<v1::NodeService::Stub> nodes_;
  std::map<std::string, std::string> job_ids_;
};

TEST_F(DaemonConsistencyTest, TwinAndDaemonPlaceAndStartAlike) {
  StartAgent("node-a", 2);
  StartAgent("node-b", 2);
  twin::Workload w;
  w.name = "consistency";
  w.nodes = {TwinNodeOf("node-a", &w.gpu), TwinNodeOf("node-b", &w.gpu)};
  ASSERT_EQ(w.GpuCount(), 4);
  // Arrivals every 10 s.
  struct Spec {
    int32_t gpu_milli, num_gpu;
    double duration_s;
  };
  const Spec specs[] = {{1000, 1, 33}, {500, 1, 103}, {1000, 2, 43}, {250, 1, 93},
                        {1000, 1, 63}, {500, 1, 83},  {1000, 2, 23}, {750, 1, 53},
                        {1000, 1, 13}, {250, 1, 73},  {1000, 2, 33}, {500, 1, 43}};
  for (size_t i = 0; i < std::size(specs); ++i) {
    twin::TwinTask t;
    t.name = "t" + std::to_string(i);
    t.arrival_us = static_cast<int64_t>(i) * 10'000'000;
    // A distinct fraction of a second per task, so that no two ends (nor an end and an
    // arrival) coincide.
    t.duration_us = static_cast<int64_t>(specs[i].duration_s * 1e6) +
                    static_cast<int64_t>(137'000 * (i * i + 1) % 900'000) + 50'000;
    t.tenant = kTenant;
    t.priority_class = "normal";
    t.gpu_milli = specs[i].gpu_milli;
    t.num_gpu = specs[i].num_gpu;
    t.cpu_milli = 1000;
    t.memory_mib = 1024;
    w.tasks.push_back(t);
  }
  twin::OrgTree org;
  org.tenants = {{"acme", 0, 0, 0}, {"acme/e2e", 0, 0, 0}, {"acme/e2e/tester", 0, 0, 1}};
  twin::TwinConfig config;
  config.pool = "gpu";
  config.strategy = "";  // the pool names none: the daemon's default, as DaemonProcess creates it
  config.horizon_us = 1000'000'000;
  config.record_starts = true;
  Result<twin::TwinReport> r = twin::RunTwin(w, org, config);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->starts.size(), w.tasks.size()) << "every task should start once in the twin";

  // The timeline: arrivals and ends, and the twin's running set after each.
  struct Event {
    int64_t t_ms;
    bool arrival;
    size_t task;
  };
  std::vector<Event> events;
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < w.tasks.size(); ++i) {
    index[w.tasks[i].name] = i;
    events.push_back({w.tasks[i].arrival_us / 1000, true, i});
  }
  std::map<std::string, twin::StartLog> start_of;
  for (const twin::StartLog& s : r->starts) {
    start_of[s.task] = s;
    size_t i = index[s.task];
    events.push_back({std::llround(s.t_s * 1000) + w.tasks[i].duration_us / 1000, false, i});
  }
  std::sort(events.begin(), events.end(),
            [](const Event& a, const Event& b) { return a.t_ms < b.t_ms; });
  for (size_t i = 1; i < events.size(); ++i)
    ASSERT_NE(events[i].t_ms, events[i - 1].t_ms) << "two events at once: the order is ambiguous";
  auto twin_running = [&](int64_t t_ms) {
    Placements p;
    for (const auto& [name, s] : start_of) {
      int64_t start = std::llround(s.t_s * 1000);
      int64_t end = start + w.tasks[index[name]].duration_us / 1000;
      if (start > t_ms || end <= t_ms) continue;
      std::string where = s.node + ":";
      for (size_t k = 0; k < s.devices.size(); ++k) where += (k ? "," : "") + s.devices[k];
      p[name] = where;
    }
    return p;
  };

  std::filesystem::create_directories(dir_ + "/done");
  std::vector<std::set<std::string>> twin_order, daemon_order;
  Placements before;
  int waited_somewhere = 0;
  for (const Event& e : events) {
    const twin::TwinTask& t = w.tasks[e.task];
    if (e.arrival) {
      Submit(t, w.gpu);
    } else {
      std::ofstream(dir_ + "/done/" + t.name) << "";
      ASSERT_TRUE(
          testing::WaitFor([&] { return TaskOf(t.name).state() == v1::TASK_STATE_SUCCEEDED; },
                           std::chrono::seconds(60)))
          << t.name << " did not end";
    }
    const Placements want = twin_running(e.t_ms);
    Placements got;
    bool same = testing::WaitFor(
        [&] {
          got = DaemonRunning();
          return got == want;
        },
        std::chrono::seconds(60), std::chrono::milliseconds(50));
    ASSERT_TRUE(same) << "after " << (e.arrival ? "the arrival of " : "the end of ") << t.name
                      << " at " << e.t_ms / 1000.0 << " s\ntwin:\n"
                      << Describe(want) << "daemon:\n"
                      << Describe(got);
    std::set<std::string> started_twin, started_daemon;
    for (const auto& [name, _] : want)
      if (!before.contains(name)) started_twin.insert(name);
    for (const auto& [name, _] : got)
      if (!before.contains(name)) started_daemon.insert(name);
    if (!e.arrival && !started_twin.empty()) ++waited_somewhere;
    twin_order.push_back(started_twin);
    daemon_order.push_back(started_daemon);
    before = got;
  }
  EXPECT_EQ(twin_order, daemon_order);
  // The workload is tight enough that some tasks queued and started on another's end.
  EXPECT_GT(waited_somewhere, 0);
}

}  // namespace
}  // namespace gpupool
