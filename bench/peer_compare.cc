// peer_compare: gpupool beside Slurm on the same machine and the same shape of work, phase by
// phase, in one run (issue 31, "Peer comparisons in the project").
//
// gpupool: gpupoold in its secure default (TLS, embedded PostgreSQL with fsync on) and --nodes
// simulated gpupool-agent processes of 8 GPUs each; the CLI carries a tenant member's API key.
// Slurm (Debian's slurm-wlm): slurmctld and --nodes slurmd on loopback (one slurmd per node
// name, each with 8 CPUs, so 8 one-CPU jobs run on a node at once as 8 one-GPU tasks do), munge
// on a socket of its own, state under a temp dir, no accounting. Neither confines its tasks
// (gpupool's sandbox off, Slurm's task/none and proctrack/pgid): the same work on both. Slurm
// runs with its default scheduler parameters (--slurm-scheduler-params sets others); gpupool's
// per-tenant submission rate limit is off, as Slurm has none by default.
//
// Every job is one task that runs `/bin/sh -c 'date +%s%N > FILE'`: the file says when it
// started, on the same clock as the bench. The phases:
//   ack        --ack-runs CLI submissions one at a time, --gap-ms apart: the wall time of
//              `gpupoolctl jobs submit` against `sbatch` (the acknowledgement a user waits for),
//              and submit → start from the task's file (spin-up on an idle system);
//   cli-seq    --jobs submissions by the CLI back to back, throughput until all started;
//   cli-par    the same from --parallel concurrent CLI loops;
//   burst      the same through each one's fastest client: gpupool's gRPC API with --parallel
//              calls in flight; for Slurm, which has no other client here, sbatch from --parallel
//              processes;
//   array      one job of --jobs tasks (`--tasks N` / `sbatch --array`);
//   floor      the machine's own spawn rate: the task's command started --jobs times directly,
//              --parallel at once (what no scheduler can beat).
// Each phase waits for the previous one's tasks to end and prints the 1-minute load average at
// its end. Needs root (slurmd) and slurm-wlm; --no-slurm measures gpupool alone.
#include <fcntl.h>
#include <google/protobuf/util/time_util.h>
#include <grpcpp/grpcpp.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <thread>

#include "gpupool/v1/jobs.grpc.pb.h"
#include "gpupool/v1/pools.grpc.pb.h"
#include "tests/support/daemon_process.h"

extern char** environ;

namespace gpupool {
namespace {

using testing::ChildProcess;
using testing::DaemonProcess;
using Clock = std::chrono::system_clock;

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}

double LoadAverage() {
  std::ifstream in("/proc/loadavg");
  double one = 0;
  in >> one;
  return one;
}

// Runs argv (stdout and stderr to /dev/null, or stdout to `out_path`); the exit status, -1 when
// it could not start.
int RunQuiet(const std::vector<std::string>& argv, const std::string& out_path = "/dev/null") {
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, args[0], &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) return -1;
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

size_t CountFiles(const std::string& dir) {
  std::error_code ec;
  size_t n = 0;
  for (auto it = std::filesystem::directory_iterator(dir, ec);
       !ec && it != std::filesystem::directory_iterator(); ++it) {
    ++n;
  }
  return n;
}

// Waits until `dir` holds `want` files (each task writes one when it starts); false on timeout.
bool WaitForFiles(const std::string& dir, size_t want, std::chrono::seconds timeout) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (CountFiles(dir) < want) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

// The latest start stamped in `dir` (ns since the epoch).
int64_t LastStart(const std::string& dir) {
  int64_t last = 0;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    const std::string text = ReadFile(e.path().string());
    if (!text.empty()) last = std::max<int64_t>(last, std::stoll(text));
  }
  return last;
}

// The task every job runs: it stamps its start in a new file of `dir`.
std::string TaskScript(const std::string& dir) { return "date +%s%N > $(mktemp -p " + dir + ")"; }

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

// Runs `n` calls of `one(i)` from `parallel` threads.
void InParallel(int n, int parallel, const std::function<void(int)>& one) {
  std::atomic<int> next{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < parallel; ++t) {
    threads.emplace_back([&] {
      for (int i; (i = next.fetch_add(1)) < n;) one(i);
    });
  }
  for (auto& t : threads) t.join();
}

