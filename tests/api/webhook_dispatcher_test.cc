// Webhooks end to end below the API (docs/webhooks.md): the scheduler core on a real PostgreSQL
// runs jobs, its events are the log the WebhookDispatcher follows, and an HTTPS receiver on
// loopback (a certificate of a test CA, verified by the dispatcher) gets them:
//  - every event of a job, once per delivery id, in event order, each correctly signed;
//  - a receiver that is down gets them all, in order, once it is back;
//  - an endpoint answering 500 (and one too slow to answer) is retried with back-off and then
//    disabled with the reason, while the core goes on scheduling and storing; re-enabled, it gets
//    what it missed.
// Plus the signature itself: a known HMAC, and what Verify refuses.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <mutex>

#include "api/webhooks/dispatcher.h"
#include "api/webhooks/signature.h"
#include "base/tls/pki.h"
#include "scheduler/core.h"
#include "store/pg_store.h"
#include "store/pg_webhooks.h"
#include "tests/api/webhook_receiver.h"
#include "tests/scheduler/core_harness.h"
#include "tests/support/pg_fixture.h"
#include "tests/support/status_macros.h"
#include "tests/support/test_keyring.h"

namespace gpupool::api::testing {
namespace {

using ::gpupool::testing::CoreHarness;
using ::gpupool::testing::RecordingAgents;
using ::gpupool::testing::SimulatedH100s;

TEST(WebhookSignatureTest, SignsTheTimeAndBodyWithHmacSha256) {
  // RFC 4231 test case 2: HMAC-SHA256("Jefe", "what do ya want for nothing?").
  EXPECT_EQ(webhooks::HmacSha256Hex("Jefe", "what do ya want for nothing?"),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  const std::string body = R"({"id":"1-2"})";
  const std::string header = webhooks::Sign("whsec_x", 1'700'000'000, body);
  EXPECT_EQ(header, "t=1700000000,v1=" + webhooks::HmacSha256Hex("whsec_x", "1700000000." + body));
  EXPECT_OK(webhooks::Verify("whsec_x", header, body, 1'700'000'100, 300));
  // Another body, another secret, a stale time, a missing part: refused.
  EXPECT_EQ(webhooks::Verify("whsec_x", header, body + " ", 1'700'000'000, 300).code(),
            StatusCode::kUnauthenticated);
  EXPECT_EQ(webhooks::Verify("whsec_y", header, body, 1'700'000'000, 300).code(),
            StatusCode::kUnauthenticated);
  EXPECT_EQ(webhooks::Verify("whsec_x", header, body, 1'700'001'000, 300).code(),
            StatusCode::kUnauthenticated);
  EXPECT_EQ(webhooks::Verify("whsec_x", "v1=00", body, 1'700'000'000, 300).code(),
            StatusCode::kUnauthenticated);
  // Two v1 entries (a receiver rotating its secret): either may match.
  EXPECT_OK(webhooks::Verify("whsec_x", header + ",v1=00", body, 1'700'000'000, 300));
  ASSERT_OK_AND_ASSIGN(std::string a, webhooks::NewSecret());
  ASSERT_OK_AND_ASSIGN(std::string b, webhooks::NewSecret());
  EXPECT_EQ(a.size(), 6u + 64u);
  EXPECT_NE(a, b);
}

TEST(WebhookUrlTest, OnlyHttpsUnlessInsecureLoopbackIsAllowed) {
  ASSERT_OK_AND_ASSIGN(WebhookUrl u,
                       ParseWebhookUrl("https://hooks.example:8443/a?b=c", false, "url"));
  EXPECT_TRUE(u.tls);
  EXPECT_EQ(u.host, "hooks.example");
  EXPECT_EQ(u.port, 8443);
  EXPECT_EQ(u.target, "/a?b=c");
  ASSERT_OK_AND_ASSIGN(u, ParseWebhookUrl("https://[::1]", false, "url"));
  EXPECT_EQ(u.host, "::1");
  EXPECT_EQ(u.port, 443);
  EXPECT_EQ(u.target, "/");
  for (const char* bad : {"http://hooks.example/", "ftp://x/", "https://", "https://u@h/",
                          "https://h:0/", "https://h:99999/", "https://h/#f", "https://h /"}) {
    EXPECT_EQ(ParseWebhookUrl(bad, false, "url").status().code(), StatusCode::kInvalidArgument)
        << bad;
  }
  EXPECT_FALSE(ParseWebhookUrl("http://127.0.0.1:9/", false, "url").ok());
  EXPECT_OK(ParseWebhookUrl("http://127.0.0.1:9/", true, "url").status());
  EXPECT_FALSE(ParseWebhookUrl("http://10.0.0.1:9/", true, "url").ok());
}

// A Core on a PgStore, driven from the test's thread (as tests/scheduler/pg_change_path_test.cc).
class PgCore {
 public:
  explicit PgCore(std::unique_ptr<PgStore> store) : store_(std::move(store)) {
    core = std::make_unique<Core>(SchedulerOptions::Defaults(), &clock, store_.get(), &agents,
                                  [this](std::function<void()> fn) {
                                    std::lock_guard<std::mutex> lock(mu_);
                                    queue_.push_back(std::move(fn));
                                    cv_.notify_one();
                                  });
  }
  ~PgCore() {
    store_.reset();
    std::lock_guard<std::mutex> lock(mu_);
    queue_.clear();
  }
  Status Start() {
    GPUPOOL_ASSIGN_OR_RETURN(int64_t epoch, store_->AcquireLeadership());
    GPUPOOL_ASSIGN_OR_RETURN(RecoveredState state, store_->Recover());
    GPUPOOL_RETURN_IF_ERROR(core->Recover(state, epoch));
    PoolRecord pool;
    pool.name = "gpu";
    GPUPOOL_RETURN_IF_ERROR(Sync<PoolView>([&](auto cb) { core->CreatePool(pool, cb); }).status());
    AgentRegistration reg = SimulatedH100s("n1", "gpu", 8);
    agents.connected.insert("n1");
    return Sync<RegistrationResult>([&](auto cb) { core->OnAgentRegister(reg, cb); }).status();
  }
  template <typename Pred>
  bool RunUntil(Pred pred, std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
    auto end = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      if (pred()) return true;
      std::function<void()> fn;
      {
        std::unique_lock<std::mutex> lock(mu_);
        if (!cv_.wait_until(lock, end, [&] { return !queue_.empty(); })) return pred();
        fn = std::move(queue_.front());
        queue_.pop_front();
      }
      fn();
    }
  }
  template <typename T>
  Result<T> Sync(std::function<void(Core::Callback<T>)> call) {
    std::optional<Result<T>> out;
    call([&](Result<T> r) { out.emplace(std::move(r)); });
    if (!RunUntil([&] { return out.has_value(); })) return Status::Internal("no answer in 30 s");
    return *out;
  }
  void Report(int64_t job, int index, TaskState state) {
    TaskReport r;
    r.node = "n1";
    r.task_id = TaskId(job, index);
    r.attempt = core->GetJob(job)->tasks[static_cast<size_t>(index)].attempt;
    r.state = state;
    core->OnTaskReport(r);
  }
  // Submits a job of `tasks` tasks of tenant acme/research/alice, runs it to SUCCEEDED, and
  // waits for the last change to be durable. The job's id.
  int64_t RunJob(int tasks) {
    Result<JobRecord> j =
        Sync<JobRecord>([&](auto cb) { core->SubmitJob(CoreHarness::Whole("gpu", 1, tasks), cb); });
    EXPECT_OK(j.status());
    if (!j.ok()) return 0;
    const int64_t id = j->id;
    EXPECT_TRUE(RunUntil([&] { return agents.starts.size() >= started_ + tasks; }));
    started_ = agents.starts.size();
    for (int i = 0; i < tasks; ++i) Report(id, i, TaskState::kRunning);
    EXPECT_TRUE(RunUntil([&] { return TasksIn(id, TaskState::kRunning) == tasks; }));
    for (int i = 0; i < tasks; ++i) Report(id, i, TaskState::kSucceeded);
    EXPECT_TRUE(RunUntil([&] { return core->GetJob(id)->state == JobState::kSucceeded; }));
    RunUntil([] { return false; }, std::chrono::milliseconds(100));
    EXPECT_EQ(core->unstored_changes(), 0u);
    return id;
  }
  int TasksIn(int64_t job, TaskState s) { return CountIn(*core->GetJob(job), s); }
  static int CountIn(const JobRecord& j, TaskState s) {
    int n = 0;
    for (const TaskRecord& t : j.tasks) n += t.state == s;
    return n;
  }

  ManualClock clock;
  RecordingAgents agents;
  std::unique_ptr<Core> core;

 private:
  std::unique_ptr<PgStore> store_;
  size_t started_ = 0;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
};

class WebhookDispatcherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("gpupool-webhooks-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    ASSERT_OK_AND_ASSIGN(tls::CertAuthority ca, tls::CertAuthority::LoadOrCreate(dir_ / "tls"));
    ca_pem_ = ca.ca_pem();
    ASSERT_OK_AND_ASSIGN(std::string uri, ::gpupool::testing::CreateTestDatabase());
    PgStoreOptions o;
    o.uri = uri;
    o.keyring = ::gpupool::testing::TestKeyring();
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<PgStore> store, PgStore::Open(o));
    core_ = std::make_unique<PgCore>(std::move(store));
    ASSERT_OK(core_->Start());
    ASSERT_OK_AND_ASSIGN(hooks_, PgWebhooks::Open(uri, ::gpupool::testing::TestKeyring()));
    ASSERT_OK_AND_ASSIGN(secret_, webhooks::NewSecret());
    receiver_ =
        std::make_unique<WebhookReceiver>(ca.server_cert_pem(), ca.server_key_pem(), secret_);
  }
  void TearDown() override {
    if (dispatcher_) dispatcher_->Stop();
    receiver_.reset();
    core_.reset();
    std::filesystem::remove_all(dir_);
  }

  webhooks::DispatcherOptions Options() {
    webhooks::DispatcherOptions o;
    o.poll = std::chrono::milliseconds(50);
    o.timeout = std::chrono::seconds(5);
    o.backoff_initial = std::chrono::milliseconds(50);
    o.backoff_max = std::chrono::milliseconds(200);
    o.extra_ca_pem = ca_pem_;
    o.allow_loopback = true;
    return o;
  }
  // A webhook of tenant acme (the jobs are acme/research/alice's) to the receiver.
  WebhookRecord Create(uint16_t port) {
    WebhookRecord w;
    w.tenant = "acme";
    w.url = "https://127.0.0.1:" + std::to_string(port) + "/hooks/gpupool";
    w.secret = secret_;
    w.created_by = "test";
    Result<WebhookRecord> made = hooks_->Create(w);
    EXPECT_OK(made.status());
    return made.ok() ? *made : w;
  }
  // The delivery ids a webhook created at the same moment as `w` has to deliver, in order.
  std::vector<std::string> Expected(const WebhookRecord& reference, int64_t as_webhook) {
    Result<WebhookBacklog> b = hooks_->Backlog(reference.id, 1000);
    EXPECT_OK(b.status());
    std::vector<std::string> out;
    if (b.ok()) {
      for (const LoggedEvent& e : b->events) out.push_back(WebhookDeliveryId(as_webhook, e.id));
    }
    return out;
  }
  // The delivery ids the receiver got, each once, in the order it first got them.
  std::vector<std::string> FirstReceipts() {
    std::vector<std::string> out;
    for (const WebhookReceiver::Delivery& d : receiver_->deliveries()) {
      if (std::find(out.begin(), out.end(), d.id) == out.end()) out.push_back(d.id);
    }
    return out;
  }
  bool WaitFor(const std::function<bool()>& pred,
               std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
    const auto end = std::chrono::steady_clock::now() + timeout;
    while (!pred()) {
      if (std::chrono::steady_clock::now() > end) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return true;
  }
  // The webhook as stored now (a test failure, and an empty record, when it cannot be read).
  WebhookRecord Fetch(int64_t id) {
    Result<std::optional<WebhookRecord>> r = hooks_->Get(id);
    if (!r.ok() || !r->has_value()) {
      ADD_FAILURE() << "webhook " << id << " cannot be read";
      return WebhookRecord{};
    }
    return std::move(**r);
  }
  WebhookRecord Reference() {
    // Never dispatched (disabled): its backlog is what the live one must deliver.
    WebhookRecord ref = Create(1);
    EXPECT_OK(hooks_->SetEnabled(ref.id, false, "reference"));
    return ref;
  }

  std::filesystem::path dir_;
  std::string ca_pem_;
  std::string secret_;
  std::unique_ptr<PgCore> core_;
  std::unique_ptr<PgWebhooks> hooks_;
  std::unique_ptr<WebhookReceiver> receiver_;
  std::unique_ptr<webhooks::WebhookDispatcher> dispatcher_;
};

TEST_F(WebhookDispatcherTest, AReceiverGetsEveryEventOfAJobOncePerDeliveryIdInOrderSigned) {
  const uint16_t port = receiver_->Start();
  const WebhookRecord ref = Reference();
  const WebhookRecord w = Create(port);
  dispatcher_ = std::make_unique<webhooks::WebhookDispatcher>(hooks_.get(), Options());
  dispatcher_->Start();

  core_->RunJob(2);
  const std::vector<std::string> want = Expected(ref, w.id);
  ASSERT_GE(want.size(), 3u);  // job.submitted, then each task's end
  ASSERT_TRUE(WaitFor([&] { return FirstReceipts().size() >= want.size(); }))
      << FirstReceipts().size() << " of " << want.size();
  EXPECT_EQ(FirstReceipts(), want);
  const std::vector<WebhookReceiver::Delivery> got = receiver_->deliveries();
  EXPECT_EQ(got.size(), want.size()) << "a healthy receiver gets each delivery once";
  for (const WebhookReceiver::Delivery& d : got) {
    EXPECT_TRUE(d.signature_ok) << d.id << ": " << d.signature_error;
    EXPECT_NE(d.body.find("\"id\":\"" + d.id + "\""), std::string::npos) << d.body;
    EXPECT_NE(d.body.find("\"kind\":\"" + d.kind + "\""), std::string::npos) << d.body;
    EXPECT_NE(d.body.find("\"tenant\":\"acme/research/alice\""), std::string::npos) << d.body;
  }
  EXPECT_EQ(got.front().kind, "job.submitted");
  // The cursor is durable: the webhook is done with every event.
  ASSERT_TRUE(WaitFor([&] {
    Result<WebhookBacklog> b = hooks_->Backlog(w.id, 10);
    return b.ok() && b->events.empty();
  }));
}

TEST_F(WebhookDispatcherTest, AReceiverThatIsDownGetsThemAfterItReturns) {
  const uint16_t port = receiver_->Start();
  receiver_->Stop();  // down: its port refuses connections
  const WebhookRecord ref = Reference();
  const WebhookRecord w = Create(port);
  dispatcher_ = std::make_unique<webhooks::WebhookDispatcher>(hooks_.get(), Options());
  dispatcher_->Start();

  core_->RunJob(1);
  const std::vector<std::string> want = Expected(ref, w.id);
  ASSERT_FALSE(want.empty());
  // Tried and failed, recorded.
  ASSERT_TRUE(WaitFor([&] {
    Result<std::vector<WebhookAttempt>> a = hooks_->Attempts(w.id, 10);
    return a.ok() && a->size() >= 2;
  }));
  ASSERT_OK_AND_ASSIGN(std::vector<WebhookAttempt> failed, hooks_->Attempts(w.id, 10));
  EXPECT_EQ(failed[0].http_status, 0);
  EXPECT_NE(failed[0].error.find("connect"), std::string::npos) << failed[0].error;
  EXPECT_GT(failed[0].attempt, 1);  // the same event again

  receiver_->Start(port);
  ASSERT_TRUE(WaitFor([&] { return FirstReceipts().size() >= want.size(); }))
      << FirstReceipts().size() << " of " << want.size();
  EXPECT_EQ(FirstReceipts(), want);
  for (const WebhookReceiver::Delivery& d : receiver_->deliveries()) {
    EXPECT_TRUE(d.signature_ok) << d.id << ": " << d.signature_error;
  }
  const WebhookRecord now = Fetch(w.id);
  EXPECT_TRUE(now.enabled);
  EXPECT_EQ(now.failures, 0);
}

TEST_F(WebhookDispatcherTest, FailingAndSlowEndpointsAreDisabledWithTheReasonAndSchedulingGoesOn) {
  const uint16_t port = receiver_->Start();
  receiver_->set_status(500);
  WebhookReceiver slow(tls::CertAuthority::LoadOrCreate(dir_ / "tls")->server_cert_pem(),
                       tls::CertAuthority::LoadOrCreate(dir_ / "tls")->server_key_pem(), secret_);
  const uint16_t slow_port = slow.Start();
  slow.set_delay(std::chrono::seconds(3));
  const WebhookRecord ref = Reference();
  const WebhookRecord failing = Create(port);
  const WebhookRecord sluggish = Create(slow_port);
  webhooks::DispatcherOptions o = Options();
  o.timeout = std::chrono::milliseconds(300);
  o.disable_after_failures = 3;
  o.disable_after = std::chrono::milliseconds(0);
  std::mutex mu;
  std::vector<std::string> disabled;
  o.on_disabled = [&](const WebhookRecord& w, const std::string& reason) {
    std::lock_guard lock(mu);
    disabled.push_back(std::to_string(w.id) + ": " + reason);
  };
  dispatcher_ = std::make_unique<webhooks::WebhookDispatcher>(hooks_.get(), o);
  dispatcher_->Start();

  // The core schedules and stores while deliveries fail: jobs run one after another.
  const int64_t first = core_->RunJob(1);
  ASSERT_TRUE(WaitFor([&] { return !Fetch(failing.id).enabled && !Fetch(sluggish.id).enabled; }));
  const int64_t second = core_->RunJob(1);
  EXPECT_GT(second, first);

  ASSERT_OK_AND_ASSIGN(std::vector<WebhookRecord> listed, hooks_->List("acme"));
  for (const WebhookRecord& l : listed) {
    if (l.id == failing.id) {
      EXPECT_NE(l.disabled_reason.find("3 deliveries failed in a row"), std::string::npos)
          << l.disabled_reason;
      EXPECT_NE(l.disabled_reason.find("HTTP 500"), std::string::npos) << l.disabled_reason;
    }
    if (l.id == sluggish.id) {
      EXPECT_NE(l.disabled_reason.find("timeout"), std::string::npos) << l.disabled_reason;
    }
  }
  ASSERT_OK_AND_ASSIGN(std::vector<WebhookAttempt> attempts, hooks_->Attempts(failing.id, 10));
  ASSERT_EQ(attempts.size(), 3u);
  EXPECT_EQ(attempts[0].attempt, 3);  // the first event, three times
  EXPECT_EQ(attempts[0].event_id, attempts[2].event_id);
  EXPECT_EQ(attempts[0].http_status, 500);
  {
    std::lock_guard lock(mu);
    EXPECT_EQ(disabled.size(), 2u);
  }

  // Re-enabled against a mended endpoint: what it missed arrives, both jobs', in order.
  receiver_->set_status(200);
  ASSERT_OK(hooks_->SetEnabled(failing.id, true, ""));
  const std::vector<std::string> want = Expected(ref, failing.id);
  ASSERT_TRUE(WaitFor([&] { return FirstReceipts().size() >= want.size(); }))
      << FirstReceipts().size() << " of " << want.size();
  EXPECT_EQ(FirstReceipts(), want);
  slow.Stop();
}

// The retry schedule is durable: a dispatcher that starts (gpupoold restarted, or another
// replica became leader) reads each webhook's stored failures and last attempt, and waits what
// the schedule asked rather than retrying at once; the failing event's attempts go on counting.
TEST_F(WebhookDispatcherTest, ARestartedDispatcherKeepsTheRetrySchedule) {
  const uint16_t port = receiver_->Start();
  receiver_->set_status(500);
  const WebhookRecord w = Create(port);
  webhooks::DispatcherOptions o = Options();
  o.backoff_initial = std::chrono::milliseconds(400);
  o.backoff_max = std::chrono::seconds(60);
  o.disable_after_failures = 1000;
  dispatcher_ = std::make_unique<webhooks::WebhookDispatcher>(hooks_.get(), o);
  dispatcher_->Start();
  core_->RunJob(1);
  // 400 ms · 2^(n−1) after the n-th failure: the fifth is followed by 6.4 s (at least 3.2 s).
  ASSERT_TRUE(WaitFor([&] { return Fetch(w.id).failures >= 5; }));
  dispatcher_->Stop();
  const WebhookRecord before = Fetch(w.id);
  ASSERT_GE(before.failures, 5);
  const int64_t shortest_ms = (int64_t{400} << (before.failures - 1)) / 2;

  dispatcher_ = std::make_unique<webhooks::WebhookDispatcher>(hooks_.get(), o);
  dispatcher_->Start();
  std::this_thread::sleep_for(std::chrono::seconds(1));
  EXPECT_EQ(Fetch(w.id).failures, before.failures) << "the new dispatcher retried at once";
  ASSERT_TRUE(
      WaitFor([&] { return Fetch(w.id).failures > before.failures; }, std::chrono::seconds(20)));
  ASSERT_OK_AND_ASSIGN(std::vector<WebhookAttempt> attempts, hooks_->Attempts(w.id, 1));
  ASSERT_EQ(attempts.size(), 1u);
  EXPECT_GE(attempts[0].time_ms - before.last_attempt_ms, shortest_ms);
  EXPECT_EQ(attempts[0].attempt, before.failures + 1);  // the same event's attempts go on
}

}  // namespace
}  // namespace gpupool::api::testing
