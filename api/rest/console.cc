#include "api/rest/console.h"

#include <memory>
#include <nlohmann/json.hpp>

#include "api/rest/console_files.h"

namespace gpupool::api::rest {
namespace {

// The origin the page may fetch from beside its own: the provider's token endpoint, once known.
std::string ConnectOrigin(const ConsoleSignInSource& sign_in) {
  if (!sign_in) return "";
  Result<std::optional<ConsoleSignIn>> s = sign_in();
  if (!s.ok() || !*s) return "";
  return UrlOrigin((*s)->token_endpoint);
}

RestApi::Handler Redirect(std::string location) {
  return
      [location = std::move(location)](const RestApi::Call&, const std::shared_ptr<Responder>& r) {
        Headers headers = ConsoleHeaders();
        headers.emplace_back("Location", location);
        r->Reply(302, "text/plain; charset=utf-8", "see " + location + "\n", std::move(headers));
      };
}

RestApi::Handler Serve(std::string_view name, std::string_view data,
                       const ConsoleSignInSource& sign_in) {
  return [type = std::string(ConsoleContentType(name)), data, sign_in](
             const RestApi::Call&, const std::shared_ptr<Responder>& r) {
    r->Reply(200, type, std::string(data), ConsoleHeaders(ConnectOrigin(sign_in)));
  };
}

RestApi::Handler SignIn(ConsoleSignInSource sign_in) {
  return [sign_in = std::move(sign_in)](const RestApi::Call&, const std::shared_ptr<Responder>& r) {
    constexpr std::string_view kJson = "application/json; charset=utf-8";
    if (!sign_in)
      return r->Reply(200, std::string(kJson), ConsoleSignInJson(std::nullopt), ConsoleHeaders());
    Result<std::optional<ConsoleSignIn>> s = sign_in();
    if (!s.ok()) {
      nlohmann::json body = {{"error", s.status().message()}};
      return r->Reply(503, std::string(kJson), body.dump(), ConsoleHeaders());
    }
    r->Reply(200, std::string(kJson), ConsoleSignInJson(*s), ConsoleHeaders());
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

Headers ConsoleHeaders(std::string_view connect_origin) {
  std::string connect = "'self'";
  if (!connect_origin.empty()) connect += " " + std::string(connect_origin);
  return {{"Cache-Control", "no-cache"},
          {"X-Content-Type-Options", "nosniff"},
          {"Referrer-Policy", "no-referrer"},
          {"X-Frame-Options", "DENY"},
          {"Content-Security-Policy",
           "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
           "connect-src " +
               connect + "; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"}};
}

std::string ConsoleSignInJson(const std::optional<ConsoleSignIn>& s) {
  nlohmann::json body = {{"oidc", nullptr}};
  if (s) {
    body["oidc"] = {{"issuer", s->issuer},
                    {"clientId", s->client_id},
                    {"authorizationEndpoint", s->authorization_endpoint},
                    {"tokenEndpoint", s->token_endpoint},
                    {"scopes", s->scopes}};
    if (!s->end_session_endpoint.empty()) {
      body["oidc"]["endSessionEndpoint"] = s->end_session_endpoint;
    }
  }
  return body.dump();
}

std::string UrlOrigin(std::string_view url) {
  size_t scheme_end = url.find("://");
  if (scheme_end == std::string_view::npos) return "";
  const std::string_view scheme = url.substr(0, scheme_end);
  if (scheme != "https" && scheme != "http") return "";
  const size_t host_end = url.find_first_of("/?#", scheme_end + 3);
  const std::string_view origin = url.substr(0, host_end);
  if (origin.size() == scheme_end + 3) return "";
  // Only what a CSP source may hold: no quotes, spaces or separators an attacker could use.
  for (char c : origin) {
    if (c <= ' ' || c >= 0x7f || c == ';' || c == ',' || c == '\'' || c == '"') return "";
  }
  return std::string(origin);
}

std::vector<ConsoleRoute> ConsoleRoutes(ConsoleSignInSource sign_in) {
  std::vector<ConsoleRoute> routes;
  routes.push_back({"/", Redirect("/console/")});
  routes.push_back({"/console", Redirect("/console/")});
  routes.push_back({"/console/sign-in.json", SignIn(sign_in)});
  for (const console::EmbeddedFile& f : console::Files()) {
    routes.push_back({"/console/" + std::string(f.name), Serve(f.name, f.data, sign_in)});
    if (f.name == "index.html") routes.push_back({"/console/", Serve(f.name, f.data, sign_in)});
  }
  return routes;
}

}  // namespace gpupool::api::rest
