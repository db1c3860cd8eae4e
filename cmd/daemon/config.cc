#include "cmd/daemon/config.h"

#include <sys/resource.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <filesystem>
#include <set>

#include "api/priority_access.h"
#include "api/validate.h"
#include "cmd/daemon/config_metering.h"
#include "cmd/daemon/config_services.h"
#include "cmd/daemon/price_plans.h"
#include "pool/capabilities.h"
#include "pool/yaml_error.h"
#include "scheduler/tenancy.h"
#include "scheduler/webhooks.h"

namespace gpupool {
namespace {

// "gpupoold.yaml:12: pools[1]": where an entry was written, for messages about it later.
std::string Origin(const YamlDoc& doc, const YAML::Node& at, const YamlPath& p) {
  return doc.source() + ":" + std::to_string(at.Mark().line + 1) + ": " + p.str();
}

Status ParseHa(const YamlDoc& doc, const YAML::Node& root, DaemonConfig* c) {
  YAML::Node n = root["ha"];
  if (!n) return Status::Ok();
  YamlPath p = YamlPath{}.Key("ha");
  GPUPOOL_RETURN_IF_ERROR(doc.RequireMap(n, p));
  GPUPOOL_RETURN_IF_ERROR(doc.CheckKeys(
      n, p, {"enabled", "lease_ms", "advertise", "advertise_http", "share_credentials"}));
  if (n["share_credentials"]) {
    try {
      c->ha.share_credentials = n["share_credentials"].as<bool>();
    } catch (const YAML::Exception&) {
      return doc.Error(n["share_credentials"], p.Key("share_credentials"), "must be true or false");
    }
  }
  if (n["enabled"]) {
    try {
      c->ha.enabled = n["enabled"].as<bool>();
    } catch (const YAML::Exception&) {
      return doc.Error(n["enabled"], p.Key("enabled"), "must be true or false");
    }
  }
  if (n["lease_ms"]) {
    GPUPOOL_ASSIGN_OR_RETURN(c->ha.lease_ms, doc.Int(n, p, "lease_ms", 200, 60'000));
  }
  GPUPOOL_ASSIGN_OR_RETURN(auto advertise, doc.OptionalString(n, p, "advertise"));
  if (advertise) c->ha.advertise = *advertise;
  GPUPOOL_ASSIGN_OR_RETURN(auto advertise_http, doc.OptionalString(n, p, "advertise_http"));
  if (advertise_http) {
    if (advertise_http->rfind("http://", 0) != 0 && advertise_http->rfind("https://", 0) != 0) {
      return doc.Error(
          n["advertise_http"], p.Key("advertise_http"),
          "must be a URL starting with http:// or https://, got '" + *advertise_http + "'");
    }
    c->ha.advertise_http = *advertise_http;
  }
  return Status::Ok();
}

Status ParseFencing(const YamlDoc& doc, const YAML::Node& root, DaemonConfig* c) {
  YAML::Node n = root["fencing"];
  if (!n) return Status::Ok();
  YamlPath p = YamlPath{}.Key("fencing");
  GPUPOOL_RETURN_IF_ERROR(doc.RequireMap(n, p));
  GPUPOOL_RETURN_IF_ERROR(doc.CheckKeys(n, p, {"command", "after_ms", "timeout_ms", "retry_ms"}));
  FencingOptions& f = c->fencing;
  GPUPOOL_ASSIGN_OR_RETURN(f.command, doc.StringList(n, p, "command"));
  if (f.command.empty()) {
    return doc.Error(n, p.Key("command"),
                     "must name the program that powers a node off (its name is appended)");
  }
  if (f.command.front().front() != '/') {
    // Run with no shell and no PATH search: the program that decides a node is off is named
    // exactly.
    return doc.Error(n["command"], p.Key("command"),
                     "the program must be an absolute path, got '" + f.command.front() + "'");
  }
  if (n["after_ms"]) {
    GPUPOOL_ASSIGN_OR_RETURN(f.after_ms, doc.Int(n, p, "after_ms", 0, 7LL * 86'400'000));
  }
  if (n["timeout_ms"]) {
    GPUPOOL_ASSIGN_OR_RETURN(f.timeout_ms, doc.Int(n, p, "timeout_ms", 100, 3'600'000));
  }
  if (n["retry_ms"]) {
    GPUPOOL_ASSIGN_OR_RETURN(f.retry_ms, doc.Int(n, p, "retry_ms", 100, 86'400'000));
  }
  return Status::Ok();
}

Status ParseSecrets(const YamlDoc& doc, const YAML::Node& root, DaemonConfig* c) {
  YAML::Node n = root["secrets"];
  if (!n) return Status::Ok();
  YamlPath p = YamlPath{}.Key("secrets");
  GPUPOOL_RETURN_IF_ERROR(doc.RequireMap(n, p));
  GPUPOOL_RETURN_IF_ERROR(
      doc.CheckKeys(n, p, {"key_file", "key_command", "key_command_timeout_ms"}));
  DaemonConfig::Secrets& s = c->secrets;
  GPUPOOL_ASSIGN_OR_RETURN(auto file, doc.OptionalString(n, p, "key_file"));
  if (file) {
    if (file->empty() || file->front() != '/') {
      return doc.Error(n["key_file"], p.Key("key_file"),
                       "must be an absolute path, got '" + *file + "'");
    }
    s.key_file = *file;
  }
  if (n["key_command"]) {
    GPUPOOL_ASSIGN_OR_RETURN(s.key_command, doc.StringList(n, p, "key_command"));
    if (s.key_command.empty() || s.key_command.front().empty() ||
        s.key_command.front().front() != '/') {
      // No shell and no PATH search: the program that hands out the key is named exactly.
      return doc.Error(n["key_command"], p.Key("key_command"),
                       "must start with the absolute path of the program that prints the key");
    }
  }
  if (!s.key_file.empty() && !s.key_command.empty()) {
    return doc.Error(n, p, "set key_file or key_command, not both");
  }
  if (n["key_command_timeout_ms"]) {
    GPUPOOL_ASSIGN_OR_RETURN(s.key_command_timeout_ms,
                             doc.Int(n, p, "key_command_timeout_ms", 100, 600'000));
  }
  return Status::Ok();
}

Status ParseListen(const YamlDoc& doc, const YAML::Node& root, DaemonConfig* c) {
  YAML::Node n = root["listen"];
  if (!n) return Status::Ok();
  YamlPath p = YamlPath{}.Key("listen");
  GPUPOOL_RETURN_IF_ERROR(doc.RequireMap(n, p));
  GPUPOOL_RETURN_IF_ERROR(doc.CheckKeys(
      n, p,
      {"grpc", "http", "grpc_tls", "gateway", "http_max_connections_per_client",
       "grpc_max_connections_per_client", "http_max_connections", "grpc_max_connections"}));
  for (const char* key : {"http_max_connections", "grpc_max_connections"}) {
    if (!n[key]) continue;
    GPUPOOL_ASSIGN_OR_RETURN(int64_t v, doc.Int(n, p, key, 0, 10'000'000));
    (std::string_view(key) == "http_max_connections" ? c->http_max_connections
                                                     : c->grpc_max_connections) = v;
  }
  if (n["http_max_connections_per_client"]) {
    GPUPOOL_ASSIGN_OR_RETURN(c->http_max_connections_per_client,
                             doc.Int(n, p, "http_max_connections_per_client", 0, 1'000'000));
  }
  if (n["grpc_max_connections_per_client"]) {
    GPUPOOL_ASSIGN_OR_RETURN(c->grpc_max_connections_per_client,
                             doc.Int(n, p, "grpc_max_connections_per_client", 0, 1'000'000));
  }
  GPUPOOL_ASSIGN_OR_RETURN(auto grpc, doc.OptionalString(n, p, "grpc"));
  GPUPOOL_ASSIGN_OR_RETURN(auto http, doc.OptionalString(n, p, "http"));
  GPUPOOL_ASSIGN_OR_RETURN(auto tls, doc.OptionalString(n, p, "grpc_tls"));
  GPUPOOL_ASSIGN_OR_RETURN(auto gateway, doc.OptionalString(n, p, "gateway"));
  for (const auto& [key, value] : {std::pair{"grpc", &grpc}, std::pair{"http", &http},
                                   std::pair{"grpc_tls", &tls}, std::pair{"gateway", &gateway}}) {
    if (!*value) continue;
    if (std::string_view(key) == "gateway" && (*value)->empty()) continue;  // off
    if (Status s = ValidateListenAddress(**value, key); !s.ok()) {
      return doc.Error(n[key], p.Key(key), s.message().substr(std::string(key).size() + 2));
    }
  }
  if (grpc) c->grpc_listen = *grpc;
  if (http) c->http_listen = *http;
  if (tls) c->grpc_tls_listen = *tls;
  if (gateway) c->gateway_listen = *gateway;
  return Status::Ok();
}

// auth.oidc (api/oidc.h); the key file is read and checked when gpupoold starts.
Status ParseOidc(const YamlDoc& doc, const YAML::Node& auth, const YamlPath& auth_path,
                 DaemonConfig* c) {
  YAML::Node n = auth["oidc"];
  if (!n) return Status::Ok();
  YamlPath p = auth_path.Key("oidc");
  GPUPOOL_RETURN_IF_ERROR(doc.RequireMap(n, p));
  GPUPOOL_RETURN_IF_ERROR(
      doc.CheckKeys(n, p,
                    {"issuer", "audience", "public_key_file", "jwks_refresh_s", "ca_file",
                     "console", "tenant_claim", "role_claim", "algorithms", "clock_skew_s"}));
  DaemonConfig::Oidc o;
  GPUPOOL_ASSIGN_OR_RETURN(o.issuer, doc.String(n, p, "issuer"));
  GPUPOOL_ASSIGN_OR_RETURN(o.audience, doc.String(n, p, "audience"));
  GPUPOOL_ASSIGN_OR_RETURN(auto key_file, doc.OptionalString(n, p, "public_key_file"));
  if (key_file) o.public_key_file = *key_file;
  if (n["jwks_refresh_s"]) {
    GPUPOOL_ASSIGN_OR_RETURN(o.jwks_refresh_s, doc.Int(n, p, "jwks_refresh_s", 60, 86400));
  }
  GPUPOOL_ASSIGN_OR_RETURN(auto ca_file, doc.OptionalString(n, p, "ca_file"));
  if (ca_file) o.ca_file = *ca_file;
  if (YAML::Node console = n["console"]) {
    YamlPath cp = p.Key("console");
    GPUPOOL_RETURN_IF_ERROR(doc.RequireMap(console, cp));
    GPUPOOL_RETURN_IF_ERROR(doc.CheckKeys(console, cp, {"client_id", "scopes"}));
    GPUPOOL_ASSIGN_OR_RETURN(o.console_client_id, doc.String(console, cp, "client_id"));
    if (console["scopes"]) {
      GPUPOOL_ASSIGN_OR_RETURN(o.console_scopes, doc.StringList(console, cp, "scopes"));
      if (std::find(o.console_scopes.begin(), o.console_scopes.end(), "openid") ==
          o.console_scopes.end()) {
        return doc.Error(console["scopes"], cp.Key("scopes"),
                         "must include openid (the console signs in with an ID token)");
      }
    }
    if (o.console_client_id.empty()) {
      return doc.Error(console, cp.Key("client_id"), "must not be empty");
    }
  }
  GPUPOOL_ASSIGN_OR_RETURN(auto tenant_claim, doc.OptionalString(n, p, "tenant_claim"));
  if (tenant_claim) o.tenant_claim = *tenant_claim;
  GPUPOOL_ASSIGN_OR_RETURN(auto role_claim, doc.OptionalString(n, p, "role_claim"));
  if (role_claim) o.role_claim = *role_claim;
  if (YAML::Node a = n["algorithms"]) {
    YamlPath ap = p.Key("algorithms");
    GPUPOOL_RETURN_IF_ERROR(doc.RequireSequence(a, ap));
    o.algorithms.clear();
    for (size_t i = 0; i < a.size(); ++i) {
      if (!a[i].IsScalar() || (a[i].Scalar() != "RS256" && a[i].Scalar() != "ES256")) {
        return doc.Error(a[i], ap.Index(i), "must be RS256 or ES256");
      }
      o.algorithms.push_back(a[i].Scalar());
    }
    if (o.algorithms.empty()) return doc.Error(a, ap, "must name RS256 or ES256");
  }
  if (n["clock_skew_s"]) {
    GPUPOOL_ASSIGN_OR_RETURN(o.clock_skew_s, doc.Int(n, p, "clock_skew_s", 0, 300));
  }
  for (const std::string* v : {&o.issuer, &o.audience, &o.tenant_claim, &o.role_claim}) {
    if (v->empty()) return doc.Error(n, p, "issuer, audience and the claims must not be empty");
  }
  if (key_file && o.public_key_file.empty()) {
    return doc.Error(n, p.Key("public_key_file"), "must not be empty (omit it to use the JWKS)");
  }
  // The keys, or the console's endpoints, come from the issuer's discovery document: its URL
  // must be one gpupoold may fetch.
  if (o.public_key_file.empty() || !o.console_client_id.empty()) {
    Result<WebhookUrl> url = ParseWebhookUrl(o.issuer, /*allow_insecure_loopback=*/true, "issuer");
    if (!url.ok() || o.issuer.ends_with("/")) {
      return doc.Error(n["issuer"], p.Key("issuer"),
                       "'" + o.issuer +
                           "' must be an https:// URL without a trailing '/' (http:// only on "
                           "a loopback host): gpupoold reads the issuer's discovery document "
                           "for its keys when public_key_file is not set, and for the console's "
                           "sign-in");
    }
  }
  c->oidc = std::move(o);
  return Status::Ok();
}

Status ParseAuth(const YamlDoc& doc, const YAML::Node& root, DaemonConfig* c) {
  YAML::Node n = root["auth"];
  if (!n) return Status::Ok();
  YamlPath p = YamlPath{}.Key("auth");
  GPUPOOL_RETURN_IF_ERROR(doc.RequireMap(n, p));
  GPUPOOL_RETURN_IF_ERROR(
      doc.CheckKeys(n, p, {"api_tokens", "node_tokens", "require_node_certificates", "oidc"}));
  GPUPOOL_RETURN_IF_ERROR(ParseOidc(doc, n, p, c));
  // Kept so older configs still load: registration always needs a node certificate now.
  GPUPOOL_ASSIGN_OR_RETURN(const bool require_certs,
                           doc.Bool(n, p, "require_node_certificates", true));
  if (!require_certs) {
    return doc.Error(n["require_node_certificates"], p.Key("require_node_certificates"),
                     "false is no longer supported: agents always register with a node "
                     "certificate (they join once with a join token); remove the key");
  }
  if (YAML::Node t = n["api_tokens"]) {
    YamlPath tp = p.Key("api_tokens");
    GPUPOOL_RETURN_IF_ERROR(doc.RequireSequence(t, tp));
    for (size_t i = 0; i < t.size(); ++i) {
      YamlPath ip = tp.Index(i);
      GPUPOOL_RETURN_IF_ERROR(doc.RequireMap(t[i], ip));
      GPUPOOL_RETURN_IF_ERROR(doc.CheckKeys(t[i], ip, {"token", "principal", "admin", "role"}));
      ApiToken tok;
      GPUPOOL_ASSIGN_OR_RETURN(tok.token, doc.String(t[i], ip, "token"));
      GPUPOOL_ASSIGN_OR_RETURN(tok.principal, doc.String(t[i], ip, "principal"));
      GPUPOOL_ASSIGN_OR_RETURN(tok.admin, doc.Bool(t[i], ip, "admin", false));
      GPUPOOL_ASSIGN_OR_RETURN(auto role, doc.OptionalString(t[i], ip, "role"));
      if (role) {
        if (*role != "viewer" && *role != "member" && *role != "tenant-admin") {
          return doc.Error(t[i]["role"], ip.Key("role"),
                           "must be viewer, member or tenant-admin (use admin: true for an admin)");
        }
        tok.role = *role;
      }
      if (tok.token.size() < 16) {
        return doc.Error(t[i], ip.Key("token"), "must be at least 16 characters");
      }
      c->api_tokens.push_back(std::move(tok));
    }
  }
  if (YAML::Node t = n["node_tokens"]) {
    YamlPath tp = p.Key("node_tokens");
    GPUPOOL_RETURN_IF_ERROR(doc.RequireSequence(t, tp));
    for (size_t i = 0; i < t.size(); ++i) {
      if (!t[i].IsScalar() || t[i].Scalar().size() < 16) {
        return doc.Error(t[i], tp.Index(i), "must be a string of at least 16 characters");
      }
      c->node_tokens.push_back(t[i].Scalar());
    }
  }
  return Status::Ok();
}

// Starvation reservations (docs/tenancy.md): scheduler.starvation_*.
Status ParseStarvation(const YamlDoc& doc, const YAML::Node& n, const YamlPath& p,
                       TenancyOptions* t) {
  if (n["starvation_reserve_after_ms"]) {
    GPUPOOL_ASSIGN_OR_RETURN(t->starvation_reserve_after_ms,
                             doc.Int(n, p, "starvation_reserve_after_ms", 0, 30LL * 86'400'000));
  }
  if (n["starvation_max_reservations"]) {
    GPUPOOL_ASSIGN_OR_RETURN(int64_t v, doc.Int(n, p, "starvation_max_reservations", 1, 10'000));
    t->starvation_max_reservations = static_cast<int32_t>(v);
  }
  if (n["starvation_reservation_timeout_ms"]) {
    GPUPOOL_ASSIGN_OR_RETURN(
        t->starvation_reservation_timeout_ms,
        doc.Int(n, p, "starvation_reservation_timeout_ms", 1'000, 30LL * 86'400'000));
  }
  return Status::Ok();
}

Status ParseScheduler(const YamlDoc& doc, const YAML::Node& root, SchedulerOptions* o) {
  YAML::Node n = root["scheduler"];
  if (!n) return Status::Ok();
  YamlPath p = YamlPath{}.Key("scheduler");
  GPUPOOL_RETURN_IF_ERROR(doc.RequireMap(n, p));
  GPUPOOL_RETURN_IF_ERROR(doc.CheckKeys(n, p,
                                        {"default_strategy",
                                         "default_priority_class",
                                         "heartbeat_interval_ms",
                                         "heartbeat_timeout_ms",
                                         "stop_grace_period_ms",
                                         "max_tasks_per_job",
                                         "job_retention_ms",
                                         "fair_share_half_life_ms",
                                         "disruption_budget_victims",
                                         "disruption_budget_window_ms",
                                         "reservation_timeout_ms",
                                         "queue_order",
                                         "node_lease_ms",
                                         "node_lease_stop_grace_ms",
                                         "node_lease_margin_ms",
                                         "preemption_backoff_ms",
                                         "preemption_backoff_max_ms",
                                         "starvation_reserve_after_ms",
                                         "starvation_max_reservations",
                                         "starvation_reservation_timeout_ms"}));
  GPUPOOL_ASSIGN_OR_RETURN(auto strategy, doc.OptionalString(n, p, "default_strategy"));
  if (strategy) o->default_strategy = *strategy;
  GPUPOOL_ASSIGN_OR_RETURN(auto cls, doc.OptionalString(n, p, "default_priority_class"));
  if (cls) o->default_priority_class = *cls;
  if (n["heartbeat_interval_ms"]) {
    GPUPOOL_ASSIGN_OR_RETURN(o->heartbeat_interval_ms,
                             doc.Int(n, p, "heartbeat_interval_ms", 50, 60'000));
  }
  if (n["heartbeat_timeout_ms"]) {
    GPUPOOL_ASSIGN_OR_RETURN(o->heartbeat_timeout_ms,
                             doc.Int(n, p, "heartbeat_timeout_ms", 200, 3'600'000));
  }
  if (n["stop_grace_period_ms"]) {
    GPUPOOL_ASSIGN_OR_RETURN(o->stop_grace_period_ms,
                             doc.Int(n, p, "stop_grace_period_ms", 0, 3'600'000));
  }
  if (n["node_lease_ms"]) {
    GPUPOOL_ASSIGN_OR_RETURN(o->node_lease_ms,
                             doc.Int(n, p, "node_lease_ms", 200, 7LL * 86'400'000));
  }
  if (n["node_lease_stop_grace_ms"]) {
    GPUPOOL_ASSIGN_OR_RETURN(o->node_lease_stop_grace_ms,
                             doc.Int(n, p, "node_lease_stop_grace_ms", 0, 600'000));
  }
  if (n["node_lease_margin_ms"]) {
    GPUPOOL_ASSIGN_OR_RETURN(o->node_lease_margin_ms,
                             doc.Int(n, p, "node_lease_margin_ms", 100, 600'000));
  }
  if (n["max_tasks_per_job"]) {
    GPUPOOL_ASSIGN_OR_RETURN(int64_t max, doc.Int(n, p, "max_tasks_per_job", 1, 100'000));
    o->max_tasks_per_job = static_cast<int32_t>(max);
  }
  if (n["job_retention_ms"]) {
    GPUPOOL_ASSIGN_OR_RETURN(o->job_retention_ms,
                             doc.Int(n, p, "job_retention_ms", 0, 3650LL * 86'400'000));
  }
  TenancyOptions& t = o->tenancy;
  if (n["fair_share_half_life_ms"]) {
    GPUPOOL_ASSIGN_OR_RETURN(t.fair_share_half_life_ms,
                             doc.Int(n, p, "fair_share_half_life_ms", 0, 30LL * 86'400'000));
  }
  if (n["disruption_budget_victims"]) {
    GPUPOOL_ASSIGN_OR_RETURN(int64_t v, doc.Int(n, p, "disruption_budget_victims", 0, 1'000'000));
    t.disruption_budget_victims = static_cast<int32_t>(v);
  }
  if (n["disruption_budget_window_ms"]) {
    GPUPOOL_ASSIGN_OR_RETURN(t.disruption_budget_window_ms,
                             doc.Int(n, p, "disruption_budget_window_ms", 1, 30LL * 86'400'000));
  }
  if (n["reservation_timeout_ms"]) {
    GPUPOOL_ASSIGN_OR_RETURN(t.reservation_timeout_ms,
                             doc.Int(n, p, "reservation_timeout_ms", 0, 86'400'000));
  }
  if (n["preemption_backoff_ms"]) {
    GPUPOOL_ASSIGN_OR_RETURN(t.preemption_backoff_ms,
                             doc.Int(n, p, "preemption_backoff_ms", 0, 86'400'000));
  }
  if (n["preemption_backoff_max_ms"]) {
    GPUPOOL_ASSIGN_OR_RETURN(t.preemption_backoff_max_ms,
                             doc.Int(n, p, "preemption_backoff_max_ms", 0, 86'400'000));
  }
  GPUPOOL_RETURN_IF_ERROR(ParseStarvation(doc, n, p, &t));
  GPUPOOL_ASSIGN_OR_RETURN(auto order, doc.OptionalString(n, p, "queue_order"));
  if (order) {
    Result<QueueOrderKind> kind = ParseQueueOrder(*order);
    if (!kind.ok())
      return doc.Error(n["queue_order"], p.Key("queue_order"), kind.status().message());
    t.queue_order = *kind;
  }
  if (o->heartbeat_timeout_ms <= o->heartbeat_interval_ms) {
    return doc.Error(n, p.Key("heartbeat_timeout_ms"),
                     "must be greater than heartbeat_interval_ms (" +
                         std::to_string(o->heartbeat_interval_ms) + ")");
  }
  if (o->node_lease_ms < o->heartbeat_timeout_ms) {
    return doc.Error(n, p.Key("node_lease_ms"),
                     "must be at least heartbeat_timeout_ms (" +
                         std::to_string(o->heartbeat_timeout_ms) +
                         "): a node's work is stopped no sooner than it is counted silent");
  }
  return Status::Ok();
}

Status ParseClasses(const YamlDoc& doc, const YAML::Node& root, SchedulerOptions* o) {
  YAML::Node n = root["priority_classes"];
  if (!n) return Status::Ok();
  YamlPath p = YamlPath{}.Key("priority_classes");
  GPUPOOL_RETURN_IF_ERROR(doc.RequireSequence(n, p));
  o->priority_classes.clear();
  for (size_t i = 0; i < n.size(); ++i) {
    YamlPath ip = p.Index(i);
    const YAML::Node& c = n[i];
    GPUPOOL_RETURN_IF_ERROR(doc.RequireMap(c, ip));
    GPUPOOL_RETURN_IF_ERROR(
        doc.CheckKeys(c, ip, {"name", "value", "preemptible", "may_preempt", "min_runtime_ms"}));
    PriorityClass pc;
    GPUPOOL_ASSIGN_OR_RETURN(pc.name, doc.String(c, ip, "name"));
    GPUPOOL_ASSIGN_OR_RETURN(int64_t value, doc.Int(c, ip, "value", -1'000'000, 1'000'000));
    pc.value = static_cast<int32_t>(value);
    GPUPOOL_ASSIGN_OR_RETURN(pc.preemptible, doc.Bool(c, ip, "preemptible", true));
    GPUPOOL_ASSIGN_OR_RETURN(pc.may_preempt, doc.Bool(c, ip, "may_preempt", false));
    if (c["min_runtime_ms"]) {
      GPUPOOL_ASSIGN_OR_RETURN(pc.min_runtime_ms,
                               doc.Int(c, ip, "min_runtime_ms", 0, 7 * 24 * 3'600'000LL));
    }
    if (o->priority_classes.contains(pc.name)) {
      return doc.Error(c, ip.Key("name"), "duplicate priority class '" + pc.name + "'");
    }
    o->priority_classes[pc.name] = pc;
  }
  return Status::Ok();
}

Status ParseSkus(const YamlDoc& doc, const YAML::Node& root, SchedulerOptions* o) {
  YAML::Node n = root["skus"];
  if (!n) return Status::Ok();
  YamlPath p = YamlPath{}.Key("skus");
  GPUPOOL_RETURN_IF_ERROR(doc.RequireSequence(n, p));
  o->skus.clear();
  for (size_t i = 0; i < n.size(); ++i) {
    YamlPath ip = p.Index(i);
    const YAML::Node& s = n[i];
    GPUPOOL_RETURN_IF_ERROR(doc.RequireMap(s, ip));
    GPUPOOL_RETURN_IF_ERROR(
        doc.CheckKeys(s, ip, {"name", "tflops", "vram_mib", "gpus", "cpu_milli", "memory_mib"}));
    Sku sku;
    GPUPOOL_ASSIGN_OR_RETURN(sku.name, doc.String(s, ip, "name"));
    ResourceRequest& r = sku.request;
    if (s["gpus"]) {
      if (s["tflops"] || s["vram_mib"]) {
        return doc.Error(s, ip, "set either gpus or tflops and vram_mib, not both");
      }
      GPUPOOL_ASSIGN_OR_RETURN(int64_t gpus, doc.Int(s, ip, "gpus", 1, 64));
      r.shape = RequestShape::kWholeGpus;
      r.gpu_count = static_cast<int32_t>(gpus);
    } else {
      r.shape = RequestShape::kFractional;
      GPUPOOL_ASSIGN_OR_RETURN(r.fractional.milli_tflops,
                               doc.Milli(s, ip, "tflops", 1, 100'000'000));
      GPUPOOL_ASSIGN_OR_RETURN(r.fractional.vram_mib,
                               doc.Int(s, ip, "vram_mib", 1, 16LL * 1024 * 1024));
    }
    if (s["cpu_milli"]) {
      GPUPOOL_ASSIGN_OR_RETURN(r.cpu_milli, doc.Int(s, ip, "cpu_milli", 0, 10'000'000));
    }
    if (s["memory_mib"]) {
      GPUPOOL_ASSIGN_OR_RETURN(r.memory_mib, doc.Int(s, ip, "memory_mib", 0, 1LL << 40));
    }
    if (o->skus.contains(sku.name)) {
      return doc.Error(s, ip.Key("name"), "duplicate sku '" + sku.name + "'");
    }
    o->skus[sku.name] = sku;
  }
  return Status::Ok();
}

Status ParsePools(const YamlDoc& doc, const YAML::Node& root, DaemonConfig* c) {
  YAML::Node n = root["pools"];
  if (!n) return Status::Ok();
  YamlPath p = YamlPath{}.Key("pools");
  GPUPOOL_RETURN_IF_ERROR(doc.RequireSequence(n, p));
  std::set<std::string> names;
  for (size_t i = 0; i < n.size(); ++i) {
    YamlPath ip = p.Index(i);
    const YAML::Node& y = n[i];
    GPUPOOL_RETURN_IF_ERROR(doc.RequireMap(y, ip));
    GPUPOOL_RETURN_IF_ERROR(
        doc.CheckKeys(y, ip,
                      {"name", "visibility", "allowed_tenants", "strategy", "compute_overcommit",
                       "memory_overcommit", "sharing", "replicas", "mps_isolation", "compute_share",
                       "requires", "network"}));
    PoolRecord pool;
    GPUPOOL_ASSIGN_OR_RETURN(pool.name, doc.String(y, ip, "name"));
    // The API addresses a pool by this name (REST paths, gpupoolctl): one the API would refuse
    // could never be used or deleted, so the file is refused instead.
    if (Status st = api::ValidateName(pool.name, "name"); !st.ok()) {
      return doc.Error(y["name"], ip.Key("name"), st.message().substr(6));
    }
    if (!names.insert(pool.name).second) {
      return doc.Error(y, ip.Key("name"), "duplicate pool '" + pool.name + "'");
    }
    GPUPOOL_ASSIGN_OR_RETURN(auto vis, doc.OptionalString(y, ip, "visibility"));
    if (vis && *vis == "private") {
      pool.visibility = Visibility::kPrivate;
    } else if (vis && *vis != "public") {
      return doc.Error(y, ip.Key("visibility"), "must be public or private, got '" + *vis + "'");
    }
    if (YAML::Node t = y["allowed_tenants"]) {
      GPUPOOL_RETURN_IF_ERROR(doc.RequireSequence(t, ip.Key("allowed_tenants")));
      for (size_t k = 0; k < t.size(); ++k) {
        YamlPath kp = ip.Key("allowed_tenants").Index(k);
        if (!t[k].IsScalar()) return doc.Error(t[k], kp, "must be a tenant path");
        if (Status st = ValidateTenantPath(t[k].Scalar(), "x"); !st.ok()) {
          return doc.Error(t[k], kp, st.message().substr(3));
        }
        pool.allowed_tenants.push_back(t[k].Scalar());
      }
    }
    GPUPOOL_ASSIGN_OR_RETURN(auto strategy, doc.OptionalString(y, ip, "strategy"));
    if (strategy) pool.placement_strategy = *strategy;
    if (y["compute_overcommit"]) {
      GPUPOOL_ASSIGN_OR_RETURN(pool.compute_overcommit.permille,
                               doc.Milli(y, ip, "compute_overcommit", 1000, 10'000));
    }
    if (y["memory_overcommit"]) {
      GPUPOOL_ASSIGN_OR_RETURN(pool.memory_overcommit.permille,
                               doc.Milli(y, ip, "memory_overcommit", 1000, 10'000));
    }
    GPUPOOL_ASSIGN_OR_RETURN(auto sharing, doc.OptionalString(y, ip, "sharing"));
    if (sharing) {
      if (*sharing == "exclusive")
        pool.sharing_mode = SharingMode::kExclusive;
      else if (*sharing == "fractional")
        pool.sharing_mode = SharingMode::kFractional;
      else if (*sharing == "time-sliced")
        pool.sharing_mode = SharingMode::kTimeSliced;
      else {
        return doc.Error(y, ip.Key("sharing"),
                         "must be exclusive, fractional or time-sliced, got '" + *sharing + "'");
      }
    }
    if (y["replicas"]) {
      GPUPOOL_ASSIGN_OR_RETURN(int64_t r, doc.Int(y, ip, "replicas", 2, 64));
      pool.time_slice_replicas = static_cast<int32_t>(r);
    }
    if (pool.sharing_mode == SharingMode::kTimeSliced && pool.time_slice_replicas == 0) {
      return doc.Error(y, ip.Key("replicas"), "required when sharing is time-sliced");
    }
    GPUPOOL_ASSIGN_OR_RETURN(auto mps, doc.OptionalString(y, ip, "mps_isolation"));
    if (mps && *mps != "device" && *mps != "tenant") {
      return doc.Error(y, ip.Key("mps_isolation"), "must be device or tenant, got '" + *mps + "'");
    }
    pool.mps_tenant_isolation = mps && *mps == "tenant";
    if (pool.mps_tenant_isolation && pool.sharing_mode == SharingMode::kExclusive) {
      return doc.Error(y, ip.Key("mps_isolation"),
                       "tenant isolation needs sharing fractional or time-sliced");
    }
    GPUPOOL_ASSIGN_OR_RETURN(auto share, doc.OptionalString(y, ip, "compute_share"));
    if (share && *share != "strict" && *share != "fair") {
      return doc.Error(y, ip.Key("compute_share"), "must be strict or fair, got '" + *share + "'");
    }
    pool.compute_fair = share && *share == "fair";
    if (pool.compute_fair && pool.sharing_mode == SharingMode::kExclusive) {
      return doc.Error(y, ip.Key("compute_share"),
                       "fair sharing needs sharing fractional or time-sliced");
    }
    GPUPOOL_ASSIGN_OR_RETURN(auto network, doc.OptionalString(y, ip, "network"));
    if (network) {
      const auto mode = ParseTaskNetwork(*network);
      if (!mode || *network == "") {
        return doc.Error(y, ip.Key("network"),
                         "must be none, isolated or host, got '" + *network + "'");
      }
      pool.network = *mode;
    }
    // Capabilities a node needs for the pool's shared work: absent, the default; [] or [none],
    // none (docs/sandbox.md, "Capabilities a pool requires").
    pool.required_capabilities = CapabilityNames(DefaultRequiredCapabilities());
    std::sort(pool.required_capabilities.begin(), pool.required_capabilities.end());  // stored
    if (YAML::Node t = y["requires"]) {
      GPUPOOL_RETURN_IF_ERROR(doc.RequireSequence(t, ip.Key("requires")));
      std::set<std::string> caps;
      for (size_t k = 0; k < t.size(); ++k) {
        YamlPath kp = ip.Key("requires").Index(k);
        const std::string name = t[k].IsScalar() ? t[k].Scalar() : "";
        if (name == kNoRequirement && t.size() == 1) continue;
        if (CapabilityBit(name) == 0) {
          return doc.Error(t[k], kp,
                           name == kNoRequirement
                               ? std::string("'none' stands alone: it means no requirement")
                               : CapabilityMaskOf({name}).status().message());
        }
        caps.insert(name);
      }
      pool.required_capabilities.assign(caps.begin(), caps.end());
    }
    c->origins["pool " + pool.name] = Origin(doc, y, ip);
    c->pools.push_back(std::move(pool));
  }
  return Status::Ok();
}

// {tflops, vram_mib, devices} or {sku, count}.
Result<QuotaAmount> ParseQuotaAmount(const YamlDoc& doc, const YAML::Node& n, const YamlPath& p,
                                     const SchedulerOptions& o) {
  QuotaAmount a;
  if (!n) return a;
  GPUPOOL_RETURN_IF_ERROR(doc.RequireMap(n, p));
  GPUPOOL_RETURN_IF_ERROR(doc.CheckKeys(n, p, {"tflops", "vram_mib", "devices", "sku", "count"}));
  if (n["sku"]) {
    if (n["tflops"] || n["vram_mib"] || n["devices"]) {
      return doc.Error(n, p, "set either sku and count or tflops, vram_mib and devices");
    }
    GPUPOOL_ASSIGN_OR_RETURN(std::string sku, doc.String(n, p, "sku"));
    GPUPOOL_ASSIGN_OR_RETURN(int64_t count, doc.Int(n, p, "count", 0, 1'000'000));
    Result<QuotaAmount> r = QuotaInSkuUnits(o, sku, static_cast<int32_t>(count));
    if (!r.ok()) return doc.Error(n["sku"], p.Key("sku"), r.status().message());
    return r;
  }
  if (n["tflops"]) {
    GPUPOOL_ASSIGN_OR_RETURN(a.resources.milli_tflops,
                             doc.Milli(n, p, "tflops", 0, 1'000'000'000'000));
  }
  if (n["vram_mib"]) {
    GPUPOOL_ASSIGN_OR_RETURN(a.resources.vram_mib, doc.Int(n, p, "vram_mib", 0, 1LL << 50));
  }
  if (n["devices"]) {
    GPUPOOL_ASSIGN_OR_RETURN(int64_t d, doc.Int(n, p, "devices", 0, 10'000'000));
    a.devices = static_cast<int32_t>(d);
  }
  return a;
}

// A list of priority class names at `key` of `n`.
Result<std::vector<std::string>> ParseClassList(const YamlDoc& doc, const YAML::Node& n,
                                                const YamlPath& p, const char* key) {
  std::vector<std::string> out;
  YAML::Node l = n[key];
  GPUPOOL_RETURN_IF_ERROR(doc.RequireSequence(l, p.Key(key)));
  for (size_t i = 0; i < l.size(); ++i) {
    if (!l[i].IsScalar() || l[i].Scalar().empty()) {
      return doc.Error(l[i], p.Key(key).Index(i), "must be a priority class name");
    }
    out.push_back(l[i].Scalar());
  }
  return out;
}

// gateway: {rate_per_second, burst, hold_timeout_ms} — the services' gateway (listen.gateway).
Status ParseGateway(const YamlDoc& doc, const YAML::Node& root, DaemonConfig* c) {
  YAML::Node n = root["gateway"];
  if (!n) return Status::Ok();
  YamlPath p = YamlPath{}.Key("gateway");
  GPUPOOL_RETURN_IF_ERROR(doc.RequireMap(n, p));
  GPUPOOL_RETURN_IF_ERROR(doc.CheckKeys(n, p, {"rate_per_second", "burst", "hold_timeout_ms"}));
  if (n["rate_per_second"]) {
    GPUPOOL_ASSIGN_OR_RETURN(int64_t milli, doc.Milli(n, p, "rate_per_second", 0, 1'000'000'000));
    c->gateway_rate_per_second = static_cast<double>(milli) / 1000;
  }
  if (n["burst"]) {
    GPUPOOL_ASSIGN_OR_RETURN(int64_t burst, doc.Int(n, p, "burst", 1, 10'000'000));
    c->gateway_burst = static_cast<double>(burst);
  }
  if (n["hold_timeout_ms"]) {
    GPUPOOL_ASSIGN_OR_RETURN(c->gateway_hold_timeout_ms,
                             doc.Int(n, p, "hold_timeout_ms", 1'000, 3'600'000));
  }
  return Status::Ok();
}

// tenant_defaults: {priority_classes: [...]} — what a tenant without its own list may use.
Status ParseTenantDefaults(const YamlDoc& doc, const YAML::Node& root, DaemonConfig* c) {
  YAML::Node n = root["tenant_defaults"];
  if (!n) return Status::Ok();
  YamlPath p = YamlPath{}.Key("tenant_defaults");
  GPUPOOL_RETURN_IF_ERROR(doc.RequireMap(n, p));
  GPUPOOL_RETURN_IF_ERROR(
      doc.CheckKeys(n, p, {"priority_classes", "submit_rate_per_second", "submit_burst"}));
  if (n["submit_rate_per_second"]) {
    GPUPOOL_ASSIGN_OR_RETURN(int64_t milli,
                             doc.Milli(n, p, "submit_rate_per_second", 0, 1'000'000'000));
    c->submit_rate_per_second = static_cast<double>(milli) / 1000;
  }
  if (n["submit_burst"]) {
    GPUPOOL_ASSIGN_OR_RETURN(int64_t burst, doc.Int(n, p, "submit_burst", 1, 1'000'000));
    c->submit_burst = static_cast<double>(burst);
  }
  if (!n["priority_classes"]) return Status::Ok();
  GPUPOOL_ASSIGN_OR_RETURN(c->default_priority_classes,
                           ParseClassList(doc, n, p, "priority_classes"));
  if (c->default_priority_classes.empty()) {
    return doc.Error(n["priority_classes"], p.Key("priority_classes"),
                     "must name at least one class");
  }
  if (Result<api::PriorityAccess> a =
          api::PriorityAccess::Create(c->scheduler, c->default_priority_classes);
      !a.ok()) {
    return doc.Error(n["priority_classes"], p.Key("priority_classes"), a.status().message());
  }
  return Status::Ok();
}

// tenants: [{path, quotas: [{pool, guaranteed, limit}], priority_classes: [...]}]. The tree and the
// quotas are checked with the same rules the core applies (parents before children, a child never
// above its parent).
Status ParseTenants(const YamlDoc& doc, const YAML::Node& root, DaemonConfig* c) {
  YAML::Node n = root["tenants"];
  if (!n) return Status::Ok();
  YamlPath p = YamlPath{}.Key("tenants");
  GPUPOOL_RETURN_IF_ERROR(doc.RequireSequence(n, p));
  TenantBook book;
  GPUPOOL_ASSIGN_OR_RETURN(api::PriorityAccess classes,
                           api::PriorityAccess::Create(c->scheduler, c->default_priority_classes));
  for (size_t i = 0; i < n.size(); ++i) {
    YamlPath ip = p.Index(i);
    const YAML::Node& y = n[i];
    GPUPOOL_RETURN_IF_ERROR(doc.RequireMap(y, ip));
    GPUPOOL_RETURN_IF_ERROR(doc.CheckKeys(y, ip, {"path", "quotas", "priority_classes"}));
    TenantRecord t;
    GPUPOOL_ASSIGN_OR_RETURN(t.path, doc.String(y, ip, "path"));
    if (Status st = book.CheckCreate(t); !st.ok()) {
      return doc.Error(y["path"], ip.Key("path"), st.message());
    }
    book.PutTenant(t);
    c->origins["tenant " + t.path] = Origin(doc, y, ip);
    c->tenants.push_back(t);
    if (y["priority_classes"]) {
      GPUPOOL_ASSIGN_OR_RETURN(std::vector<std::string> list,
                               ParseClassList(doc, y, ip, "priority_classes"));
      if (Status st = classes.Add(t.path, list); !st.ok()) {
        return doc.Error(y["priority_classes"], ip.Key("priority_classes"), st.message());
      }
      c->tenant_priority_classes.emplace_back(t.path, std::move(list));
    }
    YAML::Node qs = y["quotas"];
    if (!qs) continue;
    YamlPath qp = ip.Key("quotas");
    GPUPOOL_RETURN_IF_ERROR(doc.RequireSequence(qs, qp));
    for (size_t k = 0; k < qs.size(); ++k) {
      YamlPath kp = qp.Index(k);
      const YAML::Node& q = qs[k];
      GPUPOOL_RETURN_IF_ERROR(doc.RequireMap(q, kp));
      GPUPOOL_RETURN_IF_ERROR(doc.CheckKeys(q, kp, {"pool", "guaranteed", "limit"}));
      QuotaRecord quota;
      quota.tenant = t.path;
      GPUPOOL_ASSIGN_OR_RETURN(quota.pool, doc.String(q, kp, "pool"));
      GPUPOOL_ASSIGN_OR_RETURN(
          quota.guaranteed,
          ParseQuotaAmount(doc, q["guaranteed"], kp.Key("guaranteed"), c->scheduler));
      GPUPOOL_ASSIGN_OR_RETURN(quota.limit,
                               ParseQuotaAmount(doc, q["limit"], kp.Key("limit"), c->scheduler));
      if (book.Quota(quota.tenant, quota.pool) != nullptr) {
        return doc.Error(q, kp.Key("pool"), "duplicate quota for pool '" + quota.pool + "'");
      }
      if (Status st = book.CheckQuota(quota); !st.ok()) return doc.Error(q, kp, st.message());
      book.PutQuota(quota);
      c->origins["quota " + quota.tenant + " " + quota.pool] = Origin(doc, q, kp);
      c->quotas.push_back(quota);
    }
  }
  return Status::Ok();
}

}  // namespace

Status ValidateListenAddress(const std::string& address, const std::string& what) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon + 1 == address.size()) {
    return Status::InvalidArgument(what + ": expected host:port, got '" + address + "'");
  }
  const std::string port = address.substr(colon + 1);
  if (port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos) {
    return Status::InvalidArgument(what + ": port '" + port + "' is not a number 0..65535");
  }
  if (std::stoi(port) > 65535) {
    return Status::InvalidArgument(what + ": port " + port + " is out of range 0..65535");
  }
  return Status::Ok();
}

ConnectionCaps ConnectionCapsFor(uint64_t descriptor_limit) {
  const uint64_t reserve = std::max<uint64_t>(64, descriptor_limit / 8);
  const uint64_t rest = descriptor_limit > reserve ? descriptor_limit - reserve : 0;
  return {static_cast<size_t>(std::max<uint64_t>(1, rest / 2)),
          static_cast<size_t>(std::max<uint64_t>(1, rest / 4))};
}

ConnectionCaps ConfiguredConnectionCaps(const DaemonConfig& config) {
  rlimit lim{};
  uint64_t limit = 1024;
  if (getrlimit(RLIMIT_NOFILE, &lim) == 0) {
    limit = lim.rlim_cur == RLIM_INFINITY ? 1 << 20 : static_cast<uint64_t>(lim.rlim_cur);
  }
  ConnectionCaps caps = ConnectionCapsFor(limit);
  if (config.http_max_connections) caps.http = static_cast<size_t>(*config.http_max_connections);
  if (config.grpc_max_connections) caps.grpc = static_cast<size_t>(*config.grpc_max_connections);
  return caps;
}

Result<DaemonConfig> ParseDaemonConfig(std::string_view yaml, const std::string& source) {
  GPUPOOL_ASSIGN_OR_RETURN(YAML::Node root, ParseYaml(yaml, source));
  DaemonConfig c;
  if (root.IsNull()) return c;
  YamlDoc doc{source};
  GPUPOOL_RETURN_IF_ERROR(doc.RequireMap(root, YamlPath{}));
  GPUPOOL_RETURN_IF_ERROR(doc.CheckKeys(
      root, YamlPath{}, {"listen",           "data_dir",  "database",    "embedded_port",
                         "catalog",          "log_level", "auth",        "scheduler",
                         "priority_classes", "skus",      "pools",       "tenants",
                         "tenant_defaults",  "ha",        "price_plans", "metering",
                         "fencing",          "secrets",   "gateway",     "services"}));
  GPUPOOL_RETURN_IF_ERROR(ParseListen(doc, root, &c));
  GPUPOOL_ASSIGN_OR_RETURN(auto data_dir, doc.OptionalString(root, YamlPath{}, "data_dir"));
  if (data_dir) c.data_dir = *data_dir;
  GPUPOOL_ASSIGN_OR_RETURN(auto database, doc.OptionalString(root, YamlPath{}, "database"));
  if (database) c.database = *database;
  if (root["embedded_port"]) {
    GPUPOOL_ASSIGN_OR_RETURN(int64_t port, doc.Int(root, YamlPath{}, "embedded_port", 0, 65535));
    c.embedded_port = static_cast<int>(port);
  }
  GPUPOOL_ASSIGN_OR_RETURN(auto catalog, doc.OptionalString(root, YamlPath{}, "catalog"));
  if (catalog) c.catalog = *catalog;
  GPUPOOL_ASSIGN_OR_RETURN(auto level, doc.OptionalString(root, YamlPath{}, "log_level"));
  if (level) {
    if (*level != "debug" && *level != "info" && *level != "warn" && *level != "error") {
      return doc.Error(root["log_level"], YamlPath{}.Key("log_level"),
                       "must be debug, info, warn or error, got '" + *level + "'");
    }
    c.log_level = *level;
  }
  GPUPOOL_RETURN_IF_ERROR(ParseAuth(doc, root, &c));
  GPUPOOL_RETURN_IF_ERROR(ParseHa(doc, root, &c));
  GPUPOOL_RETURN_IF_ERROR(ParseFencing(doc, root, &c));
  GPUPOOL_RETURN_IF_ERROR(ParseGateway(doc, root, &c));
  GPUPOOL_RETURN_IF_ERROR(ParseSecrets(doc, root, &c));
  GPUPOOL_RETURN_IF_ERROR(ParseScheduler(doc, root, &c.scheduler));
  GPUPOOL_RETURN_IF_ERROR(ParseMetering(doc, root, &c.scheduler.metering));  // config_metering.cc
  GPUPOOL_RETURN_IF_ERROR(ParseClasses(doc, root, &c.scheduler));
  GPUPOOL_RETURN_IF_ERROR(ParseSkus(doc, root, &c.scheduler));
  GPUPOOL_RETURN_IF_ERROR(ParsePools(doc, root, &c));
  GPUPOOL_RETURN_IF_ERROR(ParseTenantDefaults(doc, root, &c));
  GPUPOOL_RETURN_IF_ERROR(ParseTenants(doc, root, &c));
  GPUPOOL_RETURN_IF_ERROR(ParsePricePlans(doc, root, &c.price_plans));
  GPUPOOL_RETURN_IF_ERROR(ParseConfiguredServices(doc, root, &c.services));
  for (const char* key : {"priority_classes", "skus"}) {
    if (root[key]) c.origins[key] = Origin(doc, root[key], YamlPath{}.Key(key));
  }
  if (!c.scheduler.priority_classes.contains(c.scheduler.default_priority_class)) {
    return doc.Error(
        root["scheduler"], YamlPath{}.Key("scheduler").Key("default_priority_class"),
        "'" + c.scheduler.default_priority_class + "' is not a defined priority class");
  }
  return c;
}

Result<DaemonConfig> LoadDaemonConfig(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    return Status::InvalidArgument(path + ": is a directory, not a configuration file");
  }
  GPUPOOL_ASSIGN_OR_RETURN(std::string text, ReadTextFile(path));
  return ParseDaemonConfig(text, path);
}

std::string DaemonUsage() {
  return R"(gpupoold — the gpupool scheduler daemon.

Usage: gpupoold [--config FILE] [flags]

With no configuration at all, gpupoold starts a private PostgreSQL under --data-dir from the
system's binaries, serves gRPC on 127.0.0.1:7070 and REST, /metrics, /healthz and /readyz on
127.0.0.1:7080 — with the web console at https://127.0.0.1:7080/console/ (docs/console.md) —
restarts the private database if it dies, and stops it on exit. /readyz answers 200 only when a
submission would commit.

Every task attempt is metered into the usage ledger in PostgreSQL (the config's `metering:`
section; docs/billing.md): read it with `gpupoolctl usage` or GET /v1/usage. Usage reports and
invoices run on database connections of their own, at most metering.report_concurrency at once,
each at most metering.report_timeout_ms.

Secure by default (docs/security.md): on first start gpupoold creates a private CA in
DATA_DIR/tls/ (clients trust DATA_DIR/tls/ca.crt) and an admin credential in
DATA_DIR/admin.token (mode 0600); gRPC and REST serve TLS with a server certificate from that CA,
and every API call needs a credential (`gpupoolctl login --data-dir DATA_DIR`). It also writes the
node join token, DATA_DIR/node.token (0600): an agent given it (`token_file:` or --token-file) and
the CA joins once for a certificate of its own, and registers only with that certificate.

A node silent for scheduler.heartbeat_timeout_ms (10 s) gets no new work; its tasks keep running
for the node lease, scheduler.node_lease_ms (5 minutes), so an outage shorter than that kills
nothing (docs/ha.md); `gpupoolctl nodes fence NODE` releases a powered-off node's work at once,
and the config's `fencing: {command: [/path/to/fence-node, …]}` has gpupoold run that command
for a node silent for fencing.after_ms (30 s) that holds tasks, fencing it when it exits 0.

Secrets at rest (docs/security.md): tenants' secret env values and the replicas' shared CA key
are sealed (AES-256-GCM) before they reach PostgreSQL, with a key kept outside it: by default
DATA_DIR/secrets.key (0600, created on first start; back it up apart from the database), or the
config's `secrets: {key_file: /path}` or `secrets: {key_command: [/path/to/kms-get, …]}` (its
stdout is the key file's text). Rotate by putting a new key (openssl rand -base64 32) first in the
file: the leader re-seals everything under it at start. A missing or wrong key stops gpupoold at
start naming the key the database needs.

Services (docs/services.md): the config's `services:` list, each entry written as for
`gpupoolctl services create -f`, is created or updated to match at start-up (created_by config);
a service the file does not name is kept.

Single sign-on (docs/security.md, "OIDC bearer tokens"; docs/console.md): with auth.oidc, the
identity provider's JWTs are bearer tokens too. Without public_key_file its signing keys come from
the provider's JWKS (found through ISSUER/.well-known/openid-configuration), refreshed every
jwks_refresh_s and at once when a token names a new key (a rotation). With auth.oidc.console
{client_id, scopes} the web console signs users in there (authorization code flow with PKCE).

Each port holds at most a share of the descriptor limit in connections (listen.http_max_connections,
listen.grpc_max_connections); at the cap a new connection closes the one silent the longest, so
an idle-connection flood leaves every port answering (docs/security.md).

Flags (each overrides the config file):
  --config FILE        YAML configuration (see docs/operations.md)
  --grpc-listen ADDR   gRPC address, host:port (default 127.0.0.1:7070)
  --http-listen ADDR   REST/metrics address, host:port (default 127.0.0.1:7080)
  --grpc-tls-listen ADDR
                       also serve gRPC over TLS here (server certificate from the private CA in
                       DATA_DIR/tls/, created on first start); agents join and connect here
                       with their own node certificates (docs/security.md)
  --gateway-listen ADDR
                       the services' gateway, host:port (default: none; e.g. 127.0.0.1:7090):
                       HTTPS (HTTP with --insecure) to /services/TENANT/NAME/... on the
                       service's ready replicas, held while they start; HTTP/1.1 and HTTP/2,
                       gRPC naming the service in a gpupool-service header (docs/services.md)
  --data-dir DIR       state directory; the embedded PostgreSQL lives in DIR/pg
  --database URI       use an external PostgreSQL (postgresql://user@host:port/db); for a
                       cluster with failover (pg_auto_failover) list every node and add
                       target_session_attrs=read-write: postgresql://u@a:5432,b:5432/db?
                       target_session_attrs=read-write (docs/ha.md)
  --embedded-port N    port of the embedded PostgreSQL (default: a free one)
  --replica BOOL       true: one of several gpupoold on one --database: a standby until this
                       one holds the leader lease, then serve; exit at once if the lease is
                       lost (docs/ha.md). Same as `ha: {enabled: true}`. A standby listens on
                       its ports but executes nothing: gRPC calls get UNAVAILABLE naming the
                       leader (NotLeader), REST gets 307 to the leader, /readyz 503
  --advertise ADDR     the API address this replica is known by (default: --grpc-listen)
  --advertise-http URL the REST base URL this replica is known by (default: https:// or, with
                       --insecure, http:// and --http-listen)
  --catalog FILE       GPU catalog YAML (default: the built-in catalog)
  --secrets-key-file FILE
                       the key that seals secrets at rest (absolute path; default
                       DATA_DIR/secrets.key, created on first start); replicas need the same one
  --strategy NAME      default placement strategy for pools that name none
  --log-level LEVEL    debug, info, warn or error
  --webhooks-allow-loopback BOOL
                       true: webhooks may point at loopback and link-local addresses, and use
                       http:// to a loopback host (demos, tests; default false)
  --webhooks-ca-file FILE
                       PEM certificates trusted for webhook endpoints beside the system's
  --budget-check-interval SECONDS
                       how often the leader rates tenants' budgets and sends the alerts due
                       (1..86400; default 60; docs/billing.md, "Budgets")
  --insecure           development only: plaintext gRPC and HTTP, and no authentication unless
                       auth.api_tokens are configured; refused unless every listen address is
                       loopback (127.0.0.0/8, ::1, localhost)
  --version            print the version and exit
  --help               this text

Signals: SIGTERM and SIGINT stop the daemon cleanly (running tasks keep running on their nodes).
SIGHUP reads --config again and applies what changed in pools, tenants, quotas, priority
classes, SKUs, API tokens, price plans (new versions) and the usage report limits, all or
nothing; a refused reload is logged naming file, line and key and changes nothing
(docs/operations.md, "Reloading the configuration"). Its outcome is in
/metrics: gpupool_config_reloads_total{outcome} and gpupool_config_last_reload_timestamp_seconds.
)";
}

Result<CommandLine> ParseDaemonCommandLine(int argc, const char* const* argv) {
  CommandLine cl;
  bool insecure = false;
  std::vector<std::pair<std::string, std::string>> flags;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      cl.help = true;
      return cl;
    }
    if (a == "--version") {
      cl.version = true;
      return cl;
    }
    if (a == "--insecure") {  // the one flag without a value
      insecure = true;
      continue;
    }
    if (a.rfind("--", 0) != 0) return Status::InvalidArgument("unexpected argument '" + a + "'");
    std::string value;
    if (size_t eq = a.find('='); eq != std::string::npos) {
      value = a.substr(eq + 1);
      a = a.substr(0, eq);
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      return Status::InvalidArgument("flag " + a + " needs a value");
    }
    flags.emplace_back(a, value);
  }
  for (const auto& [flag, value] : flags) {
    if (flag == "--config") {
      GPUPOOL_ASSIGN_OR_RETURN(cl.config, LoadDaemonConfig(value));
    }
  }
  DaemonConfig& c = cl.config;
  for (const auto& [flag, value] : flags) {
    if (flag == "--config") continue;
    if (flag == "--gateway-listen" && value.empty()) {
      c.gateway_listen.clear();  // no gateway
    } else if (flag == "--grpc-listen" || flag == "--http-listen" || flag == "--grpc-tls-listen" ||
               flag == "--gateway-listen") {
      GPUPOOL_RETURN_IF_ERROR(ValidateListenAddress(value, flag));
      (flag == "--grpc-listen"      ? c.grpc_listen
       : flag == "--http-listen"    ? c.http_listen
       : flag == "--gateway-listen" ? c.gateway_listen
                                    : c.grpc_tls_listen) = value;
    } else if (flag == "--data-dir")
      c.data_dir = value;
    else if (flag == "--database")
      c.database = value;
    else if (flag == "--catalog")
      c.catalog = value;
    else if (flag == "--secrets-key-file") {
      if (value.empty() || value.front() != '/') {
        return Status::InvalidArgument("--secrets-key-file: must be an absolute path, got '" +
                                       value + "'");
      }
      c.secrets.key_file = value;
      c.secrets.key_command.clear();
    } else if (flag == "--replica") {
      if (value != "true" && value != "false") {
        return Status::InvalidArgument("--replica: must be true or false, got '" + value + "'");
      }
      c.ha.enabled = value == "true";
    } else if (flag == "--webhooks-allow-loopback") {
      if (value != "true" && value != "false") {
        return Status::InvalidArgument("--webhooks-allow-loopback: must be true or false, got '" +
                                       value + "'");
      }
      c.webhooks.allow_loopback = value == "true";
    } else if (flag == "--webhooks-ca-file") {
      c.webhooks.ca_file = value;
    } else if (flag == "--advertise")
      c.ha.advertise = value;
    else if (flag == "--advertise-http") {
      if (value.rfind("http://", 0) != 0 && value.rfind("https://", 0) != 0) {
        return Status::InvalidArgument(
            "--advertise-http: must be a URL starting with http:// or https://, got '" + value +
            "'");
      }
      c.ha.advertise_http = value;
    } else if (flag == "--strategy")
      c.scheduler.default_strategy = value;
    else if (flag == "--log-level") {
      if (value != "debug" && value != "info" && value != "warn" && value != "error") {
        return Status::InvalidArgument("--log-level: must be debug, info, warn or error, got '" +
                                       value + "'");
      }
      c.log_level = value;
    } else if (flag == "--budget-check-interval") {
      int seconds = 0;
      auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), seconds);
      if (ec != std::errc() || end != value.data() + value.size() || seconds < 1 ||
          seconds > 86400) {
        return Status::InvalidArgument(
            "--budget-check-interval: must be a whole number of seconds, 1..86400, got '" + value +
            "'");
      }
      c.budget_check_s = seconds;
    } else if (flag == "--embedded-port") {
      try {
        c.embedded_port = std::stoi(value);
      } catch (...) {
        return Status::InvalidArgument("--embedded-port: not a port number: '" + value + "'");
      }
      if (c.embedded_port < 0 || c.embedded_port > 65535) {
        return Status::InvalidArgument("--embedded-port: must be 0..65535");
      }
    } else {
      return Status::InvalidArgument("unknown flag " + flag + " (see --help)");
    }
  }
  if (c.ha.enabled && c.database.empty()) {
    return Status::InvalidArgument(
        "replicas (--replica / ha.enabled) need --database: an external PostgreSQL they share "
        "(the embedded one is single-node)");
  }
  if (insecure) c.insecure = true;  // --config must not undo it
  if (c.insecure) GPUPOOL_RETURN_IF_ERROR(CheckInsecureAllowed(c));
  return cl;
}

bool IsLoopbackListenAddress(const std::string& address) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos) return false;
  std::string host = address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  if (host == "localhost" || host == "::1") return true;
  // 127.0.0.0/8, written as four decimal octets.
  unsigned a = 0, b = 0, c = 0, d = 0;
  char tail = 0;
  if (std::sscanf(host.c_str(), "%u.%u.%u.%u%c", &a, &b, &c, &d, &tail) != 4) return false;
  return a == 127 && b <= 255 && c <= 255 && d <= 255;
}

Status CheckInsecureAllowed(const DaemonConfig& c) {
  const std::pair<const char*, const std::string*> listens[] = {
      {"--grpc-listen", &c.grpc_listen},
      {"--http-listen", &c.http_listen},
      {"--grpc-tls-listen", &c.grpc_tls_listen},
      {"--gateway-listen", &c.gateway_listen}};
  for (const auto& [flag, address] : listens) {
    if (address->empty() || IsLoopbackListenAddress(*address)) continue;
    return Status::InvalidArgument(
        std::string("--insecure: ") + flag + " '" + *address +
        "' is not a loopback address; insecure mode serves without TLS or authentication and "
        "is for development on this machine only (listen on 127.0.0.1, or drop --insecure)");
  }
  return Status::Ok();
}

}  // namespace gpupool
