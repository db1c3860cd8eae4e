// TaskRunner: supervises the processes of the tasks an agent was told to run.
//
// Each task is one process group of its own, with its argv, the agent's environment overlaid by
// the task's env and then by the grant variables (GrantEnv below), a working directory
// <data_dir>/tasks/<task>.<attempt>/ and stdout+stderr appended to output.log there. A plain
// command's group leader is a small recorder (task_spawn.h) that writes the program's wait status
// to `exit_status` beside the log, so its end is known even to an agent that is not its parent. A
// `state` file (task_record.h) records what a restarted agent needs.
//
// Agent restarts (issue 30, docs/agent.md): tasks outlive the agent process. Leave() lets them run
// on (the lease keeper holds them to the node lease); a restarted agent's Recover() re-adopts the
// ones it can rebuild — it watches their leader through a pidfd and reads the recorded status when
// it ends — reports those that ended while no agent watched, and kills the rest (a GPU-slice or
// MPS task; its resources cannot be rebuilt yet), which the scheduler then requeues. A container
// is re-adopted with its uid, image, root file system and isolated network.
//
// Stop: SIGTERM to the group, then after the grace period SIGKILL to the group. The task ends
// when its leader has exited and, for a stop, the group is empty or has been SIGKILLed; any
// process left in the group when the leader exits is SIGKILLed, so a task never leaks children.
// Max runtime: when exceeded the task is stopped with the default grace and reported FAILED
// with reason "max runtime exceeded". The final status carries the exit code or the signal and
// the last `tail_bytes` of the log.
//
// Idempotent by (task id, attempt): Start() of a task that runs or ran with the same attempt
// returns its current status and starts nothing; an older attempt is ignored the same way; a
// newer attempt starts once the old one has ended. Stop() of an unknown task returns nullopt.
//
// Reaping: one supervisor thread waits on a pidfd per child (epoll) and on deadlines; it calls
// waitpid for its own children only, so it never steals another component's child. Listeners
// are called on that thread, without locks held, for every terminal status.
//
// Sandbox (options.sandbox set, see agent/sandbox/sandbox.h): every task runs in a container
// under the OCI runtime (options.containers; a plain command on a read-only view of the host's
// directories) — one sandbox path (issue 25). Where the node cannot run containers, a task fails
// (exit code 126, the reason says why) — it never runs unconfined. The final status carries the
// container cgroup's CPU time, peak memory and OOM kills.
//
// Images (options.containers set, TaskSpec.image non-empty; docs/images.md): Start() returns at
// once with the task PULLING, and a thread of the task's own pulls the image into the node's
// store (one pull per layer however many tasks want it), builds the bundle and starts the
// container's shim (agent/oci/launcher.h) as the task's process group, under runc in a user
// namespace with the default seccomp profile. The listener is told when it starts running; a
// stop while it pulls ends it CANCELLED once the pull returns, and a pull or bundle that fails
// fails the task (exit code 126) with the reason ("image: …"). The container's result file gives
// its OOM kills. Max runtime counts from the container's start.
//
// Thread safety: all public methods are safe from any thread. Several agents (a SimFleet) may
// share one runner; `owner` keeps their tasks apart.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "agent/net/task_network.h"
#include "base/clock.h"
#include "base/status.h"

