// gpupoold: the gpupool scheduler daemon. Wiring only: parse the command line, bring up the
// database (embedded unless one is configured), recover the core, serve gRPC and HTTP, and stop
// cleanly on SIGTERM/SIGINT.
#include <malloc.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <sstream>
#include <thread>

#include "api/agent_hub.h"
#include "api/auth.h"
#include "api/credentials.h"
#include "api/gateway/controller_directory.h"
#include "api/gateway/gateway.h"
#include "api/grpc/grpc_server.h"
#include "api/key_cache.h"
#include "api/priority_access.h"
#include "api/rest/http_server.h"
#include "api/service_impl.h"
#include "api/tls/enroll_service.h"
#include "api/tls/node_identity.h"
#include "api/webhooks/dispatcher.h"
#include "base/log.h"
#include "cmd/daemon/cluster_credentials.h"
#include "cmd/daemon/config.h"
#include "cmd/daemon/config_services.h"
#include "cmd/daemon/fencer.h"
#include "cmd/daemon/ledger_usage_source.h"
#include "cmd/daemon/oidc.h"
#include "cmd/daemon/price_plans.h"
#include "cmd/daemon/reload.h"
#include "cmd/daemon/secrets_key.h"
#include "cmd/daemon/standby.h"
#include "pool/catalog.h"
#include "scheduler/budget_watcher.h"
#include "scheduler/leadership.h"
#include "scheduler/metrics.h"
#include "scheduler/registry_credentials.h"
#include "scheduler/scheduler.h"
#include "scheduler/service_controller.h"
#include "store/embedded_postgres.h"
#include "store/embedded_supervisor.h"
#include "store/pg_api_keys.h"
#include "store/pg_budgets.h"
#include "store/pg_join_tokens.h"
#include "store/pg_key_feed.h"
#include "store/pg_leader_lease.h"
#include "store/pg_node_enrolments.h"
#include "store/pg_registry_credentials.h"
#include "store/pg_services.h"
#include "store/pg_store.h"
#include "store/pg_webhooks.h"
#include "twin/preflight.h"

