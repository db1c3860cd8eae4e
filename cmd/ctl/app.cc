#include "cmd/ctl/app.h"

#include <algorithm>
#include <chrono>
#include <iostream>
#include <sstream>
#include <thread>

#include "base/address_list.h"
#include "cmd/ctl/client_config.h"
#include "cmd/ctl/units.h"
#include "pool/yaml_error.h"

namespace gpupool::ctl {

const char kExitCodeHelp[] =
    "  0  ok\n"
    "  1  other error (INTERNAL, UNKNOWN, UNIMPLEMENTED, CANCELLED, DATA_LOSS)\n"
    "  2  usage: bad command line or local input (flags, units, spec file); nothing was sent\n"
    "  3  not found (NOT_FOUND)\n"
    "  4  rejected (INVALID_ARGUMENT, FAILED_PRECONDITION, OUT_OF_RANGE, RESOURCE_EXHAUSTED)\n"
    "  5  unavailable, try again (UNAVAILABLE, DEADLINE_EXCEEDED, ABORTED; cannot connect)\n"
    "  6  denied (PERMISSION_DENIED, UNAUTHENTICATED)\n"
    "  7  already exists (ALREADY_EXISTS)\n";

namespace {

const std::vector<FlagSpec>& GlobalFlags() {
  static const std::vector<FlagSpec> flags = {
      {"server", 0, FlagKind::kValue, "HOST:PORT[,HOST:PORT...]",
       "gpupoold gRPC address; several replicas: a list, and a standby's answer names the leader, "
       "which gpupoolctl then calls (env GPUPOOL_SERVER, then the config file, default "
       "127.0.0.1:7070)"},
      {"token", 0, FlagKind::kValue, "TOKEN",
       "credential (API key or token) sent as 'authorization: Bearer TOKEN' (env "
       "GPUPOOL_TOKEN, then the config file)"},
      {"ca", 0, FlagKind::kValue, "FILE",
       "speak TLS, trusting this CA (gpupoold's <data-dir>/tls/ca.crt; env GPUPOOL_CA, then "
       "the config file)"},
      {"output", 'o', FlagKind::kValue, "FORMAT",
       "table (default, for people), json (protobuf JSON mapping) or yaml"},
      {"timeout", 0, FlagKind::kValue, "DURATION",
       "deadline per call, e.g. 10s (default 30s; streams have none unless given)"},
      {"help", 'h', FlagKind::kBool, "", "show help for the command"},
  };
  return flags;
}

const std::vector<Command>& Commands() {
  static const std::vector<Command> all = [] {
    std::vector<Command> v = JobCommands();
    for (auto&& c : PoolCommands()) v.push_back(std::move(c));
    for (auto&& c : ServiceCommands()) v.push_back(std::move(c));
    for (auto&& c : ImageCommands()) v.push_back(std::move(c));
    for (auto&& c : SessionCommands()) v.push_back(std::move(c));
    for (auto&& c : NodeCommands()) v.push_back(std::move(c));
    for (auto&& c : TenantCommands()) v.push_back(std::move(c));
    for (auto&& c : QuotaCommands()) v.push_back(std::move(c));
    for (auto&& c : PolicyCommands()) v.push_back(std::move(c));
    for (auto&& c : TopCommands()) v.push_back(std::move(c));
    for (auto&& c : AuditCommands()) v.push_back(std::move(c));
    for (auto&& c : UsageCommands()) v.push_back(std::move(c));
    for (auto&& c : LoginCommands()) v.push_back(std::move(c));
    for (auto&& c : KeyCommands()) v.push_back(std::move(c));
    for (auto&& c : RegistryCredentialCommands()) v.push_back(std::move(c));
    for (auto&& c : WebhookCommands()) v.push_back(std::move(c));
    for (auto&& c : JoinTokenCommands()) v.push_back(std::move(c));
    for (auto&& c : BillingCommands()) v.push_back(std::move(c));
    for (auto&& c : BudgetCommands()) v.push_back(std::move(c));
    for (auto&& c : WhatIfCommands()) v.push_back(std::move(c));
    return v;
  }();
  return all;
}

bool StartsWith(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

void PrintCommandList(std::ostream& out, const std::string& prefix) {
  size_t width = 0;
  for (const Command& c : Commands()) {
    if (prefix.empty() || StartsWith(c.path, prefix)) width = std::max(width, c.path.size());
  }
  for (const Command& c : Commands()) {
    if (!prefix.empty() && !StartsWith(c.path, prefix)) continue;
    out << "  " << c.path << std::string(width - c.path.size() + 3, ' ') << c.summary << '\n';
  }
}

void PrintTopHelp(std::ostream& out) {
  out << "gpupoolctl: the command line of gpupool, the cluster-wide GPU pool scheduler.\n\n"
         "Usage: gpupoolctl [global flags] COMMAND [flags] [args]\n\nCommands:\n";
  PrintCommandList(out, "");
  out << "\nGlobal flags (accepted before or after the command):\n"
      << FormatFlagHelp(GlobalFlags()) << "\nExit codes:\n"
      << kExitCodeHelp
      << "\nErrors go to stderr as 'gpupoolctl: CODE: message'.\n\n"
         "Examples:\n"
         "  gpupoolctl catalog list\n"
         "  gpupoolctl --server gpupool.internal:7070 jobs list --pool training\n"
         "  gpupoolctl jobs submit --tenant acme/ml/alice --pool training --gpus 2 -- python "
         "train.py\n"
         "  gpupoolctl -o json jobs get 42 | jq .state\n"
         "  gpupoolctl quotas set acme shared --guaranteed tflops=2000 --limit tflops=4000\n\n"
         "Run 'gpupoolctl COMMAND --help' for a command's flags and examples.\n";
}

void PrintGroupHelp(std::ostream& out, const std::string& group) {
  out << "Usage: gpupoolctl " << group << " COMMAND [flags] [args]\n\nCommands:\n";
  PrintCommandList(out, group + " ");
  out << "\nRun 'gpupoolctl " << group << " COMMAND --help' for details.\n";
}

void PrintCommandHelp(std::ostream& out, const Command& c) {
  out << "Usage: gpupoolctl " << c.path << (c.args_usage.empty() ? "" : " ") << c.args_usage
      << "\n\n"
      << c.summary << ".\n";
  if (!c.description.empty()) out << '\n' << c.description << '\n';
  if (!c.flags.empty()) out << "\nFlags:\n" << FormatFlagHelp(c.flags);
  out << "\nGlobal flags:\n" << FormatFlagHelp(GlobalFlags());
  if (!c.examples.empty()) out << "\nExamples:\n" << c.examples;
  out << "\nExit codes:\n" << kExitCodeHelp;
}

bool IsGroup(const std::string& path) {
  for (const Command& c : Commands()) {
    if (StartsWith(c.path, path + " ")) return true;
  }
  return false;
}

const Command* FindCommand(const std::string& path) {
  for (const Command& c : Commands()) {
    if (c.path == path) return &c;
  }
  return nullptr;
}

bool IsGlobalValueFlag(const std::string& w) {
  if (w.find('=') != std::string::npos) return false;
  for (const FlagSpec& f : GlobalFlags()) {
    if (f.kind == FlagKind::kBool) continue;
    if (w == "--" + f.name || (f.short_name && w == std::string("-") + f.short_name)) return true;
  }
  return false;
}

// Prints help for `topic` ("", a group, or a command); false if the topic is unknown.
bool PrintHelpTopic(std::ostream& out, const std::string& topic) {
  if (topic.empty()) {
    PrintTopHelp(out);
  } else if (const Command* c = FindCommand(topic)) {
    PrintCommandHelp(out, *c);
  } else if (IsGroup(topic)) {
    PrintGroupHelp(out, topic);
  } else {
    return false;
  }
  return true;
}

}  // namespace

Result<std::string> ReadFileOrStdin(const std::string& path) {
  if (path != "-") return ReadTextFile(path);
  std::ostringstream ss;
  ss << std::cin.rdbuf();
  return ss.str();
}

int ExitCodeFor(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK:
      return kExitOk;
    case grpc::StatusCode::NOT_FOUND:
      return kExitNotFound;
    case grpc::StatusCode::INVALID_ARGUMENT:
    case grpc::StatusCode::FAILED_PRECONDITION:
    case grpc::StatusCode::OUT_OF_RANGE:
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return kExitRejected;
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::DEADLINE_EXCEEDED:
    case grpc::StatusCode::ABORTED:
      return kExitUnavailable;
    case grpc::StatusCode::PERMISSION_DENIED:
    case grpc::StatusCode::UNAUTHENTICATED:
      return kExitDenied;
    case grpc::StatusCode::ALREADY_EXISTS:
      return kExitAlreadyExists;
    default:
      return kExitError;
  }
}

std::shared_ptr<grpc::Channel> Ctx::channel() {
  // Several replicas ("a:7070,b:7070"): a standby answers NotLeader naming the leader, and Fail()
  // has Run() send the command again there (docs/ha.md).
  if (!follower_) {
    follower_ = std::make_unique<api::LeaderFollower>(
        server, [pem = ca_pem, cache = channels](const std::string& target) {
          auto make = [&] {
            if (pem.empty()) {
              return grpc::CreateChannel(GrpcTargetOf(target), grpc::InsecureChannelCredentials());
            }
            grpc::SslCredentialsOptions o;
            o.pem_root_certs = pem;
            grpc::ChannelArguments args;
            const std::string name = TlsTargetNameOf(target);
            if (!name.empty()) args.SetSslTargetNameOverride(name);
            return grpc::CreateCustomChannel(GrpcTargetOf(target), grpc::SslCredentials(o), args);
          };
          return cache != nullptr ? cache->Get(target, pem, make) : make();
        });
  }
  channel_ = follower_->channel();
  return channel_;
}

std::shared_ptr<grpc::Channel> ChannelCache::Get(
    const std::string& target, const std::string& ca_pem,
    const std::function<std::shared_ptr<grpc::Channel>()>& make) {
  std::lock_guard<std::mutex> lock(mu_);
  std::shared_ptr<grpc::Channel>& c = channels_[{target, ca_pem}];
  if (c == nullptr) c = make();
  return c;
}

size_t ChannelCache::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return channels_.size();
}

