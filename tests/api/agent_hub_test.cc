// AgentHub over real gRPC on loopback: a test agent (in this file) speaks the agent protocol to
// the hub, which drives a real Scheduler (its Core on its loop).
#include "api/agent_hub.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <deque>
#include <thread>

#include "pool/catalog.h"
#include "tests/api/recording_audit.h"
#include "tests/api/service_harness.h"
#include "tests/support/wait_for.h"

namespace gpupool::api {
namespace {

using testing::Admin;
using testing::Collector;
using ::testing::HasSubstr;
using namespace std::chrono_literals;
using testing::ServiceHarness;

// A minimal agent: one stream, a reader thread that queues what the scheduler sends and answers
// FetchLogs from an in-memory log.
class TestAgent {
 public:
  explicit TestAgent(const std::string& address)
      : stub_(v1::AgentService::NewStub(
            grpc::CreateChannel(address, grpc::InsecureChannelCredentials()))),
        stream_(stub_->Connect(&ctx_)) {
    reader_ = std::thread([this] { ReadLoop(); });
  }
  ~TestAgent() {
    ctx_.TryCancel();
    reader_.join();
  }

  static v1::Register Registration(const std::string& node, const std::string& pool,
                                   const std::string& token = "") {
    v1::Register r;
    r.set_node_name(node);
    r.set_pool(pool);
    r.set_token(token);
    r.set_cpu_milli(64'000);
    r.set_memory_mib(512 * 1024);
    v1::DeviceInfo* d = r.add_devices();
    d->set_uuid("GPU-" + node + "-0");
    d->set_model("H100-SXM");
    d->set_vram_mib(81'920);
    d->set_milli_tflops(989'000);
    d->set_healthy(true);
    return r;
  }

  bool Send(const v1::AgentMessage& m) {
    std::lock_guard<std::mutex> lock(write_mu_);
    return stream_->Write(m);
  }
  bool Register(const v1::Register& r) {
    v1::AgentMessage m;
    *m.mutable_register_() = r;
    return Send(m);
  }
  bool Update(const std::string& task_id, int32_t attempt, v1::TaskState state, int exit = 0) {
    v1::AgentMessage m;
    v1::TaskUpdate* u = m.mutable_task_update();
    u->set_task_id(task_id);
    u->set_attempt(attempt);
    u->set_state(state);
    u->set_exit_code(exit);
    return Send(m);
  }

  // Waits for the next message for which `pred` holds (earlier non-matching ones are dropped).
  std::optional<v1::SchedulerMessage> Next(std::function<bool(const v1::SchedulerMessage&)> pred,
                                           std::chrono::milliseconds timeout = 10s) {
    std::unique_lock<std::mutex> lock(mu_);
    std::optional<v1::SchedulerMessage> found;
    cv_.wait_for(lock, timeout, [&] {
      while (!inbox_.empty()) {
        v1::SchedulerMessage m = std::move(inbox_.front());
        inbox_.pop_front();
        if (pred(m)) {
          found = std::move(m);
          return true;
        }
      }
      return ended_;
    });
    return found;
  }
  std::optional<v1::SchedulerMessage> NextOf(v1::SchedulerMessage::MsgCase kind) {
    return Next([kind](const v1::SchedulerMessage& m) { return m.msg_case() == kind; });
  }

  // The stream's final status (after the server ended it).
  grpc::Status WaitEnd(std::chrono::milliseconds timeout = 10s) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, timeout, [&] { return ended_; });
    return ended_ ? status_ : grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "still open");
  }

  void AppendLog(const std::string& text) {
    std::lock_guard<std::mutex> lock(mu_);
    log_ += text;
  }
  // While set, log fetches are answered with this error, as an agent answers for a task it has
  // not started yet ("not on this node").
  void FailLogs(const std::string& error) {
    std::lock_guard<std::mutex> lock(mu_);
    log_error_ = error;
  }
  int fetches() {
    std::lock_guard<std::mutex> lock(mu_);
    return fetches_;
  }

