// End to end: `gpupoolctl services …` — the real gpupoolctl against a real gpupoold (embedded
// PostgreSQL, gRPC on loopback) as a script sees it: tables, JSON and YAML, exit codes. The
// daemon has no agents, so replicas stay pending and the service says why it is below its
// desired count; its replicas are jobs of the tenant. Create from a file, get, list, a refused
// file, create twice, update (a new generation), rollback, a patch with flags, apply of what
// `get -o yaml` printed, a member's rights, delete.
#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gpupool/v1/jobs.pb.h"
#include "gpupool/v1/services.pb.h"
#include "tests/cmd/run_ctl.h"
#include "tests/support/daemon_process.h"

namespace gpupool::ctltest {
namespace {

using gpupool::testing::DaemonProcess;

constexpr const char* kAdminToken = "admin-token-0123456789";
constexpr const char* kMemberToken = "acme-ml-member-token-0123456789";
constexpr const char* kAliceToken = "acme-ml-alice-token-0123456789";

constexpr const char* kWebYaml =
    "name: web\n"
    "tenant: acme/ml\n"
    "pool: shared\n"
    "template:\n"
    "  command: [python3, serve.py, --version, v1]\n"
    "  env: {MODE: fast}\n"
    "  resources: {fractional: {milli_tflops: 1000, vram_mib: 1024}}\n"
    "  ports: [{port: 8080, name: http}]\n"
    "port: 8080\n"
    "readiness_path: /healthz\n"
    "min_replicas: 2\n"
    "max_replicas: 4\n"
    "target_in_flight: 3\n"
    "idle: 5m\n";

class GpupoolctlServices : public ::testing::Test {
 protected:
  void SetUp() override {
    Result<std::string> dir = gpupool::testing::MakeTempDir("gpupoolctl-services");
    ASSERT_TRUE(dir.ok());
    dir_ = *dir;
    const std::string config = dir_ + "/gpupoold.yaml";
    std::ofstream(config) << "auth:\n  api_tokens:\n"
                          << "    - {token: " << kAdminToken << ", principal: ops, admin: true}\n"
                          << "    - {token: " << kMemberToken << ", principal: acme/ml}\n"
                          << "    - {token: " << kAliceToken << ", principal: acme/ml/alice}\n"
                          << "tenants:\n"
                          << "  - {path: acme}\n"
                          << "  - {path: acme/ml}\n"
                          << "  - {path: acme/ml/alice}\n";
    Result<std::unique_ptr<DaemonProcess>> d =
        DaemonProcess::Start({.data_dir = "", .extra_args = {"--config", config}});
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    daemon_ = std::move(d).value();
    Outcome o = Ctl(kAdminToken, {"pools", "create", "shared", "--sharing", "fractional"});
    ASSERT_EQ(o.exit, 0) << Dump(o);
  }

  Outcome Ctl(const std::string& token, std::vector<std::string> args,
              const std::string& input = "") {
    std::vector<std::string> full = {"--server", daemon_->grpc_address(), "--token", token};
    full.insert(full.end(), args.begin(), args.end());
    return RunCtl(full, {}, input);
  }
  // As the member of acme/ml, who creates the services.
  Outcome Member(std::vector<std::string> args, const std::string& input = "") {
    return Ctl(kMemberToken, std::move(args), input);
  }
  std::string Ok(std::vector<std::string> args) {
    Outcome o = Member(std::move(args));
    EXPECT_EQ(o.exit, 0) << Dump(o);
    return o.out;
  }

  std::string WriteFile(const std::string& name, const std::string& text) {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path) << text;
    return path;
  }

  // `services get -o json`, parsed.
  v1::Service GetJson(const std::string& name, const std::string& tenant = "acme/ml") {
    const std::string json = Ok({"-o", "json", "services", "get", name, "--tenant", tenant});
    v1::Service svc;
    EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(json, &svc).ok()) << json;
    return svc;
  }

