// Agents with their own identity, over real TLS on loopback: gpupoold's CA (files 0600), join
// with a join token and a CSR, mutual TLS with the node's certificate, a certificate for node A
// registering as node B refused, the shared node token unable to impersonate an enrolled node,
// rotation retiring the old certificate, revocation by an admin, and state across a restart.
#include "api/tls/node_identity.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <memory>
#include <mutex>
#include <vector>

#include "api/auth.h"
#include "api/tls/enroll_service.h"
#include "base/tls/pki.h"
#include "gpupool/v1/agent.grpc.pb.h"
#include "store/memory_join_tokens.h"
#include "store/memory_node_enrolments.h"
#include "tests/api/recording_audit.h"
#include "tests/api/service_harness.h"
#include "tests/support/status_macros.h"

namespace gpupool::api {
namespace {

using testing::ServiceHarness;
using namespace std::chrono_literals;

constexpr char kJoinToken[] = "join-token-0123456789";
constexpr char kNodeToken[] = "node-token-0123456789";
constexpr char kAdminToken[] = "admin-token-0123456789";

unsigned Mode(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return st.st_mode & 0777;
}

v1::Register Registration(const std::string& node, const std::string& token = "") {
  v1::Register r;
  r.set_node_name(node);
  r.set_pool("gpu-a");
  r.set_token(token);
  r.set_cpu_milli(64'000);
  r.set_memory_mib(512 * 1024);
  v1::DeviceInfo* d = r.add_devices();
  d->set_uuid("GPU-" + node + "-0");
  d->set_model("H100-SXM");
  d->set_vram_mib(81'920);
  d->set_milli_tflops(989'000);
  d->set_healthy(true);
  return r;
}

struct Identity {
  std::string key_pem;
  std::string cert_pem;
};

using testing::RecordingAudit;

class NodeIdentityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/node_identity_" + std::to_string(::getpid()) + "/tls";
    std::filesystem::remove_all(dir_);
    Result<tls::CertAuthority> ca = tls::CertAuthority::LoadOrCreate(dir_);
    ASSERT_TRUE(ca.ok()) << ca.status().ToString();
    ca_ = std::make_unique<tls::CertAuthority>(std::move(ca).value());
    OpenIdentities();
    AgentHubOptions hub;
    hub.node_tokens = {kNodeToken};
    hub.identities = ids_.get();
    h_ = std::make_unique<ServiceHarness>(hub);
    h_->hub.AttachAudit(&audit_);
    ASSERT_TRUE(h_->CreatePool("gpu-a").first.ok());
    Result<Authenticator> auth = Authenticator::Create({{kAdminToken, "ops", true}});
    ASSERT_TRUE(auth.ok());
    auth_ = std::move(auth).value();
    enroll_ = std::make_unique<tls::EnrollService>(
        ids_.get(), &auth_,
        [this](const auto& n) {
          h_->hub.Disconnect(n, Status::PermissionDenied("node '" + n + "': certificate revoked"));
        },
        &audit_);
    grpc::SslServerCredentialsOptions ssl(GRPC_SSL_REQUEST_CLIENT_CERTIFICATE_AND_VERIFY);
    ssl.pem_root_certs = ca_->ca_pem();
    ssl.pem_key_cert_pairs.push_back({ca_->server_key_pem(), ca_->server_cert_pem()});
    grpc::ServerBuilder b;
    b.AddListeningPort("127.0.0.1:0", grpc::SslServerCredentials(ssl), &port_);
    b.RegisterService(&h_->hub);
    b.RegisterService(enroll_.get());
    server_ = b.BuildAndStart();
    ASSERT_NE(server_, nullptr);
  }
  void TearDown() override {
    if (server_) server_->Shutdown(std::chrono::system_clock::now() + 2s);
    h_.reset();
  }
  void OpenIdentities() {
    tls::NodeIdentityOptions o;
    o.join_tokens = {kJoinToken};
    o.created_tokens = &join_tokens_;
    o.clock = &clock_;
    Result<std::unique_ptr<tls::NodeIdentities>> ids =
        tls::NodeIdentities::Open(ca_.get(), &enrolments_, o);
    ASSERT_TRUE(ids.ok()) << ids.status().ToString();
    ids_ = std::move(ids).value();
  }

  // A channel that trusts gpupoold's CA, presenting `who` when given.
  std::shared_ptr<grpc::Channel> Channel(const Identity* who = nullptr) {
    grpc::SslCredentialsOptions o;
    o.pem_root_certs = ca_->ca_pem();
    if (who != nullptr) {
      o.pem_private_key = who->key_pem;
      o.pem_cert_chain = who->cert_pem;
    }
    return grpc::CreateChannel("127.0.0.1:" + std::to_string(port_), grpc::SslCredentials(o));
  }

  Status Join(const std::string& node, const std::string& token, Identity* out) {
    Result<tls::KeyAndCsr> kc = tls::NewKeyAndCsr("whatever-the-agent-asks");
    EXPECT_TRUE(kc.ok());
    v1::JoinRequest req;
    req.set_node_name(node);
    req.set_token(token);
    req.set_csr_pem(kc->csr_pem);
    v1::JoinResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 30s);
    grpc::Status s = v1::NodeEnrollService::NewStub(Channel())->Join(&ctx, req, &resp);
    if (s.ok() && out != nullptr) *out = Identity{kc->key_pem, resp.cert_pem()};
    if (s.ok()) {
      EXPECT_EQ(resp.ca_pem(), ca_->ca_pem());
    }
    return s.ok() ? Status::Ok()
                  : Status(static_cast<StatusCode>(s.error_code()), s.error_message());
  }

  // Opens an agent stream with `who`'s certificate (or none), registers `reg` and returns the
  // stream's outcome: OK once a RegisterAck arrived, else the status it ended with.
  Status Register(const Identity* who, const v1::Register& reg) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 30s);
    auto stream = v1::AgentService::NewStub(Channel(who))->Connect(&ctx);
    v1::AgentMessage m;
    *m.mutable_register_() = reg;
    stream->Write(m);
    v1::SchedulerMessage in;
    if (stream->Read(&in) && in.has_register_ack()) {
      ctx.TryCancel();
      stream->Finish();
      return Status::Ok();
    }
    grpc::Status s = stream->Finish();
    return Status(static_cast<StatusCode>(s.error_code()), s.error_message());
  }