 private:
  void ReadLoop() {
    v1::SchedulerMessage m;
    while (stream_->Read(&m)) {
      if (m.has_fetch_logs()) {
        AnswerFetch(m.fetch_logs());
        continue;
      }
      std::lock_guard<std::mutex> lock(mu_);
      inbox_.push_back(m);
      cv_.notify_all();
    }
    {
      std::lock_guard<std::mutex> lock(write_mu_);
      stream_->WritesDone();
    }
    grpc::Status s = stream_->Finish();
    std::lock_guard<std::mutex> lock(mu_);
    status_ = s;
    ended_ = true;
    cv_.notify_all();
  }

  void AnswerFetch(const v1::FetchLogs& f) {
    v1::AgentMessage reply;
    v1::LogChunk* c = reply.mutable_log_chunk();
    c->set_request_id(f.request_id());
    c->set_task_id(f.task_id());
    c->set_offset(f.offset());
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++fetches_;
      if (!log_error_.empty()) {
        c->set_error(log_error_);
        Send(reply);
        return;
      }
      size_t from = std::min(log_.size(), static_cast<size_t>(f.offset()));
      std::string data = log_.substr(from, static_cast<size_t>(f.max_bytes()));
      c->set_eof(from + data.size() >= log_.size());
      c->set_data(std::move(data));
    }
    Send(reply);
  }

  std::unique_ptr<v1::AgentService::Stub> stub_;
  grpc::ClientContext ctx_;
  std::unique_ptr<grpc::ClientReaderWriter<v1::AgentMessage, v1::SchedulerMessage>> stream_;
  std::thread reader_;
  std::mutex write_mu_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<v1::SchedulerMessage> inbox_;
  std::string log_;
  std::string log_error_;
  int fetches_ = 0;
  bool ended_ = false;
  grpc::Status status_;
};

using ::gpupool::testing::WaitFor;

class AgentHubTest : public ::testing::Test {
 protected:
  explicit AgentHubTest(AgentHubOptions options = {}) : h_(std::move(options)) {
    address_ = h_.StartServer();
    EXPECT_TRUE(h_.CreatePool("gpu-a").first.ok());
  }

  // Connects an agent for `node` and waits for its RegisterAck.
  std::unique_ptr<TestAgent> Connect(const std::string& node, v1::RegisterAck* ack = nullptr) {
    auto agent = std::make_unique<TestAgent>(address_);
    EXPECT_TRUE(agent->Register(TestAgent::Registration(node, "gpu-a")));
    auto m = agent->NextOf(v1::SchedulerMessage::kRegisterAck);
    EXPECT_TRUE(m.has_value()) << "no RegisterAck for " << node;
    if (m && ack) *ack = m->register_ack();
    return agent;
  }

  // Submits a one-task job and waits for the StartTask at `agent`.
  v1::StartTask SubmitAndStart(TestAgent& agent, std::string* job_id) {
    auto [s, sub] = h_.Submit(ServiceHarness::Job("acme/research", "gpu-a"));
    EXPECT_TRUE(s.ok()) << s.ToString();
    *job_id = sub.job_id();
    auto m = agent.NextOf(v1::SchedulerMessage::kStartTask);
    EXPECT_TRUE(m.has_value()) << "no StartTask";
    return m ? m->start_task() : v1::StartTask{};
  }