std::optional<std::chrono::milliseconds> Ctx::TakeRetry() const {
  std::optional<std::chrono::milliseconds> r = retry_;
  retry_.reset();
  return r;
}

std::unique_ptr<grpc::ClientContext> Ctx::NewCall(bool streaming) const {
  auto call = std::make_unique<grpc::ClientContext>();
  if (!token.empty()) call->AddMetadata("authorization", "Bearer " + token);
  if (!streaming || timeout_set) {
    call->set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(timeout_ms));
  }
  return call;
}

int Ctx::Usage(const std::string& message) const {
  err << "gpupoolctl: USAGE: " << message << '\n'
      << "Run 'gpupoolctl " << (command_path.empty() ? "" : command_path + " ")
      << "--help' for usage.\n";
  return kExitUsage;
}

int Ctx::Fail(const grpc::Status& status) const {
  constexpr int kMaxRetries = 50;
  if (follower_ && retries_ < kMaxRetries) {
    // A standby executed nothing, so any command may go again; bounded by --timeout overall.
    const api::LeaderFollower::Next next = follower_->OnFailure(status);
    const auto spent = std::chrono::steady_clock::now() - started_ + next.delay;
    if (next.retry && spent < std::chrono::milliseconds(timeout_ms)) {
      ++retries_;
      retry_ = next.delay;
      return kExitUnavailable;
    }
  }
  std::string message = status.error_message();
  // gRPC reports a refused or failed connection as UNAVAILABLE "failed to connect to all
  // addresses…"; say which server that was. A server's own UNAVAILABLE (database down) is kept.
  if (status.error_code() == grpc::StatusCode::UNAVAILABLE &&
      (message.find("failed to connect") != std::string::npos ||
       message.find("Connection refused") != std::string::npos)) {
    message = "cannot reach gpupoold at " + server + ": " + message;
    if (ca_pem.empty()) {
      message += "\n(gpupoold serves TLS by default: run 'gpupoolctl login --server " + server +
                 " --data-dir DATA_DIR' once, or pass --ca DATA_DIR/tls/ca.crt and --token)";
    }
  } else if (status.error_code() == grpc::StatusCode::UNAUTHENTICATED && token.empty()) {
    message += "\n(no credential was sent: run 'gpupoolctl login', or pass --token)";
  } else if (status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
    message = "no answer from " + server + " within " + FormatDurationMs(timeout_ms) +
              (message.empty() ? "" : ": " + message);
  }
  err << "gpupoolctl: " << StatusCodeName(static_cast<StatusCode>(status.error_code())) << ": "
      << message << '\n';
  return ExitCodeFor(status.error_code());
}

