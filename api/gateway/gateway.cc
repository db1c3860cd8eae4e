#include "api/gateway/gateway.h"

#include <openssl/ssl.h>
#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <sys/socket.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <map>
#include <optional>
#include <thread>
#include <utility>
#include <variant>
#include <vector>

#include "api/auth.h"
#include "api/gateway/h2_http1.h"
#include "api/gateway/h2_message.h"
#include "api/gateway/h2_server.h"
#include "api/gateway/h2_upstream.h"
#include "api/gateway/route.h"
#include "api/rate_limiter.h"
#include "base/log.h"
#include "scheduler/tenancy.h"

namespace gpupool::api::gateway {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;
using net::awaitable;
using Request = http::request<http::string_body>;
using Response = http::response<http::string_body>;
using Clock = std::chrono::steady_clock;

net::redirect_error_t<std::decay_t<decltype(net::use_awaitable)>> Into(beast::error_code& ec) {
  return net::redirect_error(net::use_awaitable, ec);
}

Response Reply(http::status status, const Request& req, std::string text, int retry_after_s = 0) {
  Response r{status, req.version()};
  r.set(http::field::content_type, "text/plain; charset=utf-8");
  if (retry_after_s > 0) r.set(http::field::retry_after, std::to_string(retry_after_s));
  r.body() = std::move(text) + "\n";
  r.keep_alive(req.keep_alive());
  r.prepare_payload();
  return r;
}

// The server's side of ALPN (RFC 7301): h2 first, then http/1.1; a client that offers neither
// gets no protocol and speaks HTTP/1.1.
int SelectAlpn(SSL*, const unsigned char** out, unsigned char* outlen, const unsigned char* in,
               unsigned inlen, void*) {
  static constexpr unsigned char kOurs[] = "\x02h2\x08http/1.1";
  unsigned char* chosen = nullptr;
  if (SSL_select_next_proto(&chosen, outlen, kOurs, sizeof kOurs - 1, in, inlen) !=
      OPENSSL_NPN_NEGOTIATED) {
    return SSL_TLSEXT_ERR_NOACK;
  }
  *out = chosen;
  return SSL_TLSEXT_ERR_OK;
}

// A connection to a replica kept open after it answered, for the next request to reuse: a new
// TCP handshake (and the replica's accept) per request is most of what a proxy adds.
struct IdleConnection {
  std::unique_ptr<beast::tcp_stream> stream;
  Clock::time_point since;
};

// True while the replica has neither closed an idle connection nor sent on it unasked (either
// way it cannot carry another request). A peek that does not wait.
bool StillOpen(beast::tcp_stream& stream) {
  char byte = 0;
  const ssize_t n = ::recv(stream.socket().native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

struct BackendState {
  Backend at;
  bool ready = false;
  bool probing = false;
  bool present = true;  // still listed by the directory
  int64_t outstanding = 0;
  std::vector<IdleConnection> idle;  // oldest first
  std::shared_ptr<H2Upstream> h2;    // gRPC calls' connection, once one was made

  // Drops its kept connections (it failed, or left the directory).
  void Forget() {
    idle.clear();
    if (h2) h2->Close();
    h2.reset();
  }
};

struct ServiceState {
  RoutedService info;
  std::vector<std::shared_ptr<BackendState>> backends;
  std::vector<std::shared_ptr<net::steady_timer>> waiters;  // held requests
  int64_t in_flight = 0;
  int64_t queued = 0;
  int64_t arrivals = 0;  // since the last report
  int64_t served = 0;
  double service_s = 0;  // summed over `served`
  uint64_t turn = 0;
  bool present = true;
  prometheus::Gauge* in_flight_gauge = nullptr;
  prometheus::Gauge* queued_gauge = nullptr;
  prometheus::Histogram* cold_start = nullptr;

  bool AnyReady() const {
    for (const auto& b : backends) {
      if (b->ready) return true;
    }
    return false;
  }
  std::string Label() const { return info.tenant + "/" + info.name; }
};

// An answer the gateway gives itself instead of a replica's: the HTTP status, why, and when to
// come back (seconds, 0: no Retry-After).
struct Refusal {
  unsigned status = 0;
  std::string text;
  int retry_after_s = 0;
};

struct Admission {
  std::shared_ptr<ServiceState> service;  // null when refused before one was found
  std::string rest;                       // the target the replica receives
  std::optional<Refusal> refusal;
};

// A replica's answer, or how reaching it failed.
struct Forwarded {
  std::optional<Response> response;
  bool sent = false;  // the request left (a failure after it may have had effects)
  std::string error;
};

// One try on one connection, and what kind of connection it was.
struct Attempt {
  Forwarded forwarded;
  bool reused = false;      // a kept connection, not a new one
  bool got_answer = false;  // some of the replica's answer arrived
};

// Idle connections are used newest first and closed after this long unused: well under the
// keep-alive timeouts servers use (5 s and more), so a replica seldom closes one as it is reused.
constexpr std::chrono::milliseconds kIdleConnectionTimeout{1'000};
constexpr size_t kMaxIdlePerReplica = 64;

// Callers being authenticated at once, beyond which the gateway answers 503 (Retry-After: 1):
// a flood of unknown keys, each a database read, is bounded instead of queueing without end.
constexpr int kAuthThreads = 2;
constexpr int kMaxPendingAuth = 256;

}  // namespace

struct Gateway::Impl {
  Impl(Directory* d, GatewayOptions o) : dir(d), options(std::move(o)) {}

  Directory* const dir;
  const GatewayOptions options;
  std::unique_ptr<net::io_context> io = std::make_unique<net::io_context>(1);
  std::unique_ptr<tcp::acceptor> acceptor;
  std::optional<net::ssl::context> tls;  // unset: plain HTTP
  std::thread thread;
  // Authentication runs here, never on `io`: an API key the cache does not hold is read from
  // PostgreSQL, and the one io thread carries every service's requests.
  std::unique_ptr<net::thread_pool> auth_pool;
  int pending_auth = 0;  // on the io thread only
  int port = 0;
  std::map<int64_t, std::shared_ptr<ServiceState>> services;
  std::vector<std::string> names;  // "<tenant>/<name>", as MatchRoute takes them
  std::vector<int64_t> name_ids;
  Clock::time_point last_report = Clock::now();

  prometheus::Family<prometheus::Gauge>* in_flight_family = nullptr;
  prometheus::Family<prometheus::Gauge>* queued_family = nullptr;
  prometheus::Family<prometheus::Counter>* requests_family = nullptr;
  prometheus::Family<prometheus::Histogram>* cold_family = nullptr;

  void Metrics() {
    if (!options.metrics) return;
    in_flight_family = &prometheus::BuildGauge()
                            .Name("gpupool_gateway_requests_in_flight")
                            .Help("Requests a service's replicas are serving now")
                            .Register(*options.metrics);
    queued_family = &prometheus::BuildGauge()
                         .Name("gpupool_gateway_requests_queued")
                         .Help("Requests held for a ready replica of a service")
                         .Register(*options.metrics);
    requests_family = &prometheus::BuildCounter()
                           .Name("gpupool_gateway_requests_total")
                           .Help("Requests the gateway answered, by service and HTTP status")
                           .Register(*options.metrics);
    cold_family = &prometheus::BuildHistogram()
                       .Name("gpupool_gateway_cold_start_seconds")
                       .Help("How long requests that found no ready replica waited for one")
                       .Register(*options.metrics);
  }

  void Count(const std::string& label, unsigned code) {
    if (requests_family != nullptr) {
      requests_family->Add({{"service", label}, {"code", std::to_string(code)}}).Increment();
    }
  }

  // ---- The directory's view, read every refresh_interval ----

  void Refresh() {
    std::vector<RoutedService> listed = dir->Services();
    for (auto& [id, s] : services) s->present = false;
    names.clear();
    name_ids.clear();
    for (RoutedService& r : listed) {
      std::shared_ptr<ServiceState>& s = services[r.id];
      if (!s) {
        s = std::make_shared<ServiceState>();
        if (in_flight_family != nullptr) {
          const std::string label = r.tenant + "/" + r.name;
          s->in_flight_gauge = &in_flight_family->Add({{"service", label}});
          s->queued_gauge = &queued_family->Add({{"service", label}});
          s->cold_start = &cold_family->Add(
              {{"service", label}},
              prometheus::Histogram::BucketBoundaries{0.1, 0.5, 1, 2, 5, 10, 30, 60, 120});
        }
      }
      s->present = true;
      names.push_back(r.tenant + "/" + r.name);
      name_ids.push_back(r.id);
      // Backends: keep the known ones (their probe state), add new ones, drop the gone.
      for (auto& b : s->backends) b->present = false;
      for (const Backend& b : r.running) {
        auto it = std::find_if(s->backends.begin(), s->backends.end(),
                               [&](const auto& k) { return k->at == b; });
        if (it != s->backends.end()) {
          (*it)->present = true;
          continue;
        }
        auto nb = std::make_shared<BackendState>();
        nb->at = b;
        s->backends.push_back(nb);
      }
      std::erase_if(s->backends, [](const auto& b) {
        if (!b->present) b->Forget();
        return !b->present;
      });
      s->info = std::move(r);
      for (auto& b : s->backends) {
        if (!b->ready && !b->probing) {
          b->probing = true;
          net::co_spawn(*io, Probe(s, b), net::detached);
        }
      }
    }
    for (auto it = services.begin(); it != services.end();) {
      if (it->second->present) {
        ++it;
        continue;
      }
      Wake(*it->second);  // its held requests learn it is gone
      for (auto& b : it->second->backends) b->Forget();
      if (in_flight_family != nullptr) {
        in_flight_family->Remove(it->second->in_flight_gauge);
        queued_family->Remove(it->second->queued_gauge);
        cold_family->Remove(it->second->cold_start);
      }
      it = services.erase(it);
    }
  }

  void Report() {
    const Clock::time_point now = Clock::now();
    const double dt = std::chrono::duration<double>(now - last_report).count();
    last_report = now;
    for (auto& [id, s] : services) {
      ServiceLoadSample sample;
      sample.in_flight = static_cast<double>(s->in_flight);
      sample.queued = static_cast<double>(s->queued);
      sample.arrivals_per_s = dt > 0 ? static_cast<double>(s->arrivals) / dt : 0;
      sample.service_s = s->served > 0 ? s->service_s / static_cast<double>(s->served) : 0;
      s->arrivals = 0;
      s->served = 0;
      s->service_s = 0;
      dir->ReportLoad(id, sample);
      for (auto& b : s->backends) {
        std::erase_if(b->idle, [&](const IdleConnection& c) {
          return now - c.since >= kIdleConnectionTimeout;
        });
      }
      if (s->in_flight_gauge != nullptr) {
        s->in_flight_gauge->Set(sample.in_flight);
        s->queued_gauge->Set(sample.queued);
      }
    }
  }

  awaitable<void> Every(std::chrono::milliseconds period, void (Impl::*fn)()) {
    net::steady_timer t(*io);
    for (;;) {
      (this->*fn)();
      t.expires_after(period);
      beast::error_code ec;
      co_await t.async_wait(Into(ec));
      if (ec) co_return;
    }
  }

  static void Wake(ServiceState& s) {
    for (auto& w : s.waiters) w->cancel();
  }

  // ---- Replicas ----

  awaitable<beast::error_code> Connect(beast::tcp_stream& stream, const Backend& b) {
    beast::error_code ec;
    stream.expires_after(options.connect_timeout);
    const net::ip::address addr = net::ip::make_address(b.host, ec);
    if (!ec) {
      co_await stream.async_connect(tcp::endpoint(addr, static_cast<uint16_t>(b.port)), Into(ec));
      co_return ec;
    }
    tcp::resolver resolver(*io);
    ec = {};
    auto found = co_await resolver.async_resolve(b.host, std::to_string(b.port), Into(ec));
    if (ec) co_return ec;
    co_await stream.async_connect(found, Into(ec));
    co_return ec;
  }

  // Probes until the backend answers its readiness check (then wakes held requests), or leaves.
  awaitable<void> Probe(std::shared_ptr<ServiceState> s, std::shared_ptr<BackendState> b) {
    net::steady_timer pause(*io);
    while (b->present && s->present && !b->ready) {
      if (co_await ProbeOnce(s->info.readiness_path, b->at)) {
        b->ready = true;
        LogInfo("gateway", "replica ready",
                {{"service", s->Label()},
                 {"replica", std::to_string(b->at.replica)},
                 {"endpoint", b->at.host + ":" + std::to_string(b->at.port)}});
        Wake(*s);
        break;
      }
      pause.expires_after(options.probe_interval);
      beast::error_code ec;
      co_await pause.async_wait(Into(ec));
    }
    b->probing = false;
  }

  awaitable<bool> ProbeOnce(const std::string& path, const Backend& at) {
    beast::tcp_stream stream(*io);
    beast::error_code ec = co_await Connect(stream, at);
    if (ec) co_return false;
    if (path.empty()) co_return true;
    Request req{http::verb::get, path, 11};
    req.set(http::field::host, at.host + ":" + std::to_string(at.port));
    req.set(http::field::user_agent, "gpupool-gateway-probe");
    req.keep_alive(false);
    stream.expires_after(options.connect_timeout);
    co_await http::async_write(stream, req, Into(ec));
    if (ec) co_return false;
    beast::flat_buffer buf;
    Response res;
    co_await http::async_read(stream, buf, res, Into(ec));
    co_return !ec && res.result_int() >= 200 && res.result_int() < 300;
  }

  // An idle connection to the replica that is still open, newest first; null when none.
  static std::unique_ptr<beast::tcp_stream> TakeIdle(BackendState& b) {
    const Clock::time_point now = Clock::now();
    while (!b.idle.empty()) {
      IdleConnection c = std::move(b.idle.back());
      b.idle.pop_back();
      if (now - c.since < kIdleConnectionTimeout && StillOpen(*c.stream)) {
        return std::move(c.stream);
      }
    }
    return nullptr;
  }

  // Sends `req` to the replica on a kept connection when it has one, else on a new one, and
  // keeps the connection for the next request when the answer allows. A kept connection that
  // fails before any of the answer arrived was most likely closed by the replica as it was
  // reused: an idempotent request is then sent once more, on a new connection.
  awaitable<Forwarded> Forward(std::shared_ptr<BackendState> b, Request& req) {
    const bool client_keep_alive = req.keep_alive();
    req.keep_alive(true);  // the connection to the replica is the gateway's to keep
    Attempt out = co_await ForwardOnce(*b, req, /*reuse=*/true);
    if (!out.forwarded.response && out.reused && !out.got_answer &&
        IsIdempotent(req.method_string())) {
      out = co_await ForwardOnce(*b, req, /*reuse=*/false);
    }
    req.keep_alive(client_keep_alive);
    co_return std::move(out.forwarded);
  }

  awaitable<Attempt> ForwardOnce(BackendState& b, Request& req, bool reuse) {
    Attempt out;
    Forwarded& f = out.forwarded;
    std::unique_ptr<beast::tcp_stream> stream = reuse ? TakeIdle(b) : nullptr;
    beast::error_code ec;
    if (stream) {
      out.reused = true;
    } else {
      stream = std::make_unique<beast::tcp_stream>(*io);
      ec = co_await Connect(*stream, b.at);
      if (ec) {
        f.error = "connect: " + ec.message();
        co_return out;
      }
    }
    stream->expires_after(options.request_timeout);
    f.sent = true;
    co_await http::async_write(*stream, req, Into(ec));
    if (ec) {
      f.error = "send: " + ec.message();
      co_return out;
    }
    beast::flat_buffer buf;
    http::response_parser<http::string_body> parser;
    parser.body_limit(static_cast<uint64_t>(options.max_body_bytes));
    if (req.method() == http::verb::head) parser.skip(true);
    co_await http::async_read(*stream, buf, parser, Into(ec));
    out.got_answer = parser.got_some();
    if (ec) {
      f.error = "answer: " + ec.message();
      co_return out;
    }
    const bool keep = parser.keep_alive() && buf.size() == 0;
    f.response = parser.release();
    if (keep && b.present && b.idle.size() < kMaxIdlePerReplica) {
      stream->expires_never();
      b.idle.push_back({std::move(stream), Clock::now()});
    } else {
      beast::error_code ignored;
      stream->socket().shutdown(tcp::socket::shutdown_both, ignored);
    }
    co_return out;
  }

  // ---- Clients ----

  // options.auth->Authenticate on the auth threads; resumes on the io thread. nullopt when
  // kMaxPendingAuth callers are already waiting.
  awaitable<std::optional<Result<CallContext>>> AuthenticateAside(std::string authorization) {
    if (pending_auth >= kMaxPendingAuth) co_return std::nullopt;
    ++pending_auth;
    auto result = std::make_shared<std::optional<Result<CallContext>>>();
    auto wake = std::make_shared<net::steady_timer>(*io, net::steady_timer::time_point::max());
    net::post(*auth_pool, [this, authorization = std::move(authorization), result, wake] {
      Result<CallContext> who = options.auth->Authenticate(authorization);
      // Back on the io thread, which owns `result` from here on and is waiting on `wake`.
      net::post(*io, [result, wake, who = std::move(who)]() mutable {
        *result = std::move(who);
        wake->cancel();
      });
    });
    beast::error_code ec;
    co_await wake->async_wait(Into(ec));
    --pending_auth;
    co_return std::move(*result);
  }

  // Which service a request is for, and whether its caller may reach it: the route (the
  // /services/<tenant>/<name> path, else the gpupool-service field, which is how a gRPC client —
  // whose paths are /<package.Service>/<Method> — names one), the caller's key, the tenant's rate.
  awaitable<Admission> Admit(std::string_view target, std::string_view service_field,
                             std::string authorization) {
    Admission a;
    std::optional<RouteMatch> m = MatchRoute(target, names);
    if (!m && !service_field.empty()) {
      for (size_t i = 0; i < names.size(); ++i) {
        if (names[i] == service_field) m = RouteMatch{i, std::string(target)};
      }
    }
    auto found = m ? services.find(name_ids[m->service]) : services.end();
    if (found == services.end()) {
      a.refusal = Refusal{404, "no such service", 0};
      co_return a;
    }
    a.service = found->second;
    a.rest = std::move(m->rest);
    const std::string label = a.service->Label();
    if (options.auth != nullptr && options.auth->enabled()) {
      std::optional<Result<CallContext>> checked =
          co_await AuthenticateAside(std::move(authorization));
      if (!checked) {
        a.refusal = Refusal{503, "too many callers are being authenticated; retry", 1};
        co_return a;
      }
      Result<CallContext>& who = *checked;
      if (!who.ok()) {
        const bool down = who.status().code() == StatusCode::kUnavailable;
        a.refusal = Refusal{down ? 503u : 401u, who.status().message(), down ? 1 : 0};
        co_return a;
      }
      // The service's tenant or one above it; else as if the service did not exist.
      if (!who->admin() &&
          (who->scope.empty() || !TenantWithin(a.service->info.tenant, who->scope))) {
        a.refusal = Refusal{404, "no such service", 0};
        co_return a;
      }
    }
    if (options.limiter != nullptr) {
      if (Status st = options.limiter->Admit(a.service->info.tenant); !st.ok()) {
        a.refusal = Refusal{429, st.message(), 1};
      }
    }
    co_return a;
  }

  // Sends an admitted request to the service's ready replicas with `send(backend)` (which
  // returns a Forwarded-shaped result: response, sent, error): least outstanding first, held
  // while none is ready, retried elsewhere when the replica could not be reached or the method
  // is idempotent. Feeds the autoscaler's counters and the cold-start report either way.
  template <typename Answer, typename Send>
  awaitable<std::variant<Answer, Refusal>> Dispatch(std::shared_ptr<ServiceState> s,
                                                    const std::string& method, Send send) {
    ++s->arrivals;
    const Clock::time_point arrived = Clock::now();
    const Clock::time_point hold_until = arrived + options.hold_timeout;
    const bool cold = !s->AnyReady();
    std::string last_error;
    int attempts = 0;
    while (attempts < options.max_attempts) {
      std::vector<Candidate> candidates;
      for (const auto& b : s->backends) candidates.push_back({b->ready, b->outstanding});
      std::optional<size_t> pick = PickLeastOutstanding(candidates, s->turn++);
      if (!pick) {
        if (!s->present || Clock::now() >= hold_until) break;
        // Held: counts as queued (the autoscaler's cue) until a replica is ready or time is up.
        auto waiter = std::make_shared<net::steady_timer>(*io, hold_until);
        s->waiters.push_back(waiter);
        ++s->queued;
        beast::error_code ec;
        co_await waiter->async_wait(Into(ec));
        --s->queued;
        std::erase(s->waiters, waiter);
        continue;
      }
      std::shared_ptr<BackendState> b = s->backends[*pick];
      ++attempts;
      ++b->outstanding;
      ++s->in_flight;
      const Clock::time_point sent_at = Clock::now();
      auto f = co_await send(b);
      --b->outstanding;
      --s->in_flight;
      if (f.response) {
        ++s->served;
        s->service_s += std::chrono::duration<double>(Clock::now() - sent_at).count();
        if (cold) {
          const int64_t waited_ms =
              std::chrono::duration_cast<std::chrono::milliseconds>(sent_at - arrived).count();
          dir->ReportColdStart(s->info.id, waited_ms);
          if (s->cold_start != nullptr) s->cold_start->Observe(waited_ms / 1000.0);
        }
        co_return std::move(*f.response);
      }
      // The replica failed: probed again before it gets more work.
      last_error = "replica job " + std::to_string(b->at.replica) + " " + f.error;
      LogWarn("gateway", "replica failed a request",
              {{"service", s->Label()},
               {"replica", std::to_string(b->at.replica)},
               {"error", f.error}});
      b->Forget();  // the replica may be gone: its other kept connections with it
      if (b->ready) {
        b->ready = false;
        if (!b->probing && b->present) {
          b->probing = true;
          net::co_spawn(*io, Probe(s, b), net::detached);
        }
      }
      if (f.sent && !IsIdempotent(method)) {
        co_return Refusal{502, last_error + "; not retried: " + method + " is not idempotent", 0};
      }
    }
    if (attempts >= options.max_attempts) {
      co_return Refusal{502,
                        "no replica answered after " + std::to_string(attempts) +
                            " attempts; last: " + last_error,
                        0};
    }
    const std::string why =
        s->info.below_reason.empty() ? "no replica is ready" : s->info.below_reason;
    co_return Refusal{503, "service " + s->Label() + " has no ready replica: " + why, 5};
  }

  awaitable<Response> Handle(Request req, const std::string& peer) {
    // Named, not temporaries: GCC 12 mis-destroys temporaries of a co_await's full expression.
    const std::string target(req.target());
    const std::string service_field(req["gpupool-service"]);
    std::string authorization(req[http::field::authorization]);
    Admission a = co_await Admit(target, service_field, std::move(authorization));
    if (a.refusal) {
      if (a.service) Count(a.service->Label(), a.refusal->status);
      co_return Reply(static_cast<http::status>(a.refusal->status), req, a.refusal->text,
                      a.refusal->retry_after_s);
    }
    const std::string label = a.service->Label();
    // What the replica receives: its own target, the caller's credential kept back.
    req.target(a.rest);
    req.erase(http::field::authorization);
    req.set("X-Forwarded-For", peer);
    req.prepare_payload();
    const std::string method(req.method_string());
    auto send = [&](std::shared_ptr<BackendState> b) { return Forward(std::move(b), req); };
    std::variant<Response, Refusal> out = co_await Dispatch<Response>(a.service, method, send);
    if (Refusal* no = std::get_if<Refusal>(&out)) {
      Count(label, no->status);
      co_return Reply(static_cast<http::status>(no->status), req, no->text, no->retry_after_s);
    }
    Response r = std::move(std::get<Response>(out));
    r.keep_alive(req.keep_alive());
    if (req.method() != http::verb::head) {
      r.chunked(false);
      r.prepare_payload();
    }
    Count(label, r.result_int());
    co_return r;
  }

  // An HTTP/2 stream's request. A gRPC call goes to the replica over HTTP/2 (h2c), trailers and
  // all; anything else over HTTP/1.1, which every HTTP server speaks — the usual inference
  // servers (vLLM, TGI, Triton's HTTP port) speak nothing newer — and its answer comes back as
  // HTTP/2.
  awaitable<H2Response> HandleH2(H2Request req, std::string peer) {
    const bool grpc = IsGrpc(req.headers);
    const std::string service_field(FieldValue(req.headers, "gpupool-service"));
    std::string authorization(FieldValue(req.headers, "authorization"));
    Admission a = co_await Admit(req.path, service_field, std::move(authorization));
    if (a.refusal) {
      if (a.service) Count(a.service->Label(), a.refusal->status);
      co_return LocalAnswer(grpc, static_cast<int>(a.refusal->status), a.refusal->text,
                            a.refusal->retry_after_s);
    }
    const std::string label = a.service->Label();
    req.path = a.rest;
    EraseField(req.headers, "authorization");
    EraseField(req.headers, "x-forwarded-for");
    req.headers.emplace_back("x-forwarded-for", peer);
    std::variant<H2Response, Refusal> out;
    if (grpc) {
      auto send = [&](std::shared_ptr<BackendState> b) { return ForwardH2(std::move(b), req); };
      out = co_await Dispatch<H2Response>(a.service, req.method, send);
    } else {
      Request one = ToHttp1(req);
      auto send = [&](std::shared_ptr<BackendState> b) { return Forward(std::move(b), one); };
      std::variant<Response, Refusal> got =
          co_await Dispatch<Response>(a.service, req.method, send);
      if (Response* r = std::get_if<Response>(&got)) {
        out = FromHttp1(*r);
      } else {
        out = std::get<Refusal>(got);
      }
    }
    if (Refusal* no = std::get_if<Refusal>(&out)) {
      Count(label, no->status);
      co_return LocalAnswer(grpc, static_cast<int>(no->status), no->text, no->retry_after_s);
    }
    H2Response r = std::move(std::get<H2Response>(out));
    Count(label, static_cast<unsigned>(r.status));
    co_return r;
  }

  // Sends a gRPC call on the replica's HTTP/2 connection, opening one when it has none usable.
  awaitable<H2Result> ForwardH2(std::shared_ptr<BackendState> b, const H2Request& req) {
    if (!b->h2 || !b->h2->usable()) {
      const std::string authority = b->at.host + ":" + std::to_string(b->at.port);
      b->h2 = std::make_shared<H2Upstream>(io->get_executor(), authority, options.max_body_bytes);
      b->h2->Start([this, at = b->at](beast::tcp_stream& stream) { return Connect(stream, at); });
    }
    std::shared_ptr<H2Upstream> up = b->h2;
    co_return co_await up->Send(req, options.request_timeout);
  }

  // One client connection's requests, one at a time (keep-alive). `buf` holds what was read
  // while telling HTTP/1.1 from HTTP/2.
  template <typename Stream>
  awaitable<void> Serve(Stream& stream, beast::flat_buffer& buf, const std::string& peer) {
    beast::error_code ec;
    for (;;) {
      http::request_parser<http::string_body> parser;
      parser.body_limit(static_cast<uint64_t>(options.max_body_bytes));
      // An idle keep-alive connection, or a client that sends slowly, is closed.
      beast::get_lowest_layer(stream).expires_after(std::chrono::seconds(120));
      co_await http::async_read(stream, buf, parser, Into(ec));
      if (ec) co_return;
      Request req = parser.release();
      const bool keep = req.keep_alive();
      beast::get_lowest_layer(stream).expires_never();  // the request's own deadlines bound it
      Response res = co_await Handle(std::move(req), peer);
      beast::get_lowest_layer(stream).expires_after(std::chrono::seconds(30));
      co_await http::async_write(stream, res, Into(ec));
      if (ec || !keep || !res.keep_alive()) co_return;
    }
  }

  template <typename Stream>
  awaitable<void> ServeHttp2(Stream& stream, const beast::flat_buffer& preread,
                             const std::string& peer) {
    H2ServerOptions o;
    o.max_body_bytes = options.max_body_bytes;
    o.busy_timeout = options.hold_timeout + options.request_timeout;
    H2Handler handler = [this, peer](H2Request r) { return HandleH2(std::move(r), peer); };
    co_await ServeH2(stream, preread, std::move(handler), o);
  }

  // Reads until the first bytes tell a plain connection's protocol: HTTP/2's connection preface
  // (h2c with prior knowledge, as gRPC clients open it) or anything else (HTTP/1.1). nullopt when
  // the client left first.
  static awaitable<std::optional<bool>> OpensWithH2Preface(beast::tcp_stream& stream,
                                                           beast::flat_buffer& buf) {
    for (;;) {
      const auto data = buf.data();
      const std::string_view seen(static_cast<const char*>(data.data()), data.size());
      const size_t n = std::min(seen.size(), kH2Preface.size());
      if (seen.substr(0, n) != kH2Preface.substr(0, n)) co_return false;
      if (n == kH2Preface.size()) co_return true;
      stream.expires_after(std::chrono::seconds(120));
      beast::error_code ec;
      const size_t got = co_await stream.async_read_some(buf.prepare(4096), Into(ec));
      if (ec) co_return std::nullopt;
      buf.commit(got);
    }
  }

  awaitable<void> Session(tcp::socket socket) {
    beast::error_code ec;
    const tcp::endpoint remote = socket.remote_endpoint(ec);
    const std::string peer = ec ? std::string("unknown") : remote.address().to_string();
    beast::flat_buffer buf;
    if (!tls) {
      beast::tcp_stream stream(std::move(socket));
      std::optional<bool> h2 = co_await OpensWithH2Preface(stream, buf);
      if (!h2) co_return;
      if (*h2) {
        co_await ServeHttp2(stream, buf, peer);
      } else {
        co_await Serve(stream, buf, peer);
      }
      stream.socket().shutdown(tcp::socket::shutdown_send, ec);
      co_return;
    }
    beast::ssl_stream<beast::tcp_stream> stream(std::move(socket), *tls);
    beast::get_lowest_layer(stream).expires_after(std::chrono::seconds(10));
    co_await stream.async_handshake(net::ssl::stream_base::server, Into(ec));
    if (ec) co_return;
    const unsigned char* alpn = nullptr;
    unsigned alpn_len = 0;
    SSL_get0_alpn_selected(stream.native_handle(), &alpn, &alpn_len);
    if (std::string_view(reinterpret_cast<const char*>(alpn), alpn_len) == "h2") {
      co_await ServeHttp2(stream, buf, peer);
      co_return;  // the HTTP/2 session ended with GOAWAY, or the connection failed
    }
    co_await Serve(stream, buf, peer);
    beast::get_lowest_layer(stream).expires_after(std::chrono::seconds(5));
    co_await stream.async_shutdown(Into(ec));
  }

  awaitable<void> Accept() {
    for (;;) {
      beast::error_code ec;
      tcp::socket socket = co_await acceptor->async_accept(Into(ec));
      if (ec) {
        if (ec == net::error::operation_aborted || !acceptor->is_open()) co_return;
        continue;
      }
      socket.set_option(tcp::no_delay(true), ec);
      net::co_spawn(*io, Session(std::move(socket)), net::detached);
    }
  }
};

Gateway::Gateway(Directory* directory, GatewayOptions options)
    : impl_(std::make_unique<Impl>(directory, std::move(options))) {}

Gateway::~Gateway() { Stop(); }

Status Gateway::Start() {
  Impl& g = *impl_;
  const std::string& listen = g.options.listen;
  const size_t colon = listen.rfind(':');
  if (colon == std::string::npos) {
    return Status::InvalidArgument("gateway listen: '" + listen + "': expected host:port");
  }
  std::string host = listen.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  if (host.empty()) host = "0.0.0.0";
  int port = -1;
  try {
    size_t used = 0;
    port = std::stoi(listen.substr(colon + 1), &used);
    if (used != listen.size() - colon - 1) port = -1;
  } catch (const std::exception&) {
  }
  if (port < 0 || port > 65535) {
    return Status::InvalidArgument("gateway listen: '" + listen + "': the port must be 0..65535");
  }
  beast::error_code ec;
  const net::ip::address addr = net::ip::make_address(host, ec);
  if (ec) return Status::InvalidArgument("gateway listen: '" + host + "' is not an IP address");
  const tcp::endpoint ep(addr, static_cast<uint16_t>(port));
  if (!g.options.tls_cert_pem.empty()) {
    g.tls.emplace(net::ssl::context::tls_server);
    g.tls->set_options(net::ssl::context::default_workarounds | net::ssl::context::no_sslv2 |
                       net::ssl::context::no_sslv3 | net::ssl::context::no_tlsv1 |
                       net::ssl::context::no_tlsv1_1);
    // ALPN: h2 when the client offers it (gRPC clients must), else HTTP/1.1.
    SSL_CTX_set_alpn_select_cb(g.tls->native_handle(), SelectAlpn, nullptr);
    g.tls->use_certificate_chain(net::buffer(g.options.tls_cert_pem), ec);
    if (!ec) g.tls->use_private_key(net::buffer(g.options.tls_key_pem), net::ssl::context::pem, ec);
    if (ec) {
      g.tls.reset();
      return Status::InvalidArgument("gateway: TLS certificate or key: " + ec.message());
    }
  }
  g.acceptor = std::make_unique<tcp::acceptor>(*g.io);
  g.acceptor->open(ep.protocol(), ec);
  if (!ec) g.acceptor->set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) g.acceptor->bind(ep, ec);
  if (!ec) g.acceptor->listen(net::socket_base::max_listen_connections, ec);
  if (ec) {
    return Status::FailedPrecondition("gateway: cannot listen on " + g.options.listen + ": " +
                                      ec.message());
  }
  g.port = g.acceptor->local_endpoint().port();
  g.Metrics();
  net::co_spawn(*g.io, g.Accept(), net::detached);
  net::co_spawn(*g.io, g.Every(g.options.refresh_interval, &Impl::Refresh), net::detached);
  net::co_spawn(*g.io, g.Every(g.options.report_interval, &Impl::Report), net::detached);
  if (g.options.auth != nullptr) g.auth_pool = std::make_unique<net::thread_pool>(kAuthThreads);
  g.thread = std::thread([&g] { g.io->run(); });
  LogInfo("gateway", "listening",
          {{"address", g.options.listen}, {"port", std::to_string(g.port)}});
  return Status::Ok();
}

void Gateway::Stop() {
  Impl& g = *impl_;
  if (!g.thread.joinable()) return;
  g.io->stop();
  g.thread.join();
  // Lookups not started are dropped; those running finish and post to the stopped io_context.
  if (g.auth_pool) {
    g.auth_pool->stop();
    g.auth_pool->join();
  }
  // Kept connections, then the coroutines still suspended (destroyed with the io_context), go
  // before what they use.
  for (auto& [id, s] : g.services) {
    for (auto& b : s->backends) b->Forget();
  }
  g.acceptor.reset();
  g.io.reset();
  g.services.clear();
}

int Gateway::port() const { return impl_->port; }

}  // namespace gpupool::api::gateway
