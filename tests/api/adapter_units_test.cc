// The adapters' pure parts: Status ↔ gRPC/HTTP status, the Authenticator, the URL router and
// the JSON request assembly (no sockets).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <optional>

#include "api/auth.h"
#include "api/credentials.h"
#include "api/rest/json_mapping.h"
#include "api/rest/router.h"
#include "api/status_convert.h"
#include "api/utf8.h"
#include "gpupool/v1/jobs.pb.h"
#include "gpupool/v1/pools.pb.h"

namespace gpupool::api {
namespace {

TEST(StatusConvertTest, GrpcRoundTripKeepsCodeAndMessage) {
  for (int code = 0; code <= 16; ++code) {
    const Status st(static_cast<StatusCode>(code), code == 0 ? "" : "why " + std::to_string(code));
    const grpc::Status g = ToGrpcStatus(st);
    EXPECT_EQ(static_cast<int>(g.error_code()), code);
    EXPECT_EQ(FromGrpcStatus(g), st);
  }
}

TEST(Utf8Test, InvalidSequencesBecomeReplacementCharacters) {
  EXPECT_TRUE(IsValidUtf8("plain ascii, caf\xc3\xa9, \xe2\x82\xac, \xf0\x9f\x98\x80"));
  const std::pair<const char*, const char*> cases[] = {
      {"a\xff"
       "b",
       "a\xef\xbf\xbd"
       "b"},                                     // a byte that never starts a sequence
      {"\xc0\xaf", "\xef\xbf\xbd\xef\xbf\xbd"},  // overlong '/'
      {"\xed\xa0\x80", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"},  // a surrogate
      {"x\xe2\x82", "x\xef\xbf\xbd\xef\xbf\xbd"},                // truncated at the end
      {"\xf4\x90\x80\x80", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"},  // > U+10FFFF
  };
  for (const auto& [in, out] : cases) {
    EXPECT_FALSE(IsValidUtf8(in)) << in;
    EXPECT_EQ(ValidUtf8(in), out);
    EXPECT_TRUE(IsValidUtf8(ValidUtf8(in)));
  }
  // Both faces clean the message in their one conversion.
  const Status echo = Status::NotFound("pool '\xff' not found");
  EXPECT_EQ(ToGrpcStatus(echo).error_message(), "pool '\xef\xbf\xbd' not found");
  EXPECT_TRUE(IsValidUtf8(rest::ErrorJson(echo)));
}

TEST(StatusConvertTest, HttpStatusIsGrpcGateways) {
  // grpc-gateway runtime/errors.go HTTPStatusFromCode, written out.
  const std::pair<StatusCode, int> table[] = {
      {StatusCode::kOk, 200},
      {StatusCode::kCancelled, 499},
      {StatusCode::kUnknown, 500},
      {StatusCode::kInvalidArgument, 400},
      {StatusCode::kDeadlineExceeded, 504},
      {StatusCode::kNotFound, 404},
      {StatusCode::kAlreadyExists, 409},
      {StatusCode::kPermissionDenied, 403},
      {StatusCode::kResourceExhausted, 429},
      {StatusCode::kFailedPrecondition, 400},
      {StatusCode::kAborted, 409},
      {StatusCode::kOutOfRange, 400},
      {StatusCode::kUnimplemented, 501},
      {StatusCode::kInternal, 500},
      {StatusCode::kUnavailable, 503},
      {StatusCode::kDataLoss, 500},
      {StatusCode::kUnauthenticated, 401},
  };
  for (const auto& [code, http] : table) EXPECT_EQ(HttpStatusFromCode(code), http) << int(code);
}

TEST(AuthenticatorTest, DisabledMeansAdminWithEmptyPrincipal) {
  Authenticator auth;
  EXPECT_FALSE(auth.enabled());
  for (const char* header : {"", "Bearer x", "garbage"}) {
    auto ctx = auth.Authenticate(header);
    ASSERT_TRUE(ctx.ok());
    EXPECT_EQ(ctx->scope, "");
    EXPECT_TRUE(ctx->admin());
    EXPECT_EQ(ctx->key_id, "insecure");
  }
}

// API keys: one table of presented credentials against one stored key; every failure is the
// same UNAUTHENTICATED message, and a store that cannot answer is UNAVAILABLE.
TEST(AuthenticatorTest, ApiKeysAreCheckedByDigestExpiryAndRevocation) {
  Result<ApiKeySecret> good = NewApiKeySecret();
  ASSERT_TRUE(good.ok());
  const int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count();
  std::map<std::string, StoredKey> stored = {
      {good->id, {"acme/research", Role::kTenantAdmin, Sha256Hex(good->secret), 0, 0}},
      {"aaaaaaaaaaaa", {"acme", Role::kMember, Sha256Hex(good->secret), now_ms - 1, 0}},
      {"bbbbbbbbbbbb", {"acme", Role::kMember, Sha256Hex(good->secret), 0, now_ms - 1}},
      {"cccccccccccc", {"", Role::kAdmin, Sha256Hex(good->secret), now_ms + 60'000, 0}},
  };
  bool down = false;
  auto auth =
      Authenticator::Create({}, [&](const std::string& id) -> Result<std::optional<StoredKey>> {
        if (down) return Status::Unavailable("database unavailable: 127.0.0.1:5432/gpupool");
        auto it = stored.find(id);
        if (it == stored.end()) return std::optional<StoredKey>();
        return std::optional<StoredKey>(it->second);
      });
  ASSERT_TRUE(auth.ok());
  EXPECT_TRUE(auth->enabled());

  auto ok = auth->Authenticate("Bearer " + good->Text());
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->key_id, "key:" + good->id);
  EXPECT_EQ(ok->scope, "acme/research");
  EXPECT_EQ(ok->role, Role::kTenantAdmin);
  auto admin = auth->Authenticate("Bearer gpk_cccccccccccc_" + good->secret);
  ASSERT_TRUE(admin.ok());
  EXPECT_TRUE(admin->admin());

  std::string wrong_secret = good->secret;
  wrong_secret[0] = wrong_secret[0] == 'a' ? 'b' : 'a';
  for (const std::string& bad : {
           "gpk_" + good->id + "_" + wrong_secret,                // wrong secret
           "gpk_aaaaaaaaaaaa_" + good->secret,                    // expired
           "gpk_bbbbbbbbbbbb_" + good->secret,                    // revoked
           "gpk_dddddddddddd_" + good->secret,                    // unknown id
           "gpk_" + good->id,                                     // malformed
           "gpk_" + good->id + "_" + good->secret + "0",          // too long
           "gpk_" + good->id.substr(0, 11) + "G_" + good->secret  // not hex
       }) {
    auto r = auth->Authenticate("Bearer " + bad);
    EXPECT_EQ(r.status().code(), StatusCode::kUnauthenticated) << bad;
    EXPECT_EQ(r.status().message(), "invalid bearer token") << bad;
  }
  down = true;
  EXPECT_EQ(auth->Authenticate("Bearer " + good->Text()).status().code(), StatusCode::kUnavailable);
}

TEST(AuthenticatorTest, TokensMapToPrincipals) {
  auto auth = Authenticator::Create({{"t-alice", "acme/alice", false}, {"t-root", "ops", true}});
  ASSERT_TRUE(auth.ok());
  auto alice = auth->Authenticate("Bearer t-alice");
  ASSERT_TRUE(alice.ok());
  EXPECT_EQ(alice->scope, "acme/alice");
  EXPECT_EQ(alice->role, Role::kMember);
  EXPECT_EQ(alice->key_id, "token:acme/alice");
  EXPECT_FALSE(alice->admin());
  auto root = auth->Authenticate("BEARER  t-root");
  ASSERT_TRUE(root.ok());
  EXPECT_TRUE(root->admin());
  EXPECT_EQ(root->scope, "");

  const std::pair<std::string, std::string> bad[] = {
      {"", "missing credentials"},
      {"Bearer t-alic", "invalid bearer token"},
      {"Bearer t-alice2", "invalid bearer token"},
      {"Basic dDp4", "unsupported authorization scheme"},
      {"t-alice", "unsupported authorization scheme"},
  };
  for (const auto& [header, message] : bad) {
    auto r = auth->Authenticate(header);
    ASSERT_FALSE(r.ok()) << header;
    EXPECT_EQ(r.status().code(), StatusCode::kUnauthenticated);
    EXPECT_NE(r.status().message().find(message), std::string::npos) << r.status().message();
  }
}

// Whatever the header, a refusal is one of three fixed messages: nothing of the header comes
// back. The inputs are auth_header_fuzz findings (docs/fuzzing.md): the first is a fragment of
// the fixed "unsupported scheme" text itself, which the target's first property (the header
// must not appear in the message) mistook for an echo.
TEST(AuthenticatorTest, RefusalsAreFixedMessagesWhateverTheHeader) {
  auto auth = Authenticator::Create({{"t-alice-0123456789", "acme/alice", false}});
  ASSERT_TRUE(auth.ok());
  const std::string fixed[] = {
      "missing credentials: send the header 'Authorization: Bearer <token>'",
      "unsupported authorization scheme: expected 'Authorization: Bearer <token>'",
      "invalid bearer token",
  };
  for (const std::string& header :
       {std::string("xe:e: expected 'Aut"), std::string("Bearer \xff\xfe"),
        std::string("Bearer gpk_"), std::string("  \t "),
        std::string("Bearer t-alice-0123456789\n")}) {
    auto r = auth->Authenticate(header);
    if (r.ok()) continue;
    EXPECT_EQ(r.status().code(), StatusCode::kUnauthenticated) << header;
    EXPECT_NE(std::find(std::begin(fixed), std::end(fixed), r.status().message()), std::end(fixed))
        << r.status().message();
  }
}

TEST(AuthenticatorTest, RejectsBadTokenTables) {
  EXPECT_EQ(Authenticator::Create({{"", "a", false}}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(Authenticator::Create({{"t", "", false}}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(Authenticator::Create({{"t x", "a", false}}).status().code(),
            StatusCode::kInvalidArgument);
  const Status dup = Authenticator::Create({{"t", "a", false}, {"t", "b", true}}).status();
  EXPECT_EQ(dup.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(dup.message().find("auth token #2"), std::string::npos) << dup.message();
  EXPECT_EQ(dup.message().find("\"t\""), std::string::npos);
}

TEST(RouterTest, MatchesPatternsVerbsAndMethods) {
  rest::Router r;
  const size_t list = r.Add("GET", "/v1/jobs");
  const size_t get = r.Add("GET", "/v1/jobs/{job_id}");
  const size_t cancel = r.Add("POST", "/v1/jobs/{job_id}:cancel");
  const size_t patch = r.Add("PATCH", "/v1/pools/{pool.name}");
  r.Add("GET", "/v1/pools/{name}");

  auto m = r.Find("GET", "/v1/jobs");
  EXPECT_EQ(m.kind, rest::Router::Match::kFound);
  EXPECT_EQ(m.route, list);

  m = r.Find("GET", "/v1/jobs/j%2F1");
  ASSERT_EQ(m.kind, rest::Router::Match::kFound);
  EXPECT_EQ(m.route, get);
  ASSERT_EQ(m.params.size(), 1u);
  EXPECT_EQ(m.params[0], (std::pair<std::string, std::string>{"job_id", "j/1"}));

  m = r.Find("POST", "/v1/jobs/j-1:cancel");
  ASSERT_EQ(m.kind, rest::Router::Match::kFound);
  EXPECT_EQ(m.route, cancel);
  EXPECT_EQ(m.params[0].second, "j-1");

  EXPECT_EQ(r.Find("GET", "/v1/jobs/a:b").kind, rest::Router::Match::kNotFound);  // verb "b"
  m = r.Find("GET", "/v1/jobs/a%3Ab");  // an encoded colon is part of the name
  ASSERT_EQ(m.kind, rest::Router::Match::kFound);
  EXPECT_EQ(m.route, get);
  EXPECT_EQ(m.params[0].second, "a:b");

  m = r.Find("PATCH", "/v1/pools/gpu-a");
  ASSERT_EQ(m.kind, rest::Router::Match::kFound);
  EXPECT_EQ(m.route, patch);
  EXPECT_EQ(m.params[0].first, "pool.name");

  m = r.Find("DELETE", "/v1/pools/gpu-a");
  EXPECT_EQ(m.kind, rest::Router::Match::kMethodNotAllowed);
  EXPECT_EQ(m.allowed, "GET, PATCH");

  EXPECT_EQ(r.Find("GET", "/v1/jobs/").kind, rest::Router::Match::kNotFound);
  EXPECT_EQ(r.Find("GET", "/v1/jobs/a/b").kind, rest::Router::Match::kNotFound);
  EXPECT_EQ(r.Find("GET", "/v1/jobs/%zz").kind, rest::Router::Match::kNotFound);
  EXPECT_EQ(r.Find("GET", "v1/jobs").kind, rest::Router::Match::kNotFound);
}

TEST(RouterTest, ParsesQueryStrings) {
  auto q = rest::ParseQuery("a=1&b=x%20y+z&flag&&c=");
  ASSERT_TRUE(q.ok());
  const std::vector<std::pair<std::string, std::string>> want = {
      {"a", "1"}, {"b", "x y z"}, {"flag", ""}, {"c", ""}};
  EXPECT_EQ(*q, want);
  EXPECT_FALSE(rest::ParseQuery("a=%4").ok());
}

TEST(JsonMappingTest, QueryParamsByProtoOrJsonNameWithTypes) {
  v1::ListJobsRequest req;
  ASSERT_TRUE(rest::ApplyQueryParams(
                  {{"page_size", "7"}, {"pageToken", "t"}, {"state", "JOB_STATE_FAILED"}}, &req)
                  .ok());
  EXPECT_EQ(req.page_size(), 7);
  EXPECT_EQ(req.page_token(), "t");
  EXPECT_EQ(req.state(), v1::JOB_STATE_FAILED);

  v1::GetTaskLogsRequest logs;
  ASSERT_TRUE(rest::ApplyQueryParams({{"offset", "9000000000"}, {"follow", ""}}, &logs).ok());
  EXPECT_EQ(logs.offset(), 9000000000);
  EXPECT_TRUE(logs.follow());
  const Status bad = rest::ApplyQueryParams({{"follow", "maybe"}}, &logs);
  EXPECT_EQ(bad.message(), "query parameter 'follow': expected true or false, got 'maybe'");

  v1::UpdatePoolRequest upd;
  ASSERT_TRUE(
      rest::ApplyQueryParams({{"update_mask", "allowedTenants,compute_overcommit"}}, &upd).ok());
  EXPECT_EQ(upd.update_mask().paths_size(), 2);
  EXPECT_EQ(upd.update_mask().paths(0), "allowed_tenants");
  const Status nested = rest::ApplyQueryParams({{"pool", "x"}}, &upd);
  EXPECT_NE(nested.message().find("unknown query parameter 'pool'; this route accepts: "
                                  "updateMask"),
            std::string::npos)
      << nested.message();
}

TEST(JsonMappingTest, PathParamsFillNestedFieldsAndMustAgreeWithTheBody) {
  v1::UpdatePoolRequest req;
  ASSERT_TRUE(rest::ApplyPathParam("pool.name", "gpu-a", &req).ok());
  EXPECT_EQ(req.pool().name(), "gpu-a");
  EXPECT_TRUE(rest::ApplyPathParam("pool.name", "gpu-a", &req).ok());
  EXPECT_EQ(rest::ApplyPathParam("pool.name", "gpu-b", &req).code(), StatusCode::kInvalidArgument);
}

TEST(JsonMappingTest, ErrorJsonEscapes) {
  EXPECT_EQ(rest::ErrorJson(Status::NotFound("a \"b\"\n\\c\x01")),
            R"({"code":5,"message":"a \"b\"\n\\c\u0001","details":[]})");
}

}  // namespace
}  // namespace gpupool::api
