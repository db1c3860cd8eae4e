// WebhookService through both faces on a real PostgreSQL (docs/webhooks.md): the signing secret
// comes back once, from CreateWebhook, and never again; a tenant-admin manages its subtree's
// webhooks and another subtree's are NOT_FOUND; URLs and event kinds are validated with the
// field named; a disabled webhook shows its reason, and EnableWebhook clears it; the attempts
// come with GetWebhook.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "gpupool/v1/webhooks.grpc.pb.h"
#include "store/pg_webhooks.h"
#include "tests/api/pg_stack.h"
#include "tests/support/pg_fixture.h"
#include "tests/support/status_macros.h"

namespace gpupool::api::testing {
namespace {

class WebhookApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_OK_AND_ASSIGN(std::string uri, ::gpupool::testing::CreateTestDatabase());
    ASSERT_OK_AND_ASSIGN(hooks_, PgWebhooks::Open(uri, ::gpupool::testing::TestKeyring()));
    ASSERT_OK_AND_ASSIGN(
        stack_, PgStack::Start(uri, [this](ServiceOptions* o) { o->webhooks = hooks_.get(); }));
    stub_ = v1::WebhookService::NewStub(stack_->Channel());
  }

  grpc::Status Create(const std::string& token, const std::string& tenant, const std::string& url,
                      v1::CreateWebhookResponse* resp, std::vector<std::string> kinds = {}) {
    v1::CreateWebhookRequest req;
    req.mutable_webhook()->set_tenant(tenant);
    req.mutable_webhook()->set_url(url);
    for (const std::string& k : kinds) req.mutable_webhook()->add_event_kinds(k);
    return stub_->CreateWebhook(As(token).get(), req, resp);
  }

  std::unique_ptr<PgWebhooks> hooks_;
  std::unique_ptr<PgStack> stack_;
  std::unique_ptr<v1::WebhookService::Stub> stub_;
};

