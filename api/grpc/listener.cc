#include "api/grpc/listener.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <map>

#include "api/grpc/client_table.h"
#include "base/log.h"

namespace gpupool::api::grpcface {

namespace {

bool IsWildcard(const std::string& host) {
  return host.empty() || host == "0.0.0.0" || host == "::";
}

// A listening socket for `addr`, or -1 with errno set.
int ListenOn(const sockaddr* addr, socklen_t len, bool dual_stack) {
  const int fd = socket(addr->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  const int one = 1;
  const int zero = 0;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  if (addr->sa_family == AF_INET6) {
    setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, dual_stack ? &zero : &one, sizeof(int));
  }
  if (bind(fd, addr, len) != 0 || listen(fd, SOMAXCONN) != 0) {
    const int saved = errno;
    close(fd);
    errno = saved;
    return -1;
  }
  return fd;
}

int BoundPort(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return 0;
  if (ss.ss_family == AF_INET) return ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  return ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
}

// The client's address without its port ("127.0.0.1", "2001:db8::1"); IPv4 clients of a
// dual-stack socket are named as IPv4, so one client is one key whichever way it came in.
std::string ClientAddress(const sockaddr_storage& ss) {
  char text[INET6_ADDRSTRLEN] = {};
  if (ss.ss_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&ss)->sin_addr, text, sizeof(text));
    return text;
  }
  if (ss.ss_family == AF_INET6) {
    const in6_addr& a = reinterpret_cast<const sockaddr_in6*>(&ss)->sin6_addr;
    if (IN6_IS_ADDR_V4MAPPED(&a)) {
      inet_ntop(AF_INET, &a.s6_addr[12], text, sizeof(text));
    } else {
      inet_ntop(AF_INET6, &a, text, sizeof(text));
    }
    return text;
  }
  return "?";
}

// True for the 1st, 2nd, 4th, 8th… time: logs that say "still happening" without a flood.
bool PowerOfTwo(uint64_t n) { return n != 0 && (n & (n - 1)) == 0; }

}  // namespace

size_t OpeningSize(std::string_view head) {
  static constexpr std::string_view kPreface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
  if (head.empty()) return 0;
  if (static_cast<unsigned char>(head[0]) == 0x16) {  // TLS handshake record: 5-byte header
    if (head.size() < 5) return 0;
    const size_t length = (static_cast<size_t>(static_cast<unsigned char>(head[3])) << 8) |
                          static_cast<unsigned char>(head[4]);
    // A record longer than TLS allows (2^14 + 2048) is not waited for: the handshake refuses it.
    return length > (1u << 14) + 2048 ? head.size() : 5 + length;
  }
  const size_t n = std::min(head.size(), kPreface.size());
  if (head.substr(0, n) != kPreface.substr(0, n)) return head.size();  // not gRPC: refused there
  return kPreface.size();
}

Result<std::unique_ptr<GrpcListener>> GrpcListener::Bind(const std::string& address,
                                                         ListenerOptions options) {
  const std::string where = options.name + " server: cannot listen on '" + address + "': ";
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos) return Status::InvalidArgument(where + "expected host:port");
  std::string host = address.substr(0, colon);
  const std::string port = address.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  std::unique_ptr<GrpcListener> l(new GrpcListener(address, std::move(options)));

  std::string error;
  if (IsWildcard(host)) {
    // Both families on one socket, as gRPC listens; IPv4 alone where IPv6 is missing.
    for (const char* family_host : {"::", "0.0.0.0"}) {
      addrinfo hints{};
      hints.ai_socktype = SOCK_STREAM;
      hints.ai_flags = AI_PASSIVE | AI_NUMERICHOST | AI_NUMERICSERV;
      addrinfo* res = nullptr;
      if (getaddrinfo(family_host, port.c_str(), &hints, &res) != 0 || res == nullptr) {
        error = "not a valid port";
        continue;
      }
      const int fd = ListenOn(res->ai_addr, res->ai_addrlen, /*dual_stack=*/true);
      if (fd < 0) error = std::strerror(errno);
      freeaddrinfo(res);
      if (fd >= 0) {
        l->fds_.push_back(fd);
        break;
      }
    }
  } else {
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    addrinfo* res = nullptr;
    const int gai = getaddrinfo(host.c_str(), port.c_str(), &hints, &res);
    if (gai != 0) return Status::InvalidArgument(where + gai_strerror(gai));
    std::string chosen_port = port;
    for (addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
      // Port 0: every address gets the port the first one was given.
      if (!l->fds_.empty() && chosen_port == "0") {
        const uint16_t p = htons(static_cast<uint16_t>(BoundPort(l->fds_.front())));
        if (ai->ai_family == AF_INET) reinterpret_cast<sockaddr_in*>(ai->ai_addr)->sin_port = p;
        if (ai->ai_family == AF_INET6) reinterpret_cast<sockaddr_in6*>(ai->ai_addr)->sin6_port = p;
      }
      const int fd = ListenOn(ai->ai_addr, ai->ai_addrlen, /*dual_stack=*/false);
      if (fd < 0) {
        error = std::strerror(errno);
        continue;
      }
      l->fds_.push_back(fd);
    }
    freeaddrinfo(res);
  }
  if (l->fds_.empty()) return Status::Unavailable(where + error);
  l->port_ = BoundPort(l->fds_.front());
  l->wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (l->wake_fd_ < 0) return Status::Unavailable(where + std::strerror(errno));
  return l;
}

