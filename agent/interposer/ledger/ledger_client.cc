#include "agent/interposer/ledger/ledger_client.h"

#include <errno.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>

namespace gpupool::ledger {

bool LedgerClient::Connect(const char* socket_path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  size_t len = socket_path == nullptr ? 0 : strlen(socket_path);
  if (len == 0 || len >= sizeof addr.sun_path) return false;
  std::memcpy(addr.sun_path, socket_path, len);
  int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    close(fd);
    return false;
  }
  pthread_mutex_lock(&mu_);
  if (fd_ >= 0) close(fd_);
  fd_ = fd;
  pthread_mutex_unlock(&mu_);
  Response r;
  if (!Call(Op::kHello, Kind::kNone, 0, &r) || r.status != 0) {
    Reset();
    return false;
  }
  hello_ = r;
  return true;
}

bool LedgerClient::Call(Op op, Kind kind, uint64_t bytes, Response* out) {
  Request req{kMagic, kVersion, static_cast<uint16_t>(op), static_cast<uint32_t>(kind), 0, bytes};
  pthread_mutex_lock(&mu_);
  bool ok = fd_ >= 0;
  if (ok) {
    ssize_t n;
    do n = send(fd_, &req, sizeof req, MSG_NOSIGNAL);
    while (n < 0 && errno == EINTR);
    ok = n == static_cast<ssize_t>(sizeof req);
  }
  if (ok) {
    ssize_t n;
    do n = recv(fd_, out, sizeof *out, 0);
    while (n < 0 && errno == EINTR);
    ok = n == static_cast<ssize_t>(sizeof *out);
  }
  pthread_mutex_unlock(&mu_);
  return ok;
}

void LedgerClient::Reset() {
  // In a forked child the fd is the parent's connection: closing the child's copy leaves the
  // parent's open. The mutex is re-created: another thread may have held it at fork().
  pthread_mutex_init(&mu_, nullptr);
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
}

}  // namespace gpupool::ledger
