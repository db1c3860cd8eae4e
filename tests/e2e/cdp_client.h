// A minimal Chrome DevTools Protocol client for browser tests: starts Debian's headless Chromium
// with its own profile directory and a free debugging port, attaches to its page over a WebSocket
// (Boost.Beast) and sends commands one at a time, skipping the events in between. Nothing is
// downloaded; the browser is the `chromium` package (scripts/install-deps).
//
// Thread safety: one test thread.
#pragma once

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/core/detail/base64.hpp>
#include <boost/beast/websocket.hpp>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>

#include "base/status.h"
#include "tests/api/http_client.h"
#include "tests/support/daemon_process.h"
#include "tests/support/wait_for.h"

namespace gpupool::testing {

class Cdp {
 public:
  // Starts `chromium` (a path) headless with a `width`×`height` window; profile and log in `dir`.
  static Result<std::unique_ptr<Cdp>> Launch(const std::string& chromium, const std::string& dir,
                                             int width, int height) {
    std::unique_ptr<Cdp> cdp(new Cdp());
    const std::string profile = dir + "/chromium-profile";
    std::filesystem::create_directories(profile);
    auto child = ChildProcess::Spawn(
        {chromium, "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
         "--no-first-run", "--no-default-browser-check", "--disable-extensions",
         "--hide-scrollbars", "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0",
         "--user-data-dir=" + profile,
         "--window-size=" + std::to_string(width) + "," + std::to_string(height), "about:blank"},
        dir + "/chromium.log");
    if (!child.ok()) return child.status();
    cdp->browser_ = std::move(child).value();
    // Chromium writes its port to DevToolsActivePort once it listens.
    int port = 0;
    const bool up = WaitFor(
        [&] {
          std::ifstream in(profile + "/DevToolsActivePort");
          return static_cast<bool>(in >> port) && port > 0;
        },
        std::chrono::seconds(90), std::chrono::milliseconds(100));
    if (!up)
      return Status::Unavailable("chromium did not open its debugging port; see " + dir +
                                 "/chromium.log");
    // The page target's WebSocket URL, from /json/list.
    std::string ws_path;
    const bool listed = WaitFor(
        [&] {
          try {
            auto res = api::testing::HttpCall(port, api::testing::http::verb::get, "/json/list");
            // The page's own object: its "type" comes before its "webSocketDebuggerUrl".
            const size_t page = res.body.find("\"type\": \"page\"");
            const size_t at = res.body.find("/devtools/page/", page);
            if (res.status != 200 || page == std::string::npos || at == std::string::npos) {
              return false;
            }
            ws_path = res.body.substr(at, res.body.find('"', at) - at);
            return true;
          } catch (const std::exception&) {
            return false;
          }
        },
        std::chrono::seconds(120), std::chrono::milliseconds(100));
    if (!listed) return Status::Unavailable("chromium lists no page target");
    cdp->ws_ = std::make_unique<Ws>(cdp->ioc_);
    boost::asio::ip::tcp::endpoint ep(boost::asio::ip::make_address("127.0.0.1"),
                                      static_cast<uint16_t>(port));
    cdp->ws_->next_layer().connect(ep);
    cdp->ws_->read_message_max(256 * 1024 * 1024);
    cdp->ws_->handshake("127.0.0.1:" + std::to_string(port), ws_path);
    return cdp;
  }

  ~Cdp() {
    if (ws_) {
      boost::beast::error_code ec;
      ws_->close(boost::beast::websocket::close_code::normal, ec);
    }
    if (browser_) {
      browser_->Signal(SIGTERM);
      if (browser_->Wait(std::chrono::seconds(20)) == -1) browser_->Signal(SIGKILL);
    }
  }

  // Sends one command and returns its `result` object; an `error` reply is an error Status.
  Result<google::protobuf::Struct> Call(const std::string& method, const std::string& params_json) {
    const int id = ++next_id_;
    ws_->write(boost::asio::buffer("{\"id\":" + std::to_string(id) + ",\"method\":\"" + method +
                                   "\",\"params\":" + params_json + "}"));
    for (;;) {
      boost::beast::flat_buffer buf;
      ws_->read(buf);
      google::protobuf::Struct msg;
      const std::string text = boost::beast::buffers_to_string(buf.data());
      if (!google::protobuf::util::JsonStringToMessage(text, &msg).ok()) continue;
      auto it = msg.fields().find("id");
      if (it == msg.fields().end() || static_cast<int>(it->second.number_value()) != id) continue;
      if (auto err = msg.fields().find("error"); err != msg.fields().end()) {
        std::string e;
        (void)google::protobuf::util::MessageToJsonString(err->second, &e);
        return Status::Internal(method + " failed: " + e);
      }
      return msg.fields().at("result").struct_value();
    }
  }

  // Evaluates `expression` in the page (promises awaited) and returns its value as a string:
  // the string itself, a number or boolean printed, "" for undefined/null or an exception.
  std::string Eval(const std::string& expression) {
    google::protobuf::Value expr;
    expr.set_string_value(expression);
    std::string quoted;
    (void)google::protobuf::util::MessageToJsonString(expr, &quoted);
    auto r = Call("Runtime.evaluate",
                  "{\"expression\":" + quoted + ",\"returnByValue\":true,\"awaitPromise\":true}");
    if (!r.ok()) return "";
    const auto& f = r->fields();
    if (f.contains("exceptionDetails")) return "";
    const auto& v = f.at("result").struct_value().fields();
    auto value = v.find("value");
    if (value == v.end()) return "";
    switch (value->second.kind_case()) {
      case google::protobuf::Value::kStringValue:
        return value->second.string_value();
      case google::protobuf::Value::kBoolValue:
        return value->second.bool_value() ? "true" : "false";
      case google::protobuf::Value::kNumberValue: {
        const double d = value->second.number_value();
        return d == static_cast<double>(static_cast<long long>(d))
                   ? std::to_string(static_cast<long long>(d))
                   : std::to_string(d);
      }
      default:
        return "";
    }
  }

  // Polls `expression` until it evaluates to `want` or `timeout` passes; returns the last value.
  std::string WaitEval(const std::string& expression, const std::string& want,
                       std::chrono::seconds timeout = std::chrono::seconds(90)) {
    std::string last;
    WaitFor(
        [&] {
          last = Eval(expression);
          return last == want;
        },
        timeout, std::chrono::milliseconds(200));
    return last;
  }

  // A PNG of the viewport, written to `path`.
  Status Screenshot(const std::string& path) {
    auto r = Call("Page.captureScreenshot", "{\"format\":\"png\"}");
    if (!r.ok()) return r.status();
    const std::string& b64 = r->fields().at("data").string_value();
    std::string png(boost::beast::detail::base64::decoded_size(b64.size()), '\0');
    const auto n = boost::beast::detail::base64::decode(png.data(), b64.data(), b64.size());
    png.resize(n.first);
    std::ofstream(path, std::ios::binary) << png;
    return Status::Ok();
  }

 private:
  using Ws = boost::beast::websocket::stream<boost::asio::ip::tcp::socket>;
  Cdp() = default;
  boost::asio::io_context ioc_;
  std::unique_ptr<ChildProcess> browser_;
  std::unique_ptr<Ws> ws_;
  int next_id_ = 0;
};

}  // namespace gpupool::testing
