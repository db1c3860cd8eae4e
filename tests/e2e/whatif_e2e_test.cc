// `gpupoolctl whatif` end to end (issue 15, "Pre-flight for operators"): a real gpupoold on a
// test PostgreSQL, a real gpupool-agent (simulated H100s) running a small workload — two tasks
// that ended, one still running, one still waiting — and the real gpupoolctl binary asking for
// a comparison. Checks that the comparison comes back (JSON and table), that its baseline is what
// an offline twin run gives on the same extracted workload (the store's history of the same
// window, the same snapshots), that bad input names the field, and that production is untouched:
// pools, jobs, tasks, allocations, tenants, quotas and events identical before and after, and no
// row written but one audit record per call.
#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/time_util.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <pqxx/pqxx>

#include "gpupool/v1/jobs.grpc.pb.h"
#include "gpupool/v1/tenants.grpc.pb.h"
#include "gpupool/v1/whatif.grpc.pb.h"
#include "store/pg_store.h"
#include "tests/cmd/run_ctl.h"
#include "tests/support/daemon_process.h"
#include "tests/support/pg_fixture.h"
#include "tests/support/single_agent.h"
#include "tests/support/wait_for.h"
#include "twin/recent_workload.h"

namespace gpupool {
namespace {

using ctltest::Outcome;
using ctltest::RunCtl;
using testing::DaemonProcess;
using TimeUtil = google::protobuf::util::TimeUtil;

bool WaitFor(const std::function<bool()>& done, int seconds) {
  return ::gpupool::testing::WaitFor(done, std::chrono::seconds(seconds),
                                     std::chrono::milliseconds(50));
}

// What production holds: a digest of every scheduling table (the node table is left out: its
// heartbeat column moves by itself) and the number of audit records.
struct Production {
  std::map<std::string, std::string> tables;
  int64_t audit_records = 0;
};

Production Snapshot(const std::string& uri) {
  pqxx::connection conn(uri);
  pqxx::nontransaction txn(conn);
  Production p;
  for (const char* table :
       {"pools", "jobs", "tasks", "allocations", "tenants", "quotas", "events", "device_faults"}) {
    p.tables[table] =
        txn.exec(std::string("SELECT count(*)::text || ':' || coalesce(md5("
                             "string_agg(t::text, '|' ORDER BY t::text)), '') FROM ") +
                 table + " t")[0][0]
            .c_str();
  }
  p.audit_records = txn.exec("SELECT count(*) FROM audit_log")[0][0].as<int64_t>();
  return p;
}

class WhatIfE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Result<std::string> dir = testing::MakeTempDir("gpupool-whatif-e2e");
    ASSERT_TRUE(dir.ok());
    dir_ = *dir;
    Result<std::string> uri = testing::CreateTestDatabase();
    ASSERT_TRUE(uri.ok()) << uri.status().ToString();
    uri_ = *uri;
    auto d = DaemonProcess::Start({.data_dir = "", .extra_args = {"--database", uri_}});
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    daemon_ = std::move(d).value();
    auto channel = daemon_->Channel();
    jobs_ = v1::JobService::NewStub(channel);
    tenants_ = v1::TenantService::NewStub(channel);
    ASSERT_TRUE(daemon_->CreatePool("gpu").ok());
    for (const char* t : {"acme", "acme/ml", "globex"}) {
      grpc::ClientContext ctx;
      v1::CreateTenantRequest req;
      req.mutable_tenant()->set_path(t);
      v1::Tenant resp;
      ASSERT_TRUE(tenants_->CreateTenant(&ctx, req, &resp).ok()) << t;
    }
    grpc::ClientContext ctx;
    v1::SetQuotaRequest q;
    q.mutable_quota()->set_tenant("acme");
    q.mutable_quota()->set_pool("gpu");
    q.mutable_quota()->mutable_limit()->set_devices(4);
    v1::Quota quota;
    ASSERT_TRUE(tenants_->SetQuota(&ctx, q, &quota).ok());
    testing::SingleAgent::Options o;
    o.dir = dir_;
    o.gpus = 2;
    o.health_poll_ms = 0;
    agent_ = std::make_unique<testing::SingleAgent>(o);
    agent_->Connect(*daemon_);
    ASSERT_TRUE(agent_->Start().ok());
  }

  void TearDown() override {
    agent_.reset();
    daemon_.reset();
    if (!HasFailure()) std::filesystem::remove_all(dir_);
  }

  std::string Submit(int gpus, const std::string& script) {
    testing::ShellJob job;
    job.script = script;
    job.tenant = "acme/ml";
    job.gpus = gpus;
    return testing::SubmitShellJob(*jobs_, job);
  }
  v1::TaskState State(const std::string& job_id) {
    return testing::FirstTask(*jobs_, job_id).state();
  }

  Outcome Ctl(std::vector<std::string> args) {
    args.insert(args.begin(), {"--server", daemon_->grpc_address()});
    return RunCtl(args);
  }

  std::string dir_, uri_;
  std::unique_ptr<DaemonProcess> daemon_;
  std::unique_ptr<testing::SingleAgent> agent_;
  std::unique_ptr<v1::JobService::Stub> jobs_;
  std::unique_ptr<v1::TenantService::Stub> tenants_;
};

