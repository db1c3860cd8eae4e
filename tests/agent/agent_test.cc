// The agent against a real gRPC server on loopback: a small AgentService implemented here that
// records what the agent sends and sends it commands. Real child processes run the tasks.
#include "agent/agent.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <thread>

#include "agent/images.h"
#include "agent/sim_backend.h"
#include "agent/sim_fleet.h"
#include "gpupool/v1/agent.grpc.pb.h"
#include "tests/agent/sandbox_fixture.h"
#include "tests/support/wait_for.h"

namespace gpupool::agent {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

// Records every AgentMessage; answers Register with a RegisterAck when auto_ack is on.
class FakeScheduler final : public v1::AgentService::Service {
 public:
  grpc::Status Connect(
      grpc::ServerContext* /*ctx*/,
      grpc::ServerReaderWriter<v1::SchedulerMessage, v1::AgentMessage>* stream) override {
    {
      std::lock_guard lock(mu_);
      streams_.push_back(stream);
      ++connections_;
    }
    v1::AgentMessage m;
    while (stream->Read(&m)) {
      std::lock_guard lock(mu_);
      messages_.push_back({steady_clock::now(), m});
      if (m.has_register_() && auto_ack_) {
        v1::SchedulerMessage ack;
        ack.mutable_register_ack()->set_epoch(epoch_);
        for (const auto& id : stop_on_register_) ack.mutable_register_ack()->add_stop_task_ids(id);
        stream->Write(ack);
      }
      cv_.notify_all();
    }
    std::lock_guard lock(mu_);
    streams_.erase(std::find(streams_.begin(), streams_.end(), stream));
    cv_.notify_all();
    return grpc::Status::OK;
  }

  bool Send(const v1::SchedulerMessage& m) {
    std::lock_guard lock(mu_);
    if (streams_.empty()) return false;
    return streams_.back()->Write(m);
  }

