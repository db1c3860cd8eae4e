#include "api/rest/http_session.h"

#include <prometheus/counter.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <atomic>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/write.hpp>

#include "api/audit.h"
#include "api/rest/json_mapping.h"
#include "base/log.h"

namespace gpupool::api::rest {

// The Responder of one request: posts the answer onto its session's strand through the Gate.
class Exchange final : public Responder {
 public:
  Exchange(std::weak_ptr<HttpSession> session, std::shared_ptr<Gate> gate, uint64_t id)
      : session_(std::move(session)), gate_(std::move(gate)), id_(id) {}

  void SetRoute(std::string pattern) override {
    std::lock_guard lock(mu_);
    route_ = std::move(pattern);
  }
  std::string route() {
    std::lock_guard lock(mu_);
    return route_.empty() ? "unmatched" : route_;
  }

  void Reply(int status, std::string content_type, std::string body, Headers headers) override {
    Post([id = id_, status, ct = std::move(content_type), body = std::move(body),
          headers = std::move(headers)](HttpSession& s) mutable {
      s.DeliverReply(id, status, std::move(ct), std::move(body), std::move(headers));
    });
  }
  void StreamLine(std::string line) override {
    any_line_ = true;
    Post([id = id_, line = std::move(line)](HttpSession& s) mutable {
      s.DeliverLine(id, std::move(line));
    });
  }
  void StreamEnd(const Status& status) override {
    // An error before the first item is an ordinary error response (404 for an unknown job…).
    if (!any_line_ && !status.ok()) return ReplyError(*this, status);
    Post([id = id_, status](HttpSession& s) { s.DeliverEnd(id, status); });
  }
  void SetCancel(Cancel cancel) override {
    if (!cancel) return;
    // Runs the Cancel if the session never takes it (closed gate, dropped handler). Built in
    // place and not copyable: a temporary copy's destructor would cancel the live stream at once
    // (which is how REST log streams once sent nothing at all).
    struct CancelOnDrop {
      explicit CancelOnDrop(Cancel c) : cancel(std::move(c)) {}
      CancelOnDrop(const CancelOnDrop&) = delete;
      CancelOnDrop& operator=(const CancelOnDrop&) = delete;
      ~CancelOnDrop() {
        if (cancel) cancel();
      }
      Cancel cancel;
    };
    auto holder = std::make_shared<CancelOnDrop>(std::move(cancel));
    Post([id = id_, holder](HttpSession& s) {
      s.DeliverCancel(id, std::exchange(holder->cancel, nullptr));
    });
  }

 private:
  template <typename F>
  void Post(F&& f) {
    std::shared_lock lock(gate_->mu);
    if (!gate_->open) return;
    std::shared_ptr<HttpSession> s = session_.lock();  // released before the gate
    if (!s) return;
    net::post(s->executor(), [s, f = std::forward<F>(f)]() mutable { f(*s); });
  }

