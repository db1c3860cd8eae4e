// One HTTP/2 connection from the gateway to a replica (h2c: replicas listen on plain TCP inside
// the node), carrying many requests at once as gRPC clients do. Opened on first use, it serves
// until the replica closes it, sends GOAWAY, or fails; then the gateway opens another.
//
// A request's answer is returned whole, trailers kept. `sent` is false when the replica cannot
// have acted on the request — the connection never opened, or the replica refused the stream
// (REFUSED_STREAM, or above a GOAWAY's last stream) — so the gateway may send it elsewhere.
//
// Thread safety: on the gateway's io thread only.
#pragma once

#include <nghttp2/nghttp2.h>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "api/gateway/h2_message.h"
#include "api/gateway/h2_pump.h"

namespace gpupool::api::gateway {

struct H2Result {
  std::optional<H2Response> response;
  bool sent = false;
  std::string error;
};

class H2Upstream : public std::enable_shared_from_this<H2Upstream> {
 public:
  // Opens `stream` (a connected socket's stream).
  using Connector =
      std::function<boost::asio::awaitable<boost::system::error_code>(boost::beast::tcp_stream&)>;

  H2Upstream(const boost::asio::any_io_executor& ex, std::string authority, int64_t max_body_bytes);
  ~H2Upstream();
  H2Upstream(const H2Upstream&) = delete;
  H2Upstream& operator=(const H2Upstream&) = delete;

  // Connects (with `connect`) and serves on the executor until the connection ends.
  void Start(Connector connect);
  // Still able to take new requests: connecting or open, no GOAWAY received.
  bool usable() const;
  // Closes the connection; requests on it fail.
  void Close();

  // Sends `request` (its path the replica's own) and waits for the whole answer, at most
  // `timeout` after it was sent; then the stream is cancelled.
  boost::asio::awaitable<H2Result> Send(const H2Request& request,
                                        std::chrono::milliseconds timeout);

 private:
  struct Stream;
  static H2Upstream& Self(void* user) { return *static_cast<H2Upstream*>(user); }
  static int OnHeader(nghttp2_session*, const nghttp2_frame*, const uint8_t*, size_t,
                      const uint8_t*, size_t, uint8_t, void*);
  static int OnData(nghttp2_session*, uint8_t, int32_t, const uint8_t*, size_t, void*);
  static int OnFrame(nghttp2_session*, const nghttp2_frame*, void*);
  static int OnStreamClose(nghttp2_session*, int32_t, uint32_t, void*);
  static ssize_t ReadBody(nghttp2_session*, int32_t, uint8_t*, size_t, uint32_t*,
                          nghttp2_data_source*, void*);
  static boost::asio::awaitable<void> Run(std::shared_ptr<H2Upstream> self, Connector connect);
  void FailAll(const std::string& why);

  enum class State { kConnecting, kOpen, kClosed };
  boost::asio::any_io_executor ex_;
  const std::string authority_;
  const int64_t max_body_bytes_;
  nghttp2_session* session_ = nullptr;
  H2Pump pump_;
  State state_ = State::kConnecting;
  bool goaway_ = false;
  std::string closed_why_;
  boost::asio::steady_timer opened_;            // cancelled when the connection opens or fails
  boost::beast::tcp_stream* socket_ = nullptr;  // while Run holds it
  std::map<int32_t, std::shared_ptr<Stream>> streams_;
};

}  // namespace gpupool::api::gateway
