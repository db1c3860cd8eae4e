#include "cmd/daemon/oidc.h"

#include <fstream>
#include <sstream>

#include "api/oidc.h"
#include "base/log.h"

namespace gpupool {

Result<api::BearerVerifier> OidcVerifierOf(const DaemonConfig& config) {
  if (!config.oidc) return api::BearerVerifier();
  const DaemonConfig::Oidc& c = *config.oidc;
  std::ifstream in(c.public_key_file);
  if (!in) {
    return Status::InvalidArgument("auth.oidc.public_key_file: cannot read '" + c.public_key_file +
                                   "'");
  }
  std::stringstream pem;
  pem << in.rdbuf();
  api::OidcOptions o;
  o.issuer = c.issuer;
  o.audience = c.audience;
  o.public_key_pem = pem.str();
  o.tenant_claim = c.tenant_claim;
  o.role_claim = c.role_claim;
  o.algorithms = c.algorithms;
  o.clock_skew_s = c.clock_skew_s;
  GPUPOOL_ASSIGN_OR_RETURN(std::shared_ptr<const api::OidcVerifier> verifier,
                           api::OidcVerifier::Create(std::move(o)));
  LogInfo("gpupoold", "accepting OIDC bearer tokens",
          {{"issuer", c.issuer}, {"audience", c.audience}});
  return api::BearerVerifier(
      [verifier](std::string_view token) { return verifier->Verify(token); });
}

}  // namespace gpupool
