// HttpSession: one HTTP/1.1 connection of HttpServer (Boost.Beast). Internal to api/rest/.
//
// A session reads one request at a time, hands it to RestApi with a Responder (an Exchange) and
// goes back to reading only after the reply is written (keep-alive) — or closes. Replies come
// from ApiService threads: the Exchange posts them onto the session's strand through the server's
// Gate, which Shutdown() closes before the io_context goes away, so late replies are dropped
// instead of touching a dead io_context. Exchanges hold the session weakly; the server's
// SessionRegistry holds it strongly until it closes.
//
// Streams (WatchJob, task logs) are written as chunked newline-delimited JSON. While a stream is
// open the session also reads the socket, so a client that hangs up cancels the upstream stream.
//
// Thread safety: everything named Deliver*/Do*/On* runs on the session's strand.
#pragma once

#include <atomic>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <variant>

#include "api/rest/http_server.h"
#include "api/rest/routes.h"

namespace prometheus {
class Counter;
class Histogram;
template <typename T>
class Family;
}  // namespace prometheus

namespace gpupool::api::rest {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;

// Open while replies may be posted into the io_context: posters hold `mu` shared while posting;
// Shutdown() takes it exclusively to close the gate.
struct Gate {
  std::shared_mutex mu;
  bool open = true;  // guarded by mu
};

// The request metrics, recorded in one place: when a session finishes an exchange.
class HttpMetrics {
 public:
  explicit HttpMetrics(prometheus::Registry* registry);  // null = record nothing
  void Record(const std::string& method, const std::string& route, int code,
              std::chrono::steady_clock::duration elapsed);

 private:
  prometheus::Family<prometheus::Counter>* requests_ = nullptr;
  prometheus::Family<prometheus::Histogram>* duration_ = nullptr;
};

class HttpSession;
class Exchange;

// The server's open sessions, held strongly until they close.
class SessionRegistry {
 public:
  void Add(const std::shared_ptr<HttpSession>& s);
  void Remove(HttpSession* s);
  std::vector<std::shared_ptr<HttpSession>> Snapshot();
  size_t size();
  // Closes the session that has waited longest for a request; false when none waits.
  bool EvictLongestWaiting();
  // Waits until every session closed or `deadline` passed; true when all closed.
  bool WaitEmpty(std::chrono::steady_clock::time_point deadline);
  void Clear();

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::unordered_map<HttpSession*, std::shared_ptr<HttpSession>> live_;  // guarded by mu_
};

// What sessions share with their server; all outlive every session.
struct SessionEnv {
  const RestApi* api;
  const HttpServerOptions* options;
  HttpMetrics* metrics;
  std::shared_ptr<Gate> gate;
  SessionRegistry* registry;
  // Held for the session's life: its place in its client's connection count (may be null).
  std::shared_ptr<void> client_slot = nullptr;
  // Set: the session speaks TLS (HTTPS) with this context; null: plain HTTP.
  net::ssl::context* tls = nullptr;
};

class HttpSession : public std::enable_shared_from_this<HttpSession> {
 public:
  HttpSession(tcp::socket socket, SessionEnv env);
  ~HttpSession();

  // Starts reading requests. REQUIRES: registered in env.registry.
  void Start();
  // For shutdown: closes now unless a reply is awaited; then closes right after that reply.
  void Drain();
  // Since when (steady clock, µs) the connection has waited for a request without a complete
  // head, TLS handshake included; 0 while it has a request in hand. For the server's cap.
  int64_t waiting_since_us() const { return waiting_since_us_.load(std::memory_order_relaxed); }
  // Closes the connection if it still waits for a request (the server's cap needs its place).
  void Evict();

  const net::any_io_executor& executor() const { return executor_; }

  // Posted by the Exchange of request `id`; stale ids are ignored.
  void DeliverReply(uint64_t id, int status, std::string content_type, std::string body,
                    Headers headers);
  void DeliverLine(uint64_t id, std::string line);
  void DeliverEnd(uint64_t id, Status status);
  void DeliverCancel(uint64_t id, Cancel cancel);

 private:
  // kReading a request → kWaiting for the ApiService → kWriting the reply (→ kReading again),
  // or → kStreaming; kLingering after a last response; kClosed.
  enum class Mode { kReading, kWaiting, kWriting, kStreaming, kLingering, kClosed };

  void DoRead();
  void OnHeader(beast::error_code ec);
  void ReadBody();
  void OnRead(beast::error_code ec);
  void Dispatch(http::request<http::string_body> req);
  Exchange& NewExchange();
  void RejectRequest(int http_status, const Status& error);
  void StartStream();
  void QueueStreamBytes(std::string bytes);
  void DoStreamWrite();
  void WatchForHangup();
  void FinishExchange(int code);
  // Sends FIN, reads and discards what the client still sends (so it sees the response rather
  // than a reset), then closes. Close() closes at once.
  void CloseGracefully();
  void Linger(size_t discarded);
  void Close();
  void OnHandshake(beast::error_code ec);
  // The TCP layer under either stream (timeouts, shutdown, close).
  beast::tcp_stream& lowest();
  // Runs `f(stream)` with the plain or the TLS stream.
  template <typename F>
  void WithStream(F&& f) {
    std::visit(std::forward<F>(f), stream_);
  }

  const net::any_io_executor executor_;
  std::variant<beast::tcp_stream, beast::ssl_stream<beast::tcp_stream>> stream_;
  std::string peer_;  // "address:port" of the client, empty when unknown
  SessionEnv env_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  Mode mode_ = Mode::kReading;
  bool draining_ = false;
  std::atomic<int64_t> waiting_since_us_{0};

  // The exchange in progress.
  uint64_t exchange_id_ = 0;
  std::shared_ptr<Exchange> exchange_;
  std::string method_;
  std::string request_id_;  // X-Request-Id of the exchange (api/audit.h), echoed in the reply
  unsigned version_ = 11;
  bool keep_alive_ = true;
  std::chrono::steady_clock::time_point started_;
  bool recorded_ = false;
  int code_ = 0;

  // Streaming.
  Cancel cancel_;
  std::deque<std::string> out_;
  size_t out_bytes_ = 0;
  std::string writing_bytes_;  // what async_write is sending
  bool writing_ = false;
  bool stream_done_ = false;  // the last chunk is queued
  char hangup_buf_[512];
  // A stream with nothing to send yet (logs of a pending task, a quiet watch) answers its status
  // line when this fires, so a client is never left without one; an error found before it is
  // still an ordinary error response (404 for an unknown job).
  net::steady_timer head_timer_;
};

}  // namespace gpupool::api::rest
