#include "agent/sandbox/cgroup.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "base/control_file.h"
#include "base/log.h"

namespace gpupool::agent::sandbox {
namespace {

std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  std::istringstream in(s);
  while (std::getline(in, cur, sep)) out.push_back(cur);
  return out;
}

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// "key value" lines (memory.events, cpu.stat, memory.oom_control) → value of `key`, or -1.
int64_t KeyedValue(const std::string& text, const std::string& key) {
  std::istringstream in(text);
  std::string k;
  int64_t v = 0;
  while (in >> k >> v) {
    if (k == key) return v;
  }
  return -1;
}

int64_t NumberIn(const std::string& path) {
  std::ifstream in(path);
  int64_t v = -1;
  if (in >> v) return v;
  return -1;
}

}  // namespace

const char* ControllerName(Controller c) {
  switch (c) {
    case Controller::kMemory:
      return "memory";
    case Controller::kCpu:
      return "cpu";
    case Controller::kCpuacct:
      return "cpuacct";
    case Controller::kPids:
      return "pids";
    case Controller::kDevices:
      return "devices";
  }
  return "?";
}

CgroupLayout CgroupLayout::FromMountinfo(const std::string& mountinfo,
                                         const std::string& v2_controllers_text) {
  static const std::map<std::string, Controller> kNames = {{"memory", Controller::kMemory},
                                                           {"cpu", Controller::kCpu},
                                                           {"cpuacct", Controller::kCpuacct},
                                                           {"pids", Controller::kPids},
                                                           {"devices", Controller::kDevices}};
  CgroupLayout l;
  std::istringstream in(mountinfo);
  std::string line;
  while (std::getline(in, line)) {
    const size_t dash = line.find(" - ");
    if (dash == std::string::npos) continue;
    const std::vector<std::string> pre = Split(line.substr(0, dash), ' ');
    const std::vector<std::string> post = Split(line.substr(dash + 3), ' ');
    if (pre.size() < 5 || post.size() < 3) continue;
    const std::string& mount_point = pre[4];
    if (post[0] == "cgroup2") {
      if (l.v2.empty()) l.v2 = mount_point;
    } else if (post[0] == "cgroup") {
      for (const std::string& opt : Split(post[2], ',')) {
        auto it = kNames.find(opt);
        if (it != kNames.end() && !l.v1.count(it->second)) l.v1[it->second] = mount_point;
      }
    }
  }
  for (const std::string& name : Split(v2_controllers_text, ' ')) {
    std::string n = name;
    n.erase(std::remove(n.begin(), n.end(), '\n'), n.end());
    if (n == "memory") l.v2_controllers.push_back(Controller::kMemory);
    if (n == "cpu") {
      l.v2_controllers.push_back(Controller::kCpu);  // v2's cpu.stat carries the usage too
      l.v2_controllers.push_back(Controller::kCpuacct);
    }
    if (n == "pids") l.v2_controllers.push_back(Controller::kPids);
  }
  if (l.v2_controllers.empty()) l.v2.clear();
  // A controller offered by the unified tree is used there, not from a stale v1 mount.
  for (Controller c : l.v2_controllers) l.v1.erase(c);
  return l;
}

CgroupLayout CgroupLayout::Detect() {
  const std::string mountinfo = ReadText("/proc/self/mountinfo");
  std::string controllers;
  for (const std::string& line : Split(mountinfo, '\n')) {
    const size_t dash = line.find(" - cgroup2 ");
    if (dash == std::string::npos) continue;
    const std::vector<std::string> pre = Split(line.substr(0, dash), ' ');
    if (pre.size() >= 5) controllers = ReadText(pre[4] + "/cgroup.controllers");
    break;
  }
  return FromMountinfo(mountinfo, controllers);
}

bool CgroupLayout::OnV2(Controller c) const {
  return std::find(v2_controllers.begin(), v2_controllers.end(), c) != v2_controllers.end();
}

bool CgroupLayout::Has(Controller c) const { return OnV2(c) || v1.count(c) > 0; }

std::string CgroupLayout::Describe() const {
  std::string out;
  if (!v1.empty()) {
    out = "v1:";
    for (const auto& [c, m] : v1) out += std::string(" ") + ControllerName(c);
  }
  if (!v2_controllers.empty()) {
    out += out.empty() ? "v2:" : "; v2:";
    for (Controller c : v2_controllers) out += std::string(" ") + ControllerName(c);
  }
  return out.empty() ? "none" : out;
}

CgroupUsage ReadCgroupUsage(const CgroupLayout& layout,
                            const std::map<Controller, std::string>& dir_of) {
  CgroupUsage u;
  auto it = dir_of.find(Controller::kMemory);
  if (it != dir_of.end()) {
    if (layout.OnV2(Controller::kMemory)) {
      u.peak_memory_bytes = std::max<int64_t>(0, NumberIn(it->second + "/memory.peak"));
      u.oom_kills =
          std::max<int64_t>(0, KeyedValue(ReadText(it->second + "/memory.events"), "oom_kill"));
    } else {
      u.peak_memory_bytes =
          std::max<int64_t>(0, NumberIn(it->second + "/memory.max_usage_in_bytes"));
      u.oom_kills = std::max<int64_t>(
          0, KeyedValue(ReadText(it->second + "/memory.oom_control"), "oom_kill"));
    }
  }
  it = dir_of.find(Controller::kCpuacct);
  if (it != dir_of.end()) {
    if (layout.OnV2(Controller::kCpuacct)) {
      u.cpu_usec =
          std::max<int64_t>(0, KeyedValue(ReadText(it->second + "/cpu.stat"), "usage_usec"));
    } else {
      u.cpu_usec = std::max<int64_t>(0, NumberIn(it->second + "/cpuacct.usage") / 1000);
    }
  }
  return u;
}

std::map<Controller, std::string> CgroupDirsOf(const CgroupLayout& layout, pid_t pid) {
  std::map<Controller, std::string> out;
  std::istringstream lines(ReadText("/proc/" + std::to_string(pid) + "/cgroup"));
  for (std::string line; std::getline(lines, line);) {
    const size_t a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    const std::string hierarchy = line.substr(0, a);
    const std::string controllers = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    for (Controller c : {Controller::kMemory, Controller::kCpuacct}) {
      if (layout.OnV2(c)) {
        if (hierarchy == "0" && controllers.empty()) out[c] = layout.v2 + path;
        continue;
      }
      auto mount = layout.v1.find(c);
      if (mount == layout.v1.end()) continue;
      std::istringstream names(controllers);
      for (std::string n; std::getline(names, n, ',');) {
        if (n == ControllerName(c)) out[c] = mount->second + path;
      }
    }
  }
  return out;
}

void KillAndRemoveGroups(const std::vector<std::string>& dirs) {
  using std::chrono::milliseconds;
  for (int round = 0; round < 200; ++round) {
    bool busy = false;
    for (const std::string& d : dirs) {
      std::istringstream procs(ReadText(d + "/cgroup.procs"));
      pid_t pid = 0;
      while (procs >> pid) {
        if (pid > 0) kill(pid, SIGKILL);
      }
      if (rmdir(d.c_str()) != 0 && errno == EBUSY) busy = true;
    }
    if (!busy) return;
    std::this_thread::sleep_for(milliseconds(5));
  }
}

}  // namespace gpupool::agent::sandbox