// One system under test: how to submit, and what is left running.
struct System {
  std::string name;
  std::function<int(const std::string& script)> cli_submit;         // exit status
  std::function<bool(const std::string& script)> api_submit;        // fastest client
  std::function<bool(const std::string& script, int tasks)> array;  // one job of `tasks`
  std::function<bool(std::chrono::seconds timeout)> wait_idle;      // nothing queued/running
};

struct PhaseResult {
  double value = 0;  // jobs/s, or ms for ack
  double p99 = 0;    // ack, spin-up
  double load = 0;
  bool ok = true;
};

// The absolute path of a program in the usual directories ("" when missing): ChildProcess does
// not search PATH.
std::string Which(const std::string& program) {
  for (const char* dir : {"/usr/sbin/", "/usr/bin/", "/sbin/", "/bin/"}) {
    if (access((dir + program).c_str(), X_OK) == 0) return dir + program;
  }
  return "";
}

// Starts munged, slurmctld and `nodes` slurmd under `dir`; the environment then names its config.
Result<std::vector<std::unique_ptr<ChildProcess>>> StartSlurm(const std::string& dir, int nodes,
                                                              const std::string& scheduler_params) {
  std::vector<std::unique_ptr<ChildProcess>> children;
  for (const char* program : {"munged", "slurmctld", "slurmd", "sbatch", "sinfo", "squeue"}) {
    if (Which(program).empty()) {
      return Status::NotFound(std::string(program) +
                              " not found: install slurm-wlm (apt-get install slurm-wlm), or pass "
                              "--no-slurm");
    }
  }
  for (const char* sub : {"state", "log", "spool"})
    std::filesystem::create_directories(dir + "/" + sub);
  const std::string conf = dir + "/slurm.conf";
  const int base = 17000 + static_cast<int>(getpid() % 1000) * 10;
  std::ofstream(conf)
      << "ClusterName=gpbench\nSlurmctldHost=localhost\nSlurmctldPort=" << base
      << "\nSlurmdPort=" << base + 1 << "\nSlurmUser=root\nSlurmdUser=root\n"
      << "AuthType=auth/munge\nAuthInfo=socket=" << dir << "/munge.sock\nCredType=cred/munge\n"
      << "StateSaveLocation=" << dir << "/state\nSlurmdSpoolDir=" << dir << "/spool/%n\n"
      << "SlurmctldPidFile=" << dir << "/slurmctld.pid\nSlurmdPidFile=" << dir
      << "/slurmd-%n.pid\nSlurmctldLogFile=" << dir << "/log/slurmctld.log\nSlurmdLogFile=" << dir
      << "/log/slurmd-%n.log\nProctrackType=proctrack/pgid\nTaskPlugin=task/none\n"
      << "SelectType=select/cons_tres\nSelectTypeParameters=CR_Core\nSchedulerType=sched/backfill\n"
      << "ReturnToService=2\nMpiDefault=none\nJobCompType=jobcomp/none\n"
      // 8 CPUs a node on any machine: the configured counts, not the hardware's.
      << "SlurmdParameters=config_overrides\n"
      << "AccountingStorageType=accounting_storage/none\nMaxJobCount=100000\n"
      << (scheduler_params.empty() ? "" : "SchedulerParameters=" + scheduler_params + "\n")
      << "NodeName=n[1-" << nodes << "] NodeHostname=localhost Port=[" << base + 2 << "-"
      << base + 1 + nodes << "] CPUs=8 RealMemory=1000 State=UNKNOWN\n"
      << "PartitionName=bench Nodes=n[1-" << nodes << "] Default=YES MaxTime=INFINITE State=UP\n";
  setenv("SLURM_CONF", conf.c_str(), 1);
  auto spawn = [&](std::vector<std::string> argv, const std::string& log) -> Status {
    argv[0] = Which(argv[0]);
    auto child = ChildProcess::Spawn(argv, dir + "/log/" + log);
    if (!child.ok()) return child.status();
    children.push_back(std::move(child).value());
    return Status::Ok();
  };
  GPUPOOL_RETURN_IF_ERROR(
      spawn({"munged", "--foreground", "--force", "-S", dir + "/munge.sock",
             "--key-file=/etc/munge/munge.key", "--pid-file=" + dir + "/munged.pid",
             "--log-file=" + dir + "/log/munged.log", "--seed-file=" + dir + "/munge.seed"},
            "munged.out"));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  GPUPOOL_RETURN_IF_ERROR(spawn({"slurmctld", "-D", "-i", "-f", conf}, "slurmctld.out"));
  for (int n = 1; n <= nodes; ++n) {
    std::filesystem::create_directories(dir + "/spool/n" + std::to_string(n));
    GPUPOOL_RETURN_IF_ERROR(
        spawn({"slurmd", "-D", "-f", conf, "-N", "n" + std::to_string(n)}, "slurmd.out"));
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline) {
    RunQuiet({"sinfo", "-h", "-t", "idle", "-o", "%D"}, dir + "/idle.txt");
    const std::string idle = ReadFile(dir + "/idle.txt");
    if (!idle.empty() && std::atoi(idle.c_str()) == nodes) return children;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return Status::Unavailable("slurm's nodes did not come up within 30 s; see " + dir + "/log");
}

// A directory removed when the run ends, whichever way it ends; empty: nothing to remove.
struct RemovedAtExit {
  std::string path;
  ~RemovedAtExit() {
    std::error_code ec;
    if (!path.empty()) std::filesystem::remove_all(path, ec);
  }
};

int Run(int argc, char** argv) {
  int nodes = 4, jobs = 200, ack_runs = 50, parallel = 8, gap_ms = 50;
  bool slurm = true;
  std::string slurm_params;  // SchedulerParameters; empty: Slurm's defaults
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() { return i + 1 < argc ? std::atoi(argv[++i]) : 0; };
    if (a == "--nodes") {
      nodes = value();
    } else if (a == "--jobs") {
      jobs = value();
    } else if (a == "--ack-runs") {
      ack_runs = value();
    } else if (a == "--parallel") {
      parallel = value();
    } else if (a == "--gap-ms") {
      gap_ms = value();
    } else if (a == "--slurm-scheduler-params" && i + 1 < argc) {
      slurm_params = argv[++i];
    } else if (a == "--no-slurm") {
      slurm = false;
    } else {
      std::printf(
          "usage: peer_compare [--nodes 4] [--jobs 200] [--ack-runs 50] [--parallel 8] "
          "[--gap-ms 50] [--slurm-scheduler-params P] [--no-slurm]\n"
          "gpupool (secure default, simulated 8-GPU agents) beside Slurm (slurm-wlm on loopback, "
          "8-CPU nodes) on the same one-task jobs; prints each phase for both (needs root and "
          "slurm-wlm for Slurm's side). --slurm-scheduler-params: Slurm's SchedulerParameters "
          "(default: none, Slurm's defaults), e.g. batch_sched_delay=0,sched_min_interval=0.\n");
      return a == "--help" ? 0 : 2;
    }
  }
  if (nodes < 1 || jobs < 1 || ack_runs < 1 || parallel < 1) {
    std::fprintf(stderr, "--nodes, --jobs, --ack-runs and --parallel must be at least 1\n");
    return 2;
  }

  // gpupool.
  DaemonProcess::Options options;
  options.secure = true;
  // Submissions unlimited, as Slurm's are by default: the per-tenant rate limit (50/s, burst 100)
  // is an operator's policy, not the system's speed.
  const std::string config_dir = *testing::MakeTempDir("gpupool-peer-config");
  const RemovedAtExit config_guard{config_dir};
  std::ofstream(config_dir + "/gpupoold.yaml") << "tenant_defaults:\n  submit_rate_per_second: 0\n";
  options.extra_args = {"--config", config_dir + "/gpupoold.yaml"};
  auto started = DaemonProcess::Start(options);
  if (!started.ok()) {
    std::fprintf(stderr, "cannot start gpupoold: %s\n", started.status().ToString().c_str());
    return 1;
  }
  DaemonProcess& daemon = **started;
  const std::string work = daemon.data_dir() + "/peer";
  std::filesystem::create_directories(work);
  const std::string ctl = testing::BinaryPath("gpupoolctl");
  std::vector<std::string> admin = {
      ctl,       "--server",          daemon.grpc_address(), "--ca", daemon.ca_path(),
      "--token", daemon.admin_token()};
  auto with = [](std::vector<std::string> base, const std::vector<std::string>& more) {
    base.insert(base.end(), more.begin(), more.end());
    return base;
  };
  if (RunQuiet(with(admin, {"pools", "create", "bench", "--strategy", "first-fit"})) != 0 ||
      RunQuiet(with(admin, {"tenants", "create", "acme"})) != 0 ||
      RunQuiet(with(admin, {"-o", "json", "keys", "create", "--name", "bench", "--tenant", "acme",
                            "--role", "member"}),
               work + "/key.json") != 0) {
    std::fprintf(stderr, "cannot create the pool, the tenant or its key\n");
    return 1;
  }
  const std::string key_text = ReadFile(work + "/key.json");
  const size_t at = key_text.find("gpk_");
  if (at == std::string::npos) {
    std::fprintf(stderr, "no API key in: %s\n", key_text.c_str());
    return 1;
  }
  const std::string key = key_text.substr(at, key_text.find('"', at) - at);
  const std::vector<std::string> user = {
      ctl, "--server", daemon.grpc_address(), "--ca", daemon.ca_path(), "--token", key};
  std::vector<std::unique_ptr<ChildProcess>> agents;
  for (int i = 0; i < nodes; ++i) {
    const std::string node = "peer-" + std::to_string(i);
    const std::string dir = daemon.data_dir() + "/" + node;
    std::ofstream(dir + ".yaml") << "node_name: " << node
                                 << "\npool: bench\ncpu_milli: 64000\nmemory_mib: 262144\n"
                                    "backend: simulated\nheartbeat_interval_ms: 500\ngpus:\n"
                                    "  - model: H100-SXM\n    count: 8\ntopology: nvlink-all\n"
                                 << "token_file: " << daemon.node_token_path()
                                 << "\nca_file: " << daemon.ca_path() << "\n";
    auto child = ChildProcess::Spawn(
        {testing::BinaryPath("gpupool-agent"), "--config", dir + ".yaml", "--scheduler",
         daemon.grpc_address(), "--data-dir", dir, "--log-level", "warn"},
        dir + ".log");
    if (!child.ok()) return 1;
    agents.push_back(std::move(child).value());
  }
  auto channel = grpc::CreateChannel(
      daemon.grpc_address(),
      grpc::CompositeChannelCredentials(grpc::SslCredentials({daemon.ca_pem(), "", ""}),
                                        grpc::AccessTokenCredentials(key)));
  auto jobs_stub = v1::JobService::NewStub(channel);
  auto nodes_stub = v1::NodeService::NewStub(daemon.AdminChannel());
  bool registered = false;
  for (int i = 0; i < 300 && !registered; ++i) {
    grpc::ClientContext ctx;
    v1::ListNodesResponse resp;
    registered = nodes_stub->ListNodes(&ctx, v1::ListNodesRequest{}, &resp).ok() &&
                 resp.nodes_size() == nodes;
    if (!registered) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (!registered) {
    std::fprintf(stderr, "the agents did not register within 30 s (%s)\n",
                 (daemon.data_dir() + "/peer-0.log").c_str());
    return 1;
  }
  auto submit_request = [](const std::string& script, int tasks) {
    v1::SubmitJobRequest req;
    v1::JobSpec* s = req.mutable_spec();
    s->set_tenant("acme/bench/u");
    s->set_pool("bench");
    s->set_task_count(tasks);
    for (const char* a : {"/bin/sh", "-c"}) s->mutable_template_()->add_command(a);
    s->mutable_template_()->add_command(script);
    s->mutable_template_()->mutable_resources()->mutable_whole_gpus()->set_count(1);
    return req;
  };
  System gp;
  gp.name = "gpupool";
  gp.cli_submit = [&](const std::string& script) {
    return RunQuiet(with(user, {"jobs", "submit", "--tenant", "acme/bench/u", "--pool", "bench",
                                "--gpus", "1", "--", "/bin/sh", "-c", script}));
  };
  std::atomic<bool> told{false};
  auto refused = [&](const grpc::Status& st) {
    if (!st.ok() && !told.exchange(true)) {
      std::fprintf(stderr, "gpupool refused a submission: %s\n", st.error_message().c_str());
    }
    return st.ok();
  };
  gp.api_submit = [&](const std::string& script) {
    grpc::ClientContext ctx;
    v1::SubmitJobResponse resp;
    return refused(jobs_stub->SubmitJob(&ctx, submit_request(script, 1), &resp));
  };
  gp.array = [&](const std::string& script, int tasks) {
    grpc::ClientContext ctx;
    v1::SubmitJobResponse resp;
    return refused(jobs_stub->SubmitJob(&ctx, submit_request(script, tasks), &resp));
  };
  gp.wait_idle = [&](std::chrono::seconds timeout) {
    const auto end = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < end) {
      grpc::ClientContext ctx;
      v1::ListNodesResponse resp;
      int busy = 0;
      if (nodes_stub->ListNodes(&ctx, v1::ListNodesRequest{}, &resp).ok()) {
        for (const v1::Node& n : resp.nodes()) busy += n.running_tasks();
        if (busy == 0) return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  };

  // Slurm.
  RemovedAtExit slurm_guard;  // set once Slurm is up; outlives its processes (declared first)
  std::vector<std::unique_ptr<ChildProcess>> slurm_children;
  System sl;
  sl.name = "slurm";
  if (slurm) {
    // Its own directory, kept when Slurm does not come up (its logs say why).
    auto slurm_dir = testing::MakeTempDir("gpupool-peer-slurm");
    if (!slurm_dir.ok()) return 1;
    auto s = StartSlurm(*slurm_dir, nodes, slurm_params);
    if (!s.ok()) {
      std::fprintf(stderr, "cannot start slurm: %s\n", s.status().ToString().c_str());
      return 1;
    }
    slurm_children = std::move(s).value();
    slurm_guard.path = *slurm_dir;
    sl.cli_submit = [](const std::string& script) {
      return RunQuiet(
          {"sbatch", "-Q", "-p", "bench", "-o", "/dev/null", "-e", "/dev/null", "--wrap", script});
    };
    sl.api_submit = [&](const std::string& script) { return sl.cli_submit(script) == 0; };
    sl.array = [](const std::string& script, int tasks) {
      return RunQuiet({"sbatch", "-Q", "-p", "bench", "-o", "/dev/null", "-e", "/dev/null",
                       "--array=0-" + std::to_string(tasks - 1), "--wrap", script}) == 0;
    };
    sl.wait_idle = [&](std::chrono::seconds timeout) {
      const auto end = std::chrono::steady_clock::now() + timeout;
      while (std::chrono::steady_clock::now() < end) {
        RunQuiet({"squeue", "-h", "-o", "%i"}, work + "/squeue.txt");
        if (ReadFile(work + "/squeue.txt").empty()) return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
      return false;
    };
  }

  std::vector<System*> systems = {&gp};
  if (slurm) systems.push_back(&sl);
  std::map<std::string, std::map<std::string, PhaseResult>> results;  // phase → system → result
  int phase_no = 0;
  auto dir_for = [&](const std::string& phase, const std::string& system) {
    const std::string d = work + "/" + std::to_string(++phase_no) + "-" + phase + "-" + system;
    std::filesystem::create_directories(d);
    std::filesystem::permissions(d, std::filesystem::perms::all);
    return d;
  };
  const auto timeout = std::chrono::seconds(120 + jobs);
  auto throughput = [&](const std::string& phase, System& sys,
                        const std::function<bool(const std::string& script)>& submit_all) {
    sys.wait_idle(std::chrono::seconds(120));
    std::fprintf(stderr, "%s: %s\n", sys.name.c_str(), phase.c_str());
    const std::string d = dir_for(phase, sys.name);
    const int64_t start = NowNs();
    PhaseResult r;
    r.ok = submit_all(TaskScript(d)) && WaitForFiles(d, static_cast<size_t>(jobs), timeout);
    r.value = static_cast<double>(jobs) / (static_cast<double>(LastStart(d) - start) / 1e9);
    r.load = LoadAverage();
    results[phase][sys.name] = r;
  };

  for (System* sys : systems) {
    // ack and spin-up, one submission at a time on an idle system.
    sys->wait_idle(std::chrono::seconds(120));
    std::fprintf(stderr, "%s: ack and spin-up\n", sys->name.c_str());
    std::vector<double> ack_ms, spin_ms;
    bool ok = true;
    for (int i = 0; i < ack_runs && ok; ++i) {
      const std::string d = dir_for("ack", sys->name);
      const int64_t t0 = NowNs();
      ok = sys->cli_submit(TaskScript(d)) == 0;
      ack_ms.push_back(static_cast<double>(NowNs() - t0) / 1e6);
      ok = ok && WaitForFiles(d, 1, std::chrono::seconds(60));
      spin_ms.push_back(static_cast<double>(LastStart(d) - t0) / 1e6);
      std::this_thread::sleep_for(std::chrono::milliseconds(gap_ms));
    }
    results["ack"][sys->name] = {Percentile(ack_ms, 0.5), Percentile(ack_ms, 0.99), LoadAverage(),
                                 ok};
    results["spin-up"][sys->name] = {Percentile(spin_ms, 0.5), Percentile(spin_ms, 0.99),
                                     LoadAverage(), ok};
    throughput("cli-seq", *sys, [&](const std::string& script) {
      for (int i = 0; i < jobs; ++i) {
        if (sys->cli_submit(script) != 0) return false;
      }
      return true;
    });
    throughput("cli-par", *sys, [&](const std::string& script) {
      std::atomic<bool> all{true};
      InParallel(jobs, parallel, [&](int) {
        if (sys->cli_submit(script) != 0) all = false;
      });
      return all.load();
    });
    throughput("burst", *sys, [&](const std::string& script) {
      std::atomic<bool> all{true};
      InParallel(jobs, parallel, [&](int) {
        if (!sys->api_submit(script)) all = false;
      });
      return all.load();
    });
    throughput("array", *sys, [&](const std::string& script) { return sys->array(script, jobs); });
  }
  {
    // The machine's own rate: the same command, started directly.
    const std::string d = dir_for("floor", "machine");
    const int64_t start = NowNs();
    InParallel(jobs, parallel, [&](int) { RunQuiet({"/bin/sh", "-c", TaskScript(d)}); });
    PhaseResult r;
    r.ok = WaitForFiles(d, static_cast<size_t>(jobs), std::chrono::seconds(10));
    r.value = static_cast<double>(jobs) / (static_cast<double>(LastStart(d) - start) / 1e9);
    r.load = LoadAverage();
    results["floor"]["machine"] = r;
  }

  std::printf(
      "peer_compare: %d nodes (8 GPUs / 8 CPUs each), %d jobs a phase, %d in parallel, "
      "%d ack runs %d ms apart; gpupool secure (TLS + API key), Slurm %s%s\n",
      nodes, jobs, parallel, ack_runs, gap_ms, slurm ? "slurm-wlm on loopback" : "skipped",
      slurm_params.empty() ? "" : (" with SchedulerParameters=" + slurm_params).c_str());
  std::printf("%-9s %-8s %12s %12s %12s %12s %8s %8s\n", "phase", "unit", "gpupool", "(p99)",
              "slurm", "(p99)", "ratio", "load");
  auto fixed = [](double v, bool shown) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2f", v);
    return shown ? std::string(buf) : std::string(v > 0 ? "" : "-");
  };
  auto row = [&](const std::string& phase, const std::string& unit, bool lower_is_better) {
    const PhaseResult g = results[phase]["gpupool"];
    const PhaseResult s = results[phase]["slurm"];
    const double ratio = !slurm || g.value <= 0 || s.value <= 0
                             ? 0
                             : (lower_is_better ? s.value / g.value : g.value / s.value);
    std::printf("%-9s %-8s %12s %12s %12s %12s %7.1fx %8.2f%s\n", phase.c_str(), unit.c_str(),
                fixed(g.value, true).c_str(), fixed(g.p99, g.p99 > 0).c_str(),
                fixed(s.value, slurm).c_str(), fixed(s.p99, slurm && s.p99 > 0).c_str(), ratio,
                std::max(g.load, s.load), g.ok && (!slurm || s.ok) ? "" : "  (incomplete)");
  };
  row("ack", "ms", true);
  row("spin-up", "ms", true);
  for (const char* phase : {"cli-seq", "cli-par", "burst", "array"}) row(phase, "jobs/s", false);
  const PhaseResult f = results["floor"]["machine"];
  std::printf("%-9s %-8s %12.2f   (the machine's own spawn rate of the same command)%s\n", "floor",
              "jobs/s", f.value, f.ok ? "" : "  (incomplete)");
  std::printf(
      "ratio: how many times gpupool's figure is better than Slurm's (ms: Slurm / "
      "gpupool; jobs/s: gpupool / Slurm); load: the 1-minute load average at the phase's "
      "end (the higher of the two)\n");
  for (System* sys : systems) sys->wait_idle(std::chrono::seconds(60));
  return 0;
}

}  // namespace
}  // namespace gpupool

int main(int argc, char** argv) { return gpupool::Run(argc, argv); }
