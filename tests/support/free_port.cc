#include "tests/support/free_port.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <mutex>
#include <set>

namespace gpupool::testing {
namespace {

int BindAndRelease() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 0;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  int port = 0;
  socklen_t len = sizeof addr;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  ::close(fd);
  return port;
}

}  // namespace

int FreePort() {
  static std::mutex mu;
  static std::set<int> given;  // every port this process has handed out
  std::lock_guard<std::mutex> lock(mu);
  int port = 0;
  for (int attempt = 0; attempt < 1000; ++attempt) {
    port = BindAndRelease();
    if (port != 0 && given.insert(port).second) return port;
  }
  return port;  // the ephemeral range is exhausted by this process alone: let the caller fail
}

}  // namespace gpupool::testing
