// The WebhookStore suite (scheduler/webhooks.h) on PostgreSQL: webhooks round-trip with their
// secret and start at the newest event; lists are per subtree and carry no secret; a backlog is
// the tenant's events after the cursor, in order, filtered by kind, and says how far it covers;
// attempts count failures, a 2xx moves the cursor, and only the newest attempts are kept;
// disabling keeps the reason and enabling clears it; the secret is sealed at rest and re-sealed
// when the key rotates.
#include <gtest/gtest.h>

#include <pqxx/pqxx>

#include "store/pg_store.h"
#include "store/pg_webhooks.h"
#include "tests/store/store_testing.h"
#include "tests/support/pg_fixture.h"
#include "tests/support/status_macros.h"
#include "tests/support/test_keyring.h"

namespace gpupool::testing {
namespace {

constexpr char kSecret[] = "whsec_do-not-leak";

WebhookRecord Hook(const std::string& tenant, std::vector<std::string> kinds = {}) {
  WebhookRecord w;
  w.tenant = tenant;
  w.url = "https://hooks.acme.example/gpupool";
  w.secret = kSecret;
  w.event_kinds = std::move(kinds);
  w.created_by = "key:0123456789ab";
  w.create_ms = 1'000;
  return w;
}

EventRecord Ev(const std::string& kind, const std::string& subject, const std::string& tenant) {
  return EventRecord{1, kind, subject, "m", tenant};
}

class PgWebhooksTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_OK_AND_ASSIGN(uri_, CreateTestDatabase());
    PgStoreOptions o;
    o.uri = uri_;
    o.keyring = TestKeyring();
    ASSERT_OK_AND_ASSIGN(pg_, PgStore::Open(o));
    ASSERT_OK(pg_->AcquireLeadership().status());
    ASSERT_OK_AND_ASSIGN(hooks_, PgWebhooks::Open(uri_, TestKeyring()));
  }
  void Append(std::vector<EventRecord> events) {
    std::vector<Mutation> batch;
    for (EventRecord& e : events) batch.emplace_back(AppendEvent{std::move(e)});
    ASSERT_OK(ApplyAndWait(*pg_, std::move(batch)));
  }
  std::vector<std::string> Subjects(const WebhookBacklog& b) {
    std::vector<std::string> out;
    for (const LoggedEvent& e : b.events) out.push_back(e.event.subject);
    return out;
  }
  WebhookAttempt Attempt(int64_t webhook, int64_t event, int attempt, int status) {
    WebhookAttempt a;
    a.webhook_id = webhook;
    a.event_id = event;
    a.attempt = attempt;
    a.time_ms = 10'000 + attempt;
    a.duration_ms = 5;
    a.http_status = status;
    a.error = status >= 200 && status < 300 ? "" : "HTTP " + std::to_string(status);
    return a;
  }

  std::string uri_;
  std::unique_ptr<PgStore> pg_;
  std::unique_ptr<PgWebhooks> hooks_;
};

TEST_F(PgWebhooksTest, AWebhookRoundTripsAndStartsAtTheNewestEvent) {
  Append({Ev("job.submitted", "job/1", "acme")});
  ASSERT_OK_AND_ASSIGN(WebhookRecord made, hooks_->Create(Hook("acme", {"task.state"})));
  EXPECT_GT(made.id, 0);
  EXPECT_EQ(made.secret, kSecret);
  ASSERT_OK_AND_ASSIGN(std::optional<WebhookRecord> got, hooks_->Get(made.id));
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->tenant, "acme");
  EXPECT_EQ(got->url, "https://hooks.acme.example/gpupool");
  EXPECT_EQ(got->secret, kSecret);
  EXPECT_EQ(got->event_kinds, std::vector<std::string>{"task.state"});
  EXPECT_TRUE(got->enabled);
  EXPECT_EQ(got->created_by, "key:0123456789ab");
  EXPECT_EQ(got->cursor, made.cursor);
  ASSERT_OK_AND_ASSIGN(WebhookBacklog none, hooks_->Backlog(made.id, 10));
  EXPECT_TRUE(none.events.empty());  // what happened before it is not its

  ASSERT_OK_AND_ASSIGN(std::optional<WebhookRecord> missing, hooks_->Get(made.id + 100));
  EXPECT_FALSE(missing.has_value());
  EXPECT_EQ(hooks_->Delete(made.id + 100).code(), StatusCode::kNotFound);
  ASSERT_OK(hooks_->Delete(made.id));
  ASSERT_OK_AND_ASSIGN(missing, hooks_->Get(made.id));
  EXPECT_FALSE(missing.has_value());
}

TEST_F(PgWebhooksTest, ListsAreBySubtreeAndCarryNoSecret) {
  ASSERT_OK(hooks_->Create(Hook("acme")).status());
  ASSERT_OK(hooks_->Create(Hook("acme/research")).status());
  ASSERT_OK(hooks_->Create(Hook("acmex")).status());
  ASSERT_OK_AND_ASSIGN(std::vector<WebhookRecord> acme, hooks_->List("acme"));
  ASSERT_EQ(acme.size(), 2u);
  EXPECT_EQ(acme[0].tenant, "acme");
  EXPECT_EQ(acme[1].tenant, "acme/research");
  for (const WebhookRecord& w : acme) EXPECT_TRUE(w.secret.empty());
  ASSERT_OK_AND_ASSIGN(std::vector<WebhookRecord> all, hooks_->List(""));
  EXPECT_EQ(all.size(), 3u);
}

