#include "api/gateway/h2_upstream.h"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace gpupool::api::gateway {

namespace net = boost::asio;
namespace beast = boost::beast;

struct H2Upstream::Stream {
  explicit Stream(const net::any_io_executor& ex)
      : wake(ex, net::steady_timer::time_point::max()) {}
  std::string body;  // the request's, as it is sent
  size_t body_sent = 0;
  H2Response answer;
  bool final_headers = false;  // the answer's headers arrived; later fields are trailers
  bool too_large = false;
  bool done = false;
  uint32_t error_code = NGHTTP2_NO_ERROR;
  std::string error;  // the connection's, when it ended under the stream
  net::steady_timer wake;
};

H2Upstream::H2Upstream(const net::any_io_executor& ex, std::string authority,
                       int64_t max_body_bytes)
    : ex_(ex),
      authority_(std::move(authority)),
      max_body_bytes_(max_body_bytes),
      pump_(ex),
      opened_(ex, net::steady_timer::time_point::max()) {
  nghttp2_session_callbacks* cb = nullptr;
  nghttp2_session_callbacks_new(&cb);
  nghttp2_session_callbacks_set_on_header_callback(cb, OnHeader);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, OnData);
  nghttp2_session_callbacks_set_on_frame_recv_callback(cb, OnFrame);
  nghttp2_session_callbacks_set_on_stream_close_callback(cb, OnStreamClose);
  nghttp2_session_client_new(&session_, cb, this);
  nghttp2_session_callbacks_del(cb);
  const nghttp2_settings_entry settings[] = {
      {NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
      {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 1 << 20},
  };
  nghttp2_submit_settings(session_, NGHTTP2_FLAG_NONE, settings, std::size(settings));
  nghttp2_session_set_local_window_size(session_, NGHTTP2_FLAG_NONE, 0, 16 << 20);
}

H2Upstream::~H2Upstream() { nghttp2_session_del(session_); }

void H2Upstream::Start(Connector connect) {
  net::co_spawn(ex_, Run(shared_from_this(), std::move(connect)), net::detached);
}

bool H2Upstream::usable() const { return state_ != State::kClosed && !goaway_ && !pump_.ended(); }

void H2Upstream::Close() {
  goaway_ = true;
  if (socket_ != nullptr) {
    boost::system::error_code ignored;
    socket_->socket().shutdown(net::ip::tcp::socket::shutdown_both, ignored);
  }
}

net::awaitable<void> H2Upstream::Run(std::shared_ptr<H2Upstream> self, Connector connect) {
  beast::tcp_stream socket(self->ex_);
  const boost::system::error_code ec = co_await connect(socket);
  if (ec || self->goaway_) {
    self->state_ = State::kClosed;
    self->closed_why_ = ec ? "connect: " + ec.message() : "closed";
    self->opened_.cancel();
    co_return;
  }
  boost::system::error_code ignored;
  socket.socket().set_option(net::ip::tcp::no_delay(true), ignored);
  self->state_ = State::kOpen;
  self->socket_ = &socket;
  self->opened_.cancel();
  // Idle, the replica's own timeouts close it; waiting on an answer, each request has its own.
  std::function<bool()> busy = [] { return true; };
  const std::string why =
      co_await self->pump_.Run(self->session_, socket, std::string_view(), std::move(busy),
                               std::chrono::hours(1), std::chrono::hours(1));
  self->socket_ = nullptr;
  self->state_ = State::kClosed;
  self->FailAll(why.empty() ? "the replica closed the HTTP/2 connection" : why);
}

void H2Upstream::FailAll(const std::string& why) {
  for (auto& [id, s] : streams_) {
    if (s->done) continue;
    s->done = true;
    s->error = why;
    s->wake.cancel();
  }
  streams_.clear();
}

int H2Upstream::OnHeader(nghttp2_session*, const nghttp2_frame* frame, const uint8_t* name,
                         size_t namelen, const uint8_t* value, size_t valuelen, uint8_t,
                         void* user) {
  if (frame->hd.type != NGHTTP2_HEADERS) return 0;
  auto it = Self(user).streams_.find(frame->hd.stream_id);
  if (it == Self(user).streams_.end()) return 0;
  Stream& s = *it->second;
  const std::string_view n(reinterpret_cast<const char*>(name), namelen);
  std::string v(reinterpret_cast<const char*>(value), valuelen);
  if (n == ":status") {
    s.answer.status = std::atoi(v.c_str());
    s.answer.headers.clear();  // a 1xx's fields are not the answer's
  } else if (!n.starts_with(':')) {
    (s.final_headers ? s.answer.trailers : s.answer.headers)
        .emplace_back(std::string(n), std::move(v));
  }
  return 0;
}