namespace gpupool::agent {

namespace sandbox {
class Sandbox;
}  // namespace sandbox
class DeviceGuard;
class MpsManager;
class LeaseKeeper;
class SliceLedgers;
struct TaskRecord;
namespace oci {
class ContainerFactory;
class PreparedContainer;
}  // namespace oci

struct DeviceGrant {
  std::string uuid;  // GPU or MIG instance UUID
  int64_t milli_tflops = 0;
  int64_t vram_mib = 0;
  int32_t thread_percentage = 0;  // 1..100; 0 = whole device (100)
  // The whole device, from the inventory (0 when unknown): a grant below it is a slice.
  int64_t device_milli_tflops = 0;
  int64_t device_vram_mib = 0;
};

struct TaskSpec {
  std::string owner;  // the agent's node name
  std::string task_id;
  std::string job_id;
  std::string tenant;
  int32_t attempt = 0;
  std::vector<std::string> argv;
  std::map<std::string, std::string> env;
  std::vector<DeviceGrant> devices;
  int64_t max_runtime_ms = 0;  // 0 = unlimited
  int64_t cpu_milli = 0;       // host CPU requested; the sandbox's CPU quota (0 = none)
  int64_t memory_mib = 0;      // host memory requested; the sandbox's memory limit (0 = none)
  // The task's pool asks for MPS fault isolation between tenants (StartTask): its shared grants
  // use a control daemon of its tenant alone.
  bool mps_tenant_isolation = false;
  // The task's pool shares compute fairly (StartTask.compute_fair): its slices' ledgers burst
  // into their devices' idle time instead of holding a strict cap.
  bool compute_fair = false;
  // An OCI image the task runs in (StartTask.image), through the runner's ContainerFactory; argv
  // then replaces the image's Cmd (empty: the image's own). Empty = a plain command.
  std::string image;
  // The registry credential `image` is pulled with (StartTask.registry_credential_env, taken out
  // of `env` by FromProto so the task never sees it); empty = none.
  std::string registry_username;
  std::string registry_password;
  // With an image (StartTask): its Entrypoint replaced (empty = the image's), the directory the
  // task starts in (empty = the image's), and its volumes, mount path → dataset ("" = scratch).
  std::vector<std::string> entrypoint;
  std::string working_dir;
  std::map<std::string, std::string> volumes;
  // Device files the task may open (granted GPUs, their MIG capabilities, the control devices);
  // the runtime makes these device nodes in its container, and no other of the GPUs'.
  std::vector<std::string> device_files;
  // The node driver's user-space files (Inventory::driver_files), bound read-only into a GPU task
  // from an image; a plain command sees them where they lie on the host.
  std::vector<std::string> driver_files;
  // The network its pool asks for (StartTask.network); unset = the node's default
  // (TaskRunnerOptions::default_network). A task never runs less confined than its pool asks: an
  // isolated or no-network task fails where the node cannot give it that.
  std::optional<net::NetworkMode> network;
  // The ports the task listens on (StartTask.ports): published in an isolated network, the
  // node's own in the host network; a task in no network with ports fails.
  std::vector<TaskPort> ports;
};

// What a container task used, read from its cgroups when it ended (zero for an unconfined one).
struct TaskUsage {
  bool measured = false;
  int64_t cpu_usec = 0;
  int64_t peak_memory_bytes = 0;
  int64_t oom_kills = 0;
  int64_t spill_mib_seconds = 0;  // VRAM served from host memory × time (the interposer's ledger)
};

// kPulling: a container task not started yet: its image is being pulled, or (a plain command) its
// container is being made.
enum class TaskPhase { kRunning, kSucceeded, kFailed, kCancelled, kPulling };
const char* TaskPhaseName(TaskPhase phase);

struct TaskStatus {
  std::string owner;
  std::string task_id;
  std::string tenant;
  int32_t attempt = 0;
  TaskPhase phase = TaskPhase::kRunning;
  int64_t pid = 0;
  int32_t exit_code = 0;
  int32_t signal = 0;
  bool oom = false;
  std::string output_tail;
  std::string reason;
  std::vector<DeviceGrant> devices;
  TaskUsage usage;
  bool device_fault = false;  // failed by FailDevices(): its device had a fatal fault
  // kPulling: the bytes of its image's blobs fetched so far, of those this pull must fetch.
  std::string pull_image;
  int64_t pull_bytes_done = 0;
  int64_t pull_bytes_total = 0;
  // kRunning: where its declared ports are reached (TaskSpec.ports).
  std::vector<TaskEndpoint> endpoints;
  bool terminal() const { return phase != TaskPhase::kRunning && phase != TaskPhase::kPulling; }
};

// How long a task took from Start() to its program running (metrics: agent/image_metrics.h).
struct TaskStartTiming {
  bool image = false;      // an image task (pull, rootfs, runc) or a plain command
  bool cache_hit = false;  // image tasks: the node's store already held the image
  double seconds = 0;
};

struct LogSlice {
  int64_t offset = 0;
  std::string data;
  bool eof = false;  // the task has ended and the slice reaches the end of its log
};

struct TaskRunnerOptions {
  std::string data_dir;
  int64_t default_grace_ms = 10'000;
  int64_t tail_bytes = 4096;
  bool inherit_env = true;      // start from the agent's environment
  size_t keep_finished = 4096;  // finished tasks remembered for idempotency and logs
  const Clock* clock = SystemClock::Get();
  std::shared_ptr<sandbox::Sandbox> sandbox;  // null = tasks run unconfined
  // Scrubs a device's free VRAM before it changes tenant (agent/scrub/device_guard.h); a task
  // on a device that is out of service fails (exit code 126) with the reason. null = no scrub.
  std::shared_ptr<DeviceGuard> device_guard;
  // Runs MPS control daemons for shared grants (agent/mps/mps_manager.h); a task whose daemon
  // does not start fails (exit code 126) naming it. null = the CUDA_MPS_* variables only.
  std::shared_ptr<MpsManager> mps;
  // Runs each slice's ledger and preloads the CUDA interposer (agent/slices/slice_ledgers.h); a
  // task whose ledger cannot start fails before it runs. Null: slices are not enforced here.
  std::shared_ptr<SliceLedgers> slices;
  // Why `slices` is null, for Register's capabilities.
  std::string slices_off =
      "off (gpu_slices.enabled: false): nothing holds a fractional task to its VRAM or compute "
      "share";
  // Runs image tasks as OCI containers (agent/oci/container.h). Null: an image task fails
  // (exit code 126) with `containers_off`.
  std::shared_ptr<oci::ContainerFactory> containers;
  std::string containers_off = "images are off on this node (images.enabled: false)";
  // Isolated task networks (agent/net/task_network.h); null: the node offers none, and a task
  // whose pool asks for one fails with `networks_off`.
  std::shared_ptr<net::TaskNetworks> networks;
  std::string networks_off = "isolated task networks are off on this node (network.isolated)";
  // For tasks whose pool names no network. A task that is not sandboxed (sandbox off, no image)
  // runs on the node's network unless its pool asked otherwise.
  net::NetworkMode default_network = net::NetworkMode::kNone;
  // The node's address its tasks' published ports are reached on (network.advertise), in the
  // endpoints it reports; empty = the node's name.
  std::string advertise_host;
  // Told every task's process group while it runs (agent/lease_keeper.h): the keeper kills them
  // when the agent dies or its node lease lapses. null = tasks are not bound to the agent.
  std::shared_ptr<LeaseKeeper> lease_keeper;
  // Told each task's start latency once it runs (outside the runner's locks); null = nobody.
  std::function<void(const TaskStartTiming&)> on_start;
};

class TaskRunner {
 public:
  using Listener = std::function<void(const TaskStatus&)>;
  static constexpr std::chrono::milliseconds kPullReportInterval{500};

