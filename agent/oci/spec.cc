#include "agent/oci/spec.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>

#include "agent/interposer/ledger/protocol.h"

namespace gpupool::agent::oci {
namespace {

using nlohmann::json;

json Mount(const std::string& dest, const std::string& type, const std::string& source,
           std::vector<std::string> options) {
  return json{{"destination", dest}, {"type", type}, {"source", source}, {"options", options}};
}

json Bind(const std::string& source, const std::string& dest, bool read_only,
          bool recursive_read_only = false) {
  std::vector<std::string> options = {"rbind", "nosuid", "nodev", "rprivate"};
  options.push_back(read_only ? "ro" : "rw");
  if (read_only && recursive_read_only) options.push_back("rro");
  return Mount(dest, "bind", source, options);
}

std::string EnvName(const std::string& kv) { return kv.substr(0, kv.find('=')); }

bool Absolute(const std::string& p) { return !p.empty() && p[0] == '/'; }

Status ApplyConfig(const std::string& image_config_json, const ImageTaskOverrides& task,
                   RuntimeSpecInput* input);

}  // namespace

std::vector<std::string> DefaultCapabilities() {
  return {"CAP_CHOWN",   "CAP_DAC_OVERRIDE",     "CAP_FOWNER",    "CAP_FSETID",
          "CAP_KILL",    "CAP_NET_BIND_SERVICE", "CAP_SETFCAP",   "CAP_SETGID",
          "CAP_SETPCAP", "CAP_SETUID",           "CAP_SYS_CHROOT"};
}

Result<DeviceNode> DeviceNodeFor(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) {
    return Status::InvalidArgument("device " + path + ": " + strerror(errno));
  }
  if (!S_ISCHR(st.st_mode) && !S_ISBLK(st.st_mode)) {
    return Status::InvalidArgument("device " + path + ": not a device file");
  }
  DeviceNode d;
  d.path = path;
  d.type = S_ISCHR(st.st_mode) ? 'c' : 'b';
  d.major = major(st.st_rdev);
  d.minor = minor(st.st_rdev);
  d.file_mode = st.st_mode & 07777;
  return d;
}

Status ApplyImageConfig(const std::string& image_config_json, const ImageTaskOverrides& task,
                        RuntimeSpecInput* input) {
  // The image config comes from the tenant: a JSON type error is a bad image, not a crash.
  try {
    return ApplyConfig(image_config_json, task, input);
  } catch (const json::exception& e) {
    return Status::InvalidArgument(std::string("image config: ") + e.what());
  }
}

namespace {

Status ApplyConfig(const std::string& image_config_json, const ImageTaskOverrides& task,
                   RuntimeSpecInput* input) {
  json config = json::parse(image_config_json, nullptr, false);
  if (!config.is_object()) return Status::InvalidArgument("image config: not JSON");
  json c = config.value("config", json::object());
  if (c.is_null()) c = json::object();
  if (!c.is_object()) return Status::InvalidArgument("image config: \"config\" is not an object");
  std::vector<std::string> entrypoint, cmd, env;
  for (const char* key : {"Entrypoint", "Cmd", "Env"}) {
    if (!c.contains(key) || !c[key].is_array()) continue;
    auto& into = std::string(key) == "Entrypoint" ? entrypoint : key[0] == 'C' ? cmd : env;
    for (const auto& v : c[key]) {
      if (v.is_string()) into.push_back(v.get<std::string>());
    }
  }
  if (!task.entrypoint.empty()) {
    entrypoint = task.entrypoint;
    cmd.clear();
  }
  std::vector<std::string> args = entrypoint;
  const auto& tail = task.args.empty() ? cmd : task.args;
  args.insert(args.end(), tail.begin(), tail.end());
  if (args.empty()) {
    return Status::InvalidArgument("image has no Entrypoint or Cmd and the task gives no args");
  }
  std::map<std::string, std::string> merged;
  std::vector<std::string> order;
  const std::vector<std::string>& image_env = env;
  for (const std::vector<std::string>* list : {&image_env, &task.env}) {
    for (const auto& kv : *list) {
      std::string name = EnvName(kv);
      if (!merged.count(name)) order.push_back(name);
      merged[name] = kv;
    }
  }
  if (!merged.count("PATH")) {
    order.insert(order.begin(), "PATH");
    merged["PATH"] = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
  }
  input->args = args;
  input->env.clear();
  for (const auto& name : order) input->env.push_back(merged[name]);
  std::string wd = c.contains("WorkingDir") && c["WorkingDir"].is_string()
                       ? c["WorkingDir"].get<std::string>()
                       : "";
  if (!task.working_dir.empty()) wd = task.working_dir;
  input->cwd = wd.empty() ? "/" : wd;
  return Status::Ok();
}

}  // namespace

