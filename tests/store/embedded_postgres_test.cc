// EmbeddedPostgres: initdb once, restart on the same cluster, take over a server left running
// by a killed daemon, refuse a data directory in use, and clear errors when a tool fails.
#include "store/embedded_postgres.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <pqxx/pqxx>

#include "store/embedded_supervisor.h"
#include "store/pg_store.h"
#include "store/process.h"
#include "tests/store/store_testing.h"
#include "tests/support/pg_fixture.h"
#include "tests/support/wait_for.h"

namespace gpupool::testing {
namespace {
namespace fs = std::filesystem;

PgStoreOptions Pg(const std::string& uri) {
  PgStoreOptions o;
  o.uri = uri;
  return o;
}

class EmbeddedPostgresTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gpupool-embedded-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    chmod(tmpl, 0755);  // the server runs as "postgres" when we are root
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  EmbeddedPostgresOptions Options() {
    EmbeddedPostgresOptions o;
    o.data_dir = dir_ + "/data";
    o.fsync = false;
    return o;
  }
  std::string dir_;
};

int64_t Mtime(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return -1;
  return st.st_mtim.tv_sec * 1'000'000'000LL + st.st_mtim.tv_nsec;
}

TEST_F(EmbeddedPostgresTest, InitializesOnceAndKeepsDataAcrossRestarts) {
  std::string version_file = dir_ + "/data/pg/PG_VERSION";
  int64_t first_init = 0;
  {
    ASSERT_OK_AND_ASSIGN(auto pg, EmbeddedPostgres::Start(Options()));
    first_init = Mtime(version_file);
    ASSERT_GT(first_init, 0);
    ASSERT_OK_AND_ASSIGN(auto store, PgStore::Open(Pg(pg->uri())));
    ASSERT_OK(store->AcquireLeadership().status());
    ASSERT_OK(ApplyAndWait(*store, {InsertJob{SampleJob(42, 1)}}));
  }
  ASSERT_OK_AND_ASSIGN(auto pg, EmbeddedPostgres::Start(Options()));
  EXPECT_EQ(Mtime(version_file), first_init) << "initdb ran twice";
  ASSERT_OK_AND_ASSIGN(auto store, PgStore::Open(Pg(pg->uri())));
  auto state = store->Recover();
  ASSERT_OK(state.status());
  ASSERT_EQ(state->jobs.size(), 1u);
  EXPECT_EQ(state->jobs[0], SampleJob(42, 1));
}

TEST_F(EmbeddedPostgresTest, TakesOverAServerLeftRunningByAKilledDaemon) {
  std::string bin, cluster;
  int old_port = 0;
  {
    ASSERT_OK_AND_ASSIGN(auto pg, EmbeddedPostgres::Start(Options()));
    bin = pg->bin_dir();
    cluster = pg->cluster_dir();
    old_port = pg->port();
    // Simulate kill -9 of the daemon: the server keeps running, nobody stops it. Start it again
    // by hand after the clean stop below, the way the dead daemon had left it.
  }
  std::vector<std::string> start = {
      bin + "/pg_ctl",
      "start",
      "-D",
      cluster,
      "-w",
      "-o",
      "-p " + std::to_string(old_port) + " -k " + cluster + " -c listen_addresses=127.0.0.1",
      "-l",
      cluster + "/server.log"};
  if (geteuid() == 0) start.insert(start.begin(), {"/usr/sbin/runuser", "-u", "postgres", "--"});
  ASSERT_OK_AND_ASSIGN(int rc, RunProcess(start, dir_ + "/manual.log"));
  ASSERT_EQ(rc, 0) << TailOfFile(dir_ + "/manual.log", 5);
  ASSERT_TRUE(fs::exists(cluster + "/postmaster.pid"));

  ASSERT_OK_AND_ASSIGN(auto pg, EmbeddedPostgres::Start(Options()));
  ASSERT_OK_AND_ASSIGN(auto store, PgStore::Open(Pg(pg->uri())));
  EXPECT_OK(store->Recover().status());
}

TEST_F(EmbeddedPostgresTest, RefusesADataDirectoryInUse) {
  ASSERT_OK_AND_ASSIGN(auto pg, EmbeddedPostgres::Start(Options()));
  auto second = EmbeddedPostgres::Start(Options());
  EXPECT_EQ(second.status().code(), StatusCode::kFailedPrecondition) << second.status().ToString();
  EXPECT_NE(second.status().message().find("in use"), std::string::npos);
}

TEST_F(EmbeddedPostgresTest, InitdbFailureQuotesItsOutput) {
  // A fake bin dir whose initdb fails the way a broken installation would.
  std::string bin = dir_ + "/fakebin";
  fs::create_directories(bin);
  chmod(bin.c_str(), 0755);
  for (const char* tool : {"initdb", "pg_ctl"}) {
    std::ofstream(bin + "/" + tool) << "#!/bin/sh\necho \"" << tool
                                    << ": error: could not create directory: No space left\"\n"
                                       "exit 1\n";
    chmod((bin + "/" + tool).c_str(), 0755);
  }
  EmbeddedPostgresOptions o = Options();
  o.bin_dir = bin;
  Status st = EmbeddedPostgres::Start(o).status();
  EXPECT_EQ(st.code(), StatusCode::kInternal) << st.ToString();
  EXPECT_NE(st.message().find("initdb failed (exit 1): initdb: error: could not create directory"),
            std::string::npos)
      << st.message();
  EXPECT_FALSE(fs::exists(dir_ + "/data/pg")) << "a failed initdb must leave no cluster behind";
}

TEST_F(EmbeddedPostgresTest, UsesTheConfiguredPortAndDatabase) {
  EmbeddedPostgresOptions o = Options();
  ASSERT_OK_AND_ASSIGN(auto probe, EmbeddedPostgres::Start(o));
  int port = probe->port();
  probe.reset();
  o.port = port;
  o.database = "my db";
  ASSERT_OK_AND_ASSIGN(auto pg, EmbeddedPostgres::Start(o));
  EXPECT_EQ(pg->port(), port);
  pqxx::connection c(pg->uri());
  EXPECT_EQ(std::string(c.dbname()), "my db");
}

TEST_F(EmbeddedPostgresTest, DataDirectoryThePostgresUserCannotEnter) {
  // Like a data directory under /root (mode 0700) when gpupoold runs as root.
  std::string priv = dir_ + "/private";
  fs::create_directories(priv);
  chmod(priv.c_str(), 0700);
  EmbeddedPostgresOptions o = Options();
  o.data_dir = priv + "/data";
  std::string cluster;
  {
    ASSERT_OK_AND_ASSIGN(auto pg, EmbeddedPostgres::Start(o));
    cluster = pg->cluster_dir();
    pqxx::connection c(pg->uri());
    EXPECT_TRUE(c.is_open());
  }
  if (geteuid() == 0) {
    EXPECT_TRUE(cluster.starts_with("/var/lib/gpupool/clusters/")) << cluster;
    EXPECT_TRUE(fs::is_symlink(o.data_dir + "/pg"));
    // A second start finds the same cluster through the same rule.
    ASSERT_OK_AND_ASSIGN(auto again, EmbeddedPostgres::Start(o));
    EXPECT_EQ(again->cluster_dir(), cluster);
    again.reset();
    std::error_code ec;
    fs::remove_all(fs::path(cluster).parent_path(), ec);
  } else {
    EXPECT_EQ(cluster, o.data_dir + "/pg");
  }
}

TEST(FindBinDirTest, FindsTheSystemBinaries) {
  auto bin = EmbeddedPostgres::FindBinDir();
  ASSERT_OK(bin.status());
  EXPECT_TRUE(fs::exists(*bin + "/initdb")) << *bin;
}

TEST_F(EmbeddedPostgresTest, SupervisorRestartsAKilledServerOnTheSamePort) {
  ASSERT_OK_AND_ASSIGN(auto pg, EmbeddedPostgres::Start(Options()));
  ASSERT_OK_AND_ASSIGN(auto store, PgStore::Open(Pg(pg->uri())));
  ASSERT_OK(store->AcquireLeadership().status());
  ASSERT_OK(ApplyAndWait(*store, {InsertJob{SampleJob(1, 1)}}));
  const int port = pg->port();
  const pid_t old_pid = pg->ServerPid();
  ASSERT_GT(old_pid, 0);
  EmbeddedSupervisor supervisor(pg.get(), {.interval = std::chrono::milliseconds(100)});

  ASSERT_EQ(::kill(old_pid, SIGKILL), 0);
  ASSERT_TRUE(WaitFor([&] { return supervisor.restarts() == 1; }, std::chrono::seconds(60),
                      std::chrono::milliseconds(50)))
      << "the supervisor did not restart the server";
  EXPECT_EQ(pg->port(), port);
  EXPECT_NE(pg->ServerPid(), old_pid);
  EXPECT_GT(pg->ServerPid(), 0);
  // The same store, untouched, writes again once its connections have reconnected; what was
  // committed before the crash is still there.
  ASSERT_TRUE(WaitFor([&] { return ApplyAndWait(*store, {InsertJob{SampleJob(2, 1)}}).ok(); },
                      std::chrono::seconds(30), std::chrono::milliseconds(100)));
  ASSERT_OK_AND_ASSIGN(RecoveredState state, store->Recover());
  ASSERT_EQ(state.jobs.size(), 2u);
  EXPECT_EQ(state.jobs[0], SampleJob(1, 1));
  EXPECT_OK(store->CheckWritable());
  supervisor.Stop();
  EXPECT_OK(pg->Stop());
  EXPECT_EQ(pg->ServerPid(), -1);
}

TEST_F(EmbeddedPostgresTest, ServerPidIsMinusOneWhenStopped) {
  ASSERT_OK_AND_ASSIGN(auto pg, EmbeddedPostgres::Start(Options()));
  EXPECT_GT(pg->ServerPid(), 0);
  ASSERT_OK(pg->Stop());
  EXPECT_EQ(pg->ServerPid(), -1);
  ASSERT_OK(pg->Restart());
  EXPECT_GT(pg->ServerPid(), 0);
}

}  // namespace
}  // namespace gpupool::testing
