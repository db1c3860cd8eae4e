// gpupool-agent: the node agent. Wiring only — config, backend, task runner, the stream client.
//
//   gpupool-agent --config agent.yaml [--scheduler HOST:PORT] [--node-name N] [--pool P]
//                 [--data-dir DIR] [--backend simulated|nvml] [--probe]
//
// --probe prints what the backend discovers (devices, links, one sample) as YAML and exits.
#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <prometheus/exposer.h>
#include <signal.h>
#include <unistd.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "agent/agent.h"
#include "agent/capabilities.h"
#include "agent/companion.h"
#include "agent/config.h"
#include "agent/device_metrics.h"
#include "agent/enroll.h"
#include "agent/image_metrics.h"
#include "agent/lease_keeper.h"
#include "agent/nvml_backend.h"
#include "agent/sandbox/sandbox.h"
#include "agent/scrub/device_guard.h"
#include "agent/sim_backend.h"
#include "agent/task_runner.h"
#include "base/log.h"

namespace {

using namespace gpupool;
using namespace gpupool::agent;

constexpr const char* kUsage = R"(usage: gpupool-agent [flags]
  --config FILE       agent YAML (see docs/agent.md)
  --scheduler ADDR    gpupoold agent endpoint, host:port, or an ip:port list of replicas
                      (overrides `scheduler`; docs/ha.md)
  --node-name NAME    node name (overrides `node_name`; default: host name)
  --pool NAME         pool to join (overrides `pool`)
  --ca-file FILE      gpupoold's CA certificate (overrides `ca_file`): TLS, and a node
                      certificate of its own, joined for with `token` (docs/agent.md)
  --token-file FILE   read the join token from FILE (overrides `token` and `token_file`):
                      gpupoold writes one on first start, <data-dir>/node.token
  --data-dir DIR      task directories and logs (overrides `data_dir`)
  --backend KIND      simulated | nvml (overrides `backend`); nvml finds the driver through
                      `nvml: {library, dev_dir, proc_dir}` (default libnvidia-ml.so.1, /dev,
                      /proc/driver/nvidia; docs/agent.md)
  --log-level LEVEL   debug | info | warn | error
  --metrics-listen ADDR  serve /metrics (device samples with DCGM exporter names) on HOST:PORT
                      (overrides `metrics_listen`; off when neither is set)
  --probe             print the discovered devices and one sample as YAML, then exit
  --help              this text

Restarts (docs/agent.md "Agent restarts"): a SIGTERM, a kill -9 or a crash leaves the node's
tasks running under the lease keeper (<data-dir>/lease-keeper.sock) until the node lease lapses;
started again on the same data dir, the agent re-adopts plain, container (image or sandboxed
plain), GPU-slice and MPS tasks (a slice's processes reclaim their VRAM from its new ledger; MPS
clients keep their control daemon), reports those that ended meanwhile and kills those it cannot
re-adopt (an MPS client whose daemon died meanwhile, a container whose uid is taken).
`stop_tasks_on_shutdown: true` makes a SIGTERM stop every task instead (a node going away).

Task sandbox (config `sandbox:`, docs/sandbox.md): with `sandbox.enabled: true` and the agent
running as root, every task runs in a container under the OCI runtime (runc; the `images`
section's tools): its own cgroups (memory and CPU from its request, a pids limit, only its
granted GPU device nodes), a user namespace whose root is an unprivileged uid of
`sandbox.uid_pool` (or `sandbox.tenant_users`) on the node, its own mount/PID/IPC/UTS/network
namespaces with a fresh /tmp, the default seccomp profile, and none of the agent's data dir, this
config file (the node token) or `sandbox.hide` paths. One sandbox path: where the runtime cannot
run, every task fails with the reason; none runs unconfined. Register reports what the node can
and cannot enforce.

GPU slices (config `gpu_slices: {enabled: true, library: PATH, context_mib: N}`, on by
default): a task holding a slice of a GPU runs with the CUDA interposer (libgpupool-cuda.so,
found beside this binary unless `library` is set) preloaded and its own ledger in the agent, so
VRAM is held to the grant on every allocation path and compute to its share; the ledger's
measured spill is reported with the task's end. Without the library the agent runs, and
Register says vram_cap and compute_share are not enforced (docs/interposer.md). With `backend:
nvml` (or `gpu_slices.watchdog_nvml: PATH`) a watchdog compares each slice's processes' GPU
memory from NVML with its ledger every `watchdog_interval_ms` (200) and kills a process that went
around the interposer, failing its task with the reason.

Images (config `images: {enabled: true, dir: PATH, budget_mib: N, tls_verify: true}`, on by
default; needs the sandbox, and the sandbox needs it): a task whose job names an `image` runs in that OCI image's
container under runc, in a user namespace (root inside is an unprivileged uid of the sandbox's
pool outside), with the default seccomp profile and only its granted GPU device files. The node
pulls each image once with skopeo and umoci into a content-addressed store (default
DATA_DIR/images) shared by all its tasks, and tells gpupoold what it holds, so an image's tasks
go to nodes that have its layers when packing allows. `images.datasets: {NAME: /host/dir}` lists
the directories tasks may mount read-only by name (a job's `--volume /data=NAME`); a scratch
volume is a directory of the task's own. With images on, a plain command runs under runc too,
on a read-only view of the host's `sandbox.host_dirs` (default /usr, /etc, /opt) with a writable
work dir of its own: one sandbox path (docs/sandbox.md). Without the tools nothing runs, and
Register says `images` and `sandbox` are not enforced, with why (docs/images.md).

Task networks (config `network: {isolated: false, default: none, subnet: 10.213.0.0/16, deny:
[CIDR, ...]}`, docs/network.md): with the sandbox, each task gets the network its pool names
(Pool.network), else `network.default`: `none` (a namespace of its own, loopback only), `isolated`
(its own namespace and address, outbound through NAT; the node, other tasks, link-local metadata,
gpupoold's addresses and `deny` refused; needs `isolated: true`, root, iproute2 and iptables) or
`host` (the node's network; an admin's choice). A task never runs less confined than its pool
asks: where the node cannot, it fails with the reason. A task's declared ports (TaskTemplate.ports)
are published on ports of the node's from `network.published_ports` (default 30000-32767), for
anything but another task, and reported as endpoints at `network.advertise` (default: the node's
name).

VRAM scrub (config `vram_scrub: true`): before a device goes to a task of another tenant, its
free memory is zeroed and verified (CUDA driver API via libcuda.so.1; simulated: a file per device
under `sim_device_dir`); a failed scrub keeps the device out of service (reported unhealthy).

MPS (config `mps: {enabled: true, control: nvidia-cuda-mps-control, dir: /run/gpupool-mps,
isolation: device|tenant}`): for grants that share a GPU the agent runs one MPS control daemon
per GPU (per tenant per GPU where the task's pool asks, `pools create --mps-isolation tenant`,
or for every task with isolation: tenant), gives each client its active-thread percentage
and pinned-memory limit in its own environment, restarts a daemon that exits and fails its
tasks; a daemon that will not start fails the task naming it. An MPS server serves one uid, so
with the sandbox on the daemons are always per tenant and a tenant's MPS tasks share its uid.

Health: XID and ECC events are watched (NVML event API; simulated: lines appended to
<data_dir>/sim-events, "xid <uuid> <code>" or "ecc <uuid> corrected|uncorrected"). A fatal XID
(48, 62, 64, 74, 79, 92, 95, 119, 120, 140) or an uncorrectable ECC error fails the device's tasks
(requeued where retries allow) and keeps the device out of service until an admin runs
`gpupoolctl nodes clear-device NODE DEVICE`. Config `health_poll_ms` (500).
)";

struct Flags {
  std::string config, scheduler, node_name, pool, data_dir, backend, log_level, metrics_listen,
      ca_file, token_file;
  bool probe = false;
};

int ParseFlags(int argc, char** argv, Flags* f) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    std::string value;
    const size_t eq = a.find('=');
    bool has_value = false;
    if (a.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = a.substr(eq + 1);
      a = a.substr(0, eq);
      has_value = true;
    }
    auto take = [&](std::string* out) {
      if (has_value) {
        *out = value;
        return true;
      }
      if (i + 1 >= argc) return false;
      *out = argv[++i];
      return true;
    };
    bool ok = true;
    if (a == "--help" || a == "-h") {
      std::cout << kUsage;
      return 0;
    } else if (a == "--probe") {
      f->probe = true;
    } else if (a == "--config") {
      ok = take(&f->config);
    } else if (a == "--scheduler") {
      ok = take(&f->scheduler);
    } else if (a == "--node-name") {
      ok = take(&f->node_name);
    } else if (a == "--pool") {
      ok = take(&f->pool);
    } else if (a == "--ca-file") {
      ok = take(&f->ca_file);
    } else if (a == "--token-file") {
      ok = take(&f->token_file);
    } else if (a == "--data-dir") {
      ok = take(&f->data_dir);
    } else if (a == "--backend") {
      ok = take(&f->backend);
    } else if (a == "--log-level") {
      ok = take(&f->log_level);
    } else if (a == "--metrics-listen") {
      ok = take(&f->metrics_listen);
    } else {
      std::cerr << "gpupool-agent: unknown flag '" << argv[i] << "'\n" << kUsage;
      return 2;
    }
    if (!ok) {
      std::cerr << "gpupool-agent: flag " << a << " needs a value\n";
      return 2;
    }
  }
  return -1;
}

