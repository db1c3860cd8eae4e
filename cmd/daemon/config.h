// DaemonConfig: gpupoold's configuration, parsed once from YAML and flags into typed options.
//
// Every error names the file, the key and the line ("gpupoold.yaml:12: pools[0].compute_overcommit:
// must be between 1.0 and 10.0, got 12"). Flags override the file. See docs/operations.md for the
// reference and an annotated example.
//
// Thread safety: plain values.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "scheduler/model.h"
#include "scheduler/options.h"

namespace gpupool {

struct ApiToken {
  std::string token;
  std::string principal;  // tenant path, or an admin name
  bool admin = false;
};

struct DaemonConfig {
  std::string grpc_listen = "127.0.0.1:7070";
  std::string http_listen = "127.0.0.1:7080";
  std::string data_dir = "gpupool-data";
  // postgresql:// URI; empty = embedded PostgreSQL under data_dir.
  std::string database;
  // Port for the embedded server; 0 = pick a free one.
  int embedded_port = 0;
  // Catalog YAML; empty = the built-in catalog.
  std::string catalog;
  std::string log_level = "info";
  std::vector<ApiToken> api_tokens;      // empty = no authentication (everyone is admin)
  std::vector<std::string> node_tokens;  // empty = agents are not authenticated
  SchedulerOptions scheduler = SchedulerOptions::Defaults();
  std::vector<PoolRecord> pools;  // created at start-up when missing
  // Created at start-up when missing, in this order (parents before children), then their
  // quotas set (docs/tenancy.md).
  std::vector<TenantRecord> tenants;
  std::vector<QuotaRecord> quotas;
};

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