int Ctx::Fail(const Status& status, int exit_code) const {
  if (exit_code == kExitUsage) return Usage(status.message());
  err << "gpupoolctl: " << StatusCodeName(status.code()) << ": " << status.message() << '\n';
  return exit_code;
}

namespace {

// The command words of an invocation, split from its flags and arguments.
struct Resolved {
  const Command* cmd = nullptr;   // null: no full command (top level, a group or help)
  std::string path;               // "jobs submit", "jobs", or the help topic
  bool help_topic = false;        // "gpupoolctl help TOPIC"
  std::vector<std::string> rest;  // flags and arguments, for ParseFlags
};

// Leading non-flag words name the command; global flags may come before them.
Result<Resolved> Resolve(const std::vector<std::string>& args) {
  Resolved r;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& w = args[i];
    if (r.cmd != nullptr || w == "--") {
      r.rest.insert(r.rest.end(), args.begin() + static_cast<std::ptrdiff_t>(i), args.end());
      break;
    }
    if (w.size() > 1 && w[0] == '-') {
      r.rest.push_back(w);
      if (IsGlobalValueFlag(w) && i + 1 < args.size()) r.rest.push_back(args[++i]);
      continue;
    }
    if (r.path.empty() && !r.help_topic && w == "help") {
      r.help_topic = true;
      continue;
    }
    r.path += (r.path.empty() ? "" : " ") + w;
    if (r.help_topic) continue;
    r.cmd = FindCommand(r.path);
    if (r.cmd == nullptr && !IsGroup(r.path)) {
      return Status::InvalidArgument("unknown command '" + r.path + "'");
    }
  }
  return r;
}

