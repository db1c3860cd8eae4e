#include "agent/interposer/ledger/ledger_server.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

namespace gpupool::ledger {
namespace {

uint64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

// A pidfd for `pid` (Linux 5.3+), or -1; without one, liveness is polled with kill(pid, 0).
int PidFd(pid_t pid) {
#ifdef SYS_pidfd_open
  return static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
#else
  (void)pid;
  return -1;
#endif
}

// Whether the process has ended (a zombie has: the kernel has closed its files and its GPU
// contexts with them).
bool Ended(pid_t pid, int pidfd) {
  if (pidfd >= 0) {
    pollfd p{pidfd, POLLIN, 0};
    return poll(&p, 1, 0) > 0;
  }
  return kill(pid, 0) != 0 && errno == ESRCH;
}

constexpr int kFramesPerRound = 64;
// More connections than any task has processes × threads; past it new ones are closed.
constexpr size_t kMaxConnections = 1024;

// Bucket depth of the strict compute cap: at most this much GPU time in one burst.
constexpr int64_t kComputeBurstNs = 20'000'000;

}  // namespace

struct LedgerServer::Conn {
  int fd;
  pid_t pid;
  int pidfd;
  bool hello = false;
  bool charged = false;      // a reservation or release was served
  bool reclaimed[2] = {};    // kReclaim served, per kind
  bool took_orphan = false;  // its reclaim took its process's orphan charge
  uint64_t vram = 0, spill = 0;
};

struct LedgerServer::Orphan {
  pid_t pid;
  int pidfd;
  uint64_t vram, spill;
};

std::unique_ptr<LedgerServer> LedgerServer::Create(const std::string& socket_path,
                                                   const Limits& limits, std::string* error,
                                                   std::shared_ptr<DeviceArbiter> arbiter) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (socket_path.empty() || socket_path.size() >= sizeof addr.sun_path) {
    *error = "ledger socket path must be 1.." + std::to_string(sizeof addr.sun_path - 1) +
             " bytes: " + socket_path;
    return nullptr;
  }
  if (limits.compute_percent == 0 || limits.compute_percent > 100) {
    *error = "compute_percent must be 1..100";
    return nullptr;
  }
  std::memcpy(addr.sun_path, socket_path.data(), socket_path.size());
  int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) {
    *error = std::string("socket: ") + strerror(errno);
    return nullptr;
  }
  unlink(socket_path.c_str());
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || listen(fd, 128) != 0) {
    *error = "bind/listen " + socket_path + ": " + strerror(errno);
    close(fd);
    return nullptr;
  }
  int wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake < 0) {
    *error = std::string("eventfd: ") + strerror(errno);
    close(fd);
    return nullptr;
  }
  return std::unique_ptr<LedgerServer>(
      new LedgerServer(fd, wake, socket_path, limits, std::move(arbiter)));
}

LedgerServer::LedgerServer(int listen_fd, int wake_fd, const std::string& path,
                           const Limits& limits, std::shared_ptr<DeviceArbiter> arbiter)
    : listen_fd_(listen_fd),
      wake_fd_(wake_fd),
      path_(path),
      limits_(limits),
      arbiter_(std::move(arbiter)),
      arbiter_id_(arbiter_ != nullptr ? arbiter_->Join(limits.compute_percent, limits.compute_fair)
                                      : 0) {
  last_accrual_ns_ = compute_refill_ns_ = NowNs();
  compute_credit_ns_ = kComputeBurstNs;  // a task starts with a full bucket
}

LedgerServer::~LedgerServer() {
  if (arbiter_ != nullptr) arbiter_->Leave(arbiter_id_);
  for (auto& c : conns_) {
    close(c->fd);
    if (c->pidfd >= 0) close(c->pidfd);
  }
  for (Orphan& o : orphans_)
    if (o.pidfd >= 0) close(o.pidfd);
  close(listen_fd_);
  close(wake_fd_);
  unlink(path_.c_str());
}

void LedgerServer::Stop() {
  uint64_t one = 1;
  ssize_t n = write(wake_fd_, &one, sizeof one);
  (void)n;
}

