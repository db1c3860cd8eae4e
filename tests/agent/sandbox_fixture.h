// Test support for the agent's sandboxed task tests: the terminal statuses a TaskRunner reports
// (collected for the test thread to wait on), and the removal of a test's cgroup parent.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <string>

#include "agent/sandbox/cgroup.h"
#include "agent/task_runner.h"

namespace gpupool::agent::testing {

// A fresh directory "<prefix>XXXXXX" (mkdtemp).
inline std::string TempDir(const std::string& prefix) {
  std::string tmpl = prefix + "XXXXXX";
  return mkdtemp(tmpl.data());
}

// `key`'s value in a task's state file (task_record.h), "" when absent.
inline std::string StateValue(const std::string& state_file, const std::string& key) {
  std::ifstream in(state_file);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(key + "=", 0) == 0) return line.substr(key.size() + 1);
  }
  return "";
}

// Collects every terminal status `runner` reports for node "node-a", the ids of image tasks it
// reported started (RUNNING after their pull), and their pulls' progress (PULLING).
class EndedTasks {
 public:
  void Attach(TaskRunner& runner) {
    runner.SetListener("node-a", [this](const TaskStatus& st) {
      std::lock_guard lock(mu_);
      if (st.terminal()) {
        ended_[st.task_id] = st;
      } else if (st.phase == TaskPhase::kPulling) {
        pulls_[st.task_id].push_back(st);
      } else {
        started_.insert(st.task_id);
      }
      cv_.notify_all();
    });
  }
  bool Started(const std::string& id) {
    std::lock_guard lock(mu_);
    return started_.count(id) != 0;
  }
  // The PULLING statuses task `id` reported, in order.
  std::vector<TaskStatus> Pulls(const std::string& id) {
    std::lock_guard lock(mu_);
    return pulls_[id];
  }
  // The status task `id` ended with; a test failure when it does not end within `timeout`.
  TaskStatus Wait(const std::string& id, std::chrono::seconds timeout = std::chrono::seconds(120)) {
    std::unique_lock lock(mu_);
    EXPECT_TRUE(cv_.wait_for(lock, timeout, [&] { return ended_.count(id) != 0; }))
        << "task " << id << " did not end";
    return ended_[id];
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, TaskStatus> ended_;
  std::set<std::string> started_;
  std::map<std::string, std::vector<TaskStatus>> pulls_;
};

// Why this host cannot run the sandbox's containers; "" when it can.
inline std::string CannotRunContainers() {
  if (geteuid() != 0) return "the sandbox needs root (user namespaces, mounts, cgroups)";
  if (!sandbox::CgroupLayout::Detect().Has(sandbox::Controller::kMemory)) {
    return "this host has no memory cgroup controller";
  }
  for (const char* tool : {"runc", "skopeo", "umoci"}) {
    if (std::system(("command -v " + std::string(tool) + " >/dev/null 2>&1").c_str()) != 0) {
      return std::string(tool) + " is not installed (scripts/install-deps)";
    }
  }
  return "";
}

// Removes the (empty) cgroup `parent` a test's sandbox created, on every hierarchy.
inline void RemoveCgroupParent(const std::string& parent) {
  if (parent.empty()) return;
  const sandbox::CgroupLayout layout = sandbox::CgroupLayout::Detect();
  for (const auto& [c, mount] : layout.v1) rmdir((mount + "/" + parent).c_str());
  if (!layout.v2.empty()) rmdir((layout.v2 + "/" + parent).c_str());
}

}  // namespace gpupool::agent::testing
