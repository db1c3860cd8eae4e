// CoreLoop's Stop: it returns however the tick timer and the queue stand when it is called.
#include "scheduler/core_loop.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>

namespace gpupool {
namespace {

using namespace std::chrono_literals;

// A tick that fell due while the loop was busy has fired already when Stop's step cancels the
// timer: its handler still runs with success, and it used to arm the timer again, so run()
// never ran out of work and Stop waited for ever (a teardown hang in api_agent_hub_test).
TEST(CoreLoopTest, StopReturnsWhenATickFellDueWhileTheLoopWasBusy) {
  for (int round = 0; round < 5; ++round) {
    CoreLoop loop;
    std::atomic<int> ticks{0};
    loop.Start([&] { ++ticks; }, 1ms);
    std::promise<void> busy;
    loop.Post([&] {
      busy.set_value();
      std::this_thread::sleep_for(20ms);  // the 1 ms tick falls due meanwhile
    });
    busy.get_future().wait();
    auto stopped = std::async(std::launch::async, [&] { loop.Stop(); });
    ASSERT_EQ(stopped.wait_for(5s), std::future_status::ready) << "round " << round;
  }
}

TEST(CoreLoopTest, StopRunsWhatWasPostedBeforeIt) {
  CoreLoop loop;
  loop.Start({}, 1s);
  int ran = 0;
  for (int i = 0; i < 100; ++i) loop.Post([&] { ++ran; });
  loop.Stop();
  EXPECT_EQ(ran, 100);
}

}  // namespace
}  // namespace gpupool
