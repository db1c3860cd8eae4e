// cli_latency: what one gpupoolctl invocation costs a script that calls it in a loop.
//
// Starts gpupoold (embedded PostgreSQL, fsync on) with a pool and no agents, then times --runs
// invocations, one after another, of: /bin/true (the floor: fork, exec, wait), `gpupoolctl
// --help` (start-up alone), `gpupoolctl jobs get 1` (start-up + channel + one read RPC) and
// `gpupoolctl jobs submit …` (the same + a durable commit in PostgreSQL). Wall time from spawn to
// exit, as a shell sees it. --ctl PATH times another gpupoolctl build (e.g. one linked shared).
// The daemon runs in its secure default: TLS with its own CA, and every call carries a member API
// key of the submitting tenant (made with the admin token, as an operator would) — what a user's
// script pays. --insecure measures a plaintext daemon without credentials instead.
// --session also starts a session helper (`gpupoolctl session start`, under a private
// XDG_RUNTIME_DIR) and times every command twice in the same run: direct (GPUPOOL_SESSION=off:
// the thin front runs gpupoolctl-full) and through the helper.
// Prints p50/p99 per command; --json FILE writes them.
#include <fcntl.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "tests/support/daemon_process.h"

extern char** environ;

namespace gpupool {
namespace {

using testing::DaemonProcess;

// Spawns argv with stdout and stderr to /dev/null; returns the wall time in ms, or -1 on failure.
double TimeRun(const std::vector<std::string>& argv) {
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  const auto start = std::chrono::steady_clock::now();
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, args[0], &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) return -1;
  int status = 0;
  waitpid(pid, &status, 0);
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? ms : -1;
}

struct Row {
  std::string name;
  double p50 = 0, p99 = 0;
};

int Run(int argc, char** argv) {
  int runs = 200;
  bool secure = true, use_session = false;
  std::string json, ctl = testing::BinaryPath("gpupoolctl");
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--runs") {
      runs = std::max(1, std::stoi(value()));
    } else if (a == "--json") {
      json = value();
    } else if (a == "--ctl") {
      ctl = value();
    } else if (a == "--insecure") {
      secure = false;
    } else if (a == "--session") {
      use_session = true;
    } else {
      std::printf(
          "usage: cli_latency [--runs N] [--ctl PATH] [--insecure] [--session] [--json FILE]\n");
      return a == "--help" ? 0 : 2;
    }
  }
  DaemonProcess::Options options;
  options.secure = secure;
  // Submissions unlimited: through a session they outrun the default per-tenant rate limit
  // (50/s, burst 100), an operator's policy rather than the system's speed.
  Result<std::string> config_dir = testing::MakeTempDir("gpupool-cli-latency");
  if (!config_dir.ok()) return 1;
  std::ofstream(*config_dir + "/gpupoold.yaml")
      << "tenant_defaults:\n  submit_rate_per_second: 0\n";
  options.extra_args = {"--config", *config_dir + "/gpupoold.yaml"};
  auto started = DaemonProcess::Start(options);
  if (!started.ok()) {
    std::fprintf(stderr, "cannot start gpupoold: %s\n", started.status().ToString().c_str());
    return 1;
  }
  std::unique_ptr<DaemonProcess> daemon = std::move(started).value();
  const std::string server = daemon->grpc_address();
  // The admin's flags (set-up) and the user's (what is timed).
  std::vector<std::string> admin = {ctl, "--server", server}, user = admin;
  if (secure) {
    admin.insert(admin.end(), {"--ca", daemon->ca_path(), "--token", daemon->admin_token()});
    user.insert(user.end(), {"--ca", daemon->ca_path()});
  }
  auto with = [](std::vector<std::string> base, const std::vector<std::string>& more) {
    base.insert(base.end(), more.begin(), more.end());
    return base;
  };
  if (TimeRun(with(admin, {"pools", "create", "bench"})) < 0 ||
      (secure && TimeRun(with(admin, {"tenants", "create", "acme"})) < 0)) {
    std::fprintf(stderr, "cannot create the pool or the tenant with %s\n", ctl.c_str());
    return 1;
  }
  if (secure) {  // a member key of the tenant: the credential a user's script holds
    const std::string out = daemon->data_dir() + "/bench-key.txt";
    std::string cmd;
    for (const std::string& a : with(admin, {"-o", "json", "keys", "create", "--name", "bench",
                                             "--tenant", "acme", "--role", "member"}))
      cmd += "'" + a + "' ";
    if (std::system((cmd + "> '" + out + "'").c_str()) != 0) {
      std::fprintf(stderr, "cannot create an API key\n");
      return 1;
    }
    std::ifstream in(out);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const size_t at = text.find("gpk_");
    if (at == std::string::npos) {
      std::fprintf(stderr, "no API key in: %s\n", text.c_str());
      return 1;
    }
    user.insert(user.end(), {"--token", text.substr(at, text.find('"', at) - at)});
  }
  const std::vector<std::pair<std::string, std::vector<std::string>>> commands = {
      {"/bin/true", {"/bin/true"}},
      {"gpupoolctl --help", {ctl, "--help"}},
      {"gpupoolctl jobs get", with(user, {"jobs", "get", "1"})},
      {"gpupoolctl jobs submit",
       with(user, {"jobs", "submit", "--tenant", "acme/bench/u", "--pool", "bench", "--tflops", "1",
                   "--vram", "1GiB", "--", "/bin/true"})},
  };
  // The first submission creates job 1, which `jobs get` then reads.
  ::setenv("GPUPOOL_SESSION", "off", 1);
  TimeRun(commands[3].second);
  if (use_session) {  // a helper of this run only, in a private runtime directory
    const std::string runtime = daemon->data_dir() + "/runtime";
    ::mkdir(runtime.c_str(), 0700);
    ::setenv("XDG_RUNTIME_DIR", runtime.c_str(), 1);
    if (TimeRun({ctl, "session", "start"}) < 0) {
      std::fprintf(stderr, "cannot start a session helper with %s\n", ctl.c_str());
      return 1;
    }
  }
  std::vector<Row> rows;
  std::printf("%-34s %10s %10s   (%d runs each, %s, %s)\n", "command", "p50 ms", "p99 ms", runs,
              ctl.c_str(), secure ? "TLS + API key" : "insecure");
  for (const auto& [name, cmd] : commands) {
    for (const bool through_session : {false, true}) {
      if (through_session && !use_session) continue;
      ::setenv("GPUPOOL_SESSION", through_session ? "on" : "off", 1);
      std::vector<double> ms;
      for (int i = 0; i < runs; ++i) {
        const double t = TimeRun(cmd);
        if (t < 0) {
          std::fprintf(stderr, "%s failed\n", name.c_str());
          return 1;
        }
        ms.push_back(t);
      }
      std::sort(ms.begin(), ms.end());
      Row r{name + (use_session ? (through_session ? " (session)" : " (direct)") : ""),
            ms[ms.size() / 2], ms[std::min(ms.size() - 1, ms.size() * 99 / 100)]};
      std::printf("%-34s %10.2f %10.2f\n", r.name.c_str(), r.p50, r.p99);
      rows.push_back(r);
    }
  }
  if (use_session) TimeRun({ctl, "session", "stop"});
  if (!json.empty()) {
    std::ofstream out(json);
    out << "{\"runs\": " << runs << ", \"secure\": " << (secure ? "true" : "false")
        << ", \"ctl\": \"" << ctl << "\", \"commands\": [";
    for (size_t i = 0; i < rows.size(); ++i) {
      out << (i ? ", " : "") << "{\"command\": \"" << rows[i].name
          << "\", \"p50_ms\": " << rows[i].p50 << ", \"p99_ms\": " << rows[i].p99 << "}";
    }
    out << "]}\n";
  }
  return 0;
}

}  // namespace
}  // namespace gpupool

int main(int argc, char** argv) { return gpupool::Run(argc, argv); }