  // The service once `done` holds, polled for up to 20 s.
  template <typename Pred>
  v1::Service WaitFor(const std::string& name, Pred done) {
    v1::Service svc;
    for (int i = 0; i < 100; ++i) {
      svc = GetJson(name);
      if (done(svc)) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    return svc;
  }

  std::string dir_;
  std::unique_ptr<DaemonProcess> daemon_;
};

std::vector<std::string> Command(const v1::Service& svc) {
  return {svc.template_().command().begin(), svc.template_().command().end()};
}

TEST_F(GpupoolctlServices, LifecycleFromAFile) {
  const std::string web = WriteFile("web.yaml", kWebYaml);
  EXPECT_EQ(Ok({"services", "create", "-f", web}),
            "service web of acme/ml created: generation 1, 2..4 replicas\n");

  // No agents: both replicas are submitted and stay pending, and the service says why.
  v1::Service svc = WaitFor("web", [](const v1::Service& s) {
    return s.status().replicas_size() == 2 && !s.status().below_code().empty();
  });
  EXPECT_EQ(svc.generation(), 1);
  EXPECT_FALSE(svc.has_previous());
  EXPECT_FALSE(svc.id().empty());
  EXPECT_EQ(svc.status().desired(), 2);
  EXPECT_EQ(svc.status().ready(), 0);
  EXPECT_EQ(svc.status().updated(), 2);
  ASSERT_EQ(svc.status().replicas_size(), 2) << svc.DebugString();
  EXPECT_FALSE(svc.status().below_reason().empty()) << svc.DebugString();
  EXPECT_NE(svc.status().below_code(), "REPLICA_FAILING") << svc.DebugString();
  EXPECT_NE(svc.status().below_code(), "PREEMPTED") << svc.DebugString();
  for (const v1::ServiceReplica& r : svc.status().replicas()) {
    EXPECT_EQ(r.generation(), 1);
    EXPECT_EQ(r.state(), v1::TASK_STATE_PENDING);
    EXPECT_FALSE(r.ready());
  }
  EXPECT_EQ(svc.idle().seconds(), 300);
  EXPECT_EQ(svc.target_in_flight(), 3);
  EXPECT_EQ(svc.readiness_path(), "/healthz");
  EXPECT_EQ(svc.template_().env().at("MODE"), "fast");
  EXPECT_EQ(svc.created_by(), "token:acme/ml");

  const std::string table = Ok({"services", "get", "web", "--tenant", "acme/ml"});
  EXPECT_EQ(table.rfind("Name:         web\n"
                        "Tenant:       acme/ml\n"
                        "Pool:         shared\n"
                        "Priority:     -\n"
                        "Preemptible:  no\n"
                        "Generation:   1\n"
                        "Replicas:     0/2 ready, 2 of generation 1\n",
                        0),
            0u)
      << table;
  EXPECT_NE(table.find("Scale:        2..4 replicas, target 3 in flight each, idle 5m\n"),
            std::string::npos)
      << table;
  EXPECT_NE(table.find("Status:       " + svc.status().below_code() + ": " +
                       svc.status().below_reason() + "\n"),
            std::string::npos)
      << table;
  EXPECT_NE(table.find("Port:         8080 (ready when GET /healthz is 2xx)\n"), std::string::npos)
      << table;
  EXPECT_NE(table.find("Command:      python3 serve.py --version v1\n"), std::string::npos)
      << table;
  EXPECT_NE(table.find("Resources:    1 TFLOPS, 1GiB VRAM\n"), std::string::npos) << table;
  EXPECT_NE(table.find("\n\nJOB"), std::string::npos) << table;
  for (const v1::ServiceReplica& r : svc.status().replicas()) {
    EXPECT_NE(table.find("\n" + r.job_id() + " "), std::string::npos) << table;
  }

  // The replicas are jobs of the tenant, naming the service.
  v1::ListJobsResponse jobs;
  Outcome o = Ctl(kAdminToken, {"-o", "json", "jobs", "list", "--all"});
  ASSERT_EQ(o.exit, 0) << Dump(o);
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(o.out, &jobs).ok()) << o.out;
  int replica_jobs = 0;
  for (const v1::Job& j : jobs.jobs()) {
    if (j.service_id() != svc.id()) continue;
    ++replica_jobs;
    EXPECT_EQ(j.service_generation(), 1);
    EXPECT_EQ(j.spec().tenant(), "acme/ml");
    EXPECT_EQ(j.spec().pool(), "shared");
    EXPECT_EQ(j.spec().task_count(), 1);
  }
  EXPECT_EQ(replica_jobs, 2) << o.out;

