// The services' gateway speaking HTTP/2: real gRPC clients and a real gRPC server as the replica
// (grpc++'s generic API, so no proto is needed), curl as an HTTP/2 client of HTTP/1.1 replicas,
// h2c with prior knowledge on a plain port and h2 by ALPN over TLS.
#include <grpcpp/alarm.h>
#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <future>
#include <thread>

#include "api/auth.h"
#include "api/gateway/gateway.h"
#include "api/gateway/h2_http1.h"
#include "api/gateway/h2_message.h"
#include "base/tls/pki.h"
#include "tests/api/gateway_fixture.h"

namespace gpupool::api::gateway {
namespace {

using namespace std::chrono_literals;
using fixture::Chat;
using fixture::GatewayFixture;
using fixture::Replica;
namespace http = boost::beast::http;

// A gRPC server answering every method: "replica <id> <method> <request> auth=<yes|no>", with
// the trailing metadata x-replica: <id>. A request "fail" is answered FAILED_PRECONDITION with a
// message that needs percent-encoding; "sleep" answers after 300 ms.
class GrpcReplica {
 public:
  explicit GrpcReplica(int64_t id) : service_(id) {
    grpc::ServerBuilder b;
    b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    b.RegisterCallbackGenericService(&service_);
    server_ = b.BuildAndStart();
  }
  ~GrpcReplica() { server_->Shutdown(std::chrono::system_clock::now() + 1s); }
  Backend backend() const { return Backend{service_.id, "127.0.0.1", port_}; }
  int calls() const { return service_.calls.load(); }

 private:
  class Call final : public grpc::ServerGenericBidiReactor {
   public:
    Call(grpc::GenericCallbackServerContext* ctx, int64_t id, std::atomic<int>* calls)
        : ctx_(ctx), id_(id), calls_(calls) {
      StartRead(&request_);
    }
    void OnReadDone(bool ok) override {
      if (!ok) {
        Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "no request"));
        return;
      }
      ++*calls_;
      std::vector<grpc::Slice> slices;
      (void)request_.Dump(&slices);
      std::string in;
      for (const grpc::Slice& s : slices)
        in.append(reinterpret_cast<const char*>(s.begin()), s.size());
      if (in == "fail") {
        Finish(grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "asked to fail: 100% sure"));
        return;
      }
      ctx_->AddTrailingMetadata("x-replica", std::to_string(id_));
      const bool auth = ctx_->client_metadata().count("authorization") > 0;
      const std::string out = "replica " + std::to_string(id_) + " " + ctx_->method() + " " + in +
                              " auth=" + (auth ? "yes" : "no");
      grpc::Slice slice(out);
      response_ = grpc::ByteBuffer(&slice, 1);
      if (in != "sleep") {
        StartWriteAndFinish(&response_, grpc::WriteOptions(), grpc::Status::OK);
        return;
      }
      // Answered 300 ms later without holding one of gRPC's callback threads meanwhile.
      alarm_.Set(std::chrono::system_clock::now() + 300ms, [this](bool) {
        StartWriteAndFinish(&response_, grpc::WriteOptions(), grpc::Status::OK);
      });
    }
    void OnDone() override { delete this; }

   private:
    grpc::GenericCallbackServerContext* ctx_;
    const int64_t id_;
    std::atomic<int>* calls_;
    grpc::ByteBuffer request_;
    grpc::ByteBuffer response_;
    grpc::Alarm alarm_;
  };

  class Service final : public grpc::CallbackGenericService {
   public:
    explicit Service(int64_t replica) : id(replica) {}
    grpc::ServerGenericBidiReactor* CreateReactor(
        grpc::GenericCallbackServerContext* ctx) override {
      return new Call(ctx, id, &calls);
    }
    const int64_t id;
    std::atomic<int> calls{0};
  };

  Service service_;
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
};

struct GrpcResult {
  grpc::Status status;
  std::string body;
  std::string replica_trailer;
};

