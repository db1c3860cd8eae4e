#include "api/rest/routes.h"

#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include "api/rest/console.h"
#include "api/rest/json_mapping.h"
#include "api/status_convert.h"

namespace gpupool::api::rest {
namespace {

constexpr std::string_view kJson = "application/json";

// Which parts of the HTTP request feed the request message (json_mapping.h has the rules).
enum Inputs { kPath = 0, kBody = 1, kQuery = 2 };

template <typename Req, typename Resp>
using UnaryMethod = void (ApiService::*)(const CallContext&, const Req&, Reply<Resp>);
template <typename Req, typename Item>
using StreamMethod = Cancel (ApiService::*)(const CallContext&, const Req&,
                                            std::function<void(const Item&)>,
                                            std::function<void(Status)>);

Status BuildRequest(const RestApi::Call& call, int inputs, google::protobuf::Message* req) {
  if (inputs & kBody) {
    GPUPOOL_RETURN_IF_ERROR(ParseJsonBody(call.body, req));
  } else if (call.body.find_first_not_of(" \t\r\n") != std::string_view::npos) {
    return Status::InvalidArgument("this route takes no request body");
  }
  if (!call.query.empty()) {
    if (!(inputs & kQuery)) {
      return Status::InvalidArgument("unknown query parameter '" + call.query.front().first +
                                     "'; this route takes none");
    }
    GPUPOOL_RETURN_IF_ERROR(ApplyQueryParams(call.query, req));
  }
  for (const auto& [field, value] : call.path_params) {
    GPUPOOL_RETURN_IF_ERROR(ApplyPathParam(field, value, req));
  }
  if (!call.idempotency_key.empty()) {
    // The header feeds the request's idempotency_key field, agreeing with the body if it set one.
    if (req->GetDescriptor()->FindFieldByName("idempotency_key") == nullptr) {
      return Status::InvalidArgument("header Idempotency-Key: this route takes none");
    }
    Status st = ApplyPathParam("idempotency_key", call.idempotency_key, req);
    if (!st.ok()) {
      return Status::InvalidArgument(
          "header Idempotency-Key: differs from the body's idempotencyKey");
    }
  }
  return Status::Ok();
}

// The likeliest reason a tenant or quota URL matched nothing: a tenant path sent with raw '/'.
std::string TenantPathHint(std::string_view path) {
  if (!path.starts_with("/v1/tenants/") && !path.starts_with("/v1/quotas/") &&
      !path.starts_with("/v1/registrycredentials/")) {
    return "";
  }
  return " (send a tenant path as one segment with '/' encoded as %2F, e.g. "
         "/v1/tenants/acme%2Fresearch)";
}

void ReplyMessage(Responder& r, const google::protobuf::Message& msg) {
  Result<std::string> json = ToJson(msg);
  if (!json.ok()) return ReplyError(r, json.status());
  r.Reply(200, std::string(kJson), std::move(json).value());
}
// A file the server rendered (CSV exports): sent as it is, offered as a download.
void ReplyMessage(Responder& r, const v1::ExportResponse& file) {
  r.Reply(200, file.content_type(), file.body(),
          {{"Content-Disposition", "attachment; filename=\"" + file.filename() + "\""}});
}

}  // namespace

void ReplyError(Responder& r, const Status& status, int http_status, Headers headers) {
  if (http_status == 0) http_status = HttpStatusFromCode(status.code());
  if (status.code() == StatusCode::kUnauthenticated) {
    headers.emplace_back("WWW-Authenticate", "Bearer realm=\"gpupool\"");
  }
  r.Reply(http_status, std::string(kJson), ErrorJson(status), std::move(headers));
}

template <typename Req, typename Resp, typename Method>
void RestApi::Unary(std::string method, std::string_view pattern, int inputs, Method fn,
                    std::string_view verb) {
  UnaryMethod<Req, Resp> m = fn;
  ApiService* svc = &service_;
  const AuditHook* audit = &audit_;
  Add(
      std::move(method), pattern, true,
      [svc, m, inputs, audit, verb](const Call& call, const std::shared_ptr<Responder>& r) {
        auto req = std::make_shared<Req>();
        Status st = BuildRequest(call, inputs, req.get());
        if (st.ok()) st = audit->Admit(verb);
        if (!st.ok()) {
          return audit->Finish(call.origin, &call.caller, verb, req.get(), nullptr, st,
                               [r, st] { ReplyError(*r, st); });
        }
        (svc->*m)(call.caller, *req,
                  [r, req, audit, verb, origin = call.origin, caller = call.caller](Status result,
                                                                                    Resp reply) {
                    // The reply may be sent later, once the audit record is durable.
                    auto out = std::make_shared<Resp>(std::move(reply));
                    audit->Finish(origin, &caller, verb, req.get(), out.get(), result,
                                  [r, result, out] {
                                    if (!result.ok()) return ReplyError(*r, result);
                                    ReplyMessage(*r, *out);
                                  });
                  });
      },
      std::string(verb));
}

template <typename Req, typename Item, typename Method>
void RestApi::Stream(std::string method, std::string_view pattern, int inputs, Method fn,
                     std::string_view verb) {
  StreamMethod<Req, Item> m = fn;
  ApiService* svc = &service_;
  const AuditHook* audit = &audit_;
  Add(
      std::move(method), pattern, true,
      [svc, m, inputs, audit, verb](const Call& call, const std::shared_ptr<Responder>& r) {
        auto req = std::make_shared<Req>();
        if (Status st = BuildRequest(call, inputs, req.get()); !st.ok()) {
          return audit->Finish(call.origin, &call.caller, verb, req.get(), nullptr, st,
                               [r, st] { ReplyError(*r, st); });
        }
        Cancel cancel = (svc->*m)(
            call.caller, *req,
            [r](const Item& item) {
              Result<std::string> json = ToJson(item);
              if (!json.ok()) return;  // not valid UTF-8: cannot happen for these messages
              r->StreamLine("{\"result\":" + json.value() + "}\n");
            },
            [r, req, audit, verb, origin = call.origin, caller = call.caller](Status st) {
              audit->Finish(origin, &caller, verb, req.get(), nullptr, st,
                            [r, st] { r->StreamEnd(st); });
            });
        r->SetCancel(std::move(cancel));
      },
      std::string(verb));
}

RestApi::RestApi(ApiService& service, const Authenticator& auth,
                 std::shared_ptr<prometheus::Registry> registry, AuditSink* audit,
                 ConsoleSignInSource console_sign_in)
    : service_(service), auth_(auth), registry_(std::move(registry)), audit_(audit) {
  using S = ApiService;
  using namespace ::gpupool::v1;  // NOLINT: the table reads better with short names
  Unary<SubmitJobRequest, SubmitJobResponse>("POST", "/v1/jobs", kBody, &S::SubmitJob, "SubmitJob");
  Unary<ListJobsRequest, ListJobsResponse>("GET", "/v1/jobs", kQuery, &S::ListJobs, "ListJobs");
  Unary<GetJobRequest, Job>("GET", "/v1/jobs/{job_id}", kPath, &S::GetJob, "GetJob");
  Unary<CancelJobRequest, Job>("POST", "/v1/jobs/{job_id}:cancel", kBody, &S::CancelJob,
                               "CancelJob");
  Stream<WatchJobRequest, JobEvent>("GET", "/v1/jobs/{job_id}:watch", kPath, &S::WatchJob,
                                    "WatchJob");
  Stream<GetTaskLogsRequest, TaskLogChunk>("GET", "/v1/tasks/{task_id}/logs", kQuery,
                                           &S::GetTaskLogs, "GetTaskLogs");

  Unary<CreatePoolRequest, Pool>("POST", "/v1/pools", kBody, &S::CreatePool, "CreatePool");
  Unary<ListPoolsRequest, ListPoolsResponse>("GET", "/v1/pools", kPath, &S::ListPools, "ListPools");
  Unary<GetPoolRequest, Pool>("GET", "/v1/pools/{name}", kPath, &S::GetPool, "GetPool");
  Unary<UpdatePoolRequest, Pool>("PATCH", "/v1/pools/{pool.name}", kBody | kQuery, &S::UpdatePool,
                                 "UpdatePool");
  Unary<DeletePoolRequest, DeletePoolResponse>("DELETE", "/v1/pools/{name}", kPath, &S::DeletePool,
                                               "DeletePool");

  Unary<ListNodesRequest, ListNodesResponse>("GET", "/v1/nodes", kQuery, &S::ListNodes,
                                             "ListNodes");
  Unary<GetNodeRequest, Node>("GET", "/v1/nodes/{name}", kPath, &S::GetNode, "GetNode");
  Unary<NodeActionRequest, Node>("POST", "/v1/nodes/{name}:cordon", kBody, &S::CordonNode,
                                 "CordonNode");
  Unary<NodeActionRequest, Node>("POST", "/v1/nodes/{name}:uncordon", kBody, &S::UncordonNode,
                                 "UncordonNode");
  Unary<NodeActionRequest, Node>("POST", "/v1/nodes/{name}:drain", kBody, &S::DrainNode,
                                 "DrainNode");
  Unary<SetDeviceSlotsRequest, Node>("POST", "/v1/nodes/{node}/devices/{device}:set-slots", kBody,
                                     &S::SetDeviceSlots, "SetDeviceSlots");
  Unary<SetMigLayoutRequest, Node>("POST", "/v1/nodes/{node}/gpus/{gpu}:set-mig-layout", kBody,
                                   &S::SetMigLayout, "SetMigLayout");
  Unary<ClearDeviceFaultRequest, Node>("POST", "/v1/nodes/{node}/devices/{device}:clear-fault",
                                       kBody, &S::ClearDeviceFault, "ClearDeviceFault");
  Unary<NodeActionRequest, Node>("POST", "/v1/nodes/{name}:fence", kBody, &S::FenceNode,
                                 "FenceNode");

  Unary<ListGpuModelsRequest, ListGpuModelsResponse>("GET", "/v1/catalog", kPath, &S::ListGpuModels,
                                                     "ListGpuModels");
  Unary<ListPriorityClassesRequest, ListPriorityClassesResponse>(
      "GET", "/v1/priority-classes", kQuery, &S::ListPriorityClasses, "ListPriorityClasses");
  Unary<ListSkusRequest, ListSkusResponse>("GET", "/v1/skus", kPath, &S::ListSkus, "ListSkus");

  // A tenant path travels as one segment, its '/' percent-encoded: /v1/tenants/acme%2Fresearch.
  Unary<CreateTenantRequest, Tenant>("POST", "/v1/tenants", kBody, &S::CreateTenant,
                                     "CreateTenant");
  Unary<ListTenantsRequest, ListTenantsResponse>("GET", "/v1/tenants", kQuery, &S::ListTenants,
                                                 "ListTenants");
  Unary<GetTenantRequest, Tenant>("GET", "/v1/tenants/{path}", kPath, &S::GetTenant, "GetTenant");
  Unary<DeleteTenantRequest, DeleteTenantResponse>("DELETE", "/v1/tenants/{path}", kPath,
                                                   &S::DeleteTenant, "DeleteTenant");
  Unary<SetQuotaRequest, Quota>("PUT", "/v1/quotas/{quota.tenant}/{quota.pool}", kBody,
                                &S::SetQuota, "SetQuota");
  Unary<ListQuotasRequest, ListQuotasResponse>("GET", "/v1/quotas", kQuery, &S::ListQuotas,
                                               "ListQuotas");
  Unary<GetQuotaRequest, Quota>("GET", "/v1/quotas/{tenant}/{pool}", kPath, &S::GetQuota,
                                "GetQuota");
  Unary<DeleteQuotaRequest, DeleteQuotaResponse>("DELETE", "/v1/quotas/{tenant}/{pool}", kPath,
                                                 &S::DeleteQuota, "DeleteQuota");

  Unary<ListAuditRecordsRequest, ListAuditRecordsResponse>(
      "GET", "/v1/audit", kQuery, &S::ListAuditRecords, "ListAuditRecords");
  Unary<GetUsageRequest, GetUsageResponse>("GET", "/v1/usage", kQuery, &S::GetUsage, "GetUsage");
  // API keys: the secret is in the creation response only. Registry credentials: never returned.
  Unary<CreateApiKeyRequest, CreateApiKeyResponse>("POST", "/v1/apikeys", kBody, &S::CreateApiKey,
                                                   "CreateApiKey");
  Unary<ListApiKeysRequest, ListApiKeysResponse>("GET", "/v1/apikeys", kQuery, &S::ListApiKeys,
                                                 "ListApiKeys");
  Unary<RevokeApiKeyRequest, ApiKey>("POST", "/v1/apikeys/{id}:revoke", kBody, &S::RevokeApiKey,
                                     "RevokeApiKey");
  Unary<CreateRegistryCredentialRequest, RegistryCredential>("POST", "/v1/registrycredentials",
                                                             kBody, &S::CreateRegistryCredential,
                                                             "CreateRegistryCredential");
  Unary<ListRegistryCredentialsRequest, ListRegistryCredentialsResponse>(
      "GET", "/v1/registrycredentials", kQuery, &S::ListRegistryCredentials,
      "ListRegistryCredentials");
  Unary<DeleteRegistryCredentialRequest, DeleteRegistryCredentialResponse>(
      "DELETE", "/v1/registrycredentials/{tenant}/{name}", kPath, &S::DeleteRegistryCredential,
      "DeleteRegistryCredential");
  // Webhooks (docs/webhooks.md): the signing secret is in the creation response only.
  Unary<CreateWebhookRequest, CreateWebhookResponse>("POST", "/v1/webhooks", kBody,
                                                     &S::CreateWebhook, "CreateWebhook");
  Unary<ListWebhooksRequest, ListWebhooksResponse>("GET", "/v1/webhooks", kQuery, &S::ListWebhooks,
                                                   "ListWebhooks");
  Unary<GetWebhookRequest, GetWebhookResponse>("GET", "/v1/webhooks/{id}", kPath, &S::GetWebhook,
                                               "GetWebhook");
  Unary<DeleteWebhookRequest, DeleteWebhookResponse>("DELETE", "/v1/webhooks/{id}", kPath,
                                                     &S::DeleteWebhook, "DeleteWebhook");
  Unary<EnableWebhookRequest, Webhook>("POST", "/v1/webhooks/{id}:enable", kBody, &S::EnableWebhook,
                                       "EnableWebhook");
  // Billing (docs/billing.md): price plans, invoices as JSON and CSV, the billing-engine feed.
  Unary<CreatePricePlanRequest, PricePlan>("POST", "/v1/priceplans", kBody, &S::CreatePricePlan,
                                           "CreatePricePlan");
  Unary<UpdatePricePlanRequest, PricePlan>("PUT", "/v1/priceplans/{plan.name}", kBody,
                                           &S::UpdatePricePlan, "UpdatePricePlan");
  Unary<ListPricePlansRequest, ListPricePlansResponse>("GET", "/v1/priceplans", kQuery,
                                                       &S::ListPricePlans, "ListPricePlans");
  Unary<ListInvoicesRequest, ListInvoicesResponse>("GET", "/v1/invoices", kQuery, &S::ListInvoices,
                                                   "ListInvoices");
  Unary<ListInvoicesRequest, ExportResponse>("GET", "/v1/invoices.csv", kQuery, &S::ExportInvoices,
                                             "ExportInvoices");
  Unary<GetUsageFeedRequest, GetUsageFeedResponse>("GET", "/v1/usage-feed", kQuery,
                                                   &S::GetUsageFeed, "GetUsageFeed");
  Unary<GetUsageFeedRequest, ExportResponse>("GET", "/v1/usage-feed.csv", kQuery,
                                             &S::ExportUsageFeed, "ExportUsageFeed");
  // Budgets (docs/billing.md, "Budgets"): the tenant path in a URL has its '/' escaped (%2F).
  Unary<SetBudgetRequest, Budget>("PUT", "/v1/budgets/{budget.tenant}", kBody, &S::SetBudget,
                                  "SetBudget");
  Unary<ListBudgetsRequest, ListBudgetsResponse>("GET", "/v1/budgets", kQuery, &S::ListBudgets,
                                                 "ListBudgets");
  Unary<DeleteBudgetRequest, DeleteBudgetResponse>("DELETE", "/v1/budgets/{tenant}", kPath,
                                                   &S::DeleteBudget, "DeleteBudget");
  // Services (docs/services.md): the tenant path in a URL has its '/' escaped (%2F).
  Unary<CreateServiceRequest, Service>("POST", "/v1/services", kBody, &S::CreateService,
                                       "CreateService");
  Unary<ListServicesRequest, ListServicesResponse>("GET", "/v1/services", kQuery, &S::ListServices,
                                                   "ListServices");
  Unary<GetServiceRequest, Service>("GET", "/v1/services/{tenant}/{name}", kPath, &S::GetService,
                                    "GetService");
  Unary<UpdateServiceRequest, Service>("PUT", "/v1/services/{service.tenant}/{service.name}", kBody,
                                       &S::UpdateService, "UpdateService");
  Unary<RollbackServiceRequest, Service>("POST", "/v1/services/{tenant}/{name}:rollback", kBody,
                                         &S::RollbackService, "RollbackService");
  Unary<DeleteServiceRequest, DeleteServiceResponse>("DELETE", "/v1/services/{tenant}/{name}",
                                                     kPath, &S::DeleteService, "DeleteService");
  // What-if pre-flight (docs/twin.md): replays a pool's recent workload; admins only.
  Unary<CompareWhatIfRequest, CompareWhatIfResponse>("POST", "/v1/whatif", kBody, &S::CompareWhatIf,
                                                     "CompareWhatIf");
  AddProbes();
  for (ConsoleRoute& c : ConsoleRoutes(std::move(console_sign_in)))
    Add("GET", c.path, false, std::move(c.handler));
}

RestApi::~RestApi() = default;

void RestApi::AddProbes() {
  Add("GET", "/healthz", false, [](const Call&, const std::shared_ptr<Responder>& r) {
    r->Reply(200, "text/plain; charset=utf-8", "ok\n");
  });
  ApiService* svc = &service_;
  Add("GET", "/readyz", false, [svc](const Call&, const std::shared_ptr<Responder>& r) {
    const Status st = svc->Ready();
    if (st.ok()) return r->Reply(200, "text/plain; charset=utf-8", "ok\n");
    r->Reply(503, "text/plain; charset=utf-8", "not ready: " + st.ToString() + "\n");
  });
  prometheus::Registry* registry = registry_.get();
  Add("GET", "/metrics", false, [registry](const Call&, const std::shared_ptr<Responder>& r) {
    std::string text;
    if (registry != nullptr) text = prometheus::TextSerializer().Serialize(registry->Collect());
    r->Reply(200, "text/plain; version=0.0.4; charset=utf-8", std::move(text));
  });
}

void RestApi::Add(std::string method, std::string_view pattern, bool authenticated, Handler handler,
                  std::string verb) {
  router_.Add(std::move(method), pattern);
  routes_.push_back({authenticated, std::move(handler), std::move(verb)});
}

std::string RestApi::RouteOf(std::string_view method, std::string_view target) const {
  const Router::Match m = router_.Find(method, target.substr(0, target.find('?')));
  return m.kind == Router::Match::kFound ? router_.pattern(m.route) : "unmatched";
}

std::vector<std::string> RestApi::AuthenticatedRoutes() const {
  std::vector<std::string> out;
  for (size_t i = 0; i < routes_.size(); ++i) {
    if (routes_[i].authenticated) out.push_back(router_.method(i) + " " + router_.pattern(i));
  }
  return out;
}

void RestApi::Handle(const HttpRequestIn& req, const std::shared_ptr<Responder>& r) const {
  const size_t q = req.target.find('?');
  const std::string_view path = std::string_view(req.target).substr(0, q);
  const Router::Match m = router_.Find(req.method, path);
  if (m.kind == Router::Match::kNotFound) {
    r->SetRoute("unmatched");
    return ReplyError(
        *r, Status::NotFound("no route for " + req.method + " " + std::string(path) +
                             TenantPathHint(path) + "; the REST API is described in docs/api.md"));
  }
  if (m.kind == Router::Match::kMethodNotAllowed) {
    r->SetRoute("unmatched");
    return ReplyError(*r,
                      Status::Unimplemented("method " + req.method + " is not allowed on " +
                                            std::string(path) + "; allowed: " + m.allowed),
                      405, {{"Allow", m.allowed}});
  }
  r->SetRoute(router_.pattern(m.route));
  const Route& route = routes_[m.route];

  Call call;
  call.origin = {RequestIdOr(req.request_id), req.source};
  if (route.authenticated) {
    Result<CallContext> caller = auth_.Authenticate(req.authorization);
    if (!caller.ok()) {
      return audit_.Finish(call.origin, nullptr, route.verb, nullptr, nullptr, caller.status(),
                           [r, st = caller.status()] { ReplyError(*r, st); });
    }
    call.caller = std::move(caller).value();
    call.caller.source = req.source;
  }
  if (q != std::string::npos) {
    auto query = ParseQuery(std::string_view(req.target).substr(q + 1));
    if (!query.ok()) return ReplyError(*r, query.status().WithContext("query string"));
    call.query = std::move(query).value();
  }
  call.path_params = m.params;
  call.body = req.body;
  call.idempotency_key = req.idempotency_key;
  route.handler(call, r);
}

}  // namespace gpupool::api::rest
