// The web console in a real headless Chromium (Debian's `chromium`, driven over the DevTools
// protocol): a real gpupoold on embedded PostgreSQL with API tokens for an admin and two tenants,
// two gpupool-agent processes on the simulated backend, jobs from both tenants — one of them
// pending for want of GPUs. Checks that the page loads under its security headers, lists pools,
// nodes (with who holds which GPU) and jobs, that a tenant's token shows only that tenant's jobs,
// that a job page says why a task is pending and streams a task's logs, and that a command full
// of markup stays text. With GPUPOOL_CONSOLE_SCREENSHOTS=<dir> it also leaves PNGs of the main
// pages there (docs/img/ holds the committed ones).
#include <gtest/gtest.h>
#include <signal.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <thread>

#include "tests/api/http_client.h"
#include "tests/e2e/cdp_client.h"
#include "tests/support/agent_process.h"
#include "tests/support/daemon_process.h"
#include "tests/support/jwt_mint.h"
#include "tests/support/oidc_provider.h"
#include "tests/support/wait_for.h"

namespace gpupool {
namespace {

using api::testing::HttpCall;
using api::testing::HttpResult;
using api::testing::http::verb;
using testing::ChildProcess;
using testing::DaemonProcess;

constexpr char kAdmin[] = "admin-token-console-0123456789";
constexpr char kAcme[] = "acme-token-console-0123456789";
constexpr char kGlobex[] = "globex-token-console-0123456789";

class ConsoleE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string chromium = GPUPOOL_CHROMIUM;
    ASSERT_FALSE(chromium.empty() || chromium.ends_with("NOTFOUND"))
        << "chromium not found: scripts/install-deps installs it (Debian package chromium)";
    Result<std::string> dir = testing::MakeTempDir("gpupool-console");
    ASSERT_TRUE(dir.ok());
    dir_ = *dir;
    // Single sign-on: a real OpenID provider on loopback (tests/oidc_provider), whose accounts
    // carry the tenant and role claims gpupoold reads. It starts once gpupoold's port (its
    // redirect URI) is known; gpupoold fetches its keys when it comes up.
    testing::OidcProvider::Options idp;
    idp.dir = dir_;
    idp.keys = {{"console-key-1", testing::Rsa().private_pem}};
    idp.accounts = {"erin=acme/research:tenant-admin", "gus=globex:member"};
    provider_ = std::make_unique<testing::OidcProvider>(idp);
    std::ofstream(dir_ + "/gpupoold.yaml")
        << "auth:\n  api_tokens:\n"
        << "    - {token: " << kAdmin << ", principal: ops, admin: true}\n"
        << "    - {token: " << kAcme << ", principal: acme/research, role: tenant-admin}\n"
        << "    - {token: " << kGlobex << ", principal: globex}\n"
        << "  oidc:\n    issuer: " << provider_->issuer() << "\n    audience: gpupool\n"
        << "    console: {client_id: gpupool-console, scopes: [openid, gpupool]}\n"
        << "price_plans:\n  - name: default\n    currency: USD\n    rates:\n"
        << "      - {unit: tflops-hour, price: 3600}\n      - {unit: device-hour, price: 7200}\n"
        << "scheduler:\n  heartbeat_interval_ms: 200\n  heartbeat_timeout_ms: 3000\n  "
           "node_lease_ms: 3000\n"
           "  stop_grace_period_ms: 1000\n";
    auto d = DaemonProcess::Start({"", {"--config", dir_ + "/gpupoold.yaml"}});
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    daemon_ = std::move(d).value();
    idp.redirect_uris = {"http://127.0.0.1:" + std::to_string(daemon_->http_port()) + "/console/"};
    provider_ = std::make_unique<testing::OidcProvider>(idp, provider_->port());
    ASSERT_TRUE(provider_->Start().ok());
    ASSERT_EQ(Rest(kAdmin, verb::post, "/v1/pools",
                   R"({"pool": {"name": "gpu", "visibility": "VISIBILITY_PUBLIC"}})")
                  .status,
              200);
    ASSERT_EQ(Rest(kAdmin, verb::post, "/v1/pools",
                   R"({"pool": {"name": "shared", "visibility": "VISIBILITY_PUBLIC",
                                "sharingMode": "SHARING_MODE_FRACTIONAL",
                                "requiredCapabilities": ["none"]}})")
                  .status,
              200);
    for (const char* t : {"acme", "acme/research", "globex"}) {
      ASSERT_EQ(Rest(kAdmin, verb::post, "/v1/tenants",
                     std::string(R"({"tenant": {"path": ")") + t + "\"}}")
                    .status,
                200);
    }
    ASSERT_EQ(Rest(kAdmin, verb::put, "/v1/quotas/acme%2Fresearch/gpu",
                   R"({"quota": {"guaranteed": {"devices": 1}, "limit": {"devices": 4}}})")
                  .status,
              200);
    // node-a: two whole GPUs in "gpu"; node-b: in "shared", GPU 1 split into MIG instances.
    StartAgent("node-a", "gpu", "  - {model: H100-SXM, count: 2}\n");
    StartAgent("node-b", "shared",
               "  - {model: H100-SXM, count: 2, mig: {\"1\": [3g.40gb, 2g.20gb, 2g.20gb]}}\n");
  }

  void TearDown() override {
    browser_.reset();
    for (auto& [name, agent] : agents_) {
      agent->Signal(SIGTERM);
      agent->Wait(std::chrono::seconds(10));
    }
    agents_.clear();
    daemon_.reset();
    if (!HasFailure()) std::filesystem::remove_all(dir_);
  }

  HttpResult Rest(const std::string& token, verb v, const std::string& target,
                  const std::string& body = "") {
    return HttpCall(daemon_->http_port(), v, target, body, {{"Authorization", "Bearer " + token}});
  }

  void StartAgent(const std::string& node, const std::string& pool, const std::string& gpus) {
    testing::AgentProcessOptions o;
    o.dir = dir_;
    o.node = node;
    o.scheduler = daemon_->grpc_address();
    o.pool = pool;
    o.gpus_yaml = gpus;
    auto child = testing::StartAgentProcess(o);
    ASSERT_TRUE(child.ok());
    agents_[node] = std::move(child).value();
    ASSERT_TRUE(testing::WaitFor(
        [&] {
          HttpResult r = Rest(kAdmin, verb::get, "/v1/nodes/" + node);
          return r.status == 200 && r.body.find("NODE_STATE_READY") != std::string::npos;
        },
        std::chrono::seconds(120), std::chrono::milliseconds(100)))
        << "agent " << node << " did not register";
  }

  // Submits a one-task job of `resources` (ResourceRequest JSON) running `script` in `pool` as
  // `token`'s `tenant`; returns its id.
  std::string Submit(const std::string& token, const std::string& tenant, const std::string& pool,
                     const std::string& resources, const std::string& script) {
    const HttpResult r =
        Rest(token, verb::post, "/v1/jobs",
             R"({"spec": {"tenant": ")" + tenant + R"(", "pool": ")" + pool +
                 R"(", "taskCount": 1, "template": {"command": ["/bin/sh", "-c", ")" + script +
                 R"("], "resources": )" + resources + "}}}");
    EXPECT_EQ(r.status, 200) << r.body;
    const size_t at = r.body.find("\"jobId\":\"");
    if (at == std::string::npos) return "";
    const size_t start = at + 9;
    return r.body.substr(start, r.body.find('"', start) - start);
  }

  bool TaskState(const std::string& job, const std::string& state) {
    return testing::WaitFor(
        [&] {
          return Rest(kAdmin, verb::get, "/v1/jobs/" + job).body.find(state) != std::string::npos;
        },
        std::chrono::seconds(120), std::chrono::milliseconds(100));
  }

  void Shot(const std::string& name) {
    const char* out = std::getenv("GPUPOOL_CONSOLE_SCREENSHOTS");
    const std::string dir = out != nullptr ? out : dir_;
    Status st = browser_->Screenshot(dir + "/" + name);
    EXPECT_TRUE(st.ok()) << st.ToString();
  }

  // Signs out if signed in (the page's own button, no reload), then signs in with `token`
  // through the form.
  void SignIn(const std::string& token) {
    browser_->Eval(
        "if (!document.getElementById('logout').hidden) "
        "document.getElementById('logout').click(); 'ok'");
    ASSERT_EQ(browser_->WaitEval("String(document.readyState === 'complete' && "
                                 "!document.getElementById('login').hidden)",
                                 "true"),
              "true");
    browser_->Eval("document.getElementById('token').value = '" + token +
                   "'; document.getElementById('login').requestSubmit(); 'ok'");
  }

  // Opens `hash` and waits until its view has loaded data.
  void Open(const std::string& hash) {
    browser_->Eval("location.hash = '" + hash + "'; 'ok'");
    ASSERT_EQ(browser_->WaitEval("String(location.hash === '" + hash +
                                     "' && document.body.dataset.loaded === 'true')",
                                 "true"),
              "true")
        << "error line: " << browser_->Eval("document.getElementById('error').textContent");
  }

  // Sets a form input's value as typing does (the view listens for `input`).
  void Fill(const std::string& id, const std::string& value) {
    browser_->Eval("(() => { const e = document.getElementById('" + id + "'); e.value = '" + value +
                   "'; e.dispatchEvent(new Event('input')); " +
                   "e.dispatchEvent(new Event('change')); return 'ok'; })()");
  }

  void LaunchBrowser() {
    auto cdp = testing::Cdp::Launch(GPUPOOL_CHROMIUM, dir_, 1400, 900);
    ASSERT_TRUE(cdp.ok()) << cdp.status().ToString();
    browser_ = std::move(cdp).value();
    const std::string url = "http://127.0.0.1:" + std::to_string(daemon_->http_port()) + "/";
    ASSERT_TRUE(browser_->Call("Page.navigate", "{\"url\":\"" + url + "\"}").ok());
  }

  // Signs in through the identity provider as `login`: the page's single sign-on button, the
  // provider's own sign-in and consent pages (skipped when its session already has them), and
  // back on the console, signed in.
  void SignInWithSso(const std::string& login) {
    ASSERT_EQ(browser_->WaitEval("String(!document.getElementById('login').hidden && "
                                 "!document.getElementById('sso').hidden)",
                                 "true"),
              "true")
        << browser_->Eval("document.getElementById('sso-note').textContent");
    browser_->Eval("document.getElementById('sso').click(); 'ok'");
    const std::string console = "http://127.0.0.1:" + std::to_string(daemon_->http_port());
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (std::chrono::steady_clock::now() < deadline) {
      const std::string origin = browser_->Eval("location.origin");
      if (origin == console) {
        if (browser_->Eval("String(document.getElementById('who')?.textContent.includes('" + login +
                           "'))") == "true") {
          return;
        }
      } else if (browser_->Eval("String(document.readyState === 'complete' && "
                                "!!document.querySelector('input[name=login]'))") == "true") {
        browser_->Eval("document.querySelector('input[name=login]').value = '" + login +
                       "'; document.querySelector('input[name=password]').value = 'any'; "
                       "document.querySelector('form').submit(); 'ok'");
      } else if (browser_->Eval("String(document.readyState === 'complete' && "
                                "!!document.querySelector('input[name=prompt][value=consent]'))") ==
                 "true") {
        browser_->Eval("document.querySelector('form').submit(); 'ok'");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    FAIL() << "not signed in through the provider; at " << browser_->Eval("location.href") << ": "
           << browser_->Eval("document.body?.innerText");
  }

  std::string dir_;
  std::unique_ptr<testing::OidcProvider> provider_;
  std::unique_ptr<DaemonProcess> daemon_;
  std::map<std::string, std::unique_ptr<ChildProcess>> agents_;
  std::unique_ptr<testing::Cdp> browser_;
};

TEST_F(ConsoleE2eTest, ShowsPoolsNodesJobsAndWhyPendingToEachCredential) {
  // The static files answer with their security headers, unauthenticated.
  const HttpResult index = HttpCall(daemon_->http_port(), verb::get, "/console/");
  ASSERT_EQ(index.status, 200);
  EXPECT_EQ(index.headers["Content-Type"], "text/html; charset=utf-8");
  EXPECT_EQ(index.headers["X-Content-Type-Options"], "nosniff");
  EXPECT_NE(std::string(index.headers["Content-Security-Policy"]).find("script-src 'self'"),
            std::string::npos);
  const HttpResult js = HttpCall(daemon_->http_port(), verb::get, "/console/app.js");
  EXPECT_EQ(js.headers["Content-Type"], "text/javascript; charset=utf-8");
  const HttpResult root = HttpCall(daemon_->http_port(), verb::get, "/");
  EXPECT_EQ(root.status, 302);
  EXPECT_EQ(root.headers["Location"], "/console/");

  // acme holds both GPUs of pool gpu (node-a), so acme's next job there waits.
  const std::string kTwo = R"({"wholeGpus": {"count": 2}})";
  const std::string running = Submit(kAcme, "acme/research/alice", "gpu", kTwo,
                                     "echo hello-from-the-console; echo '<img src=x "
                                     "onerror=window.pwned=1>'; sleep 600");
  // On node-b: two fractional globex jobs and one acme job on a MIG instance.
  const std::string kSlice = R"({"fractional": {"milliTflops": "300000", "vramMib": "20480"}})";
  const std::string other = Submit(kGlobex, "globex", "shared", kSlice, "sleep 600");
  const std::string other2 = Submit(kGlobex, "globex", "shared", kSlice, "sleep 600");
  const std::string mig = Submit(kAcme, "acme/research/carol", "shared",
                                 R"({"mig": {"profile": "2g.20gb"}})", "sleep 600");
  for (const std::string& job : {running, other, other2, mig}) {
    ASSERT_TRUE(TaskState(job, "TASK_STATE_RUNNING"))
        << Rest(kAdmin, verb::get, "/v1/jobs/" + job).body;
  }
  const std::string pending =
      Submit(kAcme, "acme/research/bob", "gpu", R"({"wholeGpus": {"count": 1}})", "echo never");
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        const std::string body = Rest(kAdmin, verb::get, "/v1/jobs/" + pending).body;
        const size_t tasks = body.find("\"tasks\":[");
        const size_t reason = body.find("\"reason\":\"", tasks);
        return body.find("TASK_STATE_PENDING") != std::string::npos && tasks != std::string::npos &&
               reason != std::string::npos && body[reason + 10] != '"';
      },
      std::chrono::seconds(120), std::chrono::milliseconds(100)))
      << Rest(kAdmin, verb::get, "/v1/jobs/" + pending).body;

  LaunchBrowser();

  // Admin: pools, both nodes with their four GPUs (one split into MIG slices), and who holds them.
  SignIn(kAdmin);
  Open("#/pools");
  EXPECT_EQ(browser_->WaitEval("String(document.querySelectorAll('#nodes .node').length)", "2"),
            "2");
  EXPECT_EQ(browser_->Eval("String(document.querySelectorAll('#nodes .gpu').length)"), "4");
  EXPECT_EQ(browser_->WaitEval("String(document.querySelectorAll('#nodes .holder').length)", "5"),
            "5");
  EXPECT_EQ(browser_->Eval("String(document.querySelectorAll('#nodes .slice').length)"), "3");
  EXPECT_EQ(browser_->Eval("String(document.querySelectorAll('#nodes .slice.held').length)"), "1");
  // Every GPU box shows its agent's last sample (utilization, power, temperature).
  EXPECT_EQ(browser_->WaitEval(
                "String(document.querySelectorAll('#nodes .gpu .sample .util').length)", "4"),
            "4");
  EXPECT_EQ(browser_->Eval("document.querySelector('#pools tr[data-pool=gpu] td').textContent"),
            "gpu");
  Shot("console-pools.png");

  // Pool policies: a compute overcommit below 1 is refused next to its field; best-fit with MIG
  // re-layout on idle is stored and shown.
  browser_->Eval(
      "document.querySelector('#pools tr[data-pool=shared] button.edit-pool').click();"
      " 'ok'");
  ASSERT_EQ(browser_->WaitEval("String(!!document.getElementById('pool-form'))", "true"), "true");
  Fill("p-compute", "0.5");
  browser_->Eval("document.getElementById('pool-save').click(); 'ok'");
  EXPECT_EQ(browser_->WaitEval("String(document.querySelector('.field-error[data-for=\"p-compute"
                               "\"]').textContent.startsWith('pool.compute_overcommit'))",
                               "true"),
            "true")
      << browser_->Eval("document.getElementById('pool-form').textContent");
  Fill("p-compute", "1");
  Fill("p-strategy", "best-fit");
  Fill("p-relayout", "MIG_RELAYOUT_IDLE");
  browser_->Eval("document.getElementById('pool-save').click(); 'ok'");
  EXPECT_EQ(browser_->WaitEval("String(!document.getElementById('pool-form') && document."
                               "querySelector('#pools tr[data-pool=shared]').textContent"
                               ".includes('best-fit'))",
                               "true"),
            "true");
  const HttpResult pool = Rest(kAdmin, verb::get, "/v1/pools/shared");
  EXPECT_NE(pool.body.find("\"placementStrategy\":\"best-fit\""), std::string::npos) << pool.body;
  EXPECT_NE(pool.body.find("MIG_RELAYOUT_IDLE"), std::string::npos) << pool.body;

  // Node actions: the admin cordons node-b from its card (running work stays), then uncordons it.
  browser_->Eval(
      "document.querySelector('#nodes section[data-node=\"node-b\"] "
      "button.cordon').click(); 'ok'");
  EXPECT_EQ(browser_->WaitEval("String(document.querySelector('#nodes section[data-node=\"node-b"
                               "\"] h3').textContent.includes('CORDONED') && !!document."
                               "querySelector('#nodes section[data-node=\"node-b\"] "
                               "button.uncordon'))",
                               "true"),
            "true");
  EXPECT_NE(Rest(kAdmin, verb::get, "/v1/nodes/node-b").body.find("NODE_STATE_CORDONED"),
            std::string::npos);
  browser_->Eval(
      "document.querySelector('#nodes section[data-node=\"node-b\"] "
      "button.uncordon').click(); 'ok'");
  EXPECT_EQ(browser_->WaitEval("String(document.querySelector('#nodes section[data-node=\"node-b"
                               "\"] h3').textContent.includes('READY'))",
                               "true"),
            "true");
  const HttpResult cordons = Rest(kAdmin, verb::get, "/v1/audit?resource=node%2Fnode-b");
  EXPECT_NE(cordons.body.find("CordonNode"), std::string::npos) << cordons.body;
  EXPECT_NE(cordons.body.find("UncordonNode"), std::string::npos) << cordons.body;

  // Admin: every job, the hostile command shown as text and never run as markup.
  Open("#/jobs");
  EXPECT_EQ(browser_->WaitEval("String(document.querySelectorAll('#jobs tbody tr').length)", "5"),
            "5");
  EXPECT_EQ(browser_->Eval("String(document.querySelector('#jobs').textContent.includes("
                           "'<img src=x onerror=window.pwned=1>'))"),
            "true");
  EXPECT_EQ(browser_->Eval("String(document.querySelectorAll('main img').length)"), "0");
  Shot("console-jobs.png");

  // The pending job's page says why, and the running job's page streams its logs.
  Open("#/jobs/" + pending);
  const std::string why = browser_->WaitEval(
      "String(document.querySelector('#tasks .task-reason')?.textContent.length > 0)", "true");
  EXPECT_EQ(why, "true");
  const std::string reason =
      browser_->Eval("document.querySelector('#tasks .task-reason').textContent");
  EXPECT_FALSE(reason.empty());
  EXPECT_EQ(browser_->Eval("document.querySelector('#job-reason')?.textContent"), reason);
  Shot("console-job-pending.png");
  Open("#/jobs/" + running);
  browser_->Eval("document.querySelector('#tasks button').click(); 'ok'");
  EXPECT_EQ(browser_->WaitEval("String(document.getElementById('logs').textContent.includes("
                               "'hello-from-the-console'))",
                               "true"),
            "true");
  EXPECT_EQ(browser_->Eval("String(window.pwned === undefined)"), "true");

  // The job page is live: it holds GET /v1/jobs/{id}:watch open, so cancelling the job elsewhere
  // shows on the page as an event and a new state, without reloading it.
  EXPECT_EQ(browser_->WaitEval("document.getElementById('job-live').className", "live on"),
            "live on");
  ASSERT_EQ(Rest(kAdmin, verb::post, "/v1/jobs/" + running + ":cancel", "{}").status, 200);
  EXPECT_EQ(browser_->WaitEval("String(Number(document.getElementById('job-live').dataset.events)"
                               " > 0 && document.getElementById('job').textContent.includes("
                               "'CANCEL') && document.querySelectorAll('#job-events li').length"
                               " > 0)",
                               "true"),
            "true");
  Shot("console-job-live.png");

  Open("#/tenants");
  EXPECT_EQ(browser_->WaitEval(
                "String(!!document.querySelector('#quotas tr[data-quota=\"acme/research@gpu\"]'))",
                "true"),
            "true");
  Shot("console-tenants.png");

  // The admin edits acme/research's quota in pool gpu: a bad amount is refused next to its field
  // (nothing changes), a good one is stored and shown, and the audit log has the change.
  browser_->Eval(
      "document.querySelector('#quotas tr[data-quota=\"acme/research@gpu\"] "
      "button.edit-quota').click(); 'ok'");
  ASSERT_EQ(browser_->WaitEval("String(!!document.getElementById('quota-form'))", "true"), "true");
  Fill("q-guaranteed-devices", "-1");
  browser_->Eval("document.getElementById('quota-save').click(); 'ok'");
  EXPECT_EQ(browser_->WaitEval("String(document.querySelector('.field-error[data-for=\""
                               "q-guaranteed-devices\"]').textContent.startsWith("
                               "'quota.guaranteed.devices'))",
                               "true"),
            "true")
      << browser_->Eval("document.getElementById('quota-form').textContent");
  EXPECT_NE(Rest(kAdmin, verb::get, "/v1/quotas/acme%2Fresearch/gpu").body.find("\"devices\":1"),
            std::string::npos);
  Fill("q-guaranteed-devices", "2");
  Fill("q-limit-devices", "4");  // as it was: what follows needs room under the limit
  browser_->Eval("document.getElementById('quota-save').click(); 'ok'");
  EXPECT_EQ(browser_->WaitEval("String(!document.getElementById('quota-form') && "
                               "document.querySelector('#quotas tr[data-quota=\"acme/research@gpu"
                               "\"]').textContent.includes('2 devices'))",
                               "true"),
            "true");
  const HttpResult quota = Rest(kAdmin, verb::get, "/v1/quotas/acme%2Fresearch/gpu");
  const size_t limit_at = quota.body.find("\"limit\":");
  ASSERT_NE(limit_at, std::string::npos) << quota.body;
  EXPECT_NE(quota.body.substr(0, limit_at).find("\"devices\":2"), std::string::npos) << quota.body;
  EXPECT_NE(quota.body.find("\"devices\":4", limit_at), std::string::npos) << quota.body;
  Open("#/audit?verb=SetQuota");
  EXPECT_EQ(browser_->WaitEval("String([...document.querySelectorAll('#audit tr[data-verb="
                               "\"SetQuota\"] .resource')].some((td) => td.textContent === "
                               "'quota/acme/research/gpu'))",
                               "true"),
            "true")
      << browser_->Eval("document.getElementById('view').textContent");
  EXPECT_EQ(browser_->Eval("String([...document.querySelectorAll('#audit tbody tr')].every((tr) "
                           "=> tr.dataset.verb === 'SetQuota'))"),
            "true");
  Shot("console-audit.png");

  // A service of acme's whose replica asks for both GPUs of pool gpu while dave's job holds
  // them: the services page lists it with its pending replica, linked to the replica's job, and
  // says why fewer are ready than desired.
  const std::string holder = Submit(kAcme, "acme/research/dave", "gpu", kTwo, "sleep 600");
  ASSERT_TRUE(TaskState(holder, "TASK_STATE_RUNNING"))
      << Rest(kAdmin, verb::get, "/v1/jobs/" + holder).body;
  const HttpResult created =
      Rest(kAcme, verb::post, "/v1/services",
           R"({"service": {"name": "chat", "tenant": "acme/research/web", "pool": "gpu", )"
           R"("template": )"
           R"({"command": ["/bin/sh", "-c", "exec sleep 600"], "resources": {"wholeGpus": )"
           R"({"count": 2}}, "ports": [{"port": 18080, "name": "http"}]}, "port": 18080, )"
           R"("readinessPath": "/", "minReplicas": 1, "maxReplicas": 2, "idle": "60s"}})");
  ASSERT_EQ(created.status, 200) << created.body;
  Open("#/services");
  EXPECT_EQ(browser_->WaitEval("String(!!document.querySelector('#services "
                               "tr[data-service=\"acme/research/web/chat\"]'))",
                               "true"),
            "true");
  EXPECT_EQ(browser_->WaitEval("String(document.querySelectorAll('section.service "
                               ".replicas tbody tr').length)",
                               "1"),
            "1");
  // Why: the placement verdict on the replica, read again while it waits (not just "starting").
  EXPECT_EQ(browser_->WaitEval("String(document.querySelector('#services td.below')"
                               ".textContent.startsWith('NO_CAPACITY: 0 of 1 replicas ready'))",
                               "true"),
            "true")
      << Rest(kAdmin, verb::get, "/v1/services").body;
  EXPECT_EQ(browser_->Eval("String(document.querySelector('#services td.counts').textContent)"),
            "0 / 1");
  EXPECT_EQ(browser_->Eval("String(document.querySelector('.replicas a').getAttribute('href')"
                           ".startsWith('#/jobs/'))"),
            "true");
  Shot("console-services.png");

  // Price plans: the admin writes a new version of the default plan from its card; a negative
  // price is refused next to that rate's field (nothing stored), a good one is stored as
  // version 2 and audited.
  Open("#/priceplans");
  ASSERT_EQ(browser_->WaitEval("String(!!document.querySelector('section.plan[data-plan="
                               "\"default\"] button.edit-plan'))",
                               "true"),
            "true");
  Shot("console-priceplans.png");
  browser_->Eval(
      "document.querySelector('section.plan[data-plan=\"default\"] button.edit-plan').click(); "
      "'ok'");
  ASSERT_EQ(browser_->WaitEval("String(!!document.getElementById('plan-form'))", "true"), "true");
  EXPECT_EQ(browser_->Eval("document.getElementById('p-rate-0-price').value"), "3600");
  Fill("p-rate-0-price", "-1");
  browser_->Eval("document.getElementById('plan-save').click(); 'ok'");
  EXPECT_EQ(browser_->WaitEval("String(document.querySelector('.field-error[data-for=\""
                               "p-rate-0-price\"]').textContent.startsWith('plan.rates[0].price'))",
                               "true"),
            "true")
      << browser_->Eval("document.getElementById('plan-form').textContent");
  EXPECT_EQ(Rest(kAdmin, verb::get, "/v1/priceplans?name=default").body.find("\"version\":\"2\""),
            std::string::npos);
  Fill("p-rate-0-price", "4000");
  browser_->Eval("document.getElementById('plan-save').click(); 'ok'");
  EXPECT_EQ(browser_->WaitEval("String(!document.getElementById('plan-form') && document."
                               "querySelector('section.plan[data-plan=\"default\"] h2')"
                               ".textContent.includes('version 2'))",
                               "true"),
            "true")
      << browser_->Eval("document.getElementById('view').textContent");
  const HttpResult plan = Rest(kAdmin, verb::get, "/v1/priceplans?name=default");
  EXPECT_NE(plan.body.find("\"version\":\"2\""), std::string::npos) << plan.body;
  EXPECT_NE(plan.body.find("\"price\":\"4000\""), std::string::npos) << plan.body;
  EXPECT_NE(plan.body.find("\"price\":\"7200\""), std::string::npos) << "the other rate kept";
  Open("#/audit?verb=UpdatePricePlan");
  EXPECT_EQ(browser_->WaitEval("String(document.querySelectorAll('#audit tr[data-verb="
                               "\"UpdatePricePlan\"]').length > 0)",
                               "true"),
            "true");

  // acme/research's token: its own jobs only, and no node list.
  SignIn(kAcme);
  Open("#/jobs");
  // alice's, bob's, carol's and dave's jobs, and the service's replica.
  EXPECT_EQ(browser_->WaitEval("String(document.querySelectorAll('#jobs tbody tr').length)", "5"),
            "5");
  EXPECT_EQ(browser_->Eval("String([...document.querySelectorAll('#jobs td.tenant')].every("
                           "(td) => td.textContent.startsWith('acme/research/')))"),
            "true");
  Shot("console-jobs-tenant.png");
  EXPECT_EQ(
      browser_->Eval("String(!!document.querySelector('#jobs tr[data-job=\"" + other + "\"]'))"),
      "false");
  Open("#/pools");
  EXPECT_EQ(browser_->WaitEval("String(!!document.getElementById('nodes-hidden'))", "true"),
            "true");
  Open("#/services");
  EXPECT_EQ(
      browser_->WaitEval("String(document.querySelectorAll('#services tbody tr').length)", "1"),
      "1");

  // globex's token: only globex's job.
  SignIn(kGlobex);
  Open("#/jobs");
  EXPECT_EQ(browser_->WaitEval("String(document.querySelectorAll('#jobs tbody tr').length)", "2"),
            "2");
  EXPECT_EQ(browser_->Eval("String([...document.querySelectorAll('#jobs td.tenant')].every("
                           "(td) => td.textContent === 'globex'))"),
            "true");
  Open("#/services");  // acme's service is not globex's to see
  EXPECT_EQ(browser_->WaitEval("String(!!document.getElementById('no-services'))", "true"), "true");

  // A wrong token goes back to the sign-in form with the server's reason.
  SignIn("not-a-valid-token-at-all");
  EXPECT_EQ(browser_->WaitEval("String(!document.getElementById('login').hidden && "
                               "document.getElementById('error').textContent.includes('401'))",
                               "true"),
            "true");
}