  // Waits until pred(messages) holds; returns false after the timeout.
  using Pred = std::function<bool(const std::vector<v1::AgentMessage>&)>;
  bool WaitFor(const Pred& pred, milliseconds timeout = milliseconds(10'000)) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return pred(Messages()); });
  }

  std::vector<v1::AgentMessage> Snapshot() {
    std::lock_guard lock(mu_);
    return Messages();
  }
  std::vector<steady_clock::time_point> HeartbeatTimes() {
    std::lock_guard lock(mu_);
    std::vector<steady_clock::time_point> out;
    for (const auto& [t, m] : messages_) {
      if (m.has_heartbeat()) out.push_back(t);
    }
    return out;
  }
  int connections() {
    std::lock_guard lock(mu_);
    return connections_;
  }
  void set_epoch(int64_t e) {
    std::lock_guard lock(mu_);
    epoch_ = e;
  }
  void set_stop_on_register(std::vector<std::string> ids) {
    std::lock_guard lock(mu_);
    stop_on_register_ = std::move(ids);
  }

 private:
  std::vector<v1::AgentMessage> Messages() const {
    std::vector<v1::AgentMessage> out;
    for (const auto& [t, m] : messages_) out.push_back(m);
    return out;
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::pair<steady_clock::time_point, v1::AgentMessage>> messages_;
  std::vector<grpc::ServerReaderWriter<v1::SchedulerMessage, v1::AgentMessage>*> streams_;
  int connections_ = 0;
  int64_t epoch_ = 5;
  bool auto_ack_ = true;
  std::vector<std::string> stop_on_register_;
};

// A gRPC server on 127.0.0.1 that can be stopped and started again on the same port.
class Server {
 public:
  explicit Server(FakeScheduler* service) : service_(service) { Start(0); }
  ~Server() { Stop(); }
  void Start(int port) {
    grpc::ServerBuilder b;
    b.AddListeningPort("127.0.0.1:" + std::to_string(port), grpc::InsecureServerCredentials(),
                       &port_);
    b.RegisterService(service_);
    server_ = b.BuildAndStart();
    ASSERT_NE(server_, nullptr);
  }
  void Restart() { Start(port_); }
  void Stop() {
    if (server_) server_->Shutdown(std::chrono::system_clock::now() + milliseconds(100));
    server_.reset();
  }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

 private:
  FakeScheduler* service_;
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
};

// gRPC 1.51 creates its callback completion queue when the first channel makes a callback call
// and destroys it when the last such channel goes; tests that create and drop channels back to
// back can race that teardown (an abort in grpc_cq_internal_unref). Production agents keep their
// channel for the process's life; the tests do the same with one channel that made one call.
class KeepCallbackQueue final : public ::testing::Environment {
 public:
  void SetUp() override {
    channel_ = grpc::CreateChannel("127.0.0.1:1", grpc::InsecureChannelCredentials());
    stub_ = v1::AgentService::NewStub(channel_);
    probe_ = std::make_unique<Probe>(stub_.get());
    probe_->done.get_future().wait();  // destroyed only at exit, long after OnDone returned
  }

 private:
  struct Probe final : grpc::ClientBidiReactor<v1::AgentMessage, v1::SchedulerMessage> {
    explicit Probe(v1::AgentService::Stub* stub) {
      stub->async()->Connect(&ctx, this);
      StartCall();
    }
    void OnDone(const grpc::Status&) override { done.set_value(); }
    grpc::ClientContext ctx;
    std::promise<void> done;
  };
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::AgentService::Stub> stub_;
  std::unique_ptr<Probe> probe_;
};
const auto* const kKeepCallbackQueue = ::testing::AddGlobalTestEnvironment(new KeepCallbackQueue);

int Count(const std::vector<v1::AgentMessage>& ms, v1::AgentMessage::MsgCase c) {
  return static_cast<int>(
      std::count_if(ms.begin(), ms.end(), [&](const auto& m) { return m.msg_case() == c; }));
}

// The last update for a task in a given state (a copy), or nullopt.
std::optional<v1::TaskUpdate> FindUpdate(const std::vector<v1::AgentMessage>& ms,
                                         const std::string& id, v1::TaskState state) {
  std::optional<v1::TaskUpdate> found;
  for (const auto& m : ms) {
    if (m.has_task_update() && m.task_update().task_id() == id &&
        m.task_update().state() == state) {
      found = m.task_update();
    }
  }
  return found;
}

class AgentStreamTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gpupool-agent-stream-XXXXXX";
    dir_ = mkdtemp(tmpl);
    server_ = std::make_unique<Server>(&service_);
    work_.emplace(io_.get_executor());
    for (int i = 0; i < 2; ++i) threads_.emplace_back([this] { io_.run(); });
    TaskRunnerOptions ro;
    ro.data_dir = dir_;
    ro.default_grace_ms = 300;
    runner_ = std::make_unique<TaskRunner>(ro);
    auto c = ParseAgentConfig(R"(node_name: node-a
pool: public
labels: {zone: a}
token: tok-1
cpu_milli: 32000
memory_mib: 262144
spill_budget_mib: 4096
heartbeat_interval_ms: 50
stop_grace_period_ms: 300
reconnect: {initial_ms: 50, max_ms: 200}
gpus:
  - {model: H100-SXM, count: 2, mig: {"1": [3g.40gb, 3g.40gb]}}
  - {model: L4, count: 1}
)",
                              "test.yaml");
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    config_ = *c;
    config_.scheduler = server_->address();
    config_.data_dir = dir_;
    ASSERT_TRUE(ValidateAgentConfig(&config_).ok());
    backend_ = std::make_unique<SimulatedBackend>("node-a", config_.sim, config_.models);
  }

  void StartAgent() {
    agent_ = std::make_unique<Agent>(config_, backend_.get(), runner_.get(),
                                     MakeAgentChannel(config_), io_);
    ASSERT_TRUE(agent_->Start().ok());
    ASSERT_TRUE(service_.WaitFor(
        [](const auto& ms) { return Count(ms, v1::AgentMessage::kRegister) >= 1; }));
  }

  void TearDown() override {
    if (agent_) agent_->Shutdown(false);
    agent_.reset();
    runner_.reset();
    server_.reset();
    work_.reset();
    io_.stop();
    for (auto& t : threads_) t.join();
    std::filesystem::remove_all(dir_);
  }