TEST_F(PgWebhooksTest, ABacklogIsItsTenantsEventsInOrderFilteredByKind) {
  ASSERT_OK_AND_ASSIGN(WebhookRecord every, hooks_->Create(Hook("acme")));
  ASSERT_OK_AND_ASSIGN(WebhookRecord states, hooks_->Create(Hook("acme", {"task.state"})));
  Append({Ev("job.submitted", "job/1", "acme"), Ev("job.submitted", "job/2", "globex"),
          Ev("task.state", "task/1.0", "acme/research"), Ev("pool.created", "pool/p", ""),
          Ev("task.state", "task/3.0", "acmex"), Ev("job.cancelled", "job/1", "acme")});
  ASSERT_OK_AND_ASSIGN(WebhookBacklog b, hooks_->Backlog(every.id, 10));
  EXPECT_EQ(Subjects(b), (std::vector<std::string>{"job/1", "task/1.0", "job/1"}));
  EXPECT_EQ(b.events[0].event.kind, "job.submitted");
  EXPECT_EQ(b.events[1].event.tenant, "acme/research");
  EXPECT_LT(b.events[0].id, b.events[1].id);
  EXPECT_EQ(b.covered_to, every.cursor + 6);  // the page is not full: it covers every event

  ASSERT_OK_AND_ASSIGN(WebhookBacklog s, hooks_->Backlog(states.id, 10));
  EXPECT_EQ(Subjects(s), std::vector<std::string>{"task/1.0"});

  // A full page covers up to its last event only.
  ASSERT_OK_AND_ASSIGN(WebhookBacklog page, hooks_->Backlog(every.id, 2));
  EXPECT_EQ(Subjects(page), (std::vector<std::string>{"job/1", "task/1.0"}));
  EXPECT_EQ(page.covered_to, page.events[1].id);

  // The cursor moves forward only.
  ASSERT_OK(hooks_->Advance(every.id, page.covered_to));
  ASSERT_OK(hooks_->Advance(every.id, every.cursor));
  ASSERT_OK_AND_ASSIGN(WebhookBacklog rest, hooks_->Backlog(every.id, 10));
  EXPECT_EQ(Subjects(rest), std::vector<std::string>{"job/1"});
  EXPECT_EQ(rest.events[0].event.kind, "job.cancelled");
  EXPECT_EQ(hooks_->Backlog(every.id + 100, 10).status().code(), StatusCode::kNotFound);
}