namespace gpupool {
namespace {

constexpr char kVersion[] = "0.1.0";

int Fail(const Status& st) {
  LogError("gpupoold", "cannot start", {{"error", st.ToString()}});
  std::fprintf(stderr, "gpupoold: %s\n", st.ToString().c_str());
  return 1;
}

// Blocks until SIGTERM, SIGINT or SIGHUP. The signals are blocked in every thread (set before
// any thread starts), so sigwait is the only place that sees them.
int WaitForSignal(const sigset_t& set) {
  int sig = 0;
  sigwait(&set, &sig);
  return sig;
}

// A run of the fencing command in the audit log: who acted (the fencer, on the operator's
// command), on which node, and whether the node was fenced.
void AuditFence(api::AuditSink* audit, const std::vector<std::string>& command,
                const FenceAttempt& a) {
  api::AuditEntry e;
  e.time_us = SystemClock::Get()->NowMicros();
  e.actor.key_id = "fencer";
  e.actor.principal = command.empty() ? std::string() : command.front();
  e.actor.role = "admin";
  e.verb = "FenceNode";
  e.resource = "node/" + a.node;
  e.code = a.outcome.code();
  e.message = a.outcome.ok() ? "fenced by the fencing command" : a.outcome.message();
  e.source = "gpupoold";
  audit->Record(std::move(e), /*must_keep=*/true, nullptr);
}

// A webhook the dispatcher disabled after failing too long (docs/webhooks.md): its tenant's and
// the operator's to see in the audit log.
void AuditWebhookDisabled(api::AuditSink* audit, const WebhookRecord& w,
                          const std::string& reason) {
  api::AuditEntry e;
  e.time_us = SystemClock::Get()->NowMicros();
  e.actor.key_id = "gpupoold";
  e.actor.role = "admin";
  e.verb = "DisableWebhook";
  e.resource = "webhook/" + std::to_string(w.id);
  e.tenant = w.tenant;
  e.code = StatusCode::kFailedPrecondition;
  e.message = reason;
  e.source = "gpupoold";
  audit->Record(std::move(e), /*must_keep=*/true, nullptr);
}

// Secrets re-sealed under a new key at start (a rotation, or plaintext from an older version):
// an operator's security event, kept in the audit log.
void AuditReseal(api::AuditSink* audit, const PgStore::Reseal& r) {
  if (r.jobs + r.credentials + r.registry_credentials + r.webhooks + r.retired_keys == 0) return;
  api::AuditEntry e;
  e.time_us = SystemClock::Get()->NowMicros();
  e.actor.key_id = "gpupoold";
  e.actor.role = "admin";
  e.verb = "ResealSecrets";
  e.resource = "secrets-key/" + r.key;
  e.message = "re-sealed the secrets of " + std::to_string(r.jobs) + " jobs, " +
              std::to_string(r.credentials) + " shared credentials and " +
              std::to_string(r.registry_credentials) + " registry credentials under key " + r.key +
              "; retired " + std::to_string(r.retired_keys) + " older keys";
  e.source = "gpupoold";
  audit->Record(std::move(e), /*must_keep=*/true, nullptr);
}

// The bootstrap credentials: the config's tokens and, unless --insecure, the admin credential
// in DATA_DIR/admin.token (created on first start).
Result<std::vector<api::ApiToken>> ApiTokens(const DaemonConfig& c) {
  std::vector<api::ApiToken> out;
  for (const ApiToken& t : c.api_tokens) {
    GPUPOOL_ASSIGN_OR_RETURN(api::Role role, api::ParseRole(t.role));
    out.push_back({t.token, t.principal, t.admin, role});
  }
  if (!c.insecure) {
    const std::string path = (std::filesystem::path(c.data_dir) / "admin.token").string();
    GPUPOOL_ASSIGN_OR_RETURN(std::string admin,
                             api::LoadOrCreateTokenFile(path, "the admin credential"));
    out.push_back({admin, "admin-token", true, api::Role::kAdmin});
  }
  return out;
}

// Names for the server certificate beyond localhost/127.0.0.1/::1 (issued on first start): this
// host's name and every listen host that is not a wildcard, so clients can verify either.
std::vector<std::string> ServerNames(const DaemonConfig& c) {
  std::vector<std::string> names;
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) == 0 && host[0] != '\0') names.emplace_back(host);
  // The advertised address too: clients following a standby's NotLeader connect to it.
  for (const std::string* a :
       {&c.grpc_listen, &c.http_listen, &c.grpc_tls_listen, &c.gateway_listen, &c.ha.advertise}) {
    const size_t colon = a->rfind(':');
    if (colon == std::string::npos) continue;
    std::string h = a->substr(0, colon);
    if (h.size() >= 2 && h.front() == '[') h = h.substr(1, h.size() - 2);
    if (h.empty() || h == "0.0.0.0" || h == "::" || h == "localhost" || h == "127.0.0.1" ||
        h == "::1") {
      continue;
    }
    if (std::find(names.begin(), names.end(), h) == names.end()) names.push_back(h);
  }
  return names;
}

// Raises the soft descriptor limit to the hard one: every client connection, agent stream and
// database connection takes a descriptor, and the usual soft default (1024) is what an idle
// connection flood exhausts first (docs/security.md).
void RaiseDescriptorLimit() {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) != 0 || lim.rlim_cur >= lim.rlim_max) return;
  const rlim_t before = lim.rlim_cur;
  lim.rlim_cur = lim.rlim_max;
  if (setrlimit(RLIMIT_NOFILE, &lim) == 0) {
    LogInfo("gpupoold", "raised the descriptor limit",
            {{"from", std::to_string(before)}, {"to", std::to_string(lim.rlim_cur)}});
  }
}

// Creates the config file's pools that the store does not have yet.
Status CreateConfiguredPools(Scheduler& scheduler, const std::vector<PoolRecord>& pools) {
  for (const PoolRecord& p : pools) {
    bool exists = CallAndWait<PoolView>([&](auto cb) { scheduler.GetPool(p.name, cb); }).ok();
    if (exists) continue;
    Status st = CallAndWait<PoolView>([&](auto cb) { scheduler.CreatePool(p, cb); });
    GPUPOOL_RETURN_IF_ERROR(st.WithContext("create pool '" + p.name + "'"));
    LogInfo("gpupoold", "pool created from config", {{"pool", p.name}});
  }
  return Status::Ok();
}

