#include "agent/oci/container.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "pool/volumes.h"

namespace gpupool::agent::oci {

PreparedContainer::~PreparedContainer() { Release(); }

void PreparedContainer::Release() {
  if (released_) return;
  released_ = true;
  (void)launcher_.Delete(id_);
  (void)UnmountRootfs(rootfs_);
  if (!work_dir_.empty()) {
    // Handed back to root before the uid is: a later holder of the uid cannot get in.
    [[maybe_unused]] const int rc = chown(work_dir_.c_str(), 0, 0);
    chmod(work_dir_.c_str(), 0700);
  }
  if (has_identity_ && uids_) uids_->Release(identity_);
  network_.reset();
  lease_ = image::ImageLease();
}

namespace {

// <task dir>/work, made (0700, owned by the task) if missing: a plain command's working directory.
Result<std::string> PlainWorkDir(const std::string& task_dir, const sandbox::TaskIdentity& who) {
  const std::string work = task_dir + "/work";
  if (mkdir(work.c_str(), 0700) != 0 && errno != EEXIST) {
    return Status::Internal("mkdir " + work + ": " + std::strerror(errno));
  }
  if (chown(work.c_str(), who.uid, who.gid) != 0 || chmod(work.c_str(), 0700) != 0) {
    return Status::Internal("chown " + work + ": " + std::strerror(errno));
  }
  return work;
}

// A regular file at <rootfs>/etc/resolv.conf for the name servers' bind. The container's root
// cannot create it (the image's /etc belongs to an id its user namespace does not map), so the
// agent does, in the task's overlay (its upper dir: the image is untouched); a symlink there is
// replaced the same way. The read-only fallback root takes the bind only where the file exists;
// a plain command's host root where the host's /etc it binds has a regular resolv.conf (a
// symlink, systemd-resolved's, would lead the bind out of the container's view).
bool ResolvConfMountPoint(const TaskRootfs& rootfs) {
  const std::string etc = rootfs.path + "/etc";
  const std::string file = etc + "/resolv.conf";
  struct stat st {};
  if (lstat(file.c_str(), &st) == 0 && S_ISREG(st.st_mode)) return true;
  for (const BindMount& m : rootfs.mounts) {
    if (m.destination != "/etc") continue;
    const std::string host = m.source + "/resolv.conf";
    return lstat(host.c_str(), &st) == 0 && S_ISREG(st.st_mode);
  }
  if (!rootfs.overlay) return false;
  std::error_code ec;
  std::filesystem::create_directories(etc, ec);
  if (lstat(file.c_str(), &st) == 0) std::filesystem::remove(file, ec);
  const int fd = open(file.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) return false;
  close(fd);
  return true;
}

// Makes `path` (absolute in the container) a directory in the task's root file system, as the
// node's root: the container's root cannot (the image's directories belong to an id its user
// namespace does not map). Only in an overlay, whose upper dir is the task's own; the read-only
// fallback root takes a volume only where the image has the directory. Each component is
// checked with lstat: a symlink in the image is refused, never followed (it could point the
// node's root anywhere on the host).
Status VolumeMountPoint(const TaskRootfs& rootfs, const std::string& path) {
  std::string at = rootfs.path;
  size_t start = 1;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string::npos) end = path.size();
    at += "/" + path.substr(start, end - start);
    const std::string shown = path.substr(0, end);
    struct stat st {};
    if (lstat(at.c_str(), &st) == 0) {
      if (S_ISLNK(st.st_mode)) {
        return Status::FailedPrecondition("'" + shown + "' is a symlink in the image");
      }
      if (!S_ISDIR(st.st_mode)) {
        return Status::FailedPrecondition("'" + shown + "' is not a directory in the image");
      }
    } else if (!rootfs.overlay) {
      return Status::FailedPrecondition(
          "the image has no directory '" + shown +
          "' and this node's task root file systems are not overlays (" + rootfs.detail + ")");
    } else if (mkdir(at.c_str(), 0755) != 0 && errno != EEXIST) {
      return Status::Internal("cannot make '" + shown + "': " + std::strerror(errno));
    }
    start = end + 1;
  }
  return Status::Ok();
}

}  // namespace

