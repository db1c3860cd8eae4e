// Test support: tasks that record each execution in one side-effect file, and the check that no
// task ran twice at once and none ran again after it had finished (issue 12, docs/ha.md).
//
// TickingScript(path, ticks) is a /bin/sh script: each execution appends "<task> <pid> tick <ns>"
// every 200 ms, `ticks` times, then "<task> <pid> end <ns>". ReadExecutions groups the file's
// lines by task and pid; CheckExecutions returns, per task, what broke the promise: two
// executions whose [first tick, last tick] overlap, an execution after one that ended, or not
// exactly one ended execution. Header-only.
#pragma once

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace gpupool::testing {

inline std::string TickingScript(const std::string& path, int ticks) {
  return "id=\"$GPUPOOL_TASK_ID $$\"; i=0; while [ $i -lt " + std::to_string(ticks) +
         " ]; do echo \"$id tick $(date +%s%N)\" >> " + path +
         "; sleep 0.2; i=$((i+1)); done; echo \"$id end $(date +%s%N)\" >> " + path;
}

struct Execution {
  int64_t first_ns = 0;
  int64_t last_ns = 0;
  bool ended = false;
};

// Executions per task whose id starts with `job` + "." (every task if `job` is empty), by pid.
inline std::map<std::string, std::map<int64_t, Execution>> ReadExecutions(
    const std::string& path, const std::string& job = "") {
  std::map<std::string, std::map<int64_t, Execution>> out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    std::istringstream ls(line);
    std::string task, what;
    int64_t pid = 0, ns = 0;
    if (!(ls >> task >> pid >> what >> ns)) continue;  // a line being written
    if (!job.empty() && task.rfind(job + ".", 0) != 0) continue;
    Execution& e = out[task][pid];
    if (e.first_ns == 0 || ns < e.first_ns) e.first_ns = ns;
    e.last_ns = std::max(e.last_ns, ns);
    if (what == "end") e.ended = true;
  }
  return out;
}

// Violations of "one running copy at most, finished means never again, done exactly once".
inline std::vector<std::string> CheckExecutions(
    const std::map<std::string, std::map<int64_t, Execution>>& all, int* executions = nullptr) {
  std::vector<std::string> bad;
  for (const auto& [task, by_pid] : all) {
    std::vector<Execution> ex;
    for (const auto& [pid, e] : by_pid) ex.push_back(e);
    std::sort(ex.begin(), ex.end(),
              [](const Execution& a, const Execution& b) { return a.first_ns < b.first_ns; });
    int ended = 0;
    for (size_t i = 0; i < ex.size(); ++i) {
      if (ex[i].ended) ++ended;
      if (i + 1 == ex.size()) continue;
      if (ex[i].last_ns >= ex[i + 1].first_ns) {
        bad.push_back("task " + task + ": two copies ran at once (overlap " +
                      std::to_string((ex[i].last_ns - ex[i + 1].first_ns) / 1'000'000) + " ms)");
      }
      if (ex[i].ended) bad.push_back("task " + task + " ran again after it had finished");
    }
    if (ended != 1)
      bad.push_back("task " + task + " completed " + std::to_string(ended) + " times");
    if (executions != nullptr) *executions += static_cast<int>(ex.size());
  }
  return bad;
}

}  // namespace gpupool::testing
