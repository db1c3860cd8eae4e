// Test support: a PostgreSQL cluster with automatic failover run by pg_auto_failover (Debian's
// postgresql-15-auto-failover and pg-auto-failover-cli): a monitor and two data nodes on
// loopback, the second a synchronous streaming standby of the first (pg_auto_failover's default
// with one standby: synchronous_standby_names = 'ANY 1 (…)', synchronous_commit = on), so a
// commit the primary acknowledged is on the standby too.
//
// Start() creates it in a fresh directory (run as the "postgres" user when the tests run as root:
// PostgreSQL refuses root) and returns once the standby is a `secondary`. uri() is what gpupoold
// is given: both nodes, `target_session_attrs=read-write`, so libpq connects to whichever is the
// primary. KillNode() ends every process of a node with SIGKILL (its keeper and its postgres), as a
// power failure would; the monitor then promotes the other. The destructor kills the whole
// cluster and removes the directory.
//
// Thread safety: one test thread.
#pragma once

#include <memory>
#include <string>

#include "base/status.h"

namespace gpupool::testing {

class PgAutoFailoverCluster {
 public:
  static Result<std::unique_ptr<PgAutoFailoverCluster>> Start();
  ~PgAutoFailoverCluster();

  const std::string& uri() const { return uri_; }
  const std::string& dir() const { return dir_; }
  // 1 or 2: the data node whose postgres now accepts writes; 0 when none does.
  int Primary() const;
  // SIGKILL to every process of node `n` (1 or 2).
  void KillNode(int n);
  // The monitor's `pg_autoctl show state`, for failure messages.
  std::string State() const;

 private:
  PgAutoFailoverCluster() = default;
  std::string dir_;
  int monitor_port_ = 0;
  int node_port_[3] = {0, 0, 0};
  std::string uri_;
};

}  // namespace gpupool::testing