Result<std::vector<BindMount>> ContainerFactory::Volumes(const ContainerRequest& request,
                                                         const TaskRootfs& rootfs,
                                                         const sandbox::TaskIdentity& who) const {
  std::vector<BindMount> out;
  int scratch = 0;
  // In path order, so a volume inside another is mounted after it.
  for (const auto& [path, dataset] : request.task_volumes) {
    const std::string what = "volume " + path;
    // gpupoold checked both at submission; checked again here, before the node's root walks the
    // path (a ".." would lead it out of the task's root file system).
    if (Status st = CheckVolumeMountPath(path); !st.ok()) return st.WithContext(what);
    if (Status st = dataset.empty() ? Status::Ok() : CheckDatasetName(dataset); !st.ok()) {
      return st.WithContext(what + ": dataset");
    }
    std::string source;
    if (!dataset.empty()) {
      auto it = options_.datasets.find(dataset);
      if (it == options_.datasets.end()) {
        std::string offered;
        for (const auto& [name, dir] : options_.datasets) {
          offered += (offered.empty() ? "" : ", ") + name;
        }
        return Status::FailedPrecondition(what + ": dataset '" + dataset +
                                          "' is not offered by this node (datasets: " +
                                          (offered.empty() ? "none" : offered) + ")");
      }
      struct stat st {};
      if (stat(it->second.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
        return Status::FailedPrecondition(what + ": dataset '" + dataset + "' (" + it->second +
                                          ") is not a directory on this node");
      }
      source = it->second;
    } else {
      // Owned by the task's uid (root in its container), nobody else's: 0700.
      const std::string volumes = request.task_dir + "/volumes";
      source = volumes + "/" + std::to_string(scratch++);
      if ((mkdir(volumes.c_str(), 0755) != 0 && errno != EEXIST) ||
          (mkdir(source.c_str(), 0700) != 0 && errno != EEXIST) ||
          chown(source.c_str(), who.uid, who.gid) != 0) {
        return Status::Internal(what + ": cannot make " + source + ": " + std::strerror(errno));
      }
    }
    Status st = VolumeMountPoint(rootfs, path);
    if (!st.ok()) return st.WithContext(what);
    // A dataset is read-only with every mount below it (spec.h, BindMount).
    out.push_back(BindMount{source, path, !dataset.empty(), !dataset.empty()});
  }
  return out;
}

ContainerFactory::ContainerFactory(ContainerFactoryOptions options)
    : options_(std::move(options)) {}

void PreparedContainer::Abandon() {
  released_ = true;
  // Its namespace stays for the next agent process; so does the lease's pin (this process's
  // store goes away with it).
  if (network_) network_->Abandon();
}

Result<std::unique_ptr<PreparedContainer>> ContainerFactory::Adopt(
    const AdoptedContainer& a) const {
  if (a.id.empty() || a.task_dir.empty() || a.task_dir[0] != '/') {
    return Status::InvalidArgument("container: id and an absolute task_dir are required");
  }
  if (!options_.uids) return Status::FailedPrecondition("container: no uid map");
  std::unique_ptr<PreparedContainer> c(new PreparedContainer(options_.launcher));
  c->id_ = a.id;
  c->bundle_ = a.task_dir;
  c->uids_ = options_.uids;
  c->released_ = false;
  if (!a.manifest_digest.empty()) {
    if (!options_.store) return Status::FailedPrecondition("container: no image store");
    auto lease = options_.store->Hold(a.manifest_digest);
    if (!lease.ok()) return lease.status().WithContext("image");
    c->lease_ = std::move(*lease);
  }
  auto identity = options_.uids->Reserve(a.tenant, a.uid, a.tenant_uid);
  if (!identity.ok()) return identity.status().WithContext("uid");
  c->identity_ = *identity;
  c->has_identity_ = true;
  c->rootfs_.overlay = a.overlay;
  c->rootfs_.path = a.overlay ? a.task_dir + "/rootfs" : c->lease_.image().rootfs;
  if (a.manifest_digest.empty()) c->work_dir_ = a.task_dir + "/work";  // a plain command's
  if (a.network_slot >= 0) {
    if (!options_.networks) return Status::FailedPrecondition("network: isolated networks are off");
    GPUPOOL_ASSIGN_OR_RETURN(
        c->network_,
        net::NetworkLease::Adopt(options_.networks, a.network_slot, a.id, a.published));
  }
  return c;
}

Result<std::unique_ptr<PreparedContainer>> ContainerFactory::Prepare(
    const ContainerRequest& request) const {
  if (request.id.empty() || request.task_dir.empty() || request.task_dir[0] != '/') {
    return Status::InvalidArgument("container: id and an absolute task_dir are required");
  }
  if (!options_.uids) return Status::FailedPrecondition("container: no uid map");
  std::unique_ptr<PreparedContainer> c(new PreparedContainer(options_.launcher));
  c->id_ = request.id;
  c->bundle_ = request.task_dir;
  c->uids_ = options_.uids;

  // 1. The image, held for as long as the task lives.
  if (!request.image.empty()) {
    if (!options_.store) return Status::FailedPrecondition("container: no image store");
    auto lease = options_.store->Pull(request.image, request.credential, request.on_pull_progress);
    if (!lease.ok()) return lease.status().WithContext("image");
    c->lease_ = std::move(*lease);
  }
  // 2. The task's own unprivileged ids.
  auto identity = request.tenant_uid ? options_.uids->AcquireShared(request.tenant)
                                     : options_.uids->Acquire(request.tenant);
  if (!identity.ok()) return identity.status().WithContext("uid");
  c->identity_ = *identity;
  c->has_identity_ = true;
  // 3. Its root file system.
  auto rootfs = request.image.empty() ? HostRootfs(request.task_dir, c->identity_.uid,
                                                   c->identity_.gid, options_.host_dirs)
                                      : MountImageRootfs(c->lease_.image().rootfs, request.task_dir,
                                                         c->identity_.uid, c->identity_.gid);
  if (!rootfs.ok()) return rootfs.status().WithContext("rootfs");
  c->rootfs_ = *rootfs;
  if (!request.task_volumes.empty() && request.image.empty()) {
    return Status::InvalidArgument("volume: a plain command takes no volumes");
  }
  auto volumes = Volumes(request, c->rootfs_, c->identity_);
  if (!volumes.ok()) return volumes.status();
  // 4. The spec.
  RuntimeSpecInput& in = c->input_;
  if (!request.image.empty()) {
    Status st =
        ApplyImageConfig(c->lease_.image().config_json,
                         {request.args, request.entrypoint, request.working_dir, request.env}, &in);
    if (!st.ok()) return st.WithContext("spec");
  } else {
    if (request.args.empty()) return Status::InvalidArgument("spec: a plain command needs args");
    in.args = request.args;
    in.env = request.env;
    bool has_path = false, has_home = false;
    for (const auto& kv : in.env) {
      has_path = has_path || kv.rfind("PATH=", 0) == 0;
      has_home = has_home || kv.rfind("HOME=", 0) == 0;
    }
    if (!has_path) in.env.insert(in.env.begin(), "PATH=/usr/local/bin:/usr/bin:/bin");
    // Its one writable directory (besides /tmp), its cwd and $HOME: <task dir>/work, the task's
    // own, 0700.
    auto work = PlainWorkDir(request.task_dir, c->identity_);
    if (!work.ok()) return work.status().WithContext("rootfs");
    c->rootfs_.mounts.push_back({*work, *work, false});
    c->work_dir_ = *work;
    in.cwd = *work;
    if (!has_home) in.env.push_back("HOME=" + *work);
  }
  in.hostname = "task";
  in.rootfs = c->rootfs_.path;
  in.rootfs_readonly = c->rootfs_.readonly;
  in.mounts = c->rootfs_.mounts;
  in.mounts.insert(in.mounts.end(), request.volumes.begin(), request.volumes.end());
  in.mounts.insert(in.mounts.end(), volumes->begin(), volumes->end());
  if (request.gpu && !options_.simulated_gpu_state.empty()) {
    in.mounts.push_back({options_.simulated_gpu_state, options_.simulated_gpu_state, false});
  }
  in.hide_paths = options_.hide_paths;
  in.host_uid = c->identity_.uid;
  in.host_gid = c->identity_.gid;
  in.memory_bytes = request.memory_bytes;
  in.cpu_milli = request.cpu_milli;
  in.pids_max = request.pids_max;
  in.cgroup_v2 = options_.cgroup_v2;
  in.cgroups_path = options_.cgroup_parent + "/" + request.id;
  for (const auto& path : request.device_files) {
    auto dev = DeviceNodeFor(path);
    if (!dev.ok()) return dev.status().WithContext("spec");
    in.devices.push_back(*dev);
  }
  in.driver_files = request.driver_files;
  in.interposer_library = request.interposer_library;
  in.interposer_socket = request.interposer_socket;
  in.network = request.network;
  in.netns_path = request.netns_path;
  if (in.network == Network::kIsolated && in.netns_path.empty()) {
    if (!options_.networks) {
      return Status::FailedPrecondition(
          "network: isolated: this node offers no isolated task networks (network.isolated is "
          "off, or could not be set up: see the agent's log)");
    }
    auto lease = net::NetworkLease::Take(options_.networks, request.id, request.ports);
    if (!lease.ok()) return lease.status();
    c->network_ = std::move(lease).value();
    in.netns_path = c->network_->network().netns_path;
    const std::string& resolv = c->network_->network().resolv_conf;
    if (!resolv.empty() && ResolvConfMountPoint(c->rootfs_)) {
      in.mounts.push_back({resolv, "/etc/resolv.conf", true});
    }
  }
  if (request.seccomp) {
    auto seccomp =
        LoadSeccompProfile(options_.seccomp_profile, SeccompTarget::ThisNode(in.capabilities));
    if (!seccomp.ok()) return seccomp.status().WithContext("seccomp");
    in.seccomp = *seccomp;
  }
  auto spec = BuildRuntimeSpec(in);
  if (!spec.ok()) return spec.status().WithContext("spec");
  Status st = WriteBundleConfig(c->bundle_, *spec);
  if (!st.ok()) return st.WithContext("spec");
  return c;
}

}  // namespace gpupool::agent::oci