  explicit TaskRunner(TaskRunnerOptions options);
  // SIGKILLs every running group, reaps it and joins the supervisor.
  ~TaskRunner();
  TaskRunner(const TaskRunner&) = delete;
  TaskRunner& operator=(const TaskRunner&) = delete;

  // Terminal statuses of `owner`'s tasks go to `listener` (replacing any earlier one), and so
  // does the RUNNING status of an image task whose container has started after its pull, and
  // its PULLING status while bytes move (at most every kPullReportInterval, and the last).
  void SetListener(const std::string& owner, Listener listener);
  void RemoveListener(const std::string& owner);

  // Starts the task, or returns the status of the same (or a newer) attempt. A spawn failure
  // (no such program…) returns a FAILED status with exit code 127 — a task outcome, not an
  // error; errors are for a bad spec or an unusable data dir.
  Result<TaskStatus> Start(const TaskSpec& spec);

  // Asks the task to stop (attempt 0 = whichever runs). Returns its status now (RUNNING while it
  // winds down, or the final one), or nullopt when the task/attempt is unknown. A container task
  // still pulling its image (or making its container) ends CANCELLED at once.
  std::optional<TaskStatus> Stop(const std::string& task_id, int32_t attempt, int64_t grace_ms,
                                 const std::string& reason);