  std::string list = Ok({"services", "list"});
  EXPECT_EQ(list,
            "TENANT    NAME   POOL     READY/DESIRED   MIN-MAX   GEN   STATUS\n"
            "acme/ml   web    shared   0/2             2-4       1     " +
                svc.status().below_code() + "\n")
      << list;
  Outcome none = Member({"services", "list", "--tenant", "acme/ml/alice"});
  EXPECT_EQ(none.exit, 0) << Dump(none);
  EXPECT_EQ(none.out, "");
  EXPECT_EQ(none.err, "no services\n");

  // Refused by the server, naming the field; nothing is created.
  std::string bad_text = kWebYaml;
  bad_text.replace(bad_text.find("min_replicas: 2"), 15, "min_replicas: 5");
  bad_text.replace(bad_text.find("name: web"), 9, "name: bad");
  o = Member({"services", "create", "-f", WriteFile("bad.yaml", bad_text)});
  EXPECT_EQ(o.exit, 4) << Dump(o);
  EXPECT_EQ(o.err.rfind("gpupoolctl: INVALID_ARGUMENT: service.min_replicas", 0), 0u) << Dump(o);
  EXPECT_NE(o.err.find("got 5"), std::string::npos) << Dump(o);
  // A file that is not a Service: a usage error, nothing sent.
  o = Member({"services", "create", "-f", WriteFile("typo.yaml", "name: x\nmin_replica: 1\n")});
  EXPECT_EQ(o.exit, 2) << Dump(o);
  EXPECT_NE(o.err.find("not a valid Service"), std::string::npos) << Dump(o);
  std::string soon = kWebYaml;
  soon.replace(soon.find("idle: 5m"), 8, "idle: soon");
  o = Member({"services", "create", "-f", WriteFile("idle.yaml", soon)});
  EXPECT_EQ(o.exit, 2) << Dump(o);
  EXPECT_NE(o.err.find("idle: invalid duration 'soon'"), std::string::npos) << Dump(o);
  o = Member({"services", "get", "bad", "--tenant", "acme/ml"});
  EXPECT_EQ(o.exit, 3) << Dump(o);

  o = Member({"services", "create", "-f", web});
  EXPECT_EQ(o.exit, 7) << Dump(o);
  EXPECT_EQ(o.err.rfind("gpupoolctl: ALREADY_EXISTS: ", 0), 0u) << Dump(o);

  // A changed command is a new generation, rolled out.
  std::string v2 = kWebYaml;
  v2.replace(v2.find("v1]"), 2, "v2");
  EXPECT_EQ(Ok({"services", "update", "-f", WriteFile("web-v2.yaml", v2)}),
            "service web of acme/ml updated: generation 2\n");
  svc = GetJson("web");
  EXPECT_EQ(svc.generation(), 2);
  EXPECT_TRUE(svc.has_previous());
  EXPECT_EQ(Command(svc), (std::vector<std::string>{"python3", "serve.py", "--version", "v2"}));
  svc = WaitFor("web", [](const v1::Service& s) {
    for (const v1::ServiceReplica& r : s.status().replicas()) {
      if (r.generation() == 2) return true;
    }
    return false;
  });
  EXPECT_GE(svc.status().updated(), 1) << svc.DebugString();

  EXPECT_EQ(Ok({"services", "rollback", "web", "--tenant", "acme/ml"}),
            "service web of acme/ml rolled back: generation 3 runs the previous template, rolling "
            "out\n");
  svc = GetJson("web");
  EXPECT_EQ(svc.generation(), 3);
  EXPECT_EQ(Command(svc), (std::vector<std::string>{"python3", "serve.py", "--version", "v1"}));

  // Flags without a file change the service as it is; settings alone keep the generation.
  EXPECT_EQ(Ok({"services", "update", "web", "--tenant", "acme/ml", "--max-replicas", "6"}),
            "service web of acme/ml updated: generation 3 (template unchanged)\n");
  svc = GetJson("web");
  EXPECT_EQ(svc.max_replicas(), 6);
  EXPECT_EQ(svc.generation(), 3);
  EXPECT_EQ(Command(svc), (std::vector<std::string>{"python3", "serve.py", "--version", "v1"}));
  EXPECT_EQ(Ok({"services", "update", "web", "--tenant", "acme/ml", "--env", "MODE=slow"}),
            "service web of acme/ml updated: generation 4, rolling out\n");
  svc = GetJson("web");
  EXPECT_EQ(svc.template_().env().at("MODE"), "slow");