// Applies the global flags to ctx; returns kExitOk or a usage error's exit code.
int ApplyGlobalFlags(Ctx& ctx, const ParsedArgs& a, const Environment& env) {
  // Flag, then environment, then the settings file (`gpupoolctl login`), then the default.
  ctx.config_path = env.config_path;
  ctx.channels = env.channels;
  Result<ClientConfig> saved = LoadClientConfig(env.config_path);
  if (!saved.ok()) return ctx.Usage(saved.status().message());
  auto pick = [](const std::string& env_value, const std::string& file_value) {
    return env_value.empty() ? file_value : env_value;
  };
  ctx.server = a.Get("server", pick(env.server, saved->server));
  if (ctx.server.empty()) ctx.server = kDefaultServer;
  ctx.token = a.Get("token", pick(env.token, saved->token));
  if (const std::string ca = a.Get("ca", pick(env.ca, saved->ca)); !ca.empty()) {
    Result<std::string> pem = ReadTextFile(ca);
    if (!pem.ok()) return ctx.Usage("--ca: " + pem.status().message());
    ctx.ca_pem = std::move(pem).value();
    ctx.ca_path = ca;
  }
  if (auto o = a.Find("output")) {
    Result<OutputFormat> f = ParseOutputFormat(*o);
    if (!f.ok()) return ctx.Usage(f.status().message());
    ctx.format = *f;
  }
  if (auto t = a.Find("timeout")) {
    Result<int64_t> ms = ParseDurationMs(*t);
    if (!ms.ok()) return ctx.Usage("--timeout: " + ms.status().message());
    ctx.timeout_ms = *ms;
    ctx.timeout_set = true;
  }
  return kExitOk;
}

