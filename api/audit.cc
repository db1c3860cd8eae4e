#include "api/audit.h"

#include <chrono>
#include <random>
#include <utility>

#include "gpupool/v1/audit.pb.h"
#include "gpupool/v1/billing.pb.h"
#include "gpupool/v1/jobs.pb.h"
#include "gpupool/v1/keys.pb.h"
#include "gpupool/v1/pools.pb.h"
#include "gpupool/v1/tenants.pb.h"
#include "gpupool/v1/webhooks.pb.h"
#include "gpupool/v1/whatif.pb.h"

namespace gpupool::api {
namespace {

namespace v1 = ::gpupool::v1;

template <typename T>
const T* As(const google::protobuf::Message* m) {
  return dynamic_cast<const T*>(m);
}

// The tenant a request or its reply concerns, when it names one ("" otherwise).
std::string TargetTenant(const google::protobuf::Message* req,
                         const google::protobuf::Message* reply) {
  if (auto* r = As<v1::SubmitJobRequest>(req)) return r->spec().tenant();
  if (auto* r = As<v1::CreateTenantRequest>(req)) return r->tenant().path();
  if (auto* r = As<v1::GetTenantRequest>(req)) return r->path();
  if (auto* r = As<v1::DeleteTenantRequest>(req)) return r->path();
  if (auto* r = As<v1::SetQuotaRequest>(req)) return r->quota().tenant();
  if (auto* r = As<v1::GetQuotaRequest>(req)) return r->tenant();
  if (auto* r = As<v1::DeleteQuotaRequest>(req)) return r->tenant();
  if (auto* r = As<v1::CreateRegistryCredentialRequest>(req)) return r->credential().tenant();
  if (auto* r = As<v1::DeleteRegistryCredentialRequest>(req)) return r->tenant();
  if (auto* r = As<v1::CreateWebhookRequest>(req)) return r->webhook().tenant();
  if (auto* r = As<v1::SetBudgetRequest>(req)) return r->budget().tenant();
  if (auto* r = As<v1::DeleteBudgetRequest>(req)) return r->tenant();
  if (auto* w = As<v1::Webhook>(reply)) return w->tenant();
  if (auto* w = As<v1::CreateWebhookResponse>(reply)) return w->webhook().tenant();
  if (auto* w = As<v1::GetWebhookResponse>(reply)) return w->webhook().tenant();
  if (auto* r = As<v1::CreateServiceRequest>(req)) return r->service().tenant();
  if (auto* r = As<v1::UpdateServiceRequest>(req)) return r->service().tenant();
  if (auto* r = As<v1::GetServiceRequest>(req)) return r->tenant();
  if (auto* r = As<v1::RollbackServiceRequest>(req)) return r->tenant();
  if (auto* r = As<v1::DeleteServiceRequest>(req)) return r->tenant();
  if (auto* j = As<v1::Job>(reply)) return j->spec().tenant();
  return "";
}

// A non-admin's records belong to its own subtree, whatever it asked for (a tenant sees what it
// did, never what someone it targeted did); an admin's belong to the tenant the call concerned,
// so a tenant sees what admins did to it.
std::string RecordTenant(const CallContext* caller, const google::protobuf::Message* req,
                         const google::protobuf::Message* reply) {
  if (caller != nullptr && !caller->admin()) return caller->scope;
  if (caller == nullptr) return "";  // unauthenticated: admins only
  return TargetTenant(req, reply);
}

bool IdChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == ':' || c == '-';
}

}  // namespace

bool IsMutatingVerb(std::string_view verb) {
  static constexpr std::string_view kMutating[] = {
      "SubmitJob",
      "CancelJob",
      "CreatePool",
      "UpdatePool",
      "DeletePool",
      "CordonNode",
      "UncordonNode",
      "DrainNode",
      "CreateTenant",
      "DeleteTenant",
      "SetQuota",
      "DeleteQuota",
      "CreateApiKey",
      "RevokeApiKey",
      "RevokeNode",
      "FenceNode",
      "CreateJoinToken",
      "RevokeJoinToken",
      "ClearDeviceFault",
      "SetDeviceSlots",
      "SetMigLayout",
      "CreateRegistryCredential",
      "DeleteRegistryCredential",
      "CreateWebhook",
      "DeleteWebhook",
      "EnableWebhook",
      "CreateService",
      "UpdateService",
      "RollbackService",
      "DeleteService",
  };
  // Billing (api/service_billing.cc).
  static constexpr std::string_view kBillingMutating[] = {"CreatePricePlan", "UpdatePricePlan",
                                                          "SetBudget", "DeleteBudget"};
  // Not a mutation, but audited like one — every call, durable before the reply — because it
  // replays every tenant's recent workload (api/service_whatif.cc).
  if (verb == "CompareWhatIf") return true;
  for (std::string_view v : kBillingMutating) {
    if (v == verb) return true;
  }
  for (std::string_view v : kMutating) {
    if (v == verb) return true;
  }
  return false;
}

