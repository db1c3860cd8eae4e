// ConfigReloader: what gpupoold does on SIGHUP — read the configuration again and apply what
// changed, all or nothing, without a restart.
//
// What a reload applies (the rest needs a restart and is reported as such, never refused):
//  * pools: an entry new to the file, or changed in it, is created or updated to match (a pool
//    the API changed and the file did not stays as the API left it);
//  * tenants: an entry new to the file is created when missing;
//  * quotas: an entry new to the file, or changed in it, is set (the file wins, as at start-up);
//  * priority classes, the default class and SKUs (the core's and the API's copy together);
//  * which classes each tenant may use (tenant_defaults / tenants[].priority_classes);
//  * API tokens (auth.api_tokens), but never turning authentication on or off;
//  * log_level;
//  * price plans and the usage report limits (cmd/daemon/reload_billing.h); the core's metering
//    settings are restart-only.
// An entry the file no longer names is kept (it may have been made through the API) and reported.
//
// All or nothing: everything that can be judged without the core is checked first (the file
// parses and validates — errors name file, line and key —, tokens, class lists). Then the
// pool, tenant and quota changes go through the core's ordinary admin calls, so they are stored
// like any API change; if the core refuses one, the ones already made are undone in reverse
// order and the reload is refused naming the entry's file:line and key. Only then are the
// priority classes and SKUs swapped in the core (refused, with the undo, when an unfinished job
// still uses a class that would go), and last the API's policy and tokens, which cannot fail.
//
// Outcomes are logged and counted: gpupool_config_reloads_total{outcome="applied"|"unchanged"|
// "refused"} and gpupool_config_last_reload_timestamp_seconds{outcome}.
//
// Thread safety: Reload() is called from one thread (gpupoold's signal thread), never from the
// core's loop thread (it waits for the core).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "api/priority_access.h"
#include "base/status.h"
#include "cmd/daemon/config.h"
#include "cmd/daemon/reload_billing.h"

namespace prometheus {
class Registry;
}

namespace gpupool {
class AdminPort;
namespace api {
class Authenticator;
class ServiceImpl;
struct ApiToken;
}  // namespace api

// The priority classes each tenant may submit at, as `config` says.
Result<api::PriorityAccess> PriorityAccessOf(const DaemonConfig& config);

struct ReloadTargets {
  AdminPort* admin = nullptr;
  api::ServiceImpl* service = nullptr;
  api::Authenticator* auth = nullptr;
  // The bootstrap tokens a configuration gives (its api_tokens, plus the admin credential unless
  // --insecure): the same function gpupoold starts with.
  std::function<Result<std::vector<api::ApiToken>>(const DaemonConfig&)> tokens_of;
  BillingReloadTargets billing;  // price plans and report limits
};

struct ReloadReport {
  enum Outcome { kApplied, kUnchanged, kRefused } outcome = kUnchanged;
  std::vector<std::string> changes;  // "pool 'training' updated", …
  std::vector<std::string> kept;     // what the file no longer names, and restart-only changes
  Status refused;                    // why, when kRefused
};

class ConfigReloader {
 public:
  // `load` reads the configuration as at start-up (file, then flags on top). `running` is the
  // configuration the daemon started with. REQUIRES: the targets outlive this.
  ConfigReloader(std::function<Result<DaemonConfig>()> load, DaemonConfig running,
                 ReloadTargets targets, prometheus::Registry* registry);
  ~ConfigReloader();

  ReloadReport Reload();

 private:
  struct Metrics;
  Status ApplyCore(const DaemonConfig& next, ReloadReport* report);

  std::function<Result<DaemonConfig>()> load_;
  DaemonConfig running_;
  ReloadTargets t_;
  std::unique_ptr<Metrics> metrics_;
};

}  // namespace gpupool