Usage LedgerServer::Snapshot() const {
  std::lock_guard<std::mutex> l(mu_);
  Usage u = totals_;
  for (const auto& c : conns_) u.processes.push_back({c->pid, c->vram, c->spill, false});
  for (const Orphan& o : orphans_) u.processes.push_back({o.pid, o.vram, o.spill, true});
  for (const auto& [pid, bytes] : driver_) u.processes.push_back({pid, bytes, 0, false});
  return u;
}

bool LedgerServer::KnownLocked(pid_t pid, uint64_t* reserved) const {
  bool known = false;
  uint64_t vram = 0;
  for (const auto& c : conns_)
    if (c->pid == pid) known = true, vram += c->vram;
  for (const Orphan& o : orphans_)
    if (o.pid == pid) known = true, vram += o.vram;
  if (reserved != nullptr) *reserved = vram;
  return known;
}

bool LedgerServer::ReconcileDriverMemory(pid_t pid, uint64_t nvml_bytes) {
  std::lock_guard<std::mutex> l(mu_);
  uint64_t reserved = 0;
  if (!KnownLocked(pid, &reserved)) return false;
  uint64_t want = nvml_bytes > reserved ? nvml_bytes - reserved : 0;
  uint64_t& have = driver_[pid];
  totals_.vram = totals_.vram - have + want;
  have = want;
  if (want == 0) driver_.erase(pid);
  return true;
}

void LedgerServer::Run() {
  std::vector<pollfd> fds;
  for (;;) {
    fds.clear();
    fds.push_back({wake_fd_, POLLIN, 0});
    // Out of file descriptors, the listening socket stays readable: rest it for a while.
    fds.push_back({NowNs() < accept_pause_until_ns_ ? -1 : listen_fd_, POLLIN, 0});
    size_t nconns;
    {
      std::lock_guard<std::mutex> l(mu_);
      nconns = conns_.size();
      for (auto& c : conns_) fds.push_back({c->fd, POLLIN, 0});
      for (Orphan& o : orphans_) fds.push_back({o.pidfd, POLLIN, 0});
    }
    // Orphans without a pidfd (-1 is ignored by poll) are checked at least every 100 ms.
    int n = poll(fds.data(), fds.size(), 100);
    if (n < 0 && errno != EINTR) return;
    if (fds[0].revents != 0) return;
    {
      std::lock_guard<std::mutex> l(mu_);
      AccrueSpill();
    }
    if (fds[1].revents != 0) Accept();
    // Connections in reverse so that dropping one does not shift the ones still to visit.
    for (size_t i = nconns; i-- > 0;) {
      if (fds[2 + i].revents == 0) continue;
      if (!Serve(conns_[i].get())) Drop(i);
    }
    // A connection whose process has ended while a descendant keeps its socket open is
    // dropped too: the memory went with the process.
    for (size_t i = conns_.size(); i-- > 0;)
      if (Ended(conns_[i]->pid, conns_[i]->pidfd)) Drop(i);
    std::lock_guard<std::mutex> l(mu_);
    ReapOrphans();
  }
}

void LedgerServer::Accept() {
  for (;;) {
    int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) {
      if (errno == EMFILE || errno == ENFILE) accept_pause_until_ns_ = NowNs() + 100'000'000;
      return;
    }
    ucred cred{};
    socklen_t len = sizeof cred;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 || cred.pid <= 0) {
      close(fd);
      continue;
    }
    std::lock_guard<std::mutex> l(mu_);
    if (conns_.size() >= kMaxConnections) {  // a task opening sockets without end
      close(fd);
      ++totals_.protocol_errors;
      continue;
    }
    auto c = std::make_unique<Conn>();
    c->fd = fd;
    c->pid = cred.pid;
    c->pidfd = PidFd(cred.pid);
    conns_.push_back(std::move(c));
  }
}

