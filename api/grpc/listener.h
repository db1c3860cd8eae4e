// GrpcListener: gpupoold's own accept loop for a gRPC port. gRPC 1.51's listener gives up on its
// socket for good after one failed accept() — EMFILE when descriptors run out — so a connection
// flood left the gRPC port never accepting again. gpupoold therefore binds and accepts itself
// and hands each connection to the gRPC server (ServerBuilder's external connection acceptor,
// which runs the same TLS and HTTP/2 handshake, timeouts and peer address as its own listener).
//
//   auto l = GrpcListener::Bind("0.0.0.0:7070", {.name = "gRPC"});   // l->port() now known
//   l->Start([&](int listener_fd, int fd, std::string opening) { hand fd to gRPC });  // owns fd
//   …
//   l->Stop();                                                        // before the server stops
//
// What the loop adds to a plain accept():
// - Out of descriptors (EMFILE/ENFILE, or the kernel out of buffers): the port pauses for
//   `exhausted_retry` and tries again, leaving waiting clients in the backlog, so it serves again
//   as soon as descriptors come back. Logged at the 1st, 2nd, 4th, 8th… occurrence.
// - A client address holding `max_connections_per_client` open connections has its next one
//   closed before a byte is read (ClientTable), logged likewise.
// - A connection is handed to gRPC once its opening is complete — the whole first TLS record (the
//   ClientHello) on a TLS port, the 24-byte HTTP/2 preface on a plaintext one — with the bytes
//   read so far (OpeningSize); until then it is the port's own, and closed unless complete within
//   `greeting_timeout` of its accept. So a client that sends one byte and stalls holds no gRPC
//   handshake slot: it is evicted or timed out here like a silent one.
// - The port holds at most `max_connections` (opening and handed over together): past it a new
//   connection closes the one that has waited longest without completing its opening, so
//   idle or stalled connections cannot keep a client that speaks out; with none such, the new
//   one is refused. Together with the REST
//   server's cap this keeps descriptors for PostgreSQL and the other ports (docs/security.md,
//   "Connection floods").
//
// Addresses: "host:port"; a port of 0 picks one. A wildcard host ("", 0.0.0.0, [::]) listens on
// IPv6 and IPv4 alike, as gRPC does; a name listens on every address it resolves to.
//
// Thread safety: Bind/Start/Stop from one controlling thread; `handoff` runs on the loop's own
// thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "base/status.h"

namespace gpupool::api::grpcface {

struct ListenerOptions {
  std::string name = "gRPC";  // in logs and errors: "gRPC", "gRPC TLS"
  // Open connections one client address may hold; 0 = no limit.
  size_t max_connections_per_client = 256;
  // How long the port pauses when accept() finds no descriptor left.
  std::chrono::milliseconds exhausted_retry{100};
  // Open connections the port may hold in all; 0 = no limit.
  size_t max_connections = 0;
  // How long a connection may stay silent before it is handed over (then closed); 0 = hand
  // over at once.
  std::chrono::milliseconds greeting_timeout{10'000};
};

// How many bytes the opening of a connection that began with `head` takes: 5 + the record length
// for a TLS handshake record (0x16), 24 for the HTTP/2 preface; `head.size()` itself when more
// bytes cannot tell more (anything else is gRPC's to refuse). 0 while `head` is too short to say.
size_t OpeningSize(std::string_view head);

class GrpcListener {
 public:
  // `opening`: the bytes already read from `fd` (its complete opening), for gRPC to go on from.
  using Handoff = std::function<void(int listener_fd, int fd, std::string opening)>;

  // Binds and listens now. UNAVAILABLE naming the address and the OS error when it cannot
  // ("Address already in use"), INVALID_ARGUMENT when `address` is not host:port.
  static Result<std::unique_ptr<GrpcListener>> Bind(const std::string& address,
                                                    ListenerOptions options);
  ~GrpcListener();  // Stop()
  GrpcListener(const GrpcListener&) = delete;
  GrpcListener& operator=(const GrpcListener&) = delete;

  int port() const { return port_; }

  // Starts the accept loop. REQUIRES: called once.
  void Start(Handoff handoff);
  // Stops the loop (joining it) and closes the listening sockets. Idempotent.
  void Stop();

 private:
  GrpcListener(std::string address, ListenerOptions options)
      : address_(std::move(address)), options_(std::move(options)) {}
  void Loop(Handoff handoff);

  const std::string address_;
  const ListenerOptions options_;
  std::vector<int> fds_;  // listening sockets
  int wake_fd_ = -1;      // eventfd: Stop() wakes the loop
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace gpupool::api::grpcface