bool IsDenial(StatusCode code) {
  return code == StatusCode::kUnauthenticated || code == StatusCode::kPermissionDenied ||
         code == StatusCode::kResourceExhausted;
}

AuditActor ActorOf(const CallContext& caller) {
  AuditActor a;
  a.key_id = caller.key_id;
  // A tenant's principal is its scope; an admin has none, so its credential names it.
  a.principal = caller.admin() ? caller.key_id : caller.scope;
  a.role = std::string(RoleName(caller.role));
  if (!caller.admin()) a.tenant = caller.scope;
  return a;
}

std::string ResourceOf(const google::protobuf::Message& req,
                       const google::protobuf::Message* reply) {
  const google::protobuf::Message* m = &req;
  if (auto* r = As<v1::SubmitJobRequest>(m)) {
    if (auto* resp = As<v1::SubmitJobResponse>(reply); resp != nullptr && !resp->job_id().empty()) {
      return "job/" + resp->job_id();
    }
    return "tenant/" + r->spec().tenant();
  }
  if (auto* r = As<v1::GetJobRequest>(m)) return "job/" + r->job_id();
  if (auto* r = As<v1::CancelJobRequest>(m)) return "job/" + r->job_id();
  if (auto* r = As<v1::WatchJobRequest>(m)) return "job/" + r->job_id();
  if (auto* r = As<v1::GetTaskLogsRequest>(m)) return "task/" + r->task_id();
  if (As<v1::ListJobsRequest>(m)) return "jobs";
  if (auto* r = As<v1::CreatePoolRequest>(m)) return "pool/" + r->pool().name();
  if (auto* r = As<v1::GetPoolRequest>(m)) return "pool/" + r->name();
  if (auto* r = As<v1::UpdatePoolRequest>(m)) return "pool/" + r->pool().name();
  if (auto* r = As<v1::DeletePoolRequest>(m)) return "pool/" + r->name();
  if (As<v1::ListPoolsRequest>(m)) return "pools";
  if (auto* r = As<v1::GetNodeRequest>(m)) return "node/" + r->name();
  if (auto* r = As<v1::NodeActionRequest>(m)) return "node/" + r->name();
  if (auto* r = As<v1::SetMigLayoutRequest>(m)) {  // which layout was asked: the audit says
    return "node/" + r->node() + "/" + r->gpu() + "/mig-layout/" +
           (r->layout().empty() ? std::string("none") : r->layout());
  }
  if (As<v1::ListNodesRequest>(m)) return "nodes";
  if (As<v1::ListGpuModelsRequest>(m)) return "catalog";
  if (auto* r = As<v1::CreateTenantRequest>(m)) return "tenant/" + r->tenant().path();
  if (auto* r = As<v1::GetTenantRequest>(m)) return "tenant/" + r->path();
  if (auto* r = As<v1::DeleteTenantRequest>(m)) return "tenant/" + r->path();
  if (As<v1::ListTenantsRequest>(m)) return "tenants";
  if (auto* r = As<v1::SetQuotaRequest>(m)) {
    return "quota/" + r->quota().tenant() + "/" + r->quota().pool();
  }
  if (auto* r = As<v1::GetQuotaRequest>(m)) return "quota/" + r->tenant() + "/" + r->pool();
  if (auto* r = As<v1::DeleteQuotaRequest>(m)) return "quota/" + r->tenant() + "/" + r->pool();
  if (As<v1::ListQuotasRequest>(m)) return "quotas";
  if (As<v1::ListAuditRecordsRequest>(m)) return "audit";
  // Names only: a credential's secret never reaches the audit log.
  if (auto* r = As<v1::CreateRegistryCredentialRequest>(m)) {
    return "registry-credential/" + r->credential().tenant() + "/" + r->credential().name();
  }
  if (auto* r = As<v1::DeleteRegistryCredentialRequest>(m)) {
    return "registry-credential/" + r->tenant() + "/" + r->name();
  }
  if (As<v1::ListRegistryCredentialsRequest>(m)) return "registry-credentials";
  // The URL and kinds only: the signing secret never reaches the audit log.
  if (auto* r = As<v1::CreateWebhookRequest>(m)) {
    if (auto* resp = As<v1::CreateWebhookResponse>(reply);
        resp != nullptr && resp->webhook().id()) {
      return "webhook/" + std::to_string(resp->webhook().id());
    }
    return "tenant/" + r->webhook().tenant();
  }
  if (auto* r = As<v1::GetWebhookRequest>(m)) return "webhook/" + r->id();
  if (auto* r = As<v1::DeleteWebhookRequest>(m)) return "webhook/" + r->id();
  if (auto* r = As<v1::EnableWebhookRequest>(m)) return "webhook/" + r->id();
  if (As<v1::ListWebhooksRequest>(m)) return "webhooks";
  if (auto* r = As<v1::CreatePricePlanRequest>(m)) return "priceplan/" + r->plan().name();
  if (auto* r = As<v1::UpdatePricePlanRequest>(m)) return "priceplan/" + r->plan().name();
  if (As<v1::ListPricePlansRequest>(m)) return "priceplans";
  if (auto* r = As<v1::ListInvoicesRequest>(m)) return "invoices/" + r->tenant();
  if (auto* r = As<v1::GetUsageFeedRequest>(m)) return "usage-feed/" + r->tenant();
  if (auto* r = As<v1::SetBudgetRequest>(m)) return "budget/" + r->budget().tenant();
  if (auto* r = As<v1::DeleteBudgetRequest>(m)) return "budget/" + r->tenant();
  if (auto* r = As<v1::ListBudgetsRequest>(m)) return "budgets/" + r->tenant();
  if (auto* r = As<v1::CompareWhatIfRequest>(m)) return "whatif/" + r->pool();
  if (auto* r = As<v1::CreateServiceRequest>(m)) {
    return "service/" + r->service().tenant() + "/" + r->service().name();
  }
  if (auto* r = As<v1::UpdateServiceRequest>(m)) {
    return "service/" + r->service().tenant() + "/" + r->service().name();
  }
  if (auto* r = As<v1::GetServiceRequest>(m)) return "service/" + r->tenant() + "/" + r->name();
  if (auto* r = As<v1::RollbackServiceRequest>(m)) {
    return "service/" + r->tenant() + "/" + r->name();
  }
  if (auto* r = As<v1::DeleteServiceRequest>(m)) return "service/" + r->tenant() + "/" + r->name();
  if (As<v1::ListServicesRequest>(m)) return "services";
  return "";
}

