#include "cmd/daemon/oidc.h"

#include "api/oidc.h"
#include "base/log.h"
#include "pool/yaml_error.h"

namespace gpupool {
namespace {

// The file `auth.oidc.<key>` names; INVALID_ARGUMENT naming the key when it cannot be read.
Result<std::string> ReadFile(const std::string& path, const std::string& key) {
  Result<std::string> text = ReadTextFile(path);
  if (!text.ok()) {
    return Status::InvalidArgument("auth.oidc." + key + ": cannot read '" + path + "'");
  }
  return text;
}

}  // namespace

Result<OidcSetup> SetUpOidc(const DaemonConfig& config) {
  OidcSetup out;
  if (!config.oidc) return out;
  const DaemonConfig::Oidc& c = *config.oidc;
  api::OidcOptions o;
  o.issuer = c.issuer;
  o.audience = c.audience;
  o.console_client_id = c.console_client_id;
  o.tenant_claim = c.tenant_claim;
  o.role_claim = c.role_claim;
  o.algorithms = c.algorithms;
  o.clock_skew_s = c.clock_skew_s;
  if (!c.public_key_file.empty()) {
    GPUPOOL_ASSIGN_OR_RETURN(o.public_key_pem, ReadFile(c.public_key_file, "public_key_file"));
  }
  std::string ca_pem;
  if (!c.ca_file.empty()) {
    GPUPOOL_ASSIGN_OR_RETURN(ca_pem, ReadFile(c.ca_file, "ca_file"));
  }
  if (c.public_key_file.empty() || !c.console_client_id.empty()) {
    api::JwksCacheOptions jo;
    jo.issuer = c.issuer;
    jo.refresh = std::chrono::seconds(c.jwks_refresh_s);
    out.keys = std::make_shared<api::JwksCache>(
        jo, api::HttpFetcher(std::chrono::seconds(10), std::move(ca_pem)));
  }
  if (c.public_key_file.empty()) {
    o.keys = [keys = out.keys](std::string_view kid) { return keys->KeysFor(kid); };
  }
  GPUPOOL_ASSIGN_OR_RETURN(std::shared_ptr<const api::OidcVerifier> verifier,
                           api::OidcVerifier::Create(std::move(o)));
  if (!c.console_client_id.empty()) {
    std::string scopes;
    for (const std::string& s : c.console_scopes) scopes += (scopes.empty() ? "" : " ") + s;
    out.sign_in = [keys = out.keys, client = c.console_client_id,
                   scopes]() -> Result<std::optional<api::rest::ConsoleSignIn>> {
      GPUPOOL_ASSIGN_OR_RETURN(api::OidcDiscovery d, keys->Discovery());
      return std::optional<api::rest::ConsoleSignIn>(
          api::rest::ConsoleSignIn{d.issuer, client, d.authorization_endpoint, d.token_endpoint,
                                   scopes, d.end_session_endpoint});
    };
  }
  if (out.keys) out.keys->Start();
  LogInfo("gpupoold", "accepting OIDC bearer tokens",
          {{"issuer", c.issuer},
           {"audience", c.audience},
           {"keys", c.public_key_file.empty() ? "the issuer's JWKS" : c.public_key_file},
           {"console_sign_in", c.console_client_id.empty() ? "off" : c.console_client_id}});
  out.verifier = [verifier](std::string_view token) { return verifier->Verify(token); };
  return out;
}

}  // namespace gpupool