  testing::RecordingAudit audit_;  // outlives the hub (attached by some tests)
  ServiceHarness h_;
  std::string address_;
};

TEST_F(AgentHubTest, RegisterIsAcknowledgedAndTheNodeJoinsItsPool) {
  v1::RegisterAck ack;
  auto agent = Connect("n1", &ack);
  EXPECT_GT(ack.epoch(), 0);
  EXPECT_EQ(ack.heartbeat_interval_ms(), 1000);
  EXPECT_EQ(h_.hub.connected(), 1u);
  auto [s, nodes] = h_.Call(&ApiService::ListNodes, v1::ListNodesRequest{});
  ASSERT_TRUE(s.ok());
  ASSERT_EQ(nodes.nodes_size(), 1);
  EXPECT_EQ(nodes.nodes(0).name(), "n1");
  EXPECT_EQ(nodes.nodes(0).devices_size(), 1);
  EXPECT_EQ(nodes.nodes(0).capacity().physical().milli_tflops(), 989'000);

  // Heartbeats are accepted; the stream stays up.
  v1::AgentMessage hb;
  v1::DeviceMetrics* d = hb.mutable_heartbeat()->add_devices();
  d->set_uuid("GPU-n1-0");
  d->set_healthy(true);
  EXPECT_TRUE(agent->Send(hb));
  agent.reset();  // the agent goes away: the hub forgets it
  EXPECT_TRUE(WaitFor([&] { return h_.hub.connected() == 0; }));
}

TEST_F(AgentHubTest, TheFirstMessageMustBeRegister) {
  TestAgent agent(address_);
  v1::AgentMessage hb;
  hb.mutable_heartbeat();
  agent.Send(hb);
  grpc::Status s = agent.WaitEnd();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message(), "the first message on the agent stream must be register");
}

TEST_F(AgentHubTest, InvalidRegistrationAndUnknownPoolAreRefused) {
  TestAgent bad(address_);
  v1::Register r = TestAgent::Registration("n1", "gpu-a");
  r.mutable_devices(0)->set_vram_mib(-1);
  bad.Register(r);
  grpc::Status s = bad.WaitEnd();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message(),
            "register.devices[0].vram_mib: must be between 0 and 16777216, got -1");