// The offline twin: the same window's history and the same snapshots, read from the database.
twin::TwinReport OfflineBaseline(const std::string& uri, int64_t from_us, int64_t to_us) {
  PgStoreOptions options;
  options.uri = uri;
  auto store = PgStore::Open(options);
  EXPECT_TRUE(store.ok()) << store.status().ToString();
  if (!store.ok()) return {};
  Result<RecoveredState> state = (*store)->Recover();
  EXPECT_TRUE(state.ok());
  twin::LivePool live;
  for (const PoolRecord& p : state->pools) {
    if (p.name == "gpu") live.pool = p;
  }
  for (const NodeRecord& n : state->nodes) {
    if (n.pool != "gpu") continue;
    NodeView v;
    v.node = n;
    for (const DeviceRecord& d : n.devices) {
      DeviceView dv;
      dv.device = d;
      v.devices.push_back(std::move(dv));
    }
    live.nodes.push_back(std::move(v));
  }
  live.quotas = state->quotas;
  for (const TenantRecord& t : state->tenants) live.tenants.push_back(t.path);
  live.from_us = from_us;
  live.to_us = to_us;
  Result<PoolHistory> history = (*store)->QueryPoolHistory(
      {.pool = "gpu", .from_us = from_us, .to_us = to_us, .max_tasks = 20'000});
  EXPECT_TRUE(history.ok()) << history.status().ToString();
  Result<twin::RecentWorkload> w = twin::ExtractRecentWorkload(*history, live);
  EXPECT_TRUE(w.ok()) << w.status().ToString();
  Result<twin::TwinReport> r = twin::RunTwin(w->workload, w->org, w->baseline);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : twin::TwinReport{};
}

TEST_F(WhatIfE2eTest, ComparesTheRecentWorkloadWithoutTouchingProduction) {
  const std::string done1 = Submit(1, "true");
  const std::string done2 = Submit(2, "true");
  ASSERT_TRUE(WaitFor([&] { return State(done2) == v1::TASK_STATE_SUCCEEDED; }, 120));
  ASSERT_TRUE(WaitFor([&] { return State(done1) == v1::TASK_STATE_SUCCEEDED; }, 120));
  const std::string running = Submit(1, "sleep 600");
  ASSERT_TRUE(WaitFor([&] { return State(running) == v1::TASK_STATE_RUNNING; }, 120));
  const std::string waiting = Submit(2, "true");  // two GPUs while one is held: it waits
  ASSERT_TRUE(WaitFor([&] { return State(waiting) == v1::TASK_STATE_PENDING; }, 30));
  // Let every write of those transitions land before the snapshot.
  ASSERT_TRUE(WaitFor(
      [&] {
        Production a = Snapshot(uri_);
        Production b = Snapshot(uri_);
        return a.tables == b.tables;
      },
      30));
  const Production before = Snapshot(uri_);

  Outcome o = Ctl({"-o", "json", "whatif", "--pool", "gpu", "--strategy", "best-fit",
                   "--preemption", "off", "--overcommit", "1.5", "--quota", "acme=devices=1",
                   "--quota-limit", "acme/ml=devices=2", "--window", "1h"});
  ASSERT_EQ(o.exit, 0) << ctltest::Dump(o);
  v1::CompareWhatIfResponse resp;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(o.out, &resp).ok()) << o.out;
  EXPECT_EQ(resp.pool(), "gpu");
  EXPECT_EQ(resp.tasks(), 4);
  EXPECT_EQ(resp.nodes(), 1);
  EXPECT_EQ(resp.gpus(), 2);
  EXPECT_EQ(resp.running_censored(), 1);
  EXPECT_EQ(resp.pending_censored(), 1);
  EXPECT_FALSE(resp.truncated());
  EXPECT_EQ(resp.baseline().label(), "baseline");
  EXPECT_TRUE(resp.baseline().preemption());
  EXPECT_DOUBLE_EQ(resp.baseline().compute_overcommit(), 1.0);
  EXPECT_EQ(resp.candidate().strategy(), "best-fit");
  EXPECT_FALSE(resp.candidate().preemption());
  EXPECT_DOUBLE_EQ(resp.candidate().compute_overcommit(), 1.5);
  EXPECT_EQ(resp.baseline().quota_violations(), 0);
  EXPECT_EQ(resp.candidate().quota_violations(), 0);
  ASSERT_TRUE(resp.baseline().wait_by_class().contains("normal"));
  EXPECT_EQ(resp.baseline().wait_by_class().at("normal").count(), 4);
  EXPECT_GT(resp.baseline().time_avg_gpu_allocation_pct(), 0);
  EXPECT_DOUBLE_EQ(resp.delta().time_avg_gpu_allocation_pct(),
                   resp.candidate().time_avg_gpu_allocation_pct() -
                       resp.baseline().time_avg_gpu_allocation_pct());

  // The table: both columns and the deltas.
  Outcome table = Ctl({"whatif", "--pool", "gpu", "--preemption", "off", "--window", "1h"});
  ASSERT_EQ(table.exit, 0) << ctltest::Dump(table);
  EXPECT_NE(table.out.find("what-if on pool gpu: "), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("censored at now: 1 still running, 1 still waiting"), std::string::npos)
      << table.out;
  EXPECT_NE(table.out.find("BASELINE"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("GPU allocation %"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("wait p99 normal (s)"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("quota violations"), std::string::npos) << table.out;

  // Bad input names the field; nothing is replayed.
  Outcome bad = Ctl({"whatif", "--pool", "nope"});
  EXPECT_EQ(bad.exit, 3) << ctltest::Dump(bad);
  EXPECT_EQ(bad.err, "gpupoolctl: NOT_FOUND: pool: unknown pool 'nope'\n");
  bad = Ctl({"whatif", "--pool", "gpu", "--strategy", "tetris"});
  EXPECT_EQ(bad.exit, 4) << ctltest::Dump(bad);
  EXPECT_EQ(bad.err,
            "gpupoolctl: INVALID_ARGUMENT: change.strategy: unknown placement strategy 'tetris'\n");
  bad = Ctl({"whatif", "--pool", "gpu", "--window", "200h"});
  EXPECT_EQ(bad.exit, 4) << ctltest::Dump(bad);
  EXPECT_EQ(bad.err, "gpupoolctl: INVALID_ARGUMENT: window: must be 1m..168h, got '200h'\n");
  bad = Ctl({"whatif", "--pool", "gpu", "--quota", "initech=devices=1"});
  EXPECT_EQ(bad.exit, 4) << ctltest::Dump(bad);
  EXPECT_EQ(bad.err, "gpupoolctl: INVALID_ARGUMENT: quota: unknown tenant 'initech'\n");
  // A candidate the core itself refuses (a child guaranteed more than its parent).
  bad = Ctl({"whatif", "--pool", "gpu", "--quota", "acme/ml=devices=1"});
  EXPECT_EQ(bad.exit, 4) << ctltest::Dump(bad);
  EXPECT_EQ(bad.err.rfind("gpupoolctl: FAILED_PRECONDITION: candidate: twin set-up: quota of "
                          "acme/ml in pool gpu: guarantees under acme would total",
                          0),
            0u)
      << bad.err;
  bad = Ctl({"whatif", "--pool", "gpu", "--overcommit", "0.5"});
  EXPECT_EQ(bad.exit, 2) << ctltest::Dump(bad);  // refused locally: nothing sent
  EXPECT_NE(bad.err.find("--overcommit: expected a ratio of at least 1, e.g. 1.5, got '0.5'"),
            std::string::npos)
      << bad.err;

  // Production is untouched: the same rows, and one audit record per call that reached it.
  const Production after = Snapshot(uri_);
  EXPECT_EQ(after.tables, before.tables);
  EXPECT_EQ(after.audit_records, before.audit_records + 7);
  {
    pqxx::connection conn(uri_);
    pqxx::nontransaction txn(conn);
    pqxx::result r =
        txn.exec("SELECT verb, resource, code FROM audit_log ORDER BY id DESC LIMIT 7");
    ASSERT_EQ(r.size(), 7u);
    EXPECT_STREQ(r[6][0].c_str(), "CompareWhatIf");
    EXPECT_STREQ(r[6][1].c_str(), "whatif/gpu");
    EXPECT_EQ(r[6][2].as<int>(), 0);
    EXPECT_STREQ(r[4][1].c_str(), "whatif/nope");
    EXPECT_EQ(r[4][2].as<int>(), static_cast<int>(StatusCode::kNotFound));
  }
  EXPECT_EQ(State(running), v1::TASK_STATE_RUNNING);
  EXPECT_EQ(State(waiting), v1::TASK_STATE_PENDING);

  // The baseline is the offline twin on the same extracted workload.
  const int64_t from_us = TimeUtil::TimestampToMicroseconds(resp.from());
  const int64_t to_us = TimeUtil::TimestampToMicroseconds(resp.to());
  const twin::TwinReport offline = OfflineBaseline(uri_, from_us, to_us);
  EXPECT_EQ(offline.tasks, resp.tasks());
  EXPECT_DOUBLE_EQ(offline.time_avg_gpu_allocation_pct,
                   resp.baseline().time_avg_gpu_allocation_pct());
  EXPECT_DOUBLE_EQ(offline.time_avg_demand_pct, resp.baseline().time_avg_demand_pct());
  EXPECT_EQ(offline.preemptions, resp.baseline().preemptions());
  ASSERT_TRUE(offline.wait_by_class.contains("normal"));
  EXPECT_DOUBLE_EQ(offline.wait_by_class.at("normal").p50,
                   resp.baseline().wait_by_class().at("normal").p50_s());
  EXPECT_DOUBLE_EQ(offline.wait_by_class.at("normal").p99,
                   resp.baseline().wait_by_class().at("normal").p99_s());
  EXPECT_EQ(offline.wait_by_class.at("normal").never_started,
            resp.baseline().wait_by_class().at("normal").never_started());
}

}  // namespace
}  // namespace gpupool