  // An admin's call to the enrolment service: its status and reply.
  template <typename Req, typename Resp, typename Fn>
  Status AdminCall(Fn fn, const Req& req, Resp* resp, const std::string& token = kAdminToken) {
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer " + token);
    auto stub = v1::NodeEnrollService::NewStub(Channel());
    grpc::Status s = ((*stub).*fn)(&ctx, req, resp);
    return s.ok() ? Status::Ok()
                  : Status(static_cast<StatusCode>(s.error_code()), s.error_message());
  }
  Result<v1::CreateJoinTokenResponse> CreateToken(int64_t ttl_s, int64_t uses) {
    v1::CreateJoinTokenRequest req;
    req.set_ttl_seconds(ttl_s);
    req.set_max_uses(uses);
    req.set_note("rack 12");
    v1::CreateJoinTokenResponse resp;
    GPUPOOL_RETURN_IF_ERROR(AdminCall(&v1::NodeEnrollService::Stub::CreateJoinToken, req, &resp));
    return resp;
  }
  std::vector<v1::JoinToken> ListTokens() {
    v1::ListJoinTokensResponse resp;
    EXPECT_TRUE(
        AdminCall(&v1::NodeEnrollService::Stub::ListJoinTokens, v1::ListJoinTokensRequest(), &resp)
            .ok());
    return {resp.join_tokens().begin(), resp.join_tokens().end()};
  }

