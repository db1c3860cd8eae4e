// gpupoold's `services:` (cmd/daemon/config_services.h): parsed as the API's Service with errors
// naming file, line and key; applied to a real ServiceController (a Scheduler on the in-memory
// store) by creating what is missing and updating what differs, so that a restart is a no-op.
#include <gtest/gtest.h>

#include <chrono>

#include "base/clock.h"
#include "cmd/daemon/config.h"
#include "cmd/daemon/config_services.h"
#include "scheduler/scheduler.h"
#include "scheduler/service_controller.h"
#include "store/memory_services.h"
#include "store/memory_store.h"

namespace gpupool {
namespace {

using namespace std::chrono_literals;

constexpr char kYaml[] = R"(
services:
  - name: chat
    tenant: acme/web
    pool: gpu
    priority_class: low
    template:
      command: [/srv/serve, --port, "8080"]
      resources: {fractional: {milli_tflops: 100000, vram_mib: 1024}}
      ports: [{name: http, port: 8080}]
    port: 8080
    readiness_path: /healthz
    min_replicas: 0
    max_replicas: 3
    target_in_flight: 4
    idle: 5m
  - name: embed
    tenant: acme/web
    pool: gpu
    template:
      command: [/srv/embed]
      resources: {fractional: {milli_tflops: 50000, vram_mib: 512}}
      ports: [{name: http, port: 9000}]
    port: 9000
    min_replicas: 1
    max_replicas: 1
)";

TEST(DaemonServicesTest, ParsesEachEntryAsTheApiWould) {
  Result<DaemonConfig> c = ParseDaemonConfig(kYaml, "gpupoold.yaml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_EQ(c->services.size(), 2u);
  const ServiceSpec& s = c->services[0];
  EXPECT_EQ(s.tenant, "acme/web");
  EXPECT_EQ(s.name, "chat");
  EXPECT_EQ(s.priority_class, "low");
  EXPECT_EQ(s.revision.task_template.command,
            (std::vector<std::string>{"/srv/serve", "--port", "8080"}));
  EXPECT_EQ(s.revision.task_template.resources.fractional.milli_tflops, 100'000);
  EXPECT_EQ(s.revision.port, 8080);
  EXPECT_EQ(s.revision.readiness_path, "/healthz");
  EXPECT_EQ(s.max_replicas, 3);
  EXPECT_EQ(s.target_in_flight, 4);
  EXPECT_EQ(s.idle_ms, 300'000);  // 5m, as people write it
  EXPECT_EQ(s.created_by, "config");
  // The API's defaults where the file is silent.
  EXPECT_EQ(c->services[1].idle_ms, 300'000);
  EXPECT_EQ(c->services[1].target_in_flight, 1);
  EXPECT_EQ(c->services[1].max_surge, 1);
}

TEST(DaemonServicesTest, ErrorsNameFileLineAndKey) {
  struct Case {
    const char* yaml;
    const char* want;
  };
  const std::string entry =
      "  - name: chat\n    tenant: acme\n    pool: gpu\n"
      "    template: {command: [x], resources: {whole_gpus: {count: 1}}, ports: [{port: 80}]}\n"
      "    max_replicas: 1\n";
  const std::string bad_port = "services:\n" + entry + "    port: 81\n";
  const std::string twice = "services:\n" + entry + "    port: 80\n" + entry + "    port: 80\n";
  const std::string colour = "services:\n" + entry + "    port: 80\n    colour: red\n";
  const std::string status = "services:\n" + entry + "    port: 80\n    status: {ready: 1}\n";
  const std::string idle = "services:\n" + entry + "    port: 80\n    idle: soon\n";
  const Case cases[] = {
      {"services: {name: chat}\n", "gpupoold.yaml:1: services: must be a list"},
      {bad_port.c_str(), "gpupoold.yaml:2: services[0]: service.port"},
      {twice.c_str(), "gpupoold.yaml:8: services[1]: a second service 'chat' of tenant 'acme'"},
      {colour.c_str(), "gpupoold.yaml:2: services[0]: not a valid Service"},
      {status.c_str(),
       "gpupoold.yaml:8: services[0].status: is set by gpupoold, not by a configuration"},
      {idle.c_str(), "gpupoold.yaml:2: services[0]: idle: invalid duration 'soon'"},
      {"services:\n  - {name: Chat!, tenant: acme, pool: gpu, port: 80}\n",
       "gpupoold.yaml:2: services[0]: service.template"},
  };
  for (const Case& k : cases) {
    Result<DaemonConfig> c = ParseDaemonConfig(k.yaml, "gpupoold.yaml");
    ASSERT_FALSE(c.ok()) << k.yaml;
    EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(c.status().message().find(k.want), std::string::npos) << c.status().message();
  }
}

class DaemonServicesApplyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    scheduler_ = std::make_unique<Scheduler>(SchedulerOptions::Defaults(), SystemClock::Get(),
                                             &store_, &agents_);
    Result<int64_t> epoch = store_.AcquireLeadership();
    Result<RecoveredState> state = store_.Recover();
    ASSERT_TRUE(epoch.ok() && state.ok());
    ASSERT_TRUE(scheduler_->Start(*state, *epoch, 20ms).ok());
    PoolRecord pool;
    pool.name = "gpu";
    ASSERT_TRUE(CallAndWait<PoolView>([&](auto done) { scheduler_->CreatePool(pool, done); }).ok());
    for (const char* path : {"acme", "acme/web"}) {
      TenantRecord tenant;
      tenant.path = path;
      ASSERT_TRUE(
          CallAndWait<TenantView>([&](auto done) { scheduler_->CreateTenant(tenant, done); }).ok());
    }
    ServiceControllerOptions o;
    o.tick = 0ms;  // no passes of its own: the test looks at records only
    controller_ = std::make_unique<ServiceController>(&services_, scheduler_.get(), &clock_, o);
    ASSERT_TRUE(controller_->Start().ok());
  }

  void TearDown() override {
    controller_.reset();
    scheduler_->Stop();
  }

  class NoAgents final : public AgentGateway {
   public:
    bool StartTask(const std::string&, const StartTaskCommand&) override { return true; }
    bool StopTask(const std::string&, const StopTaskCommand&) override { return true; }
  };

  MemoryStore store_;
  MemoryServices services_;
  NoAgents agents_;
  ManualClock clock_{1'000'000'000};
  std::unique_ptr<Scheduler> scheduler_;
  std::unique_ptr<ServiceController> controller_;
};

TEST_F(DaemonServicesApplyTest, CreatesWhatIsMissingUpdatesWhatDiffersAndKeepsTheRest) {
  Result<DaemonConfig> c = ParseDaemonConfig(kYaml, "gpupoold.yaml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  Result<ConfiguredServicesApplied> applied = ApplyConfiguredServices(*controller_, c->services);
  ASSERT_TRUE(applied.ok()) << applied.status().ToString();
  EXPECT_EQ(applied->created, 2);
  EXPECT_EQ(applied->updated, 0);
  Result<ServiceView> chat = controller_->Get("acme/web", "chat");
  ASSERT_TRUE(chat.ok());
  EXPECT_EQ(chat->record.spec.created_by, "config");
  EXPECT_EQ(chat->record.generation, 1);

  // A restart with the same file changes nothing.
  applied = ApplyConfiguredServices(*controller_, c->services);
  ASSERT_TRUE(applied.ok()) << applied.status().ToString();
  EXPECT_EQ(applied->created + applied->updated, 0);

  // A scaling change is made in place; a template change is a new generation (a rollout).
  c->services[0].max_replicas = 5;
  c->services[1].revision.task_template.command = {"/srv/embed", "--v2"};
  applied = ApplyConfiguredServices(*controller_, c->services);
  ASSERT_TRUE(applied.ok()) << applied.status().ToString();
  EXPECT_EQ(applied->updated, 2);
  chat = controller_->Get("acme/web", "chat");
  ASSERT_TRUE(chat.ok());
  EXPECT_EQ(chat->record.spec.max_replicas, 5);
  EXPECT_EQ(chat->record.generation, 1);
  Result<ServiceView> embed = controller_->Get("acme/web", "embed");
  ASSERT_TRUE(embed.ok());
  EXPECT_EQ(embed->record.generation, 2);
  EXPECT_TRUE(embed->record.previous.has_value());

  // A service the file no longer names is kept: it may have been made through the API.
  c->services.pop_back();
  applied = ApplyConfiguredServices(*controller_, c->services);
  ASSERT_TRUE(applied.ok());
  EXPECT_TRUE(controller_->Get("acme/web", "embed").ok());
}

TEST_F(DaemonServicesApplyTest, APoolChangeIsRefusedNamingTheService) {
  Result<DaemonConfig> c = ParseDaemonConfig(kYaml, "gpupoold.yaml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_TRUE(ApplyConfiguredServices(*controller_, c->services).ok());
  c->services[0].pool = "other";
  Result<ConfiguredServicesApplied> applied = ApplyConfiguredServices(*controller_, c->services);
  ASSERT_FALSE(applied.ok());
  EXPECT_EQ(applied.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(applied.status().message().find("service 'chat' of 'acme/web' from the config"),
            std::string::npos)
      << applied.status().message();
  EXPECT_EQ(controller_->Get("acme/web", "chat")->record.spec.pool, "gpu");
}

}  // namespace
}  // namespace gpupool