  // What `get -o yaml` prints applies again unchanged; -o json round-trips too.
  const std::string yaml = Ok({"-o", "yaml", "services", "get", "web", "--tenant", "acme/ml"});
  EXPECT_NE(yaml.find("generation: "), std::string::npos) << yaml;
  EXPECT_EQ(Ok({"services", "apply", "-f", WriteFile("printed.yaml", yaml)}),
            "service web of acme/ml updated: generation 4 (template unchanged)\n");
  const std::string json = Ok({"-o", "json", "services", "get", "web", "--tenant", "acme/ml"});
  v1::Service printed;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(json, &printed).ok()) << json;
  EXPECT_EQ(printed.name(), "web");
  EXPECT_EQ(printed.generation(), 4);
  o = Member({"-o", "json", "services", "apply", "-f", "-"}, json);
  ASSERT_EQ(o.exit, 0) << Dump(o);
  v1::Service applied;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(o.out, &applied).ok()) << o.out;
  EXPECT_EQ(applied.generation(), 4);
  EXPECT_EQ(applied.max_replicas(), 6);
  v1::ListServicesResponse listed;
  std::string list_json = Ok({"-o", "json", "services", "list", "--tenant", "acme/ml"});
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(list_json, &listed).ok()) << list_json;
  ASSERT_EQ(listed.services_size(), 1);
  EXPECT_EQ(listed.services(0).id(), svc.id());

  // apply creates what does not exist; the name on the command line overrides the file's.
  o = Member({"services", "apply", "-f", "-", "web-canary"}, kWebYaml);
  EXPECT_EQ(o.exit, 0) << Dump(o);
  EXPECT_EQ(o.out, "service web-canary of acme/ml created: generation 1, 2..4 replicas\n");
  o = Member({"services", "rollback", "web-canary", "--tenant", "acme/ml"});
  EXPECT_EQ(o.exit, 4) << Dump(o);
  EXPECT_EQ(o.err.rfind("gpupoolctl: FAILED_PRECONDITION: ", 0), 0u) << Dump(o);

  EXPECT_EQ(Ok({"services", "delete", "web", "--tenant", "acme/ml"}),
            "service web of acme/ml deleted; its replicas are being stopped\n");
  o = Member({"services", "get", "web", "--tenant", "acme/ml"});
  EXPECT_EQ(o.exit, 3) << Dump(o);
  EXPECT_EQ(o.err.rfind("gpupoolctl: NOT_FOUND: ", 0), 0u) << Dump(o);
  o = Member({"services", "delete", "web", "--tenant", "acme/ml"});
  EXPECT_EQ(o.exit, 3) << Dump(o);
  // Its replicas' jobs are cancelled.
  bool cancelled = false;
  for (int i = 0; i < 100 && !cancelled; ++i) {
    o = Ctl(kAdminToken, {"-o", "json", "jobs", "list", "--all"});
    ASSERT_EQ(o.exit, 0) << Dump(o);
    ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(o.out, &jobs).ok()) << o.out;
    cancelled = true;
    for (const v1::Job& j : jobs.jobs()) {
      if (j.service_id() == svc.id() && j.state() != v1::JOB_STATE_CANCELLED) cancelled = false;
    }
    if (!cancelled) std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  EXPECT_TRUE(cancelled) << o.out;
}

