#include "base/pipe_write.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>

namespace gpupool {

Status WriteToPipe(int fd, std::string_view data) {
  sigset_t pipe_only;
  sigemptyset(&pipe_only);
  sigaddset(&pipe_only, SIGPIPE);
  // A SIGPIPE already pending for this thread or the process is someone else's; leave it be.
  sigset_t pending;
  sigpending(&pending);
  const bool was_pending = sigismember(&pending, SIGPIPE) == 1;
  sigset_t old_mask;
  pthread_sigmask(SIG_BLOCK, &pipe_only, &old_mask);

  Status result = Status::Ok();
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = write(fd, data.data() + done, data.size() - done);
    if (n >= 0) {
      done += static_cast<size_t>(n);
      continue;
    }
    if (errno == EINTR) continue;
    if (errno == EPIPE) {
      // The write raised SIGPIPE on this thread (blocked, so pending); take it back.
      if (!was_pending) {
        const timespec zero{0, 0};
        while (sigtimedwait(&pipe_only, nullptr, &zero) < 0 && errno == EINTR) {
        }
      }
      result = Status::Unavailable("write to pipe: reader closed the pipe");
    } else {
      result = Status::Internal(std::string("write to pipe: ") + std::strerror(errno));
    }
    break;
  }
  pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
  return result;
}

}  // namespace gpupool
