#include "agent/oci/rootfs.h"

#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

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

Result<int> UnmountAllUnder(const std::string& dir, const std::vector<std::string>& keep) {
  std::error_code ec;
  const std::string root = fs::weakly_canonical(dir, ec).string();
  if (root.empty() || root == "/") {
    return Status::InvalidArgument("unmount under '" + dir + "': not a task directory");
  }
  std::ifstream in("/proc/self/mountinfo");
  if (!in) return Status::Internal("cannot read /proc/self/mountinfo");
  std::vector<std::string> points;
  for (std::string line; std::getline(in, line);) {
    // Field 5 is the mount point, with spaces and the like escaped as \040 (octal).
    std::istringstream fields(line);
    std::string id, parent, devno, fs_root, point;
    if (!(fields >> id >> parent >> devno >> fs_root >> point)) continue;
    std::string unescaped;
    for (size_t i = 0; i < point.size(); ++i) {
      if (point[i] == '\\' && i + 3 < point.size()) {
        unescaped += static_cast<char>(std::stoi(point.substr(i + 1, 3), nullptr, 8));
        i += 3;
      } else {
        unescaped += point[i];
      }
    }
    const auto under = [&](const std::string& top) {
      return unescaped == top || unescaped.rfind(top + "/", 0) == 0;
    };
    if (!under(root)) continue;
    bool kept = false;
    for (const std::string& k : keep) kept = kept || under(fs::weakly_canonical(k, ec).string());
    if (!kept) points.push_back(unescaped);
  }
  // Deepest first (a volume bound inside a rootfs before the rootfs itself).
  std::sort(points.begin(), points.end(),
            [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
  int count = 0;
  for (const std::string& p : points) {
    if (umount2(p.c_str(), MNT_DETACH) != 0) {
      if (errno == EINVAL || errno == ENOENT) continue;  // gone already (a parent took it)
      return Status::Internal("umount " + p + ": " + strerror(errno));
    }
    ++count;
  }
  return count;
}

Status UnmountRootfs(const TaskRootfs& rootfs) {
  if (!rootfs.overlay) return Status::Ok();
  if (umount2(rootfs.path.c_str(), MNT_DETACH) != 0 && errno != EINVAL && errno != ENOENT) {
    return Status::Internal("umount " + rootfs.path + ": " + strerror(errno));
  }
  return Status::Ok();
}

}  // namespace gpupool::agent::oci