int g_signal_pipe[2] = {-1, -1};

void OnSignal(int sig) {
  const int saved = errno;
  [[maybe_unused]] ssize_t n = write(g_signal_pipe[1], &sig, sizeof(sig));
  errno = saved;
}

std::string Quote(const std::string& s) { return "\"" + s + "\""; }

// This executable's path (the interposer library is looked up beside it).
std::string SelfPath(const char* argv0) {
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string(argv0) : self.string();
}

void PrintProbe(const std::string& backend, const Inventory& inv,
                const std::vector<DeviceSample>& samples) {
  std::cout << "backend: " << backend << "\ndevices:\n";
  for (const Device& d : inv.devices) {
    std::cout << "  - {uuid: " << Quote(d.uuid) << ", model: " << Quote(d.model)
              << ", index: " << d.index << ", vram_mib: " << d.vram_mib
              << ", milli_tflops: " << d.milli_tflops;
    if (!d.mig_profile.empty()) {
      std::cout << ", mig_profile: " << Quote(d.mig_profile)
                << ", parent_uuid: " << Quote(d.parent_uuid);
    }
    std::cout << ", healthy: " << (d.healthy ? "true" : "false") << ", numa_node: " << d.numa_node
              << "}\n";
  }
  std::cout << "links:\n";
  for (const Link& l : inv.links) {
    std::cout << "  - {a: " << l.a << ", b: " << l.b << ", kind: " << LinkKindName(l.kind)
              << ", gbps: " << l.bandwidth_gbps << "}\n";
  }
  std::cout << "sample:\n";
  for (const DeviceSample& s : samples) {
    std::cout << "  - {uuid: " << Quote(s.uuid) << ", utilization_pct: " << s.utilization_pct
              << ", memory_used_mib: " << s.memory_used_mib << ", power_watts: " << s.power_watts
              << ", temperature_c: " << s.temperature_c << ", ecc_errors: " << s.ecc_errors
              << ", xid_errors: " << s.xid_errors << ", healthy: " << (s.healthy ? "true" : "false")
              << "}\n";
  }
}

