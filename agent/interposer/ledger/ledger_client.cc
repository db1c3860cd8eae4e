#include "agent/interposer/ledger/ledger_client.h"

#include <errno.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cstring>

namespace gpupool::ledger {
namespace {

// Sends one frame and reads its answer, retrying interrupted calls.
bool RoundTrip(int fd, const Request& req, Response* out) {
  ssize_t n;
  do n = send(fd, &req, sizeof req, MSG_NOSIGNAL);
  while (n < 0 && errno == EINTR);
  if (n != static_cast<ssize_t>(sizeof req)) return false;
  do n = recv(fd, out, sizeof *out, 0);
  while (n < 0 && errno == EINTR);
  return n == static_cast<ssize_t>(sizeof *out);
}

Request Frame(Op op, Kind kind, uint64_t bytes, uint64_t start_ns = 0) {
  return Request{kMagic, kVersion, static_cast<uint16_t>(op), static_cast<uint32_t>(kind), 0,
                 bytes,  start_ns};
}

int64_t NowMs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1'000'000;
}

}  // namespace

int LedgerClient::Open(const sockaddr_un& addr, Response* hello) {
  int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  Response r{};
  if (connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0 ||
      !RoundTrip(fd, Frame(Op::kHello, Kind::kNone, 0), &r) || r.status != 0) {
    close(fd);
    return -1;
  }
  *hello = r;
  return fd;
}

bool LedgerClient::Connect(const char* socket_path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  size_t len = socket_path == nullptr ? 0 : strlen(socket_path);
  if (len == 0 || len >= sizeof addr.sun_path) return false;
  std::memcpy(addr.sun_path, socket_path, len);
  // HELLO on the private socket first, so that hello() is complete before anyone can see the
  // connection.
  Response r{};
  int fd = Open(addr, &r);
  if (fd < 0) return false;
  pthread_mutex_lock(&mu_);
  if (fd_.load(std::memory_order_acquire) >= 0) {  // another thread connected meanwhile
    pthread_mutex_unlock(&mu_);
    close(fd);
    return true;
  }
  // A connection lost for longer than a reconnection waits still had a charge: it is reclaimed.
  const bool ok = ReclaimOn(fd);
  if (ok) {
    hello_ = r;
    addr_ = addr;
    int old = fd_.exchange(fd, std::memory_order_acq_rel);
    if (old >= 0) close(old);
  } else {
    close(fd);
  }
  pthread_mutex_unlock(&mu_);
  return ok;
}

bool LedgerClient::Exchange(int fd, const Request& req, Response* out) {
  if (fd < 0 || !RoundTrip(fd, req, out)) return false;
  held_vram_ = out->conn_vram;
  held_spill_ = out->conn_spill;
  return true;
}

bool LedgerClient::ReclaimOn(int fd) {
  const uint64_t vram = held_vram_, spill = held_spill_;
  Response r{};
  bool ok =
      (vram == 0 || (Exchange(fd, Frame(Op::kReclaim, Kind::kVram, vram), &r) && r.status == 0)) &&
      (spill == 0 || (Exchange(fd, Frame(Op::kReclaim, Kind::kSpill, spill), &r) && r.status == 0));
  if (!ok) {
    held_vram_ = vram;  // nothing was taken over: the next try states the same charge
    held_spill_ = spill;
  }
  return ok;
}

bool LedgerClient::ReconnectLocked(int wait_ms) {
  // The dead connection stays published meanwhile, so that other threads wait for this one
  // (on mu_) instead of opening connections of their own.
  const int64_t deadline = NowMs() + wait_ms;
  for (;;) {
    // hello_ stays: the restarted ledger serves the same grant, and hello() is read unlocked.
    Response hello{};
    int fd = addr_.sun_family == AF_UNIX ? Open(addr_, &hello) : -1;
    if (fd >= 0 && ReclaimOn(fd)) {
      close(fd_.exchange(fd, std::memory_order_acq_rel));
      reconnects_.fetch_add(1, std::memory_order_relaxed);
      return true;
    }
    if (fd >= 0) close(fd);
    if (NowMs() >= deadline) {
      int old = fd_.exchange(-1, std::memory_order_acq_rel);
      if (old >= 0) close(old);
      return false;
    }
    timespec pause{0, 100'000'000};
    nanosleep(&pause, nullptr);
  }
}

bool LedgerClient::Call(Op op, Kind kind, uint64_t bytes, Response* out, int reconnect_wait_ms,
                        uint64_t start_ns) {
  const Request req = Frame(op, kind, bytes, start_ns);
  pthread_mutex_lock(&mu_);
  bool ok = Exchange(fd_.load(std::memory_order_acquire), req, out);
  if (!ok && fd_.load(std::memory_order_acquire) >= 0) {
    // The ledger went away under a live connection: its agent restarted.
    ok = ReconnectLocked(reconnect_wait_ms) &&
         Exchange(fd_.load(std::memory_order_acquire), req, out);
  }
  pthread_mutex_unlock(&mu_);
  return ok;
}

void LedgerClient::Reset() {
  // In a forked child the fd is the parent's connection: closing the child's copy leaves the
  // parent's open. The mutex is re-created: another thread may have held it at fork().
  pthread_mutex_init(&mu_, nullptr);
  held_vram_ = held_spill_ = 0;
  int fd = fd_.exchange(-1);
  if (fd >= 0) close(fd);
}

}  // namespace gpupool::ledger