  TestAgent lost(address_);
  lost.Register(TestAgent::Registration("n2", "no-such-pool"));
  EXPECT_EQ(lost.WaitEnd().error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_TRUE(WaitFor([&] { return h_.hub.connected() == 0; }));
}

TEST_F(AgentHubTest, StartTaskReachesTheAgentAndTaskUpdatesReachTheCore) {
  h_.hub.AttachAudit(&audit_);
  auto agent = Connect("n1");
  std::string job_id;
  v1::StartTask start = SubmitAndStart(*agent, &job_id);
  EXPECT_EQ(start.task_id(), job_id + ".0");
  EXPECT_EQ(start.job_id(), job_id);
  EXPECT_EQ(start.tenant(), "acme/research");
  EXPECT_EQ(start.argv(0), "/bin/echo");
  ASSERT_EQ(start.devices_size(), 1);
  EXPECT_EQ(start.devices(0).uuid(), "GPU-n1-0");
  EXPECT_EQ(start.devices(0).milli_tflops(), 100'000);
  EXPECT_GT(start.epoch(), 0);

  agent->Update(start.task_id(), start.attempt(), v1::TASK_STATE_RUNNING);
  v1::Job job = h_.WaitJob(
      job_id, [](const v1::Job& j) { return j.tasks(0).state() == v1::TASK_STATE_RUNNING; });
  EXPECT_EQ(job.tasks(0).state(), v1::TASK_STATE_RUNNING);
  agent->Update(start.task_id(), start.attempt(), v1::TASK_STATE_SUCCEEDED);
  job = h_.WaitJob(job_id, [](const v1::Job& j) { return j.state() == v1::JOB_STATE_SUCCEEDED; });
  EXPECT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED);
  // Both reports are audited, with the node as the actor (api/agent_audit.h).
  const std::vector<AuditEntry> reports = audit_.Of("ReportTask");
  ASSERT_EQ(reports.size(), 2u);
  EXPECT_EQ(reports[0].resource, "task/" + start.task_id());
  EXPECT_EQ(reports[0].message, "state=TASK_STATE_RUNNING attempt=0");
  EXPECT_EQ(reports[1].message, "state=TASK_STATE_SUCCEEDED attempt=0 exit_code=0");
  EXPECT_EQ(reports[1].actor.principal, "n1");
  EXPECT_EQ(reports[1].actor.role, "node");
  ASSERT_EQ(audit_.Of("RegisterNode").size(), 1u);
  EXPECT_EQ(audit_.Of("RegisterNode")[0].code, StatusCode::kOk);

  // Cancel reaches the agent as StopTask.
  std::string second;
  v1::StartTask start2 = SubmitAndStart(*agent, &second);
  agent->Update(start2.task_id(), start2.attempt(), v1::TASK_STATE_RUNNING);
  h_.WaitJob(second, [](const v1::Job& j) { return j.tasks(0).state() == v1::TASK_STATE_RUNNING; });
  v1::CancelJobRequest cancel;
  cancel.set_job_id(second);
  ASSERT_TRUE(h_.Call(&ApiService::CancelJob, cancel).first.ok());
  auto stop = agent->NextOf(v1::SchedulerMessage::kStopTask);
  ASSERT_TRUE(stop.has_value());
  EXPECT_EQ(stop->stop_task().task_id(), start2.task_id());
}

// Placement by cached layers over the real protocol: a node's image cache reaches the core with
// its Register (n1) or a heartbeat (n2), and an image task starts on the node holding its image.
TEST_F(AgentHubTest, ANodesImageCacheSteersItsImagesTasksToIt) {
  const auto cache = [](const std::string& ref, char fill) {
    v1::ImageCache c;
    v1::CachedImage* i = c.add_images();
    i->set_manifest_digest("sha256:" + std::string(64, fill));
    i->add_references(ref);
    v1::CachedLayer* l = i->add_layers();
    l->set_digest("sha256:" + std::string(64, static_cast<char>(fill + 1)));
    l->set_size(512 << 20);
    return c;
  };
  const std::string a = "registry.local:5000/team/a:1", b = "registry.local:5000/team/b:1";
  auto n1 = std::make_unique<TestAgent>(address_);
  v1::Register r1 = TestAgent::Registration("n1", "gpu-a");
  *r1.mutable_image_cache() = cache(b, 'a');
  ASSERT_TRUE(n1->Register(r1));
  ASSERT_TRUE(n1->NextOf(v1::SchedulerMessage::kRegisterAck).has_value());
  auto n2 = Connect("n2");
  v1::AgentMessage hb;
  *hb.mutable_heartbeat()->mutable_image_cache() = cache(a, 'c');
  v1::DeviceMetrics* d = hb.mutable_heartbeat()->add_devices();
  d->set_uuid("GPU-n2-0");
  d->set_healthy(true);
  d->set_utilization_pct(1);
  ASSERT_TRUE(n2->Send(hb));
  // The core ran the heartbeat (its sample shows), so the image cache before it too.
  ASSERT_TRUE(WaitFor([&] {
    auto [s, nodes] = h_.Call(&ApiService::ListNodes, v1::ListNodesRequest{});
    for (const v1::Node& n : nodes.nodes()) {
      if (n.name() == "n2" && n.devices(0).has_sample()) return true;
    }
    return false;
  }));
  const auto submit = [&](const std::string& image) {
    v1::SubmitJobRequest req = ServiceHarness::Job("acme/research", "gpu-a");
    req.mutable_spec()->mutable_template_()->set_image(image);
    auto [s, sub] = h_.Submit(req);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return sub.job_id();
  };
  const std::string first = submit(a);
  auto start = n2->NextOf(v1::SchedulerMessage::kStartTask);
  ASSERT_TRUE(start.has_value()) << "image a's task did not start on n2, which holds it";
  n2->Update(start->start_task().task_id(), start->start_task().attempt(),
             v1::TASK_STATE_SUCCEEDED);
  // Both nodes idle again (a busy n2 would win on packing, as it should).
  h_.WaitJob(first, [](const v1::Job& j) { return j.state() == v1::JOB_STATE_SUCCEEDED; });
  submit(b);
  start = n1->NextOf(v1::SchedulerMessage::kStartTask);
  ASSERT_TRUE(start.has_value()) << "image b's task did not start on n1, which holds it";
  EXPECT_EQ(start->start_task().image(), b);
}

TEST_F(AgentHubTest, GatewayReportsNodesWithoutAConnection) {
  StartTaskCommand cmd;
  cmd.task_id = "1.0";
  EXPECT_FALSE(h_.hub.StartTask("nobody", cmd));
  EXPECT_FALSE(h_.hub.StopTask("nobody", StopTaskCommand{}));
  auto agent = Connect("n1");
  EXPECT_TRUE(h_.hub.StopTask("n1", StopTaskCommand{"9.0", 0, 1000, "test", 1}));
  auto stop = agent->NextOf(v1::SchedulerMessage::kStopTask);
  ASSERT_TRUE(stop.has_value());
  EXPECT_EQ(stop->stop_task().task_id(), "9.0");
}

TEST_F(AgentHubTest, ANewConnectionReplacesTheOld) {
  auto first = Connect("n1");
  auto second = Connect("n1");
  grpc::Status s = first->WaitEnd();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::ABORTED);
  EXPECT_THAT(s.error_message(), HasSubstr("replaced by a newer connection of node n1"));
  EXPECT_EQ(h_.hub.connected(), 1u);
  EXPECT_TRUE(h_.hub.StopTask("n1", StopTaskCommand{"9.0", 0, 1000, "test", 1}));
  EXPECT_TRUE(second->NextOf(v1::SchedulerMessage::kStopTask).has_value());
  first.reset();  // the old stream's end must not drop the new connection
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(h_.hub.connected(), 1u);
}