std::string RequestIdOr(std::string_view given) {
  bool ok = !given.empty() && given.size() <= 128;
  for (char c : given) ok = ok && IdChar(c);
  if (ok) return std::string(given);
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  static constexpr char kHex[] = "0123456789abcdef";
  std::string id(16, '0');
  uint64_t bits = rng();
  for (char& c : id) {
    c = kHex[bits & 0xF];
    bits >>= 4;
  }
  return id;
}

Status AuditHook::Admit(std::string_view verb) const {
  if (sink_ == nullptr || !IsMutatingVerb(verb)) return Status::Ok();
  return sink_->AdmitMutation();
}

void AuditHook::Finish(const CallOrigin& origin, const CallContext* caller, std::string_view verb,
                       const google::protobuf::Message* req, const google::protobuf::Message* reply,
                       const Status& status, std::function<void()> reply_fn) const {
  const bool mutating = IsMutatingVerb(verb);
  if (sink_ == nullptr || (!mutating && !IsDenial(status.code()))) return reply_fn();
  AuditEntry e;
  e.time_us = std::chrono::duration_cast<std::chrono::microseconds>(
                  std::chrono::system_clock::now().time_since_epoch())
                  .count();
  if (caller != nullptr) {
    e.actor = ActorOf(*caller);
  } else {
    e.actor.role = "anonymous";
  }
  e.tenant = RecordTenant(caller, req, reply);
  e.verb = std::string(verb);
  if (req != nullptr) e.resource = ResourceOf(*req, status.ok() ? reply : nullptr);
  e.code = status.code();
  e.message = status.message();
  e.request_id = origin.request_id;
  e.source = origin.source;
  if (mutating) return sink_->Record(std::move(e), true, std::move(reply_fn));
  sink_->Record(std::move(e), false, nullptr);
  reply_fn();
}

}  // namespace gpupool::api
