// The `auth.oidc` section made into the Authenticator's JWT verifier (api/oidc.h): reads the
// issuer's public key file and checks the options. A null verifier when the section is absent.
#pragma once

#include "api/auth.h"
#include "base/status.h"
#include "cmd/daemon/config.h"

namespace gpupool {

// INVALID_ARGUMENT naming `auth.oidc.<key>` or the key file when it cannot be used.
Result<api::BearerVerifier> OidcVerifierOf(const DaemonConfig& config);

}  // namespace gpupool
