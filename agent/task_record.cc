#include "agent/task_record.h"

#include <fstream>
#include <map>
#include <sstream>

namespace gpupool::agent {
namespace {

std::string OneLine(std::string v) {
  for (char& c : v) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return v;
}

std::optional<TaskPhase> ParsePhase(const std::string& s) {
  for (TaskPhase p : {TaskPhase::kRunning, TaskPhase::kSucceeded, TaskPhase::kFailed,
                      TaskPhase::kCancelled, TaskPhase::kPulling}) {
    if (s == TaskPhaseName(p)) return p;
  }
  return std::nullopt;
}

int64_t ToInt(const std::string& s) {
  try {
    return std::stoll(s);
  } catch (...) {
    return 0;
  }
}

// "uuid,milli_tflops,vram_mib,thread_percentage,device_milli_tflops,device_vram_mib"
std::string FormatGrant(const DeviceGrant& g) {
  return OneLine(g.uuid) + "," + std::to_string(g.milli_tflops) + "," + std::to_string(g.vram_mib) +
         "," + std::to_string(g.thread_percentage) + "," + std::to_string(g.device_milli_tflops) +
         "," + std::to_string(g.device_vram_mib);
}

DeviceGrant ParseGrant(const std::string& s) {
  std::vector<std::string> f;
  std::stringstream in(s);
  for (std::string part; std::getline(in, part, ',');) f.push_back(part);
  f.resize(6);
  DeviceGrant g;
  g.uuid = f[0];
  g.milli_tflops = ToInt(f[1]);
  g.vram_mib = ToInt(f[2]);
  g.thread_percentage = static_cast<int32_t>(ToInt(f[3]));
  g.device_milli_tflops = ToInt(f[4]);
  g.device_vram_mib = ToInt(f[5]);
  return g;
}

}  // namespace

const char* TaskKindName(TaskKind kind) {
  switch (kind) {
    case TaskKind::kPlain:
      return "plain";
    case TaskKind::kRecorded:
      return "recorded";
    case TaskKind::kSandboxed:
      return "sandboxed";
    case TaskKind::kContainer:
      return "container";
  }
  return "?";
}

std::string FormatTaskRecord(const TaskRecord& r) {
  const TaskSpec& s = r.spec;
  std::ostringstream out;
  // The first lines keep the layout operators and older tools know.
  out << "task_id=" << OneLine(s.task_id) << "\nattempt=" << s.attempt << "\npid=" << r.pid
      << "\npgid=" << r.pid << "\n";
  out << "kind=" << TaskKindName(r.kind) << "\nleader_start=" << r.leader_start
      << "\nstarted_unix_ms=" << r.started_unix_ms << "\nowner=" << OneLine(s.owner)
      << "\njob_id=" << OneLine(s.job_id) << "\ntenant=" << OneLine(s.tenant)
      << "\nmax_runtime_ms=" << s.max_runtime_ms << "\ncpu_milli=" << s.cpu_milli
      << "\nmemory_mib=" << s.memory_mib << "\n";
  for (const DeviceGrant& g : s.devices) out << "device=" << FormatGrant(g) << "\n";
  if (!s.image.empty()) out << "image=" << OneLine(s.image) << "\n";
  if (s.network) out << "network=" << net::NetworkModeName(*s.network) << "\n";
  if (s.mps_tenant_isolation) out << "mps_tenant_isolation=1\n";
  if (s.compute_fair) out << "compute_fair=1\n";
  if (r.uid != 0) out << "uid=" << r.uid << "\n";
  for (const std::string& d : r.cgroups) out << "cgroup=" << OneLine(d) << "\n";
  if (!r.container.empty()) out << "container=" << OneLine(r.container) << "\n";
  if (!r.image_digest.empty()) out << "image_digest=" << OneLine(r.image_digest) << "\n";
  if (r.rootfs_overlay) out << "rootfs_overlay=1\n";
  if (!r.slice_key.empty()) out << "slice=" << OneLine(r.slice_key) << "\n";
  if (r.mps) out << "mps=1\n";
  if (r.isolated_network) out << "isolated_network=1\n";
  if (r.network_slot >= 0) out << "network_slot=" << r.network_slot << "\n";
  for (const net::PublishedPort& p : r.published) {
    out << "published=" << net::FormatPublishedPort(p) << "\n";
  }
  return out.str();
}

std::string FormatTaskOutcome(TaskPhase phase, int32_t exit_code, int32_t signal, bool oom,
                              const std::string& reason) {
  return std::string("phase=") + TaskPhaseName(phase) + "\nexit_code=" + std::to_string(exit_code) +
         "\nsignal=" + std::to_string(signal) + "\noom=" + (oom ? "1" : "0") +
         "\nreason=" + OneLine(reason) + "\n";
}

Result<TaskRecord> ReadTaskRecord(const std::string& dir) {
  const std::string path = dir + "/state";
  std::ifstream in(path);
  if (!in) return Status::NotFound(path + ": no task state");
  TaskRecord r;
  bool has_id = false, has_pid = false;
  for (std::string line; std::getline(in, line);) {
    const size_t eq = line.find('=');
    if (eq == std::string::npos) continue;
    const std::string k = line.substr(0, eq), v = line.substr(eq + 1);
    if (k == "task_id") {
      r.spec.task_id = v;
      has_id = !v.empty();
    } else if (k == "attempt") {
      r.spec.attempt = static_cast<int32_t>(ToInt(v));
    } else if (k == "pgid") {
      r.pid = static_cast<pid_t>(ToInt(v));
      has_pid = r.pid > 1;
    } else if (k == "kind") {
      for (TaskKind kind :
           {TaskKind::kPlain, TaskKind::kRecorded, TaskKind::kSandboxed, TaskKind::kContainer}) {
        if (v == TaskKindName(kind)) r.kind = kind;
      }
    } else if (k == "leader_start") {
      r.leader_start = ToInt(v);
    } else if (k == "started_unix_ms") {
      r.started_unix_ms = ToInt(v);
    } else if (k == "owner") {
      r.spec.owner = v;
    } else if (k == "job_id") {
      r.spec.job_id = v;
    } else if (k == "tenant") {
      r.spec.tenant = v;
    } else if (k == "max_runtime_ms") {
      r.spec.max_runtime_ms = ToInt(v);
    } else if (k == "cpu_milli") {
      r.spec.cpu_milli = ToInt(v);
    } else if (k == "memory_mib") {
      r.spec.memory_mib = ToInt(v);
    } else if (k == "device") {
      r.spec.devices.push_back(ParseGrant(v));
    } else if (k == "image") {
      r.spec.image = v;
    } else if (k == "network") {
      for (net::NetworkMode m :
           {net::NetworkMode::kNone, net::NetworkMode::kIsolated, net::NetworkMode::kHost}) {
        if (v == net::NetworkModeName(m)) r.spec.network = m;
      }
    } else if (k == "mps_tenant_isolation") {
      r.spec.mps_tenant_isolation = v == "1";
    } else if (k == "compute_fair") {
      r.spec.compute_fair = v == "1";
    } else if (k == "uid") {
      r.uid = static_cast<uid_t>(ToInt(v));
    } else if (k == "cgroup") {
      r.cgroups.push_back(v);
    } else if (k == "container") {
      r.container = v;
    } else if (k == "image_digest") {
      r.image_digest = v;
    } else if (k == "rootfs_overlay") {
      r.rootfs_overlay = v == "1";
    } else if (k == "slice") {
      r.slice_key = v;
    } else if (k == "mps") {
      r.mps = v == "1";
    } else if (k == "isolated_network") {
      r.isolated_network = v == "1";
    } else if (k == "network_slot") {
      r.network_slot = v.empty() ? -1 : static_cast<int>(ToInt(v));
    } else if (k == "published") {
      // A line this agent cannot read leaves the port out: the task is adopted without it and
      // its tenant reaches it no more, which its endpoints then say.
      if (auto p = net::ParsePublishedPort(v); p.ok()) r.published.push_back(*p);
    } else if (k == "phase") {
      if (v == "ORPHAN_KILLED") {
        r.orphan_killed = true;
      } else {
        r.phase = ParsePhase(v);
      }
    } else if (k == "exit_code") {
      r.exit_code = static_cast<int32_t>(ToInt(v));
    } else if (k == "signal") {
      r.signal = static_cast<int32_t>(ToInt(v));
    } else if (k == "oom") {
      r.oom = v == "1";
    } else if (k == "reason") {
      r.reason = v;
    }
  }
  if (!has_id || !has_pid) return Status::InvalidArgument(path + ": no task_id or pgid");
  return r;
}

int64_t ProcessStartTicks(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  if (!std::getline(in, stat)) return 0;
  // The command name (field 2) may hold spaces and parentheses: count from the last ')'.
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream fields(stat.substr(close + 2));
  std::string f;
  // Fields 3.. follow; the start time is field 22, the 20th from here.
  for (int i = 3; i <= 22; ++i) {
    if (!(fields >> f)) return 0;
  }
  return ToInt(f);
}

}  // namespace gpupool::agent
