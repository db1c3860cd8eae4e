#include "tests/support/pg_fixture.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>

#include "store/process.h"

namespace gpupool::testing {
namespace {

// Starts `sh -c 'cat >/dev/null; stop server; rm -rf dir'` reading from a pipe we hold: when
// this process ends for any reason (even during initdb) the pipe closes and the watchdog cleans up.
int StartWatchdog(const std::string& bin_dir, const std::string& cluster_dir,
                  const std::string& dir) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return -1;
  std::string stop = ShellQuote(bin_dir + "/pg_ctl") + " stop -D " + ShellQuote(cluster_dir) +
                     " -m immediate -w -t 20";
  if (geteuid() == 0) stop = "runuser -u postgres -- " + stop;
  std::string script =
      "cat >/dev/null; sleep 1; " + stop + " >/dev/null 2>&1; rm -rf " + ShellQuote(dir);
  auto pid = SpawnDetached({"/bin/sh", "-c", script}, fds[0]);
  close(fds[0]);
  if (!pid.ok()) {
    close(fds[1]);
    return -1;
  }
  return fds[1];
}

}  // namespace

Result<std::unique_ptr<TestPostgres>> TestPostgres::Start(Options options) {
  std::unique_ptr<TestPostgres> t(new TestPostgres());
  char tmpl[] = "/tmp/gpupool-test-pg-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) {
    return Status::Internal("mkdtemp: " + std::string(std::strerror(errno)));
  }
  t->dir_ = tmpl;
  // The server runs as "postgres" when we are root: it must be able to enter the directory.
  chmod(tmpl, 0755);
  EmbeddedPostgresOptions o;
  o.data_dir = t->dir_ + "/data";
  if (auto bin = EmbeddedPostgres::FindBinDir(); bin.ok()) {
    t->watchdog_fd_ = StartWatchdog(*bin, o.data_dir + "/pg", t->dir_);
  }
  o.fsync = options.fsync;
  o.database = "postgres";
  o.settings = {"shared_buffers=32MB", "max_connections=300"};
  auto server = EmbeddedPostgres::Start(o);
  if (!server.ok()) {
    std::error_code ec;
    std::filesystem::remove_all(t->dir_, ec);
    return server.status().WithContext("test PostgreSQL (from the system binaries) did not start");
  }
  t->server_ = std::move(server).value();
  return t;
}

TestPostgres::~TestPostgres() {
  server_.reset();  // stops the server
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
  if (watchdog_fd_ >= 0) close(watchdog_fd_);
}

Result<std::string> TestPostgres::CreateDatabase() {
  static std::atomic<int> counter{0};
  std::string name = "test_" + std::to_string(getpid()) + "_" + std::to_string(++counter);
  GPUPOOL_RETURN_IF_ERROR(server_->CreateDatabase(name));
  return server_->UriFor(name);
}

Result<TestPostgres*> SharedTestPostgres() {
  static std::once_flag once;
  static std::unique_ptr<TestPostgres> server;
  static Status error;
  std::call_once(once, [] {
    auto r = TestPostgres::Start();
    if (r.ok()) {
      server = std::move(r).value();
    } else {
      error = r.status();
    }
  });
  if (server == nullptr) return error;
  return server.get();
}

Result<std::string> CreateTestDatabase() {
  GPUPOOL_ASSIGN_OR_RETURN(TestPostgres * server, SharedTestPostgres());
  return server->CreateDatabase();
}

}  // namespace gpupool::testing