  std::optional<TaskStatus> Get(const std::string& task_id) const;
  std::vector<TaskStatus> Running(const std::string& owner) const;

  // Fails every running task of `owner` granted one of `uuids`: SIGKILL to its group at once (a
  // device that threw a fatal XID serves no grace period), reported FAILED with `reason` and
  // device_fault set. Returns the task ids.
  // A non-empty `tenant` limits it to that tenant's tasks.
  std::vector<std::string> FailDevices(const std::string& owner,
                                       const std::vector<std::string>& uuids,
                                       const std::string& reason, const std::string& tenant = "");
  // The same for every running task of `owner` whose spec `hit` selects (an MPS daemon's
  // clients: MpsManager::UsedBy).
  std::vector<std::string> FailIf(const std::string& owner,
                                  const std::function<bool(const TaskSpec&)>& hit,
                                  const std::string& reason);

  // Stops all of `owner`'s tasks and waits until they have ended.
  void StopAll(const std::string& owner, int64_t grace_ms, const std::string& reason);

  // Reads up to max_bytes of the task's log from offset (negative: from the end).
  Result<LogSlice> ReadLog(const std::string& task_id, int64_t offset, int64_t max_bytes) const;

  // What Recover() found of a previous agent process's tasks.
  struct Recovery {
    int adopted = 0;   // running, now supervised here as if started here
    int ended = 0;     // ended while no agent watched: their final status goes to the listener
    int killed = 0;    // running but not re-adoptable (or another node's): killed
    int reported = 0;  // ended and recorded by the previous process within `report_within_ms`:
                       // reported again (the scheduler ignores what it already has)
    // Re-adopted containers' ids and task directories: the agent's clean-up of what a previous
    // process left (runc containers, mounted root file systems) must spare them.
    std::vector<std::string> kept_containers;
    std::vector<std::string> kept_dirs;
    std::vector<int> kept_network_slots;  // likewise their isolated networks' namespaces
  };
  // Takes over what a previous agent process left in this data dir, for node `owner`: re-adopts
  // every task that still runs and can be rebuilt here (a recorded plain command), reports every
  // task that ended meanwhile, and kills the rest. Tasks whose final status was recorded less
  // than `report_within_ms` ago are reported again: the previous process may have died before
  // the scheduler had them. Call it once, before the agent registers; statuses go to `owner`'s
  // listener, held until one is set.
  Recovery Recover(const std::string& owner, int64_t report_within_ms = 15 * 60 * 1000);

  // The agent leaves without stopping its tasks (a restart): the destructor then neither kills
  // nor waits for them, and the lease keeper holds them for the next agent process. May be called
  // at any time before the destructor (the agent calls it at start).
  void Leave();
  // Why a running task of `owner` could not be re-adopted by a restarted agent ("" when it can).
  std::string WhyNotAdoptable(const std::string& task_id) const;

  // The grant variables for a spec (CUDA_VISIBLE_DEVICES, CUDA_MPS_*, GPUPOOL_*).
  static std::map<std::string, std::string> GrantEnv(const TaskSpec& spec);

  const TaskRunnerOptions& options() const { return options_; }