TEST_F(AgentHubTest, TaskLogsRoundTripAndFollowUntilTheTaskEnds) {
  auto agent = Connect("n1");
  std::string job_id;
  v1::StartTask start = SubmitAndStart(*agent, &job_id);
  agent->Update(start.task_id(), start.attempt(), v1::TASK_STATE_RUNNING);
  h_.WaitJob(job_id, [](const v1::Job& j) { return j.tasks(0).state() == v1::TASK_STATE_RUNNING; });
  agent->AppendLog("epoch 1\n");

  // Without follow: what is there now, no eof (the task still runs).
  v1::GetTaskLogsRequest req;
  req.set_task_id(start.task_id());
  Collector<v1::TaskLogChunk> now;
  h_.service->GetTaskLogs(Admin(), req, now.OnItem(), now.OnDone());
  ASSERT_TRUE(now.WaitDone().ok());
  ASSERT_EQ(now.items().size(), 1u);
  EXPECT_EQ(now.items()[0].data(), "epoch 1\n");
  EXPECT_EQ(now.items()[0].offset(), 0);
  EXPECT_FALSE(now.items()[0].eof());

  // Follow from offset 6: new output arrives as it is written, then eof when the task ends.
  req.set_follow(true);
  req.set_offset(6);
  Collector<v1::TaskLogChunk> follow;
  Cancel cancel = h_.service->GetTaskLogs(Admin(), req, follow.OnItem(), follow.OnDone());
  ASSERT_TRUE(follow.WaitItems(1));
  agent->AppendLog("epoch 2\n");
  ASSERT_TRUE(follow.WaitItems(2));
  agent->AppendLog("done\n");
  agent->Update(start.task_id(), start.attempt(), v1::TASK_STATE_SUCCEEDED);
  ASSERT_TRUE(follow.WaitDone().ok());
  std::string all;
  for (const v1::TaskLogChunk& c : follow.items()) {
    EXPECT_EQ(c.offset(), 6 + static_cast<int64_t>(all.size()));
    all += c.data();
  }
  EXPECT_EQ(all, "1\nepoch 2\ndone\n");
  EXPECT_TRUE(follow.items().back().eof());
  cancel();

  // A finished task without follow: everything, with eof.
  req.set_follow(false);
  req.set_offset(0);
  Collector<v1::TaskLogChunk> finished;
  h_.service->GetTaskLogs(Admin(), req, finished.OnItem(), finished.OnDone());
  ASSERT_TRUE(finished.WaitDone().ok());
  ASSERT_FALSE(finished.items().empty());
  EXPECT_EQ(finished.items().back().data(), "epoch 1\nepoch 2\ndone\n");
  EXPECT_TRUE(finished.items().back().eof());
}

