#include "api/rest/console.h"

#include <memory>

#include "api/rest/console_files.h"

namespace gpupool::api::rest {
namespace {

constexpr std::string_view kCsp =
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

RestApi::Handler Redirect(std::string location) {
  return
      [location = std::move(location)](const RestApi::Call&, const std::shared_ptr<Responder>& r) {
        Headers headers = ConsoleHeaders();
        headers.emplace_back("Location", location);
        r->Reply(302, "text/plain; charset=utf-8", "see " + location + "\n", std::move(headers));
      };
}

RestApi::Handler Serve(std::string_view name, std::string_view data) {
  return [type = std::string(ConsoleContentType(name)), data](const RestApi::Call&,
                                                              const std::shared_ptr<Responder>& r) {
    r->Reply(200, type, std::string(data), ConsoleHeaders());
  };
}

}  // namespace

std::string_view ConsoleContentType(std::string_view name) {
  const auto ends = [name](std::string_view ext) { return name.ends_with(ext); };
  if (ends(".html")) return "text/html; charset=utf-8";
  if (ends(".js")) return "text/javascript; charset=utf-8";
  if (ends(".css")) return "text/css; charset=utf-8";
  if (ends(".svg")) return "image/svg+xml";
  if (ends(".png")) return "image/png";
  return "application/octet-stream";
}

Headers ConsoleHeaders() {
  return {{"Cache-Control", "no-cache"},
          {"X-Content-Type-Options", "nosniff"},
          {"Referrer-Policy", "no-referrer"},
          {"X-Frame-Options", "DENY"},
          {"Content-Security-Policy", std::string(kCsp)}};
}

std::vector<ConsoleRoute> ConsoleRoutes() {
  std::vector<ConsoleRoute> routes;
  routes.push_back({"/", Redirect("/console/")});
  routes.push_back({"/console", Redirect("/console/")});
  for (const console::EmbeddedFile& f : console::Files()) {
    routes.push_back({"/console/" + std::string(f.name), Serve(f.name, f.data)});
    if (f.name == "index.html") routes.push_back({"/console/", Serve(f.name, f.data)});
  }
  return routes;
}

}  // namespace gpupool::api::rest