int Run(int argc, char** argv) {
  Flags flags;
  if (int rc = ParseFlags(argc, argv, &flags); rc >= 0) return rc;

  AgentConfig config;
  if (!flags.config.empty()) {
    auto loaded = LoadAgentConfigFile(flags.config);
    if (!loaded.ok()) {
      std::cerr << "gpupool-agent: " << loaded.status().message() << "\n";
      return 2;
    }
    config = std::move(loaded).value();
  }
  if (!flags.scheduler.empty()) config.scheduler = flags.scheduler;
  if (!flags.ca_file.empty()) config.ca_file = flags.ca_file;
  if (!flags.token_file.empty()) {
    Result<std::string> token = ReadTokenFile(flags.token_file);
    if (!token.ok()) {
      std::cerr << "gpupool-agent: --token-file: " << token.status().message() << "\n";
      return 2;
    }
    config.token = std::move(token).value();
    config.token_file = flags.token_file;
  }
  if (!flags.node_name.empty()) config.node_name = flags.node_name;
  if (!flags.pool.empty()) config.pool = flags.pool;
  if (!flags.data_dir.empty()) config.data_dir = flags.data_dir;
  if (!flags.backend.empty()) config.backend = flags.backend;
  if (!flags.log_level.empty()) config.log_level = flags.log_level;
  if (!flags.metrics_listen.empty()) config.metrics_listen = flags.metrics_listen;
  LogLevel level;
  if (!ParseLogLevel(config.log_level, &level)) {
    std::cerr << "gpupool-agent: log_level '" << config.log_level
              << "': expected debug, info, warn or error\n";
    return 2;
  }
  SetLogLevel(level);
  if (Status st = ValidateAgentConfig(&config); !st.ok()) {
    std::cerr << "gpupool-agent: " << st.message() << "\n";
    return 2;
  }

  std::unique_ptr<DeviceBackend> backend;
  if (config.backend == "nvml") {
    NvmlDevicePaths paths;
    paths.dev_dir = config.nvml.dev_dir;
    paths.proc_dir = config.nvml.proc_dir;
    auto nvml = NvmlBackend::Open(config.models, config.nvml.library, std::move(paths));
    if (!nvml.ok()) {
      std::cerr << "gpupool-agent: " << nvml.status().message() << "\n";
      LogError("agent", "backend unavailable",
               {{"backend", "nvml"}, {"error", nvml.status().message()}});
      return 3;
    }
    backend = std::move(nvml).value();
  } else {
    // Health events for tests and demos: lines appended here (docs/sandbox.md, "Health"). Under
    // data_dir, which sandboxed tasks cannot see, so a tenant cannot fault a device.
    config.sim.event_file = config.data_dir + "/sim-events";
    backend = std::make_unique<SimulatedBackend>(config.node_name, config.sim, config.models);
  }

  if (flags.probe) {
    auto inv = backend->Discover();
    if (!inv.ok()) {
      std::cerr << "gpupool-agent: probe: " << inv.status().message() << "\n";
      return 3;
    }
    PrintProbe(backend->Name(), *inv, backend->Sample({}));
    return 0;
  }

  std::error_code ec;
  std::filesystem::create_directories(config.data_dir, ec);
  if (ec) {
    std::cerr << "gpupool-agent: data_dir " << config.data_dir << ": " << ec.message() << "\n";
    return 2;
  }
  LogInfo("agent", "backend selected", {{"backend", backend->Name()}});

  // SIGTERM/SIGINT: the handler (on whichever thread gets it) writes the signal number to a pipe
  // that this thread waits on.
  if (pipe2(g_signal_pipe, O_CLOEXEC) != 0) {
    std::cerr << "gpupool-agent: pipe: " << std::strerror(errno) << "\n";
    return 1;
  }
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);

  TaskRunnerOptions ro;
  // Tasks are bound to the node lease: the keeper kills them when the lease lapses, and holds
  // them through an agent restart until then (agent/lease_keeper.h, docs/ha.md). A keeper a
  // previous agent process left is joined, and its tasks re-adopted below.
  const std::string keeper_socket = config.data_dir + "/lease-keeper.sock";
  Result<std::shared_ptr<LeaseKeeper>> keeper = LeaseKeeper::Start(keeper_socket);
  if (!keeper.ok() && keeper.status().code() == StatusCode::kInvalidArgument) {
    LogWarn("agent", "tasks will not outlive an agent restart on this node",
            {{"why", keeper.status().message()}});
    keeper = LeaseKeeper::Start();
  }
  if (!keeper.ok()) {
    std::cerr << "gpupool-agent: " << keeper.status().message() << "\n";
    return 1;
  }
  // However this process ends — a config error below, a crash, SIGTERM — the keeper holds what it
  // tracks until the lease deadline, or exits when it tracks nothing; it is never told to drop
  // tasks that would then run unbounded. A shutdown that stops tasks does so before (Shutdown).
  struct LeaveKeeper {
    std::shared_ptr<LeaseKeeper> keeper;
    ~LeaveKeeper() { keeper->Leave(); }
  } leave_keeper{*keeper};
  ro.lease_keeper = *keeper;
  ro.data_dir = config.data_dir;
  ro.default_grace_ms = config.stop_grace_period_ms;
  ro.tail_bytes = config.output_tail_bytes;
  if (config.sandbox.enabled) {
    sandbox::SandboxOptions so = config.sandbox;
    // The config file holds the node token: tasks never see it.
    if (!flags.config.empty()) {
      so.hide_paths.push_back(std::filesystem::absolute(flags.config, ec).string());
    }
    if (!config.token_file.empty()) {
      so.hide_paths.push_back(std::filesystem::absolute(config.token_file, ec).string());
    }
    auto box = sandbox::Sandbox::Create(so);
    if (!box.ok()) {
      std::cerr << "gpupool-agent: " << box.status().message() << "\n";
      return 2;
    }
    ro.sandbox = *box;
  } else {
    LogWarn("agent", "sandbox disabled: tasks run unconfined as the agent's user",
            {{"hint", "set sandbox.enabled: true (docs/sandbox.md)"}});
  }
  if (config.vram_scrub) {
    std::unique_ptr<VramScrubber> scrubber;
    if (config.backend == "nvml") {
      // MIG instances are scrubbed by gpupool-scrub in a process of their own.
      auto cuda = OpenCudaScrubber(
          FindCompanion(SelfPath(argv[0]), "gpupool-scrub", "gpu-tools", /*executable=*/true));
      if (!cuda.ok()) {
        std::cerr << "gpupool-agent: vram_scrub: " << cuda.status().message() << "\n";
        return 3;
      }
      scrubber = std::move(cuda).value();
    } else {
      scrubber =
          std::make_unique<SimScrubber>(config.sim.device_dir, config.sim_vram_mib * 1024 * 1024);
    }
    ro.device_guard = std::make_shared<DeviceGuard>(std::move(scrubber));
  }
  if (config.mps.enabled) {
    // Under data_dir the sandbox would hide the pipes from the tasks that need them.
    const std::string data = std::filesystem::weakly_canonical(config.data_dir, ec).string();
    if (config.sandbox.enabled && (config.mps.dir + "/").rfind(data + "/", 0) == 0) {
      std::cerr << "gpupool-agent: mps.dir " << config.mps.dir
                << " is under data_dir, which sandboxed tasks cannot see; choose another\n";
      return 2;
    }
    MpsOptions mo = config.mps;
    if (config.sandbox.enabled && !mo.per_tenant) {
      // MPS serves one uid per server, and sandboxed tenants run as different uids: a daemon
      // shared by tenants would run them one after another (mps_manager.h).
      mo.per_tenant = true;
      LogInfo("agent",
              "mps: one control daemon per tenant per GPU (the sandbox gives tenants "
              "different uids, and an MPS server serves one)");
    }
    ro.mps = std::make_shared<MpsManager>(mo);
  }
  if (config.gpu_slices.enabled) {
    SliceOptions so = config.gpu_slices;
    const bool configured = !so.library.empty();
    if (!configured) so.library = SliceLedgers::DefaultLibrary(SelfPath(argv[0]));
    // On a GPU host the watchdog reads each process's GPU memory from the driver's NVML.
    if (so.watchdog_nvml.empty() && config.backend == "nvml")
      so.watchdog_nvml = "libnvidia-ml.so.1";
    auto slices = SliceLedgers::Create(so);
    if (slices.ok()) {
      ro.slices = std::move(slices).value();
    } else if (configured) {
      std::cerr << "gpupool-agent: " << slices.status().message() << "\n";
      return 2;
    } else {
      // Runs, and says what it cannot enforce: a pool that requires it sends no slice here.
      ro.slices_off = slices.status().message();
      LogWarn("agent", "fractional slices are not enforced on this node", {{"why", ro.slices_off}});
    }
  }
  ro.default_network = config.network.default_mode;
  ro.advertise_host = config.network.advertise;
  if (!config.network.isolated) {
    ro.networks_off = "off (network.isolated: false)";
  } else if (!ro.sandbox) {
    ro.networks_off = "isolated networks need the sandbox (sandbox.enabled: true)";
  } else {
    // The namespaces a previous agent process left stay until its tasks are re-adopted (below).
    auto networks = OpenNetworks(config.network, config.scheduler, /*remove_leftovers=*/false);
    if (networks.ok()) {
      ro.networks = *networks;
    } else {
      ro.networks_off = networks.status().message();
    }
  }
  if (!ro.networks && config.network.isolated) {
    LogWarn("agent", "isolated task networks are not offered on this node",
            {{"why", ro.networks_off}});
  }
  if (!ro.networks && ro.default_network == net::NetworkMode::kIsolated) {
    LogWarn("agent",
            "network.default is isolated but isolated networks are off: tasks of pools "
            "that name no network will fail",
            {{"why", ro.networks_off}});
  }
  if (!config.images.enabled) {
    ro.containers_off = "off (images.enabled: false): tasks with an image fail on this node";
  } else {
    auto containers =
        OpenContainers(config.images, ro.sandbox, config.data_dir, SelfPath(argv[0]), ro.networks);
    if (containers.ok()) {
      ro.containers = *containers;
    } else {
      // Says why no task can run here: with the sandbox on, the runtime confines every task.
      ro.containers_off = containers.status().message();
      LogWarn("agent",
              ro.sandbox ? "no task can run on this node: the sandbox needs the OCI runtime"
                         : "image tasks cannot run on this node",
              {{"why", ro.containers_off}});
    }
  }
  for (const sandbox::Capability& c : NodeCapabilities(ro, backend.get())) {
    LogInfo("agent", "capability",
            {{"name", c.name}, {"enforced", c.enforced ? "true" : "false"}, {"detail", c.detail}});
  }
  // Metrics (metrics_listen): the registry exists before the runner, which feeds the start
  // latency histogram; the exposer comes up below.
  std::shared_ptr<prometheus::Registry> registry;
  std::shared_ptr<StartLatency> start_latency;
  if (!config.metrics_listen.empty()) {
    registry = std::make_shared<prometheus::Registry>();
    start_latency = std::make_shared<StartLatency>(*registry, config.node_name);
    ro.on_start = [start_latency](const TaskStartTiming& t) { start_latency->Observe(t); };
  }
  TaskRunner runner(ro);
  // Likewise the runner leaves running tasks when this process ends (no kill on the way out).
  runner.Leave();
  TaskRunner::Recovery recovered;
  {
    // Tasks of a previous agent process (a restart, kill -9, a crash): re-adopted where they
    // can be, reported where they ended meanwhile, killed otherwise (docs/agent.md).
    recovered = runner.Recover(config.node_name);
    const TaskRunner::Recovery& r = recovered;
    if (r.adopted + r.ended + r.killed + r.reported > 0) {
      LogInfo("agent", "took over the tasks of a previous agent process",
              {{"adopted", std::to_string(r.adopted)},
               {"ended_meanwhile", std::to_string(r.ended)},
               {"killed", std::to_string(r.killed)},
               {"reported_again", std::to_string(r.reported)}});
    }
    // Isolated networks no re-adopted task uses: what a previous agent process left.
    if (ro.networks) ro.networks->RemoveLeftovers(recovered.kept_network_slots);
    if ((*keeper)->attached()) {
      // The keeper still lists the previous process's groups, some of them ended (their numbers
      // may be reused): it keeps exactly the re-adopted ones. A Track the keeper reads after its
      // deadline passed kills that group at once, so nothing slips through between the two.
      (*keeper)->Reset();
      for (const TaskStatus& t : runner.Running(config.node_name)) {
        (*keeper)->Track(static_cast<pid_t>(t.pid));
      }
    }
  }
  if (ro.containers) {
    // Containers whose shim never ran (a crash between runc create and the shim's start).
    auto left =
        oci::Launcher(ro.containers->options().launcher).DeleteAll("", recovered.kept_containers);
    if (left.ok() && *left > 0) {
      LogInfo("agent", "removed containers of a previous agent",
              {{"count", std::to_string(*left)}});
    }
    // And the task root file systems it left mounted (overlays, host-root binds).
    auto unmounted = oci::UnmountAllUnder(config.data_dir + "/tasks", recovered.kept_dirs);
    if (!unmounted.ok()) {
      LogWarn("agent", "cannot unmount a previous agent's task root file systems",
              {{"error", unmounted.status().message()}});
    } else if (*unmounted > 0) {
      LogInfo("agent", "unmounted task root file systems of a previous agent",
              {{"count", std::to_string(*unmounted)}});
    }
  }

  boost::asio::io_context io;
  auto work = boost::asio::make_work_guard(io);
  std::vector<std::thread> threads;
  for (int i = 0; i < 2; ++i) threads.emplace_back([&io] { io.run(); });

  // Node identity: join (or renew) before connecting, then renew in the background before the
  // certificate expires; the channel re-reads the files (agent/enroll.h).
  std::unique_ptr<boost::asio::steady_timer> renew_timer;
  std::function<void()> schedule_renew;
  if (!config.ca_file.empty()) {
    if (Status st = EnsureNodeCertificate(config); !st.ok()) {
      std::cerr << "gpupool-agent: node certificate: " << st.message() << "\n";
      work.reset();
      io.stop();
      for (auto& t : threads) t.join();
      return 3;
    }
    renew_timer = std::make_unique<boost::asio::steady_timer>(io);
    schedule_renew = [&] {
      renew_timer->expires_after(std::chrono::minutes(10));
      renew_timer->async_wait([&](const boost::system::error_code& error) {
        if (error) return;
        if (Result<bool> r = RenewIfDue(config); !r.ok()) {
          LogWarn("agent", "node certificate renewal failed; will retry",
                  {{"error", r.status().message()}});
        }
        schedule_renew();
      });
    };
    schedule_renew();
  }
  auto channel = MakeAgentChannel(config);
  const bool stop_tasks = config.stop_tasks_on_shutdown;
  int rc = 0;
  std::unique_ptr<prometheus::Exposer> exposer;
  std::unique_ptr<DeviceMetrics> metrics;
  if (registry) {
    try {
      exposer = std::make_unique<prometheus::Exposer>(config.metrics_listen, 2);
    } catch (const std::exception& e) {
      std::cerr << "gpupool-agent: metrics_listen " << config.metrics_listen
                << ": cannot listen: " << e.what() << "\n";
      rc = 2;
    }
    if (exposer) {
      exposer->RegisterCollectable(registry);
      metrics = std::make_unique<DeviceMetrics>(registry, config.node_name, config.pool);
      if (ro.containers) {
        exposer->RegisterCollectable(std::make_shared<ImageStoreCollector>(
            ro.containers->options().store, config.node_name));
      }
      const std::vector<int> ports = exposer->GetListeningPorts();
      LogInfo("agent", "metrics listening",
              {{"address", config.metrics_listen},
               {"port", ports.empty() ? "" : std::to_string(ports.front())}});
    }
  }
  if (rc == 0) {
    Agent agent(config, backend.get(), &runner, channel, io);
    // Several scheduler addresses: follow a standby's answer to the leader (docs/ha.md).
    agent.SetChannelMaker([config](const std::string& target) {
      AgentConfig one = config;
      one.scheduler = target;
      return MakeAgentChannel(one);
    });
    if (metrics) {
      agent.SetSampleObserver([m = metrics.get()](const Inventory& inv,
                                                  const std::vector<DeviceSample>& samples,
                                                  const std::vector<TaskStatus>& running) {
        m->Observe(inv, samples, running);
      });
    }
    if (Status st = agent.Start(); !st.ok()) {
      std::cerr << "gpupool-agent: " << st.message() << "\n";
      rc = 3;
    } else {
      int sig = 0;
      while (read(g_signal_pipe[0], &sig, sizeof(sig)) < 0 && errno == EINTR) {
      }
      LogInfo("agent", "signal received; shutting down",
              {{"signal", std::to_string(sig)}, {"stop_tasks", stop_tasks ? "true" : "false"}});
      agent.Shutdown(stop_tasks);
    }
  }
  if (renew_timer) boost::asio::post(io, [&] { renew_timer->cancel(); });
  work.reset();
  io.stop();
  for (auto& t : threads) t.join();
  return rc;
}

}  // namespace

int main(int argc, char** argv) { return Run(argc, argv); }
