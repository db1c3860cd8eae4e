#include "agent/sandbox/sandbox.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace gpupool::agent::sandbox {

Sandbox::Sandbox(SandboxOptions options)
    : options_(std::move(options)),
      uids_(std::make_shared<UidMap>(options_.tenant_users, options_.uid_pool_first,
                                     options_.uid_pool_count)) {}

Sandbox::~Sandbox() {
  const std::string parent = options_.cgroup_parent + "-containers";
  for (const auto& [c, mount] : layout_.v1) rmdir((mount + "/" + parent).c_str());
  if (!layout_.v2.empty()) rmdir((layout_.v2 + "/" + parent).c_str());
}

Result<std::shared_ptr<Sandbox>> Sandbox::Create(SandboxOptions options) {
  if (geteuid() != 0) {
    return Status::FailedPrecondition(
        "sandbox.enabled needs the agent to run as root (the OCI runtime maps each task's user "
        "namespace to a uid of the pool and creates its cgroups)");
  }
  if (options.uid_pool_count <= 0 && options.tenant_users.empty()) {
    return Status::InvalidArgument("sandbox: set sandbox.uid_pool or sandbox.tenant_users");
  }
  for (const std::string& p : options.hide_paths) {
    struct stat st {};
    if (stat(p.c_str(), &st) != 0) {
      return Status::InvalidArgument("sandbox.hide: " + p + ": " + std::strerror(errno));
    }
  }
  std::shared_ptr<Sandbox> s(new Sandbox(std::move(options)));
  s->layout_ = CgroupLayout::Detect();
  return s;
}

std::vector<Capability> Sandbox::Capabilities(const std::string& runtime,
                                              const std::string& why) const {
  static constexpr const char* kConfined[] = {"memory",  "cpu", "pids",
                                              "devices", "uid", "namespaces"};
  std::vector<Capability> out;
  if (runtime.empty()) {
    out.push_back({"sandbox", false,
                   "cannot confine tasks: the OCI runtime is unavailable (" + why +
                       "); every task fails here rather than run unconfined"});
    for (const char* name : kConfined) out.push_back({name, false, "no OCI runtime"});
    return out;
  }
  out.push_back({"sandbox", true,
                 "every task in a container under " + runtime +
                     " (default seccomp profile, no new privileges); cgroups " +
                     layout_.Describe()});
  auto controller = [&](const char* name, Controller c, const std::string& what) {
    if (layout_.Has(c)) {
      out.push_back({name, true, what + (layout_.OnV2(c) ? " (cgroup v2)" : " (cgroup v1)")});
    } else {
      out.push_back({name, false,
                     std::string("cannot enforce: no ") + ControllerName(c) +
                         " cgroup controller on this host"});
    }
  };
  controller("memory", Controller::kMemory, "host memory limit from the request; OOM reported");
  controller("cpu", Controller::kCpu, "CFS quota from the request's CPU");
  controller("pids", Controller::kPids, "at most " + std::to_string(options_.pids_max));
  if (layout_.Has(Controller::kDevices)) {
    out.push_back(
        {"devices", true, "only granted GPU device nodes (the runtime's v1 devices rules)"});
  } else if (!layout_.v2.empty()) {
    out.push_back(
        {"devices", true, "only granted GPU device nodes (the runtime's cgroup v2 eBPF program)"});
  } else {
    out.push_back({"devices", false,
                   "only granted GPU device nodes exist in a task's /dev, but no cgroup filters "
                   "them: no v1 devices controller and no cgroup v2 tree"});
  }
  out.push_back({"uid", true,
                 "root in the task's user namespace is " +
                     (options_.uid_pool_count > 0
                          ? "a uid of the pool " + std::to_string(options_.uid_pool_first) + "+" +
                                std::to_string(options_.uid_pool_count)
                          : std::string("its tenant's user")) +
                     " on the node"});
  out.push_back({"namespaces", true,
                 "user, mount (the image or a read-only host view; agent state hidden), pid, ipc, "
                 "uts, cgroup, network (the pool's)"});
  return out;
}

std::vector<Capability> Sandbox::DisabledCapabilities() {
  return {{"sandbox", false,
           "off (sandbox.enabled: false): tasks run as the agent's user, without cgroup, "
           "namespaces or device filter"}};
}

}  // namespace gpupool::agent::sandbox
