#include "api/gateway/h2_server.h"

#include <nghttp2/nghttp2.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <map>
#include <memory>

#include "api/gateway/h2_pump.h"

namespace gpupool::api::gateway {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;

struct ServerStream {
  H2Request request;
  int64_t counted = 0;  // body bytes counted against the connection's total
  bool too_large = false;
  bool dispatched = false;
  H2Response answer;
  size_t sent = 0;  // of answer.body
};

// One client connection: the nghttp2 server session, its open streams and the pump. Held by
// shared_ptr so a handler still running when the client leaves finds it and drops its answer.
class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(const net::any_io_executor& ex, H2Handler handler, H2ServerOptions options)
      : ex_(ex), pump_(ex), handler_(std::move(handler)), options_(options) {
    nghttp2_session_callbacks* cb = nullptr;
    nghttp2_session_callbacks_new(&cb);
    nghttp2_session_callbacks_set_on_begin_headers_callback(cb, OnBeginHeaders);
    nghttp2_session_callbacks_set_on_header_callback(cb, OnHeader);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, OnData);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cb, OnFrame);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, OnStreamClose);
    nghttp2_session_server_new(&session_, cb, this);
    nghttp2_session_callbacks_del(cb);
    const nghttp2_settings_entry settings[] = {
        {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, options_.max_concurrent_streams},
        {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 1 << 20},
    };
    nghttp2_submit_settings(session_, NGHTTP2_FLAG_NONE, settings, std::size(settings));
    // The connection's window as large as a stream's, so one large body does not stall the rest.
    nghttp2_session_set_local_window_size(session_, NGHTTP2_FLAG_NONE, 0, 16 << 20);
  }
  ~Connection() { nghttp2_session_del(session_); }
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  template <typename Stream>
  net::awaitable<void> Run(Stream& stream, const beast::flat_buffer& preread) {
    const auto data = preread.data();
    const std::string_view first(static_cast<const char*>(data.data()), data.size());
    std::function<bool()> busy = [this] { return !streams_.empty(); };
    co_await pump_.Run(session_, stream, first, std::move(busy), options_.idle_timeout,
                       options_.busy_timeout);
    gone_ = true;
    streams_.clear();
  }

 private:
  static Connection& Self(void* user) { return *static_cast<Connection*>(user); }

  ServerStream* Find(int32_t id) {
    auto it = streams_.find(id);
    return it == streams_.end() ? nullptr : it->second.get();
  }

  static int OnBeginHeaders(nghttp2_session*, const nghttp2_frame* frame, void* user) {
    if (frame->hd.type == NGHTTP2_HEADERS && frame->headers.cat == NGHTTP2_HCAT_REQUEST) {
      Self(user).streams_[frame->hd.stream_id] = std::make_unique<ServerStream>();
    }
    return 0;
  }

  static int OnHeader(nghttp2_session*, const nghttp2_frame* frame, const uint8_t* name,
                      size_t namelen, const uint8_t* value, size_t valuelen, uint8_t, void* user) {
    if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST) {
      return 0;  // request trailers: not carried
    }
    ServerStream* s = Self(user).Find(frame->hd.stream_id);
    if (s == nullptr) return 0;
    const std::string_view n(reinterpret_cast<const char*>(name), namelen);
    std::string v(reinterpret_cast<const char*>(value), valuelen);
    H2Request& r = s->request;
    if (n == ":method") {
      r.method = std::move(v);
    } else if (n == ":scheme") {
      r.scheme = std::move(v);
    } else if (n == ":authority") {
      r.authority = std::move(v);
    } else if (n == ":path") {
      r.path = std::move(v);
    } else if (!n.starts_with(':')) {
      r.headers.emplace_back(std::string(n), std::move(v));
    }
    return 0;
  }

  static int OnData(nghttp2_session*, uint8_t, int32_t id, const uint8_t* data, size_t len,
                    void* user) {
    Connection& c = Self(user);
    ServerStream* s = c.Find(id);
    if (s == nullptr || s->too_large) return 0;
    if (static_cast<int64_t>(s->request.body.size() + len) > c.options_.max_body_bytes) {
      s->too_large = true;
      s->request.body.clear();
      s->request.body.shrink_to_fit();
      c.buffered_ -= s->counted;
      s->counted = 0;
      return 0;
    }
    // All open streams' bodies together stay under twice one body's limit: 128 streams of 64 MiB
    // each would otherwise be 8 GiB on one connection. A stream over it is refused
    // (REFUSED_STREAM: not processed, so gRPC clients retry it).
    if (c.buffered_ + static_cast<int64_t>(len) > 2 * c.options_.max_body_bytes) {
      nghttp2_submit_rst_stream(c.session_, NGHTTP2_FLAG_NONE, id, NGHTTP2_REFUSED_STREAM);
      c.pump_.Kick();
      return 0;
    }
    s->request.body.append(reinterpret_cast<const char*>(data), len);
    s->counted += static_cast<int64_t>(len);
    c.buffered_ += static_cast<int64_t>(len);
    return 0;
  }

  static int OnFrame(nghttp2_session*, const nghttp2_frame* frame, void* user) {
    const bool ends = (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0;
    if (ends && (frame->hd.type == NGHTTP2_HEADERS || frame->hd.type == NGHTTP2_DATA)) {
      Self(user).Dispatch(frame->hd.stream_id);
    }
    return 0;
  }

  static int OnStreamClose(nghttp2_session*, int32_t id, uint32_t, void* user) {
    Connection& c = Self(user);
    if (ServerStream* s = c.Find(id)) c.buffered_ -= s->counted;
    c.streams_.erase(id);
    return 0;
  }

  static ssize_t ReadBody(nghttp2_session* session, int32_t id, uint8_t* buf, size_t length,
                          uint32_t* flags, nghttp2_data_source* source, void*) {
    auto* s = static_cast<ServerStream*>(source->ptr);
    const std::string& body = s->answer.body;
    const size_t n = std::min(length, body.size() - s->sent);
    std::copy_n(body.data() + s->sent, n, buf);
    s->sent += n;
    if (s->sent == body.size()) {
      *flags |= NGHTTP2_DATA_FLAG_EOF;
      if (!s->answer.trailers.empty()) {
        NvList nv;
        for (const auto& [k, v] : s->answer.trailers) nv.Add(k, v);
        if (nghttp2_submit_trailer(session, id, nv.data(), nv.size()) == 0) {
          *flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
        }
      }
    }
    return static_cast<ssize_t>(n);
  }

  void Dispatch(int32_t id) {
    ServerStream* s = Find(id);
    if (s == nullptr || s->dispatched) return;
    s->dispatched = true;
    if (s->too_large) {
      Answer(id, LocalAnswer(IsGrpc(s->request.headers), 413,
                             "the request body is larger than the gateway's limit of " +
                                 std::to_string(options_.max_body_bytes) + " bytes",
                             0));
      return;
    }
    net::co_spawn(ex_, Handle(shared_from_this(), id, std::move(s->request)), net::detached);
  }

  static net::awaitable<void> Handle(std::shared_ptr<Connection> self, int32_t id,
                                     H2Request request) {
    H2Response answer = co_await self->handler_(std::move(request));
    if (self->gone_) co_return;
    self->Answer(id, std::move(answer));
  }

  void Answer(int32_t id, H2Response answer) {
    ServerStream* s = Find(id);
    if (s == nullptr) return;  // reset by the client meanwhile
    s->answer = std::move(answer);
    const std::string status = std::to_string(s->answer.status);
    NvList nv;
    nv.Add(":status", status);
    for (const auto& [k, v] : s->answer.headers) nv.Add(k, v);
    nghttp2_data_provider body{};
    body.source.ptr = s;
    body.read_callback = ReadBody;
    const bool empty = s->answer.body.empty() && s->answer.trailers.empty();
    if (nghttp2_submit_response(session_, id, nv.data(), nv.size(), empty ? nullptr : &body) != 0) {
      nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, id, NGHTTP2_INTERNAL_ERROR);
    }
    pump_.Kick();
  }

  net::any_io_executor ex_;
  nghttp2_session* session_ = nullptr;
  H2Pump pump_;
  H2Handler handler_;
  const H2ServerOptions options_;
  std::map<int32_t, std::unique_ptr<ServerStream>> streams_;
  int64_t buffered_ = 0;  // request bodies of the open streams, as counted
  bool gone_ = false;
};

template <typename Stream>
net::awaitable<void> Serve(Stream& stream, const beast::flat_buffer& preread, H2Handler handler,
                           H2ServerOptions options) {
  auto c = std::make_shared<Connection>(stream.get_executor(), std::move(handler), options);
  co_await c->Run(stream, preread);
}

}  // namespace

net::awaitable<void> ServeH2(beast::tcp_stream& stream, const beast::flat_buffer& preread,
                             H2Handler handler, H2ServerOptions options) {
  return Serve(stream, preread, std::move(handler), options);
}

net::awaitable<void> ServeH2(beast::ssl_stream<beast::tcp_stream>& stream,
                             const beast::flat_buffer& preread, H2Handler handler,
                             H2ServerOptions options) {
  return Serve(stream, preread, std::move(handler), options);
}

}  // namespace gpupool::api::gateway