GrpcListener::~GrpcListener() {
  Stop();
  if (wake_fd_ >= 0) close(wake_fd_);
}

void GrpcListener::Start(Handoff handoff) {
  thread_ = std::thread([this, h = std::move(handoff)] { Loop(h); });
}

void GrpcListener::Stop() {
  stop_ = true;
  if (thread_.joinable()) {
    const uint64_t one = 1;
    [[maybe_unused]] ssize_t n = write(wake_fd_, &one, sizeof(one));
    thread_.join();
  }
  for (int fd : fds_) close(fd);
  fds_.clear();
}

void GrpcListener::Loop(Handoff handoff) {
  using Clock = std::chrono::steady_clock;
  ClientTable clients(options_.max_connections_per_client, options_.max_connections > 0);
  // Accepted, admitted, opening not complete yet: descriptor → (its listener, when it was
  // accepted, the bytes read so far).
  struct Greeting {
    int listener = -1;
    Clock::time_point since;
    std::string read;
  };
  std::map<int, Greeting> greeting;
  uint64_t exhausted = 0;
  uint64_t refused = 0;
  uint64_t evicted = 0;
  Clock::time_point paused_until{};
  std::vector<pollfd> polled;
  auto hand_over = [&](int fd, int listener, std::string opening) {
    const int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    handoff(listener, fd, std::move(opening));
  };
  while (!stop_) {
    Clock::time_point now = Clock::now();
    // Silent, or its opening still incomplete, past the greeting timeout: closed before gRPC ever
    // sees it.
    for (auto it = greeting.begin(); it != greeting.end();) {
      if (now - it->second.since >= options_.greeting_timeout) {
        close(it->first);
        it = greeting.erase(it);
      } else {
        ++it;
      }
    }
    const bool paused = now < paused_until;
    polled.clear();
    polled.push_back({wake_fd_, POLLIN, 0});
    const size_t first_listener = polled.size();
    if (!paused) {
      for (int fd : fds_) polled.push_back({fd, POLLIN, 0});
    }
    const size_t first_greeting = polled.size();
    Clock::time_point wake_at = paused ? paused_until : Clock::time_point::max();
    for (const auto& [fd, g] : greeting) {
      polled.push_back({fd, POLLIN, 0});
      wake_at = std::min(wake_at, g.since + options_.greeting_timeout);
    }
    const int timeout_ms =
        wake_at == Clock::time_point::max()
            ? -1
            : static_cast<int>(std::max<int64_t>(
                  0, std::chrono::ceil<std::chrono::milliseconds>(wake_at - now).count()));
    if (poll(polled.data(), polled.size(), timeout_ms) < 0 && errno != EINTR) {
      LogError("api.grpc", "poll failed", {{"error", std::strerror(errno)}});
      paused_until = Clock::now() + options_.exhausted_retry;
      continue;
    }
    // Connections that spoke: read what their opening still lacks (consumed, so a stalled one
    // does not wake poll again); complete ones are gRPC's from now on, with those bytes.
    for (size_t i = first_greeting; i < polled.size(); ++i) {
      if (polled[i].revents == 0) continue;
      auto it = greeting.find(polled[i].fd);
      if (it == greeting.end()) continue;
      std::string& read = it->second.read;
      const size_t want = OpeningSize(read);
      // Before the size is known, read only up to the TLS header, so no byte past the opening
      // is taken (it would be handed on all the same, but need not be held here).
      const size_t chunk = want == 0 ? 5 - read.size() : want - read.size();
      const size_t had = read.size();
      read.resize(had + chunk);
      const ssize_t n = recv(polled[i].fd, read.data() + had, chunk, MSG_DONTWAIT);
      read.resize(had + static_cast<size_t>(std::max<ssize_t>(n, 0)));
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) continue;
      if (n <= 0) {  // gone, or failed, before its opening was complete: nothing for gRPC
        close(polled[i].fd);
        greeting.erase(it);
        continue;
      }
      const size_t need = OpeningSize(read);
      if (need == 0 || read.size() < need) continue;
      const int listener = it->second.listener;
      std::string opening = std::move(read);
      greeting.erase(it);
      hand_over(polled[i].fd, listener, std::move(opening));
    }
    for (size_t i = first_listener; i < first_greeting && !stop_; ++i) {
      if ((polled[i].revents & POLLIN) == 0) continue;
      const int listener = polled[i].fd;
      while (!stop_) {
        sockaddr_storage peer{};
        socklen_t len = sizeof(peer);
        const int fd = accept4(listener, reinterpret_cast<sockaddr*>(&peer), &len,
                               SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
          if (errno == EINTR || errno == ECONNABORTED || errno == EPROTO) continue;
          if (errno == EAGAIN || errno == EWOULDBLOCK) break;
          // EMFILE, ENFILE, ENOBUFS, ENOMEM: wait for descriptors to come back, then go on.
          if (PowerOfTwo(++exhausted)) {
            LogWarn("api.grpc", "accept failed; pausing the port",
                    {{"port", options_.name},
                     {"error", std::strerror(errno)},
                     {"retry_ms", std::to_string(options_.exhausted_retry.count())},
                     {"occurrences", std::to_string(exhausted)}});
          }
          paused_until = Clock::now() + options_.exhausted_retry;
          break;
        }
        const std::string client = ClientAddress(peer);
        if (options_.max_connections > 0 && clients.AtLeastOpen(options_.max_connections)) {
          // The port is full: the connection silent the longest makes room, or none does.
          auto oldest = std::min_element(
              greeting.begin(), greeting.end(),
              [](const auto& a, const auto& b) { return a.second.since < b.second.since; });
          if (oldest == greeting.end()) {
            close(fd);
            if (PowerOfTwo(++refused)) {
              LogWarn("api.grpc", "port at its connection limit; refusing more",
                      {{"port", options_.name},
                       {"limit", std::to_string(options_.max_connections)},
                       {"refused_total", std::to_string(refused)}});
            }
            continue;
          }
          close(oldest->first);
          greeting.erase(oldest);
          if (PowerOfTwo(++evicted)) {
            LogWarn("api.grpc", "port at its connection limit; closing silent connections",
                    {{"port", options_.name},
                     {"limit", std::to_string(options_.max_connections)},
                     {"closed_total", std::to_string(evicted)}});
          }
        }
        if (!clients.Admit(fd, client)) {
          close(fd);  // over its limit: refused before any byte is read
          if (PowerOfTwo(++refused)) {
            LogWarn("api.grpc", "client at its connection limit; refusing more",
                    {{"port", options_.name},
                     {"client", client},
                     {"limit", std::to_string(options_.max_connections_per_client)},
                     {"refused_total", std::to_string(refused)}});
          }
          continue;
        }
        if (options_.greeting_timeout.count() <= 0) {
          hand_over(fd, listener, std::string());
        } else {
          greeting.emplace(fd, Greeting{listener, Clock::now(), std::string()});
        }
      }
      if (Clock::now() < paused_until) break;
    }
  }
  for (const auto& [fd, _] : greeting) close(fd);
}

}  // namespace gpupool::api::grpcface