  const std::weak_ptr<HttpSession> session_;
  const std::shared_ptr<Gate> gate_;
  const uint64_t id_;
  std::atomic<bool> any_line_{false};
  std::mutex mu_;
  std::string route_;  // guarded by mu_
};

namespace {

std::string Chunk(std::string_view data) {
  char size[32];
  const int n = std::snprintf(size, sizeof(size), "%zx\r\n", data.size());
  std::string out(size, static_cast<size_t>(n));
  out.append(data);
  out.append("\r\n");
  return out;
}

}  // namespace

// HttpMetrics.
HttpMetrics::HttpMetrics(prometheus::Registry* registry) {
  if (registry == nullptr) return;
  requests_ = &prometheus::BuildCounter()
                   .Name("gpupool_http_requests_total")
                   .Help("HTTP requests handled, by method, route pattern and status code.")
                   .Register(*registry);
  duration_ = &prometheus::BuildHistogram()
                   .Name("gpupool_http_request_duration_seconds")
                   .Help("Time from a request's arrival to its last response byte written.")
                   .Register(*registry);
}

void HttpMetrics::Record(const std::string& method, const std::string& route, int code,
                         std::chrono::steady_clock::duration elapsed) {
  if (requests_ == nullptr) return;
  static const prometheus::Histogram::BucketBoundaries kBuckets = {
      0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
  requests_->Add({{"method", method}, {"route", route}, {"code", std::to_string(code)}})
      .Increment();
  duration_->Add({{"method", method}, {"route", route}}, kBuckets)
      .Observe(std::chrono::duration<double>(elapsed).count());
}

// SessionRegistry.
void SessionRegistry::Add(const std::shared_ptr<HttpSession>& s) {
  std::lock_guard lock(mu_);
  live_.emplace(s.get(), s);
}

void SessionRegistry::Remove(HttpSession* s) {
  std::shared_ptr<HttpSession> keep;  // destroyed after the lock is released
  {
    std::lock_guard lock(mu_);
    auto it = live_.find(s);
    if (it == live_.end()) return;
    keep = std::move(it->second);
    live_.erase(it);
  }
  cv_.notify_all();
}

std::vector<std::shared_ptr<HttpSession>> SessionRegistry::Snapshot() {
  std::lock_guard lock(mu_);
  std::vector<std::shared_ptr<HttpSession>> out;
  for (const auto& [_, s] : live_) out.push_back(s);
  return out;
}

size_t SessionRegistry::size() {
  std::lock_guard lock(mu_);
  return live_.size();
}

bool SessionRegistry::EvictLongestWaiting() {
  std::shared_ptr<HttpSession> victim;
  {
    std::lock_guard lock(mu_);
    int64_t oldest = 0;
    for (const auto& [_, s] : live_) {
      const int64_t since = s->waiting_since_us();
      if (since != 0 && (oldest == 0 || since < oldest)) {
        oldest = since;
        victim = s;
      }
    }
  }
  if (!victim) return false;
  victim->Evict();
  return true;
}

bool SessionRegistry::WaitEmpty(std::chrono::steady_clock::time_point deadline) {
  std::unique_lock lock(mu_);
  return cv_.wait_until(lock, deadline, [this] { return live_.empty(); });
}

void SessionRegistry::Clear() {
  std::unordered_map<HttpSession*, std::shared_ptr<HttpSession>> live;
  {
    std::lock_guard lock(mu_);
    live.swap(live_);
  }
}

// HttpSession.
namespace {

using AnyStream = std::variant<beast::tcp_stream, beast::ssl_stream<beast::tcp_stream>>;

// How long a stream that has nothing to send waits before its status line goes out anyway:
// long enough for a lookup's error (404 for an unknown job) to be a plain error response.
constexpr std::chrono::milliseconds kStreamHeadDelay{1000};

int64_t SteadyMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

AnyStream MakeStream(tcp::socket socket, net::ssl::context* tls) {
  if (tls != nullptr) return AnyStream(std::in_place_index<1>, std::move(socket), *tls);
  return AnyStream(std::in_place_index<0>, std::move(socket));
}

}  // namespace

HttpSession::HttpSession(tcp::socket socket, SessionEnv env)
    : executor_(socket.get_executor()),
      stream_(MakeStream(std::move(socket), env.tls)),
      env_(std::move(env)),
      head_timer_(executor_) {
  beast::error_code ec;
  const tcp::endpoint peer = lowest().socket().remote_endpoint(ec);
  if (!ec) peer_ = peer.address().to_string() + ":" + std::to_string(peer.port());
  waiting_since_us_ = SteadyMicros();
}

beast::tcp_stream& HttpSession::lowest() {
  return std::visit([](auto& s) -> beast::tcp_stream& { return beast::get_lowest_layer(s); },
                    stream_);
}

HttpSession::~HttpSession() {
  if (cancel_) cancel_();
}

void HttpSession::Start() {
  net::dispatch(executor_, [self = shared_from_this()] {
    auto* tls = std::get_if<beast::ssl_stream<beast::tcp_stream>>(&self->stream_);
    if (tls == nullptr) return self->DoRead();
    // A client that never completes the handshake is closed like an idle one.
    self->lowest().expires_after(self->env_.options->idle_timeout);
    tls->async_handshake(net::ssl::stream_base::server,
                         [self](beast::error_code ec) { self->OnHandshake(ec); });
  });
}

void HttpSession::OnHandshake(beast::error_code ec) {
  if (mode_ == Mode::kClosed) return;
  if (ec) return Close();  // not TLS, an untrusted client, a timeout: nothing to answer
  DoRead();
}

void HttpSession::Evict() {
  waiting_since_us_ = 0;  // chosen once
  net::post(executor_, [self = shared_from_this()] {
    if (self->mode_ == Mode::kReading) self->Close();
  });
}

void HttpSession::Drain() {
  net::post(executor_, [self = shared_from_this()] {
    self->draining_ = true;
    if (self->mode_ != Mode::kWaiting && self->mode_ != Mode::kWriting) self->Close();
  });
}

void HttpSession::DoRead() {
  mode_ = Mode::kReading;
  waiting_since_us_ = SteadyMicros();
  parser_.emplace();
  parser_->header_limit(static_cast<std::uint32_t>(env_.options->max_header_bytes));
  parser_->body_limit(env_.options->max_body_bytes);
  lowest().expires_after(env_.options->idle_timeout);  // covers the head and the body
  // The head first: an oversized Content-Length is refused before the body is sent, and a client
  // waiting for "100 Continue" (curl, for bodies over 1 KiB) gets it at once.
  WithStream([this](auto& stream) {
    http::async_read_header(
        stream, buffer_, *parser_,
        [self = shared_from_this()](beast::error_code ec, size_t) { self->OnHeader(ec); });
  });
}

void HttpSession::OnHeader(beast::error_code ec) {
  if (mode_ == Mode::kClosed) return;
  waiting_since_us_ = 0;  // a request in hand
  if (ec || parser_->is_done()) return OnRead(ec);
  if (beast::iequals(parser_->get()[http::field::expect], "100-continue")) {
    static const std::string kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
    WithStream([this](auto& stream) {
      net::async_write(stream, net::buffer(kContinue),
                       [self = shared_from_this()](beast::error_code write_ec, size_t) {
                         if (write_ec) return self->Close();
                         self->ReadBody();
                       });
    });
    return;
  }
  ReadBody();
}

void HttpSession::ReadBody() {
  WithStream([this](auto& stream) {
    http::async_read(
        stream, buffer_, *parser_,
        [self = shared_from_this()](beast::error_code ec, size_t) { self->OnRead(ec); });
  });
}

void HttpSession::OnRead(beast::error_code ec) {
  if (mode_ == Mode::kClosed) return;
  if (!ec) return Dispatch(parser_->release());
  if (ec == http::error::end_of_stream || ec == beast::error::timeout ||
      ec == net::error::operation_aborted || ec == net::error::connection_reset ||
      ec == net::error::eof) {
    return Close();
  }
  const HttpServerOptions& o = *env_.options;
  if (ec == http::error::body_limit) {
    return RejectRequest(413,
                         Status::ResourceExhausted("request body too large: the limit is " +
                                                   std::to_string(o.max_body_bytes) + " bytes"));
  }
  if (ec == http::error::header_limit) {
    return RejectRequest(431,
                         Status::ResourceExhausted("request header too large: the limit is " +
                                                   std::to_string(o.max_header_bytes) + " bytes"));
  }
  RejectRequest(400, Status::InvalidArgument("malformed HTTP request: " + ec.message()));
}

Exchange& HttpSession::NewExchange() {
  ++exchange_id_;
  request_id_.clear();
  mode_ = Mode::kWaiting;
  recorded_ = false;
  code_ = 0;
  stream_done_ = false;
  started_ = std::chrono::steady_clock::now();
  exchange_ = std::make_shared<Exchange>(weak_from_this(), env_.gate, exchange_id_);
  lowest().expires_never();  // the ApiService takes what it takes; writes set their own timeout
  return *exchange_;
}

void HttpSession::Dispatch(http::request<http::string_body> req) {
  NewExchange();
  method_ = std::string(http::to_string(req.method()));
  version_ = req.version();
  keep_alive_ = req.keep_alive();
  HttpRequestIn in;
  in.method = std::string(req.method_string());
  in.target = std::string(req.target());
  in.authorization = std::string(req[http::field::authorization]);
  request_id_ = RequestIdOr(std::string(req["X-Request-Id"]));
  in.request_id = request_id_;
  in.idempotency_key = std::string(req["Idempotency-Key"]);
  in.body = std::move(req.body());
  in.source = peer_;
  env_.api->Handle(in, exchange_);
}

void HttpSession::RejectRequest(int http_status, const Status& error) {
  std::string route = "unmatched";
  method_ = "unknown";
  if (parser_ && parser_->is_header_done()) {
    const auto& head = parser_->get();
    method_ = std::string(http::to_string(head.method()));
    version_ = head.version();
    route = env_.api->RouteOf(head.method_string(), head.target());
  }
  Exchange& ex = NewExchange();
  keep_alive_ = false;  // the rest of the request is unread: the connection cannot go on
  ex.SetRoute(route);
  ReplyError(ex, error, http_status);
}

void HttpSession::DeliverReply(uint64_t id, int status, std::string content_type, std::string body,
                               Headers headers) {
  if (id == exchange_id_ && mode_ == Mode::kStreaming && !stream_done_ && status >= 400) {
    // An error of a stream whose status line went out already (kStreamHeadDelay): its last line.
    cancel_ = nullptr;
    std::string line = "{\"error\":" + body + "}\n";
    QueueStreamBytes(version_ >= 11 ? Chunk(line) : std::move(line));
    if (version_ >= 11) QueueStreamBytes("0\r\n\r\n");
    stream_done_ = true;
    return DoStreamWrite();
  }
  if (id != exchange_id_ || mode_ != Mode::kWaiting) return;
  auto res = std::make_shared<http::response<http::string_body>>();
  res->version(version_);
  res->result(static_cast<unsigned>(status));
  if (status == 499) res->reason("Client Closed Request");
  res->set(http::field::server, "gpupool");
  res->set(http::field::content_type, content_type);
  if (!request_id_.empty()) res->set("X-Request-Id", request_id_);
  for (auto& [name, value] : headers) res->set(name, value);
  res->body() = std::move(body);
  res->keep_alive(keep_alive_ && !draining_);
  res->prepare_payload();
  code_ = status;
  mode_ = Mode::kWriting;
  lowest().expires_after(env_.options->write_timeout);
  // Counted before the reply leaves: a client that reads /metrics right after this reply must
  // find it there (the next request may be served on another io thread before this callback).
  FinishExchange(code_);
  WithStream([this, &res](auto& stream) {
    http::async_write(stream, *res, [self = shared_from_this(), res](beast::error_code ec, size_t) {
      if (ec && ec != http::error::end_of_stream) return self->Close();
      if (!res->keep_alive()) return self->CloseGracefully();
      if (self->draining_) return self->Close();
      self->DoRead();
    });
  });
}

void HttpSession::StartStream() {
  mode_ = Mode::kStreaming;
  code_ = 200;
  lowest().expires_never();
  WatchForHangup();  // before the first write, so the read carries no write timeout
  std::string head = version_ >= 11 ? "HTTP/1.1 200 OK\r\n" : "HTTP/1.0 200 OK\r\n";
  head += "Server: gpupool\r\n";
  if (!request_id_.empty()) head += "X-Request-Id: " + request_id_ + "\r\n";
  head += "Content-Type: application/x-ndjson\r\n";
  head += "Cache-Control: no-cache\r\n";
  head += "Connection: close\r\n";
  if (version_ >= 11) head += "Transfer-Encoding: chunked\r\n";
  head += "\r\n";
  QueueStreamBytes(std::move(head));
}

void HttpSession::DeliverLine(uint64_t id, std::string line) {
  if (id != exchange_id_ || stream_done_) return;
  if (mode_ == Mode::kWaiting) StartStream();
  if (mode_ != Mode::kStreaming) return;
  QueueStreamBytes(version_ >= 11 ? Chunk(line) : std::move(line));
}

void HttpSession::DeliverEnd(uint64_t id, Status status) {
  if (id != exchange_id_ || stream_done_) return;
  if (mode_ == Mode::kWaiting) StartStream();  // an empty stream
  if (mode_ != Mode::kStreaming) return;
  cancel_ = nullptr;  // the upstream has finished
  if (!status.ok()) {
    std::string line = "{\"error\":" + ErrorJson(status) + "}\n";
    QueueStreamBytes(version_ >= 11 ? Chunk(line) : std::move(line));
  }
  if (version_ >= 11) QueueStreamBytes("0\r\n\r\n");
  stream_done_ = true;
  DoStreamWrite();
}

void HttpSession::DeliverCancel(uint64_t id, Cancel cancel) {
  if (id != exchange_id_ || mode_ == Mode::kClosed || stream_done_) {
    if (cancel) cancel();
    return;
  }
  cancel_ = std::move(cancel);
  if (mode_ != Mode::kWaiting) return;
  // The stream is open upstream: its status line goes out within kStreamHeadDelay, items or not.
  head_timer_.expires_after(kStreamHeadDelay);
  head_timer_.async_wait([self = shared_from_this(), id](beast::error_code ec) {
    if (ec || id != self->exchange_id_ || self->mode_ != Mode::kWaiting) return;
    self->StartStream();
  });
}

void HttpSession::QueueStreamBytes(std::string bytes) {
  if (mode_ == Mode::kClosed) return;
  out_bytes_ += bytes.size();
  out_.push_back(std::move(bytes));
  if (out_bytes_ > env_.options->max_stream_backlog_bytes) {
    LogWarn("api.http", "stream dropped: client reads too slowly",
            {{"backlog_bytes", std::to_string(out_bytes_)}});
    return Close();
  }
  DoStreamWrite();
}

void HttpSession::DoStreamWrite() {
  if (writing_ || mode_ != Mode::kStreaming) return;
  if (out_.empty()) {
    if (stream_done_) {
      FinishExchange(code_);
      Close();
    }
    return;
  }
  writing_ = true;
  writing_bytes_.clear();
  for (std::string& piece : out_) writing_bytes_ += piece;
  out_.clear();
  lowest().expires_after(env_.options->write_timeout);  // the hang-up read keeps no timeout
  WithStream([this](auto& stream) {
    net::async_write(stream, net::buffer(writing_bytes_),
                     [self = shared_from_this()](beast::error_code ec, size_t n) {
                       self->writing_ = false;
                       self->out_bytes_ -= n;
                       if (ec) return self->Close();
                       self->DoStreamWrite();
                     });
  });
}

void HttpSession::WatchForHangup() {
  WithStream([this](auto& stream) {
    stream.async_read_some(net::buffer(hangup_buf_),
                           [self = shared_from_this()](beast::error_code ec, size_t) {
                             if (self->mode_ != Mode::kStreaming || self->stream_done_) return;
                             if (ec) return self->Close();  // the client went away
                             self->WatchForHangup();        // ignore what a client sends
                           });
  });
}

void HttpSession::FinishExchange(int code) {
  if (recorded_ || !exchange_) return;
  recorded_ = true;
  env_.metrics->Record(method_, exchange_->route(), code,
                       std::chrono::steady_clock::now() - started_);
}

void HttpSession::CloseGracefully() {
  if (mode_ == Mode::kClosed) return;
  if (draining_) return Close();
  if (auto* tls = std::get_if<beast::ssl_stream<beast::tcp_stream>>(&stream_)) {
    // TLS: send close_notify and give the client a moment to answer with its own.
    mode_ = Mode::kLingering;
    lowest().expires_after(std::chrono::seconds(1));
    tls->async_shutdown([self = shared_from_this()](beast::error_code) { self->Close(); });
    return;
  }
  beast::error_code ec;
  lowest().socket().shutdown(tcp::socket::shutdown_send, ec);
  if (ec) return Close();
  mode_ = Mode::kLingering;
  lowest().expires_after(std::chrono::seconds(1));
  Linger(0);
}

void HttpSession::Linger(size_t discarded) {
  lowest().async_read_some(net::buffer(hangup_buf_), [self = shared_from_this(), discarded](
                                                         beast::error_code ec, size_t n) {
    if (ec || discarded + n > (1u << 20) || self->mode_ != Mode::kLingering) return self->Close();
    self->Linger(discarded + n);
  });
}

void HttpSession::Close() {
  if (mode_ == Mode::kClosed) return;
  head_timer_.cancel();
  // A request whose answer will never be written counts as 499, like nginx's "client closed".
  FinishExchange(mode_ == Mode::kWaiting || code_ == 0 ? 499 : code_);
  mode_ = Mode::kClosed;
  if (cancel_) std::exchange(cancel_, nullptr)();
  beast::error_code ec;
  lowest().socket().shutdown(tcp::socket::shutdown_both, ec);
  lowest().close();
  env_.registry->Remove(this);
}

}  // namespace gpupool::api::rest
