// Test support: real gpupoold and gpupool-agent child processes on loopback.
//
// DaemonProcess starts the gpupoold binary built by this tree with a fresh data directory (its
// embedded PostgreSQL lives there), free loopback ports, and its log in DATA_DIR/gpupoold.log;
// Start() returns once the gRPC API answers. Kill9() leaves the embedded PostgreSQL running, as
// a crash would; the next Start() on the same directory must cope. The destructor stops the
// daemon and any PostgreSQL left behind, and removes the directory unless the test failed.
// Daemons given `--database` (an external PostgreSQL several may share) get one secrets key file
// per test binary (--secrets-key-file), as an operator gives replicas the same key; the others
// create their own DATA_DIR/secrets.key, as a default install does.
//
// Thread safety: one test thread.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "tests/support/free_port.h"

namespace grpc {
class Channel;
}

namespace gpupool::testing {

// A child process with its own process group, stdout and stderr to `log_path`; with
// `max_open_files` > 0 its descriptor limit (soft and hard, so it cannot raise it) is that.
class ChildProcess {
 public:
  static Result<std::unique_ptr<ChildProcess>> Spawn(const std::vector<std::string>& argv,
                                                     const std::string& log_path,
                                                     int max_open_files = 0);
  ~ChildProcess();  // SIGKILL if still running
  pid_t pid() const { return pid_; }
  bool Running();
  void Signal(int sig);
  // Waits up to `timeout` for exit; returns the raw wait status, or -1 on timeout.
  int Wait(std::chrono::milliseconds timeout);

 private:
  explicit ChildProcess(pid_t pid) : pid_(pid) {}
  pid_t pid_ = -1;
  bool reaped_ = false;
};

// A fresh directory under the system temp dir, readable by the postgres user.
Result<std::string> MakeTempDir(const std::string& prefix);

class DaemonProcess {
 public:
  struct Options {
    std::string data_dir;  // empty: a fresh temp dir
    std::vector<std::string> extra_args;
    // true: the secure default (TLS on both ports, DATA_DIR/admin.token required; use ca_pem()
    // and admin_token()); false: --insecure (plaintext, loopback), for tests about other things.
    bool secure = false;
    // false: Start/Restart return once the process runs (a standby replica does not serve).
    bool wait_until_serving = true;
    // > 0: gpupoold's RLIMIT_NOFILE, soft and hard (it cannot raise it), for descriptor floods.
    int max_open_files = 0;
  };
  static Result<std::unique_ptr<DaemonProcess>> Start(Options options);
  // `count` gpupoold replicas on one database (`args` name its --config and --database), started
  // without waiting to serve: one leads, the others stay standbys (docs/ha.md).
  static Result<std::vector<std::unique_ptr<DaemonProcess>>> StartReplicas(
      int count, const std::vector<std::string>& args);
  ~DaemonProcess();

  // Starts the binary again on the same data dir and ports (after Kill9 or Stop).
  Status Restart();
  // Whether the process has ended (killed, stopped, or exited by itself, as a leader that lost
  // its lease does).
  bool Exited();
  void Kill9();
  // SIGTERM and wait for a clean exit; returns the exit code (or -1).
  int Stop();

  std::string grpc_address() const { return "127.0.0.1:" + std::to_string(grpc_port_); }
  int grpc_port() const { return grpc_port_; }
  int http_port() const { return http_port_; }
  const std::string& data_dir() const { return data_dir_; }
  bool secure() const { return options_.secure; }
  // Secure daemons: the CA to trust (DATA_DIR/tls/ca.crt) and the admin credential
  // (DATA_DIR/admin.token); empty before the first start.
  std::string ca_path() const { return data_dir_ + "/tls/ca.crt"; }
  std::string ca_pem() const;
  std::string admin_token() const;
  // A channel to the gRPC port: TLS trusting ca_pem() when secure, else plaintext.
  std::shared_ptr<grpc::Channel> Channel() const;
  // Channel(), every call carrying the admin credential when secure.
  std::shared_ptr<grpc::Channel> AdminChannel() const;
  // Secure daemons: the node join token written on first start (DATA_DIR/node.token).
  std::string node_token_path() const { return data_dir_ + "/node.token"; }
  std::string log_path() const { return data_dir_ + "/gpupoold.log"; }
  std::string LogTail(int lines) const;
  // One quick API call answered (this replica leads and serves).
  bool Serving();
  // Creates a pool named `name` with default settings over gRPC (admin credential when secure).
  Status CreatePool(const std::string& name);
  // The running gpupoold's pid, or -1.
  pid_t pid() const { return child_ ? child_->pid() : -1; }

 private:
  DaemonProcess() = default;
  Status Launch();
  void StopLeftoverPostgres();

  Options options_;
  std::string data_dir_;
  int grpc_port_ = 0;
  int http_port_ = 0;
  std::unique_ptr<ChildProcess> child_;
};

// The index of the replica in `replicas` that serves (it leads), polling every 50 ms for up to
// `timeout`; -1 if none does by then.
int ServingReplica(const std::vector<std::unique_ptr<DaemonProcess>>& replicas,
                   std::chrono::milliseconds timeout);

// Path of a binary built by this tree (set by CMake): "gpupoold", "gpupool-agent", "gpupoolctl".
std::string BinaryPath(const std::string& name);

}  // namespace gpupool::testing
