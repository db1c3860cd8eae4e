// The `auth.oidc` section made into the Authenticator's JWT verifier (api/oidc.h): with
// public_key_file, that one key, read and checked at start; without it, the keys the issuer
// publishes, fetched and kept fresh by a JwksCache (api/jwks_cache.h). With `console`, also the
// console's single sign-on (api/rest/console_sign_in.h), from the issuer's discovery document.
#pragma once

#include <memory>

#include "api/auth.h"
#include "api/jwks_cache.h"
#include "api/rest/console_sign_in.h"
#include "base/status.h"
#include "cmd/daemon/config.h"

namespace gpupool {

struct OidcSetup {
  api::BearerVerifier verifier;            // null when auth.oidc is absent
  std::shared_ptr<api::JwksCache> keys;    // started; null with a fixed key or no auth.oidc
  api::rest::ConsoleSignInSource sign_in;  // null without auth.oidc.console
};

// INVALID_ARGUMENT naming `auth.oidc.<key>` or the file when it cannot be used. The issuer need
// not answer yet: its keys are fetched in the background, and tokens are refused until they are.
Result<OidcSetup> SetUpOidc(const DaemonConfig& config);

}  // namespace gpupool
