#include "api/oidc.h"

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>
#include <jwt.h>
#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>

#include "scheduler/tenancy.h"

namespace gpupool::api {
namespace {

Status Invalid() { return Status::Unauthenticated("invalid bearer token"); }

struct JwtFree {
  void operator()(jwt_t* j) const { jwt_free(j); }
};
using Jwt = std::unique_ptr<jwt_t, JwtFree>;

// The key's type: EVP_PKEY_RSA, EVP_PKEY_EC, or 0 when `pem` is no public key.
int KeyType(const std::string& pem) {
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  if (bio == nullptr) return 0;
  EVP_PKEY* key = PEM_read_bio_PUBKEY(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  if (key == nullptr) return 0;
  const int type = EVP_PKEY_base_id(key);
  const int bits = EVP_PKEY_bits(key);
  EVP_PKEY_free(key);
  if (type == EVP_PKEY_EC && bits != 256) return 0;  // ES256 is P-256
  if (type == EVP_PKEY_RSA && bits < 2048) return 0;
  return type;
}

bool Printable(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return c > 0x20 && c < 0x7f; });
}

// A string claim, or "" when absent or not a string.
std::string StringClaim(jwt_t* jwt, const std::string& name) {
  errno = 0;
  const char* v = jwt_get_grant(jwt, name.c_str());
  return v == nullptr ? std::string() : std::string(v);
}

// An integer claim; false when absent or not an integer.
bool IntClaim(jwt_t* jwt, const char* name, int64_t* out) {
  errno = 0;
  const long v = jwt_get_grant_int(jwt, name);
  if (errno != 0) return false;
  *out = v;
  return true;
}

bool AudienceMatches(jwt_t* jwt, const std::string& audience) {
  const std::string single = StringClaim(jwt, "aud");
  if (!single.empty()) return single == audience;
  char* json = jwt_get_grants_json(jwt, "aud");
  if (json == nullptr) return false;
  google::protobuf::ListValue list;
  const bool parsed = google::protobuf::util::JsonStringToMessage(json, &list).ok();
  free(json);  // NOLINT: allocated by libjwt
  if (!parsed) return false;
  for (const auto& v : list.values()) {
    if (v.kind_case() == google::protobuf::Value::kStringValue && v.string_value() == audience) {
      return true;
    }
  }
  return false;
}

}  // namespace

Result<std::shared_ptr<const OidcVerifier>> OidcVerifier::Create(OidcOptions options,
                                                                 std::function<int64_t()> now_s) {
  auto bad = [](const std::string& what) { return Status::InvalidArgument("auth.oidc." + what); };
  if (options.issuer.empty()) return bad("issuer: must be set");
  if (options.audience.empty()) return bad("audience: must be set");
  if (options.tenant_claim.empty()) return bad("tenant_claim: must not be empty");
  if (options.role_claim.empty()) return bad("role_claim: must not be empty");
  if (options.clock_skew_s < 0 || options.clock_skew_s > 300) {
    return bad("clock_skew_s: must be between 0 and 300, got " +
               std::to_string(options.clock_skew_s));
  }
  if (options.algorithms.empty()) return bad("algorithms: must name RS256 or ES256");
  for (const std::string& a : options.algorithms) {
    if (a != "RS256" && a != "ES256") {
      return bad("algorithms: '" + a + "' is not supported: use RS256 or ES256");
    }
  }
  auto verifier = std::shared_ptr<OidcVerifier>(new OidcVerifier());
  if (options.keys && !options.public_key_pem.empty()) {
    return bad("public_key_file: set it, or take the keys from the issuer's JWKS, not both");
  }
  if (!options.keys) {
    const int key_type = KeyType(options.public_key_pem);
    if (key_type == 0) {
      return bad(
          "public_key_file: not a PEM public key (\"-----BEGIN PUBLIC KEY-----\") of RSA (2048 "
          "bits or more) or EC P-256");
    }
    verifier->fixed_.push_back(
        Jwk{"", key_type == EVP_PKEY_RSA ? "RSA" : "EC", options.public_key_pem});
    verifier->options_.algorithms = options.algorithms;
    if (verifier->AlgFor(verifier->fixed_.front()) < 0) {
      return bad("algorithms: none of them fits the key (an RSA key signs RS256, an EC key ES256)");
    }
  }
  verifier->options_ = std::move(options);
  verifier->now_s_ = now_s ? std::move(now_s) : [] {
    return static_cast<int64_t>(std::chrono::duration_cast<std::chrono::seconds>(
                                    std::chrono::system_clock::now().time_since_epoch())
                                    .count());
  };
  return std::shared_ptr<const OidcVerifier>(std::move(verifier));
}

