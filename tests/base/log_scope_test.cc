// ScopedThreadLogFloor (base/log_scope.h): lines below the floor logged on the scope's thread are
// dropped while it lives; other threads and lines at or above the floor still reach stderr. The
// test points fd 2 at a file and reads back what was written.
#include "base/log_scope.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

namespace gpupool {
namespace {

// Runs `fn` with stderr going to a file; returns what was written.
template <typename Fn>
std::string CaptureStderr(Fn fn) {
  char path[] = "/tmp/gpupool-log-scope-XXXXXX";
  const int fd = mkstemp(path);
  EXPECT_GE(fd, 0);
  std::fflush(stderr);
  const int saved = dup(2);
  dup2(fd, 2);
  fn();
  std::fflush(stderr);
  dup2(saved, 2);
  close(saved);
  close(fd);
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  unlink(path);
  return text.str();
}

TEST(LogScopeTest, LinesBelowTheFloorOnThisThreadAreDropped) {
  const std::string out = CaptureStderr([] {
    LogInfo("test", "before");
    {
      ScopedThreadLogFloor quiet(LogLevel::kError);
      LogInfo("test", "hidden info");
      LogWarn("test", "hidden warning");
      LogError("test", "shown error");
      std::thread other([] { LogInfo("test", "other thread"); });
      other.join();
      {
        ScopedThreadLogFloor inner(LogLevel::kWarn);
        LogWarn("test", "inner warning");
      }
      LogWarn("test", "hidden again");
    }
    LogInfo("test", "after");
  });
  EXPECT_NE(out.find("msg=before"), std::string::npos) << out;
  EXPECT_EQ(out.find("hidden"), std::string::npos) << out;
  EXPECT_NE(out.find("msg=\"shown error\""), std::string::npos) << out;
  EXPECT_NE(out.find("msg=\"other thread\""), std::string::npos) << out;
  EXPECT_NE(out.find("msg=\"inner warning\""), std::string::npos) << out;
  EXPECT_NE(out.find("msg=after"), std::string::npos) << out;
}

}  // namespace
}  // namespace gpupool
