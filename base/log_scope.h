// ScopedThreadLogFloor: while it lives, lines below `floor` logged on this thread are dropped,
// whatever the process's level. For work that runs production code on made-up state — the
// twin's replays inside gpupoold (`gpupoolctl whatif`) — whose "MIG layout stored node=…" or
// "task preempted" lines would read in the daemon's log as if they had happened.
//
// Thread safety: thread-local; scopes nest (the inner floor holds until it ends).
#pragma once

#include "base/log.h"

namespace gpupool {

class ScopedThreadLogFloor {
 public:
  explicit ScopedThreadLogFloor(LogLevel floor);
  ~ScopedThreadLogFloor();
  ScopedThreadLogFloor(const ScopedThreadLogFloor&) = delete;
  ScopedThreadLogFloor& operator=(const ScopedThreadLogFloor&) = delete;

 private:
  int previous_;
};

}  // namespace gpupool
