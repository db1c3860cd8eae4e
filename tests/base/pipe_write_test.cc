// WriteToPipe must turn a vanished reader into an error, never into SIGPIPE: the agent's MPS
// client exits before reading when no control daemon runs, and a plain write() there killed the
// whole test process (agent_mps_test, SIGPIPE in CI).
#include "base/pipe_write.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <string>

namespace gpupool {
namespace {

struct Pipe {
  int fds[2] = {-1, -1};
  Pipe() { EXPECT_EQ(pipe2(fds, O_CLOEXEC), 0); }
  ~Pipe() {
    for (int fd : fds)
      if (fd >= 0) close(fd);
  }
  void CloseReader() {
    close(fds[0]);
    fds[0] = -1;
  }
};

bool SigpipePending() {
  sigset_t pending;
  sigpending(&pending);
  return sigismember(&pending, SIGPIPE) == 1;
}

TEST(WriteToPipeTest, WritesEverythingToALiveReader) {
  Pipe p;
  const std::string data(1000, 'x');
  ASSERT_TRUE(WriteToPipe(p.fds[1], data).ok());
  std::string got(2000, '\0');
  const ssize_t n = read(p.fds[0], got.data(), got.size());
  ASSERT_EQ(n, 1000);
  got.resize(static_cast<size_t>(n));
  EXPECT_EQ(got, data);
}

TEST(WriteToPipeTest, AGoneReaderIsAnErrorAndNoSignalIsLeftBehind) {
  // SIGPIPE's default action: without the blocking this test process dies here.
  ASSERT_NE(signal(SIGPIPE, SIG_DFL), SIG_ERR);
  Pipe p;
  p.CloseReader();
  const Status st = WriteToPipe(p.fds[1], "quit\n");
  EXPECT_EQ(st.code(), StatusCode::kUnavailable);
  EXPECT_NE(st.message().find("reader closed the pipe"), std::string::npos) << st.message();
  EXPECT_FALSE(SigpipePending());
  // The thread's mask is as it was: SIGPIPE is not left blocked.
  sigset_t mask;
  pthread_sigmask(SIG_SETMASK, nullptr, &mask);
  EXPECT_EQ(sigismember(&mask, SIGPIPE), 0);
}

TEST(WriteToPipeTest, ASignalAlreadyBlockedAndPendingIsLeftForItsOwner) {
  sigset_t pipe_only, old_mask;
  sigemptyset(&pipe_only);
  sigaddset(&pipe_only, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_only, &old_mask);
  ASSERT_EQ(pthread_kill(pthread_self(), SIGPIPE), 0);
  ASSERT_TRUE(SigpipePending());
  Pipe p;
  p.CloseReader();
  EXPECT_EQ(WriteToPipe(p.fds[1], "x").code(), StatusCode::kUnavailable);
  EXPECT_TRUE(SigpipePending());  // still the owner's to take
  sigset_t mask;
  pthread_sigmask(SIG_SETMASK, nullptr, &mask);
  EXPECT_EQ(sigismember(&mask, SIGPIPE), 1);  // and still blocked, as the owner left it
  const timespec zero{0, 0};
  EXPECT_EQ(sigtimedwait(&pipe_only, nullptr, &zero), SIGPIPE);
  pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
}

TEST(WriteToPipeTest, ABadDescriptorNamesTheError) {
  const Status st = WriteToPipe(-1, "x");
  EXPECT_EQ(st.code(), StatusCode::kInternal);
  EXPECT_NE(st.message().find("Bad file descriptor"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace gpupool
