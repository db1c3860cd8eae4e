// One HTTP/1.1 exchange from gpupoold to a server it was told of: a tenant's webhook endpoint
// (api/webhooks/dispatcher.h), the identity provider's discovery document and keys
// (api/jwks_cache.h). HTTPS verifies the server's certificate for the URL's host against the
// system's CAs and any extra ones given; plain http:// reaches only what ParseWebhookUrl let
// through (a loopback host). Everything, from the name lookup to the last byte of the answer,
// happens within one timeout, on the calling thread.
//
// Thread safety: free functions, no shared state.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "scheduler/webhooks.h"

namespace gpupool::api {

struct HttpClientOptions {
  std::chrono::milliseconds timeout{10000};  // from the name lookup to the end of the answer
  // PEM certificates trusted beside the system's (a private CA, tests).
  std::string extra_ca_pem;
  // Addresses on loopback or link-local networks (169.254.0.0/16: cloud metadata) are refused
  // unless this is set; a tenant's URL must never reach the host's own services.
  bool allow_loopback = false;
  size_t max_body_bytes = 64 * 1024;  // an answer's body past this fails the exchange
  std::string user_agent = "gpupoold/1";
};

struct HttpExchangeResult {
  int http_status = 0;  // 0: no answer (error says why)
  std::string body;     // the answer's body
  std::string error;    // "" for a 2xx; else what went wrong ("HTTP 500", "timeout after …")
};

using HttpHeaders = std::vector<std::pair<std::string, std::string>>;

// Printable ASCII, at most 300 characters: what an error message keeps of a library's or a
// server's text (other bytes become '?').
std::string PrintableAscii(std::string_view s);

// The Host header for `url`: its host, with the port unless it is the scheme's default, an IPv6
// address in brackets ("[::1]:8443"). Servers build their own URLs from it.
std::string HostHeader(const WebhookUrl& url);

// `method` ("GET", "POST") to `url` with `headers` and `body` (sent with Content-Type
// application/json when not empty and the headers name none).
HttpExchangeResult HttpExchange(const std::string& method, const WebhookUrl& url,
                                const HttpHeaders& headers, const std::string& body,
                                const HttpClientOptions& options);

}  // namespace gpupool::api
