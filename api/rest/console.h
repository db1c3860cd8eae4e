// The web console's static files (api/rest/console/: HTML, CSS and ES modules, embedded in the
// binary at build time by cmake/embed_files.cmake), served on the REST port without
// authentication — they hold no data; the page calls the REST API with the user's own bearer token.
//
//   GET /             302 to /console/
//   GET /console      302 to /console/
//   GET /console/     index.html
//   GET /console/<f>  each embedded file
//   GET /console/sign-in.json  how the page may sign a user in (below)
//
// Every answer carries the exact Content-Type, `Cache-Control: no-cache` (the files change with
// the binary), `X-Content-Type-Options: nosniff`, `Referrer-Policy: no-referrer`, and a strict
// Content-Security-Policy: scripts, styles and fetches from this origin only, no inline script,
// no framing. When single sign-on is configured, the page may also fetch from the identity
// provider's token endpoint (the code exchange with PKCE): that origin joins connect-src.
// docs/console.md describes the page.
//
// Thread safety: the returned handlers are immutable and may run on any thread.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/rest/console_sign_in.h"
#include "api/rest/routes.h"

namespace gpupool::api::rest {

struct ConsoleRoute {
  std::string path;  // a literal GET pattern
  RestApi::Handler handler;
};

// `sign_in` may be null (no single sign-on).
std::vector<ConsoleRoute> ConsoleRoutes(ConsoleSignInSource sign_in = nullptr);

// GET /console/sign-in.json's body: {"oidc":null} or {"oidc":{"issuer":…,"clientId":…,
// "authorizationEndpoint":…,"tokenEndpoint":…,"scopes":…[,"endSessionEndpoint":…]}}.
std::string ConsoleSignInJson(const std::optional<ConsoleSignIn>& sign_in);

// "https://idp.example.com:8443" of "https://idp.example.com:8443/token"; "" when `url` is not an
// absolute http(s) URL.
std::string UrlOrigin(std::string_view url);

// "app.js" → "text/javascript; charset=utf-8"; unknown extensions are application/octet-stream.
std::string_view ConsoleContentType(std::string_view file_name);

// The security headers of every console answer (above); `connect_origin`, when not empty, is
// allowed in connect-src beside the page's own origin.
Headers ConsoleHeaders(std::string_view connect_origin = {});

}  // namespace gpupool::api::rest