TEST_F(PgWebhooksTest, AttemptsCountFailuresAndA2xxMovesTheCursor) {
  ASSERT_OK_AND_ASSIGN(WebhookRecord w, hooks_->Create(Hook("acme")));
  Append({Ev("job.submitted", "job/1", "acme"), Ev("job.submitted", "job/2", "acme")});
  ASSERT_OK_AND_ASSIGN(WebhookBacklog b, hooks_->Backlog(w.id, 10));
  ASSERT_EQ(b.events.size(), 2u);
  const int64_t first = b.events[0].id;

  ASSERT_OK_AND_ASSIGN(WebhookRecord after,
                       hooks_->RecordAttempt(Attempt(w.id, first, 1, 500), "HTTP 500"));
  EXPECT_EQ(after.failures, 1);
  EXPECT_EQ(after.first_failure_ms, 10'001);
  EXPECT_EQ(after.last_status, "HTTP 500");
  EXPECT_EQ(after.cursor, w.cursor);
  ASSERT_OK_AND_ASSIGN(after, hooks_->RecordAttempt(Attempt(w.id, first, 2, 0), "timeout"));
  EXPECT_EQ(after.failures, 2);
  EXPECT_EQ(after.first_failure_ms, 10'001);  // the run of failures began at the first
  ASSERT_OK_AND_ASSIGN(after, hooks_->RecordAttempt(Attempt(w.id, first, 3, 204), "HTTP 204"));
  EXPECT_EQ(after.failures, 0);
  EXPECT_EQ(after.first_failure_ms, 0);
  EXPECT_EQ(after.cursor, first);
  EXPECT_TRUE(after.secret.empty());
  ASSERT_OK_AND_ASSIGN(WebhookBacklog rest, hooks_->Backlog(w.id, 10));
  EXPECT_EQ(Subjects(rest), std::vector<std::string>{"job/2"});

  ASSERT_OK_AND_ASSIGN(std::vector<WebhookAttempt> attempts, hooks_->Attempts(w.id, 10));
  ASSERT_EQ(attempts.size(), 3u);
  EXPECT_EQ(attempts[0].attempt, 3);  // newest first
  EXPECT_EQ(attempts[0].http_status, 204);
  EXPECT_EQ(attempts[2].error, "HTTP 500");
  EXPECT_EQ(attempts[1].http_status, 0);

  // Only the newest kWebhookAttemptsKept stay.
  for (int i = 0; i < kWebhookAttemptsKept + 5; ++i) {
    ASSERT_OK(
        hooks_->RecordAttempt(Attempt(w.id, b.events[1].id, 10 + i, 503), "HTTP 503").status());
  }
  ASSERT_OK_AND_ASSIGN(attempts, hooks_->Attempts(w.id, 1000));
  EXPECT_EQ(attempts.size(), static_cast<size_t>(kWebhookAttemptsKept));
  EXPECT_EQ(attempts[0].attempt, 10 + kWebhookAttemptsKept + 4);
  EXPECT_EQ(hooks_->RecordAttempt(Attempt(w.id + 100, 1, 1, 200), "HTTP 200").status().code(),
            StatusCode::kNotFound);
}

TEST_F(PgWebhooksTest, DisablingKeepsTheReasonAndEnablingClearsTheFailures) {
  ASSERT_OK_AND_ASSIGN(WebhookRecord w, hooks_->Create(Hook("acme")));
  ASSERT_OK(hooks_->RecordAttempt(Attempt(w.id, 1, 1, 500), "HTTP 500").status());
  ASSERT_OK(hooks_->SetEnabled(w.id, false, "10 deliveries failed; the last: HTTP 500"));
  ASSERT_OK_AND_ASSIGN(std::vector<WebhookRecord> listed, hooks_->List("acme"));
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_FALSE(listed[0].enabled);
  EXPECT_EQ(listed[0].disabled_reason, "10 deliveries failed; the last: HTTP 500");
  ASSERT_OK(hooks_->SetEnabled(w.id, true, ""));
  ASSERT_OK_AND_ASSIGN(std::optional<WebhookRecord> got, hooks_->Get(w.id));
  EXPECT_TRUE(got->enabled);
  EXPECT_EQ(got->disabled_reason, "");
  EXPECT_EQ(got->failures, 0);
  EXPECT_EQ(hooks_->SetEnabled(w.id + 100, true, "").code(), StatusCode::kNotFound);
}

TEST_F(PgWebhooksTest, MalformedWebhooksAreRefused) {
  WebhookRecord plain = Hook("acme");
  plain.url = "http://hooks.acme.example/";
  EXPECT_EQ(hooks_->Create(plain).status().code(), StatusCode::kInvalidArgument);
  WebhookRecord kind = Hook("acme", {"task.exploded"});
  EXPECT_EQ(hooks_->Create(kind).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(hooks_->Create(Hook("")).status().code(), StatusCode::kInvalidArgument);
  WebhookRecord secretless = Hook("acme");
  secretless.secret.clear();
  EXPECT_EQ(hooks_->Create(secretless).status().code(), StatusCode::kInvalidArgument);
  ASSERT_OK_AND_ASSIGN(std::vector<WebhookRecord> none, hooks_->List(""));
  EXPECT_TRUE(none.empty());
}

std::string DumpWebhooks(const std::string& uri) {
  pqxx::connection c(uri);
  pqxx::nontransaction n(c);
  std::string out;
  for (const auto& r : n.exec("SELECT webhooks::text FROM webhooks")) out += r[0].c_str();
  return out;
}

TEST_F(PgWebhooksTest, TheSecretIsSealedAtRestAndReSealedWhenTheKeyRotates) {
  ASSERT_OK_AND_ASSIGN(WebhookRecord w, hooks_->Create(Hook("acme")));
  std::string dump = DumpWebhooks(uri_);
  EXPECT_EQ(dump.find(kSecret), std::string::npos) << dump;
  EXPECT_NE(dump.find("gpsec1." + TestKeyring()->current_id()), std::string::npos) << dump;
  ASSERT_OK_AND_ASSIGN(auto keyless, PgWebhooks::Open(uri_, nullptr));
  EXPECT_EQ(keyless->Create(Hook("acme")).status().code(), StatusCode::kFailedPrecondition);
  pg_.reset();

  auto rotated = TestKeyring(std::string(kTestSecretsKeyB) + "\n" + kTestSecretsKeyA + "\n");
  PgStoreOptions o;
  o.uri = uri_;
  o.keyring = rotated;
  ASSERT_OK_AND_ASSIGN(auto pg, PgStore::Open(o));
  ASSERT_OK(pg->AcquireLeadership().status());
  ASSERT_OK(pg->Recover().status());
  EXPECT_EQ(pg->last_reseal().webhooks, 1);
  dump = DumpWebhooks(uri_);
  EXPECT_EQ(dump.find("gpsec1." + TestKeyring()->current_id()), std::string::npos) << dump;
  ASSERT_OK_AND_ASSIGN(auto reopened, PgWebhooks::Open(uri_, TestKeyring(kTestSecretsKeyB)));
  ASSERT_OK_AND_ASSIGN(std::optional<WebhookRecord> got, reopened->Get(w.id));
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->secret, kSecret);
}

}  // namespace
}  // namespace gpupool::testing