Result<json> BuildRuntimeSpec(const RuntimeSpecInput& in) {
  if (in.args.empty()) return Status::InvalidArgument("runtime spec: args: empty");
  if (!Absolute(in.rootfs)) {
    return Status::InvalidArgument("runtime spec: rootfs: must be an absolute path, got '" +
                                   in.rootfs + "'");
  }
  if (in.host_uid == 0 || in.host_gid == 0) {
    return Status::InvalidArgument(
        "runtime spec: host_uid/host_gid: root in the container must not be root on the node");
  }
  if (in.id_count == 0) return Status::InvalidArgument("runtime spec: id_count: must be >= 1");
  if (in.network == Network::kIsolated && in.netns_path.empty()) {
    return Status::InvalidArgument("runtime spec: netns_path: required for an isolated network");
  }
  if (in.cgroups_path.empty() || in.cgroups_path[0] != '/') {
    return Status::InvalidArgument("runtime spec: cgroups_path: must start with '/'");
  }
  for (const auto& m : in.mounts) {
    if (!Absolute(m.source) || !Absolute(m.destination)) {
      return Status::InvalidArgument("runtime spec: mount " + m.source + " -> " + m.destination +
                                     ": paths must be absolute");
    }
  }

  json caps = in.capabilities;
  json process{
      {"terminal", false},
      {"user", {{"uid", 0}, {"gid", 0}}},
      {"args", in.args},
      {"env", in.env},
      {"cwd", in.cwd},
      {"capabilities",
       {{"bounding", caps}, {"effective", caps}, {"permitted", caps}, {"ambient", json::array()}}},
      {"noNewPrivileges", true}};

  if (in.nofile > 0) {
    process["rlimits"] =
        json::array({json{{"type", "RLIMIT_NOFILE"}, {"hard", in.nofile}, {"soft", in.nofile}}});
  }
  json mounts = json::array();
  mounts.push_back(Mount("/proc", "proc", "proc", {"nosuid", "noexec", "nodev"}));
  mounts.push_back(
      Mount("/dev", "tmpfs", "tmpfs", {"nosuid", "strictatime", "mode=755", "size=65536k"}));
  // No gid=5: only the task's own ids are mapped in its user namespace.
  mounts.push_back(Mount("/dev/pts", "devpts", "devpts",
                         {"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"}));
  mounts.push_back(
      Mount("/dev/shm", "tmpfs", "shm", {"nosuid", "noexec", "nodev", "mode=1777", "size=65536k"}));
  mounts.push_back(Mount("/dev/mqueue", "mqueue", "mqueue", {"nosuid", "noexec", "nodev"}));
  if (in.network == Network::kHost) {
    // sysfs cannot be mounted from a user namespace that does not own the network namespace.
    mounts.push_back(Mount("/sys", "none", "/sys", {"rbind", "nosuid", "noexec", "nodev", "ro"}));
  } else if (in.network == Network::kIsolated) {
    // Likewise for the agent's prepared namespace (the node's user namespace owns it): the node's
    // sysfs, read-only, as a plain sandboxed task sees it — with the task's own cgroup over the
    // node's hierarchy, so no other task's cgroup names show.
    mounts.push_back(Mount("/sys", "none", "/sys", {"rbind", "nosuid", "noexec", "nodev", "ro"}));
    mounts.push_back(Mount("/sys/fs/cgroup", "cgroup", "cgroup",
                           {"nosuid", "noexec", "nodev", "relatime", "ro"}));
  } else {
    mounts.push_back(Mount("/sys", "sysfs", "sysfs", {"nosuid", "noexec", "nodev", "ro"}));
    mounts.push_back(Mount("/sys/fs/cgroup", "cgroup", "cgroup",
                           {"nosuid", "noexec", "nodev", "relatime", "ro"}));
  }
  mounts.push_back(Mount("/tmp", "tmpfs", "tmpfs", {"nosuid", "nodev", "mode=1777"}));
  for (const auto& f : in.driver_files) {
    if (!Absolute(f)) {
      return Status::InvalidArgument("runtime spec: driver file '" + f + "' must be absolute");
    }
    mounts.push_back(Bind(f, f, true));
  }
  std::vector<std::string> env = in.env;
  if (!in.driver_files.empty()) {
    // An image's own ld.so.cache does not know the bound driver: its directories go after the
    // image's LD_LIBRARY_PATH, so CUDA's dlopen("libcuda.so.1") finds it (the Container
    // Toolkit runs ldconfig in the container for the same end).
    std::string dirs;
    for (const std::string& f : in.driver_files) {
      const size_t slash = f.rfind('/');
      if (f.find(".so.", slash) == std::string::npos) continue;
      const std::string dir = slash == 0 ? "/" : f.substr(0, slash);
      if ((":" + dirs + ":").find(":" + dir + ":") == std::string::npos) {
        dirs += (dirs.empty() ? "" : ":") + dir;
      }
    }
    if (!dirs.empty()) {
      auto it = std::find_if(env.begin(), env.end(), [](const std::string& kv) {
        return EnvName(kv) == "LD_LIBRARY_PATH";
      });
      if (it == env.end()) {
        env.push_back("LD_LIBRARY_PATH=" + dirs);
      } else if (it->size() == std::string("LD_LIBRARY_PATH=").size()) {
        *it += dirs;
      } else {
        *it += ":" + dirs;
      }
    }
  }
  if (!in.interposer_library.empty()) {
    if (!Absolute(in.interposer_library) || !Absolute(in.interposer_socket)) {
      return Status::InvalidArgument(
          "runtime spec: interposer library and socket must be absolute paths");
    }
    mounts.push_back(Bind(in.interposer_library, in.interposer_library, true));
    std::string socket_dir = in.interposer_socket.substr(0, in.interposer_socket.rfind('/'));
    if (socket_dir.empty()) socket_dir = "/";
    // Read-only: the task reaches the socket but cannot replace it with a ledger of its own.
    mounts.push_back(Bind(socket_dir, socket_dir, true));
    bool replaced = false;
    for (auto& kv : env) {
      if (EnvName(kv) == "LD_PRELOAD") {
        kv = "LD_PRELOAD=" + in.interposer_library + ":" + kv.substr(11);
        replaced = true;
      }
    }
    if (!replaced) env.push_back("LD_PRELOAD=" + in.interposer_library);
    env.push_back(std::string(ledger::kSocketEnv) + "=" + in.interposer_socket);
  }
  process["env"] = env;
  for (const auto& m : in.mounts) {
    mounts.push_back(Bind(m.source, m.destination, m.read_only, m.recursive_read_only));
  }

  json namespaces = json::array();
  for (const char* ns : {"pid", "ipc", "uts", "mount", "cgroup", "user"}) {
    namespaces.push_back(json{{"type", ns}});
  }
  if (in.network == Network::kNone) namespaces.push_back(json{{"type", "network"}});
  if (in.network == Network::kIsolated) {
    namespaces.push_back(json{{"type", "network"}, {"path", in.netns_path}});
  }

  json devices = json::array();
  json allow = json::array({json{{"allow", false}, {"access", "rwm"}}});
  for (const auto& d : in.devices) {
    std::string type(1, d.type);
    devices.push_back(json{{"path", d.path},
                           {"type", type},
                           {"major", d.major},
                           {"minor", d.minor},
                           {"fileMode", d.file_mode},
                           {"uid", 0},
                           {"gid", 0}});
    allow.push_back(json{
        {"allow", true}, {"type", type}, {"major", d.major}, {"minor", d.minor}, {"access", "rw"}});
  }
  json resources{{"devices", allow}};
  if (in.memory_bytes > 0) {
    resources["memory"] = json{{"limit", in.memory_bytes}, {"swap", in.memory_bytes}};
  }
  if (in.cpu_milli > 0) {
    resources["cpu"] = json{{"quota", in.cpu_milli * 100}, {"period", 100000}};
  }
  if (in.pids_max > 0) resources["pids"] = json{{"limit", in.pids_max}};
  if (in.cgroup_v2) resources["unified"] = json{{"memory.oom.group", "1"}};

  json masked = {"/proc/acpi",        "/proc/asound",        "/proc/kcore",
                 "/proc/keys",        "/proc/latency_stats", "/proc/timer_list",
                 "/proc/timer_stats", "/proc/sched_debug",   "/proc/scsi",
                 "/sys/firmware"};
  for (const auto& p : in.hide_paths) masked.push_back(p);

  json linux{
      {"uidMappings",
       json::array({json{{"containerID", 0}, {"hostID", in.host_uid}, {"size", in.id_count}}})},
      {"gidMappings",
       json::array({json{{"containerID", 0}, {"hostID", in.host_gid}, {"size", in.id_count}}})},
      {"namespaces", namespaces},
      {"devices", devices},
      {"resources", resources},
      {"cgroupsPath", in.cgroups_path},
      {"maskedPaths", masked},
      {"readonlyPaths",
       {"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"}}};
  if (!in.seccomp.is_null()) linux["seccomp"] = in.seccomp;

  return json{{"ociVersion", "1.0.2"},
              {"process", process},
              {"root", {{"path", in.rootfs}, {"readonly", in.rootfs_readonly}}},
              {"hostname", in.hostname},
              {"mounts", mounts},
              {"linux", linux}};
}

Status WriteBundleConfig(const std::string& bundle, const json& spec) {
  std::string path = bundle + "/config.json";
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return Status::Internal("open " + path + ": " + strerror(errno));
  std::string text = spec.dump(1);
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int err = errno;
      close(fd);
      return Status::Internal("write " + path + ": " + strerror(err));
    }
    done += static_cast<size_t>(n);
  }
  close(fd);
  return Status::Ok();
}

}  // namespace gpupool::agent::oci
