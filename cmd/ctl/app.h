// gpupoolctl's frame: the command table, the per-invocation context (output streams, server
// address, credentials, deadline, output format) and the exit-code contract.
//
// Each command is a plain function `int (Ctx&, const ParsedArgs&)` returning an exit code; the
// command files (jobs.cc, pools.cc, nodes.cc, tenants.cc, quotas.cc) only build requests, call a
// stub through the Ctx, and format the reply. Run() is main() without the process: tests call it
// with their own streams and environment.
//
// Exit codes (stable; scripts may rely on them):
//   0 ok · 1 other error · 2 usage (bad command line or local input; nothing was sent) ·
//   3 not found · 4 rejected (INVALID_ARGUMENT, FAILED_PRECONDITION, OUT_OF_RANGE,
//   RESOURCE_EXHAUSTED) · 5 unavailable, try again (UNAVAILABLE, DEADLINE_EXCEEDED, ABORTED) ·
//   6 denied (PERMISSION_DENIED, UNAUTHENTICATED) · 7 already exists.
//
// Thread safety: one Ctx per invocation, used on one thread.
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "api/client/leader_follow.h"
#include "cmd/ctl/args.h"
#include "cmd/ctl/format.h"

namespace gpupool::ctl {

enum ExitCode : int {
  kExitOk = 0,
  kExitError = 1,
  kExitUsage = 2,
  kExitNotFound = 3,
  kExitRejected = 4,
  kExitUnavailable = 5,
  kExitDenied = 6,
  kExitAlreadyExists = 7,
};

int ExitCodeFor(grpc::StatusCode code);

// The exit-code table as printed by --help.
extern const char kExitCodeHelp[];

// Channels kept open across invocations by a session helper (session.cc), one per gpupoold
// address and CA, so a command finds its TLS connection already up.
// Thread safety: internally synchronized.
class ChannelCache {
 public:
  std::shared_ptr<grpc::Channel> Get(const std::string& target, const std::string& ca_pem,
                                     const std::function<std::shared_ptr<grpc::Channel>()>& make);
  size_t size() const;

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, std::string>, std::shared_ptr<grpc::Channel>> channels_;
};

// Defaults taken from the process environment (process_env.h).
struct Environment {
  std::string server;  // GPUPOOL_SERVER
  std::string token;   // GPUPOOL_TOKEN
  std::string ca;      // GPUPOOL_CA
  // The settings file (client_config.h): GPUPOOL_CONFIG, else under XDG_CONFIG_HOME or HOME.
  std::string config_path;
  // A session helper's open channels; null: each invocation opens its own.
  ChannelCache* channels = nullptr;
};

inline constexpr char kDefaultServer[] = "127.0.0.1:7070";
inline constexpr int64_t kDefaultTimeoutMs = 30'000;

class Ctx {
 public:
  Ctx(std::ostream& out, std::ostream& err) : out(out), err(err) {}

  std::ostream& out;
  std::ostream& err;
  OutputFormat format = OutputFormat::kTable;
  std::string server = kDefaultServer;
  std::string token;
  // PEM of the CA to trust (--ca): set = TLS to `server` (gpupoold's port, TLS by default).
  std::string ca_pem;
  std::string ca_path;      // where ca_pem came from
  std::string config_path;  // the settings file (Environment::config_path)
  int64_t timeout_ms = kDefaultTimeoutMs;
  bool timeout_set = false;          // --timeout given: streams get a deadline too
  std::string command_path;          // "jobs submit", for hints
  ChannelCache* channels = nullptr;  // Environment::channels

  // The channel to the leader: the --server list at first; after a standby's NotLeader, the
  // address it named (api/client/leader_follow.h).
  std::shared_ptr<grpc::Channel> channel();
  // The channel if a command opened one, else null (never opens one).
  std::shared_ptr<grpc::Channel> channel_if_open() const { return channel_; }
  // Set by Fail() when the failure came from a standby (or from a leader it named that is
  // gone) and the deadline leaves room: Run() sends the command again after this pause, and
  // Fail printed nothing. Cleared by the call.
  std::optional<std::chrono::milliseconds> TakeRetry() const;
  // A context carrying the bearer token and the deadline (unary: always; streaming: only when
  // --timeout was given).
  std::unique_ptr<grpc::ClientContext> NewCall(bool streaming = false) const;

  // Prints "gpupoolctl: USAGE: message" and a hint; returns kExitUsage.
  int Usage(const std::string& message) const;
  // Prints "gpupoolctl: CODE: message"; returns the mapped exit code.
  int Fail(const grpc::Status& status) const;
  // A local failure of the given kind (e.g. an unreadable spec file is a usage error).
  int Fail(const Status& status, int exit_code) const;

 private:
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<api::LeaderFollower> follower_;
  const std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
  mutable std::optional<std::chrono::milliseconds> retry_;
  mutable int retries_ = 0;
};

using Handler = int (*)(Ctx&, const ParsedArgs&);

struct Command {
  std::string path;        // "jobs submit"
  std::string args_usage;  // "[flags] -- COMMAND [ARGS...]"
  std::string summary;     // one line
  std::string description;
  std::vector<FlagSpec> flags;
  std::string examples;  // lines, each a full command
  size_t min_args = 0;
  size_t max_args = 0;
  Handler run = nullptr;
};

std::vector<Command> JobCommands();                 // jobs …, logs
std::vector<Command> PoolCommands();                // pools …
std::vector<Command> NodeCommands();                // nodes …, catalog list
std::vector<Command> TenantCommands();              // tenants …
std::vector<Command> QuotaCommands();               // quotas …
std::vector<Command> TopCommands();                 // top
std::vector<Command> PolicyCommands();              // priority-classes list, skus list
std::vector<Command> AuditCommands();               // audit
std::vector<Command> UsageCommands();               // usage
std::vector<Command> LoginCommands();               // login, config …
std::vector<Command> KeyCommands();                 // keys …
std::vector<Command> RegistryCredentialCommands();  // registry-credentials …
std::vector<Command> WebhookCommands();             // webhooks …
std::vector<Command> JoinTokenCommands();           // join-tokens …
std::vector<Command> BillingCommands();             // priceplans …, invoices, usage-feed
std::vector<Command> BudgetCommands();              // budgets …
std::vector<Command> WhatIfCommands();              // whatif
std::vector<Command> ImageCommands();               // images …
std::vector<Command> ServiceCommands();             // services …
std::vector<Command> SessionCommands();             // session … (session.cc)

// The command `args` name ("jobs submit"), or "" when they name none (help, a group, unknown).
std::string CommandPathOf(const std::vector<std::string>& args);

// The text of FILE, or of stdin for "-" (`--file -`, `--secret-file -`).
Result<std::string> ReadFileOrStdin(const std::string& path);

// Runs one invocation; `args` excludes the program name. Returns the exit code.
//
// `keep_channel` (main() only): the gRPC channel, if one was opened, is handed out instead of
// closed, so gRPC is still running when Run returns. Closing the last channel shuts gRPC down,
// which waits for its threads with sleeps of 1, 2, 4… ms — about 10 ms of a 15 ms `jobs get` on
// the dev box (docs/benchmarks-archive.md). A process that is about to exit skips that: main()
// flushes its output and calls _exit. Everything was already answered and printed by then.
int Run(const std::vector<std::string>& args, const Environment& env, std::ostream& out,
        std::ostream& err, std::shared_ptr<grpc::Channel>* keep_channel = nullptr);

}  // namespace gpupool::ctl
