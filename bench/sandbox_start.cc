// sandbox_start: what the task sandbox adds to running one task on a node. Runs --tasks
// `/bin/true` tasks through a TaskRunner without and with the sandbox — every sandboxed task a
// container under runc (the one sandbox path: uid, host-root skeleton, bundle, cgroups, device
// rules, namespaces, seccomp, the shim) — alternating one of each so both see the same machine
// load, and times Start() (an unconfined task has exec'd when it returns; a container has only
// been accepted, its preparation runs on its own thread) and start → end. Needs root, runc,
// skopeo and umoci for the sandboxed half; --shim names gpupool-oci-shim (default: beside the
// agent in the build tree). Prints p50/p99 per mode; --json FILE writes them.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "agent/images.h"
#include "agent/sandbox/sandbox.h"
#include "agent/task_runner.h"
#include "base/log.h"

namespace {

using namespace gpupool::agent;
using Clock = std::chrono::steady_clock;

double Pct(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v.empty()
             ? 0
             : v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

}  // namespace

int main(int argc, char** argv) {
  int tasks = 200;
  std::string json, shim;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--tasks" && i + 1 < argc) {
      tasks = std::stoi(argv[++i]);
    } else if (a == "--shim" && i + 1 < argc) {
      shim = argv[++i];
    } else if (a == "--json" && i + 1 < argc) {
      json = argv[++i];
    } else {
      std::printf("usage: sandbox_start [--tasks N] [--shim PATH] [--json FILE]\n");
      return a == "--help" ? 0 : 2;
    }
  }
  gpupool::SetLogLevel(gpupool::LogLevel::kWarn);
  char tmpl[] = "/tmp/gpupool-sandbox-start-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  sandbox::SandboxOptions so;
  so.enabled = true;
  so.cgroup_parent = "gpupool-bench-" + std::to_string(getpid());
  so.uid_pool_first = 65000;
  so.uid_pool_count = 100;
  auto box = sandbox::Sandbox::Create(so);
  if (!box.ok()) {
    std::fprintf(stderr, "%s\n", box.status().ToString().c_str());
    return 1;
  }
  ImageOptions io;
  io.shim = shim.empty() ? DefaultShim(argv[0]) : shim;
  auto containers = OpenContainers(io, *box, dir + "/boxed", argv[0]);
  if (!containers.ok()) {
    std::fprintf(stderr, "%s\n", containers.status().ToString().c_str());
    return 1;
  }
  std::mutex mu;
  std::condition_variable cv;
  std::map<std::string, Clock::time_point> ended;
  auto make = [&](const std::string& sub, std::shared_ptr<sandbox::Sandbox> sb) {
    TaskRunnerOptions o;
    o.data_dir = dir + "/" + sub;
    if (sb) o.containers = *containers;
    o.sandbox = std::move(sb);
    auto r = std::make_unique<TaskRunner>(o);
    r->SetListener("bench", [&](const TaskStatus& st) {
      std::lock_guard lock(mu);
      ended[st.task_id] = Clock::now();
      cv.notify_all();
    });
    return r;
  };
  auto plain = make("plain", nullptr);
  auto boxed = make("boxed", *box);
  std::map<std::string, std::vector<double>> start_ms, total_ms;
  for (int i = 0; i < tasks * 2; ++i) {
    const bool sandboxed = i % 2 == 1;
    TaskSpec s;
    s.owner = "bench";
    s.task_id = "t" + std::to_string(i);
    s.tenant = "bench";
    s.attempt = 1;
    s.argv = {"/bin/true"};
    s.cpu_milli = 1000;
    s.memory_mib = 512;
    const auto t0 = Clock::now();
    auto st = (sandboxed ? boxed : plain)->Start(s);
    const auto t1 = Clock::now();
    if (!st.ok() || st->phase == TaskPhase::kFailed) {
      std::fprintf(stderr, "start failed: %s\n",
                   st.ok() ? st->reason.c_str() : st.status().ToString().c_str());
      return 1;
    }
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return ended.count(s.task_id) > 0; });
    const char* mode = sandboxed ? "sandbox" : "plain";
    start_ms[mode].push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    total_ms[mode].push_back(
        std::chrono::duration<double, std::milli>(ended[s.task_id] - t0).count());
  }
  plain.reset();
  boxed.reset();
  std::printf("%-8s %6s %14s %14s %14s %14s\n", "mode", "tasks", "start p50 ms", "start p99 ms",
              "to end p50 ms", "to end p99 ms");
  std::string out = "{\"benchmark\":\"sandbox_start\"";
  for (const char* mode : {"plain", "sandbox"}) {
    std::printf("%-8s %6d %14.2f %14.2f %14.2f %14.2f\n", mode, tasks, Pct(start_ms[mode], 0.5),
                Pct(start_ms[mode], 0.99), Pct(total_ms[mode], 0.5), Pct(total_ms[mode], 0.99));
    out += std::string(",\"") + mode +
           "\":{\"start_p50_ms\":" + std::to_string(Pct(start_ms[mode], 0.5)) +
           ",\"start_p99_ms\":" + std::to_string(Pct(start_ms[mode], 0.99)) +
           ",\"end_p50_ms\":" + std::to_string(Pct(total_ms[mode], 0.5)) +
           ",\"end_p99_ms\":" + std::to_string(Pct(total_ms[mode], 0.99)) + "}";
  }
  if (!json.empty()) std::ofstream(json) << out << "}\n";
  for (const auto& [c, mount] : (*box)->layout().v1)
    rmdir((mount + "/" + so.cgroup_parent).c_str());
  std::filesystem::remove_all(dir);
  return 0;
}