// Issue 30: following a task that is not placed yet answers at once (an empty chunk: REST's
// status line and headers go out), then waits; before, nothing was sent until it ran.
TEST_F(AgentHubTest, FollowingAPendingTasksLogsAnswersAtOnce) {
  auto [s, sub] = h_.Submit(ServiceHarness::Job("acme/research", "gpu-a"));  // no node: pending
  ASSERT_TRUE(s.ok()) << s.ToString();
  v1::GetTaskLogsRequest req;
  req.set_task_id(sub.job_id() + ".0");
  req.set_follow(true);
  Collector<v1::TaskLogChunk> follow;
  Cancel cancel = h_.service->GetTaskLogs(Admin(), req, follow.OnItem(), follow.OnDone());
  ASSERT_TRUE(follow.WaitItems(1));
  EXPECT_TRUE(follow.items()[0].data().empty());
  EXPECT_FALSE(follow.items()[0].eof());
  EXPECT_EQ(follow.items()[0].offset(), 0);
  cancel();
}

// A follower of a task placed on a node that has not started it yet (its image pulling) waits
// for it; before, the node's "not on this node" ended the stream at once.
TEST_F(AgentHubTest, FollowingATaskItsNodeHasNotStartedWaitsForIt) {
  auto agent = Connect("n1");
  std::string job_id;
  v1::StartTask start = SubmitAndStart(*agent, &job_id);
  agent->FailLogs("not on this node");
  v1::GetTaskLogsRequest req;
  req.set_task_id(start.task_id());
  req.set_follow(true);
  Collector<v1::TaskLogChunk> follow;
  Cancel cancel = h_.service->GetTaskLogs(Admin(), req, follow.OnItem(), follow.OnDone());
  ASSERT_TRUE(follow.WaitItems(1));
  EXPECT_TRUE(follow.items()[0].data().empty());
  ASSERT_TRUE(WaitFor([&] { return agent->fetches() >= 2; }));  // polled again, still open
  agent->FailLogs("");
  agent->AppendLog("started\n");
  agent->Update(start.task_id(), start.attempt(), v1::TASK_STATE_RUNNING);
  ASSERT_TRUE(follow.WaitItems(2));
  EXPECT_EQ(follow.items()[1].data(), "started\n");
  cancel();

  // Without follow the node's answer is the caller's.
  req.set_follow(false);
  agent->FailLogs("not on this node");
  Collector<v1::TaskLogChunk> now;
  h_.service->GetTaskLogs(Admin(), req, now.OnItem(), now.OnDone());
  EXPECT_EQ(now.WaitDone().code(), StatusCode::kNotFound);
}

TEST_F(AgentHubTest, TaskLogsFailWhenTheNodeIsGone) {
  auto agent = Connect("n1");
  std::string job_id;
  v1::StartTask start = SubmitAndStart(*agent, &job_id);
  agent.reset();
  ASSERT_TRUE(WaitFor([&] { return h_.hub.connected() == 0; }));
  v1::GetTaskLogsRequest req;
  req.set_task_id(start.task_id());
  Collector<v1::TaskLogChunk> logs;
  h_.service->GetTaskLogs(Admin(), req, logs.OnItem(), logs.OnDone());
  Status s = logs.WaitDone();
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_EQ(s.message(), "node n1 is not connected");
}

class AgentHubTokenTest : public AgentHubTest {
 protected:
  AgentHubTokenTest() : AgentHubTest(AgentHubOptions{{"secret"}, nullptr}) {}
};

