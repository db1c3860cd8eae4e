#include "api/jwks.h"

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/param_build.h>
#include <openssl/pem.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <set>

#include "base/tls/openssl_ptr.h"

namespace gpupool::api {
namespace {

using nlohmann::json;

using tls::Bignum;
using tls::Bio;
using tls::Pkey;
using tls::PkeyCtx;
using ParamBld = tls::OpenSslPtr<OSSL_PARAM_BLD, OSSL_PARAM_BLD_free>;
using Params = tls::OpenSslPtr<OSSL_PARAM, OSSL_PARAM_free>;

Status Bad(const std::string& what) { return Status::InvalidArgument(what); }

// The string member `name` of `o`, or "" when absent; an error when present but not a string.
Result<std::string> StringMember(const json& o, const char* name, const std::string& where) {
  auto it = o.find(name);
  if (it == o.end()) return std::string();
  if (!it->is_string()) return Bad(where + "." + name + ": must be a string");
  return it->get<std::string>();
}

Result<std::string> DecodedMember(const json& o, const char* name, const std::string& where) {
  GPUPOOL_ASSIGN_OR_RETURN(std::string text, StringMember(o, name, where));
  if (text.empty()) return Bad(where + "." + name + ": missing");
  Result<std::string> bytes = Base64UrlDecode(text);
  if (!bytes.ok()) return Bad(where + "." + name + ": " + bytes.status().message());
  return bytes;
}

// A public key built from OSSL parameters: `type` "RSA" or "EC".
Result<Pkey> FromParams(const char* type, const OSSL_PARAM* params, const std::string& where) {
  PkeyCtx ctx(EVP_PKEY_CTX_new_from_name(nullptr, type, nullptr));
  EVP_PKEY* raw = nullptr;
  if (!ctx || EVP_PKEY_fromdata_init(ctx.get()) <= 0 ||
      EVP_PKEY_fromdata(ctx.get(), &raw, EVP_PKEY_PUBLIC_KEY, const_cast<OSSL_PARAM*>(params)) <=
          0) {
    return Bad(where + ": not a valid " + type + " public key");
  }
  Pkey key(raw);
  PkeyCtx check(EVP_PKEY_CTX_new_from_pkey(nullptr, key.get(), nullptr));
  if (!check || EVP_PKEY_public_check(check.get()) <= 0) {
    return Bad(where + ": not a valid " + type + " public key");
  }
  return key;
}

Result<Pkey> RsaKey(const json& k, const std::string& where) {
  GPUPOOL_ASSIGN_OR_RETURN(std::string n, DecodedMember(k, "n", where));
  GPUPOOL_ASSIGN_OR_RETURN(std::string e, DecodedMember(k, "e", where));
  Bignum bn_n(BN_bin2bn(reinterpret_cast<const unsigned char*>(n.data()),
                        static_cast<int>(n.size()), nullptr));
  Bignum bn_e(BN_bin2bn(reinterpret_cast<const unsigned char*>(e.data()),
                        static_cast<int>(e.size()), nullptr));
  ParamBld bld(OSSL_PARAM_BLD_new());
  if (!bn_n || !bn_e || !bld ||
      !OSSL_PARAM_BLD_push_BN(bld.get(), OSSL_PKEY_PARAM_RSA_N, bn_n.get()) ||
      !OSSL_PARAM_BLD_push_BN(bld.get(), OSSL_PKEY_PARAM_RSA_E, bn_e.get())) {
    return Status::Internal("OpenSSL: cannot build an RSA key");
  }
  Params params(OSSL_PARAM_BLD_to_param(bld.get()));
  if (!params) return Status::Internal("OpenSSL: cannot build an RSA key");
  GPUPOOL_ASSIGN_OR_RETURN(Pkey key, FromParams("RSA", params.get(), where));
  if (EVP_PKEY_bits(key.get()) < 2048) {
    return Bad(where + ": an RSA key of " + std::to_string(EVP_PKEY_bits(key.get())) +
               " bits; 2048 or more are required");
  }
  return key;
}

Result<Pkey> EcKey(const json& k, const std::string& where) {
  GPUPOOL_ASSIGN_OR_RETURN(std::string x, DecodedMember(k, "x", where));
  GPUPOOL_ASSIGN_OR_RETURN(std::string y, DecodedMember(k, "y", where));
  if (x.size() != 32 || y.size() != 32) {
    return Bad(where + ": x and y of a P-256 key are 32 bytes each");
  }
  std::string point = "\x04" + x + y;  // SEC 1 §2.3.3, uncompressed
  ParamBld bld(OSSL_PARAM_BLD_new());
  if (!bld ||
      !OSSL_PARAM_BLD_push_utf8_string(bld.get(), OSSL_PKEY_PARAM_GROUP_NAME, "prime256v1", 0) ||
      !OSSL_PARAM_BLD_push_octet_string(bld.get(), OSSL_PKEY_PARAM_PUB_KEY, point.data(),
                                        point.size())) {
    return Status::Internal("OpenSSL: cannot build an EC key");
  }
  Params params(OSSL_PARAM_BLD_to_param(bld.get()));
  if (!params) return Status::Internal("OpenSSL: cannot build an EC key");
  return FromParams("EC", params.get(), where);
}

Result<std::string> Pem(EVP_PKEY* key) {
  Bio bio(BIO_new(BIO_s_mem()));
  if (!bio || PEM_write_bio_PUBKEY(bio.get(), key) != 1) {
    return Status::Internal("OpenSSL: cannot write a public key");
  }
  char* data = nullptr;
  const long len = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(len));
}

}  // namespace

