// GrpcListener's opening hold (api/grpc/listener.h) with real loopback sockets: a connection is
// handed over only with its whole opening (a TLS ClientHello record, the HTTP/2 preface), and
// with the bytes read so far; one that stalls part-way is closed after the greeting timeout, or
// evicted at the port's cap, and never reaches gRPC.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "api/grpc/listener.h"
#include "tests/support/wait_for.h"

namespace gpupool::api::grpcface {
namespace {

using namespace std::chrono_literals;

// A ClientHello-shaped record: type 0x16, version 3.1, length, then `body` bytes.
std::string TlsRecord(size_t body) {
  std::string r = {'\x16', '\x03', '\x01', static_cast<char>(body >> 8),
                   static_cast<char>(body & 0xff)};
  r += std::string(body, '\x01');
  return r;
}

class ListenerTest : public ::testing::Test {
 protected:
  void Start(ListenerOptions o) {
    auto l = GrpcListener::Bind("127.0.0.1:0", std::move(o));
    ASSERT_TRUE(l.ok()) << l.status().ToString();
    listener_ = std::move(l).value();
    listener_->Start([this](int, int fd, std::string opening) {
      std::lock_guard lock(mu_);
      handed_.push_back(opening);
      fds_.push_back(fd);
    });
  }
  void TearDown() override {
    if (listener_) listener_->Stop();
    for (int fd : fds_) close(fd);
    for (int fd : clients_) close(fd);
  }
  int Connect() {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(listener_->port()));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    clients_.push_back(fd);
    return fd;
  }
  static void Send(int fd, std::string_view bytes) {
    ASSERT_EQ(send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(bytes.size()));
  }
  // True when the server side closed `fd` (EOF or reset).
  static bool ClosedByServer(int fd) {
    char c;
    timeval tv{0, 200'000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    const ssize_t n = recv(fd, &c, 1, 0);
    return n == 0 || (n < 0 && errno == ECONNRESET);
  }
  std::vector<std::string> Handed() {
    std::lock_guard lock(mu_);
    return handed_;
  }

  std::unique_ptr<GrpcListener> listener_;
  std::mutex mu_;
  std::vector<std::string> handed_;
  std::vector<int> fds_;
  std::vector<int> clients_;
};

TEST(OpeningSizeTest, TlsRecordsAndTheHttp2Preface) {
  EXPECT_EQ(OpeningSize(""), 0u);
  EXPECT_EQ(OpeningSize("\x16\x03"), 0u);
  EXPECT_EQ(OpeningSize(TlsRecord(300).substr(0, 5)), 305u);
  EXPECT_EQ(OpeningSize(TlsRecord(0)), 5u);
  EXPECT_EQ(OpeningSize(std::string("\x16\x03\x01\xff\xff", 5)), 5u);  // too long: not waited for
  EXPECT_EQ(OpeningSize("PRI * HT"), 24u);
  EXPECT_EQ(OpeningSize("GET / HTTP/1.1"), 14u);  // not gRPC: handed on to be refused
}

TEST_F(ListenerTest, ATlsOpeningSentInPiecesIsHandedOverWholeOnceComplete) {
  Start({.greeting_timeout = 5s});
  const std::string hello = TlsRecord(517);
  const int fd = Connect();
  Send(fd, hello.substr(0, 1));
  Send(fd, hello.substr(1, 6));
  std::this_thread::sleep_for(100ms);
  EXPECT_TRUE(Handed().empty()) << "handed over before the ClientHello was complete";
  Send(fd, hello.substr(7));
  ASSERT_TRUE(gpupool::testing::WaitFor([&] { return !Handed().empty(); }, 5s));
  EXPECT_EQ(Handed()[0], hello);
  const int plain = Connect();
  Send(plain, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
  ASSERT_TRUE(gpupool::testing::WaitFor([&] { return Handed().size() == 2; }, 5s));
  EXPECT_EQ(Handed()[1], "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
}

TEST_F(ListenerTest, AConnectionThatStallsPartWayIsClosedAfterTheGreetingTimeout) {
  Start({.greeting_timeout = 300ms});
  const int fd = Connect();
  Send(fd, TlsRecord(517).substr(0, 40));
  EXPECT_TRUE(gpupool::testing::WaitFor([&] { return ClosedByServer(fd); }, 5s));
  EXPECT_TRUE(Handed().empty());
}

TEST_F(ListenerTest, AtTheCapAStalledOpeningMakesRoomForANewClient) {
  Start({.max_connections_per_client = 0, .max_connections = 3, .greeting_timeout = 60s});
  std::vector<int> stalled;
  for (int i = 0; i < 3; ++i) {
    stalled.push_back(Connect());
    Send(stalled.back(), "\x16");  // one byte of a ClientHello, then nothing
  }
  std::this_thread::sleep_for(100ms);
  const std::string hello = TlsRecord(200);
  const int good = Connect();
  Send(good, hello);
  ASSERT_TRUE(gpupool::testing::WaitFor([&] { return !Handed().empty(); }, 5s));
  EXPECT_EQ(Handed()[0], hello);
  EXPECT_TRUE(ClosedByServer(stalled[0])) << "the oldest stalled opening should have made room";
}

}  // namespace
}  // namespace gpupool::api::grpcface
