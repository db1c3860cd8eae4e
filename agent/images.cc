#include "agent/images.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "agent/companion.h"

namespace gpupool::agent {
namespace {

namespace fs = std::filesystem;

bool IsExecutable(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(path.c_str(), X_OK) == 0;
}

// `tool` as execvp would find it on this process's PATH, or "".
std::string OnPath(const std::string& tool) {
  if (tool.find('/') != std::string::npos) return IsExecutable(tool) ? tool : "";
  const char* path = std::getenv("PATH");
  std::string p = path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin";
  p += ":/usr/sbin:/sbin";  // runc is in /usr/sbin on Debian
  size_t start = 0;
  while (start <= p.size()) {
    size_t end = p.find(':', start);
    if (end == std::string::npos) end = p.size();
    const std::string candidate = p.substr(start, end - start) + "/" + tool;
    if (end > start && IsExecutable(candidate)) return candidate;
    start = end + 1;
  }
  return "";
}

std::string Joined(const std::vector<std::string>& dirs) {
  std::string out;
  for (const std::string& d : dirs) out += (out.empty() ? "" : ", ") + d;
  return out.empty() ? "nothing of the host" : out;
}

}  // namespace

std::string DefaultShim(const std::string& agent_binary) {
  return FindCompanion(agent_binary, "gpupool-oci-shim", "agent", /*executable=*/true);
}

Result<std::shared_ptr<oci::ContainerFactory>> OpenContainers(
    const ImageOptions& options, const std::shared_ptr<sandbox::Sandbox>& sandbox,
    const std::string& data_dir, const std::string& agent_binary,
    const std::shared_ptr<net::TaskNetworks>& networks) {
  if (!sandbox) {
    return Status::FailedPrecondition(
        "images need the sandbox (sandbox.enabled: true): its uid pool gives each container its "
        "own unprivileged ids");
  }
  std::string runc = OnPath(options.runc);
  const std::string skopeo = OnPath("skopeo"), umoci = OnPath("umoci");
  for (const auto& [name, found] :
       {std::pair{options.runc, runc}, std::pair{std::string("skopeo"), skopeo},
        std::pair{std::string("umoci"), umoci}}) {
    if (found.empty()) {
      return Status::FailedPrecondition("images: '" + name +
                                        "' was not found (scripts/install-deps installs runc, "
                                        "skopeo and umoci)");
    }
  }
  const std::string shim = options.shim.empty() ? DefaultShim(agent_binary) : options.shim;
  if (shim.empty() || !IsExecutable(shim)) {
    return Status::FailedPrecondition(
        "images: the OCI shim " +
        (shim.empty() ? std::string("gpupool-oci-shim was not found beside the agent")
                      : "'" + shim + "' is not an executable file") +
        " (set images.shim)");
  }
  // runc sets a container's root up from inside its user namespace, where the agent's root is
  // nobody: the path to <data_dir>/tasks/<task>/rootfs must be searchable by others. Search
  // only (o+x, not o+r): nothing can be listed, and tasks never see the data dir anyway (their
  // own root file system; the sandbox hides it from plain commands). A 0700 data dir — systemd's
  // StateDirectory default — failed every image task with "error preparing rootfs: … permission
  // denied".
  for (const std::string& dir : {data_dir, data_dir + "/tasks"}) {
    std::error_code mk;
    fs::create_directories(dir, mk);
    struct stat st {};
    if (stat(dir.c_str(), &st) != 0 || chmod(dir.c_str(), (st.st_mode & 07777) | 0011) != 0) {
      return Status::FailedPrecondition("images: cannot make " + dir +
                                        " searchable for containers: " + std::strerror(errno));
    }
  }
  image::ImageStoreOptions so;
  so.root = options.dir.empty() ? data_dir + "/images" : options.dir;
  // A plain command sees the host_dirs read-only: none may hold the agent's data (its node key,
  // other tasks' directories) or the image store (other tenants' private images).
  for (const std::string& host_dir : sandbox->options().host_dirs) {
    for (const auto& [what, dir] :
         {std::pair{"data dir", data_dir}, std::pair{"image store", so.root}}) {
      std::error_code abs_ec;
      const fs::path inside = fs::absolute(dir, abs_ec).lexically_normal();
      const fs::path rel = inside.lexically_relative(fs::path(host_dir));
      if (!rel.empty() && *rel.begin() != "..") {
        return Status::FailedPrecondition("sandbox.host_dirs: " + host_dir + " holds the agent's " +
                                          what + " " + inside.string() +
                                          "; plain commands would see it (move it, or drop " +
                                          host_dir + " from host_dirs)");
      }
    }
  }
  so.budget_bytes = options.budget_mib << 20;
  so.skopeo = skopeo;
  so.umoci = umoci;
  so.tls_verify = options.tls_verify;
  so.tag_ttl_ms = options.tag_ttl_ms;
  auto store = image::ImageStore::Open(so);
  if (!store.ok()) return store.status().WithContext("images");
  oci::ContainerFactoryOptions fo;
  fo.store = *store;
  fo.uids = sandbox->uids();
  std::error_code ec;
  fo.launcher = oci::LauncherOptions{runc, fs::absolute(data_dir, ec).string() + "/runc", shim};
  fo.seccomp_profile = options.seccomp_profile;
  fo.cgroup_parent = "/" + sandbox->options().cgroup_parent + "-containers";
  fo.cgroup_v2 = sandbox->layout().OnV2(sandbox::Controller::kMemory);
  fo.hide_paths = sandbox->options().hide_paths;
  fo.host_dirs = sandbox->options().host_dirs;
  fo.networks = networks;
  fo.datasets = options.datasets;
  fo.simulated_gpu_state = options.simulated_gpu_state;
  return std::make_shared<oci::ContainerFactory>(std::move(fo));
}

sandbox::Capability ImagesCapability(const std::shared_ptr<oci::ContainerFactory>& containers,
                                     const std::string& why) {
  if (!containers) return {"images", false, why};
  const auto& o = containers->options();
  return {"images", true,
          "OCI images pulled once per node into " + o.store->options().root + " and run by " +
              o.launcher.runc +
              " in a user namespace with the default seccomp profile; plain commands run the "
              "same way on a read-only view of " +
              Joined(o.host_dirs)};
}

}  // namespace gpupool::agent
