#include <gtest/gtest.h>

#include <filesystem>

#include "api/priority_access.h"
#include "cmd/daemon/config.h"

namespace gpupool {
namespace {

TEST(DaemonConfigTest, EmptyConfigGivesDefaults) {
  Result<DaemonConfig> c = ParseDaemonConfig("", "gpupoold.yaml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->grpc_listen, "127.0.0.1:7070");
  EXPECT_TRUE(c->database.empty());
  EXPECT_TRUE(c->scheduler.priority_classes.contains("normal"));
}

// Issue 30: the node lease is apart from the heartbeat timeout, 5 minutes unless set, and never
// shorter than the timeout.
TEST(DaemonConfigTest, TheNodeLeaseIsMinutesAndNeverShorterThanTheHeartbeatTimeout) {
  Result<DaemonConfig> c = ParseDaemonConfig("", "gpupoold.yaml");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->scheduler.node_lease_ms, 300'000);
  EXPECT_EQ(c->scheduler.heartbeat_timeout_ms, 10'000);
  c = ParseDaemonConfig("scheduler:\n  node_lease_ms: 120000\n", "gpupoold.yaml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->scheduler.node_lease_ms, 120'000);
  Result<DaemonConfig> short_lease = ParseDaemonConfig(
      "scheduler:\n  heartbeat_timeout_ms: 20000\n  node_lease_ms: 5000\n", "gpupoold.yaml");
  ASSERT_FALSE(short_lease.ok());
  EXPECT_NE(short_lease.status().message().find("scheduler.node_lease_ms: must be at least "
                                                "heartbeat_timeout_ms (20000)"),
            std::string::npos)
      << short_lease.status().message();
}

TEST(DaemonConfigTest, TheFencingCommandIsAnAbsoluteProgramWithBoundedTimes) {
  Result<DaemonConfig> none = ParseDaemonConfig("", "gpupoold.yaml");
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->fencing.command.empty());  // no fencer: only an admin fences
  Result<DaemonConfig> c = ParseDaemonConfig(
      "fencing:\n  command: [/usr/local/sbin/fence-node, --power-off]\n  after_ms: 45000\n"
      "  timeout_ms: 20000\n  retry_ms: 5000\n",
      "gpupoold.yaml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->fencing.command,
            (std::vector<std::string>{"/usr/local/sbin/fence-node", "--power-off"}));
  EXPECT_EQ(c->fencing.after_ms, 45'000);
  EXPECT_EQ(c->fencing.timeout_ms, 20'000);
  EXPECT_EQ(c->fencing.retry_ms, 5'000);
  struct Case {
    const char* yaml;
    const char* error;
  };
  for (const Case& k : std::vector<Case>{
           {"fencing:\n  command: [fence-node]\n",
            "fencing.command: the program must be an absolute path, got 'fence-node'"},
           {"fencing:\n  after_ms: 10\n",
            "fencing.command: must name the program that powers a node off"},
           {"fencing:\n  command: [/bin/true]\n  timeout_ms: 0\n", "fencing.timeout_ms"},
           {"fencing:\n  command: [/bin/true]\n  shell: yes\n", "fencing.shell"},
       }) {
    Result<DaemonConfig> bad = ParseDaemonConfig(k.yaml, "gpupoold.yaml");
    ASSERT_FALSE(bad.ok()) << k.yaml;
    EXPECT_NE(bad.status().message().find(k.error), std::string::npos) << bad.status().message();
  }
}

TEST(DaemonConfigTest, ConnectionCapsLeaveAReserveAndSplitTheRest) {
  // 1024 descriptors: 128 kept back; REST half of the rest, each gRPC port a quarter.
  ConnectionCaps caps = ConnectionCapsFor(1024);
  EXPECT_EQ(caps.http, 448u);
  EXPECT_EQ(caps.grpc, 224u);
  EXPECT_LE(caps.http + 2 * caps.grpc + 128, 1024u);
  caps = ConnectionCapsFor(256);  // the reserve is at least 64
  EXPECT_EQ(caps.http, 96u);
  EXPECT_EQ(caps.grpc, 48u);
  EXPECT_GE(ConnectionCapsFor(10).http, 1u);  // never 0, which would mean "no limit"
  Result<DaemonConfig> c = ParseDaemonConfig(
      "listen:\n  http_max_connections: 5000\n  grpc_max_connections: 0\n", "gpupoold.yaml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->http_max_connections, 5000);
  EXPECT_EQ(c->grpc_max_connections, 0);  // no limit
  Result<DaemonConfig> unset = ParseDaemonConfig("", "gpupoold.yaml");
  EXPECT_FALSE(unset->http_max_connections.has_value());  // a share of the descriptor limit
  EXPECT_FALSE(ParseDaemonConfig("listen:\n  http_max_connections: -1\n", "x.yaml").ok());
}

// A pool with no `requires:` gets the default requirement; [none] and [] require nothing;
// "none" beside a name is refused, naming the line.
TEST(DaemonConfigTest, APoolRequiresSliceEnforcementAndTheSandboxUnlessItSaysOtherwise) {
  Result<DaemonConfig> c = ParseDaemonConfig(
      "pools:\n  - {name: a}\n  - {name: b, requires: [none]}\n  - {name: c, requires: []}\n"
      "  - {name: d, requires: [vram_scrub, sandbox]}\n",
      "gpupoold.yaml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_EQ(c->pools.size(), 4u);
  EXPECT_EQ(c->pools[0].required_capabilities,
            (std::vector<std::string>{"compute_share", "sandbox", "vram_cap"}));
  EXPECT_TRUE(c->pools[1].required_capabilities.empty());
  EXPECT_TRUE(c->pools[2].required_capabilities.empty());
  EXPECT_EQ(c->pools[3].required_capabilities, (std::vector<std::string>{"sandbox", "vram_scrub"}));
  c = ParseDaemonConfig("pools:\n  - {name: e, requires: [none, sandbox]}\n", "gpupoold.yaml");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("gpupoold.yaml:2"), std::string::npos)
      << c.status().message();
  EXPECT_NE(c.status().message().find("'none' stands alone"), std::string::npos)
      << c.status().message();
}

TEST(DaemonConfigTest, FullConfigParses) {
  const char* yaml = R"(
listen: {grpc: "0.0.0.0:9000", http: "0.0.0.0:9001"}
data_dir: /var/lib/gpupool
database: postgresql://gpupool@db:5432/gpupool
auth:
  api_tokens:
    - {token: "0123456789abcdef0123", principal: "ops", admin: true}
  node_tokens: ["node-token-0123456789"]
scheduler: {default_strategy: fgd, heartbeat_timeout_ms: 5000, job_retention_ms: 3600000}
priority_classes:
  - {name: normal, value: 100}
  - {name: urgent, value: 5000, may_preempt: true, min_runtime_ms: 1000}
skus:
  - {name: tiny, tflops: 12.5, vram_mib: 4096}
  - {name: big, gpus: 2, cpu_milli: 16000}
pools:
  - {name: shared, strategy: fgd, compute_overcommit: 1.5, sharing: fractional,
     compute_share: fair}
  - {name: vip, visibility: private, allowed_tenants: [acme], sharing: time-sliced, replicas: 4,
     mps_isolation: tenant, network: isolated}
)";
  Result<DaemonConfig> c = ParseDaemonConfig(yaml, "gpupoold.yaml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->grpc_listen, "0.0.0.0:9000");
  EXPECT_EQ(c->api_tokens.size(), 1u);
  EXPECT_TRUE(c->api_tokens[0].admin);
  EXPECT_EQ(c->scheduler.priority_classes.at("urgent").value, 5000);
  EXPECT_EQ(c->scheduler.job_retention_ms, 3'600'000);
  // "12.5" TFLOPS → 12500 milli-TFLOPS.
  EXPECT_EQ(c->scheduler.skus.at("tiny").request.fractional, (Resources{12'500, 4096}));
  EXPECT_EQ(c->scheduler.skus.at("big").request.gpu_count, 2);
  ASSERT_EQ(c->pools.size(), 2u);
  EXPECT_EQ(c->pools[0].compute_overcommit.permille, 1500);
  EXPECT_EQ(c->pools[1].visibility, Visibility::kPrivate);
  EXPECT_EQ(c->pools[1].time_slice_replicas, 4);
  EXPECT_FALSE(c->pools[0].mps_tenant_isolation);
  EXPECT_TRUE(c->pools[1].mps_tenant_isolation);
  EXPECT_TRUE(c->pools[0].compute_fair);
  EXPECT_FALSE(c->pools[1].compute_fair);
  EXPECT_EQ(c->pools[0].network, TaskNetwork::kNodeDefault);
  EXPECT_EQ(c->pools[1].network, TaskNetwork::kIsolated);
}

TEST(DaemonConfigTest, ErrorsNameFileKeyAndLine) {
  struct Case {
    const char* yaml;
    const char* expected;
  };
  const Case cases[] = {
      {"listen: {grpc: x}\nbogus: 1\n", "gpupoold.yaml:2: bogus"},
      {"pools:\n  - name: a\n    compute_overcommit: 12\n",
       "gpupoold.yaml:3: pools[0].compute_overcommit"},
      {"pools:\n  - name: a\n    sharing: magic\n", "pools[0].sharing: must be exclusive"},
      {"scheduler:\n  job_retention_ms: -1\n", "gpupoold.yaml:2: scheduler.job_retention_ms"},
      {"pools:\n  - name: a\n    sharing: time-sliced\n", "pools[0].replicas: required"},
      {"pools:\n  - name: a\n    network: bridge\n",
       "pools[0].network: must be none, isolated or host, got 'bridge'"},
      {"pools:\n  - name: a\n    mps_isolation: gpu\n",
       "pools[0].mps_isolation: must be device or tenant, got 'gpu'"},
      {"pools:\n  - name: a\n    sharing: exclusive\n    mps_isolation: tenant\n",
       "pools[0].mps_isolation: tenant isolation needs sharing fractional or time-sliced"},
      {"log_level: loud\n", "gpupoold.yaml:1: log_level: must be debug"},
      {"scheduler: {default_priority_class: vip}\n", "'vip' is not a defined priority class"},
      {"skus:\n  - {name: a, gpus: 1, tflops: 3}\n", "set either gpus or tflops"},
      {"scheduler:\n  starvation_max_reservations: 0\n",
       "gpupoold.yaml:2: scheduler.starvation_max_reservations"},
      {"scheduler:\n  starvation_reserve_after_ms: -5\n",
       "gpupoold.yaml:2: scheduler.starvation_reserve_after_ms"},
  };
  for (const Case& c : cases) {
    Result<DaemonConfig> r = ParseDaemonConfig(c.yaml, "gpupoold.yaml");
    ASSERT_FALSE(r.ok()) << c.yaml;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(c.expected), std::string::npos)
        << "got: " << r.status().message();
  }
}

TEST(DaemonConfigTest, TenantsQuotasAndTenancyOptions) {
  const char* yaml = R"(
scheduler: {fair_share_half_life_ms: 60000, disruption_budget_victims: 3,
            disruption_budget_window_ms: 120000, reservation_timeout_ms: 45000,
            queue_order: fifo, preemption_backoff_ms: 5000, preemption_backoff_max_ms: 60000,
            starvation_reserve_after_ms: 0, starvation_max_reservations: 4,
            starvation_reservation_timeout_ms: 7200000}
tenants:
  - path: acme
    quotas:
      - {pool: gpu, guaranteed: {tflops: 2000, vram_mib: 409600}, limit: {tflops: 4000, devices: 8}}
  - path: acme/research
    quotas:
      - {pool: gpu, guaranteed: {sku: medium, count: 4}, limit: {tflops: 3000.5}}
  - path: acme/research/alice
)";
  Result<DaemonConfig> c = ParseDaemonConfig(yaml, "gpupoold.yaml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->scheduler.tenancy.fair_share_half_life_ms, 60'000);
  EXPECT_EQ(c->scheduler.tenancy.disruption_budget_victims, 3);
  EXPECT_EQ(c->scheduler.tenancy.disruption_budget_window_ms, 120'000);
  EXPECT_EQ(c->scheduler.tenancy.reservation_timeout_ms, 45'000);
  EXPECT_EQ(c->scheduler.tenancy.queue_order, QueueOrderKind::kFifo);
  EXPECT_EQ(c->scheduler.tenancy.preemption_backoff_ms, 5'000);
  EXPECT_EQ(c->scheduler.tenancy.preemption_backoff_max_ms, 60'000);
  EXPECT_EQ(c->scheduler.tenancy.starvation_reserve_after_ms, 0);
  EXPECT_EQ(c->scheduler.tenancy.starvation_max_reservations, 4);
  EXPECT_EQ(c->scheduler.tenancy.starvation_reservation_timeout_ms, 7'200'000);
  ASSERT_EQ(c->tenants.size(), 3u);
  EXPECT_EQ(c->tenants[2].path, "acme/research/alice");
  ASSERT_EQ(c->quotas.size(), 2u);
  EXPECT_EQ(c->quotas[0].guaranteed, (QuotaAmount{Resources{2'000'000, 409'600}, 0}));
  EXPECT_EQ(c->quotas[0].limit, (QuotaAmount{Resources{4'000'000, 0}, 8}));
  // 4 × medium (200 TFLOPS, 40960 MiB) = 800 TFLOPS, 163840 MiB.
  EXPECT_EQ(c->quotas[1].guaranteed, (QuotaAmount{Resources{800'000, 163'840}, 0}));
  EXPECT_EQ(c->quotas[1].limit.resources.milli_tflops, 3'000'500);
}

TEST(DaemonConfigTest, TenantErrorsNameTheLine) {
  struct Case {
    const char* yaml;
    const char* expected;
  };
  const Case cases[] = {
      {"tenants:\n  - path: acme/research\n",
       "gpupoold.yaml:2: tenants[0].path: tenant 'acme/research': parent 'acme' does not exist"},
      {"tenants:\n  - path: Acme\n", "segment 1 'Acme' must match [a-z0-9][a-z0-9-_.]*"},
      {"tenants:\n  - path: a\n    quotas:\n      - {pool: gpu, limit: {sku: huge, count: 1}}\n",
       "tenants[0].quotas[0].limit.sku: sku 'huge' not found"},
      {"tenants:\n  - path: a\n    quotas:\n"
       "      - {pool: gpu, guaranteed: {tflops: 5}, limit: {tflops: 4}}\n",
       "gpupoold.yaml:4: tenants[0].quotas[0]: quota of a in pool gpu: guaranteed 5 TFLOPS "
       "exceeds limit 4 TFLOPS"},
      {"tenants:\n  - path: a\n    quotas:\n      - {pool: gpu, limit: {tflops: 4}}\n"
       "  - path: a/b\n    quotas:\n      - {pool: gpu, limit: {tflops: 5}}\n",
       "exceeds the limit of parent a (4 TFLOPS)"},
      {"tenants:\n  - {path: a, color: red}\n", "tenants[0].color"},
  };
  for (const Case& c : cases) {
    Result<DaemonConfig> r = ParseDaemonConfig(c.yaml, "gpupoold.yaml");
    ASSERT_FALSE(r.ok()) << c.yaml;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(c.expected), std::string::npos)
        << "got: " << r.status().message();
  }
}

TEST(DaemonConfigTest, TheRestAddressAReplicaAdvertises) {
  Result<DaemonConfig> c = ParseDaemonConfig(
      "database: postgresql://db/gp\nha: {enabled: true, advertise_http: "
      "'https://10.0.0.1:7080'}\n",
      "gpupoold.yaml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->ha.advertise_http, "https://10.0.0.1:7080");
  Result<DaemonConfig> bad =
      ParseDaemonConfig("ha: {advertise_http: '10.0.0.1:7080'}\n", "gpupoold.yaml");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("ha.advertise_http"), std::string::npos)
      << bad.status().ToString();
  const char* argv[] = {"gpupoold", "--advertise-http", "10.0.0.1:7080"};
  Result<CommandLine> cl = ParseDaemonCommandLine(3, argv);
  ASSERT_FALSE(cl.ok());
  EXPECT_NE(cl.status().message().find("--advertise-http"), std::string::npos);
}

TEST(DaemonConfigTest, SecureReplicasShareCredentialsUnlessToldNot) {
  Result<DaemonConfig> c =
      ParseDaemonConfig("database: postgresql://db/gp\nha: {enabled: true}\n", "gpupoold.yaml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE(c->ha.share_credentials);
  c = ParseDaemonConfig(
      "database: postgresql://db/gp\nha: {enabled: true, share_credentials: false}\n",
      "gpupoold.yaml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_FALSE(c->ha.share_credentials);
  Result<DaemonConfig> bad = ParseDaemonConfig("ha: {share_credentials: often}\n", "gpupoold.yaml");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("ha.share_credentials: must be true or false"),
            std::string::npos)
      << bad.status().ToString();
}

TEST(DaemonConfigTest, OidcBearerTokens) {
  Result<DaemonConfig> c = ParseDaemonConfig(
      "auth:\n  oidc:\n    issuer: https://idp.example\n    audience: gpupool\n"
      "    public_key_file: /etc/gpupool/idp.pem\n    algorithms: [ES256]\n"
      "    tenant_claim: org\n    clock_skew_s: 30\n",
      "gpupoold.yaml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_TRUE(c->oidc.has_value());
  EXPECT_EQ(c->oidc->issuer, "https://idp.example");
  EXPECT_EQ(c->oidc->public_key_file, "/etc/gpupool/idp.pem");
  EXPECT_EQ(c->oidc->algorithms, std::vector<std::string>{"ES256"});
  EXPECT_EQ(c->oidc->tenant_claim, "org");
  EXPECT_EQ(c->oidc->role_claim, "gpupool_role");
  EXPECT_EQ(c->oidc->clock_skew_s, 30);
  for (const auto& [yaml, expected] : std::vector<std::pair<std::string, std::string>>{
           {"auth:\n  oidc:\n    issuer: i\n    audience: a\n    public_key_file: k\n"
            "    algorithms: [HS256]\n",
            "gpupoold.yaml:6: auth.oidc.algorithms[0]: must be RS256 or ES256"},
           {"auth:\n  oidc:\n    issuer: i\n    audience: a\n", "public_key_file"},
           {"auth:\n  oidc:\n    issuer: i\n    audience: a\n    public_key_file: k\n"
            "    clock_skew_s: 900\n",
            "auth.oidc.clock_skew_s"},
       }) {
    Result<DaemonConfig> bad = ParseDaemonConfig(yaml, "gpupoold.yaml");
    ASSERT_FALSE(bad.ok()) << yaml;
    EXPECT_NE(bad.status().message().find(expected), std::string::npos) << bad.status().message();
  }
}

// Keys from the issuer's JWKS and the console's sign-in (docs/console.md, "Single sign-on").
TEST(DaemonConfigTest, OidcKeysFromTheIssuerAndConsoleSignIn) {
  Result<DaemonConfig> c = ParseDaemonConfig(
      "auth:\n  oidc:\n    issuer: https://idp.example/realms/gpu\n    audience: gpupool\n"
      "    jwks_refresh_s: 300\n    ca_file: /etc/gpupool/idp-ca.pem\n"
      "    console: {client_id: gpupool-console, scopes: [openid, gpupool]}\n",
      "gpupoold.yaml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_TRUE(c->oidc.has_value());
  EXPECT_EQ(c->oidc->public_key_file, "");
  EXPECT_EQ(c->oidc->jwks_refresh_s, 300);
  EXPECT_EQ(c->oidc->ca_file, "/etc/gpupool/idp-ca.pem");
  EXPECT_EQ(c->oidc->console_client_id, "gpupool-console");
  EXPECT_EQ(c->oidc->console_scopes, (std::vector<std::string>{"openid", "gpupool"}));
  Result<DaemonConfig> loopback = ParseDaemonConfig(
      "auth:\n  oidc:\n    issuer: http://127.0.0.1:5556\n    audience: gpupool\n",
      "gpupoold.yaml");
  EXPECT_TRUE(loopback.ok()) << loopback.status().ToString();
  EXPECT_EQ(loopback->oidc->console_scopes, std::vector<std::string>{"openid"});
  for (const auto& [yaml, expected] : std::vector<std::pair<std::string, std::string>>{
           {"auth:\n  oidc:\n    issuer: http://idp.example\n    audience: a\n",
            "gpupoold.yaml:3: auth.oidc.issuer: 'http://idp.example' must be an https:// URL"},
           {"auth:\n  oidc:\n    issuer: https://idp.example/\n    audience: a\n",
            "without a trailing '/'"},
           {"auth:\n  oidc:\n    issuer: https://i\n    audience: a\n    jwks_refresh_s: 5\n",
            "auth.oidc.jwks_refresh_s"},
           {"auth:\n  oidc:\n    issuer: https://i\n    audience: a\n"
            "    console: {client_id: c, scopes: [profile]}\n",
            "auth.oidc.console.scopes: must include openid"},
           {"auth:\n  oidc:\n    issuer: https://i\n    audience: a\n    console: {scopes: "
            "[openid]}\n",
            "client_id"},
           {"auth:\n  oidc:\n    issuer: https://i\n    audience: a\n    console: {client_id: c, "
            "secret: s}\n",
            "secret"},
       }) {
    Result<DaemonConfig> bad = ParseDaemonConfig(yaml, "gpupoold.yaml");
    ASSERT_FALSE(bad.ok()) << yaml;
    EXPECT_NE(bad.status().message().find(expected), std::string::npos) << bad.status().message();
  }
}

TEST(DaemonConfigTest, ReplicasAndTheNodeLease) {
  Result<DaemonConfig> c = ParseDaemonConfig(
      "database: postgresql://db/gp\nha: {enabled: true, lease_ms: 1500, advertise: "
      "10.0.0.1:7070}\nscheduler: {node_lease_stop_grace_ms: 3000, node_lease_margin_ms: 500}\n",
      "gpupoold.yaml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE(c->ha.enabled);
  EXPECT_EQ(c->ha.lease_ms, 1500);
  EXPECT_EQ(c->ha.advertise, "10.0.0.1:7070");
  EXPECT_EQ(c->scheduler.node_lease_stop_grace_ms, 3000);
  EXPECT_EQ(c->scheduler.node_lease_margin_ms, 500);
  Result<DaemonConfig> bad = ParseDaemonConfig("ha: {lease_ms: 5}\n", "gpupoold.yaml");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("ha.lease_ms"), std::string::npos)
      << bad.status().ToString();
  // Replicas share an external database; the embedded one is single-node.
  const char* argv[] = {"gpupoold", "--replica", "true"};
  Result<CommandLine> cl = ParseDaemonCommandLine(3, argv);
  ASSERT_FALSE(cl.ok());
  EXPECT_NE(cl.status().message().find("need --database"), std::string::npos);
  const char* argv2[] = {"gpupoold", "--replica", "true", "--database", "postgresql://db/gp"};
  cl = ParseDaemonCommandLine(5, argv2);
  ASSERT_TRUE(cl.ok()) << cl.status().ToString();
  EXPECT_TRUE(cl->config.ha.enabled);
}

TEST(DaemonConfigTest, FlagsOverride) {
  const char* argv[] = {"gpupoold",          "--grpc-listen", "127.0.0.1:0",
                        "--data-dir=/tmp/x", "--log-level",   "debug"};
  Result<CommandLine> cl = ParseDaemonCommandLine(6, argv);
  ASSERT_TRUE(cl.ok()) << cl.status().ToString();
  EXPECT_EQ(cl->config.grpc_listen, "127.0.0.1:0");
  EXPECT_EQ(cl->config.data_dir, "/tmp/x");
  EXPECT_EQ(cl->config.log_level, "debug");
  const char* bad[] = {"gpupoold", "--nope", "1"};
  EXPECT_NE(ParseDaemonCommandLine(3, bad).status().message().find("unknown flag --nope"),
            std::string::npos);
}

// Issue 16: a pool named "A B" was created from YAML and could then never be addressed through
// the API; a port of 99999 wrapped to 34463; a directory given as --config meant defaults.
TEST(DaemonConfigTest, RefusesUnaddressablePoolsBadPortsAndDirectories) {
  struct Case {
    const char* yaml;
    const char* expected;
  };
  const Case cases[] = {
      {"pools:\n  - name: shared\n  - name: A B\n",
       "gpupoold.yaml:3: pools[1].name: 'A B' must match"},
      {"pools:\n  - {name: vip, visibility: private, allowed_tenants: [acme, 'Bad Tenant']}\n",
       "gpupoold.yaml:2: pools[0].allowed_tenants[1]"},
      {"listen:\n  grpc: 127.0.0.1:99999\n",
       "gpupoold.yaml:2: listen.grpc: port 99999 is out of range 0..65535"},
      {"listen:\n  http: 127.0.0.1:http\n", "gpupoold.yaml:2: listen.http: port 'http'"},
      {"listen:\n  http: localhost\n", "listen.http: expected host:port"},
  };
  for (const Case& c : cases) {
    Result<DaemonConfig> r = ParseDaemonConfig(c.yaml, "gpupoold.yaml");
    ASSERT_FALSE(r.ok()) << c.yaml;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(c.expected), std::string::npos)
        << "got: " << r.status().message();
  }
  const char* port[] = {"gpupoold", "--http-listen", "127.0.0.1:99999"};
  EXPECT_NE(ParseDaemonCommandLine(3, port).status().message().find(
                "--http-listen: port 99999 is out of range"),
            std::string::npos);
  const std::string dir = ::testing::TempDir();
  const char* config_dir[] = {"gpupoold", "--config", dir.c_str()};
  Result<CommandLine> r = ParseDaemonCommandLine(3, config_dir);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("is a directory"), std::string::npos) << r.status().message();
}

TEST(DaemonConfigTest, SubmissionRateLimit) {
  Result<DaemonConfig> d = ParseDaemonConfig("", "x.yaml");
  EXPECT_EQ(d->submit_rate_per_second, 50);
  EXPECT_EQ(d->submit_burst, 100);
  Result<DaemonConfig> c = ParseDaemonConfig(
      "tenant_defaults: {submit_rate_per_second: 2.5, submit_burst: 10}\n", "x.yaml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->submit_rate_per_second, 2.5);
  EXPECT_EQ(c->submit_burst, 10);
  EXPECT_NE(ParseDaemonConfig("tenant_defaults: {submit_burst: 0}\n", "x.yaml")
                .status()
                .message()
                .find("x.yaml:1: tenant_defaults.submit_burst"),
            std::string::npos);
}

TEST(DaemonConfigTest, TlsListenAndNodeCertificates) {
  Result<DaemonConfig> c = ParseDaemonConfig(
      "listen: {grpc_tls: 0.0.0.0:7443}\nauth: {require_node_certificates: true}\n", "x.yaml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->grpc_tls_listen, "0.0.0.0:7443");
  // Token-only registration is gone: the old opt-out is refused, naming the key.
  Result<DaemonConfig> opt_out =
      ParseDaemonConfig("auth: {require_node_certificates: false}\n", "x.yaml");
  ASSERT_FALSE(opt_out.ok());
  EXPECT_NE(opt_out.status().message().find("x.yaml:1: auth.require_node_certificates"),
            std::string::npos)
      << opt_out.status().message();
  EXPECT_TRUE(ParseDaemonConfig("", "x.yaml")->grpc_tls_listen.empty());  // off by default
  EXPECT_EQ(ParseDaemonConfig("", "x.yaml")->http_max_connections_per_client, 256);
  EXPECT_EQ(ParseDaemonConfig("listen: {http_max_connections_per_client: 0}\n", "x.yaml")
                ->http_max_connections_per_client,
            0);
  EXPECT_NE(ParseDaemonConfig("listen: {grpc_tls: \"h:70000\"}\n", "x.yaml")
                .status()
                .message()
                .find("x.yaml:1: listen.grpc_tls: port 70000 is out of range"),
            std::string::npos);
  const char* argv[] = {"gpupoold", "--grpc-tls-listen", "127.0.0.1:0"};
  EXPECT_EQ(ParseDaemonCommandLine(3, argv)->config.grpc_tls_listen, "127.0.0.1:0");
}

TEST(DaemonConfigTest, PriorityClassesPerTenantAreInheritedAndNeverWidened) {
  const char* yaml = R"(
tenants:
  - path: ops
    priority_classes: [low, normal, high, system]
  - path: ops/oncall
  - path: acme
    priority_classes: [low, normal]
  - path: acme/batch
    priority_classes: [low]
)";
  Result<DaemonConfig> c = ParseDaemonConfig(yaml, "gpupoold.yaml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_EQ(c->tenant_priority_classes.size(), 3u);
  Result<api::PriorityAccess> a =
      api::PriorityAccess::Create(c->scheduler, c->default_priority_classes);
  ASSERT_TRUE(a.ok());
  for (const auto& [t, l] : c->tenant_priority_classes) ASSERT_TRUE(a->Add(t, l).ok());
  EXPECT_TRUE(a->Check(false, "ops/oncall/x", "system").ok());  // inherited from ops
  EXPECT_TRUE(a->Check(false, "acme/research", "normal").ok());
  EXPECT_TRUE(a->Check(false, "acme/batch/x", "low").ok());
  EXPECT_TRUE(a->Check(true, "acme/batch/x", "system").ok());  // admins may use any class
  Status s = a->Check(false, "acme/batch/x", "");              // the default class, normal
  EXPECT_EQ(s.code(), StatusCode::kPermissionDenied);
  EXPECT_NE(s.message().find("'normal'"), std::string::npos) << s.message();
  // Default: the preemptible classes up to the default one — never `system`, not `high`.
  s = a->Check(false, "globex", "system");
  EXPECT_EQ(s.code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(s.message(),
            "spec.priority_class: tenant 'globex' may not submit at priority class 'system' "
            "(allowed: low, normal)");
  EXPECT_EQ(a->Check(false, "globex", "high").code(), StatusCode::kPermissionDenied);

  struct Case {
    const char* yaml;
    const char* expected;
  };
  const Case cases[] = {
      {"tenants:\n  - path: a\n    priority_classes: [low, turbo]\n",
       "gpupoold.yaml:3: tenants[0].priority_classes: priority class 'turbo' is not defined"},
      {"tenants:\n  - path: a\n    priority_classes: [low]\n  - path: a/b\n"
       "    priority_classes: [low, high]\n",
       "gpupoold.yaml:5: tenants[1].priority_classes: priority class 'high' is not allowed for "
       "'a/b'"},
      {"tenants:\n  - path: a\n    priority_classes: [normal]\n  - path: a/b\n  - path: a/b/c\n"
       "    priority_classes: [system]\n",
       "priority class 'system' is not allowed for 'a/b/c': the tenants above it allow only "
       "normal"},
      {"tenant_defaults: {priority_classes: [nope]}\n",
       "gpupoold.yaml:1: tenant_defaults.priority_classes: priority class 'nope' is not defined"},
  };
  for (const Case& k : cases) {
    Result<DaemonConfig> r = ParseDaemonConfig(k.yaml, "gpupoold.yaml");
    ASSERT_FALSE(r.ok()) << k.yaml;
    EXPECT_NE(r.status().message().find(k.expected), std::string::npos)
        << "got: " << r.status().message();
  }
  // An operator may also open `system` to every tenant without a list of its own.
  Result<DaemonConfig> open =
      ParseDaemonConfig("tenant_defaults: {priority_classes: [normal, system]}\n", "x.yaml");
  ASSERT_TRUE(open.ok()) << open.status().ToString();
  Result<api::PriorityAccess> b =
      api::PriorityAccess::Create(open->scheduler, open->default_priority_classes);
  ASSERT_TRUE(b.ok());
  EXPECT_TRUE(b->Check(false, "anyone", "system").ok());
  EXPECT_FALSE(b->Check(false, "anyone", "low").ok());
}

TEST(DaemonConfigTest, InsecureIsRefusedUnlessEveryListenAddressIsLoopback) {
  struct Case {
    std::string address;
    bool loopback;
  };
  for (const Case& c :
       {Case{"127.0.0.1:7070", true}, Case{"127.9.8.7:0", true}, Case{"localhost:1", true},
        Case{"[::1]:7070", true}, Case{"0.0.0.0:7070", false}, Case{":7070", false},
        Case{"10.0.0.1:7070", false}, Case{"[::]:7070", false}, Case{"127.0.0.1.evil:7070", false},
        Case{"gpu.example:7070", false}}) {
    EXPECT_EQ(IsLoopbackListenAddress(c.address), c.loopback) << c.address;
  }
  {
    const char* argv[] = {"gpupoold", "--insecure"};
    auto cl = ParseDaemonCommandLine(2, argv);
    ASSERT_TRUE(cl.ok()) << cl.status().ToString();
    EXPECT_TRUE(cl->config.insecure);
  }
  {
    const char* argv[] = {"gpupoold"};
    EXPECT_FALSE(ParseDaemonCommandLine(1, argv)->config.insecure);  // secure by default
  }
  for (const char* flag : {"--grpc-listen", "--http-listen", "--grpc-tls-listen"}) {
    const char* argv[] = {"gpupoold", "--insecure", flag, "0.0.0.0:7070"};
    auto cl = ParseDaemonCommandLine(4, argv);
    ASSERT_FALSE(cl.ok()) << flag;
    EXPECT_EQ(
        cl.status().message().rfind(
            std::string("--insecure: ") + flag + " '0.0.0.0:7070' is not a loopback address", 0),
        0u)
        << cl.status().message();
  }
}

TEST(DaemonConfigTest, ApiTokenRoles) {
  auto c = ParseDaemonConfig(
      "auth:\n  api_tokens:\n    - {token: tttttttttttttttt1, principal: acme, role: "
      "tenant-admin}\n    - {token: tttttttttttttttt2, principal: acme/x}\n",
      "x.yaml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->api_tokens[0].role, "tenant-admin");
  EXPECT_EQ(c->api_tokens[1].role, "member");
  auto bad = ParseDaemonConfig(
      "auth:\n  api_tokens:\n    - {token: tttttttttttttttt1, principal: acme, role: owner}\n",
      "x.yaml");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("auth.api_tokens[0].role: must be viewer, member or "
                                        "tenant-admin"),
            std::string::npos)
      << bad.status().message();
}

}  // namespace
}  // namespace gpupool

namespace gpupool {
namespace {

// The `metering:` section (cmd/daemon/config_metering.cc, docs/billing.md).
TEST(DaemonConfigTest, MeteringSection) {
  Result<DaemonConfig> c = ParseDaemonConfig(
      "metering:\n  interval_s: 30\n  metrics_tenant_depth: 1\n  rollup_after_days: 90\n"
      "  enabled: false\n  report_concurrency: 4\n  report_timeout_ms: 15000\n",
      "gpupoold.yaml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->scheduler.metering.interval_s, 30);
  EXPECT_EQ(c->scheduler.metering.metrics_tenant_depth, 1);
  EXPECT_EQ(c->scheduler.metering.rollup_after_days, 90);
  EXPECT_FALSE(c->scheduler.metering.enabled);
  EXPECT_EQ(c->scheduler.metering.report_concurrency, 4);
  EXPECT_EQ(c->scheduler.metering.report_timeout_ms, 15000);
  Result<DaemonConfig> d = ParseDaemonConfig("", "gpupoold.yaml");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->scheduler.metering.interval_s, 60);
  EXPECT_TRUE(d->scheduler.metering.enabled);
  EXPECT_EQ(d->scheduler.metering.report_concurrency, 2);
  EXPECT_EQ(d->scheduler.metering.report_timeout_ms, 60000);
  for (const auto& [yaml, expected] : std::vector<std::pair<std::string, std::string>>{
           {"metering:\n  interval_s: 7\n", "gpupoold.yaml:2: metering.interval_s: must divide"},
           {"metering:\n  metrics_tenant_depth: 0\n", "metering.metrics_tenant_depth"},
           {"metering:\n  enabled: maybe\n", "metering.enabled: must be true or false"},
           {"metering:\n  report_concurrency: 0\n", "metering.report_concurrency"},
           {"metering:\n  report_timeout_ms: 5\n", "metering.report_timeout_ms"},
           {"metering:\n  nope: 1\n", "nope"}}) {
    Result<DaemonConfig> r = ParseDaemonConfig(yaml, "gpupoold.yaml");
    ASSERT_FALSE(r.ok()) << yaml;
    EXPECT_NE(r.status().message().find(expected), std::string::npos)
        << "got: " << r.status().message();
  }
}

}  // namespace
}  // namespace gpupool