  RecordingAudit audit_;
  ManualClock clock_{1'700'000'000'000'000};
  MemoryJoinTokens join_tokens_;
  std::string dir_;
  std::unique_ptr<tls::CertAuthority> ca_;
  MemoryNodeEnrolments enrolments_;  // the replicas' shared table (PostgreSQL in gpupoold)
  std::unique_ptr<tls::NodeIdentities> ids_;
  std::unique_ptr<ServiceHarness> h_;
  Authenticator auth_;
  std::unique_ptr<tls::EnrollService> enroll_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

TEST_F(NodeIdentityTest, TheCaIsCreatedOnFirstStartWithPrivateFiles) {
  EXPECT_EQ(Mode(dir_), 0700u);
  for (const char* f : {"ca.crt", "ca.key", "server.crt", "server.key"}) {
    EXPECT_EQ(Mode(dir_ + "/" + f), 0600u) << f;
  }
  // A second start loads the same CA rather than making a new one.
  Result<tls::CertAuthority> again = tls::CertAuthority::LoadOrCreate(dir_);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->ca_pem(), ca_->ca_pem());
  EXPECT_EQ(again->server_cert_pem(), ca_->server_cert_pem());
}

TEST_F(NodeIdentityTest, ANodeJoinsOnceAndRegistersWithItsOwnCertificate) {
  Identity a;
  EXPECT_EQ(Join("node-a", "wrong-token-0123456789", &a).code(), StatusCode::kUnauthenticated);
  ASSERT_TRUE(Join("node-a", kJoinToken, &a).ok());
  Result<tls::CertInfo> info = tls::ParseCert(a.cert_pem);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->common_name, "node-a");  // the CA wrote the name, not the CSR
  // The join token cannot take over an enrolled name.
  Status again = Join("node-a", kJoinToken, nullptr);
  EXPECT_EQ(again.code(), StatusCode::kPermissionDenied);
  EXPECT_NE(again.message().find("already enrolled"), std::string::npos) << again.message();

