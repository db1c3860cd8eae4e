#include "tests/support/pg_auto_failover.h"

#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "tests/support/daemon_process.h"
#include "tests/support/free_port.h"

namespace gpupool::testing {
namespace {

// Creates and runs the cluster in $1 with the monitor on port $2 and the nodes on $3 and $4; each
// pg_autoctl runs in a session of its own (setsid) so that it outlives this script.
constexpr char kCreate[] = R"(set -eu
D=$1; M=$2; P1=$3; P2=$4
export PATH=/usr/lib/postgresql/15/bin:$PATH XDG_CONFIG_HOME=$D/config XDG_DATA_HOME=$D/data
cd "$D"
pg_autoctl create monitor --pgdata "$D/monitor" --pgport "$M" --hostname 127.0.0.1 \
  --listen 127.0.0.1 --auth trust --no-ssl > monitor.log 2>&1
(setsid pg_autoctl run --pgdata "$D/monitor" >> monitor.log 2>&1 &)
for i in $(seq 1 300); do pg_isready -q -h 127.0.0.1 -p "$M" && break; sleep 0.2; done
MON="postgres://autoctl_node@127.0.0.1:$M/pg_auto_failover?sslmode=disable"
n=0
for P in "$P1" "$P2"; do
  n=$((n+1))
  (setsid pg_autoctl create postgres --pgdata "$D/node$n" --pgport "$P" --hostname 127.0.0.1 \
     --listen 127.0.0.1 --auth trust --no-ssl --monitor "$MON" --dbname gpupool --name "node$n" \
     --run > "node$n.log" 2>&1 &)
  for i in $(seq 1 600); do pg_isready -q -h 127.0.0.1 -p "$P" && break; sleep 0.2; done
done
# The standby's base backup waits for a checkpoint on the primary: ask for one until it is in.
for i in $(seq 1 600); do
  if pg_autoctl show state --pgdata "$D/monitor" 2>/dev/null | grep -q "secondary | *secondary"; then
    exit 0
  fi
  psql -q -h 127.0.0.1 -p "$P1" -d gpupool -c CHECKPOINT > /dev/null 2>&1 || true
  sleep 0.5
done
echo "the standby never became a secondary" >&2
exit 1
)";

// Runs `command` through bash, as the postgres user when this process is root; returns its
// output and exit status.
int RunAsPostgres(const std::string& dir, const std::string& command, std::string* out) {
  const std::string script = dir + "/run.sh";
  std::ofstream(script) << command;
  chmod(script.c_str(), 0755);
  const std::string as = geteuid() == 0 ? "/usr/sbin/runuser -u postgres -- " : "";
  const std::string line = as + "bash " + script + " 2>&1";
  FILE* p = popen(line.c_str(), "r");
  if (p == nullptr) return -1;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out->append(buf, n);
  return pclose(p);
}

}  // namespace

Result<std::unique_ptr<PgAutoFailoverCluster>> PgAutoFailoverCluster::Start() {
  if (access("/usr/bin/pg_autoctl", X_OK) != 0) {
    return Status::FailedPrecondition(
        "pg_autoctl is missing: install postgresql-15-auto-failover and pg-auto-failover-cli "
        "(scripts/install-deps)");
  }
  std::unique_ptr<PgAutoFailoverCluster> c(new PgAutoFailoverCluster());
  GPUPOOL_ASSIGN_OR_RETURN(c->dir_, MakeTempDir("gpupool-pgaf"));
  if (geteuid() == 0) {
    const passwd* pw = getpwnam("postgres");
    if (pw == nullptr) return Status::FailedPrecondition("no postgres user to run PostgreSQL as");
    if (chown(c->dir_.c_str(), pw->pw_uid, pw->pw_gid) != 0) {
      return Status::Internal("cannot give " + c->dir_ + " to the postgres user");
    }
  }
  c->monitor_port_ = FreePort();
  c->node_port_[1] = FreePort();
  c->node_port_[2] = FreePort();
  const std::string script = c->dir_ + "/create.sh";
  std::ofstream(script) << kCreate;
  std::string out;
  const int rc = RunAsPostgres(
      c->dir_,
      "bash " + script + " " + c->dir_ + " " + std::to_string(c->monitor_port_) + " " +
          std::to_string(c->node_port_[1]) + " " + std::to_string(c->node_port_[2]) + "\n",
      &out);
  if (rc != 0) {
    return Status::Internal("pg_auto_failover cluster in " + c->dir_ + " did not start: " + out +
                            "\n" + c->State());
  }
  c->uri_ = "postgresql://postgres@127.0.0.1:" + std::to_string(c->node_port_[1]) +
            ",127.0.0.1:" + std::to_string(c->node_port_[2]) +
            "/gpupool?target_session_attrs=read-write&connect_timeout=3";
  return c;
}

// Kills the session of the pg_autoctl that runs `pgdata` (it and every process it started, its
// postgres included: they all share the session setsid gave it).
std::string KillSessionOf(const std::string& pgdata) {
  return "pid=$(head -1 '" + pgdata + "/postmaster.pid' 2>/dev/null); " +
         "if [ -n \"$pid\" ]; then sid=$(ps -o sid= -p \"$pid\" | tr -d ' '); " +
         "[ -n \"$sid\" ] && pkill -9 -s \"$sid\"; kill -9 \"$pid\"; fi; true\n";
}

PgAutoFailoverCluster::~PgAutoFailoverCluster() {
  std::string out;
  RunAsPostgres(dir_,
                KillSessionOf(dir_ + "/node1") + KillSessionOf(dir_ + "/node2") +
                    KillSessionOf(dir_ + "/monitor") + "pkill -9 -f '" + dir_ + "/'; true\n",
                &out);
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

int PgAutoFailoverCluster::Primary() const {
  for (int n = 1; n <= 2; ++n) {
    std::string out;
    const int rc = RunAsPostgres(dir_,
                                 "/usr/lib/postgresql/15/bin/psql -h 127.0.0.1 -p " +
                                     std::to_string(node_port_[n]) +
                                     " -d gpupool -Atc 'select pg_is_in_recovery()'\n",
                                 &out);
    if (rc == 0 && out.rfind("f", 0) == 0) return n;
  }
  return 0;
}

void PgAutoFailoverCluster::KillNode(int n) {
  std::string out;
  RunAsPostgres(dir_, KillSessionOf(dir_ + "/node" + std::to_string(n)), &out);
}

std::string PgAutoFailoverCluster::State() const {
  std::string out;
  RunAsPostgres(dir_,
                "XDG_CONFIG_HOME=" + dir_ + "/config XDG_DATA_HOME=" + dir_ +
                    "/data pg_autoctl show state --pgdata " + dir_ + "/monitor\n",
                &out);
  return out;
}

}  // namespace gpupool::testing