int CheckArguments(const Ctx& ctx, const Command& cmd, const ParsedArgs& a) {
  if (a.positional.size() < cmd.min_args) {
    return ctx.Usage("missing argument: expected " + cmd.args_usage);
  }
  if (a.positional.size() > cmd.max_args) {
    return ctx.Usage("unexpected argument '" + a.positional[cmd.max_args] + "'");
  }
  // The commands whose task template's command line follows "--".
  const bool takes_command = cmd.path == "jobs submit" || cmd.path == "services create" ||
                             cmd.path == "services update" || cmd.path == "services apply";
  if (a.saw_dash_dash && !takes_command) {
    return ctx.Usage(
        "'--' is only used by 'jobs submit' and 'services create|update|apply' (the command "
        "follows it)");
  }
  return kExitOk;
}

}  // namespace

std::string CommandPathOf(const std::vector<std::string>& args) {
  Result<Resolved> r = Resolve(args);
  return r.ok() && r->cmd != nullptr && !r->help_topic ? r->path : "";
}

int Run(const std::vector<std::string>& args, const Environment& env, std::ostream& out,
        std::ostream& err, std::shared_ptr<grpc::Channel>* keep_channel) {
  Ctx ctx(out, err);
  Result<Resolved> resolved = Resolve(args);
  if (!resolved.ok()) return ctx.Usage(resolved.status().message());
  const Resolved& r = *resolved;
  if (r.help_topic) {
    if (!PrintHelpTopic(out, r.path)) return ctx.Usage("unknown help topic '" + r.path + "'");
    return kExitOk;
  }

  std::vector<FlagSpec> specs = GlobalFlags();
  if (r.cmd != nullptr) specs.insert(specs.end(), r.cmd->flags.begin(), r.cmd->flags.end());
  ctx.command_path = r.path;
  Result<ParsedArgs> parsed = ParseFlags(specs, r.rest);
  const bool want_help = parsed.ok() && parsed->GetBool("help");
  if (r.cmd == nullptr) {  // the top level or a group: list what is there
    PrintHelpTopic(want_help ? out : err, r.path);
    return want_help ? kExitOk : kExitUsage;
  }
  if (!parsed.ok()) return ctx.Usage(parsed.status().message());
  if (want_help) {
    PrintCommandHelp(out, *r.cmd);
    return kExitOk;
  }
  if (int code = ApplyGlobalFlags(ctx, *parsed, env); code != kExitOk) return code;
  if (int code = CheckArguments(ctx, *r.cmd, *parsed); code != kExitOk) return code;
  int code = r.cmd->run(ctx, *parsed);
  // A standby's NotLeader: again, on the channel to the leader it named (Ctx::Fail).
  for (auto pause = ctx.TakeRetry(); pause; pause = ctx.TakeRetry()) {
    std::this_thread::sleep_for(*pause);
    code = r.cmd->run(ctx, *parsed);
  }
  if (keep_channel != nullptr) *keep_channel = ctx.channel_if_open();
  return code;
}

}  // namespace gpupool::ctl
