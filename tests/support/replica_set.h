// ReplicaSet: gpupoold replicas on one real PostgreSQL server of their own, for the end-to-end
// tests of leader election, failover and control-plane outages (docs/ha.md).
//
// Start() starts a throwaway PostgreSQL server, creates the database, writes `config` as
// <dir>/gpupoold.yaml, starts the replicas on it (one leads, the others stay standbys) and waits
// until one serves. client() follows the leader over every replica's address (targets(), also
// what agents are given). The test owns everything else: agents, outages, what it checks.
//
// Thread safety: a test's main thread only.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "tests/support/daemon_process.h"
#include "tests/support/leader_client.h"
#include "tests/support/pg_fixture.h"

namespace gpupool::testing {

class ReplicaSet {
 public:
  struct Options {
    std::string name = "replicas";  // the temporary directory's prefix
    std::string config;             // gpupoold.yaml
    int replicas = 3;
    bool fsync = false;  // the server's (outage tests restart it and want commits on disk)
  };
  static Result<std::unique_ptr<ReplicaSet>> Start(Options options);
  ~ReplicaSet();

  int size() const { return static_cast<int>(replicas_.size()); }
  DaemonProcess& Replica(int i) { return *replicas_[static_cast<size_t>(i)]; }
  // The index of a replica that serves, waiting up to `timeout`; -1 when none does.
  int Leader(std::chrono::milliseconds timeout);
  const std::string& targets() const { return targets_; }
  LeaderClient& client() { return *client_; }
  TestPostgres& postgres() { return *pg_; }
  const std::string& dir() const { return dir_; }
  // Creates pool `name` through the leader, requiring nothing of nodes for shared work (the
  // tests' agents run without the sandbox); retried for up to a minute across leader changes.
  Status CreatePool(const std::string& name);
  // What a service manager (systemd's Restart=always) does: starts again every replica whose
  // process has ended — a leader that could not prove its lease exits, by design (docs/ha.md).
  // Returns how many it restarted.
  int Supervise();
  // Removes the directory (call when the test passed; a failed one keeps it to read).
  void RemoveDir();

 private:
  ReplicaSet() = default;
  std::unique_ptr<TestPostgres> pg_;
  std::string dir_, targets_;
  std::vector<std::unique_ptr<DaemonProcess>> replicas_;
  std::unique_ptr<LeaderClient> client_;
};

}  // namespace gpupool::testing
