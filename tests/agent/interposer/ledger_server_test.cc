// The ledger server at the protocol level: limits, refusals, overflow, hostile frames, a
// connection's charge after it closes, spill metering and the compute cap's arithmetic.
#include "agent/interposer/ledger/ledger_server.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>

#include <random>
#include <thread>

#include "agent/interposer/ledger/ledger_client.h"
#include "tests/agent/interposer/harness.h"

namespace gpupool::ledger {
namespace {

using interposer_test::Eventually;
using interposer_test::kMiB;

class Server {
 public:
  explicit Server(Limits limits) {
    char tmpl[] = "/tmp/gpupool-ledger-XXXXXX";
    dir_ = mkdtemp(tmpl);
    std::string error;
    server_ = LedgerServer::Create(dir_ + "/s", limits, &error);
    EXPECT_NE(server_, nullptr) << error;
    thread_ = std::thread([this] { server_->Run(); });
  }
  ~Server() {
    server_->Stop();
    thread_.join();
    server_.reset();
    rmdir(dir_.c_str());
  }
  std::string path() const { return dir_ + "/s"; }
  LedgerServer& operator*() { return *server_; }
  LedgerServer* operator->() { return server_.get(); }

 private:
  std::string dir_;
  std::unique_ptr<LedgerServer> server_;
  std::thread thread_;
};

// Raw frames, for what the client library would never send.
int Connect(const std::string& path) {
  int fd = socket(AF_UNIX, SOCK_SEQPACKET, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  snprintf(a.sun_path, sizeof a.sun_path, "%s", path.c_str());
  EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  return fd;
}

Response Send(int fd, Op op, Kind kind, uint64_t bytes, uint32_t magic = kMagic) {
  Request r{magic, kVersion, static_cast<uint16_t>(op), static_cast<uint32_t>(kind), 0, bytes, 0};
  EXPECT_EQ(send(fd, &r, sizeof r, 0), static_cast<ssize_t>(sizeof r));
  Response resp{};
  resp.status = -1;
  EXPECT_EQ(recv(fd, &resp, sizeof resp, 0), static_cast<ssize_t>(sizeof resp));
  return resp;
}

TEST(LedgerServer, GrantsUpToTheLimitAndNotOneByteMore) {
  Limits l;
  l.vram = 10 * kMiB;
  Server s(l);
  LedgerClient c;
  ASSERT_TRUE(c.Connect(s.path().c_str()));
  EXPECT_EQ(c.hello().vram_limit, 10 * kMiB);
  Response r;
  ASSERT_TRUE(c.Call(Op::kReserve, Kind::kVram, 10 * kMiB - 1, &r));
  EXPECT_EQ(r.status, 0);
  ASSERT_TRUE(c.Call(Op::kReserve, Kind::kVram, 2, &r));
  EXPECT_EQ(r.status, static_cast<int32_t>(Status::kOverLimit));
  ASSERT_TRUE(c.Call(Op::kReserve, Kind::kVram, 1, &r));
  EXPECT_EQ(r.status, 0);
  EXPECT_EQ(r.vram_used, 10 * kMiB);
  ASSERT_TRUE(c.Call(Op::kRelease, Kind::kVram, 4 * kMiB, &r));
  EXPECT_EQ(r.vram_used, 6 * kMiB);
  Usage u = s->Snapshot();
  EXPECT_EQ(u.vram, 6 * kMiB);
  EXPECT_EQ(u.refused, 1u);
}

TEST(LedgerServer, OverflowAndReleasesOfWhatIsNotHeldChangeNothing) {
  Limits l;
  l.vram = 10 * kMiB;
  l.spill = kMiB;
  Server s(l);
  int fd = Connect(s.path());
  EXPECT_EQ(Send(fd, Op::kHello, Kind::kNone, 0).status, 0);
  EXPECT_EQ(Send(fd, Op::kReserve, Kind::kVram, kMiB).status, 0);
  EXPECT_EQ(Send(fd, Op::kReserve, Kind::kVram, UINT64_MAX).status, 1);
  EXPECT_EQ(Send(fd, Op::kReserve, Kind::kVram, UINT64_MAX - kMiB + 1).status, 1);  // wraps to 0
  EXPECT_EQ(Send(fd, Op::kReserve, Kind::kSpill, UINT64_MAX).status, 1);
  EXPECT_EQ(Send(fd, Op::kRelease, Kind::kVram, kMiB + 1).status, 3);
  EXPECT_EQ(Send(fd, Op::kRelease, Kind::kSpill, 1).status, 3);
  Response r = Send(fd, Op::kQuery, Kind::kNone, 0);
  EXPECT_EQ(r.vram_used, kMiB);
  EXPECT_EQ(r.spill_used, 0u);
  close(fd);
}

TEST(LedgerServer, MalformedFramesDropTheConnectionNotTheCharge) {
  Limits l;
  l.vram = 10 * kMiB;
  Server s(l);
  int fd = Connect(s.path());
  EXPECT_EQ(Send(fd, Op::kHello, Kind::kNone, 0).status, 0);
  EXPECT_EQ(Send(fd, Op::kReserve, Kind::kVram, kMiB).status, 0);
  EXPECT_EQ(Send(fd, Op::kReserve, Kind::kVram, 1, /*magic=*/0xdead).status, 2);
  char junk[5] = {1, 2, 3, 4, 5};
  EXPECT_EQ(recv(fd, junk, sizeof junk, 0), 0);  // closed by the server
  EXPECT_EQ(send(fd, junk, sizeof junk, MSG_NOSIGNAL), -1);
  close(fd);
  // This process lives, so the memory its connection reserved may too: the charge stays.
  Usage u = s->Snapshot();
  EXPECT_EQ(u.vram, kMiB);
  ASSERT_EQ(u.processes.size(), 1u);
  EXPECT_TRUE(u.processes[0].orphan);
  EXPECT_EQ(u.processes[0].pid, getpid());
  EXPECT_EQ(u.protocol_errors, 1u);
}

TEST(LedgerServer, AProcessThatEndsFreesItsChargeWithinOneSecond) {
  Limits l;
  l.vram = 10 * kMiB;
  Server s(l);
  int up[2], down[2];  // child -> parent: reserved; parent -> child: (never) go on
  ASSERT_EQ(pipe(up), 0);
  ASSERT_EQ(pipe(down), 0);
  std::string path = s.path();
  pid_t child = fork();
  if (child == 0) {
    close(up[0]);
    close(down[1]);
    LedgerClient c;
    Response r;
    bool ok = c.Connect(path.c_str()) && c.Call(Op::kReserve, Kind::kVram, 3 * kMiB, &r);
    char b = ok ? 'y' : 'n';
    if (write(up[1], &b, 1) != 1 || read(down[0], &b, 1) < 0) _exit(1);
    _exit(0);
  }
  close(up[1]);
  close(down[0]);
  char b = 0;
  ASSERT_EQ(read(up[0], &b, 1), 1);
  ASSERT_EQ(b, 'y');
  EXPECT_EQ(s->Snapshot().vram, 3 * kMiB);
  kill(child, SIGKILL);
  uint64_t t0 = interposer_test::NowMs();
  EXPECT_TRUE(Eventually([&] { return s->Snapshot().vram == 0; }, 1000))
      << interposer_test::NowMs() - t0 << " ms";
  waitpid(child, nullptr, 0);
  close(up[0]);
  close(down[1]);
}

// An agent restart (docs/agent.md, "Agent restarts"): the task's ledger goes away with the old
// agent and a new one serves the same socket. A client's request waits for it, reclaims what
// its process held, and is answered there: the charge carries over and the grant still binds.
TEST(LedgerServer, AClientReclaimsItsChargeFromARestartedLedgerAndTheGrantStillBinds) {
  Limits l;
  l.vram = 10 * kMiB;
  l.spill = 4 * kMiB;
  char tmpl[] = "/tmp/gpupool-ledger-XXXXXX";
  const std::string path = std::string(mkdtemp(tmpl)) + "/s";
  std::string error;
  auto first = LedgerServer::Create(path, l, &error);
  ASSERT_NE(first, nullptr) << error;
  std::thread serving([&] { first->Run(); });
  LedgerClient c;
  ASSERT_TRUE(c.Connect(path.c_str()));
  Response r;
  ASSERT_TRUE(c.Call(Op::kReserve, Kind::kVram, 6 * kMiB, &r));
  ASSERT_TRUE(c.Call(Op::kReserve, Kind::kSpill, kMiB, &r));
  first->Stop();
  serving.join();
  first.reset();  // the old agent is gone, and its ledger with it

  std::unique_ptr<LedgerServer> second;
  std::thread restart([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the agent starting again
    second = LedgerServer::Create(path, l, &error);
    if (second != nullptr) second->Run();
  });
  ASSERT_TRUE(c.Call(Op::kReserve, Kind::kVram, 3 * kMiB, &r, /*reconnect_wait_ms=*/10'000));
  EXPECT_EQ(r.status, 0);
  EXPECT_EQ(r.vram_used, 9 * kMiB);
  EXPECT_EQ(r.conn_vram, 9 * kMiB);
  EXPECT_EQ(r.spill_used, kMiB);
  EXPECT_EQ(c.reconnects(), 1u);
  ASSERT_TRUE(c.Call(Op::kReserve, Kind::kVram, 2 * kMiB, &r));
  EXPECT_EQ(r.status, static_cast<int32_t>(Status::kOverLimit)) << "the old charge must count";
  ASSERT_TRUE(c.Call(Op::kRelease, Kind::kVram, 9 * kMiB, &r));
  EXPECT_EQ(r.status, 0);
  EXPECT_EQ(r.vram_used, 0u);
  Usage u = second->Snapshot();
  EXPECT_EQ(u.vram, 0u);
  EXPECT_EQ(u.spill, kMiB);
  second->Stop();
  restart.join();
}

TEST(LedgerServer, AClientWhoseLedgerNeverComesBackFailsClosedAfterTheWait) {
  Limits l;
  l.vram = 10 * kMiB;
  auto s = std::make_unique<Server>(l);
  LedgerClient c;
  ASSERT_TRUE(c.Connect(s->path().c_str()));
  Response r;
  ASSERT_TRUE(c.Call(Op::kReserve, Kind::kVram, kMiB, &r));
  s.reset();
  const uint64_t t0 = interposer_test::NowMs();
  EXPECT_FALSE(c.Call(Op::kReserve, Kind::kVram, kMiB, &r, /*reconnect_wait_ms=*/500));
  EXPECT_GE(interposer_test::NowMs() - t0, 500u);
  EXPECT_FALSE(c.connected());
}

TEST(LedgerServer, ReclaimsAreChargedPastTheLimitOncePerKindAndOnlyFirst) {
  Limits l;
  l.vram = 10 * kMiB;
  l.spill = 2 * kMiB;
  Server s(l);
  // Two processes' reclaims past the grant between them: the memory exists, so it is charged,
  // and nothing more is granted until enough is released.
  int other = Connect(s.path());
  EXPECT_EQ(Send(other, Op::kHello, Kind::kNone, 0).status, 0);
  EXPECT_EQ(Send(other, Op::kReclaim, Kind::kVram, 6 * kMiB).status, 0);
  int fd = Connect(s.path());
  EXPECT_EQ(Send(fd, Op::kHello, Kind::kNone, 0).status, 0);
  Response r = Send(fd, Op::kReclaim, Kind::kVram, 6 * kMiB);
  EXPECT_EQ(r.status, 0);
  EXPECT_EQ(r.vram_used, 12 * kMiB);
  EXPECT_EQ(Send(fd, Op::kReserve, Kind::kVram, 1).status, 1);
  EXPECT_EQ(Send(other, Op::kRelease, Kind::kVram, 6 * kMiB).status, 0);
  EXPECT_EQ(Send(fd, Op::kReserve, Kind::kVram, 4 * kMiB).status, 0);
  // A reclaim after the connection's first reservation or release is malformed.
  EXPECT_EQ(Send(fd, Op::kReclaim, Kind::kSpill, kMiB).status, 2);
  close(fd);
  close(other);

  int again = Connect(s.path());
  EXPECT_EQ(Send(again, Op::kHello, Kind::kNone, 0).status, 0);
  EXPECT_EQ(Send(again, Op::kReclaim, Kind::kNone, kMiB).status, 2);
  close(again);
  int twice = Connect(s.path());
  EXPECT_EQ(Send(twice, Op::kHello, Kind::kNone, 0).status, 0);
  EXPECT_EQ(Send(twice, Op::kReclaim, Kind::kSpill, 2 * kMiB + 1).status, 2)
      << "no process held more than the grant";
  close(twice);
  int once = Connect(s.path());
  EXPECT_EQ(Send(once, Op::kHello, Kind::kNone, 0).status, 0);
  // This process's dropped connections left orphan charges: its reclaim takes those, whatever
  // it states.
  r = Send(once, Op::kReclaim, Kind::kVram, 1);
  EXPECT_EQ(r.status, 0);
  EXPECT_EQ(r.conn_vram, 10 * kMiB);
  EXPECT_EQ(r.vram_used, 10 * kMiB);
  EXPECT_EQ(Send(once, Op::kReclaim, Kind::kVram, 1).status, 2) << "twice for one kind";
  close(once);
}

TEST(LedgerServer, SpillIsMeteredFromTheBytesSpilledOverTime) {
  Limits l;
  l.vram = kMiB;
  l.spill = 8 * kMiB;
  Server s(l);
  LedgerClient c;
  ASSERT_TRUE(c.Connect(s.path().c_str()));
  Response r;
  ASSERT_TRUE(c.Call(Op::kReserve, Kind::kSpill, 4 * kMiB, &r));
  uint64_t t0 = interposer_test::NowMs();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ASSERT_TRUE(c.Call(Op::kRelease, Kind::kSpill, 4 * kMiB, &r));
  uint64_t held_ms = interposer_test::NowMs() - t0;
  std::this_thread::sleep_for(std::chrono::milliseconds(150));  // nothing spilled: no charge
  ASSERT_TRUE(c.Call(Op::kQuery, Kind::kNone, 0, &r));
  uint64_t metered = s->Snapshot().spill_byte_seconds;
  // 4 MiB for 0.3 s or a little more (the reserve and release frames' own latency).
  EXPECT_GE(metered, 4 * kMiB * 300 / 1000 - 4 * kMiB / 100);
  EXPECT_LE(metered, 4 * kMiB * (held_ms + 20) / 1000);
}

// A ledger whose compute share is 50 %, and a client connected to it.
struct HalfCapLedger {
  static Limits HalfCap() {
    Limits l;
    l.vram = kMiB;
    l.compute_percent = 50;
    return l;
  }
  HalfCapLedger() : s(HalfCap()) { EXPECT_TRUE(c.Connect(s.path().c_str())); }
  Server s;
  LedgerClient c;
  Response r;
};

TEST(LedgerServer, ComputeCapAsksForTheWaitThatKeepsTheShare) {
  HalfCapLedger ledger;
  LedgerClient& c = ledger.c;
  Response& r = ledger.r;
  Server& s = ledger.s;
  // 40 ms of GPU time at once against a 20 ms burst: 20 ms in debt, paid back at 50 %: 40 ms.
  ASSERT_TRUE(c.Call(Op::kCompute, Kind::kNone, 40'000'000, &r));
  EXPECT_LE(r.wait_ns, 40'000'000u);
  EXPECT_GE(r.wait_ns, 30'000'000u);
  EXPECT_EQ(s->Snapshot().gpu_ns, 40'000'000u);
}

// A span from a lone tenant of the arbiter is all its own; on a ledger without an arbiter a span
// is charged in full. A span that ends far in the server's future is refused.
TEST(LedgerServer, ComputeSpansAreChargedAndCheckedAgainstTheServersClock) {
  HalfCapLedger ledger;
  LedgerClient& c = ledger.c;
  Response& r = ledger.r;
  Server& s = ledger.s;
  const uint64_t now = interposer_test::NowMs() * 1'000'000;
  ASSERT_TRUE(c.Call(Op::kCompute, Kind::kNone, 5'000'000, &r, kReconnectWaitMs, now - 10'000'000));
  EXPECT_EQ(r.status, 0);
  EXPECT_EQ(s->Snapshot().gpu_ns, 5'000'000u);
  ASSERT_TRUE(
      c.Call(Op::kCompute, Kind::kNone, 1'000'000, &r, kReconnectWaitMs, now + 10'000'000'000ull));
  EXPECT_EQ(r.status, static_cast<int32_t>(Status::kBadRequest));
  // A start so late that start + length wraps around is refused too (it is not work done).
  LedgerClient c2;
  ASSERT_TRUE(c2.Connect(s.path().c_str()));
  ASSERT_TRUE(
      c2.Call(Op::kCompute, Kind::kNone, 1'000'000, &r, kReconnectWaitMs, UINT64_MAX - 100));
  EXPECT_EQ(r.status, static_cast<int32_t>(Status::kBadRequest));
}

constexpr uint64_t kMs = 1'000'000;

// Time-slicing: two tenants busy over the same 10 ms each got half of it, whichever reported
// first; the first is refunded at its next report.
TEST(DeviceArbiter, TwoTenantsBusyAtOnceAreChargedHalfEach) {
  DeviceArbiter arb;
  int a = arb.Join(50, false);
  int b = arb.Join(50, false);
  EXPECT_EQ(arb.Charge(a, 100 * kMs, 110 * kMs), static_cast<int64_t>(10 * kMs));  // alone so far
  EXPECT_EQ(arb.Charge(b, 100 * kMs, 110 * kMs), static_cast<int64_t>(5 * kMs));
  // a's next span (idle device) costs in full, less the 5 ms refunded.
  EXPECT_EQ(arb.Charge(a, 120 * kMs, 124 * kMs), static_cast<int64_t>(4 * kMs - 5 * kMs));
  EXPECT_EQ(arb.Charge(b, 130 * kMs, 130 * kMs), 0);  // nothing new: nothing owed
}

// Partial overlaps with three tenants: every moment's charges add up to the moment, and each
// tenant pays for the moments it was busy divided by how many were busy then.
TEST(DeviceArbiter, EveryMomentIsSplitAmongTheTenantsBusyThen) {
  DeviceArbiter arb;
  int a = arb.Join(30, false);
  int b = arb.Join(30, false);
  int c = arb.Join(40, false);
  int64_t ta = arb.Charge(a, 0 * kMs + 1, 12 * kMs + 1);  // [1, 12] ms (shifted by 1 ns)
  int64_t tb = arb.Charge(b, 6 * kMs + 1, 18 * kMs + 1);
  int64_t tc = arb.Charge(c, 9 * kMs + 1, 10 * kMs + 1);
  // Settle the corrections with empty calls.
  ta += arb.Charge(a, 12 * kMs + 1, 12 * kMs + 1);
  tb += arb.Charge(b, 18 * kMs + 1, 18 * kMs + 1);
  tc += arb.Charge(c, 10 * kMs + 1, 10 * kMs + 1);
  // a: 6 alone + 3 with b (1.5) + 1 with b and c (1/3) + 2 with b (1) = 8.8333 ms.
  // b: 3 with a (1.5) + 1 with a, c (1/3) + 2 with a (1) + 6 alone = 8.8333 ms. c: 1/3 ms.
  EXPECT_NEAR(static_cast<double>(ta), 8.8333 * kMs, 1000);
  EXPECT_NEAR(static_cast<double>(tb), 8.8333 * kMs, 1000);
  EXPECT_NEAR(static_cast<double>(tc), 0.3333 * kMs, 1000);
  EXPECT_NEAR(static_cast<double>(ta + tb + tc), 18 * kMs, 3);  // the union, nothing more
}

// A span reported again (or overlapping the tenant's own last span) is not charged twice; a
// tenant that left is charged in full; a span no report can reach any more is forgotten.
TEST(DeviceArbiter, OwnOverlapIsNotChargedTwice) {
  DeviceArbiter arb;
  int a = arb.Join(50, false);
  EXPECT_EQ(arb.Charge(a, 10 * kMs, 20 * kMs), static_cast<int64_t>(10 * kMs));
  EXPECT_EQ(arb.Charge(a, 15 * kMs, 25 * kMs), static_cast<int64_t>(5 * kMs));
  EXPECT_EQ(arb.Charge(a, 12 * kMs, 18 * kMs), 0);
  arb.Leave(a);
  EXPECT_EQ(arb.Charge(a, 30 * kMs, 31 * kMs), static_cast<int64_t>(kMs));
}

// The arbiter's arithmetic: idle shares go to the active fair tenants in proportion to theirs.
TEST(DeviceArbiter, SplitsIdleSharesAmongActiveFairTenants) {
  DeviceArbiter arb;
  constexpr uint64_t kSec = 1'000'000'000;
  int a = arb.Join(30, /*fair=*/true);
  EXPECT_EQ(arb.RateBp(a, 10 * kSec), 10000u);  // alone: the whole device
  int b = arb.Join(20, /*fair=*/true);
  int c = arb.Join(50, /*fair=*/false);
  EXPECT_EQ(arb.RateBp(b, 10 * kSec), 2000u + 5000u * 20 / 50);  // c not active: 50 idle
  EXPECT_EQ(arb.RateBp(a, 10 * kSec), 3000u + 5000u * 30 / 50);
  EXPECT_EQ(arb.RateBp(c, 10 * kSec), 5000u);  // strict: its share, now active
  EXPECT_EQ(arb.RateBp(a, 10 * kSec), 3000u);  // nothing idle
  // b and c fall silent for longer than kActiveNs: a gets their shares.
  EXPECT_EQ(arb.RateBp(a, 10 * kSec + DeviceArbiter::kActiveNs + 1), 10000u);
  arb.Leave(a);
  EXPECT_EQ(arb.RateBp(a, 11 * kSec), 0u);
}

// Random frames — random sizes, random bytes, sometimes a valid header with random fields —
// from many connections: the server stays up, its totals equal the sum of its rows, and no
// limit is ever passed.
TEST(LedgerServer, SurvivesRandomFramesWithItsInvariants) {
  Limits l;
  l.vram = 10 * kMiB;
  l.spill = 2 * kMiB;
  Server s(l);
  std::mt19937_64 rng(12345);
  uint64_t reclaims = 0;  // each may take the task past its grant by up to the grant
  for (int conn = 0; conn < 200; ++conn) {
    int fd = Connect(s.path());
    if (rng() % 2) Send(fd, Op::kHello, Kind::kNone, 0);
    for (int f = 0; f < 20; ++f) {
      char buf[128];
      size_t len = rng() % sizeof buf;
      for (char& c : buf) c = static_cast<char>(rng());
      if (rng() % 2 && len >= sizeof(Request)) {
        Request r{kMagic,
                  kVersion,
                  static_cast<uint16_t>(rng() % 8),
                  static_cast<uint32_t>(rng() % 4),
                  static_cast<uint32_t>(rng() % 2),
                  rng() % 4 == 0 ? rng() : rng() % (4 * kMiB),
                  rng() % 4 == 0 ? rng() : 0};
        memcpy(buf, &r, sizeof r);
        if (rng() % 2) len = sizeof r;
        if (r.op == static_cast<uint16_t>(Op::kReclaim)) ++reclaims;
      }
      if (send(fd, buf, len, MSG_NOSIGNAL) < 0) break;
      Response resp;
      pollfd p{fd, POLLIN, 0};
      if (poll(&p, 1, 1000) <= 0 || recv(fd, &resp, sizeof resp, 0) <= 0) break;
    }
    if (rng() % 3) close(fd);  // the others stay open until the end
    Usage u = s->Snapshot();
    uint64_t vram = 0, spill = 0;
    for (const auto& p : u.processes) {
      vram += p.vram;
      spill += p.spill;
    }
    ASSERT_EQ(u.vram, vram);
    ASSERT_EQ(u.spill, spill);
    ASSERT_LE(u.vram, l.vram * (1 + reclaims));
    ASSERT_LE(u.spill, l.spill * (1 + reclaims));
  }
  EXPECT_GT(s->Snapshot().protocol_errors, 0u);
  // And it still serves.
  LedgerClient c;
  EXPECT_TRUE(c.Connect(s.path().c_str()));
}

// The standalone server: starts, says ready, serves, stops on SIGTERM with a summary.
TEST(LedgerBinary, ServesUntilSigterm) {
  char tmpl[] = "/tmp/gpupool-ledger-bin-XXXXXX";
  std::string dir = mkdtemp(tmpl);
  std::string sock = dir + "/s";
  interposer_test::Child bin({GPUPOOL_LEDGER_BIN, "--socket", sock, "--vram", "1048576"}, {});
  ASSERT_EQ(bin.ReadLine(), "ready");
  LedgerClient c;
  ASSERT_TRUE(c.Connect(sock.c_str()));
  EXPECT_EQ(c.hello().vram_limit, 1048576u);
  Response r;
  ASSERT_TRUE(c.Call(Op::kReserve, Kind::kVram, 4096, &r));
  kill(bin.pid(), SIGTERM);
  EXPECT_EQ(bin.ReadLine(), "final " + sock +
                                " vram=4096 spill=0 refused=0 protocol_errors=0 gpu_ns=0 "
                                "spill_byte_seconds=0 processes=1");
  EXPECT_EQ(WEXITSTATUS(bin.Wait()), 0);
  interposer_test::Child bad({GPUPOOL_LEDGER_BIN, "--vram", "x"}, {});
  EXPECT_EQ(WEXITSTATUS(bad.Wait()), 2);
  rmdir(dir.c_str());
}

// Two tenants of one device in one process (--next): each socket serves its own limits, and
// --status-ms reports both while they run.
TEST(LedgerBinary, ServesTenantsOfOneDeviceSideBySide) {
  char tmpl[] = "/tmp/gpupool-ledger-bin-XXXXXX";
  std::string dir = mkdtemp(tmpl);
  std::string a = dir + "/a", b = dir + "/b";
  interposer_test::Child bin(
      {GPUPOOL_LEDGER_BIN, "--socket", a, "--vram", "4096", "--compute-percent", "30", "--next",
       "--socket", b, "--vram", "8192", "--compute-percent", "70", "--status-ms", "50"},
      {});
  ASSERT_EQ(bin.ReadLine(), "ready");
  LedgerClient ca, cb;
  ASSERT_TRUE(ca.Connect(a.c_str()));
  ASSERT_TRUE(cb.Connect(b.c_str()));
  EXPECT_EQ(ca.hello().vram_limit, 4096u);
  EXPECT_EQ(ca.hello().compute_percent, 30u);
  EXPECT_EQ(cb.hello().vram_limit, 8192u);
  EXPECT_EQ(cb.hello().compute_percent, 70u);
  EXPECT_EQ(bin.ReadLine().rfind("usage " + a + " vram=0 ", 0), 0u);
  EXPECT_EQ(bin.ReadLine().rfind("usage " + b + " vram=0 ", 0), 0u);
  kill(bin.pid(), SIGTERM);
  EXPECT_EQ(WEXITSTATUS(bin.Wait()), 0);
  // A second ledger without its own --vram is refused, naming which one.
  interposer_test::Child bad(
      {GPUPOOL_LEDGER_BIN, "--socket", a, "--vram", "1", "--next", "--socket", b}, {});
  EXPECT_EQ(WEXITSTATUS(bad.Wait()), 2);
  unlink(a.c_str());
  unlink(b.c_str());
  rmdir(dir.c_str());
}

// The standalone ledger with the agent's watchdog (--watch-root, as scripts/gpu-verify runs it
// on a GPU): a process of the task that went around the interposer is killed and named; one
// that went through it is charged its context, which the ledger was not told to charge, and
// left alone.
TEST(LedgerBinary, WatchesTheTaskWithTheAgentsWatchdog) {
  char tmpl[] = "/tmp/gpupool-ledger-watch-XXXXXX";
  std::string dir = mkdtemp(tmpl);
  ASSERT_NE(fakecuda::MapDevice(dir.c_str(), 0, 64 * kMiB), nullptr);
  setenv("GPUPOOL_FAKE_CUDA_STATE", dir.c_str(), 1);  // for the fake NVML the binary loads
  std::string sock = dir + "/s";
  interposer_test::Child bin(
      {GPUPOOL_LEDGER_BIN, "--socket", sock, "--vram", std::to_string(16 * kMiB), "--watch-root",
       std::to_string(getpid()), "--nvml", GPUPOOL_FAKE_NVML_LIB, "--watch-ms", "50"},
      {"GPUPOOL_FAKE_CUDA_STATE=" + dir});
  ASSERT_EQ(bin.ReadLine(), "ready");
  std::vector<std::string> env = {
      "GPUPOOL_FAKE_CUDA_STATE=" + dir,
      "GPUPOOL_FAKE_CUDA_DEVICES=fake64," + std::to_string(64 * kMiB) + ",8," +
          std::to_string(kMiB),
      "GPUPOOL_LEDGER_SOCKET=" + sock,
      std::string("LD_LIBRARY_PATH=") + GPUPOOL_FAKE_CUDA_DIR,
  };
  std::vector<std::string> preloaded = env;
  preloaded.push_back(std::string("LD_PRELOAD=") + GPUPOOL_INTERPOSER_LIB);
  interposer_test::Child honest({GPUPOOL_PROBE, "alloc", "plain", std::to_string(4 * kMiB)},
                                preloaded);
  ASSERT_EQ(honest.ReadLine(), "rc=0");
  interposer_test::Child around({GPUPOOL_PROBE, "alloc", "plain", std::to_string(2 * kMiB)}, env);
  ASSERT_EQ(around.ReadLine(), "rc=0");
  const std::string killed = bin.ReadUntil("killed pid=", 5000);
  EXPECT_EQ(killed.rfind("killed pid=" + std::to_string(around.pid()) + " ", 0), 0u) << killed;
  EXPECT_NE(killed.find("bypassed the interposer"), std::string::npos) << killed;
  int st = around.Wait();
  EXPECT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
  honest.CloseStdin();
  EXPECT_EQ(honest.Wait(), 0);
  kill(bin.pid(), SIGTERM);
  EXPECT_EQ(WEXITSTATUS(bin.Wait()), 0);
  std::string cmd = "rm -rf " + dir;
  EXPECT_EQ(system(cmd.c_str()), 0);
}

TEST(LedgerServer, RefusesABadConfiguration) {
  Limits l;
  l.compute_percent = 0;
  std::string error;
  EXPECT_EQ(LedgerServer::Create("/tmp/x.sock", l, &error), nullptr);
  EXPECT_NE(error.find("compute_percent"), std::string::npos);
  l.compute_percent = 100;
  EXPECT_EQ(LedgerServer::Create(std::string(200, 'a'), l, &error), nullptr);
  EXPECT_NE(error.find("socket path"), std::string::npos);
}

}  // namespace
}  // namespace gpupool::ledger
