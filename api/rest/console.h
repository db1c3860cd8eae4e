// The web console's static files (api/rest/console/: HTML, CSS and ES modules, embedded in the
// binary at build time by cmake/embed_files.cmake), served on the REST port without
// authentication — they hold no data; the page calls the REST API with the user's own bearer token.
//
//   GET /             302 to /console/
//   GET /console      302 to /console/
//   GET /console/     index.html
//   GET /console/<f>  each embedded file
//
// Every answer carries the exact Content-Type, `Cache-Control: no-cache` (the files change with
// the binary), `X-Content-Type-Options: nosniff`, `Referrer-Policy: no-referrer`, and a strict
// Content-Security-Policy: scripts, styles and fetches from this origin only, no inline script,
// no framing. docs/console.md describes the page.
//
// Thread safety: the returned handlers are immutable and may run on any thread.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "api/rest/routes.h"

namespace gpupool::api::rest {

struct ConsoleRoute {
  std::string path;  // a literal GET pattern
  RestApi::Handler handler;
};

std::vector<ConsoleRoute> ConsoleRoutes();

// "app.js" → "text/javascript; charset=utf-8"; unknown extensions are application/octet-stream.
std::string_view ConsoleContentType(std::string_view file_name);

// The security headers of every console answer (above).
Headers ConsoleHeaders();

}  // namespace gpupool::api::rest
