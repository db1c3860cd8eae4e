#include "agent/sandbox/sandbox.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

namespace gpupool::agent::sandbox {
namespace {

Status MakeDir(const std::string& path, mode_t mode) {
  if (mkdir(path.c_str(), mode) != 0 && errno != EEXIST) {
    return Status::Internal("sandbox: cannot create " + path + ": " + std::strerror(errno));
  }
  if (chmod(path.c_str(), mode) != 0) {
    return Status::Internal("sandbox: cannot chmod " + path + ": " + std::strerror(errno));
  }
  return Status::Ok();
}

}  // namespace

Sandbox::Sandbox(SandboxOptions options, std::string data_dir)
    : options_(std::move(options)),
      data_dir_(std::move(data_dir)),
      uids_(std::make_shared<UidMap>(options_.tenant_users, options_.uid_pool_first,
                                     options_.uid_pool_count)) {}

Sandbox::~Sandbox() {
  for (const auto& [c, mount] : layout_.v1) rmdir((mount + "/" + options_.cgroup_parent).c_str());
  if (!layout_.v2.empty()) rmdir((layout_.v2 + "/" + options_.cgroup_parent).c_str());
}

Result<std::shared_ptr<Sandbox>> Sandbox::Create(SandboxOptions options,
                                                 const std::string& data_dir) {
  if (geteuid() != 0) {
    return Status::FailedPrecondition(
        "sandbox.enabled needs the agent to run as root (it creates cgroups and namespaces, "
        "mounts and switches uids)");
  }
  if (options.uid_pool_count <= 0 && options.tenant_users.empty()) {
    return Status::InvalidArgument("sandbox: set sandbox.uid_pool or sandbox.tenant_users");
  }
  std::error_code ec;
  const std::string abs_data = std::filesystem::absolute(data_dir, ec).lexically_normal().string();
  std::shared_ptr<Sandbox> s(new Sandbox(std::move(options), abs_data));
  s->layout_ = CgroupLayout::Detect();
  for (const std::string& p : s->options_.hide_paths) {
    struct stat st {};
    if (stat(p.c_str(), &st) != 0) {
      return Status::InvalidArgument("sandbox.hide: " + p + ": " + std::strerror(errno));
    }
    (S_ISDIR(st.st_mode) ? s->hide_dirs_ : s->hide_files_).push_back(p);
  }
  s->hide_dirs_.push_back(abs_data);
  std::filesystem::create_directories(abs_data, ec);
  GPUPOOL_RETURN_IF_ERROR(MakeDir(abs_data + "/.sandbox", 0700));
  s->empty_file_ = abs_data + "/.sandbox/empty";
  const int fd = open(s->empty_file_.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0);
  if (fd < 0) {
    return Status::Internal("sandbox: cannot create " + s->empty_file_ + ": " +
                            std::strerror(errno));
  }
  close(fd);
  chmod(s->empty_file_.c_str(), 0);
  return s;
}

Result<std::unique_ptr<SandboxedTask>> Sandbox::Prepare(const SandboxRequest& r) {
  std::unique_ptr<SandboxedTask> t(new SandboxedTask());
  t->owner_ = this;
  GPUPOOL_ASSIGN_OR_RETURN(
      t->id_, r.tenant_uid ? uids_->AcquireShared(r.tenant) : uids_->Acquire(r.tenant));
  t->released_ = false;
  // From here on, Release() (via the destructor) undoes whatever was done.
  t->task_dir_ = r.task_dir;
  t->work_dir_ = WorkDirOf(r.task_dir);
  t->own_network_ = r.own_network;
  t->netns_path_ = r.netns_path;
  t->resolv_conf_ = r.resolv_conf;
  if (mkdir(t->work_dir_.c_str(), 0700) != 0 && errno != EEXIST) {
    return Status::Internal("sandbox: cannot create " + t->work_dir_ + ": " + std::strerror(errno));
  }
  if (chown(t->work_dir_.c_str(), t->id_.uid, t->id_.gid) != 0 ||
      chmod(t->work_dir_.c_str(), 0700) != 0) {
    return Status::Internal("sandbox: cannot give " + t->work_dir_ + " to uid " +
                            std::to_string(t->id_.uid) + ": " + std::strerror(errno));
  }
  // The task dir itself (state, log) stays root's; the task may only pass through it.
  chmod(r.task_dir.c_str(), 0711);
  CgroupLimits limits;
  const int64_t mem = r.memory_mib > 0 ? r.memory_mib : options_.default_memory_mib;
  limits.memory_bytes = mem * 1024 * 1024;
  limits.cpu_milli = r.cpu_milli;
  limits.pids_max = options_.pids_max;
  limits.filter_devices = true;
  limits.device_rules = BaselineDeviceRules();
  for (const std::string& f : r.device_files) {
    auto rule = DeviceRuleFor(f);
    if (!rule.ok()) return rule.status().WithContext("sandbox");
    limits.device_rules.push_back(*rule);
  }
  auto cg = TaskCgroup::Create(layout_, options_.cgroup_parent, r.name, limits);
  if (!cg.ok()) return cg.status().WithContext("sandbox");
  t->cgroup_ = std::move(cg).value();
  return t;
}

Result<std::unique_ptr<SandboxedTask>> Sandbox::Adopt(const SandboxRequest& r, uid_t uid) {
  GPUPOOL_ASSIGN_OR_RETURN(TaskIdentity id, uids_->Reserve(r.tenant, uid, r.tenant_uid));
  std::unique_ptr<SandboxedTask> t(new SandboxedTask());
  t->owner_ = this;
  t->id_ = id;
  t->released_ = false;
  t->task_dir_ = r.task_dir;
  t->work_dir_ = WorkDirOf(r.task_dir);
  t->own_network_ = r.own_network;
  auto cg = TaskCgroup::Adopt(layout_, options_.cgroup_parent, r.name);
  if (!cg.ok()) return cg.status().WithContext("sandbox");  // the destructor gives the uid back
  t->cgroup_ = std::move(cg).value();
  return t;
}

std::vector<Capability> Sandbox::Capabilities() const {
  std::vector<Capability> out;
  out.push_back({"sandbox", true, "cgroups " + layout_.Describe()});
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
  if (layout_.devices_by_bpf()) {
    out.push_back(
        {"devices", true, "only granted GPU device files (cgroup v2 eBPF device program)"});
  } else if (layout_.devices_enforced()) {
    out.push_back({"devices", true, "only granted GPU device files (cgroup v1 devices)"});
  } else {
    out.push_back({"devices", false,
                   "cannot enforce devices: no v1 devices controller, and this kernel refuses the "
                   "cgroup v2 eBPF device program (see the agent's log)"});
  }
  std::string uid = options_.uid_pool_count > 0
                        ? "pool " + std::to_string(options_.uid_pool_first) + "+" +
                              std::to_string(options_.uid_pool_count)
                        : std::string("tenant map only");
  out.push_back({"uid", true, uid});
  out.push_back(
      {"namespaces", true, "mount (private /tmp, agent state hidden), pid, ipc, network"});
  return out;
}

std::vector<Capability> Sandbox::DisabledCapabilities() {
  return {{"sandbox", false,
           "off (sandbox.enabled: false): tasks run as the agent's user, without cgroup, "
           "namespaces or device filter"}};
}

SandboxedTask::~SandboxedTask() { Release(); }

Result<Launched> SandboxedTask::Launch(const std::string& exec_path,
                                       const std::vector<std::string>& argv,
                                       const std::vector<std::string>& env, int log_fd,
                                       const std::string& ledger_dir) {
  LaunchPlan p;
  if (!ledger_dir.empty()) {
    // The mount point: root's, in the task's own work dir.
    const std::string point = work_dir_ + "/" + kLedgerMount;
    if (mkdir(point.c_str(), 0755) != 0 && errno != EEXIST) {
      return Status::FailedPrecondition("sandbox: cannot create " + point + ": " +
                                        std::strerror(errno));
    }
    p.ledger_dir = ledger_dir;
  }
  p.exec_path = exec_path;
  p.argv = argv;
  p.env = env;
  p.work_dir = work_dir_;
  p.hide_files = owner_->hide_files_;
  p.hide_dirs = owner_->hide_dirs_;
  p.private_tmp = owner_->options_.private_tmp;
  p.empty_file = owner_->empty_file_;
  p.uid = id_.uid;
  p.gid = id_.gid;
  p.log_fd = log_fd;
  if (!task_dir_.empty()) p.status_file = task_dir_ + "/exit_status";
  p.own_network = own_network_;
  p.netns_path = netns_path_;
  p.resolv_conf = resolv_conf_;
  auto fds = cgroup_->OpenProcsFds();
  if (!fds.ok()) return fds.status().WithContext("sandbox");
  p.cgroup_fds = *fds;
  auto launched = sandbox::Launch(p);
  for (int fd : p.cgroup_fds) close(fd);
  return launched;
}

void SandboxedTask::Release() {
  if (released_ || owner_ == nullptr) return;
  released_ = true;
  if (cgroup_) cgroup_->Remove();
  owner_->uids_->Release(id_);
  // A uid handed out again later must not find its way back in.
  if (!work_dir_.empty()) {
    [[maybe_unused]] int rc = chown(work_dir_.c_str(), 0, 0);
    chmod(work_dir_.c_str(), 0700);
  }
}

}  // namespace gpupool::agent::sandbox
