// The dynamic-MIG end-to-end tests' fixture (tests/e2e/mig_*_e2e_test.cc): a real gpupoold with
// an admin and a tenant token, a pool "mig" with the idle re-layout policy, a tenant "acme", and
// one gpupool-agent "node-m" whose backend the test chooses (Configure); REST helpers for the
// node's MIG GPU, layouts and jobs.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <memory>
#include <string>

#include "gpupool/v1/jobs.pb.h"
#include "gpupool/v1/pools.pb.h"
#include "tests/support/agent_process.h"
#include "tests/support/daemon_process.h"
#include "tests/support/token_daemon.h"
#include "tests/support/wait_for.h"

namespace gpupool::testing {

class MigE2eFixture : public ::testing::Test {
 protected:
  static constexpr char kAdmin[] = "admin-token-mig-0123456789";
  static constexpr char kAcme[] = "acme-token-mig-0123456789";
  using verb = api::testing::http::verb;

  // The agent's backend and config (gpus_yaml, extra_config, extra_args); node, pool and
  // scheduler are set already.
  virtual void Configure(AgentProcessOptions* o) = 0;
  // After the processes are gone, before a passing test's directory is removed.
  virtual void Cleanup() {}

  // The daemon in `dir`, its pool and tenant, then the agent.
  void StartAll(const std::string& dir) {
    dir_ = dir;
    auto d = StartDaemonWithTokens(
        dir_, {{kAdmin, "ops", true}, {kAcme, "acme", false}},
        "scheduler:\n  heartbeat_interval_ms: 200\n  heartbeat_timeout_ms: 30000\n"
        "  node_lease_ms: 30000\n  stop_grace_period_ms: 1000\n");
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    daemon_ = std::move(d).value();
    ASSERT_EQ(Rest(kAdmin, verb::post, "/v1/pools",
                   R"({"pool": {"name": "mig", "sharingMode": "SHARING_MODE_EXCLUSIVE",
                                "migRelayout": "MIG_RELAYOUT_IDLE"}})")
                  .status,
              200);
    ASSERT_EQ(Rest(kAdmin, verb::post, "/v1/tenants", R"({"tenant": {"path": "acme"}})").status,
              200);
    StartAgent();
  }

  void StartAgent() {
    AgentProcessOptions o;
    o.dir = dir_;
    o.node = "node-m";
    o.scheduler = daemon_->grpc_address();
    o.pool = "mig";
    Configure(&o);
    auto child = StartAgentProcess(o);
    ASSERT_TRUE(child.ok());
    agent_ = std::move(child).value();
    ASSERT_TRUE(WaitFor(
        [&] { return Node().state() == v1::NODE_STATE_READY && Node().mig_gpus_size() == 1; },
        std::chrono::seconds(120), std::chrono::milliseconds(100)))
        << "the agent did not register; its log: " << dir_ << "/node-m.log";
  }

  void StopAgent() {
    agent_->Signal(SIGKILL);
    agent_->Wait(std::chrono::seconds(10));
    agent_.reset();
  }

  void TearDown() override {
    if (agent_) {
      agent_->Signal(SIGTERM);
      agent_->Wait(std::chrono::seconds(10));
    }
    daemon_.reset();
    Cleanup();
    if (!HasFailure() && !dir_.empty()) std::filesystem::remove_all(dir_);
  }

  api::testing::HttpResult Rest(const std::string& token, verb v, const std::string& target,
                                const std::string& body = "") {
    return RestAs(*daemon_, token, v, target, body);
  }
  v1::Node Node() {
    api::testing::HttpResult r = Rest(kAdmin, verb::get, "/v1/nodes/node-m");
    return r.status == 200 ? ParseJson<v1::Node>(r.body) : v1::Node();
  }
  std::string NodeJson() { return Rest(kAdmin, verb::get, "/v1/nodes/node-m").body; }
  v1::MigGpu Gpu() {
    v1::Node n = Node();
    return n.mig_gpus_size() == 1 ? n.mig_gpus(0) : v1::MigGpu();
  }
  api::testing::HttpResult SetLayout(const std::string& token, const std::string& layout) {
    return Rest(token, verb::post, "/v1/nodes/node-m/gpus/" + Gpu().id() + ":set-mig-layout",
                R"({"layout": ")" + layout + R"("})");
  }
  bool Applied() { return Gpu().state() == "applied"; }

  // A one-task job of acme's for an instance of `profile`, running `sh -c command`.
  std::string Submit(const std::string& profile, const std::string& command) {
    const api::testing::HttpResult r =
        Rest(kAcme, verb::post, "/v1/jobs",
             R"({"spec": {"tenant": "acme", "pool": "mig", "taskCount": 1, "template": )"
             R"({"command": ["/bin/sh", "-c", ")" +
                 command + R"("], "resources": {"mig": {"profile": ")" + profile + R"("}}}}})");
    EXPECT_EQ(r.status, 200) << r.body;
    return ParseJson<v1::SubmitJobResponse>(r.body).job_id();
  }
  v1::Job Job(const std::string& id) {
    return ParseJson<v1::Job>(Rest(kAdmin, verb::get, "/v1/jobs/" + id).body);
  }
  bool Ended(const std::string& id) {
    const v1::JobState s = Job(id).state();
    return s == v1::JOB_STATE_SUCCEEDED || s == v1::JOB_STATE_FAILED ||
           s == v1::JOB_STATE_CANCELLED;
  }

  std::string dir_;
  std::unique_ptr<DaemonProcess> daemon_;
  std::unique_ptr<ChildProcess> agent_;
};

}  // namespace gpupool::testing
