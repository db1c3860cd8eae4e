// The identity provider's published metadata, parsed: its discovery document (OpenID Connect
// Discovery 1.0, §3 and §4.3) and its signing keys (a JSON Web Key Set, RFC 7517 §5, with the
// RSA and EC members of RFC 7518 §6.2–6.3). Each usable key is turned into the PEM public key the
// JWT verifier takes (api/oidc.h).
//
// Thread safety: free functions, no state.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace gpupool::api {

// A signing key of the provider.
struct Jwk {
  std::string kid;  // "" when the set gives none (then only a token without a kid may use it)
  std::string kty;  // "RSA" or "EC"
  std::string pem;  // "-----BEGIN PUBLIC KEY-----…": the key as OpenSSL reads it
};

// The keys of a JWK Set that can verify RS256 or ES256 signatures: kty RSA (2048 bits or more)
// or EC on P-256, with "use" absent or "sig" and "alg" absent or RS256/ES256. Other keys
// (encryption keys, other curves and algorithms) are skipped, as RFC 7517 §5 asks of members a
// reader does not understand. INVALID_ARGUMENT naming the problem when `json` is not a JWK Set,
// when a usable-looking key is malformed (bad base64url, a point off the curve, a short RSA key),
// when two keys share a kid, or when no key is left.
Result<std::vector<Jwk>> ParseJwks(std::string_view json);

// What gpupoold and the console read of a provider's discovery document.
struct OidcDiscovery {
  std::string issuer;
  std::string authorization_endpoint;
  std::string token_endpoint;
  std::string jwks_uri;
  std::string end_session_endpoint = {};  // RP-initiated logout; "" when the provider has none
};

// Parses `json`, the document at <issuer>/.well-known/openid-configuration. Its "issuer" must be
// exactly `expected_issuer` (Discovery §4.3: otherwise the document must not be used), and
// authorization_endpoint, token_endpoint and jwks_uri must be present; end_session_endpoint
// (OpenID Connect RP-Initiated Logout 1.0) is read when there is one. INVALID_ARGUMENT naming the
// member otherwise.
Result<OidcDiscovery> ParseOidcDiscovery(std::string_view json, const std::string& expected_issuer);

// The header of a compact JWS (`token` = header.payload.signature), decoded but not verified:
// the key id and algorithm a verifier picks its key by. Empty strings when absent; an error when
// the header is not base64url-encoded JSON.
struct JwsHeader {
  std::string kid;
  std::string alg;
};
Result<JwsHeader> PeekJwsHeader(std::string_view token);

// RFC 4648 §5 base64url (padding optional); INVALID_ARGUMENT on any other character.
Result<std::string> Base64UrlDecode(std::string_view in);

}  // namespace gpupool::api
