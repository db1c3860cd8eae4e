// harness.h — the interposer tests' fixture: a fake device (its shared truth in a temporary
// directory), the task's ledger server on a thread of the test, and probe children started with
// or without the interposer preloaded.
#ifndef GPUPOOL_TESTS_AGENT_INTERPOSER_HARNESS_H_
#define GPUPOOL_TESTS_AGENT_INTERPOSER_HARNESS_H_

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "agent/interposer/ledger/ledger_server.h"
#include "tests/fakes/cuda/fake_state.h"

namespace gpupool::interposer_test {

inline constexpr uint64_t kMiB = 1ull << 20;

inline uint64_t NowMs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000 + uint64_t(ts.tv_nsec) / 1000000;
}

// A child process with its stdin and stdout on pipes.
class Child {
 public:
  Child(const std::vector<std::string>& argv, const std::vector<std::string>& env) {
    int in[2], out[2];
    if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0) abort();
    // Built before fork(): the child of a threaded process may only exec.
    std::vector<char*> a, e;
    for (const auto& s : argv) a.push_back(const_cast<char*>(s.c_str()));
    a.push_back(nullptr);
    for (const auto& s : env) e.push_back(const_cast<char*>(s.c_str()));
    e.push_back(nullptr);
    pid_ = fork();
    if (pid_ == 0) {
      dup2(in[0], 0);
      dup2(out[1], 1);
      execve(a[0], a.data(), e.data());
      _exit(127);
    }
    close(in[0]);
    close(out[1]);
    stdin_ = in[1];
    stdout_ = out[0];
  }
  ~Child() {
    CloseStdin();
    if (pid_ > 0 && !reaped_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    close(stdout_);
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  pid_t pid() const { return pid_; }
  // The next line of output ("" on EOF or after `timeout_ms`).
  std::string ReadLine(int timeout_ms = 20000) {
    uint64_t deadline = NowMs() + static_cast<uint64_t>(timeout_ms);
    for (;;) {
      size_t nl = buf_.find('\n');
      if (nl != std::string::npos) {
        std::string line = buf_.substr(0, nl);
        buf_.erase(0, nl + 1);
        return line;
      }
      uint64_t now = NowMs();
      if (now >= deadline) return "";
      pollfd p{stdout_, POLLIN, 0};
      if (poll(&p, 1, static_cast<int>(deadline - now)) <= 0) return "";
      char tmp[4096];
      ssize_t n = read(stdout_, tmp, sizeof tmp);
      if (n <= 0) return "";
      buf_.append(tmp, static_cast<size_t>(n));
    }
  }
  // Reads until a line starting with `prefix`; returns it ("" if none came).
  std::string ReadUntil(const std::string& prefix, int timeout_ms = 20000) {
    uint64_t deadline = NowMs() + static_cast<uint64_t>(timeout_ms);
    while (NowMs() < deadline) {
      std::string l = ReadLine(static_cast<int>(deadline - NowMs()));
      if (l.rfind(prefix, 0) == 0) return l;
      if (l.empty()) return "";
    }
    return "";
  }
  void Write(const std::string& s) {
    if (write(stdin_, s.data(), s.size()) != static_cast<ssize_t>(s.size())) {
    }
  }
  void CloseStdin() {
    if (stdin_ >= 0) close(stdin_);
    stdin_ = -1;
  }
  // The wait status, after the child exits.
  int Wait() {
    int st = 0;
    waitpid(pid_, &st, 0);
    reaped_ = true;
    return st;
  }
  void Kill() { kill(pid_, SIGKILL); }

 private:
  pid_t pid_ = -1;
  int stdin_ = -1, stdout_ = -1;
  bool reaped_ = false;
  std::string buf_;
};

// One task on one fake device: its state directory, its ledger, and how to start its processes.
class Task {
 public:
  // `device_bytes`: the fake device; `limits`: the task's grant; `context_bytes` goes to both
  // the fake (what a context costs) and the ledger (what the interposer reserves for one).
  // With `same_device`, the task shares that task's fake device (another tenant on one GPU).
  // With `arbiter`, its ledger joins that device arbiter (fair compute shares). Without
  // `charge_contexts` the ledger charges nothing per context (gpu_slices.context_mib: 0) while
  // the fake's contexts still cost `context_bytes`.
  Task(uint64_t device_bytes, ledger::Limits limits, uint64_t context_bytes = kMiB,
       const Task* same_device = nullptr, std::shared_ptr<ledger::DeviceArbiter> arbiter = nullptr,
       bool charge_contexts = true) {
    char tmpl[] = "/tmp/gpupool-interposer-XXXXXX";
    dir_ = mkdtemp(tmpl);
    state_dir_ = same_device != nullptr ? same_device->state_dir_ : dir_;
    devices_ = "fake64," + std::to_string(device_bytes) + ",8," + std::to_string(context_bytes);
    limits.context_bytes = charge_contexts ? context_bytes : 0;
    std::string error;
    server_ = ledger::LedgerServer::Create(dir_ + "/ledger.sock", limits, &error, arbiter);
    if (server_ == nullptr) abort();
    thread_ = std::thread([this] { server_->Run(); });
    // The device's truth exists from the start, as a real GPU's does.
    fakecuda::MapDevice(state_dir_.c_str(), 0, device_bytes);
  }
  ~Task() {
    server_->Stop();
    thread_.join();
    std::string cmd = "rm -rf " + dir_;
    if (system(cmd.c_str()) != 0) {
    }
  }

  ledger::LedgerServer& ledger() { return *server_; }
  const std::string& dir() const { return dir_; }
  const std::string& state_dir() const { return state_dir_; }
  std::string socket() const { return dir_ + "/ledger.sock"; }

  std::vector<std::string> Env(bool preload = true) const {
    std::vector<std::string> env = {
        "GPUPOOL_FAKE_CUDA_STATE=" + state_dir_,
        "GPUPOOL_FAKE_CUDA_DEVICES=" + devices_,
        "GPUPOOL_LEDGER_SOCKET=" + socket(),
        std::string("LD_LIBRARY_PATH=") + GPUPOOL_FAKE_CUDA_DIR + ":" + GPUPOOL_FAKE_NVML_DIR,
        "PATH=/usr/bin:/bin",
    };
    if (preload) env.push_back(std::string("LD_PRELOAD=") + GPUPOOL_INTERPOSER_LIB);
    return env;
  }
  std::unique_ptr<Child> Start(const std::vector<std::string>& args, bool preload = true) const {
    std::vector<std::string> argv = {GPUPOOL_PROBE};
    argv.insert(argv.end(), args.begin(), args.end());
    return std::make_unique<Child>(argv, Env(preload));
  }

  fakecuda::Truth Truth() const {
    fakecuda::Truth t{};
    fakecuda::ReadTruth(state_dir_.c_str(), 0, &t);
    return t;
  }

 private:
  std::string dir_;
  std::string state_dir_;  // the fake device's truth: dir_, or the device's first task's
  std::string devices_;
  std::unique_ptr<ledger::LedgerServer> server_;
  std::thread thread_;
};

// The ledger's charge for `pid` (its connections and orphans).
inline uint64_t LedgerVram(const ledger::Usage& u, pid_t pid) {
  uint64_t n = 0;
  for (const auto& p : u.processes)
    if (p.pid == pid) n += p.vram;
  return n;
}

// Polls `pred` every 5 ms for up to `ms`; true once it holds.
template <typename Pred>
bool Eventually(Pred pred, uint64_t ms) {
  uint64_t deadline = NowMs() + ms;
  for (;;) {
    if (pred()) return true;
    if (NowMs() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

}  // namespace gpupool::interposer_test

#endif  // GPUPOOL_TESTS_AGENT_INTERPOSER_HARNESS_H_
