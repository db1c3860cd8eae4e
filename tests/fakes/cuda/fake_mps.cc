// The fake driver's MPS client side: what a CUDA process does at cuInit when an MPS control
// daemon (tests/agent/fake_mps_control.sh stands in for nvidia-cuda-mps-control) runs for its
// CUDA_MPS_PIPE_DIRECTORY. Modelled on NVIDIA's documentation:
//  - nvidia-cuda-mps-control(1): when CUDA is first initialised the driver connects to the
//    control daemon; if that fails the program runs without MPS. The daemon starts an MPS server
//    with the client's uid, or hands the client to the running server when the uids match; if a
//    server of another uid runs, the daemon asks it to shut down once all its clients are done
//    and queues the new client until then (one user per server).
//    https://man.archlinux.org/man/nvidia-cuda-mps-control.1.en
//  - MPS, "Appendix: Environment Variables": CUDA_MPS_ACTIVE_THREAD_PERCENTAGE and
//    CUDA_MPS_PINNED_DEVICE_MEM_LIMIT in a client's environment set that client's limits.
//    https://docs.nvidia.com/deploy/mps/latest/appendix-environment-variables.html
// The server is two files the fake daemon creates, 0666, in the pipe directory: fake-mps-server
// holds the uid it serves, and every client holds a shared flock on fake-mps-active for as long
// as it lives (the kernel drops it when the process ends, kill -9 included — as a real server
// notices its client's exit). The last client out lets the next uid's server start. Locks, not
// pids, because tasks run in PID namespaces of their own. What each client gets, or that it
// waits, goes to fake-mps.log. A daemon is taken as running while its fake-mps.pid exists.
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "tests/fakes/cuda/fake_driver.h"

namespace gpupool::fakecuda::driver {
namespace {

void Log(const std::string& dir, const std::string& line) {
  FILE* f = fopen((dir + "/fake-mps.log").c_str(), "a");
  if (f == nullptr) return;
  fprintf(f, "%s\n", line.c_str());
  fclose(f);
}

std::string Env(const char* name) {
  const char* v = getenv(name);
  return v != nullptr ? v : "";
}

// The client's uid as the daemon sees it. The daemon runs outside the task's user namespace
// and tells clients apart by the uid their connection carries in its own namespace
// (SO_PEERCRED translates it, unix(7)), so a container's root is its mapped uid on the node,
// not 0 — two tenants' containers are two users to MPS. /proc/self/uid_map lines read
// "inside outside count" (user_namespaces(7)).
uid_t UidSeenByTheDaemon() {
  const uid_t inside = getuid();
  FILE* f = fopen("/proc/self/uid_map", "r");
  if (f == nullptr) return inside;
  unsigned long first = 0, outside = 0, count = 0;
  uid_t seen = inside;
  while (fscanf(f, "%lu %lu %lu", &first, &outside, &count) == 3) {
    if (inside >= first && inside - first < count) {
      seen = static_cast<uid_t>(outside + (inside - first));
      break;
    }
  }
  fclose(f);
  return seen;
}

}  // namespace

void JoinMpsServer() {
  const std::string dir = Env("CUDA_MPS_PIPE_DIRECTORY");
  if (dir.empty()) return;
  // No daemon: the program runs without MPS.
  if (access((dir + "/fake-mps.pid").c_str(), F_OK) != 0) return;
  const int active = open((dir + "/fake-mps-active").c_str(), O_RDONLY | O_CLOEXEC);
  if (active < 0) return;  // a daemon without a server: no MPS
  const uid_t me = UidSeenByTheDaemon();
  bool said_queued = false;
  for (;;) {
    const int fd = open((dir + "/fake-mps-server").c_str(), O_RDWR | O_CLOEXEC);
    if (fd < 0) {
      close(active);
      return;
    }
    flock(fd, LOCK_EX);  // the control daemon handles one request at a time
    char buf[64] = {};
    long server_uid = -1;
    if (pread(fd, buf, sizeof buf - 1, 0) > 0) sscanf(buf, "uid %ld", &server_uid);
    bool join = false;
    if (flock(active, LOCK_EX | LOCK_NB) == 0) {
      // No client holds the server: it ends, and one starts for this client's uid.
      const std::string line = "uid " + std::to_string(me) + "\n";
      if (ftruncate(fd, 0) == 0) (void)!pwrite(fd, line.data(), line.size(), 0);
      server_uid = me;
      join = true;
    } else {
      join = server_uid == static_cast<long>(me);
    }
    if (join) {
      flock(active, LOCK_SH);  // held until the process ends: the fd is never closed
      Log(dir, "client pid=" + std::to_string(getpid()) + " uid=" + std::to_string(me) +
                   " active_thread_percentage=" + Env("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE") +
                   " pinned_mem_limit=" + Env("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"));
      flock(fd, LOCK_UN);
      close(fd);
      return;
    }
    if (!said_queued) {
      said_queued = true;
      Log(dir, "queued pid=" + std::to_string(getpid()) + " uid=" + std::to_string(me) +
                   " behind the server of uid " + std::to_string(server_uid));
    }
    flock(fd, LOCK_UN);
    close(fd);
    usleep(20'000);
  }
}

}  // namespace gpupool::fakecuda::driver
