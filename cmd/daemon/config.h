// DaemonConfig: gpupoold's configuration, parsed once from YAML and flags into typed options.
//
// Every error names the file, the key and the line ("gpupoold.yaml:12: pools[0].compute_overcommit:
// must be between 1.0 and 10.0, got 12"). Flags override the file. See docs/operations.md for the
// reference and an annotated example.
//
// Thread safety: plain values.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "billing/price_plan.h"
#include "cmd/daemon/fencing_options.h"
#include "scheduler/model.h"
#include "scheduler/options.h"
#include "scheduler/service.h"

namespace gpupool {

struct ApiToken {
  std::string token;
  std::string principal;  // tenant path, or an admin name
  bool admin = false;
  // A non-admin token's role in its subtree: "viewer", "member" (default) or "tenant-admin".
  std::string role = "member";
};

// gpupoold's default node lease (scheduler.node_lease_ms): how long a silent node's agent keeps
// its tasks, and how long gpupoold waits before running them elsewhere.
inline constexpr int64_t kDefaultNodeLeaseMs = 5 * 60 * 1000;

struct DaemonConfig {
  std::string grpc_listen = "127.0.0.1:7070";
  std::string http_listen = "127.0.0.1:7080";
  // The services' gateway (`listen.gateway`, docs/services.md): HTTPS (HTTP with --insecure) to
  // services' replicas; empty (the default: several daemons may share a host) = no gateway.
  std::string gateway_listen;
  // `gateway:` — requests per second (and burst) each tenant organisation may send through the
  // gateway (0 = no limit), and how long a request waits for a ready replica.
  double gateway_rate_per_second = 1000;
  double gateway_burst = 2000;
  int64_t gateway_hold_timeout_ms = 60'000;
  // Open REST connections one client address may hold (`listen.http_max_connections_per_client`);
  // 0 = no limit.
  int64_t http_max_connections_per_client = 256;
  // Likewise on each gRPC port (`listen.grpc_max_connections_per_client`); 0 = no limit.
  int64_t grpc_max_connections_per_client = 256;
  // Open connections in all on the REST port and on each gRPC port (`listen.http_max_connections`,
  // `listen.grpc_max_connections`); unset = shares of the descriptor limit (ConnectionCapsFor),
  // 0 = no limit.
  std::optional<int64_t> http_max_connections;
  std::optional<int64_t> grpc_max_connections;
  // gRPC over TLS (the private CA's server certificate; agents' mutual TLS); empty = none.
  std::string grpc_tls_listen;
  std::string data_dir = "gpupool-data";
  // postgresql:// URI; empty = embedded PostgreSQL under data_dir.
  std::string database;
  // Port for the embedded server; 0 = pick a free one.
  int embedded_port = 0;
  // Catalog YAML; empty = the built-in catalog.
  std::string catalog;
  std::string log_level = "info";
  // --insecure: plaintext gRPC/HTTP and no authentication unless api_tokens are configured;
  // only with loopback listen addresses (CheckInsecureAllowed).
  bool insecure = false;
  // Tenants' webhooks (docs/webhooks.md). allow_loopback: deliveries to loopback and link-local
  // addresses, and http:// to a loopback host, are accepted (demos and tests; off by default,
  // so a tenant cannot aim the daemon at itself or at a cloud's metadata service). ca_file: PEM
  // certificates trusted for endpoints beside the system's.
  struct Webhooks {
    bool allow_loopback = false;
    std::string ca_file;
  } webhooks;
  // How often the leader's BudgetWatcher rates budgets (--budget-check-interval, seconds).
  int budget_check_s = 60;
  std::vector<ApiToken> api_tokens;  // empty = no authentication (everyone is admin)
  // Extra join tokens beside <data-dir>/node.token (secure mode); with --insecure, the tokens an
  // agent must present to register (empty: agents are not authenticated).
  std::vector<std::string> node_tokens;
  // JWT bearer tokens from an external OIDC issuer (`auth.oidc`, api/oidc.h); unset = none.
  struct Oidc {
    std::string issuer;
    std::string audience;
    // The issuer's signing key, PEM "PUBLIC KEY"; empty: the keys the issuer publishes (its
    // discovery document's jwks_uri, api/jwks_cache.h), refreshed every jwks_refresh_s.
    std::string public_key_file;
    int64_t jwks_refresh_s = 600;
    std::string ca_file;  // PEM CAs trusted for the issuer's TLS beside the system's
    // The console's sign-in (authorization code with PKCE, docs/console.md): its public client
    // at the issuer ("" = no single sign-on) and the scopes it asks for.
    std::string console_client_id;
    std::vector<std::string> console_scopes = {"openid"};
    std::string tenant_claim = "gpupool_tenant";
    std::string role_claim = "gpupool_role";
    std::vector<std::string> algorithms = {"RS256", "ES256"};
    int64_t clock_skew_s = 60;
    friend bool operator==(const Oidc&, const Oidc&) = default;
  };
  std::optional<Oidc> oidc;
  // The core's defaults, but a node lease of 5 minutes (docs/ha.md): a gpupoold restart, an
  // upgrade or a database failover shorter than that kills no task.
  SchedulerOptions scheduler = [] {
    SchedulerOptions o = SchedulerOptions::Defaults();
    o.node_lease_ms = kDefaultNodeLeaseMs;
    return o;
  }();
  std::vector<PoolRecord> pools;  // created at start-up when missing
  // Created at start-up when missing, in this order (parents before children), then their
  // quotas set (docs/tenancy.md).
  std::vector<TenantRecord> tenants;
  std::vector<QuotaRecord> quotas;
  // `price_plans:` (docs/billing.md), made the stored plans at start-up (cmd/daemon/price_plans.h).
  std::vector<billing::PricePlan> price_plans;
  // `services:` (docs/services.md), created or updated at start-up
  // (cmd/daemon/config_services.h); a reload reports a change as restart-only.
  std::vector<ServiceSpec> services;
  // Priority classes a tenant without a list of its own may submit at (`tenant_defaults:
  // priority_classes`); empty = the preemptible classes up to the default one
  // (api/priority_access.h).
  std::vector<std::string> default_priority_classes;
  // Submissions per second (and burst) of one organisation's non-admin callers
  // (`tenant_defaults: submit_rate_per_second, submit_burst`); 0 = unlimited.
  double submit_rate_per_second = 50;
  double submit_burst = 100;
  // `tenants[].priority_classes`, parents before children: (tenant path, classes).
  std::vector<std::pair<std::string, std::vector<std::string>>> tenant_priority_classes;
  // Where each pool, tenant and quota was written ("gpupoold.yaml:12: pools[1]"), keyed
  // "pool NAME", "tenant PATH" and "quota TENANT POOL": a reload names the entry the core refused.
  std::map<std::string, std::string> origins;
  // `secrets:` (cmd/daemon/secrets_key.h, docs/security.md "Secrets at rest"): where the key that
  // seals secrets in PostgreSQL comes from. Neither set: DATA_DIR/secrets.key, created (0600) on
  // first start. Replicas need the same key: give each the same file or command.
  struct Secrets {
    std::string key_file;                  // `secrets.key_file` or --secrets-key-file
    std::vector<std::string> key_command;  // argv (absolute program); prints the key file's text
    int64_t key_command_timeout_ms = 30'000;
    friend bool operator==(const Secrets&, const Secrets&) = default;
  } secrets;
  // `fencing:` (cmd/daemon/fencer.h): the command that powers a silent node off; none = only
  // an admin fences (`gpupoolctl nodes fence`).
  FencingOptions fencing;
  // Replicas (`ha:`, docs/ha.md): several gpupoold on one external PostgreSQL, one leading.
  struct Ha {
    bool enabled = false;  // `ha.enabled` or --replica
    int64_t lease_ms = 2000;
    std::string advertise;  // the API address clients are told; empty = the gRPC listen address
    // The REST base URL clients are sent to ("https://HOST:PORT"); empty = the scheme of the
    // daemon (https unless --insecure) and the HTTP listen address.
    std::string advertise_http;
    // Secure replicas share the first one's CA and admin credential through PostgreSQL
    // (`ha.share_credentials`, cmd/daemon/cluster_credentials.h); false: each replica keeps its
    // own files (give them the same ones out of band).
    bool share_credentials = true;
  } ha;
};

// The connection caps a descriptor limit allows: a reserve of max(64, limit / 8) for PostgreSQL,
// the audit log, files and agent-side work; of the rest, half for the REST port and a quarter
// for each gRPC port (main and TLS), so no set of clients on any port can take the descriptors
// the others need (docs/security.md, "Connection floods").
struct ConnectionCaps {
  size_t http = 0;
  size_t grpc = 0;  // per port
};
ConnectionCaps ConnectionCapsFor(uint64_t descriptor_limit);
// The caps `config` sets, or else this process's soft RLIMIT_NOFILE allows now (1024 when it
// cannot be read); 0 = no limit.
ConnectionCaps ConfiguredConnectionCaps(const DaemonConfig& config);

// "host:port" with a port 0..65535 (0 = any free port); INVALID_ARGUMENT naming `what`
// otherwise ("--grpc-listen: port 99999 is out of range 0..65535").
Status ValidateListenAddress(const std::string& address, const std::string& what);

// True for "127.x.y.z:port", "[::1]:port" and "localhost:port".
bool IsLoopbackListenAddress(const std::string& address);
// OK when every listen address of `c` is loopback; else INVALID_ARGUMENT naming the flag.
Status CheckInsecureAllowed(const DaemonConfig& c);

// Parses YAML text; `source` names it in errors.
Result<DaemonConfig> ParseDaemonConfig(std::string_view yaml, const std::string& source);
Result<DaemonConfig> LoadDaemonConfig(const std::string& path);

// The whole command line: --config FILE is read first, then every other flag overrides it.
struct CommandLine {
  DaemonConfig config;
  bool help = false;
  bool version = false;
};
Result<CommandLine> ParseDaemonCommandLine(int argc, const char* const* argv);

// The --help text.
std::string DaemonUsage();

}  // namespace gpupool
