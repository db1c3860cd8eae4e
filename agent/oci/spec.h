// RuntimeSpec: the OCI runtime spec (a bundle's config.json) the agent writes for one task.
//
// What it confines, and how (runtime-spec 1.0.2, as runc 1.1 reads it):
//  - User namespace: root (0) in the container is `host_uid`/`host_gid` on the node, an
//    unprivileged id from the agent's UidMap (agent/sandbox/uids.h); `id_count` ids are mapped
//    from there (1 for a pool uid: every other id shows as nobody/65534 inside).
//  - Namespaces: pid, ipc, uts, mount, cgroup, user, and network — a fresh, empty one (loopback
//    only, down) for Network::kNone; a prepared one (`netns_path`) for kIsolated; the node's for
//    kHost (admin only; the caller decides who may).
//  - Seccomp: `seccomp` (ConvertSeccompProfile's output); null only when the caller says so.
//  - noNewPrivileges; capabilities: `capabilities` in every set but ambient (default: the
//    container engines' default set, DefaultCapabilities()).
//  - Root: `rootfs` (the task's overlay of the image, or the host skeleton of rootfs.h);
//    read-only when `rootfs_readonly`. /tmp is a tmpfs; /proc, /dev, /dev/pts, /dev/shm,
//    /dev/mqueue, /sys (read-only) and /sys/fs/cgroup (read-only) are the runtime's usual ones;
//    the kernel's sensitive /proc and /sys files are masked or read-only (runc's default list).
//  - Cgroup: `cgroups_path` (runc's cgroupfs driver) with memory (swap limited to the same value:
//    no swap), CPU (CFS quota per 100 ms period) and pids limits. These are the spec's
//    controller-neutral fields, which the runtime writes to cgroup v1 or v2 files; on a v2 host
//    `cgroup_v2` also sets linux.resources.unified memory.oom.group=1 (an OOM kills the whole
//    task, not one process of it), a key v1 hosts must not get.
//  - Devices: the default ones the runtime always creates, plus each of `devices` (a granted GPU,
//    its control nodes) as linux.devices and in the resources.devices allow-list, after a
//    deny-all. Nothing else is reachable.
//  - GPU driver: each of `driver_files` (the host driver's user-space libraries and binaries) is
//    bind-mounted read-only at the same path — the NVIDIA Container Toolkit's / CDI's way — and
//    the libraries' directories are appended to LD_LIBRARY_PATH, after the image's own, since
//    the image's ld.so.cache does not list them.
//  - Interposer: when `interposer_library` is set, it is bind-mounted read-only at the same path
//    and put in LD_PRELOAD, and its socket's directory is bind-mounted read-only at the same path
//    with GPUPOOL_LEDGER_SOCKET (ledger::kSocketEnv) pointing at it.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "agent/net/task_network.h"
#include "base/status.h"

namespace gpupool::agent::oci {

// none / isolated / host (agent/net/task_network.h says what each may reach).
using Network = net::NetworkMode;

struct BindMount {
  std::string source;       // host path
  std::string destination;  // path in the container
  bool read_only = true;
  // Read-only all the way down ("rro", runc 1.1 on Linux ≥ 5.12): "ro" alone makes a bind
  // read-only at its top, and a mount below `source` (an operator's dataset may hold some) would
  // stay writable. A non-recursive bind is no way out: in the task's user namespace the kernel
  // refuses one over locked child mounts (EINVAL).
  bool recursive_read_only = false;
};

struct DeviceNode {
  std::string path;  // host path; the same path in the container
  char type = 'c';   // 'c' or 'b'
  int64_t major = 0;
  int64_t minor = 0;
  uint32_t file_mode = 0666;
};

// "c 195:0" from stat(2); InvalidArgument naming the path when it is not a device.
Result<DeviceNode> DeviceNodeFor(const std::string& path);

// CHOWN DAC_OVERRIDE FOWNER FSETID KILL NET_BIND_SERVICE SETFCAP SETGID SETPCAP SETUID
// SYS_CHROOT — containers.conf's default_capabilities (Podman, CRI-O), as "CAP_…".
std::vector<std::string> DefaultCapabilities();

struct RuntimeSpecInput {
  std::string hostname = "task";
  std::vector<std::string> args;  // argv[0] is resolved inside the container (PATH)
  std::vector<std::string> env;   // "K=V"
  std::string cwd = "/";
  std::string rootfs;
  bool rootfs_readonly = true;
  std::vector<BindMount> mounts;        // volumes, the task's work dir …
  std::vector<std::string> hide_paths;  // masked (files read as empty, directories as empty)
  uint32_t host_uid = 0;
  uint32_t host_gid = 0;
  uint32_t id_count = 1;
  int64_t memory_bytes = 0;  // 0 = no limit
  int64_t cpu_milli = 0;     // 0 = no limit
  int64_t pids_max = 4096;   // 0 = no limit
  int64_t nofile = 0;        // RLIMIT_NOFILE (soft = hard); 0 = the runtime's, inherited
  bool cgroup_v2 = false;
  std::string cgroups_path;  // "/gpupool/<task>"
  std::vector<DeviceNode> devices;
  std::vector<std::string> driver_files;
  std::string interposer_library;
  std::string interposer_socket;
  Network network = Network::kNone;
  std::string netns_path;  // kIsolated
  std::vector<std::string> capabilities = DefaultCapabilities();
  nlohmann::json seccomp;  // null = no filter (only for a caller that says why)
};

// InvalidArgument naming the field for a spec that must not run (no args, uid 0, relative
// paths, kIsolated without a netns path …).
Result<nlohmann::json> BuildRuntimeSpec(const RuntimeSpecInput& input);

// Writes <bundle>/config.json (mode 0600: the environment may carry secrets).
Status WriteBundleConfig(const std::string& bundle, const nlohmann::json& spec);

}  // namespace gpupool::agent::oci

namespace gpupool::agent::oci {

// What a task sets over its image's config (TaskTemplate: command, entrypoint, working_dir, env).
struct ImageTaskOverrides {
  std::vector<std::string> args;        // replace the image's Cmd (empty: keep it)
  std::vector<std::string> entrypoint;  // replaces Entrypoint and drops the image's Cmd
  std::string working_dir;              // replaces WorkingDir (empty: keep it)
  std::vector<std::string> env;         // "K=V", each over the image's of the same name
};

// Fills args, env and cwd from an image config (the config blob's "config": Entrypoint, Cmd,
// Env, WorkingDir) the way container engines do: the task's args replace Cmd; its entrypoint
// replaces Entrypoint and, as with Docker's --entrypoint and a Kubernetes container's command,
// the image's Cmd with it; a task env entry overrides the image's of the same name.
// InvalidArgument when nothing names a program.
Status ApplyImageConfig(const std::string& image_config_json, const ImageTaskOverrides& task,
                        RuntimeSpecInput* input);

}  // namespace gpupool::agent::oci