GrpcResult Unary(const std::shared_ptr<grpc::Channel>& channel, const std::string& body,
                 std::vector<std::pair<std::string, std::string>> metadata) {
  grpc::GenericStub stub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + 10s);
  for (const auto& [k, v] : metadata) ctx.AddMetadata(k, v);
  grpc::Slice slice(body);
  grpc::ByteBuffer request(&slice, 1);
  grpc::ByteBuffer response;
  std::promise<grpc::Status> done;
  stub.UnaryCall(&ctx, "/echo.Echo/Say", grpc::StubOptions(), &request, &response,
                 [&](grpc::Status s) { done.set_value(std::move(s)); });
  GrpcResult out;
  out.status = done.get_future().get();
  std::vector<grpc::Slice> slices;
  if (out.status.ok() && response.Dump(&slices).ok()) {
    for (const grpc::Slice& s : slices) {
      out.body.append(reinterpret_cast<const char*>(s.begin()), s.size());
    }
  }
  for (const auto& [k, v] : ctx.GetServerTrailingMetadata()) {
    if (k == "x-replica") out.replica_trailer.assign(v.data(), v.size());
  }
  return out;
}

const std::pair<std::string, std::string> kChat = {"gpupool-service", "acme/research/chat"};

class GatewayH2Test : public GatewayFixture {
 protected:
  std::shared_ptr<grpc::Channel> Plain() {
    return grpc::CreateChannel("127.0.0.1:" + std::to_string(gateway_->port()),
                               grpc::InsecureChannelCredentials());
  }
};

