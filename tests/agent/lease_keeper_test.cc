// LeaseKeeper with real processes: a tracked process group is SIGKILLed when the lease deadline
// passes without a renewal and when the agent side goes away; renewals keep it alive; an
// untracked group is left alone; a stopped (SIGSTOP) owner does not stop the keeper. With a
// socket path (issue 30), the keeper holds its groups through an agent restart: a later agent
// joins it, and with no agent back by the deadline it kills them and exits.
#include "agent/lease_keeper.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <thread>

#include "tests/support/wait_for.h"

extern char** environ;

namespace gpupool::agent {
namespace {

using namespace std::chrono_literals;

// `sleep 600` in a process group of its own (as the task runner starts tasks).
pid_t SpawnGroup() {
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);
  const char* argv[] = {"sleep", "600", nullptr};
  pid_t pid = -1;
  EXPECT_EQ(posix_spawnp(&pid, "sleep", nullptr, &attr, const_cast<char**>(argv), environ), 0);
  posix_spawnattr_destroy(&attr);
  return pid;
}

// True once the child has died (reaped here; it is this test's child).
bool Dead(pid_t pid) {
  int status = 0;
  return waitpid(pid, &status, WNOHANG) == pid;
}

void Reap(pid_t pid) {
  kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
}

TEST(LeaseKeeperTest, KillsTrackedGroupsWhenTheLeaseLapses) {
  auto keeper = LeaseKeeper::Start();
  ASSERT_TRUE(keeper.ok()) << keeper.status().ToString();
  const pid_t tracked = SpawnGroup();
  const pid_t untracked = SpawnGroup();
  ASSERT_TRUE((*keeper)->Track(tracked));
  (*keeper)->Renew(LeaseKeeper::MonotonicNowUs() + 300'000);
  EXPECT_TRUE(testing::WaitFor([&] { return Dead(tracked); }, 30s));
  EXPECT_FALSE(Dead(untracked));
  Reap(untracked);
}

TEST(LeaseKeeperTest, RenewalsKeepTasksAlive) {
  auto keeper = LeaseKeeper::Start();
  ASSERT_TRUE(keeper.ok());
  const pid_t pid = SpawnGroup();
  ASSERT_TRUE((*keeper)->Track(pid));
  // Renewed to 2 s ahead every 100 ms for a second: never lapses (a loaded box delays the loop,
  // which only makes the deadline further ahead relative to the last renewal it missed).
  for (int i = 0; i < 10; ++i) {
    (*keeper)->Renew(LeaseKeeper::MonotonicNowUs() + 2'000'000);
    std::this_thread::sleep_for(100ms);
  }
  EXPECT_FALSE(Dead(pid));
  // Untracked (the task ended normally): a lapse no longer touches it.
  (*keeper)->Untrack(pid);
  (*keeper)->Renew(LeaseKeeper::MonotonicNowUs());
  const pid_t probe = SpawnGroup();  // tracked after: killed, proving the lapse was processed
  ASSERT_TRUE((*keeper)->Track(probe));
  EXPECT_TRUE(testing::WaitFor([&] { return Dead(probe); }, 30s));
  EXPECT_FALSE(Dead(pid));
  Reap(pid);
}

TEST(LeaseKeeperTest, KillsEverythingWhenTheAgentGoesAway) {
  auto keeper = LeaseKeeper::Start();
  ASSERT_TRUE(keeper.ok());
  const pid_t a = SpawnGroup();
  const pid_t b = SpawnGroup();
  ASSERT_TRUE((*keeper)->Track(a));
  ASSERT_TRUE((*keeper)->Track(b));
  const pid_t keeper_pid = (*keeper)->pid();
  keeper->reset();  // closes the socket as an agent's death would, and reaps the keeper
  EXPECT_TRUE(testing::WaitFor([&] { return Dead(a); }, 30s));
  EXPECT_TRUE(testing::WaitFor([&] { return Dead(b); }, 30s));
  EXPECT_NE(kill(keeper_pid, 0), 0);
}

TEST(LeaseKeeperTest, IgnoresSignalsMeantForTheAgent) {
  auto keeper = LeaseKeeper::Start();
  ASSERT_TRUE(keeper.ok());
  const pid_t pid = SpawnGroup();
  ASSERT_TRUE((*keeper)->Track(pid));
  // Its own process group: a signal to the agent's group misses it; SIGTERM is ignored.
  EXPECT_NE(getpgid((*keeper)->pid()), getpgrp());
  kill((*keeper)->pid(), SIGTERM);
  (*keeper)->Renew(LeaseKeeper::MonotonicNowUs() + 200'000);
  EXPECT_TRUE(testing::WaitFor([&] { return Dead(pid); }, 30s));
}

// A keeper with a socket in a fresh directory.
std::string SocketDir() {
  char tmpl[] = "/tmp/gpupool-keeper-XXXXXX";
  return mkdtemp(tmpl);
}

TEST(LeaseKeeperTest, HoldsTasksThroughAnAgentRestartUnderTheLease) {
  const std::string dir = SocketDir();
  const std::string path = dir + "/lease-keeper.sock";
  auto first = LeaseKeeper::Start(path);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_FALSE((*first)->attached());
  const pid_t keeper_pid = (*first)->pid();
  const pid_t task = SpawnGroup();
  ASSERT_TRUE((*first)->Track(task));
  (*first)->Renew(LeaseKeeper::MonotonicNowUs() + 60'000'000);
  (*first)->Leave();  // as a dying agent's end of the socket closes
  first->reset();
  std::this_thread::sleep_for(300ms);
  EXPECT_FALSE(Dead(task)) << "the keeper killed a task whose lease still held";
  // The next agent process joins the same keeper and takes the task over.
  auto second = LeaseKeeper::Start(path);
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_TRUE((*second)->attached());
  EXPECT_EQ((*second)->pid(), keeper_pid);
  (*second)->Reset();
  ASSERT_TRUE((*second)->Track(task));
  // Its word counts: a lapse it sets kills the task.
  (*second)->Renew(LeaseKeeper::MonotonicNowUs() + 200'000);
  EXPECT_TRUE(testing::WaitFor([&] { return Dead(task); }, 30s));
  second->reset();  // shutdown: the keeper exits
  EXPECT_TRUE(testing::WaitFor([&] { return Dead(keeper_pid); }, 30s));
  EXPECT_FALSE(std::filesystem::exists(path));
  std::filesystem::remove_all(dir);
}

TEST(LeaseKeeperTest, WithNoAgentBackByTheDeadlineItKillsAndExits) {
  const std::string dir = SocketDir();
  const std::string path = dir + "/lease-keeper.sock";
  auto keeper = LeaseKeeper::Start(path);
  ASSERT_TRUE(keeper.ok());
  const pid_t keeper_pid = (*keeper)->pid();
  const pid_t task = SpawnGroup();
  ASSERT_TRUE((*keeper)->Track(task));
  (*keeper)->Renew(LeaseKeeper::MonotonicNowUs() + 500'000);
  (*keeper)->Leave();
  EXPECT_TRUE(testing::WaitFor([&] { return Dead(task); }, 30s));
  EXPECT_TRUE(testing::WaitFor([&] { return Dead(keeper_pid); }, 30s));
  std::filesystem::remove_all(dir);
}

// Before any lease was granted nothing bounds the tasks: an agent's death kills them at once.
TEST(LeaseKeeperTest, WithoutALeaseTheAgentsDeathKillsAtOnce) {
  const std::string dir = SocketDir();
  auto keeper = LeaseKeeper::Start(dir + "/lease-keeper.sock");
  ASSERT_TRUE(keeper.ok());
  const pid_t task = SpawnGroup();
  ASSERT_TRUE((*keeper)->Track(task));
  (*keeper)->Leave();
  EXPECT_TRUE(testing::WaitFor([&] { return Dead(task); }, 30s));
  std::filesystem::remove_all(dir);
}

TEST(LeaseKeeperTest, ASocketPathTooLongIsRefusedNamingIt) {
  const std::string path = "/tmp/" + std::string(120, 'k') + "/lease-keeper.sock";
  auto keeper = LeaseKeeper::Start(path);
  ASSERT_FALSE(keeper.ok());
  EXPECT_EQ(keeper.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(keeper.status().message().find("longer than 107 bytes"), std::string::npos)
      << keeper.status().message();
}

}  // namespace
}  // namespace gpupool::agent