int H2Upstream::OnFrame(nghttp2_session*, const nghttp2_frame* frame, void* user) {
  H2Upstream& u = Self(user);
  if (frame->hd.type == NGHTTP2_GOAWAY) {
    u.goaway_ = true;  // streams above its last one are closed REFUSED_STREAM by nghttp2
    return 0;
  }
  if (frame->hd.type == NGHTTP2_HEADERS) {
    auto it = u.streams_.find(frame->hd.stream_id);
    if (it != u.streams_.end() && it->second->answer.status >= 200) {
      it->second->final_headers = true;
    }
  }
  return 0;
}

int H2Upstream::OnData(nghttp2_session*, uint8_t, int32_t id, const uint8_t* data, size_t len,
                       void* user) {
  H2Upstream& u = Self(user);
  auto it = u.streams_.find(id);
  if (it == u.streams_.end()) return 0;
  Stream& s = *it->second;
  if (s.too_large) return 0;
  if (static_cast<int64_t>(s.answer.body.size() + len) > u.max_body_bytes_) {
    s.too_large = true;
    nghttp2_submit_rst_stream(u.session_, NGHTTP2_FLAG_NONE, id, NGHTTP2_CANCEL);
    u.pump_.Kick();
    return 0;
  }
  s.answer.body.append(reinterpret_cast<const char*>(data), len);
  return 0;
}

int H2Upstream::OnStreamClose(nghttp2_session*, int32_t id, uint32_t error_code, void* user) {
  H2Upstream& u = Self(user);
  auto it = u.streams_.find(id);
  if (it == u.streams_.end()) return 0;
  std::shared_ptr<Stream> s = it->second;
  u.streams_.erase(it);
  s->done = true;
  s->error_code = error_code;
  s->wake.cancel();
  return 0;
}

ssize_t H2Upstream::ReadBody(nghttp2_session*, int32_t, uint8_t* buf, size_t length,
                             uint32_t* flags, nghttp2_data_source* source, void*) {
  auto* s = static_cast<Stream*>(source->ptr);
  const size_t n = std::min(length, s->body.size() - s->body_sent);
  std::copy_n(s->body.data() + s->body_sent, n, buf);
  s->body_sent += n;
  if (s->body_sent == s->body.size()) *flags |= NGHTTP2_DATA_FLAG_EOF;
  return static_cast<ssize_t>(n);
}

net::awaitable<H2Result> H2Upstream::Send(const H2Request& request,
                                          std::chrono::milliseconds timeout) {
  std::shared_ptr<H2Upstream> keep = shared_from_this();
  H2Result out;
  boost::system::error_code ec;
  if (state_ == State::kConnecting) {
    co_await opened_.async_wait(net::redirect_error(net::use_awaitable, ec));
  }
  if (state_ != State::kOpen || goaway_) {
    out.error = closed_why_.empty() ? "the HTTP/2 connection closed" : closed_why_;
    co_return out;
  }
  auto s = std::make_shared<Stream>(ex_);
  s->body = request.body;
  NvList nv;
  nv.Add(":method", request.method);
  nv.Add(":scheme", "http");
  nv.Add(":authority", request.authority.empty() ? authority_ : request.authority);
  nv.Add(":path", request.path);
  for (const auto& [k, v] : request.headers) {
    if (!IsConnectionSpecific(k, v)) nv.Add(k, v);
  }
  nghttp2_data_provider body{};
  body.source.ptr = s.get();
  body.read_callback = ReadBody;
  const int32_t id = nghttp2_submit_request(session_, nullptr, nv.data(), nv.size(),
                                            s->body.empty() ? nullptr : &body, nullptr);
  if (id < 0) {
    out.error = std::string("HTTP/2: ") + nghttp2_strerror(id);
    co_return out;
  }
  streams_[id] = s;
  pump_.Kick();
  s->wake.expires_after(timeout);
  co_await s->wake.async_wait(net::redirect_error(net::use_awaitable, ec));
  if (!s->done) {  // timed out: the replica is told to stop; the stream is dropped once closed
    nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, id, NGHTTP2_CANCEL);
    pump_.Kick();
    out.sent = true;
    out.error = "answer: no answer within " + std::to_string(timeout.count()) + " ms";
    co_return out;
  }
  if (s->error_code == NGHTTP2_REFUSED_STREAM) {
    out.error = "the replica refused the stream";
    co_return out;
  }
  out.sent = true;
  if (!s->error.empty()) {
    out.error = "answer: " + s->error;
  } else if (s->too_large) {
    out.error = "answer: larger than " + std::to_string(max_body_bytes_) + " bytes";
  } else if (s->error_code != NGHTTP2_NO_ERROR) {
    out.error = std::string("answer: stream reset (") + nghttp2_http2_strerror(s->error_code) + ")";
  } else if (s->answer.status < 200) {
    out.error = "answer: no status";
  } else {
    out.response = std::move(s->answer);
  }
  co_return out;
}

}  // namespace gpupool::api::gateway