TEST_F(GatewayH2Test, CarriesAGrpcCallToAReplicaWithItsTrailersOverH2c) {
  GrpcReplica r(601);
  dir_.Set({Chat({r.backend()}, /*readiness=*/"")});
  Start();
  WaitRoutable();
  GrpcResult ok = Unary(Plain(), "hello", {kChat});
  ASSERT_TRUE(ok.status.ok()) << ok.status.error_message();
  EXPECT_EQ(ok.body, "replica 601 /echo.Echo/Say hello auth=no");
  EXPECT_EQ(ok.replica_trailer, "601");
  // The replica's own status and message, percent-encoded on the wire, arrive intact.
  GrpcResult failed = Unary(Plain(), "fail", {kChat});
  EXPECT_EQ(failed.status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(failed.status.error_message(), "asked to fail: 100% sure");
}

TEST_F(GatewayH2Test, CarriesConcurrentCallsOnOneConnectionAndSpreadsThem) {
  GrpcReplica a(611);
  GrpcReplica b(612);
  dir_.Set({Chat({a.backend(), b.backend()}, "")});
  Start();
  WaitRoutable();
  std::shared_ptr<grpc::Channel> channel = Plain();
  std::vector<std::future<GrpcResult>> calls;
  for (int i = 0; i < 16; ++i) {
    calls.push_back(
        std::async(std::launch::async, [&] { return Unary(channel, "sleep", {kChat}); }));
  }
  const auto start = std::chrono::steady_clock::now();
  for (auto& c : calls) {
    GrpcResult r = c.get();
    EXPECT_TRUE(r.status.ok()) << r.status.error_message();
  }
  // 16 calls of 300 ms each over one client connection: concurrent, not one after another
  // (2.4 s on two replicas).
  EXPECT_LT(std::chrono::steady_clock::now() - start, 1500ms);
  EXPECT_GT(a.calls(), 0);
  EXPECT_GT(b.calls(), 0);
  EXPECT_EQ(a.calls() + b.calls(), 16);
}

TEST_F(GatewayH2Test, AnswersRefusalsAsGrpcStatuses) {
  GrpcReplica r(621);
  dir_.Set({Chat({r.backend()}, "")});
  Result<Authenticator> auth =
      Authenticator::Create({ApiToken{"tok-acme", "acme", false, Role::kViewer},
                             ApiToken{"tok-other", "globex", false, Role::kMember}});
  ASSERT_TRUE(auth.ok());
  GatewayOptions o;
  o.auth = &*auth;
  Start(o);
  WaitRoutable();
  GrpcResult none = Unary(Plain(), "x", {{"authorization", "Bearer tok-acme"}});
  EXPECT_EQ(none.status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(none.status.error_message(), "no such service");
  GrpcResult anonymous = Unary(Plain(), "x", {kChat});
  EXPECT_EQ(anonymous.status.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  GrpcResult other = Unary(Plain(), "x", {kChat, {"authorization", "Bearer tok-other"}});
  EXPECT_EQ(other.status.error_code(), grpc::StatusCode::NOT_FOUND);
  GrpcResult ok = Unary(Plain(), "x", {kChat, {"authorization", "Bearer tok-acme"}});
  ASSERT_TRUE(ok.status.ok()) << ok.status.error_message();
  EXPECT_EQ(ok.body, "replica 621 /echo.Echo/Say x auth=no");  // the key stays at the gateway
  EXPECT_EQ(r.calls(), 1);
}

TEST_F(GatewayH2Test, RefusesACallLargerThanTheBodyLimitWithoutSendingIt) {
  GrpcReplica r(625);
  dir_.Set({Chat({r.backend()}, "")});
  GatewayOptions o;
  o.max_body_bytes = 1024;
  Start(o);
  WaitRoutable();
  GrpcResult big = Unary(Plain(), std::string(4096, 'b'), {kChat});
  EXPECT_EQ(big.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(big.status.error_message().find("1024 bytes"), std::string::npos)
      << big.status.error_message();
  EXPECT_TRUE(Unary(Plain(), "small", {kChat}).status.ok());  // the connection still serves
  EXPECT_EQ(r.calls(), 1);
}

TEST_F(GatewayH2Test, HoldsAGrpcCallWhileTheFirstReplicaStarts) {
  dir_.Set({Chat({}, "")});
  Start();
  std::future<GrpcResult> call =
      std::async(std::launch::async, [&] { return Unary(Plain(), "cold", {kChat}); });
  std::this_thread::sleep_for(400ms);
  GrpcReplica r(631);
  dir_.Set({Chat({r.backend()}, "")});
  GrpcResult got = call.get();
  ASSERT_TRUE(got.status.ok()) << got.status.error_message();
  EXPECT_EQ(got.body, "replica 631 /echo.Echo/Say cold auth=no");
  std::lock_guard lock(dir_.mu);
  EXPECT_GE(dir_.max_queued[7], 1);
  ASSERT_EQ(dir_.cold_starts[7].size(), 1u);
  EXPECT_GE(dir_.cold_starts[7][0], 300);
}

// A replica that closes the connection under a call may have acted on it: a gRPC call is a POST,
// so it is answered UNAVAILABLE and not sent to the other replica.
TEST_F(GatewayH2Test, AGrpcCallWhoseReplicaDiesIsAnsweredUnavailableAndNotSentTwice) {
  Replica a(641);
  Replica b(642);
  a.drop = true;
  b.drop = true;
  dir_.Set({Chat({a.backend(), b.backend()}, "")});
  Start();
  WaitRoutable();
  const int a0 = a.accepted;  // the readiness probes' connections
  const int b0 = b.accepted;
  GrpcResult r = Unary(Plain(), "x", {kChat});
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::UNAVAILABLE) << r.status.error_message();
  EXPECT_NE(r.status.error_message().find("not retried"), std::string::npos)
      << r.status.error_message();
  // One replica was tried (and is probed again); the other never saw the call.
  EXPECT_EQ((a.accepted == a0 ? 1 : 0) + (b.accepted == b0 ? 1 : 0), 1);
}

TEST_F(GatewayH2Test, ServesGrpcOverTlsByAlpn) {
  char dir[] = "/tmp/gateway-h2-tls-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  Result<tls::CertAuthority> ca = tls::CertAuthority::LoadOrCreate(dir, {});
  ASSERT_TRUE(ca.ok()) << ca.status().ToString();
  GrpcReplica r(651);
  dir_.Set({Chat({r.backend()}, "")});
  GatewayOptions o;
  o.tls_cert_pem = ca->server_cert_pem();
  o.tls_key_pem = ca->server_key_pem();
  Start(o);
  WaitRoutable();
  grpc::SslCredentialsOptions creds;
  creds.pem_root_certs = ca->ca_pem();
  grpc::ChannelArguments args;
  args.SetSslTargetNameOverride("localhost");
  auto channel = grpc::CreateCustomChannel("127.0.0.1:" + std::to_string(gateway_->port()),
                                           grpc::SslCredentials(creds), args);
  GrpcResult got = Unary(channel, "secure", {kChat});
  ASSERT_TRUE(got.status.ok()) << got.status.error_message();
  EXPECT_EQ(got.body, "replica 651 /echo.Echo/Say secure auth=no");
  std::filesystem::remove_all(dir);
}

// curl's output: the body, then a line with the HTTP version it spoke.
std::string Curl(const std::string& args) {
  const std::string cmd = "curl -sS --max-time 10 -w '\\n%{http_version}' " + args + " 2>&1";
  std::string out;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return "popen failed";
  std::array<char, 4096> buf{};
  while (size_t n = std::fread(buf.data(), 1, buf.size(), p)) out.append(buf.data(), n);
  ::pclose(p);
  return out;
}

// Browsers and curl speak HTTP/2 where offered; the inference servers behind most services speak
// HTTP/1.1 only. Such requests are carried to the replica as HTTP/1.1.
TEST_F(GatewayH2Test, CarriesHttp2RequestsToHttp1ReplicasOnPlainAndTlsPorts) {
  Replica a(661);
  dir_.Set({Chat({a.backend()})});
  Start();
  WaitRoutable();
  const std::string port = std::to_string(gateway_->port());
  EXPECT_EQ(Curl("--http2-prior-knowledge http://127.0.0.1:" + port +
                 "/services/acme/research/chat/v1/x?q=1"),
            "replica 661 /v1/x?q=1 auth=no\n2");
  gateway_.reset();

  char dir[] = "/tmp/gateway-h2-curl-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  Result<tls::CertAuthority> ca = tls::CertAuthority::LoadOrCreate(dir, {});
  ASSERT_TRUE(ca.ok()) << ca.status().ToString();
  GatewayOptions o;
  o.tls_cert_pem = ca->server_cert_pem();
  o.tls_key_pem = ca->server_key_pem();
  Start(o);
  WaitRoutable();
  const std::string tls_port = std::to_string(gateway_->port());
  const std::string ca_file = std::string(dir) + "/ca-for-curl.pem";
  std::ofstream(ca_file) << ca->ca_pem();
  const std::string base = "--cacert " + ca_file + " https://127.0.0.1:" + tls_port +
                           "/services/acme/research/chat/v1/y";
  EXPECT_EQ(Curl("--http2 " + base), "replica 661 /v1/y auth=no\n2");
  EXPECT_EQ(Curl("--http1.1 " + base), "replica 661 /v1/y auth=no\n1.1");
  std::filesystem::remove_all(dir);
}

TEST(GatewayH2Fields, TranslatesToHttp1AndBack) {
  H2Request r;
  r.method = "POST";
  r.authority = "gw.example:443";
  r.path = "/v1/complete";
  r.headers = {{"cookie", "a=1"}, {"cookie", "b=2"}, {"te", "trailers"}, {"x-k", "v"}};
  r.body = "{}";
  http::request<http::string_body> one = ToHttp1(r);
  EXPECT_EQ(one.method(), http::verb::post);
  EXPECT_EQ(one.target(), "/v1/complete");
  EXPECT_EQ(one[http::field::host], "gw.example:443");
  EXPECT_EQ(one[http::field::cookie], "a=1; b=2");  // RFC 9113 §8.2.3
  EXPECT_EQ(one.count(http::field::te), 0u);
  EXPECT_EQ(one["x-k"], "v");
  EXPECT_EQ(one[http::field::content_length], "2");

  http::response<http::string_body> answer{http::status::created, 11};
  answer.set(http::field::connection, "keep-alive");
  answer.set("X-Trace", "t1");
  answer.body() = "made";
  answer.prepare_payload();
  H2Response back = FromHttp1(answer);
  EXPECT_EQ(back.status, 201);
  EXPECT_EQ(FieldValue(back.headers, "x-trace"), "t1");
  EXPECT_EQ(FieldValue(back.headers, "connection"), "");
  EXPECT_EQ(back.body, "made");
}

TEST(GatewayH2Fields, GrpcRefusalsAreTrailersOnlyAnswers) {
  EXPECT_TRUE(IsGrpc({{"content-type", "application/grpc+proto"}}));
  EXPECT_FALSE(IsGrpc({{"content-type", "application/grpcx"}}));
  H2Response r = LocalAnswer(true, 429, "rate 5/s exceeded\n", 1);
  EXPECT_EQ(r.status, 200);
  EXPECT_TRUE(r.body.empty());
  EXPECT_EQ(FieldValue(r.headers, "grpc-status"), "8");
  EXPECT_EQ(FieldValue(r.headers, "grpc-message"), "rate 5/s exceeded%0A");
  EXPECT_EQ(FieldValue(r.headers, "retry-after"), "1");
  H2Response plain = LocalAnswer(false, 503, "no replica", 5);
  EXPECT_EQ(plain.status, 503);
  EXPECT_EQ(plain.body, "no replica\n");
}

}  // namespace
}  // namespace gpupool::api::gateway