  EXPECT_TRUE(Register(&a, Registration("node-a")).ok());
  // A's certificate cannot register as B.
  Status as_b = Register(&a, Registration("node-b"));
  EXPECT_EQ(as_b.code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(as_b.message(), "the certificate is for node 'node-a', not 'node-b'");
  // Nor can the shared node token register as the enrolled node A.
  Status by_token = Register(nullptr, Registration("node-a", kNodeToken));
  EXPECT_EQ(by_token.code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(by_token.message(), "node 'node-a' is enrolled: connect with its certificate");
  // Nor can anyone register a node that is not enrolled without a certificate: not with the
  // node token, not with the join token, not with nothing (the anonymous-node hole, issue 30).
  for (const char* token : {kNodeToken, kJoinToken, ""}) {
    Status anon = Register(nullptr, Registration("node-c", token));
    EXPECT_EQ(anon.code(), StatusCode::kUnauthenticated) << token;
    EXPECT_EQ(anon.message(), "agents must connect with a node certificate (join first)");
  }

  // Every registration is audited, the refused ones with who tried: A's certificate as B, no
  // credential as A and as C.
  const std::vector<AuditEntry> regs = audit_.Of("RegisterNode");
  ASSERT_EQ(regs.size(), 6u);
  EXPECT_EQ(regs[0].resource, "node/node-a");
  EXPECT_EQ(regs[0].code, StatusCode::kOk);
  EXPECT_EQ(regs[0].actor.principal, "node-a");
  EXPECT_EQ(regs[0].actor.key_id.rfind("cert:", 0), 0u) << regs[0].actor.key_id;
  EXPECT_EQ(regs[0].actor.role, "node");
  EXPECT_EQ(regs[1].resource, "node/node-b");
  EXPECT_EQ(regs[1].code, StatusCode::kPermissionDenied);
  EXPECT_EQ(regs[1].actor.principal, "node-a");
  EXPECT_EQ(regs[1].message, "the certificate is for node 'node-a', not 'node-b'");
  EXPECT_NE(regs[1].source.find("127.0.0.1"), std::string::npos) << regs[1].source;
  EXPECT_EQ(regs[2].resource, "node/node-a");
  EXPECT_EQ(regs[2].code, StatusCode::kPermissionDenied);
  EXPECT_EQ(regs[2].actor.key_id, "none");
  for (size_t i = 3; i < 6; ++i) {
    EXPECT_EQ(regs[i].resource, "node/node-c");
    EXPECT_EQ(regs[i].code, StatusCode::kUnauthenticated);
    EXPECT_EQ(regs[i].actor.key_id, "none");
  }
}

TEST_F(NodeIdentityTest, RenewRetiresTheOldCertificateAndRevokeShutsTheNodeOut) {
  Identity a1;
  ASSERT_TRUE(Join("node-a", kJoinToken, &a1).ok());
  // Renew over mutual TLS with the current certificate.
  Result<tls::KeyAndCsr> kc = tls::NewKeyAndCsr("node-a");
  ASSERT_TRUE(kc.ok());
  v1::RenewRequest renew;
  renew.set_csr_pem(kc->csr_pem);
  v1::JoinResponse resp;
  {
    grpc::ClientContext ctx;
    ASSERT_TRUE(v1::NodeEnrollService::NewStub(Channel(&a1))->Renew(&ctx, renew, &resp).ok());
  }
  Identity a2{kc->key_pem, resp.cert_pem()};
  {
    grpc::ClientContext ctx;  // without a certificate there is nothing to renew
    EXPECT_EQ(v1::NodeEnrollService::NewStub(Channel())->Renew(&ctx, renew, &resp).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
  }
  EXPECT_EQ(Register(&a1, Registration("node-a")).code(), StatusCode::kUnauthenticated);
  EXPECT_TRUE(Register(&a2, Registration("node-a")).ok());

  // Revoke: admins only.
  v1::RevokeNodeRequest revoke;
  revoke.set_node_name("node-a");
  v1::RevokeNodeResponse out;
  {
    grpc::ClientContext ctx;
    EXPECT_EQ(
        v1::NodeEnrollService::NewStub(Channel())->RevokeNode(&ctx, revoke, &out).error_code(),
        grpc::StatusCode::UNAUTHENTICATED);
  }
  {
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", std::string("Bearer ") + kAdminToken);
    ASSERT_TRUE(v1::NodeEnrollService::NewStub(Channel())->RevokeNode(&ctx, revoke, &out).ok());
  }
  Status revoked = Register(&a2, Registration("node-a"));
  EXPECT_EQ(revoked.code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(revoked.message(), "node 'node-a': the certificate is revoked");

  // Bindings and revocations survive a restart; a revoked name may join again.
  OpenIdentities();
  EXPECT_FALSE(ids_->Enrolled("node-a"));
  Result<tls::CertInfo> info = tls::ParseCert(a2.cert_pem);
  ASSERT_TRUE(info.ok());
  tls::PeerCert peer{info->common_name, info->serial_hex};
  EXPECT_EQ(ids_->CheckRegister(&peer, "node-a").code(), StatusCode::kPermissionDenied);
}

// An install from before the enrolments moved into the database: its `<tls-dir>/nodes` file is
// imported once (rows the store already has win), then renamed so it is not read again.
TEST_F(NodeIdentityTest, AnOlderInstallsNodesFileIsImportedOnce) {
  ASSERT_TRUE(enrolments_.Bind({"node-b", "bb", 2000, false}, "").ok());
  ASSERT_TRUE(tls::WritePrivateFile(dir_ + "/nodes",
                                    "node-a aa 1000 0\nnode-b 0b 1000 1\nnode-c cc 1000 1\n")
                  .ok());
  OpenIdentities();
  EXPECT_TRUE(ids_->Enrolled("node-a"));
  EXPECT_TRUE(ids_->Enrolled("node-b"));  // the store's row, not the file's revoked one
  EXPECT_FALSE(ids_->Enrolled("node-c"));
  const tls::PeerCert a{"node-a", "aa"};
  EXPECT_TRUE(ids_->CheckRegister(&a, "node-a").ok());
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/nodes"));
  EXPECT_TRUE(std::filesystem::exists(dir_ + "/nodes.imported"));

  // A malformed file is refused with its name and line, and stays where it is.
  ASSERT_TRUE(tls::WritePrivateFile(dir_ + "/nodes", "node-d dd 1000 0\nnode-e\n").ok());
  Result<std::unique_ptr<tls::NodeIdentities>> bad =
      tls::NodeIdentities::Open(ca_.get(), &enrolments_, {});
  EXPECT_EQ(bad.status().code(), StatusCode::kInternal);
  EXPECT_NE(bad.status().message().find("/nodes:2: malformed line 'node-e'"), std::string::npos)
      << bad.status().message();
  EXPECT_TRUE(std::filesystem::exists(dir_ + "/nodes"));
}

TEST(PkiTest, BadCsrsAreRefused) {
  const std::string dir = ::testing::TempDir() + "/pki_" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  Result<tls::CertAuthority> ca = tls::CertAuthority::LoadOrCreate(dir);
  ASSERT_TRUE(ca.ok());
  EXPECT_EQ(ca->SignNodeCsr("not a csr", "n", 3600s).status().code(), StatusCode::kInvalidArgument);
  Result<tls::KeyAndCsr> kc = tls::NewKeyAndCsr("n");
  ASSERT_TRUE(kc.ok());
  std::string tampered = kc->csr_pem;
  tampered[tampered.size() / 2] = tampered[tampered.size() / 2] == 'A' ? 'B' : 'A';
  EXPECT_FALSE(ca->SignNodeCsr(tampered, "n", 3600s).ok());
  Result<std::string> ok = ca->SignNodeCsr(kc->csr_pem, "n", 3600s);
  ASSERT_TRUE(ok.ok());
  Result<tls::CertInfo> info = tls::ParseCert(*ok);
  ASSERT_TRUE(info.ok());
  EXPECT_NEAR(info->not_after_s - info->not_before_s, 3600 + 300, 5);
}

TEST_F(NodeIdentityTest, ACreatedJoinTokenEnrolsUpToItsUsesThenIsRefusedSayingWhy) {
  ASSERT_OK_AND_ASSIGN(v1::CreateJoinTokenResponse created, CreateToken(3600, 2));
  const std::string token = created.token();
  EXPECT_EQ(token.rfind("gpj_" + created.join_token().id() + "_", 0), 0u) << token;
  EXPECT_EQ(created.join_token().state(), "usable");
  EXPECT_EQ(created.join_token().created_by(), "token:ops");
  // The store keeps a digest, never the token.
  ASSERT_OK_AND_ASSIGN(auto stored, join_tokens_.Get(created.join_token().id()));
  ASSERT_TRUE(stored.has_value());
  EXPECT_EQ(token.find(stored->secret_sha256), std::string::npos);

  Identity a, b;
  ASSERT_OK(Join("node-a", token, &a));
  ASSERT_OK(Join("node-b", token, &b));
  EXPECT_TRUE(Register(&a, Registration("node-a")).ok());
  Status third = Join("node-c", token, nullptr);
  EXPECT_EQ(third.code(), StatusCode::kUnauthenticated);
  EXPECT_NE(third.message().find("has been used 2 of 2 times"), std::string::npos)
      << third.ToString();
  std::vector<v1::JoinToken> listed = ListTokens();
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].uses(), 2);
  EXPECT_EQ(listed[0].state(), "used-up");
  EXPECT_EQ(listed[0].last_node(), "node-b");
  // The audit log names the token each node joined with, and why one was refused.
  std::vector<AuditEntry> joins = audit_.Of("Join");
  ASSERT_EQ(joins.size(), 3u);
  EXPECT_EQ(joins[0].actor.key_id, "join-token:" + created.join_token().id());
  EXPECT_EQ(joins[0].resource, "node/node-a");
  EXPECT_EQ(joins[2].code, StatusCode::kUnauthenticated);
  EXPECT_NE(joins[2].message.find("used 2 of 2"), std::string::npos);
  EXPECT_EQ(audit_.Of("CreateJoinToken").size(), 1u);
}

TEST_F(NodeIdentityTest, AnExpiredRevokedOrForgedJoinTokenIsRefusedAndAudited) {
  ASSERT_OK_AND_ASSIGN(v1::CreateJoinTokenResponse expiring, CreateToken(60, 0));
  clock_.Advance(61'000'000);
  Status expired = Join("node-a", expiring.token(), nullptr);
  EXPECT_EQ(expired.code(), StatusCode::kUnauthenticated);
  EXPECT_NE(expired.message().find("expired at"), std::string::npos) << expired.ToString();

  ASSERT_OK_AND_ASSIGN(v1::CreateJoinTokenResponse revoked, CreateToken(0, 0));
  v1::RevokeJoinTokenRequest rv;
  rv.set_id(revoked.join_token().id());
  v1::RevokeJoinTokenResponse rv_out;
  ASSERT_OK(AdminCall(&v1::NodeEnrollService::Stub::RevokeJoinToken, rv, &rv_out));
  Status was_revoked = Join("node-a", revoked.token(), nullptr);
  EXPECT_EQ(was_revoked.code(), StatusCode::kUnauthenticated);
  EXPECT_NE(was_revoked.message().find("was revoked"), std::string::npos) << was_revoked.ToString();

  // A right id with a wrong secret, or an unknown id: one answer that reveals nothing.
  std::string forged = revoked.token();
  forged.back() = forged.back() == '0' ? '1' : '0';
  for (const std::string& t : {forged, std::string("gpj_000000000000_") + std::string(64, 'a'),
                               std::string("gpj_short")}) {
    Status s = Join("node-a", t, nullptr);
    EXPECT_EQ(s.code(), StatusCode::kUnauthenticated) << t;
    EXPECT_EQ(s.message(), "the join token is not accepted") << t;
  }
  for (const AuditEntry& e : audit_.Of("Join")) {
    EXPECT_EQ(e.code, StatusCode::kUnauthenticated);
    EXPECT_EQ(e.message.find("gpj_"), std::string::npos) << "a token reached the audit log";
  }
  EXPECT_EQ(audit_.Of("RevokeJoinToken").size(), 1u);

  // Only admins manage tokens; bad limits are refused naming the field.
  v1::CreateJoinTokenResponse out;
  v1::CreateJoinTokenRequest too_long;
  too_long.set_ttl_seconds(400 * 86'400);
  Status bad = AdminCall(&v1::NodeEnrollService::Stub::CreateJoinToken, too_long, &out);
  EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.message().find("ttl_seconds"), std::string::npos) << bad.ToString();
  Status anon = AdminCall(&v1::NodeEnrollService::Stub::CreateJoinToken,
                          v1::CreateJoinTokenRequest(), &out, "nobody-0123456789");
  EXPECT_EQ(anon.code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(audit_.Of("CreateJoinToken").back().code, StatusCode::kUnauthenticated);
}

TEST_F(NodeIdentityTest, TheStaticTokenStillJoinsAndIsAuditedAsSuch) {
  ASSERT_OK(Join("node-a", kJoinToken, nullptr));
  std::vector<AuditEntry> joins = audit_.Of("Join");
  ASSERT_EQ(joins.size(), 1u);
  EXPECT_EQ(joins[0].actor.key_id, "static-join-token");
  EXPECT_EQ(Join("node-b", "", nullptr).code(), StatusCode::kUnauthenticated);
}

}  // namespace
}  // namespace gpupool::api
