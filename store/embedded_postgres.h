// EmbeddedPostgres: a private PostgreSQL cluster that gpupoold runs from the system binaries
// when no database is configured (and that tests use as their throwaway server).
//
// Layout under `data_dir`:
//   pg/               the cluster (initdb once; PG_VERSION marks a finished initdb)
//   pg/server.log     the server's log
//   pg.lock           flock()ed while this process uses the cluster
//   pg-initdb.log, pg-ctl.log   output of initdb and pg_ctl, for error messages
//
// Start(): takes the lock, runs initdb when pg/PG_VERSION is missing (into pg.initdb/, renamed
// when complete, so a crash mid-initdb leaves nothing half-made), stops a server left running by
// a previous process that died without stopping it (kill -9), starts the server with pg_ctl on
// the configured port or a free one, listening on 127.0.0.1 with its Unix socket inside the
// cluster directory, sets a fresh random password for the "postgres" role (TCP logins need it;
// the socket, reachable only by this user, uses trust) and creates the database.
// As root, initdb and pg_ctl run as the "postgres" user through runuser, and pg/ is chowned to
// it. When that user cannot enter data_dir (say it is under /root, mode 0700), the cluster goes
// to /var/lib/gpupool/clusters/<hash of data_dir>/pg instead, with a symlink data_dir/pg to it.
//
// Thread safety: not thread-safe; one owner.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "base/status.h"

namespace gpupool {

struct EmbeddedPostgresOptions {
  std::string data_dir;               // required; created if missing
  std::string bin_dir;                // empty: newest /usr/lib/postgresql/*/bin with initdb
  int port = 0;                       // 0: a free port on 127.0.0.1
  std::string database = "gpupool";   // created on start if missing
  bool fsync = true;                  // tests may turn durability off for speed
  std::string run_as = "postgres";    // the user that runs the server when we are root
  std::vector<std::string> settings;  // extra server settings, "name=value"
};

class EmbeddedPostgres {
 public:
  // Prepares and starts the cluster as described above. Errors name the step and quote the end of
  // its log, e.g. "initdb failed (exit 1): initdb: error: directory … exists but is not empty".
  static Result<std::unique_ptr<EmbeddedPostgres>> Start(EmbeddedPostgresOptions options);

  // Stops the server (Stop()) and releases the lock.
  ~EmbeddedPostgres();
  EmbeddedPostgres(const EmbeddedPostgres&) = delete;
  EmbeddedPostgres& operator=(const EmbeddedPostgres&) = delete;

  // pg_ctl stop -m fast. Idempotent.
  Status Stop();
  // Starts the server again after Stop(), on the same port with the same password.
  Status Restart();
  bool running() const { return running_; }

  // The postmaster's pid while the server process lives, else -1 (never started, stopped, or
  // died: kill -9, OOM killer). Reads DIR/postmaster.pid and /proc; cheap enough to poll.
  pid_t ServerPid() const;
  // After the server died by itself: starts it again on the same port with the same password
  // (PostgreSQL runs crash recovery from its WAL). OK at once when it is alive. A failure (say
  // the dead server's backends still hold its shared memory) may be retried.
  Status RestartAfterCrash();

  // "postgresql://postgres:<password>@127.0.0.1:<port>/<database>"
  std::string uri() const { return UriFor(options_.database); }
  std::string UriFor(const std::string& database) const;
  // Creates `database` when it does not exist.
  Status CreateDatabase(const std::string& database);

  int port() const { return port_; }
  const std::string& cluster_dir() const { return pgdata_; }
  const std::string& bin_dir() const { return bin_dir_; }

  // The newest /usr/lib/postgresql/<version>/bin holding initdb, or NOT_FOUND.
  static Result<std::string> FindBinDir();

 private:
  explicit EmbeddedPostgres(EmbeddedPostgresOptions options);

  Status Prepare();
  // As root: data_dir, or a directory under /var/lib/gpupool/clusters when run_as cannot enter
  // data_dir (a symlink data_dir/pg points there).
  Status ChooseClusterParent();
  Status InitDb();
  Status StopStale();
  Status StartServer();
  Status SetPassword();
  // Runs a PostgreSQL program (as run_as when root) with output appended to `log`.
  Result<int> RunPg(const std::string& program, std::vector<std::string> args,
                    const std::string& log);
  // Admin connection over the Unix socket.
  std::string SocketConninfo(const std::string& database) const;

  EmbeddedPostgresOptions options_;
  std::string bin_dir_;
  std::string cluster_parent_;  // holds pg/ and pg.initdb/
  std::string pgdata_;
  std::string socket_dir_;
  bool own_socket_dir_ = false;  // a directory under /tmp we made (the data dir path is too long)
  std::string password_;
  int port_ = 0;
  int lock_fd_ = -1;
  bool as_root_ = false;
  bool running_ = false;
  bool started_once_ = false;  // the port is pinned from then on
};

}  // namespace gpupool
