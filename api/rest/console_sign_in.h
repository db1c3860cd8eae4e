// What the console needs to sign a user in through the identity provider (OIDC authorization
// code flow with PKCE, docs/console.md "Single sign-on"): the provider's endpoints, from its
// discovery document, and the console's public client. gpupoold fills it (cmd/daemon/oidc.h);
// the REST face serves it to the page (api/rest/console.h).
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "base/status.h"

namespace gpupool::api::rest {

struct ConsoleSignIn {
  std::string issuer;
  std::string client_id;
  std::string authorization_endpoint;
  std::string token_endpoint;
  std::string scopes;  // space-separated, "openid" among them
  // Where *Sign out* also ends the provider's session (RP-Initiated Logout); "" = none.
  std::string end_session_endpoint = {};
};

// nullopt: no single sign-on (tokens only). An error: configured, but the provider has not been
// reached yet (the page says so and offers tokens).
using ConsoleSignInSource = std::function<Result<std::optional<ConsoleSignIn>>()>;

}  // namespace gpupool::api::rest