  v1::SchedulerMessage StartMsg(const std::string& id, const std::string& script,
                                int64_t epoch = 5) {
    v1::SchedulerMessage m;
    v1::StartTask* s = m.mutable_start_task();
    s->set_task_id(id);
    s->set_job_id("job-1");
    s->set_tenant("acme");
    s->set_attempt(1);
    s->add_argv("/bin/sh");
    s->add_argv("-c");
    s->add_argv(script);
    s->set_epoch(epoch);
    v1::DeviceGrant* g = s->add_devices();
    g->set_uuid("GPU-sim-node-a-0");
    g->set_milli_tflops(247'375);  // a quarter of 989500 → 25%
    g->set_vram_mib(20'480);
    return m;
  }

  v1::SchedulerMessage StopMsg(const std::string& id, int64_t epoch = 5) {
    v1::SchedulerMessage m;
    m.mutable_stop_task()->set_task_id(id);
    m.mutable_stop_task()->set_attempt(1);
    m.mutable_stop_task()->set_grace_period_ms(200);
    m.mutable_stop_task()->set_reason("cancelled by user");
    m.mutable_stop_task()->set_epoch(epoch);
    return m;
  }

  bool WaitUpdate(const std::string& id, v1::TaskState state) {
    return service_.WaitFor([&](const auto& ms) { return FindUpdate(ms, id, state).has_value(); });
  }

  std::string dir_;
  FakeScheduler service_;
  std::unique_ptr<Server> server_;
  boost::asio::io_context io_;
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work_;
  std::vector<std::thread> threads_;
  std::unique_ptr<TaskRunner> runner_;
  AgentConfig config_;
  std::unique_ptr<SimulatedBackend> backend_;
  std::unique_ptr<Agent> agent_;
};

TEST_F(AgentStreamTest, RegisterCarriesNodeDevicesAndLinks) {
  StartAgent();
  const auto ms = service_.Snapshot();
  ASSERT_TRUE(ms[0].has_register_());  // the first message on the stream
  const v1::Register& r = ms[0].register_();
  EXPECT_EQ(r.node_name(), "node-a");
  EXPECT_EQ(r.pool(), "public");
  EXPECT_EQ(r.labels().at("zone"), "a");
  EXPECT_EQ(r.token(), "tok-1");
  EXPECT_EQ(r.cpu_milli(), 32000);
  EXPECT_EQ(r.memory_mib(), 262144);
  EXPECT_EQ(r.spill_budget_mib(), 4096);
  EXPECT_EQ(r.backend(), "simulated");
  EXPECT_EQ(r.agent_version(), kAgentVersion);
  EXPECT_EQ(r.running_tasks_size(), 0);
  // No sandbox configured: said so, not pretended.
  ASSERT_GE(r.capabilities_size(), 1);
  EXPECT_EQ(r.capabilities(0).name(), "sandbox");
  EXPECT_FALSE(r.capabilities(0).enforced());
  EXPECT_NE(r.capabilities(0).detail().find("sandbox.enabled: false"), std::string::npos);
  // GPU 0, GPU 1 + its two 3g.40gb instances, the L4 (index 2).
  ASSERT_EQ(r.devices_size(), 5);
  EXPECT_EQ(r.devices(0).uuid(), "GPU-sim-node-a-0");
  EXPECT_EQ(r.devices(0).milli_tflops(), 989'500);
  EXPECT_EQ(r.devices(2).uuid(), "MIG-sim-node-a-1-0");
  EXPECT_EQ(r.devices(2).parent_uuid(), "GPU-sim-node-a-1");
  EXPECT_EQ(r.devices(2).mig_profile(), "3g.40gb");
  EXPECT_EQ(r.devices(4).model(), "L4");
  EXPECT_EQ(r.devices(4).index(), 2);
  // Mixed models → auto topology is pcie-pairs: 3 GPUs → 3 links.
  EXPECT_EQ(r.links_size(), 3);
  ASSERT_TRUE(service_.WaitFor([](const auto&) { return true; }));
  for (int i = 0; i < 100 && !agent_->stats().registered; ++i)
    std::this_thread::sleep_for(milliseconds(10));
  EXPECT_TRUE(agent_->stats().registered);
  EXPECT_EQ(agent_->stats().epoch, 5);
}

// The whole path with a sandbox: StartTask's CPU/memory and device grant reach the task's
// container (the simulated backend's fake /dev/nvidia* files, mknod'ed; only the granted one is
// made in it), the TaskUpdate carries the usage, Register the capabilities.
TEST_F(AgentStreamTest, SandboxedTaskOverTheStream) {
  if (const std::string why = testing::CannotRunContainers(); !why.empty()) GTEST_SKIP() << why;
  char dev_tmpl[] = "/run/gpupool-agent-dev-XXXXXX";
  const std::string dev_dir = mkdtemp(dev_tmpl);
  chmod(dev_dir.c_str(), 0755);
  config_.sim.device_dir = dev_dir + "/dev";
  config_.sandbox.enabled = true;
  config_.sandbox.cgroup_parent = "gpupool-agent-test-" + std::to_string(getpid());
  config_.sandbox.uid_pool_first = 62000;
  config_.sandbox.uid_pool_count = 10;
  backend_ = std::make_unique<SimulatedBackend>("node-a", config_.sim, config_.models);
  auto box = sandbox::Sandbox::Create(config_.sandbox);
  ASSERT_TRUE(box.ok()) << box.status().ToString();
  ImageOptions io;
  io.shim = GPUPOOL_OCI_SHIM;
  auto containers = OpenContainers(io, *box, dir_, "");
  ASSERT_TRUE(containers.ok()) << containers.status().ToString();
  runner_.reset();
  TaskRunnerOptions ro;
  ro.data_dir = dir_;
  ro.default_grace_ms = 300;
  ro.sandbox = *box;
  ro.containers = *containers;
  runner_ = std::make_unique<TaskRunner>(ro);
  StartAgent();
  const v1::Register r = service_.Snapshot()[0].register_();
  std::map<std::string, bool> caps;
  for (const auto& c : r.capabilities()) caps[c.name()] = c.enforced();
  EXPECT_TRUE(caps["sandbox"]);
  EXPECT_TRUE(caps["memory"]);
  EXPECT_TRUE(caps["devices"]);
  EXPECT_TRUE(caps["images"]);
  EXPECT_FALSE(caps["mps"]);

  v1::SchedulerMessage m =
      StartMsg("s1", "exec 2>&1; cat /proc/self/uid_map; cat " + config_.sim.device_dir +
                         "/nvidia1; cat " + config_.sim.device_dir + "/nvidia0; cat " +
                         config_.sim.device_dir + "/nvidia-uvm; true");
  m.mutable_start_task()->set_cpu_milli(1000);
  m.mutable_start_task()->set_memory_mib(128);
  ASSERT_TRUE(service_.Send(m));
  ASSERT_TRUE(WaitUpdate("s1", v1::TASK_STATE_SUCCEEDED));
  const auto done = FindUpdate(service_.Snapshot(), "s1", v1::TASK_STATE_SUCCEEDED);
  const std::string& out = done->output_tail();
  EXPECT_NE(out.find("62000"), std::string::npos) << out;  // root inside is 62000 outside
  EXPECT_NE(out.find("nvidia1: No such file or directory"), std::string::npos) << out;
  EXPECT_NE(out.find("nvidia0: No such device or address"), std::string::npos) << out;
  EXPECT_NE(out.find("nvidia-uvm: No such device or address"), std::string::npos) << out;
  EXPECT_GT(done->cpu_usage_us(), 0);
  EXPECT_GT(done->peak_memory_bytes(), 0);
  EXPECT_EQ(done->oom_kills(), 0);
  agent_->Shutdown(false);
  agent_.reset();
  runner_.reset();
  testing::RemoveCgroupParent(config_.sandbox.cgroup_parent + "-containers");
  std::filesystem::remove_all(dev_dir);
}

TEST_F(AgentStreamTest, HeartbeatsAtTheConfiguredInterval) {
  StartAgent();
  ASSERT_TRUE(service_.WaitFor(
      [](const auto& ms) { return Count(ms, v1::AgentMessage::kHeartbeat) >= 6; }));
  const auto times = service_.HeartbeatTimes();
  // Each heartbeat is scheduled 50 ms after the previous one was, so the agent never sends more
  // than one per 50 ms; receive jitter can bunch the first or last one (+2). No upper bound on
  // the gaps: a slow machine only sends fewer.
  const auto span = std::chrono::duration_cast<milliseconds>(times.back() - times.front());
  EXPECT_LE(static_cast<int64_t>(times.size()) - 1, span.count() / 50 + 2)
      << times.size() << " heartbeats in " << span.count() << " ms";
  const auto ms = service_.Snapshot();
  const v1::Heartbeat* hb = nullptr;
  for (const auto& m : ms) {
    if (m.has_heartbeat()) hb = &m.heartbeat();
  }
  ASSERT_NE(hb, nullptr);
  EXPECT_EQ(hb->devices_size(), 5);
  EXPECT_EQ(hb->devices(0).uuid(), "GPU-sim-node-a-0");
}

TEST_F(AgentStreamTest, StartTaskRunsAndReportsOutput) {
  StartAgent();
  ASSERT_TRUE(service_.Send(StartMsg(
      "t1",
      "echo visible=$CUDA_VISIBLE_DEVICES pct=$CUDA_MPS_ACTIVE_THREAD_PERCENTAGE; sleep 0.2")));
  ASSERT_TRUE(WaitUpdate("t1", v1::TASK_STATE_RUNNING));
  ASSERT_TRUE(WaitUpdate("t1", v1::TASK_STATE_SUCCEEDED));
  const auto ms = service_.Snapshot();
  const auto running = FindUpdate(ms, "t1", v1::TASK_STATE_RUNNING);
  EXPECT_EQ(running->attempt(), 1);
  EXPECT_EQ(running->epoch(), 5);
  const auto done = FindUpdate(ms, "t1", v1::TASK_STATE_SUCCEEDED);
  EXPECT_EQ(done->exit_code(), 0);
  // thread percentage: ceil(247375 × 100 / 989500) = 25.
  EXPECT_EQ(done->output_tail(), "visible=GPU-sim-node-a-0 pct=25\n");
  // While it ran, heartbeats listed it (the agent's view of its running tasks).
  ASSERT_TRUE(service_.Send(StartMsg("t1", "echo again")));  // a repeat: re-reported, not re-run
  ASSERT_TRUE(service_.WaitFor([](const auto& ms2) {
    int n = 0;
    for (const auto& m : ms2) {
      n += m.has_task_update() && m.task_update().task_id() == "t1" &&
           m.task_update().state() == v1::TASK_STATE_SUCCEEDED;
    }
    return n >= 2;
  }));
  EXPECT_EQ(FindUpdate(service_.Snapshot(), "t1", v1::TASK_STATE_SUCCEEDED)->output_tail(),
            "visible=GPU-sim-node-a-0 pct=25\n");
}

TEST_F(AgentStreamTest, FailedExitCodePropagates) {
  StartAgent();
  ASSERT_TRUE(service_.Send(StartMsg("t2", "echo boom >&2; exit 42")));
  ASSERT_TRUE(WaitUpdate("t2", v1::TASK_STATE_FAILED));
  const auto u = FindUpdate(service_.Snapshot(), "t2", v1::TASK_STATE_FAILED);
  EXPECT_EQ(u->exit_code(), 42);
  EXPECT_EQ(u->reason(), "exit code 42");
  EXPECT_EQ(u->output_tail(), "boom\n");
}

TEST_F(AgentStreamTest, StopTaskCancelsIt) {
  StartAgent();
  ASSERT_TRUE(service_.Send(StartMsg("t3", "exec sleep 30")));
  ASSERT_TRUE(WaitUpdate("t3", v1::TASK_STATE_RUNNING));
  ASSERT_TRUE(service_.Send(StopMsg("t3")));
  ASSERT_TRUE(WaitUpdate("t3", v1::TASK_STATE_CANCELLED));
  const auto u = FindUpdate(service_.Snapshot(), "t3", v1::TASK_STATE_CANCELLED);
  EXPECT_EQ(u->signal(), 15);
  EXPECT_EQ(u->reason(), "cancelled by user");
  // Stopping an unknown task reports it as not running here.
  ASSERT_TRUE(service_.Send(StopMsg("ghost")));
  ASSERT_TRUE(WaitUpdate("ghost", v1::TASK_STATE_CANCELLED));
  EXPECT_EQ(FindUpdate(service_.Snapshot(), "ghost", v1::TASK_STATE_CANCELLED)->reason(),
            "not running on this node");
}

TEST_F(AgentStreamTest, CommandsFromAnOlderEpochAreIgnored) {
  StartAgent();  // RegisterAck carries epoch 5
  for (int i = 0; i < 100 && agent_->stats().epoch != 5; ++i)
    std::this_thread::sleep_for(milliseconds(10));
  ASSERT_TRUE(service_.Send(StartMsg("old", "echo old", /*epoch=*/4)));
  ASSERT_TRUE(service_.Send(StartMsg("new", "echo new", /*epoch=*/6)));
  ASSERT_TRUE(WaitUpdate("new", v1::TASK_STATE_SUCCEEDED));
  // Now epoch 6 is the newest: a StopTask with epoch 5 is ignored too.
  ASSERT_TRUE(service_.Send(StartMsg("long", "exec sleep 30", 6)));
  ASSERT_TRUE(WaitUpdate("long", v1::TASK_STATE_RUNNING));
  ASSERT_TRUE(service_.Send(StopMsg("long", /*epoch=*/5)));
  std::this_thread::sleep_for(milliseconds(300));
  const auto ms = service_.Snapshot();
  for (const auto& m : ms) {
    EXPECT_FALSE(m.has_task_update() && m.task_update().task_id() == "old");
  }
  EXPECT_FALSE(FindUpdate(ms, "long", v1::TASK_STATE_CANCELLED).has_value());
  EXPECT_EQ(runner_->Get("long")->phase, TaskPhase::kRunning);
  EXPECT_EQ(agent_->stats().ignored_commands, 2);
  EXPECT_EQ(agent_->stats().epoch, 6);
}

TEST_F(AgentStreamTest, FetchLogsReturnsTheRequestedSlice) {
  StartAgent();
  ASSERT_TRUE(service_.Send(StartMsg("t4", "printf 'hello world\\n'")));
  ASSERT_TRUE(WaitUpdate("t4", v1::TASK_STATE_SUCCEEDED));
  v1::SchedulerMessage f;
  f.mutable_fetch_logs()->set_request_id("r1");
  f.mutable_fetch_logs()->set_task_id("t4");
  f.mutable_fetch_logs()->set_offset(6);
  f.mutable_fetch_logs()->set_max_bytes(100);
  ASSERT_TRUE(service_.Send(f));
  ASSERT_TRUE(
      service_.WaitFor([](const auto& ms) { return Count(ms, v1::AgentMessage::kLogChunk) >= 1; }));
  for (const auto& m : service_.Snapshot()) {
    if (!m.has_log_chunk()) continue;
    EXPECT_EQ(m.log_chunk().request_id(), "r1");
    EXPECT_EQ(m.log_chunk().offset(), 6);
    EXPECT_EQ(m.log_chunk().data(), "world\n");
    EXPECT_TRUE(m.log_chunk().eof());
    EXPECT_EQ(m.log_chunk().error(), "");
  }
}

TEST_F(AgentStreamTest, ReconnectsAfterSchedulerRestartWithRunningTasks) {
  StartAgent();
  ASSERT_TRUE(service_.Send(StartMsg("keep", "exec sleep 30")));
  ASSERT_TRUE(service_.Send(StartMsg("short", "sleep 0.3; echo finished")));
  ASSERT_TRUE(WaitUpdate("keep", v1::TASK_STATE_RUNNING));
  ASSERT_TRUE(WaitUpdate("short", v1::TASK_STATE_RUNNING));
  // The scheduler goes away; "short" ends while it is gone.
  server_->Stop();
  std::this_thread::sleep_for(milliseconds(700));
  EXPECT_EQ(runner_->Get("short")->phase, TaskPhase::kSucceeded);
  EXPECT_FALSE(agent_->stats().connected);
  const size_t before = service_.Snapshot().size();
  server_->Restart();
  ASSERT_TRUE(
      service_.WaitFor([](const auto& ms) { return Count(ms, v1::AgentMessage::kRegister) >= 2; }));
  // The second Register lists the task that kept running, with its pid.
  const auto ms = service_.Snapshot();
  const v1::Register* again = nullptr;
  for (size_t i = before; i < ms.size(); ++i) {
    if (ms[i].has_register_()) again = &ms[i].register_();
  }
  ASSERT_NE(again, nullptr);
  ASSERT_EQ(again->running_tasks_size(), 1);
  EXPECT_EQ(again->running_tasks(0).task_id(), "keep");
  EXPECT_EQ(again->running_tasks(0).pid(), runner_->Get("keep")->pid);
  EXPECT_EQ(runner_->Get("keep")->phase, TaskPhase::kRunning);  // never stopped
  // The update that happened while disconnected is delivered after reconnecting.
  ASSERT_TRUE(service_.WaitFor([&](const auto& all) {
    for (size_t i = before; i < all.size(); ++i) {
      if (all[i].has_task_update() && all[i].task_update().task_id() == "short" &&
          all[i].task_update().state() == v1::TASK_STATE_SUCCEEDED) {
        return true;
      }
    }
    return false;
  }));
  EXPECT_GE(service_.connections(), 2);
}

TEST_F(AgentStreamTest, FinalReportsAreResentAfterEveryReconnectWhileRetained) {
  StartAgent();
  ASSERT_TRUE(service_.Send(StartMsg("done", "echo finished")));
  ASSERT_TRUE(WaitUpdate("done", v1::TASK_STATE_SUCCEEDED));
  // Confirmed on this stream (two more heartbeats): no longer pending...
  ASSERT_TRUE(::gpupool::testing::WaitFor([&] { return agent_->stats().pending_updates == 0; },
                                          std::chrono::seconds(10)));
  // ...yet a scheduler that restarts (it may not have stored the report) hears it again, in
  // the Register itself, so it can apply it before reconciling the running tasks.
  const size_t before = service_.Snapshot().size();
  server_->Stop();
  server_->Restart();
  ASSERT_TRUE(service_.WaitFor([&](const auto& all) {
    for (size_t i = before; i < all.size(); ++i) {
      if (!all[i].has_register_()) continue;
      for (const v1::TaskUpdate& u : all[i].register_().finished_tasks()) {
        if (u.task_id() == "done" && u.state() == v1::TASK_STATE_SUCCEEDED) return true;
      }
    }
    return false;
  }));
}

TEST_F(AgentStreamTest, RegisterAckStopsTasksTheSchedulerDoesNotKnow) {
  StartAgent();
  ASSERT_TRUE(service_.Send(StartMsg("orphan", "exec sleep 30")));
  ASSERT_TRUE(WaitUpdate("orphan", v1::TASK_STATE_RUNNING));
  service_.set_stop_on_register({"orphan"});
  service_.set_epoch(6);  // a new leader
  server_->Stop();
  server_->Restart();
  ASSERT_TRUE(WaitUpdate("orphan", v1::TASK_STATE_CANCELLED));
  EXPECT_EQ(FindUpdate(service_.Snapshot(), "orphan", v1::TASK_STATE_CANCELLED)->reason(),
            "unknown to the scheduler");
}

TEST_F(AgentStreamTest, ShutdownWithStopTasksReportsThem) {
  StartAgent();
  ASSERT_TRUE(service_.Send(StartMsg("t5", "exec sleep 30")));
  ASSERT_TRUE(WaitUpdate("t5", v1::TASK_STATE_RUNNING));
  agent_->Shutdown(/*stop_tasks=*/true);
  EXPECT_EQ(runner_->Get("t5")->phase, TaskPhase::kCancelled);
  ASSERT_TRUE(WaitUpdate("t5", v1::TASK_STATE_CANCELLED));
  EXPECT_EQ(FindUpdate(service_.Snapshot(), "t5", v1::TASK_STATE_CANCELLED)->reason(),
            "agent shutting down");
}

TEST_F(AgentStreamTest, ShutdownWithoutStopLeavesTasksRunning) {
  StartAgent();
  ASSERT_TRUE(service_.Send(StartMsg("t6", "exec sleep 30")));
  ASSERT_TRUE(WaitUpdate("t6", v1::TASK_STATE_RUNNING));
  agent_->Shutdown(/*stop_tasks=*/false);
  EXPECT_EQ(runner_->Get("t6")->phase, TaskPhase::kRunning);
}

TEST_F(AgentStreamTest, ConnectsWhenTheSchedulerComesUpLater) {
  server_->Stop();
  agent_ = std::make_unique<Agent>(config_, backend_.get(), runner_.get(),
                                   MakeAgentChannel(config_), io_);
  ASSERT_TRUE(agent_->Start().ok());
  std::this_thread::sleep_for(milliseconds(300));  // a few failed attempts with backoff
  server_->Restart();
  ASSERT_TRUE(
      service_.WaitFor([](const auto& ms) { return Count(ms, v1::AgentMessage::kRegister) >= 1; }));
}

TEST(SimFleetTest, ManyAgentsRegisterOverFewConnections) {
  FakeScheduler service;
  Server server(&service);
  char tmpl[] = "/tmp/gpupool-fleet-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  SimFleetOptions o;
  auto c =
      ParseAgentConfig("gpus: [{model: L4, count: 4}]\nheartbeat_interval_ms: 200\n", "f.yaml");
  ASSERT_TRUE(c.ok());
  o.base = *c;
  o.base.scheduler = server.address();
  o.base.data_dir = dir;
  o.agents = 50;
  o.agents_per_channel = 20;
  o.pools = {"public", "private-a"};
  {
    SimFleet fleet(o);
    ASSERT_TRUE(fleet.Start().ok());
    ASSERT_TRUE(service.WaitFor(
        [](const auto& ms) { return Count(ms, v1::AgentMessage::kRegister) >= 50; }));
    std::set<std::string> names;
    for (const auto& m : service.Snapshot()) {
      if (m.has_register_()) names.insert(m.register_().node_name());
    }
    EXPECT_EQ(names.size(), 50u);
    EXPECT_TRUE(names.count("sim-00"));
    EXPECT_TRUE(names.count("sim-49"));
    for (int i = 0; i < 200 && fleet.stats().registered < 50; ++i)
      std::this_thread::sleep_for(milliseconds(10));
    EXPECT_EQ(fleet.stats().registered, 50);
    fleet.Shutdown(false);
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace gpupool::agent

namespace gpupool::agent {
namespace {

TEST(SimFleetTest, ExplicitHeterogeneousNodes) {
  FakeScheduler service;
  Server server(&service);
  char tmpl[] = "/tmp/gpupool-fleet-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  const Catalog& models = Catalog::Builtin();
  auto layout = [&](const std::string& yaml) { return *ParseSimLayout(yaml, models); };
  SimFleetOptions o;
  o.base.scheduler = server.address();
  o.base.data_dir = dir;
  o.base.pool = "public";
  o.nodes = {
      {"h100-a", "", layout("gpus: [{model: H100-SXM, count: 8}]"), {}},
      {"h100-mig",
       "",
       layout("gpus: [{model: H100-SXM, count: 8, mig: {\"0\": [3g.40gb, "
              "2g.20gb, 2g.20gb]}}]"),
       {{"mig", "true"}}},
      {"l4-a", "private-a", layout("gpus: [{model: L4, count: 4}]"), {}},
  };
  {
    SimFleet fleet(o);
    ASSERT_TRUE(fleet.Start().ok());
    ASSERT_TRUE(service.WaitFor(
        [](const auto& ms) { return Count(ms, v1::AgentMessage::kRegister) >= 3; }));
    std::map<std::string, v1::Register> regs;
    for (const auto& m : service.Snapshot()) {
      if (m.has_register_()) regs[m.register_().node_name()] = m.register_();
    }
    ASSERT_EQ(regs.size(), 3u);
    EXPECT_EQ(regs["h100-a"].devices_size(), 8);
    EXPECT_EQ(regs["h100-a"].pool(), "public");
    EXPECT_EQ(regs["h100-mig"].devices_size(), 11);  // 8 GPUs + 3 MIG instances
    EXPECT_EQ(regs["h100-mig"].labels().at("mig"), "true");
    EXPECT_EQ(regs["l4-a"].devices_size(), 4);
    EXPECT_EQ(regs["l4-a"].pool(), "private-a");
    EXPECT_EQ(regs["l4-a"].devices(0).uuid(), "GPU-sim-l4-a-0");
    fleet.Shutdown(false);
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace gpupool::agent
