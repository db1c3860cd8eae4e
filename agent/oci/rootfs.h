// TaskRootfs: the root file system a task's container starts from.
//
// Image tasks: the image's unpacked rootfs (agent/image, shared by every task of the image and
// never written) is the lower layer of an overlayfs whose upper and work dirs live in the task's
// own directory, owned by the task's host uid: the task may write anywhere in "/", its writes
// land in <task dir>/upper and vanish with it, and the image stays as it was. Where the kernel
// refuses the overlay mount (no overlay module, a file system overlay does not take as upper),
// the fallback is the image rootfs itself, read-only (root.readonly in the spec), with only /tmp
// (tmpfs) and the task's declared volumes writable; `overlay` says which one was used.
//
// Plain-command tasks (no image): a skeleton root in <task dir>/hostroot holding the host's
// top-level symlinks (bin -> usr/bin …) and empty mount points for `host_dirs` (default /usr,
// /etc, /opt), which the spec bind-mounts read-only from the host. Nothing else of the host —
// /home, /root, /var, /srv, /run, the agent's data dir — exists inside.
//
// Thread safety: functions, safe from any thread for distinct task dirs.
#pragma once

#include <string>
#include <vector>

#include "agent/oci/spec.h"
#include "base/status.h"

namespace gpupool::agent::oci {

struct TaskRootfs {
  std::string path;      // root.path for the spec
  bool overlay = false;  // false: `path` is the shared image rootfs, to be mounted read-only
  bool readonly = true;  // root.readonly for the spec
  std::vector<BindMount> mounts;  // for a host root: the read-only binds of host_dirs
  std::string detail;             // why the overlay was not used, when it was not
};

// REQUIRES: task_dir exists (root-owned); uid/gid are the task's host ids.
Result<TaskRootfs> MountImageRootfs(const std::string& image_rootfs, const std::string& task_dir,
                                    uint32_t uid, uint32_t gid);
// The skeleton is owned by the task's uid so the runtime (root in the task's user namespace)
// can make mount points for volumes in it before it is remounted read-only.
Result<TaskRootfs> HostRootfs(const std::string& task_dir, uint32_t uid, uint32_t gid,
                              const std::vector<std::string>& host_dirs = {"/usr", "/etc", "/opt"});
// Unmounts an overlay made by MountImageRootfs (lazily: a process still inside keeps its view).
Status UnmountRootfs(const TaskRootfs& rootfs);

// Unmounts (lazily) every mount point at or below `dir`, deepest first, as /proc/self/mountinfo
// lists them: at agent start, the task root file systems a crashed agent left mounted under
// <data_dir>/tasks. Returns how many it unmounted; the first error names the mount point.
// Mount points at or below one of `keep` (a re-adopted task's directory) stay.
Result<int> UnmountAllUnder(const std::string& dir, const std::vector<std::string>& keep = {});

}  // namespace gpupool::agent::oci
