// Polling for tests of asynchronous things (servers, streams, child processes): true as soon as
// `pred` holds, false if it still does not after `timeout`. Polls every `every`.
#pragma once

#include <chrono>
#include <thread>

namespace gpupool::testing {

template <typename Pred>
bool WaitFor(Pred&& pred, std::chrono::milliseconds timeout = std::chrono::seconds(10),
             std::chrono::milliseconds every = std::chrono::milliseconds(10)) {
  for (auto end = std::chrono::steady_clock::now() + timeout;
       std::chrono::steady_clock::now() < end; std::this_thread::sleep_for(every)) {
    if (pred()) return true;
  }
  return pred();
}

}  // namespace gpupool::testing
