// RestApi: the REST surface of ApiService — one table maps each method + URL pattern onto an
// ApiService method through protobuf's JSON mapping (json_mapping.h) — plus /healthz, /readyz and
// /metrics. It knows nothing of sockets: the HTTP session hands it a parsed request and a
// Responder, and it answers through the Responder, now or later, from any thread.
//
// Routes (docs/api.md, docs/openapi.yaml), each calling the ApiService method of the same name:
//   POST   /v1/jobs                       SubmitJob     body {"spec": {…}}; header
//                                         Idempotency-Key (or body "idempotencyKey")
//   GET    /v1/jobs                       ListJobs      query tenant, pool, state, pageSize, …
//   GET    /v1/jobs/{job_id}              GetJob
//   POST   /v1/jobs/{job_id}:cancel       CancelJob     body (optional) {"reason": "…"}
//   GET    /v1/jobs/{job_id}:watch        WatchJob      newline-delimited JSON stream
//   GET    /v1/tasks/{task_id}/logs       GetTaskLogs   query offset, follow; NDJSON stream
//   POST   /v1/pools                      CreatePool    body {"pool": {…}}
//   GET    /v1/pools                      ListPools
//   GET    /v1/pools/{name}               GetPool
//   PATCH  /v1/pools/{pool.name}          UpdatePool    body {"pool": {…}}; query updateMask
//   DELETE /v1/pools/{name}               DeletePool
//   GET    /v1/nodes                      ListNodes     query pool
//   GET    /v1/nodes/{name}               GetNode
//   POST   /v1/nodes/{name}:cordon | :uncordon | :drain
//   POST   /v1/nodes/{node}/devices/{device}:clear-fault
//   POST   /v1/nodes/{node}/devices/{device}:set-slots   body {"slots": N}
//   GET    /v1/catalog                    ListGpuModels
//   GET    /v1/priority-classes           ListPriorityClasses  query tenant
//   GET    /v1/skus                       ListSkus
//   POST   /v1/tenants                    CreateTenant  body {"tenant": {"path": "…"}}
//   GET    /v1/tenants                    ListTenants   query prefix
//   GET    /v1/tenants/{path}             GetTenant     path with '/' as %2F: acme%2Fresearch
//   DELETE /v1/tenants/{path}             DeleteTenant
//   PUT    /v1/quotas/{quota.tenant}/{quota.pool}   SetQuota   body {"quota": {…}}
//   GET    /v1/quotas                     ListQuotas    query tenantPrefix, pool
//   GET    /v1/quotas/{tenant}/{pool}     GetQuota
//   DELETE /v1/quotas/{tenant}/{pool}     DeleteQuota
//   GET    /v1/audit                      ListAuditRecords  query principal, verb, resource,
//                                         outcome, since, until, pageSize, pageToken
//   GET    /healthz  /readyz  /metrics    (no authentication)
//   GET    /  /console/…                  the web console (console.h; no authentication)
//
// Audit (api/audit.h): every authenticated route passes through one hook in Unary/Stream — a
// mutating verb is refused while the audit log is down, and its reply waits for its record;
// denials (401, 403, 429) are recorded too. Each reply carries X-Request-Id (the caller's, or a
// new one), which the record keeps.
//
// Errors: {"code": <gRPC code>, "message": "…", "details": []} with grpc-gateway's HTTP status
// (ReplyError, the one place a Status becomes an HTTP error).
//
// Thread safety: Handle() may be called from any thread; the ApiService, Authenticator and
// registry must outlive the RestApi.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "api/audit.h"
#include "api/auth.h"
#include "api/rest/console_sign_in.h"
#include "api/rest/router.h"
#include "api/service.h"

namespace prometheus {
class Registry;
}

namespace gpupool::api::rest {

using Headers = std::vector<std::pair<std::string, std::string>>;

// The answering half of one HTTP exchange. Every method may be called from any thread; one
// request gets exactly one Reply, or StreamLine* then StreamEnd.
class Responder {
 public:
  virtual ~Responder() = default;
  // The matched route pattern, the `route` label of the request metrics.
  virtual void SetRoute(std::string pattern) = 0;
  virtual void Reply(int http_status, std::string content_type, std::string body,
                     Headers headers = {}) = 0;
  // One line of a newline-delimited JSON stream; the first one sends the 200 header.
  virtual void StreamLine(std::string line) = 0;
  // Ends the stream: an error line when `status` is not OK — or, before any line was sent, a
  // plain error response.
  virtual void StreamEnd(const Status& status) = 0;
  // The upstream stream's Cancel, run once when the client goes away or the server stops.
  virtual void SetCancel(Cancel cancel) = 0;
};

struct HttpRequestIn {
  std::string method;  // "GET"
  std::string target;  // "/v1/jobs?state=JOB_STATE_RUNNING"
  std::string authorization;
  std::string body;
  std::string request_id;       // the X-Request-Id header, as sent
  std::string idempotency_key;  // the Idempotency-Key header (SubmitJob), as sent
  std::string source;           // the peer's "address:port", for CallContext::source
};

// The one place a Status becomes an HTTP error reply. `http_status` 0 = grpc-gateway's status for
// the code; a transport-level error (404 route, 405, 413…) passes its own.
void ReplyError(Responder& r, const Status& status, int http_status = 0, Headers headers = {});

class RestApi {
 public:
  // `console_sign_in`: the console's single sign-on (api/rest/console.h); null = tokens only.
  RestApi(ApiService& service, const Authenticator& auth,
          std::shared_ptr<prometheus::Registry> registry, AuditSink* audit = nullptr,
          ConsoleSignInSource console_sign_in = nullptr);
  ~RestApi();

  void Handle(const HttpRequestIn& req, const std::shared_ptr<Responder>& responder) const;

  // The route pattern `method target` matches, for metrics of requests that fail before
  // routing ("unmatched" when none).
  std::string RouteOf(std::string_view method, std::string_view target) const;

  // Every route that needs a credential, as "METHOD pattern" (the authorization matrix test
  // checks that each has a row).
  std::vector<std::string> AuthenticatedRoutes() const;

  struct Call {
    CallOrigin origin;
    CallContext caller;
    std::vector<std::pair<std::string, std::string>> path_params;
    std::vector<std::pair<std::string, std::string>> query;
    std::string_view body;
    std::string idempotency_key;  // the Idempotency-Key header
  };
  using Handler = std::function<void(const Call&, const std::shared_ptr<Responder>&)>;

 private:
  struct Route {
    bool authenticated = true;
    Handler handler;
    std::string verb;  // the ApiService method, for the audit record of a refused call
  };
  void Add(std::string method, std::string_view pattern, bool authenticated, Handler handler,
           std::string verb = "");
  template <typename Req, typename Resp, typename Method>
  void Unary(std::string method, std::string_view pattern, int inputs, Method fn,
             std::string_view verb);
  template <typename Req, typename Item, typename Method>
  void Stream(std::string method, std::string_view pattern, int inputs, Method fn,
              std::string_view verb);
  void AddProbes();

  ApiService& service_;
  const Authenticator& auth_;
  std::shared_ptr<prometheus::Registry> registry_;
  AuditHook audit_;
  Router router_;
  std::vector<Route> routes_;  // indexed like router_'s routes
};

}  // namespace gpupool::api::rest