TEST_F(GpupoolctlServices, FlagsStdinAndRights) {
  // A one-liner: the template as `jobs submit` spells it; the only tcp port serves.
  Outcome o = Member({"services",
                      "create",
                      "api",
                      "--tenant",
                      "acme/ml/alice",
                      "--pool",
                      "shared",
                      "--tflops",
                      "1",
                      "--vram",
                      "1GiB",
                      "--port",
                      "9000:http",
                      "--min-replicas",
                      "1",
                      "--max-replicas",
                      "3",
                      "--idle",
                      "1h30m",
                      "--",
                      "python3",
                      "api.py"});
  ASSERT_EQ(o.exit, 0) << Dump(o);
  EXPECT_EQ(o.out, "service api of acme/ml/alice created: generation 1, 1..3 replicas\n");
  v1::Service svc = GetJson("api", "acme/ml/alice");
  EXPECT_EQ(svc.port(), 9000u);
  EXPECT_EQ(svc.idle().seconds(), 5400);
  EXPECT_EQ(svc.max_surge(), 1);  // the server's default rollout
  EXPECT_EQ(svc.max_unavailable(), 0);
  EXPECT_EQ(Command(svc), (std::vector<std::string>{"python3", "api.py"}));

  // Alice sees it (her tenant) but did not create it: a member changes only its own.
  o = Ctl(kAliceToken, {"services", "get", "api", "--tenant", "acme/ml/alice"});
  EXPECT_EQ(o.exit, 0) << Dump(o);
  o = Ctl(kAliceToken, {"services", "delete", "api", "--tenant", "acme/ml/alice"});
  EXPECT_EQ(o.exit, 6) << Dump(o);
  EXPECT_EQ(o.err.rfind("gpupoolctl: PERMISSION_DENIED: service 'api' was created by "
                        "'token:acme/ml'",
                        0),
            0u)
      << Dump(o);
  // A service above her tenant is as absent.
  o = Member({"services", "create", "-f", "-"}, kWebYaml);
  ASSERT_EQ(o.exit, 0) << Dump(o);
  o = Ctl(kAliceToken, {"services", "get", "web", "--tenant", "acme/ml"});
  EXPECT_EQ(o.exit, 3) << Dump(o);
  o = Ctl(kAliceToken, {"services", "list"});
  EXPECT_EQ(o.exit, 0) << Dump(o);
  EXPECT_EQ(o.out.find("web"), std::string::npos) << Dump(o);
  EXPECT_NE(o.out.find("acme/ml/alice   api"), std::string::npos) << Dump(o);

  // Usage errors: nothing sent.
  o = Member({"services", "get", "api"});
  EXPECT_EQ(o.exit, 2) << Dump(o);
  EXPECT_NE(o.err.find("--tenant: required"), std::string::npos) << Dump(o);
  o = Member({"services", "create", "--tenant", "acme/ml", "--pool", "shared"});
  EXPECT_EQ(o.exit, 2) << Dump(o);
  o = Member({"services", "update", "api", "--max-replicas", "2"});
  EXPECT_EQ(o.exit, 2) << Dump(o);
  o = Member({"services", "list", "--", "x"});
  EXPECT_EQ(o.exit, 2) << Dump(o);

  // The group is listed in the help.
  o = RunCtl({"--help"});
  EXPECT_EQ(o.exit, 0) << Dump(o);
  EXPECT_NE(o.out.find("  services apply "), std::string::npos) << o.out;
  o = RunCtl({"services", "--help"});
  EXPECT_EQ(o.exit, 0) << Dump(o);
  for (const char* c : {"create", "update", "apply", "get", "list", "rollback", "delete"}) {
    EXPECT_NE(o.out.find(std::string("  services ") + c + " "), std::string::npos) << o.out;
  }
  o = RunCtl({"services", "create", "--help"});
  EXPECT_NE(o.out.find("--min-replicas N"), std::string::npos) << o.out;
}

// A tenant is not deleted while it has services: they would go on submitting replicas for a
// tenant that is gone, and one made later at the same path would inherit them.
TEST_F(GpupoolctlServices, ATenantWithServicesIsNotDeleted) {
  Outcome o = Ctl(kAliceToken, {"services", "create", "notebook", "--tenant", "acme/ml/alice",
                                "--pool", "shared", "--max-replicas", "1", "--tflops", "1",
                                "--vram", "1GiB", "--port", "8888:http", "--", "sleep", "600"});
  ASSERT_EQ(o.exit, 0) << Dump(o);
  o = Ctl(kAdminToken, {"tenants", "delete", "acme/ml/alice"});
  EXPECT_EQ(o.exit, 4) << Dump(o);
  EXPECT_EQ(o.err,
            "gpupoolctl: FAILED_PRECONDITION: tenant 'acme/ml/alice' still has service 'notebook'; "
            "delete its services first (gpupoolctl services delete notebook --tenant "
            "acme/ml/alice)\n")
      << Dump(o);
  o = Ctl(kAdminToken, {"services", "get", "notebook", "--tenant", "acme/ml/alice"});
  EXPECT_EQ(o.exit, 0) << Dump(o);  // nothing was deleted

  o = Ctl(kAliceToken, {"services", "delete", "notebook", "--tenant", "acme/ml/alice"});
  ASSERT_EQ(o.exit, 0) << Dump(o);
  o = Ctl(kAdminToken, {"tenants", "delete", "acme/ml/alice"});
  EXPECT_EQ(o.exit, 0) << Dump(o);
}

}  // namespace
}  // namespace gpupool::ctltest
