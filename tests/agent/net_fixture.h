// Test support for task networks: a TCP listener and a connect probe in any network namespace
// (a thread that joined it: sockets keep the namespace they were made in), and the node's public
// address. Real sockets on the real kernel; needs root for namespaces other than the test's own.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "agent/net/task_network.h"

namespace gpupool::agent::testing {

using net::Cidr;
using net::FormatIpv4;

inline bool Have(const std::string& program) {
  for (const char* dir : {"/usr/sbin/", "/sbin/", "/usr/bin/", "/bin/"}) {
    if (access((dir + program).c_str(), X_OK) == 0) return true;
  }
  return false;
}

// Runs `fn` on a thread that has joined the network namespace at `netns_path` ("" = the node's).
inline void InNetns(const std::string& netns_path, const std::function<void()>& fn) {
  std::thread t([&] {
    if (!netns_path.empty()) {
      const int fd = open(netns_path.c_str(), O_RDONLY | O_CLOEXEC);
      ASSERT_GE(fd, 0) << netns_path;
      ASSERT_EQ(setns(fd, CLONE_NEWNET), 0) << std::strerror(errno);
      close(fd);
    }
    fn();
  });
  t.join();
}

// A TCP listener on 0.0.0.0:<port> in a namespace, accepting and remembering the peer address.
class Listener {
 public:
  // `port` 0: any free one.
  explicit Listener(const std::string& netns_path, int port = 0) {
    InNetns(netns_path, [&] {
      fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      int one = 1;
      setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_port = htons(static_cast<uint16_t>(port));
      ASSERT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
      socklen_t len = sizeof a;
      getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
      port_ = ntohs(a.sin_port);
      ASSERT_EQ(listen(fd_, 16), 0);
    });
    thread_ = std::thread([this] {
      while (!stop_) {
        pollfd p{fd_, POLLIN, 0};
        if (poll(&p, 1, 100) <= 0) continue;
        sockaddr_in peer{};
        socklen_t len = sizeof peer;
        const int c = accept(fd_, reinterpret_cast<sockaddr*>(&peer), &len);
        if (c < 0) continue;
        char buf[INET_ADDRSTRLEN] = {};
        inet_ntop(AF_INET, &peer.sin_addr, buf, sizeof buf);
        {
          std::lock_guard lock(mu_);
          last_peer_ = buf;
        }
        close(c);
      }
    });
  }
  ~Listener() {
    stop_ = true;
    thread_.join();
    close(fd_);
  }
  int port() const { return port_; }
  std::string last_peer() const {
    std::lock_guard lock(mu_);
    return last_peer_;
  }

 private:
  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  mutable std::mutex mu_;
  std::string last_peer_;
};

// 0 when a TCP connection from the namespace to address:port was accepted, else the errno.
inline int ConnectFrom(const std::string& netns_path, const std::string& address, int port) {
  int result = ETIMEDOUT;
  InNetns(netns_path, [&] {
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    inet_pton(AF_INET, address.c_str(), &a.sin_addr);
    if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
      result = 0;
    } else if (errno != EINPROGRESS) {
      result = errno;
    } else {
      pollfd p{fd, POLLOUT, 0};
      if (poll(&p, 1, 3000) == 1) {
        int err = 0;
        socklen_t len = sizeof err;
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
        result = err;
      }
    }
    close(fd);
  });
  if (result == 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));  // let it accept
  return result;
}

inline std::string ReadIn(const std::string& netns_path, const std::string& file) {
  std::string out;
  InNetns(netns_path, [&] {
    std::ifstream in(file);
    std::getline(in, out);
  });
  return out;
}

// The node's first non-loopback IPv4 address outside `skip` (its "public" address).
inline std::string NodeAddress(const Cidr& skip) {
  ifaddrs* list = nullptr;
  std::string found;
  if (getifaddrs(&list) != 0) return found;
  for (ifaddrs* i = list; i != nullptr && found.empty(); i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET) continue;
    const uint32_t a = ntohl(reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr);
    if ((a >> 24) == 127 || skip.Contains(a)) continue;
    found = FormatIpv4(a);
  }
  freeifaddrs(list);
  return found;
}

// Options for a test's own task networks: names from `letter` and the pid (tests running side by
// side never meet: prefix gp<letter><pid>, veths <letter><pid>), on `subnet`.
inline net::NetworkOptions TestNetworkOptions(const std::string& letter,
                                              const std::string& subnet) {
  const std::string tag = std::to_string(getpid() % 100000);
  net::NetworkOptions o;
  o.prefix = "gp" + letter + tag;
  o.iface = letter + tag;
  o.subnet = subnet;
  return o;
}

// Whether this host can build task networks (root, iproute2, iptables); the reason when not.
inline std::string CannotBuildNetworks() {
  if (geteuid() != 0) return "needs root: namespaces, veths, iptables";
  if (!Have("ip") || !Have("iptables-restore")) return "needs iproute2 and iptables";
  return "";
}

}  // namespace gpupool::agent::testing