// Creates the config file's tenants that do not exist yet (parents first, as listed), then sets
// every configured quota (an upsert: the config file wins over earlier API changes).
Status ApplyConfiguredTenancy(Scheduler& scheduler, const DaemonConfig& config) {
  for (const TenantRecord& t : config.tenants) {
    bool exists = CallAndWait<TenantView>([&](auto cb) { scheduler.GetTenant(t.path, cb); }).ok();
    if (exists) continue;
    Status st = CallAndWait<TenantView>([&](auto cb) { scheduler.CreateTenant(t, cb); });
    GPUPOOL_RETURN_IF_ERROR(st.WithContext("create tenant '" + t.path + "'"));
  }
  for (const QuotaRecord& q : config.quotas) {
    Status st = CallAndWait<QuotaView>([&](auto cb) { scheduler.SetQuota(q, cb); });
    GPUPOOL_RETURN_IF_ERROR(
        st.WithContext("set quota of '" + q.tenant + "' in pool '" + q.pool + "'"));
  }
  return Status::Ok();
}

int Run(int argc, char** argv) {
  Result<CommandLine> cl = ParseDaemonCommandLine(argc, argv);
  if (!cl.ok()) {
    std::fprintf(stderr, "gpupoold: %s\n", cl.status().message().c_str());
    return 2;
  }
  if (cl->help) {
    std::fputs(DaemonUsage().c_str(), stdout);
    return 0;
  }
  if (cl->version) {
    std::printf("gpupoold %s\n", kVersion);
    return 0;
  }
  DaemonConfig& config = cl->config;
  LogLevel level = LogLevel::kInfo;
  ParseLogLevel(config.log_level, &level);
  SetLogLevel(level);

  RaiseDescriptorLimit();

  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);
  // One thread waits for SIGTERM/SIGINT for the whole life of the process (a standby must stop
  // while it waits for the lease, too). Static: it outlives every early return.
  // SIGHUP is handled on the same thread, by the reload hook once the daemon serves.
  static std::atomic<bool> stopping{false};
  static std::promise<int> stop_signal;
  static std::mutex reload_mu;
  static std::function<void()> on_hup;  // guarded by reload_mu
  std::future<int> stopped = stop_signal.get_future();
  std::thread([set = signals] {
    int sig = WaitForSignal(set);
    while (sig == SIGHUP) {
      std::function<void()> reload;
      {
        std::lock_guard lock(reload_mu);
        reload = on_hup;
      }
      if (reload) {
        reload();
      } else {
        LogWarn("gpupoold", "SIGHUP before the daemon serves: ignored");
      }
      sig = WaitForSignal(set);
    }
    stopping = true;
    stop_signal.set_value(sig);
  }).detach();

  const Catalog* catalog = &Catalog::Builtin();
  std::unique_ptr<Catalog> loaded;
  if (!config.catalog.empty()) {
    Result<Catalog> c = Catalog::LoadFile(config.catalog);
    if (!c.ok()) return Fail(c.status());
    loaded = std::make_unique<Catalog>(std::move(c).value());
    catalog = loaded.get();
  }

  // Before the database: a missing or wrong key stops the daemon here, naming it.
  Result<std::shared_ptr<const SecretKeyring>> keyring = LoadSecretsKey(config);
  if (!keyring.ok()) return Fail(keyring.status().WithContext("secrets key"));

  std::unique_ptr<EmbeddedPostgres> embedded;
  std::unique_ptr<EmbeddedSupervisor> supervisor;
  std::string uri = config.database;
  if (uri.empty()) {
    EmbeddedPostgresOptions opts;
    opts.data_dir = (std::filesystem::absolute(config.data_dir) / "pg").string();
    opts.port = config.embedded_port;
    LogInfo("gpupoold", "no database configured; starting embedded PostgreSQL",
            {{"dir", opts.data_dir}});
    Result<std::unique_ptr<EmbeddedPostgres>> pg = EmbeddedPostgres::Start(opts);
    if (!pg.ok()) return Fail(pg.status().WithContext("embedded PostgreSQL"));
    embedded = std::move(pg).value();
    uri = embedded->uri();
    supervisor = std::make_unique<EmbeddedSupervisor>(embedded.get());  // restarts it if it dies
  }

  PgStoreOptions store_options;
  store_options.uri = uri;
  store_options.report_connections = config.scheduler.metering.report_concurrency;
  store_options.report_timeout_ms = config.scheduler.metering.report_timeout_ms;
  store_options.keyring = *keyring;
  Result<std::unique_ptr<PgStore>> opened = PgStore::Open(store_options);
  if (!opened.ok()) return Fail(opened.status().WithContext("open store"));
  std::unique_ptr<PgStore> store = std::move(opened).value();
  // Secure replicas share one CA and admin credential through the database (docs/ha.md).
  if (config.ha.enabled && !config.insecure && config.ha.share_credentials) {
    Status st = ShareClusterCredentials(uri, config.data_dir, ServerNames(config), **keyring);
    if (!st.ok()) return Fail(st.WithContext("secure replicas"));
  }
  // The private CA (created on first start) and the node identities it vouches for.
  Result<tls::CertAuthority> ca = tls::CertAuthority::LoadOrCreate(
      (std::filesystem::path(config.data_dir) / "tls").string(), ServerNames(config));
  if (!ca.ok()) return Fail(ca.status().WithContext("private CA"));
  // The gRPC ports' TLS (the secure default on the main port; the optional mTLS port).
  std::optional<api::GrpcTlsPort> main_tls, tls_port;
  if (!config.grpc_tls_listen.empty()) {
    tls_port = api::GrpcTlsPort{config.grpc_tls_listen, ca->server_cert_pem(), ca->server_key_pem(),
                                ca->ca_pem()};
  }
  if (!config.insecure) {
    main_tls = api::GrpcTlsPort{"", ca->server_cert_pem(), ca->server_key_pem(), ca->ca_pem()};
  }
  // Replicas wait as standbys until this one holds the leader lease, answering on their ports
  // with the leader's address and executing nothing (cmd/daemon/standby.h); losing the lease ends
  // the process at once: no write, no dispatch after (docs/ha.md, "Leader election").
  std::unique_ptr<StandbyFace> standby;
  auto lease_won = std::chrono::steady_clock::now();  // takeover timing in the "ready" log line
  std::unique_ptr<PgLeaderLease> lease;
  std::unique_ptr<Leadership> leadership;
  Result<int64_t> epoch = Status::Internal("no epoch");
  if (config.ha.enabled) {
    const AdvertisedAddresses advertise = AdvertisedOf(config);
    Result<std::unique_ptr<PgLeaderLease>> opened_lease =
        PgLeaderLease::Open(uri, PgLeaderLease::DefaultHolder(), advertise.grpc, advertise.http);
    if (!opened_lease.ok()) return Fail(opened_lease.status().WithContext("leader lease"));
    lease = std::move(opened_lease).value();
    LeadershipOptions lo;
    lo.lease_ms = config.ha.lease_ms;
    lo.poll_ms = std::max<int64_t>(20, config.ha.lease_ms / 10);
    lo.safety_ms = std::max<int64_t>(50, config.ha.lease_ms / 8);
    leadership = std::make_unique<Leadership>(lease.get(), lo, [](const Status&) {
      std::fflush(nullptr);
      std::_Exit(4);
    });
    standby = std::make_unique<StandbyFace>(config, main_tls, tls_port,
                                            config.insecure ? "" : ca->server_cert_pem(),
                                            config.insecure ? "" : ca->server_key_pem());
    if (Status st = standby->Start(); !st.ok()) return Fail(st);
    epoch = leadership->WaitToLead(stopping, [&](const LeaderClaim& c) { standby->OnPoll(c); });
    if (!epoch.ok()) {
      LogInfo("gpupoold", "stopped while standby");
      return 0;
    }
    lease_won = std::chrono::steady_clock::now();
    store->UseEpoch(*epoch);
    leadership->KeepRenewing();
  } else {
    epoch = store->AcquireLeadership();
  }
  if (!epoch.ok()) return Fail(epoch.status().WithContext("acquire leadership"));
  Result<RecoveredState> state = store->Recover();
  if (!state.ok()) return Fail(state.status().WithContext("recover"));
  const auto since_lease = [&] {
    return std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(
                              std::chrono::steady_clock::now() - lease_won)
                              .count());
  };
  LogInfo("gpupoold", "recovered", {{"ms_since_lease", since_lease()}});

  auto registry = std::make_shared<prometheus::Registry>();
  SchedulerMetrics metrics(registry, kVersion);
  // The node identities the private CA (loaded above) vouches for.
  api::tls::NodeIdentityOptions id_options;
  id_options.join_tokens.insert(config.node_tokens.begin(), config.node_tokens.end());
  // Secure mode: a node registers only with its certificate; the join token written on first
  // start (like admin.token) buys one. --insecure has no TLS, so no certificates
  // (docs/security.md).
  id_options.require_certificates = !config.insecure;
  if (!config.insecure) {
    const std::string path = (std::filesystem::path(config.data_dir) / "node.token").string();
    Result<std::string> join = api::LoadOrCreateTokenFile(path, "the node join token");
    if (!join.ok()) return Fail(join.status().WithContext("node join token"));
    id_options.join_tokens.insert(*join);
  }
  // Enrolments and the join tokens admins create live in PostgreSQL, shared by replicas
  // (docs/ha.md, "Secure replicas").
  Result<std::unique_ptr<PgNodeEnrolments>> enrolments = PgNodeEnrolments::Open(uri);
  if (!enrolments.ok()) return Fail(enrolments.status().WithContext("node enrolments"));
  Result<std::unique_ptr<PgJoinTokens>> join_tokens = PgJoinTokens::Open(uri);
  if (!join_tokens.ok()) return Fail(join_tokens.status().WithContext("join tokens"));
  id_options.created_tokens = join_tokens->get();
  Result<std::unique_ptr<api::tls::NodeIdentities>> identities =
      api::tls::NodeIdentities::Open(&*ca, enrolments->get(), id_options);
  if (!identities.ok()) return Fail(identities.status().WithContext("node identities"));
  api::AgentHubOptions hub_options;
  hub_options.node_tokens.insert(config.node_tokens.begin(), config.node_tokens.end());
  hub_options.catalog = catalog;  // a device that contradicts the catalog is refused
  hub_options.identities = identities->get();
  api::AgentHub hub(hub_options);
  // Tenants' registry credentials (docs/images.md, "Private registries"): kept sealed in the
  // database, read when a task that names one starts.
  Result<std::unique_ptr<PgRegistryCredentials>> registry_credentials =
      PgRegistryCredentials::Open(uri, *keyring);
  if (!registry_credentials.ok()) {
    return Fail(registry_credentials.status().WithContext("registry credentials"));
  }
  CredentialInjectingGateway gateway(&hub, registry_credentials->get());
  config.scheduler.catalog = catalog;  // the MIG geometry dynamic layouts follow
  Scheduler scheduler(config.scheduler, SystemClock::Get(), store.get(), &gateway, &metrics);
  hub.Attach(&scheduler);
  if (Status st = scheduler.Start(*state, *epoch); !st.ok()) return Fail(st);
  // The core keeps its own copy of everything recovered. Held here, the snapshot stayed for the
  // daemon's life: with 50,000 queued jobs it was ~120 MB, about the core's tables again
  // (docs/benchmarks.md, "Restart"). glibc keeps freed memory unless told to return it.
  *state = RecoveredState{};
  malloc_trim(0);
  if (Status st = CreateConfiguredPools(scheduler, config.pools); !st.ok()) return Fail(st);
  if (Status st = ApplyConfiguredTenancy(scheduler, config); !st.ok()) return Fail(st);
  if (Result<int> added = ApplyConfiguredPricePlans(*store, config.price_plans,
                                                    SystemClock::Get()->NowMicros() / 1000);
      !added.ok()) {
    return Fail(added.status());
  }

  api::ServiceOptions service_options;
  service_options.catalog = catalog;
  service_options.metrics = &metrics;             // submissions refused at the edge
  service_options.scheduler = &config.scheduler;  // SetQuota converts SKU units with its SKUs
  // /readyz: ready means a submission would commit now — the reader answers and a fenced no-op
  // transaction commits through the writer (a restarted database is seen by both).
  service_options.store_health = [&store] {
    GPUPOOL_RETURN_IF_ERROR(store->Ping());
    return store->CheckWritable();
  };
  Result<api::PriorityAccess> classes = PriorityAccessOf(config);
  if (!classes.ok()) return Fail(classes.status());
  service_options.priority_access = &*classes;
  api::RateLimiter submit_limiter({config.submit_rate_per_second, config.submit_burst});
  service_options.submit_limiter = &submit_limiter;
  // Every mutating and every denied API call, in PostgreSQL (docs/security.md, "Audit log").
  auto audit_log = std::make_unique<api::AuditLog>(store.get(), api::AuditLogOptions{registry});
  service_options.audit = audit_log.get();
  hub.AttachAudit(audit_log.get());  // node registrations and task reports (api/agent_audit.h)
  AuditReseal(audit_log.get(), store->last_reseal());
  // `fencing.command` (docs/ha.md, "Fencing"): a silent node that holds tasks is powered off
  // and fenced without waiting out its lease; every run is audited.
  NodeFencer fencer(config.fencing, &scheduler, SystemClock::Get(),
                    [audit = audit_log.get(), command = config.fencing.command](
                        const FenceAttempt& a) { AuditFence(audit, command, a); });
  fencer.Start();
  // The usage report (docs/billing.md): an aggregate over the ledger, on the read connection.
  service_options.usage_report = [&store](const UsageQuery& q) { return store->QueryUsage(q); };
  Result<std::unique_ptr<PgApiKeyStore>> opened_keys = PgApiKeyStore::Open(uri);
  if (!opened_keys.ok()) return Fail(opened_keys.status().WithContext("API keys"));
  std::unique_ptr<PgApiKeyStore> api_keys = std::move(opened_keys).value();
  // Verified API keys are cached while PostgreSQL's change feed is live, so a call costs no
  // lookup and a revocation (by any daemon) still counts at once (api/key_cache.h).
  api::KeyCache key_cache(
      [keys = api_keys.get()](const std::string& id) -> Result<std::optional<api::StoredKey>> {
        GPUPOOL_ASSIGN_OR_RETURN(std::optional<ApiKeyRecord> k, keys->Get(id));
        if (!k) return std::optional<api::StoredKey>();
        Result<api::Role> role = api::ParseRole(k->role);
        if (!role.ok()) return std::optional<api::StoredKey>();
        return std::optional<api::StoredKey>(
            api::StoredKey{k->tenant, *role, k->secret_sha256, k->expire_ms, k->revoke_ms});
      });
  api::CacheInvalidatingKeyStore keys_for_api(api_keys.get(), &key_cache);
  service_options.api_keys = &keys_for_api;
  service_options.registry_credentials = registry_credentials->get();
  // Tenants' webhooks (docs/webhooks.md): kept in the database with their secrets sealed; the
  // dispatcher follows the event log on threads of its own, in the leader only (as the
  // scheduler), and never waits on the scheduler nor it on an endpoint.
  Result<std::unique_ptr<PgWebhooks>> webhook_store = PgWebhooks::Open(uri, *keyring);
  if (!webhook_store.ok()) return Fail(webhook_store.status().WithContext("webhooks"));
  service_options.webhooks = webhook_store->get();
  service_options.webhooks_allow_loopback = config.webhooks.allow_loopback;
  webhooks::DispatcherOptions webhook_options;
  webhook_options.allow_loopback = config.webhooks.allow_loopback;
  if (!config.webhooks.ca_file.empty()) {
    std::ifstream in(config.webhooks.ca_file);
    std::stringstream pem;
    pem << in.rdbuf();
    if (!in || pem.str().empty()) {
      return Fail(Status::InvalidArgument("--webhooks-ca-file: cannot read '" +
                                          config.webhooks.ca_file + "'"));
    }
    webhook_options.extra_ca_pem = pem.str();
  }
  webhook_options.on_disabled = [audit = audit_log.get()](const WebhookRecord& w,
                                                          const std::string& reason) {
    AuditWebhookDisabled(audit, w, reason);
  };
  webhooks::WebhookDispatcher webhook_dispatcher(webhook_store->get(), webhook_options);
  webhook_dispatcher.Start();
  // Billing (docs/billing.md): price plans in the store; invoices rated from the usage ledger.
  service_options.price_plans = store.get();
  LedgerUsageSource ledger_usage(store.get());
  service_options.usage = &ledger_usage;
  // Budgets (docs/billing.md, "Budgets"): kept in the database; the watcher rates them on a
  // thread of its own, in the leader only, and appends their alerts to the event log (which
  // the webhooks follow) through the scheduler.
  Result<std::unique_ptr<PgBudgets>> budget_store = PgBudgets::Open(uri);
  if (!budget_store.ok()) return Fail(budget_store.status().WithContext("budgets"));
  service_options.budgets = budget_store->get();
  BudgetWatcherSources budget_sources;
  budget_sources.price_plans = [&store] { return store->ListPricePlans(""); };
  budget_sources.events = [&store](const std::string& prefix) {
    return store->ListEvents(prefix, 0);
  };
  BudgetWatcher budget_watcher(
      budget_store->get(), &ledger_usage, &scheduler, std::move(budget_sources), SystemClock::Get(),
      BudgetWatcherOptions{.interval = std::chrono::seconds(config.budget_check_s)});
  budget_watcher.Start();
  // `gpupoolctl whatif` (docs/twin.md): the twin replays the pool's recent workload on its own
  // worker, from snapshots and a read-only history query; one at a time, bounded.
  twin::PreflightRunner what_if(&scheduler, store.get(), SystemClock::Get(),
                                {.scheduler = config.scheduler});
  service_options.what_if = &what_if;
  // Services (docs/services.md): their records in the database, their replicas as jobs of the
  // scheduler, kept at their counts by the controller, in the leader only (as the scheduler).
  Result<std::unique_ptr<PgServices>> service_store = PgServices::Open(uri);
  if (!service_store.ok()) return Fail(service_store.status().WithContext("services"));
  ServiceController services(service_store->get(), &scheduler, SystemClock::Get(),
                             ServiceControllerOptions{.hold_ms = config.gateway_hold_timeout_ms});
  if (Status st = services.Start(); !st.ok()) return Fail(st.WithContext("services"));
  // `services:` in the config (cmd/daemon/config_services.h): created or updated to match.
  if (Result<ConfiguredServicesApplied> applied =
          ApplyConfiguredServices(services, config.services);
      !applied.ok()) {
    return Fail(applied.status());
  } else if (applied->created + applied->updated > 0) {
    LogInfo("gpupoold", "services from config",
            {{"created", std::to_string(applied->created)},
             {"updated", std::to_string(applied->updated)}});
  }
  service_options.services = &services;
  api::ServiceImpl service(&scheduler, &scheduler, &hub, service_options);
  service.SetRecovered(true);
  Result<std::vector<api::ApiToken>> tokens = ApiTokens(config);
  if (!tokens.ok()) return Fail(tokens.status().WithContext("admin credential"));
  // In --insecure mode without tokens authentication stays off.
  api::KeyLookup key_lookup;
  std::unique_ptr<PgKeyChangeFeed> key_feed;  // before key_cache in destruction: it calls it
  if (!config.insecure || !config.api_tokens.empty()) {
    key_lookup = key_cache.AsLookup();
    Result<std::unique_ptr<PgKeyChangeFeed>> feed = PgKeyChangeFeed::Start(uri, &key_cache);
    if (!feed.ok()) return Fail(feed.status().WithContext("API key change feed"));
    key_feed = std::move(feed).value();
  }
  Result<OidcSetup> oidc = SetUpOidc(config);  // auth.oidc: JWT bearer tokens, console sign-in
  if (!oidc.ok()) return Fail(oidc.status());
  Result<api::Authenticator> auth =
      api::Authenticator::Create(std::move(tokens).value(), std::move(key_lookup), oidc->verifier);
  if (!auth.ok()) return Fail(auth.status());
  if (config.insecure) {
    LogWarn("gpupoold", "--insecure: plaintext gRPC and HTTP on loopback only",
            {{"authentication", auth->enabled() ? "api_tokens" : "off"}});
  }

  api::tls::EnrollService enroll(
      identities->get(), &*auth,
      [&hub](const std::string& node) {
        hub.Disconnect(node, Status::PermissionDenied("node '" + node + "': certificate revoked"));
      },
      audit_log.get());
  api::GrpcServerOptions grpc_options;
  grpc_options.extra_services.push_back(&hub);
  grpc_options.extra_services.push_back(&enroll);
  grpc_options.tls = tls_port;
  grpc_options.main_tls = main_tls;  // the secure default: the main port speaks TLS too
  grpc_options.max_connections_per_client =
      static_cast<size_t>(config.grpc_max_connections_per_client);
  // Caps in all per port, from the descriptor limit unless configured (docs/security.md).
  const ConnectionCaps caps = ConfiguredConnectionCaps(config);
  grpc_options.max_connections = caps.grpc;
  grpc_options.metrics = registry;
  grpc_options.audit = audit_log.get();
  api::GrpcServer grpc(service, *auth, config.grpc_listen, grpc_options);
  if (standby) standby->Stop();  // recovered: the ports go to the real servers
  if (Status st = grpc.Start(); !st.ok()) return Fail(st);
  api::HttpServerOptions http_options;
  http_options.max_connections_per_client = config.http_max_connections_per_client;
  http_options.max_connections = caps.http;
  http_options.audit = audit_log.get();
  http_options.console_sign_in = oidc->sign_in;
  if (!config.insecure) {
    http_options.tls_cert_pem = ca->server_cert_pem();
    http_options.tls_key_pem = ca->server_key_pem();
  }
  api::HttpServer http(service, *auth, registry, config.http_listen, http_options);
  if (Status st = http.Start(); !st.ok()) return Fail(st);
  // The services' gateway (docs/services.md): callers' API keys as on the API, the API's
  // per-tenant rate limit, the daemon's certificate.
  api::gateway::ControllerDirectory gateway_directory(&services);
  api::RateLimiter gateway_limiter({config.gateway_rate_per_second, config.gateway_burst});
  std::optional<api::gateway::Gateway> service_gateway;
  if (!config.gateway_listen.empty()) {
    api::gateway::GatewayOptions gateway_options;
    gateway_options.listen = config.gateway_listen;
    gateway_options.auth = &*auth;
    gateway_options.limiter = &gateway_limiter;
    gateway_options.hold_timeout = std::chrono::milliseconds(config.gateway_hold_timeout_ms);
    gateway_options.metrics = registry;
    if (!config.insecure) {
      gateway_options.tls_cert_pem = ca->server_cert_pem();
      gateway_options.tls_key_pem = ca->server_key_pem();
    }
    service_gateway.emplace(&gateway_directory, std::move(gateway_options));
    if (Status st = service_gateway->Start(); !st.ok()) return Fail(st);
  }

  LogInfo("gpupoold", "ready",
          {{"grpc", config.grpc_listen},
           {"grpc_port", std::to_string(grpc.port())},
           {"http", config.http_listen},
           {"grpc_tls_port", std::to_string(grpc.tls_port())},
           {"http_port", std::to_string(http.port())},
           {"gateway_port", std::to_string(service_gateway ? service_gateway->port() : 0)},
           {"tls", config.insecure ? "off (--insecure)" : "on"},
           {"database", store->display()},
           {"epoch", std::to_string(*epoch)},
           {"ms_since_lease", since_lease()},
           {"version", kVersion}});

  // SIGHUP: read the config file again and apply what changed (cmd/daemon/reload.h). The
  // reloader is used on the signal thread, which stops taking SIGHUP before `stopped` is ready.
  ConfigReloader reloader(
      [argc, argv]() -> Result<DaemonConfig> {
        GPUPOOL_ASSIGN_OR_RETURN(CommandLine again, ParseDaemonCommandLine(argc, argv));
        return std::move(again.config);
      },
      config,
      ReloadTargets{&scheduler, &service, &*auth, &ApiTokens,
                    BillingReloadTargets{store.get(),
                                         [&store](int concurrency, int64_t timeout_ms) {
                                           store->SetReportLimits(concurrency, timeout_ms);
                                         }}},
      registry.get());
  {
    std::lock_guard lock(reload_mu);
    on_hup = [&reloader] {
      LogInfo("gpupoold", "SIGHUP: reloading the configuration");
      reloader.Reload();
    };
  }
  int sig = stopped.get();
  LogInfo("gpupoold", "stopping", {{"signal", std::to_string(sig)}});
  fencer.Stop();   // before the scheduler: it fences through it
  what_if.Stop();  // a running what-if answers now instead of holding the servers open
  if (service_gateway) service_gateway->Stop();
  http.Shutdown();
  grpc.Shutdown();
  services.Stop();
  budget_watcher.Stop();      // before the scheduler: it appends its alerts through it
  webhook_dispatcher.Stop();  // attempts in flight end within their timeout
  scheduler.Stop();
  audit_log.reset();  // writes what is queued while the store is still there
  store.reset();
  if (leadership) leadership->Resign();  // a standby takes over at once
  supervisor.reset();  // before stopping the server, so the stop is not taken for a crash
  if (embedded) (void)embedded->Stop();
  LogInfo("gpupoold", "stopped");
  return 0;
}

}  // namespace
}  // namespace gpupool

int main(int argc, char** argv) { return gpupool::Run(argc, argv); }
