// LeaseKeeper with real processes: a tracked process group is SIGKILLed when the lease deadline
// passes without a renewal and when the agent side goes away; renewals keep it alive; an
// untracked group is left alone; a stopped (SIGSTOP) owner does not stop the keeper.
#include "agent/lease_keeper.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

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

}  // namespace
}  // namespace gpupool::agent
