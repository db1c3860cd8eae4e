#include "agent/interposer/watchdog/watchdog.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

namespace gpupool::watchdog {
namespace {

std::map<pid_t, uint64_t> ChargeByPid(const ledger::Usage& u) {
  std::map<pid_t, uint64_t> m;
  for (const auto& p : u.processes) m[p.pid] += p.vram;
  return m;
}

pid_t ParentOf(pid_t pid) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/stat", pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char buf[512];
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return 0;
  buf[n] = 0;
  const char* p = strrchr(buf, ')');
  if (p == nullptr) return 0;
  char state;
  int ppid = 0;
  if (sscanf(p + 1, " %c %d", &state, &ppid) != 2) return 0;
  return ppid;
}

}  // namespace

bool IsDescendant(pid_t pid, pid_t root) {
  for (int depth = 0; pid > 1 && depth < 64; ++depth) {
    if (pid == root) return true;
    pid = ParentOf(pid);
  }
  return pid == root;
}

Watchdog::Watchdog(ProcessMemorySource* source, Options options)
    : source_(source), options_(std::move(options)) {
  if (!options_.kill) options_.kill = [](pid_t pid) { ::kill(pid, SIGKILL); };
}

std::vector<Verdict> Watchdog::Tick(bool* ok, std::string* error) {
  std::vector<Verdict> killed;
  std::string err;
  std::vector<GpuProcess> procs;
  std::map<pid_t, uint64_t> before = ChargeByPid(options_.ledger());
  bool read = source_->Read(&procs, &err);
  std::map<pid_t, uint64_t> after = ChargeByPid(options_.ledger());
  if (ok != nullptr) *ok = read;
  if (error != nullptr) *error = err;
  if (!read) return killed;

  std::map<pid_t, uint64_t> gpu;  // the task's processes, summed over devices
  for (const GpuProcess& p : procs)
    if (options_.in_task(p.pid)) gpu[p.pid] += p.bytes;
  uint64_t total = 0;
  std::map<pid_t, int> strikes;
  for (const auto& [pid, bytes] : gpu) {
    total += bytes;
    uint64_t charge = std::max(before[pid], after[pid]);
    if (options_.reconcile && options_.reconcile(pid, bytes)) continue;  // charged, not killed
    if (bytes <= charge + options_.slack_bytes) continue;
    int s = strikes_[pid] + 1;
    strikes[pid] = s;
    if (s < options_.strikes) continue;
    char why[256];
    snprintf(why, sizeof why,
             "pid %d holds %llu bytes of GPU memory, its ledger charge is %llu: it bypassed the "
             "interposer",
             pid, static_cast<unsigned long long>(bytes), static_cast<unsigned long long>(charge));
    options_.kill(pid);
    killed.push_back({pid, bytes, charge, why});
    strikes.erase(pid);
  }
  strikes_.swap(strikes);

  if (total > options_.vram_grant + options_.slack_bytes && killed.empty()) {
    if (++task_strikes_ >= options_.strikes) {
      task_strikes_ = 0;
      for (const auto& [pid, bytes] : gpu) {
        char why[256];
        snprintf(why, sizeof why, "the task holds %llu bytes of GPU memory, its grant is %llu",
                 static_cast<unsigned long long>(total),
                 static_cast<unsigned long long>(options_.vram_grant));
        options_.kill(pid);
        killed.push_back({pid, bytes, std::max(before[pid], after[pid]), why});
      }
    }
  } else {
    task_strikes_ = 0;
  }
  return killed;
}

}  // namespace gpupool::watchdog