// Issue 29, the read-write console: a tenant submits a job from the form (the API's refusal shown
// next to the field it names; a session that ends mid-form comes back to the form intact), lands
// on the job's page, sees it run and cancels it there; the cancel is audited under the tenant's
// credential, and another tenant sees none of it.
TEST_F(ConsoleE2eTest, ATenantSubmitsFromTheFormAndCancelsFromTheJobPage) {
  // The page offers single sign-on once gpupoold has read the provider's discovery document,
  // and may fetch from the provider's token endpoint (the code exchange), nowhere else.
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        return HttpCall(daemon_->http_port(), verb::get, "/console/sign-in.json").status == 200;
      },
      std::chrono::seconds(60), std::chrono::milliseconds(200)));
  const HttpResult sign_in = HttpCall(daemon_->http_port(), verb::get, "/console/sign-in.json");
  EXPECT_NE(sign_in.body.find("\"clientId\":\"gpupool-console\""), std::string::npos)
      << sign_in.body;
  EXPECT_NE(sign_in.body.find("\"tokenEndpoint\":\"" + provider_->issuer() + "/token\""),
            std::string::npos)
      << sign_in.body;
  const HttpResult index = HttpCall(daemon_->http_port(), verb::get, "/console/");
  EXPECT_NE(std::string(index.headers["Content-Security-Policy"])
                .find("connect-src 'self' " + provider_->issuer() + ";"),
            std::string::npos)
      << index.headers["Content-Security-Policy"];

  LaunchBrowser();
  SignInWithSso("erin");
  EXPECT_EQ(browser_->Eval("document.getElementById('who').textContent"),
            "signed in as erin (single sign-on)");
  // The bearer token is the provider's ID token, and the URL kept nothing of the exchange.
  EXPECT_EQ(browser_->Eval("String(sessionStorage.getItem('gpupool.token').split('.').length)"),
            "3");
  EXPECT_EQ(browser_->Eval("location.search"), "");
  Open("#/submit");
  Fill("s-tenant", "acme/research/erin");
  Fill("s-pool", "shared");
  Fill("s-command", "echo from-the-form; sleep 600");
  Fill("s-kind", "fractional");
  Fill("s-tflops", "0");
  Fill("s-vram", "8");
  browser_->Eval("document.getElementById('s-submit').click(); 'ok'");
  // The API's message, next to the TFLOPS input.
  EXPECT_EQ(browser_->WaitEval(
                "String(document.querySelector('.field-error[data-for=\"s-tflops\"]')"
                ".textContent.startsWith('spec.template.resources.fractional.milli_tflops: "
                "must be > 0'))",
                "true"),
            "true")
      << browser_->Eval("document.getElementById('submit').textContent");
  EXPECT_EQ(browser_->Eval("document.getElementById('s-tflops').getAttribute('aria-invalid')"),
            "true");
  EXPECT_EQ(browser_->Eval("String(location.hash)"), "#/submit");
  // Only the chosen kind's inputs are shown.
  EXPECT_EQ(browser_->Eval("String(document.getElementById('s-tflops').offsetParent !== null && "
                           "document.getElementById('s-gpus').offsetParent === null && "
                           "document.getElementById('s-mig').offsetParent === null)"),
            "true");
  Shot("console-submit.png");

  // The session ends (the server no longer takes the credential): back to sign-in, and after
  // signing in again the form is as it was left.
  browser_->Eval("sessionStorage.setItem('gpupool.token', 'expired-token-0123456789'); 'ok'");
  Fill("s-tflops", "10");
  browser_->Eval("document.getElementById('s-submit').click(); 'ok'");
  EXPECT_EQ(browser_->WaitEval("String(!document.getElementById('login').hidden && "
                               "document.getElementById('error').textContent.includes('401'))",
                               "true"),
            "true");
  SignInWithSso("erin");  // the provider remembers erin: straight back to the form
  EXPECT_EQ(browser_->Eval("location.hash"), "#/submit");
  Open("#/submit");
  EXPECT_EQ(browser_->Eval("document.getElementById('s-tenant').value"), "acme/research/erin");
  EXPECT_EQ(browser_->Eval("document.getElementById('s-command').value"),
            "echo from-the-form; sleep 600");
  EXPECT_EQ(browser_->Eval("document.getElementById('s-tflops').value"), "10");

  // Submitted: the job's page, where it runs.
  browser_->Eval("document.getElementById('s-submit').click(); 'ok'");
  ASSERT_EQ(browser_->WaitEval("String(location.hash.startsWith('#/jobs/'))", "true"), "true")
      << browser_->Eval("document.getElementById('submit')?.textContent");
  const std::string job = browser_->Eval("decodeURIComponent(location.hash.slice(7))");
  ASSERT_FALSE(job.empty());
  ASSERT_TRUE(TaskState(job, "TASK_STATE_RUNNING"));
  const HttpResult stored = Rest(kAdmin, verb::get, "/v1/jobs/" + job);
  EXPECT_NE(stored.body.find("\"tenant\":\"acme/research/erin\""), std::string::npos)
      << stored.body;
  EXPECT_NE(stored.body.find("\"milliTflops\":\"10000\""), std::string::npos) << stored.body;
  EXPECT_NE(stored.body.find("echo from-the-form; sleep 600"), std::string::npos) << stored.body;
  EXPECT_EQ(browser_->WaitEval("String(document.getElementById('job').textContent"
                               ".includes('RUNNING'))",
                               "true"),
            "true");
  EXPECT_EQ(browser_->Eval("String(!!document.getElementById('s-tenant'))"), "false");
  EXPECT_EQ(browser_->Eval("String(sessionStorage.getItem('gpupool.draft.submit') === null)"),
            "true")
      << "the draft is dropped once submitted";
  // Its output, streamed on its page under the tenant's own sign-in.
  browser_->Eval("document.querySelector('#tasks button').click(); 'ok'");
  EXPECT_EQ(browser_->WaitEval("String(document.getElementById('logs').textContent.includes("
                               "'from-the-form'))",
                               "true"),
            "true")
      << browser_->Eval("document.getElementById('logs').textContent");

  // Cancelled from its page: the page shows it, the API has it, the audit log says who.
  browser_->Eval("document.getElementById('job-cancel').click(); 'ok'");
  EXPECT_EQ(browser_->WaitEval("String(/CANCEL/.test(document.getElementById('job').textContent) "
                               "&& !document.getElementById('job-cancel'))",
                               "true"),
            "true")
      << browser_->Eval("document.getElementById('job-action-error').textContent");
  ASSERT_TRUE(TaskState(job, "JOB_STATE_CANCELLED"));
  // Re-run: the form comes back filled from the job; submitted, it is a new job of the same spec.
  ASSERT_EQ(browser_->WaitEval("String(!!document.getElementById('job-rerun'))", "true"), "true");
  browser_->Eval("document.getElementById('job-rerun').click(); 'ok'");
  ASSERT_EQ(browser_->WaitEval("String(location.hash === '#/submit' && "
                               "document.getElementById('s-command')?.value === "
                               "'echo from-the-form; sleep 600')",
                               "true"),
            "true");
  EXPECT_EQ(browser_->Eval("document.getElementById('s-tenant').value"), "acme/research/erin");
  EXPECT_EQ(browser_->Eval("document.getElementById('s-tflops').value"), "10");
  browser_->Eval("document.getElementById('s-submit').click(); 'ok'");
  ASSERT_EQ(browser_->WaitEval("String(location.hash.startsWith('#/jobs/') && "
                               "decodeURIComponent(location.hash.slice(7)) !== '" +
                                   job + "')",
                               "true"),
            "true");
  const std::string again = browser_->Eval("decodeURIComponent(location.hash.slice(7))");
  ASSERT_TRUE(TaskState(again, "TASK_STATE_RUNNING"));
  EXPECT_NE(Rest(kAdmin, verb::get, "/v1/jobs/" + again).body.find("acme/research/erin"),
            std::string::npos);
  ASSERT_EQ(Rest(kAcme, verb::post, "/v1/jobs/" + again + ":cancel", "{}").status, 200);
  const HttpResult audit = Rest(kAdmin, verb::get, "/v1/audit?verb=CancelJob");
  ASSERT_EQ(audit.status, 200);
  EXPECT_NE(audit.body.find("job/" + job), std::string::npos) << audit.body;
  EXPECT_NE(audit.body.find("acme/research"), std::string::npos) << audit.body;
  EXPECT_NE(audit.body.find("oidc:erin"), std::string::npos) << "who signed in: " << audit.body;

  // Usage and invoices: the month's usage by project as a chart and a table, and the invoice,
  // whose CSV downloaded from the page totals what the API says. The cancelled jobs' last seconds
  // reach the ledger as their tasks end: the page reads the invoice once it has stopped changing.
  ASSERT_TRUE(TaskState(again, "JOB_STATE_CANCELLED"));
  std::string settled;
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        const HttpResult r = Rest(kAcme, verb::get, "/v1/invoices");
        const size_t t = r.body.find("\"total\":\"");
        if (r.status != 200 || t == std::string::npos) return false;
        const std::string now = r.body.substr(t + 9, r.body.find('"', t + 9) - t - 9);
        const bool same = now == settled && now != "0.00";
        settled = now;
        return same;
      },
      std::chrono::seconds(60), std::chrono::seconds(2)));
  Open("#/usage");
  EXPECT_EQ(browser_->WaitEval("String(!!document.querySelector('#usage tr[data-project=\"acme/"
                               "research\"]') && document.querySelectorAll('#usage-chart "
                               "rect').length > 0)",
                               "true"),
            "true")
      << browser_->Eval("document.getElementById('view').textContent");
  ASSERT_EQ(
      browser_->WaitEval("String(!!document.querySelector('#invoices .invoice-total'))", "true"),
      "true")
      << browser_->Eval("document.getElementById('invoices').textContent");
  const std::string shown = browser_->Eval(
      "document.querySelector('#invoices .invoice-total')"
      ".textContent");
  // The browser saves downloads into the test's directory: the file a user would get.
  const std::string downloads = dir_ + "/downloads";
  std::filesystem::create_directories(downloads);
  ASSERT_TRUE(browser_
                  ->Call("Browser.setDownloadBehavior",
                         "{\"behavior\":\"allow\",\"downloadPath\":\"" + downloads + "\"}")
                  .ok());
  browser_->Eval("document.getElementById('invoice-download').click(); 'ok'");
  ASSERT_EQ(browser_->WaitEval("String(!!document.getElementById('invoice-csv'))", "true"), "true");
  const std::string name = browser_->Eval("document.getElementById('invoice-csv').download");
  ASSERT_FALSE(name.empty());
  ASSERT_TRUE(testing::WaitFor([&] { return std::filesystem::exists(downloads + "/" + name); },
                               std::chrono::seconds(30), std::chrono::milliseconds(100)))
      << name << " was not downloaded";
  std::ifstream in(downloads + "/" + name);
  const std::string csv((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const HttpResult api = Rest(kAcme, verb::get, "/v1/invoices");
  ASSERT_EQ(api.status, 200) << api.body;
  const size_t at = api.body.find("\"total\":\"");
  ASSERT_NE(at, std::string::npos) << api.body;
  const std::string total = api.body.substr(at + 9, api.body.find('"', at + 9) - at - 9);
  EXPECT_NE(total, "0.00") << "the cancelled job ran, and TFLOPS-hours are priced";
  EXPECT_EQ(shown, total + " USD");
  EXPECT_NE(csv.find(total), std::string::npos) << "the CSV's total is the API's:\n" << csv;
  Shot("console-usage.png");

  // An API key for a script: refused without a name (the message at the name), created (its
  // secret shown once, and it works), then revoked from the page (and no longer works).
  Open("#/keys");
  Fill("k-tenant", "acme/research");
  browser_->Eval("document.getElementById('k-create').click(); 'ok'");
  EXPECT_EQ(browser_->WaitEval("String(document.querySelector('.field-error[data-for=\"k-name\"]')"
                               ".textContent.startsWith('key.name'))",
                               "true"),
            "true")
      << browser_->Eval("document.getElementById('key-form').textContent");
  Fill("k-name", "ci-console");
  Fill("k-role", "member");
  browser_->Eval("document.getElementById('k-create').click(); 'ok'");
  ASSERT_EQ(browser_->WaitEval("String(document.getElementById('new-key-secret')?.textContent"
                               ".startsWith('gpk_'))",
                               "true"),
            "true")
      << browser_->Eval("document.getElementById('key-form').textContent");
  const std::string secret =
      browser_->Eval("document.getElementById('new-key-secret').textContent");
  const std::string key_id = secret.substr(4, secret.find('_', 4) - 4);
  EXPECT_EQ(Rest(secret, verb::get, "/v1/jobs").status, 200);
  EXPECT_EQ(browser_->WaitEval("String(!!document.querySelector('#keys tr[data-key=\"" + key_id +
                                   "\"] button.revoke'))",
                               "true"),
            "true");
  Shot("console-keys.png");
  browser_->Eval("document.querySelector('#keys tr[data-key=\"" + key_id +
                 "\"] button.revoke').click(); 'ok'");
  EXPECT_EQ(browser_->WaitEval("String(document.querySelector('#keys tr[data-key=\"" + key_id +
                                   "\"] .key-state').textContent.startsWith('revoked'))",
                               "true"),
            "true");
  EXPECT_TRUE(testing::WaitFor([&] { return Rest(secret, verb::get, "/v1/jobs").status == 401; },
                               std::chrono::seconds(30), std::chrono::milliseconds(100)));
  // Leaving the page drops the secret from it.
  Open("#/jobs");
  EXPECT_EQ(browser_->Eval("String(document.body.textContent.includes('" + secret + "'))"),
            "false");

  // A service, managed from the services page: created from its form (a bad replica range
  // refused next to its field), scaled, then deleted (asked twice); the API agrees each time.
  Open("#/services");
  browser_->Eval("document.getElementById('service-new').click(); 'ok'");
  ASSERT_EQ(browser_->WaitEval("String(!!document.getElementById('service-form'))", "true"),
            "true");
  Fill("v-tenant", "acme/research/erin");
  Fill("v-name", "echo");
  Fill("v-pool", "shared");
  Fill("v-command", "exec sleep 600");
  Fill("v-tflops", "10");
  Fill("v-vram", "4");
  Fill("v-port", "18181");
  Fill("v-max", "0");
  browser_->Eval("document.getElementById('v-create').click(); 'ok'");
  EXPECT_EQ(browser_->WaitEval("String(document.querySelector('.field-error[data-for=\"v-max\"]')"
                               ".textContent.startsWith('service.max_replicas'))",
                               "true"),
            "true")
      << browser_->Eval("document.getElementById('service-form').textContent");
  Fill("v-max", "2");
  browser_->Eval("document.getElementById('v-create').click(); 'ok'");
  const std::string row = "#services tr[data-service=\"acme/research/erin/echo\"]";
  ASSERT_EQ(browser_->WaitEval("String(!document.getElementById('service-form') && "
                               "!!document.querySelector('" +
                                   row + "'))",
                               "true"),
            "true")
      << browser_->Eval("document.getElementById('view').textContent");
  const std::string service_path = "/v1/services/acme%2Fresearch%2Ferin/echo";
  HttpResult service = Rest(kAcme, verb::get, service_path);
  ASSERT_EQ(service.status, 200) << service.body;
  EXPECT_NE(service.body.find("\"maxReplicas\":2"), std::string::npos) << service.body;
  EXPECT_NE(service.body.find("exec sleep 600"), std::string::npos) << service.body;
  const std::string section = "section.service[data-service=\"acme/research/erin/echo\"]";
  browser_->Eval("document.querySelector('" + section + " button.scale').click(); 'ok'");
  ASSERT_EQ(
      browser_->WaitEval("String(!!document.querySelector('" + section + " .scale-max'))", "true"),
      "true");
  browser_->Eval("document.querySelector('" + section +
                 " .scale-max').value = '3'; "
                 "document.querySelector('" +
                 section + " .scale-save').click(); 'ok'");
  EXPECT_EQ(
      browser_->WaitEval(
          "String(document.querySelector('" + row + "')?.textContent.includes('1..3'))", "true"),
      "true")
      << browser_->Eval("document.getElementById('view').textContent");
  service = Rest(kAcme, verb::get, service_path);
  EXPECT_NE(service.body.find("\"maxReplicas\":3"), std::string::npos) << service.body;
  browser_->Eval("document.querySelector('" + section + " button.delete').click(); 'ok'");
  ASSERT_EQ(browser_->WaitEval(
                "String(!!document.querySelector('" + section + " .delete-confirm'))", "true"),
            "true");
  browser_->Eval("document.querySelector('" + section + " .delete-confirm').click(); 'ok'");
  EXPECT_EQ(browser_->WaitEval("String(!document.querySelector('" + row + "'))", "true"), "true");
  EXPECT_EQ(Rest(kAcme, verb::get, service_path).status, 404);

  // Signing out ends the provider's session too (RP-initiated logout): the provider asks, sends
  // the browser back, and the next single sign-on needs its sign-in page again.
  const std::string console = "http://127.0.0.1:" + std::to_string(daemon_->http_port());
  browser_->Eval("document.getElementById('logout').click(); 'ok'");
  ASSERT_EQ(
      browser_->WaitEval("String(location.origin === '" + provider_->issuer() +
                             "' && !!document.querySelector('button[name=logout][value=yes]'))",
                         "true"),
      "true")
      << browser_->Eval("location.href");
  const std::string logout_page = browser_->Eval("document.readyState + ' ' + location.href");
  browser_->Eval("document.querySelector('button[name=logout][value=yes]').click(); 'ok'");
  // (No optional chaining here: a page still loading has neither element yet.)
  ASSERT_EQ(browser_->WaitEval("String(location.origin === '" + console +
                                   "' && document.readyState === 'complete' && "
                                   "!document.getElementById('login').hidden && "
                                   "!document.getElementById('sso').hidden)",
                               "true"),
            "true")
      << browser_->Eval("location.href");
  EXPECT_EQ(browser_->Eval("String(sessionStorage.getItem('gpupool.token'))"), "null");
  browser_->Eval("document.getElementById('sso').click(); 'ok'");
  EXPECT_EQ(browser_->WaitEval("String(location.origin === '" + provider_->issuer() +
                                   "' && !!document.querySelector('input[name=login]'))",
                               "true"),
            "true")
      << "the provider's session should have ended; at " << browser_->Eval("location.href")
      << ", who: " << browser_->Eval("document.getElementById('who')?.textContent")
      << ", error: " << browser_->Eval("document.getElementById('error')?.textContent")
      << ", note: " << browser_->Eval("document.getElementById('sso-note')?.textContent")
      << ", the provider's page was " << logout_page;
  ASSERT_TRUE(browser_->Call("Page.navigate", "{\"url\":\"" + console + "/console/\"}").ok());

  // globex sees none of it.
  SignIn(kGlobex);
  Open("#/jobs");
  EXPECT_EQ(
      browser_->Eval("String(!!document.querySelector('#jobs tr[data-job=\"" + job + "\"]'))"),
      "false");
}

}  // namespace
}  // namespace gpupool
