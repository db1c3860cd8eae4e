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
  // HELLO on the private socket first, so that hello() is complete before anyone can see the
  // connection.
  Request req{
      kMagic, kVersion, static_cast<uint16_t>(Op::kHello), static_cast<uint32_t>(Kind::kNone),
      0,      0};
  Response r{};
  ssize_t n;
  do n = send(fd, &req, sizeof req, MSG_NOSIGNAL);
  while (n < 0 && errno == EINTR);
  bool ok = n == static_cast<ssize_t>(sizeof req);
  if (ok) {
    do n = recv(fd, &r, sizeof r, 0);
    while (n < 0 && errno == EINTR);
    ok = n == static_cast<ssize_t>(sizeof r) && r.status == 0;
  }
  if (!ok) {
    close(fd);
    return false;
  }
  pthread_mutex_lock(&mu_);
  hello_ = r;
  int old = fd_.exchange(fd, std::memory_order_acq_rel);
  if (old >= 0) close(old);
  pthread_mutex_unlock(&mu_);
  return true;
}

bool LedgerClient::Call(Op op, Kind kind, uint64_t bytes, Response* out) {
  Request req{kMagic, kVersion, static_cast<uint16_t>(op), static_cast<uint32_t>(kind), 0, bytes};
  pthread_mutex_lock(&mu_);
  int fd = fd_.load(std::memory_order_acquire);
  bool ok = fd >= 0;
  if (ok) {
    ssize_t n;
    do n = send(fd, &req, sizeof req, MSG_NOSIGNAL);
    while (n < 0 && errno == EINTR);
    ok = n == static_cast<ssize_t>(sizeof req);
  }
  if (ok) {
    ssize_t n;
    do n = recv(fd, out, sizeof *out, 0);
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
  int fd = fd_.exchange(-1);
  if (fd >= 0) close(fd);
}

}  // namespace gpupool::ledger
