// Drives one nghttp2 session over a byte stream (plain TCP or TLS) on the gateway's io thread.
//
// nghttp2 is a state machine without I/O: bytes read are fed to nghttp2_session_mem_recv (which
// calls the owner's callbacks) and what the session wants to send is taken with
// nghttp2_session_mem_send. The pump runs a reader (this coroutine) and a writer (spawned beside
// it, waiting on a timer its owner cancels — Kick() — whenever it submitted something). It ends
// when the peer closes, a deadline passes, either side fails, or the session has nothing more to
// read or write (after a GOAWAY), and returns why, "" for an orderly end.
//
// Thread safety: all on one io_context thread, as every nghttp2 call must be.
#pragma once

#include <nghttp2/nghttp2.h>

#include <array>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/stream_traits.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <chrono>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace gpupool::api::gateway {

// A field list as nghttp2's submit calls take it. They copy the fields, so the strings need only
// outlive the call.
class NvList {
 public:
  void Add(std::string_view name, std::string_view value) {
    nv_.push_back({const_cast<uint8_t*>(reinterpret_cast<const uint8_t*>(name.data())),
                   const_cast<uint8_t*>(reinterpret_cast<const uint8_t*>(value.data())),
                   name.size(), value.size(), NGHTTP2_NV_FLAG_NONE});
  }
  const nghttp2_nv* data() const { return nv_.data(); }
  size_t size() const { return nv_.size(); }

 private:
  std::vector<nghttp2_nv> nv_;
};

class H2Pump {
 public:
  explicit H2Pump(const boost::asio::any_io_executor& ex)
      : kick_(ex, boost::asio::steady_timer::time_point::max()),
        writer_done_(ex, boost::asio::steady_timer::time_point::max()) {}

  // Something was submitted to the session: the writer sends it.
  void Kick() { kick_.cancel(); }
  bool ended() const { return closing_; }

  // `busy()` says whether requests are open; the connection's inactivity deadline is then
  // `busy_deadline`, else `idle_deadline`. `preread` is what was read before the pump started.
  template <typename Stream>
  boost::asio::awaitable<std::string> Run(nghttp2_session* session, Stream& stream,
                                          std::string_view preread, std::function<bool()> busy,
                                          std::chrono::milliseconds idle_deadline,
                                          std::chrono::milliseconds busy_deadline) {
    namespace net = boost::asio;
    session_ = session;
    busy_ = std::move(busy);
    idle_deadline_ = idle_deadline;
    busy_deadline_ = busy_deadline;
    std::string why;
    if (!preread.empty()) {
      const ssize_t rv = nghttp2_session_mem_recv(
          session_, reinterpret_cast<const uint8_t*>(preread.data()), preread.size());
      if (rv < 0) why = std::string("HTTP/2: ") + nghttp2_strerror(static_cast<int>(rv));
    }
    if (why.empty()) {
      net::co_spawn(kick_.get_executor(), Write(stream), [this](std::exception_ptr) {
        writer_finished_ = true;
        writer_done_.cancel();
      });
      std::array<uint8_t, 16384> buf{};
      while (!closing_) {
        Refresh(stream);
        boost::system::error_code ec;
        const size_t n = co_await stream.async_read_some(
            net::buffer(buf), net::redirect_error(net::use_awaitable, ec));
        if (ec) {
          if (!closing_ && ec != net::error::eof) why = "read: " + ec.message();
          break;
        }
        const ssize_t rv = nghttp2_session_mem_recv(session_, buf.data(), n);
        if (rv < 0) {
          why = std::string("HTTP/2: ") + nghttp2_strerror(static_cast<int>(rv));
          break;
        }
        Kick();
      }
      closing_ = true;
      Kick();
      if (!writer_finished_) {
        boost::system::error_code ec;
        co_await writer_done_.async_wait(net::redirect_error(net::use_awaitable, ec));
      }
    }
    closing_ = true;
    if (why.empty()) why = write_error_;
    co_return why;
  }

 private:
  template <typename Stream>
  void Refresh(Stream& stream) {
    boost::beast::get_lowest_layer(stream).expires_after(busy_ && busy_() ? busy_deadline_
                                                                          : idle_deadline_);
  }

  template <typename Stream>
  boost::asio::awaitable<void> Write(Stream& stream) {
    namespace net = boost::asio;
    std::string out;
    for (;;) {
      out.clear();
      for (;;) {  // what the session has to send, up to 64 KiB per write
        const uint8_t* data = nullptr;
        const ssize_t n = nghttp2_session_mem_send(session_, &data);
        if (n < 0) {
          write_error_ = std::string("HTTP/2: ") + nghttp2_strerror(static_cast<int>(n));
          closing_ = true;
          break;
        }
        if (n == 0) break;
        out.append(reinterpret_cast<const char*>(data), static_cast<size_t>(n));
        if (out.size() >= 65536) break;
      }
      if (!out.empty()) {
        Refresh(stream);
        boost::system::error_code ec;
        co_await net::async_write(stream, net::buffer(out),
                                  net::redirect_error(net::use_awaitable, ec));
        if (ec) {
          if (!closing_) write_error_ = "write: " + ec.message();
          closing_ = true;
          break;
        }
        continue;
      }
      if (closing_) break;
      if (nghttp2_session_want_read(session_) == 0 && nghttp2_session_want_write(session_) == 0) {
        closing_ = true;  // both sides are done (GOAWAY sent or received, streams closed)
        break;
      }
      kick_.expires_at(net::steady_timer::time_point::max());
      boost::system::error_code ec;
      co_await kick_.async_wait(net::redirect_error(net::use_awaitable, ec));
    }
    // The reader may be waiting for bytes that will never matter now.
    boost::system::error_code ignored;
    boost::beast::get_lowest_layer(stream).socket().shutdown(
        boost::asio::ip::tcp::socket::shutdown_both, ignored);
  }

  nghttp2_session* session_ = nullptr;
  boost::asio::steady_timer kick_;
  boost::asio::steady_timer writer_done_;
  bool closing_ = false;
  bool writer_finished_ = false;
  std::string write_error_;
  std::function<bool()> busy_;
  std::chrono::milliseconds idle_deadline_{120'000};
  std::chrono::milliseconds busy_deadline_{600'000};
};

}  // namespace gpupool::api::gateway