Result<CallContext> OidcVerifier::Verify(std::string_view token) const {
  if (token.empty() || token.size() > 16 * 1024) return Invalid();
  const std::string text(token);  // NUL-terminated for libjwt
  if (text.find('\0') != std::string::npos) return Invalid();
  Result<JwsHeader> header = PeekJwsHeader(text);
  if (!header.ok()) return Invalid();
  const std::vector<Jwk> keys = options_.keys ? options_.keys(header->kid) : fixed_;
  Jwt jwt;
  for (const Jwk& key : keys) {
    const int alg = AlgFor(key);
    // The algorithm is ours to choose, never the token's: it must be the one this key signs
    // with, so a token verified under any other (none, or HS256 keyed with our public key) is
    // refused here.
    if (alg < 0 || header->alg != jwt_alg_str(static_cast<jwt_alg_t>(alg))) continue;
    jwt_t* raw = nullptr;
    if (jwt_decode(&raw, text.c_str(), reinterpret_cast<const unsigned char*>(key.pem.data()),
                   static_cast<int>(key.pem.size())) != 0 ||
        raw == nullptr) {
      continue;
    }
    Jwt decoded(raw);
    if (static_cast<int>(jwt_get_alg(decoded.get())) != alg) continue;
    jwt = std::move(decoded);
    break;
  }
  if (!jwt) return Invalid();
  if (StringClaim(jwt.get(), "iss") != options_.issuer) return Invalid();
  if (!AudienceMatches(jwt.get(), options_.audience) &&
      (options_.console_client_id.empty() ||
       !AudienceMatches(jwt.get(), options_.console_client_id))) {
    return Invalid();
  }
  const int64_t now = now_s_();
  int64_t exp = 0, nbf = 0;
  if (!IntClaim(jwt.get(), "exp", &exp) || now >= exp + options_.clock_skew_s) return Invalid();
  if (IntClaim(jwt.get(), "nbf", &nbf) && now + options_.clock_skew_s < nbf) return Invalid();
  const std::string sub = StringClaim(jwt.get(), "sub");
  if (sub.empty() || sub.size() > 255 || !Printable(sub)) return Invalid();
  Result<Role> role = ParseRole(StringClaim(jwt.get(), options_.role_claim));
  if (!role.ok()) return Invalid();
  if (*role == Role::kAdmin) return CallContext::Admin("oidc:" + sub);
  const std::string tenant = StringClaim(jwt.get(), options_.tenant_claim);
  if (tenant.empty() || !ValidateTenantPath(tenant, "tenant").ok()) return Invalid();
  return CallContext::Of("oidc:" + sub, tenant, *role);
}

int OidcVerifier::AlgFor(const Jwk& key) const {
  const char* wanted = key.kty == "RSA" ? "RS256" : key.kty == "EC" ? "ES256" : "";
  const auto& allowed = options_.algorithms;
  if (std::find(allowed.begin(), allowed.end(), wanted) == allowed.end()) return -1;
  return key.kty == "RSA" ? JWT_ALG_RS256 : JWT_ALG_ES256;
}

}  // namespace gpupool::api