 private:
  struct Task;
  void Loop();
  void Wake();
  // REQUIRES: mu_ held.
  void BeginStop(Task* t, int64_t grace_ms, const std::string& reason, bool runtime_exceeded);
  // A task whose image is still pulling ends CANCELLED at once (true); false when it is not
  // pulling. REQUIRES: mu_ held. The caller tells whoever must hear of it.
  bool EndPulling(Task* t, const std::string& reason);
  void Finish(Task* t, std::vector<std::pair<Listener, TaskStatus>>* out);
  void Forget();
  Result<TaskStatus> Spawn(const TaskSpec& spec);
  // Image tasks (task_runner_container.cc): registers the task PULLING and starts its pull.
  Result<TaskStatus> StartContainer(const TaskSpec& spec);
  // The pull thread of task `id`'s attempt: image, bundle, shim; then RUNNING or a final status.
  void RunContainer(const std::string& id, int32_t attempt);
  // The slice watchdog killed a process of the task holding `slice_key`: fail the task with
  // `reason` (SliceLedgers' bypass handler).
  void FailSlice(const std::string& slice_key, const std::string& reason);
  // Tells the listener how far task `id`'s image pull is (a PULLING status), while it pulls.
  void ReportPull(const std::string& id, int32_t attempt, const std::string& image, int64_t done,
                  int64_t total);
  // Tells the listener that task `id`'s container runs, once the shim created `marker`; returns
  // without a word if the task ends first.
  void ReportWhenStarted(const std::string& id, int32_t attempt, const std::string& marker);
  // REQUIRES: mu_ held. Ends a task that never got a process (its start failed, or it was
  // stopped while pulling) with `phase`, `exit_code` and `reason`.
  void FinishUnstarted(Task* t, TaskPhase phase, int exit_code, const std::string& reason,
                       std::vector<std::pair<Listener, TaskStatus>>* out);
  // A task record for `spec`: its directory created, its status naming it.
  Result<std::unique_ptr<Task>> NewTask(const TaskSpec& spec) const;
  // REQUIRES: mu_ held. Puts `task` in tasks_ (replacing an ended attempt); returns it.
  Task* Insert(std::unique_ptr<Task> task);
  // REQUIRES: mu_ held. Adds a spawned task's pid to the supervisor and records it RUNNING.
  void Supervise(Task* t, pid_t pid);
  // REQUIRES: mu_ held. What the task's `state` file records of it (task_record.h); also what
  // decides whether a restarted agent could re-adopt it.
  TaskRecord RecordOf(const Task& t) const;
  // The network a task of `spec` runs in here: its pool's, else the node's default (a task with
  // no sandbox and no runtime: the node's own).
  net::NetworkMode NetworkFor(const TaskSpec& spec) const;
  // Why a task of `spec` cannot publish its ports here (its network is none); "" when it can.
  std::string PortsRefused(const TaskSpec& spec) const;
  // Where a started task's declared ports are reached (TaskStatus::endpoints).
  std::vector<TaskEndpoint> EndpointsOf(const Task& t) const;
  // REQUIRES: mu_ held. Watches `pid` through a pidfd on the supervisor's epoll.
  void WatchPid(Task* t, pid_t pid);
  // REQUIRES: mu_ held. Hands `st` to its owner's listener, or holds it until there is one.
  void Deliver(const TaskStatus& st, std::vector<std::pair<Listener, TaskStatus>>* out);

  TaskRunnerOptions options_;
  int epoll_fd_ = -1;
  int wake_fd_ = -1;
  std::mutex start_mu_;    // serializes Start()
  mutable std::mutex mu_;  // guards everything below
  std::condition_variable ended_;
  std::map<std::string, std::unique_ptr<Task>> tasks_;  // by task id
  std::vector<std::string> finished_order_;
  std::map<std::string, Listener> listeners_;
  // Containers of ended tasks, released (runc delete, unmount) by the supervisor after it lets
  // go of mu_.
  std::vector<std::unique_ptr<oci::PreparedContainer>> to_release_;
  // Pull threads of image tasks; joined when done (next StartContainer) or at destruction.
  struct PullThread {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };
  std::vector<PullThread> pulls_;  // guarded by start_mu_
  bool stopping_ = false;
  bool leaving_ = false;  // Leave(): tasks outlive this runner
  // Statuses of an owner with no listener yet (Recover() runs before the agent sets one).
  std::map<std::string, std::vector<TaskStatus>> undelivered_;
  std::thread thread_;
};

}  // namespace gpupool::agent
