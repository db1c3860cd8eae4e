// The gateway's HTTP/2 server side: one client connection (h2 negotiated by ALPN over TLS, or
// h2c with prior knowledge on a plain listener), its streams served concurrently.
//
// Each request is collected whole (headers, body up to `max_body_bytes`, trailers ignored), then
// handed to `handler` on a coroutine of its own; its answer is sent with its trailers. A body over
// the limit is answered 413 (for gRPC, RESOURCE_EXHAUSTED) without calling the handler; a stream
// whose body would take the connection's open bodies past twice the limit is refused
// (REFUSED_STREAM, which clients may retry); a stream the client resets is forgotten, and its
// handler's answer dropped.
//
// Thread safety: on the gateway's io thread only.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <chrono>
#include <cstdint>
#include <functional>

#include "api/gateway/h2_message.h"

namespace gpupool::api::gateway {

struct H2ServerOptions {
  int64_t max_body_bytes = 64 << 20;
  uint32_t max_concurrent_streams = 128;
  std::chrono::milliseconds idle_timeout{120'000};  // no request open
  std::chrono::milliseconds busy_timeout{600'000};  // requests open, nothing read or written
};

using H2Handler = std::function<boost::asio::awaitable<H2Response>(H2Request)>;

// Serves until the client closes or the connection fails. `preread` holds what was read while
// telling HTTP/2 from HTTP/1.1 (the client's connection preface, at least).
boost::asio::awaitable<void> ServeH2(boost::beast::tcp_stream& stream,
                                     const boost::beast::flat_buffer& preread, H2Handler handler,
                                     H2ServerOptions options);
boost::asio::awaitable<void> ServeH2(boost::beast::ssl_stream<boost::beast::tcp_stream>& stream,
                                     const boost::beast::flat_buffer& preread, H2Handler handler,
                                     H2ServerOptions options);

// The client connection preface (RFC 9113 §3.4) a plain connection opens with to speak h2c.
inline constexpr std::string_view kH2Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

}  // namespace gpupool::api::gateway