Result<std::string> Base64UrlDecode(std::string_view in) {
  while (!in.empty() && in.back() == '=') in.remove_suffix(1);
  std::string out;
  out.reserve(in.size() * 3 / 4);
  uint32_t acc = 0;
  int bits = 0;
  for (char c : in) {
    int v;
    if (c >= 'A' && c <= 'Z') {
      v = c - 'A';
    } else if (c >= 'a' && c <= 'z') {
      v = c - 'a' + 26;
    } else if (c >= '0' && c <= '9') {
      v = c - '0' + 52;
    } else if (c == '-') {
      v = 62;
    } else if (c == '_') {
      v = 63;
    } else {
      return Bad("not base64url");
    }
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xff));
    }
  }
  if (bits >= 6) return Bad("not base64url (a dangling character)");
  return out;
}

Result<std::vector<Jwk>> ParseJwks(std::string_view text) {
  json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) return Bad("JWK Set: not a JSON object");
  auto keys = doc.find("keys");
  if (keys == doc.end() || !keys->is_array()) return Bad("JWK Set: \"keys\" must be an array");
  std::vector<Jwk> out;
  std::set<std::string> kids;
  for (size_t i = 0; i < keys->size(); ++i) {
    const json& k = (*keys)[i];
    const std::string where = "JWK Set: keys[" + std::to_string(i) + "]";
    if (!k.is_object()) return Bad(where + ": not an object");
    GPUPOOL_ASSIGN_OR_RETURN(std::string kty, StringMember(k, "kty", where));
    GPUPOOL_ASSIGN_OR_RETURN(std::string use, StringMember(k, "use", where));
    GPUPOOL_ASSIGN_OR_RETURN(std::string alg, StringMember(k, "alg", where));
    GPUPOOL_ASSIGN_OR_RETURN(std::string kid, StringMember(k, "kid", where));
    GPUPOOL_ASSIGN_OR_RETURN(std::string crv, StringMember(k, "crv", where));
    if (!use.empty() && use != "sig") continue;
    Result<Pkey> key = Status::NotFound("");
    if (kty == "RSA" && (alg.empty() || alg == "RS256")) {
      key = RsaKey(k, where);
    } else if (kty == "EC" && crv == "P-256" && (alg.empty() || alg == "ES256")) {
      key = EcKey(k, where);
    } else {
      continue;  // a key this verifier does not use
    }
    if (!key.ok()) return key.status();
    if (!kids.insert(kid).second) {
      return Bad(where + ": kid '" + kid + "' is used by an earlier key too");
    }
    GPUPOOL_ASSIGN_OR_RETURN(std::string pem, Pem(key->get()));
    out.push_back(Jwk{kid, kty, std::move(pem)});
  }
  if (out.empty()) return Bad("JWK Set: no RS256 or ES256 signing key");
  return out;
}

Result<OidcDiscovery> ParseOidcDiscovery(std::string_view text,
                                         const std::string& expected_issuer) {
  json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  const std::string where = "discovery document";
  if (doc.is_discarded() || !doc.is_object()) return Bad(where + ": not a JSON object");
  OidcDiscovery d;
  GPUPOOL_ASSIGN_OR_RETURN(d.issuer, StringMember(doc, "issuer", where));
  if (d.issuer != expected_issuer) {
    return Bad(where + ".issuer: '" + d.issuer + "' is not the configured issuer '" +
               expected_issuer + "'");
  }
  GPUPOOL_ASSIGN_OR_RETURN(d.authorization_endpoint,
                           StringMember(doc, "authorization_endpoint", where));
  GPUPOOL_ASSIGN_OR_RETURN(d.token_endpoint, StringMember(doc, "token_endpoint", where));
  GPUPOOL_ASSIGN_OR_RETURN(d.jwks_uri, StringMember(doc, "jwks_uri", where));
  GPUPOOL_ASSIGN_OR_RETURN(d.end_session_endpoint,
                           StringMember(doc, "end_session_endpoint", where));
  for (const auto& [name, value] :
       {std::pair{"authorization_endpoint", &d.authorization_endpoint},
        std::pair{"token_endpoint", &d.token_endpoint}, std::pair{"jwks_uri", &d.jwks_uri}}) {
    if (value->empty()) return Bad(where + "." + name + ": missing");
  }
  return d;
}

Result<JwsHeader> PeekJwsHeader(std::string_view token) {
  const size_t dot = token.find('.');
  if (dot == std::string_view::npos) return Bad("not a compact JWS");
  GPUPOOL_ASSIGN_OR_RETURN(std::string header, Base64UrlDecode(token.substr(0, dot)));
  json doc = json::parse(header, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) return Bad("JWS header: not a JSON object");
  JwsHeader h;
  GPUPOOL_ASSIGN_OR_RETURN(h.kid, StringMember(doc, "kid", "JWS header"));
  GPUPOOL_ASSIGN_OR_RETURN(h.alg, StringMember(doc, "alg", "JWS header"));
  return h;
}

}  // namespace gpupool::api
