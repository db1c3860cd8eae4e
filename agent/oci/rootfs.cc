#include "agent/oci/rootfs.h"

#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

namespace gpupool::agent::oci {

namespace fs = std::filesystem;

Result<TaskRootfs> MountImageRootfs(const std::string& image_rootfs, const std::string& task_dir,
                                    uint32_t uid, uint32_t gid) {
  if (!fs::is_directory(image_rootfs)) {
    return Status::NotFound("image rootfs " + image_rootfs + " does not exist");
  }
  std::string upper = task_dir + "/upper", work = task_dir + "/overlay-work",
              merged = task_dir + "/rootfs";
  std::error_code ec;
  for (const auto& d : {upper, work, merged}) {
    fs::create_directories(d, ec);
    if (ec) return Status::Internal("mkdir " + d + ": " + ec.message());
  }
  // The task's root directory is the upper dir's: owned by the task's uid, so root in the
  // container may create files in "/".
  if (chown(upper.c_str(), uid, gid) != 0 || chmod(upper.c_str(), 0755) != 0) {
    return Status::Internal("chown " + upper + ": " + strerror(errno));
  }
  chmod(task_dir.c_str(), 0711);
  std::string options = "lowerdir=" + image_rootfs + ",upperdir=" + upper + ",workdir=" + work;
  TaskRootfs out;
  if (mount("overlay", merged.c_str(), "overlay", MS_NODEV, options.c_str()) == 0) {
    out.path = merged;
    out.overlay = true;
    out.readonly = false;
    return out;
  }
  int err = errno;
  if (err != ENODEV && err != EINVAL && err != EPERM && err != ENOTSUP && err != EOPNOTSUPP) {
    return Status::Internal("mount overlay on " + merged + ": " + strerror(err));
  }
  out.path = image_rootfs;
  out.overlay = false;
  out.readonly = true;
  out.detail = std::string("overlay refused (") + strerror(err) +
               "): image rootfs read-only, /tmp and volumes writable";
  return out;
}

Result<TaskRootfs> HostRootfs(const std::string& task_dir, uint32_t uid, uint32_t gid,
                              const std::vector<std::string>& host_dirs) {
  std::string root = task_dir + "/hostroot";
  std::error_code ec;
  fs::create_directories(root, ec);
  if (ec) return Status::Internal("mkdir " + root + ": " + ec.message());
  chmod(root.c_str(), 0755);
  chmod(task_dir.c_str(), 0711);
  TaskRootfs out;
  out.path = root;
  out.readonly = true;
  // The host's top-level symlinks (merged /usr: bin -> usr/bin, lib -> usr/lib …).
  for (const auto& entry : fs::directory_iterator("/", ec)) {
    if (!entry.is_symlink()) continue;
    fs::path target = fs::read_symlink(entry.path(), ec);
    if (ec) continue;
    fs::path link = fs::path(root) / entry.path().filename();
    if (!fs::exists(fs::symlink_status(link))) fs::create_symlink(target, link, ec);
  }
  for (const char* d : {"proc", "sys", "dev", "tmp"}) fs::create_directories(root + "/" + d, ec);
  for (const auto& d : host_dirs) {
    if (!fs::is_directory(d)) continue;
    fs::create_directories(root + d, ec);
    out.mounts.push_back(BindMount{d, d, true});
  }
  for (const auto& entry : fs::recursive_directory_iterator(root, ec)) {
    if (entry.is_directory(ec) && !entry.is_symlink(ec)) {
      lchown(entry.path().c_str(), uid, gid);
    }
  }
  if (lchown(root.c_str(), uid, gid) != 0) {
    return Status::Internal("chown " + root + ": " + strerror(errno));
  }
  return out;
}

Status UnmountRootfs(const TaskRootfs& rootfs) {
  if (!rootfs.overlay) return Status::Ok();
  if (umount2(rootfs.path.c_str(), MNT_DETACH) != 0 && errno != EINVAL && errno != ENOENT) {
    return Status::Internal("umount " + rootfs.path + ": " + strerror(errno));
  }
  return Status::Ok();
}

}  // namespace gpupool::agent::oci