bool LedgerServer::Serve(Conn* c) {
  // A bounded number of frames per round, so that one busy client cannot starve the others.
  for (int frames = 0; frames < kFramesPerRound; ++frames) {
    Request req;
    ssize_t n = recv(c->fd, &req, sizeof req, MSG_TRUNC);  // MSG_TRUNC: the frame's real size
    if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
    if (n == 0) return false;  // closed
    Response resp;
    bool keep = true;
    {
      std::lock_guard<std::mutex> l(mu_);
      if (n != static_cast<ssize_t>(sizeof req)) {
        resp = Response{};
        resp.status = static_cast<int32_t>(Status::kBadRequest);
      } else {
        resp = Handle(c, req);
      }
      keep = resp.status != static_cast<int32_t>(Status::kBadRequest);
      if (!keep) ++totals_.protocol_errors;
    }
    if (send(c->fd, &resp, sizeof resp, MSG_NOSIGNAL | MSG_DONTWAIT) !=
        static_cast<ssize_t>(sizeof resp))
      return false;  // a client that does not read its answers is dropped
    if (!keep) return false;
  }
  return true;
}

Response LedgerServer::Handle(Conn* c, const Request& req) {
  Response r{};
  auto fill = [&] {
    r.compute_percent = limits_.compute_percent;
    r.vram_limit = limits_.vram;
    r.spill_limit = limits_.spill;
    r.context_bytes = limits_.context_bytes;
    r.lease_bytes = limits_.lease_bytes;
    r.vram_used = totals_.vram;
    r.spill_used = totals_.spill;
    r.conn_vram = c->vram;
    r.conn_spill = c->spill;
  };
  auto bad = [&] {
    r.status = static_cast<int32_t>(Status::kBadRequest);
    return r;
  };
  if (req.magic != kMagic || req.version != kVersion || req.reserved != 0) return bad();
  auto op = static_cast<Op>(req.op);
  if (op != Op::kCompute && req.start_ns != 0) return bad();
  if (op != Op::kHello && !c->hello) return bad();
  bool spill = req.kind == static_cast<uint32_t>(Kind::kSpill);
  if (req.kind > static_cast<uint32_t>(Kind::kNone)) return bad();
  uint64_t& conn_bytes = spill ? c->spill : c->vram;
  uint64_t& task_bytes = spill ? totals_.spill : totals_.vram;
  uint64_t limit = spill ? limits_.spill : limits_.vram;
  switch (op) {
    case Op::kHello:
      c->hello = true;
      break;
    case Op::kQuery:
      break;
    case Op::kReserve:
      if (req.kind == static_cast<uint32_t>(Kind::kNone)) return bad();
      c->charged = true;
      // Written so that nothing can overflow; task_bytes passes the limit only by reclaims.
      if (task_bytes > limit || req.bytes > limit - task_bytes) {
        ++totals_.refused;
        r.status = static_cast<int32_t>(Status::kOverLimit);
        break;
      }
      task_bytes += req.bytes;
      conn_bytes += req.bytes;
      break;
    case Op::kRelease:
      if (req.kind == static_cast<uint32_t>(Kind::kNone)) return bad();
      c->charged = true;
      if (req.bytes > conn_bytes) {
        r.status = static_cast<int32_t>(Status::kNotHeld);
        break;
      }
      conn_bytes -= req.bytes;
      task_bytes -= req.bytes;
      break;
    case Op::kReclaim: {
      if (req.kind == static_cast<uint32_t>(Kind::kNone) || c->charged || c->reclaimed[spill] ||
          req.bytes > limit || req.bytes > UINT64_MAX - task_bytes)
        return bad();  // no process held more than the grant under the previous ledger
      c->reclaimed[spill] = true;
      if (!c->took_orphan) {
        auto o = std::find_if(orphans_.begin(), orphans_.end(),
                              [&](const Orphan& x) { return x.pid == c->pid; });
        if (o != orphans_.end()) {
          // The process's earlier connection to this very ledger: its charge moves over whole.
          c->took_orphan = true;
          c->vram += o->vram;
          c->spill += o->spill;
          if (o->pidfd >= 0) close(o->pidfd);
          orphans_.erase(o);
        }
      }
      if (c->took_orphan) break;
      task_bytes += req.bytes;
      conn_bytes += req.bytes;
      break;
    }
    case Op::kCompute: {
      if (req.bytes > 60'000'000'000ull) return bad();  // a minute of GPU time in one kernel
      uint64_t now = NowNs();
      // A span on this host's clock, charged as the device's tenants shared it; without an
      // arbiter (one tenant) or a start, all of it.
      int64_t charge = static_cast<int64_t>(req.bytes);
      if (req.start_ns != 0) {
        // (start_ns first: a start near 2^64 would wrap the sum past the check.)
        if (req.start_ns > now || req.start_ns + req.bytes > now + kComputeAheadNs) return bad();
        if (arbiter_ != nullptr)
          charge = arbiter_->Charge(arbiter_id_, req.start_ns, req.start_ns + req.bytes);
      }
      uint64_t rate_bp = arbiter_ != nullptr ? arbiter_->RateBp(arbiter_id_, now)
                                             : limits_.compute_percent * 100ull;
      if (rate_bp == 0) rate_bp = 1;
      uint64_t elapsed = std::min<uint64_t>(now - compute_refill_ns_, 1'000'000'000);
      int64_t refill = static_cast<int64_t>(elapsed * rate_bp / 10000);
      compute_refill_ns_ = now;
      compute_credit_ns_ = std::min(compute_credit_ns_ + refill, kComputeBurstNs);
      // A refund (a negative charge) may fill the bucket past its depth: it is time the task was
      // charged for and did not get (it already slept for it), so it is owed in full.
      compute_credit_ns_ -= charge;
      if (charge >= 0) {
        totals_.gpu_ns += static_cast<uint64_t>(charge);
      } else {
        totals_.gpu_ns -= std::min(totals_.gpu_ns, static_cast<uint64_t>(-charge));
      }
      if (compute_credit_ns_ < 0)
        r.wait_ns = static_cast<uint64_t>(-compute_credit_ns_) * 10000 / rate_bp;
      break;
    }
    default:
      return bad();
  }
  fill();
  return r;
}

void LedgerServer::Drop(size_t index) {
  std::lock_guard<std::mutex> l(mu_);
  std::unique_ptr<Conn> c = std::move(conns_[index]);
  conns_.erase(conns_.begin() + static_cast<std::ptrdiff_t>(index));
  close(c->fd);
  if ((c->vram != 0 || c->spill != 0) && !Ended(c->pid, c->pidfd)) {
    // The process lives on (or is still exiting): its device memory may too.
    orphans_.push_back({c->pid, c->pidfd, c->vram, c->spill});
    return;
  }
  totals_.vram -= c->vram;
  totals_.spill -= c->spill;
  if (c->pidfd >= 0) close(c->pidfd);
}

void LedgerServer::ReapOrphans() {
  // Driver memory ends with its process: once the ledger knows it no more (no connection, no
  // orphan), its charge goes.
  for (auto it = driver_.begin(); it != driver_.end();) {
    if (KnownLocked(it->first, nullptr)) {
      ++it;
      continue;
    }
    totals_.vram -= it->second;
    it = driver_.erase(it);
  }
  for (size_t i = orphans_.size(); i-- > 0;) {
    Orphan& o = orphans_[i];
    if (!Ended(o.pid, o.pidfd)) continue;
    totals_.vram -= o.vram;
    totals_.spill -= o.spill;
    if (o.pidfd >= 0) close(o.pidfd);
    orphans_.erase(orphans_.begin() + static_cast<std::ptrdiff_t>(i));
  }
}

void LedgerServer::AccrueSpill() {
  uint64_t now = NowNs();
  // byte·ns accumulated exactly, carried over into whole byte·seconds.
  unsigned __int128 acc =
      static_cast<unsigned __int128>(totals_.spill) * (now - last_accrual_ns_) + spill_byte_ns_rem_;
  totals_.spill_byte_seconds += static_cast<uint64_t>(acc / 1000000000u);
  spill_byte_ns_rem_ = static_cast<uint64_t>(acc % 1000000000u);
  last_accrual_ns_ = now;
}

}  // namespace gpupool::ledger
