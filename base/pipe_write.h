// WriteToPipe: write all of a buffer to a pipe whose reader may already be gone, without the
// process dying of SIGPIPE.
//
// A helper the agent spawns (nvidia-cuda-mps-control as a client) exits at once when it has
// nothing to talk to, often before the agent writes its commands. A plain write() then raises
// SIGPIPE, whose default action kills the whole agent and every task it supervises. Here the
// signal is blocked on the calling thread for the write, and one it raised is consumed before
// the mask is restored, so the caller sees EPIPE as an error and nothing else in the process
// changes: other threads and the process-wide disposition are untouched.
//
// Thread safety: safe from any thread; it changes only the calling thread's signal mask.
#pragma once

#include <string_view>

#include "base/status.h"

namespace gpupool {

// Writes all of `data` to `fd`, retrying on EINTR and short writes. A reader that has gone is
// Unavailable("... reader closed the pipe"); other failures are Internal, naming errno.
Status WriteToPipe(int fd, std::string_view data);

}  // namespace gpupool