TEST_F(WebhookApiTest, TheSecretIsShownOnceAndATenantSeesOnlyItsOwn) {
  v1::CreateWebhookResponse made;
  grpc::Status st = Create(kTenantToken, "acme/research", "https://hooks.acme.example/gp", &made,
                           {"task.state", "job.cancelled"});
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_GT(made.webhook().id(), 0);
  EXPECT_TRUE(made.webhook().enabled());
  EXPECT_EQ(made.secret().rfind("whsec_", 0), 0u);
  EXPECT_EQ(made.secret().size(), 70u);
  Result<std::optional<WebhookRecord>> stored = hooks_->Get(made.webhook().id());
  ASSERT_TRUE(stored.ok() && stored->has_value());
  const std::string kept = stored->value().secret;
  EXPECT_EQ(kept, made.secret());  // what the dispatcher signs with

  v1::ListWebhooksResponse listed;
  ASSERT_TRUE(stub_->ListWebhooks(As(kTenantToken).get(), {}, &listed).ok());
  ASSERT_EQ(listed.webhooks_size(), 1);
  EXPECT_EQ(listed.webhooks(0).event_kinds_size(), 2);
  EXPECT_EQ(listed.webhooks(0).DebugString().find(made.secret()), std::string::npos);

  // Another subtree: hidden. Its own list is empty.
  v1::GetWebhookRequest get;
  get.set_id(std::to_string(made.webhook().id()));
  v1::GetWebhookResponse got;
  EXPECT_EQ(stub_->GetWebhook(As(kOtherToken).get(), get, &got).error_code(),
            grpc::StatusCode::NOT_FOUND);
  v1::DeleteWebhookRequest del;
  del.set_id(std::to_string(made.webhook().id()));
  v1::DeleteWebhookResponse deleted;
  EXPECT_EQ(stub_->DeleteWebhook(As(kOtherToken).get(), del, &deleted).error_code(),
            grpc::StatusCode::NOT_FOUND);
  v1::ListWebhooksResponse others;
  ASSERT_TRUE(stub_->ListWebhooks(As(kOtherToken).get(), {}, &others).ok());
  EXPECT_EQ(others.webhooks_size(), 0);
  // Above its subtree: refused.
  v1::CreateWebhookResponse refused;
  EXPECT_EQ(Create(kTenantToken, "acme", "https://hooks.acme.example/gp", &refused).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  // The parent's tenant-admin and an admin see it.
  ASSERT_TRUE(stub_->GetWebhook(As(kParentToken).get(), get, &got).ok());
  EXPECT_EQ(got.webhook().tenant(), "acme/research");
  ASSERT_TRUE(stub_->DeleteWebhook(As(kAdminToken).get(), del, &deleted).ok());
  EXPECT_EQ(stub_->GetWebhook(As(kTenantToken).get(), get, &got).error_code(),
            grpc::StatusCode::NOT_FOUND);
}

TEST_F(WebhookApiTest, BadUrlsAndKindsAreRefusedNamingTheField) {
  struct Case {
    std::string url;
    std::vector<std::string> kinds;
    std::string mentions;
  };
  for (const Case& c : std::vector<Case>{
           {"http://hooks.acme.example/", {}, "https://"},
           {"http://127.0.0.1:9000/", {}, "https://"},  // not without --webhooks-allow-loopback
           {"hooks.acme.example", {}, "https://"},
           {"https://user@hooks.acme.example/", {}, "user info"},
           {"https://hooks.acme.example:0/", {}, "port"},
           {"https://hooks.acme.example/", {"task.exploded"}, "unknown event kind"},
           {"https://hooks.acme.example/", {"task.state", "task.state"}, "twice"}}) {
    v1::CreateWebhookResponse resp;
    grpc::Status st = Create(kTenantToken, "acme/research", c.url, &resp, c.kinds);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << c.url;
    EXPECT_NE(st.error_message().find("webhook."), std::string::npos) << st.error_message();
    EXPECT_NE(st.error_message().find(c.mentions), std::string::npos) << st.error_message();
  }
  ASSERT_OK_AND_ASSIGN(std::vector<WebhookRecord> none, hooks_->List(""));
  EXPECT_TRUE(none.empty());
}

TEST_F(WebhookApiTest, RestShowsTheDisabledReasonAndAttemptsAndEnablesAgain) {
  HttpResult made = stack_->Rest(
      http::verb::post, "/v1/webhooks",
      R"({"webhook": {"tenant": "acme/research", "url": "https://hooks.acme.example/gp"}})",
      kTenantToken);
  ASSERT_EQ(made.status, 200) << made.body;
  EXPECT_NE(made.body.find("\"secret\":\"whsec_"), std::string::npos) << made.body;
  ASSERT_OK_AND_ASSIGN(std::vector<WebhookRecord> all, hooks_->List(""));
  ASSERT_EQ(all.size(), 1u);
  const std::string id = std::to_string(all[0].id);

  WebhookAttempt a;
  a.webhook_id = all[0].id;
  a.event_id = 7;
  a.attempt = 1;
  a.time_ms = 1'000;
  a.http_status = 500;
  a.error = "HTTP 500";
  ASSERT_OK(hooks_->RecordAttempt(a, "HTTP 500").status());
  ASSERT_OK(hooks_->SetEnabled(a.webhook_id, false, "10 deliveries failed; the last: HTTP 500"));

  HttpResult got = stack_->Rest(http::verb::get, "/v1/webhooks/" + id, "", kTenantToken);
  ASSERT_EQ(got.status, 200) << got.body;
  EXPECT_NE(got.body.find("\"enabled\":false"), std::string::npos) << got.body;
  EXPECT_NE(got.body.find("10 deliveries failed; the last: HTTP 500"), std::string::npos)
      << got.body;
  EXPECT_NE(got.body.find("\"deliveryId\":\"" + id + "-7\""), std::string::npos) << got.body;
  EXPECT_EQ(got.body.find("whsec_"), std::string::npos) << got.body;
  HttpResult listed = stack_->Rest(http::verb::get, "/v1/webhooks", "", kTenantToken);
  EXPECT_NE(listed.body.find("10 deliveries failed"), std::string::npos) << listed.body;

  HttpResult enabled =
      stack_->Rest(http::verb::post, "/v1/webhooks/" + id + ":enable", "{}", kTenantToken);
  ASSERT_EQ(enabled.status, 200) << enabled.body;
  EXPECT_NE(enabled.body.find("\"enabled\":true"), std::string::npos) << enabled.body;
  EXPECT_NE(enabled.body.find("\"disabledReason\":\"\""), std::string::npos) << enabled.body;

  HttpResult other = stack_->Rest(http::verb::get, "/v1/webhooks/" + id, "", kOtherToken);
  EXPECT_EQ(other.status, 404) << other.body;
  HttpResult gone = stack_->Rest(http::verb::delete_, "/v1/webhooks/" + id, "", kTenantToken);
  EXPECT_EQ(gone.status, 200) << gone.body;
}

}  // namespace
}  // namespace gpupool::api::testing