TEST_F(AgentHubTokenTest, OnlyConfiguredTokensAreAccepted) {
  TestAgent wrong(address_);
  wrong.Register(TestAgent::Registration("n1", "gpu-a", "guess"));
  grpc::Status s = wrong.WaitEnd();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(s.error_message(), "node 'n1': the node token is not accepted");
  EXPECT_EQ(h_.hub.connected(), 0u);

  TestAgent right(address_);
  right.Register(TestAgent::Registration("n1", "gpu-a", "secret"));
  EXPECT_TRUE(right.NextOf(v1::SchedulerMessage::kRegisterAck).has_value());
  EXPECT_EQ(h_.hub.connected(), 1u);
}

AgentHubOptions WithCatalog() {
  AgentHubOptions o;
  o.catalog = &Catalog::Builtin();
  return o;
}

class AgentHubCatalogTest : public AgentHubTest {
 protected:
  AgentHubCatalogTest() : AgentHubTest(WithCatalog()) {}

  // What a register carrying `r` ends with (OK = acknowledged).
  grpc::Status RegisterWith(const v1::Register& r) {
    TestAgent agent(address_);
    agent.Register(r);
    if (agent.NextOf(v1::SchedulerMessage::kRegisterAck).has_value()) return grpc::Status::OK;
    return agent.WaitEnd();
  }

  // An H100-SXM as the catalog describes it (989.5 TFLOPS, 80 GB) and one MIG instance.
  static v1::Register Truthful(const std::string& node) {
    v1::Register r = TestAgent::Registration(node, "gpu-a");
    r.mutable_devices(0)->set_milli_tflops(989'500);
    r.mutable_devices(0)->set_vram_mib(81'559);  // what NVML shows of 80 GB
    v1::DeviceInfo* mig = r.add_devices();
    *mig = r.devices(0);
    mig->set_uuid("MIG-" + node + "-0");
    mig->set_parent_uuid(r.devices(0).uuid());
    mig->set_mig_profile("3g.40gb");
    mig->set_milli_tflops(989'500 * 3 / 7);
    mig->set_vram_mib(40'960);
    return r;
  }
};

TEST_F(AgentHubCatalogTest, DevicesThatAgreeWithTheCatalogAreAccepted) {
  EXPECT_TRUE(RegisterWith(Truthful("n1")).ok());
}

TEST_F(AgentHubCatalogTest, ADeviceThatContradictsTheCatalogIsRefusedNamingTheField) {
  v1::Register vram = Truthful("n1");
  vram.mutable_devices(0)->set_vram_mib(40'960);
  grpc::Status s = RegisterWith(vram);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message(),
            "register.devices[0].vram_mib: 40960 MiB contradicts the catalog: H100-SXM has 81920 "
            "MiB (a device may report 73728 to 81920)");

  v1::Register tflops = Truthful("n1");
  tflops.mutable_devices(1)->set_milli_tflops(500'000);
  s = RegisterWith(tflops);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message(),
            "register.devices[1].milli_tflops: 500000 contradicts the catalog: H100-SXM 3g.40gb "
            "has 424071 milli-TFLOPS");

  v1::Register profile = Truthful("n1");
  profile.mutable_devices(1)->set_mig_profile("5g.50gb");
  s = RegisterWith(profile);
  EXPECT_EQ(s.error_message(),
            "register.devices[1].mig_profile: '5g.50gb' is not a MIG profile of H100-SXM in the "
            "catalog");

  v1::Register model = Truthful("n1");
  model.mutable_devices(0)->set_model("RTX-4090");
  s = RegisterWith(model);
  EXPECT_THAT(s.error_message(),
              ::testing::StartsWith("register.devices[0].model: 'RTX-4090' is not in the catalog"));
  // Nothing of a refused node reached the scheduler.
  auto [st, nodes] = h_.Call(&ApiService::ListNodes, v1::ListNodesRequest{});
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(nodes.nodes_size(), 0);
}

}  // namespace
}  // namespace gpupool::api
