// ServiceImpl: tenants' webhooks (WebhookService; scheduler/webhooks.h, docs/webhooks.md).
// Synchronous calls to the WebhookStore on the caller's thread: webhooks are not scheduling
// state, and the dispatcher (api/webhooks/dispatcher.h) reads them from the store.
//
// Rights: an admin manages every tenant's webhooks; a tenant-admin those of its own subtree. A
// webhook outside the caller's reach is NOT_FOUND, as if it did not exist. The signing secret is
// generated here, returned once by CreateWebhook, and never logged or audited.
#include <charconv>

#include "api/service_internal.h"
#include "api/utf8.h"
#include "api/webhooks/signature.h"
#include "scheduler/webhooks.h"

namespace gpupool::api {
namespace {

v1::Webhook WebhookProto(const WebhookRecord& w) {
  v1::Webhook out;
  out.set_id(w.id);
  out.set_tenant(w.tenant);
  out.set_url(w.url);
  for (const std::string& k : w.event_kinds) out.add_event_kinds(k);
  out.set_enabled(w.enabled);
  out.set_disabled_reason(w.disabled_reason);
  out.set_failures(w.failures);
  out.set_last_status(w.last_status);
  if (w.last_attempt_ms > 0)
    SetTimestamp(w.last_attempt_ms * 1000, out.mutable_last_attempt_time());
  out.set_cursor(w.cursor);
  SetTimestamp(w.create_ms * 1000, out.mutable_create_time());
  out.set_created_by(w.created_by);
  return out;  // never the secret
}

v1::WebhookAttempt AttemptProto(const WebhookAttempt& a) {
  v1::WebhookAttempt out;
  out.set_delivery_id(WebhookDeliveryId(a.webhook_id, a.event_id));
  out.set_event_id(a.event_id);
  out.set_attempt(a.attempt);
  SetTimestamp(a.time_ms * 1000, out.mutable_time());
  out.set_duration_ms(a.duration_ms);
  out.set_http_status(a.http_status);
  out.set_error(a.error);
  return out;
}

Status NotFound(int64_t id) {
  return Status::NotFound("webhook " + std::to_string(id) + " does not exist");
}

// The webhook `id` when the caller may manage it (tenant-admin of its subtree, or admin), else
// NOT_FOUND (never saying it exists).
Result<WebhookRecord> Reachable(WebhookStore& store, const CallContext& ctx,
                                const std::string& text) {
  int64_t id = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), id);
  if (ec != std::errc() || end != text.data() + text.size() || id <= 0) {
    return Invalid("id", "'" + text.substr(0, 40) + "' is not a webhook id (a positive number)");
  }
  GPUPOOL_ASSIGN_OR_RETURN(std::optional<WebhookRecord> w, store.Get(id));
  if (!w.has_value() || !RequireTenant(ctx, w->tenant, "webhook").ok()) return NotFound(id);
  w->secret.clear();
  return *std::move(w);
}

}  // namespace

void ServiceImpl::CreateWebhook(const CallContext& ctx, const v1::CreateWebhookRequest& req,
                                Reply<v1::CreateWebhookResponse> done) {
  if (options_.webhooks == nullptr) return ApiService::CreateWebhook(ctx, req, std::move(done));
  if (Status s = RequireRole(ctx, Role::kTenantAdmin, "create webhook"); !s.ok()) {
    return Fail(done, s);
  }
  const v1::Webhook& in = req.webhook();
  if (Status s = ValidateTenantPath(in.tenant(), "webhook.tenant"); !s.ok()) return Fail(done, s);
  if (Status s = RequireTenant(ctx, in.tenant(), "webhook.tenant"); !s.ok()) return Fail(done, s);
  if (!IsValidUtf8(in.url())) return Fail(done, Invalid("webhook.url", "must be valid UTF-8"));
  Result<WebhookUrl> url =
      ParseWebhookUrl(in.url(), options_.webhooks_allow_loopback, "webhook.url");
  if (!url.ok()) return Fail(done, url.status());
  WebhookRecord w;
  w.tenant = in.tenant();
  w.url = in.url();
  w.event_kinds.assign(in.event_kinds().begin(), in.event_kinds().end());
  if (Status s = CheckWebhookEventKinds(w.event_kinds, "webhook.event_kinds"); !s.ok()) {
    return Fail(done, s);
  }
  Result<std::vector<WebhookRecord>> kept = options_.webhooks->List(w.tenant);
  if (!kept.ok()) return Fail(done, kept.status());
  int own = 0;
  for (const WebhookRecord& k : *kept) own += k.tenant == w.tenant;
  if (own >= options_.webhooks_per_tenant) {
    return Fail(done,
                Status::ResourceExhausted("tenant '" + w.tenant + "' has " + std::to_string(own) +
                                          " webhooks, the most it may keep; delete one first"));
  }
  Result<std::string> secret = webhooks::NewSecret();
  if (!secret.ok()) return Fail(done, secret.status());
  w.secret = *secret;
  w.created_by = ctx.key_id;
  w.create_ms = NowMs();
  Result<WebhookRecord> stored = options_.webhooks->Create(w);
  if (!stored.ok()) return Fail(done, stored.status());
  v1::CreateWebhookResponse resp;
  *resp.mutable_webhook() = WebhookProto(*stored);
  resp.set_secret(*secret);
  done(Status::Ok(), std::move(resp));
}

void ServiceImpl::ListWebhooks(const CallContext& ctx, const v1::ListWebhooksRequest& req,
                               Reply<v1::ListWebhooksResponse> done) {
  if (options_.webhooks == nullptr) return ApiService::ListWebhooks(ctx, req, std::move(done));
  if (Status s = RequireRole(ctx, Role::kTenantAdmin, "list webhooks"); !s.ok()) {
    return Fail(done, s);
  }
  Result<std::string> prefix = ListPrefix(ctx, req.tenant(), "tenant");
  if (!prefix.ok()) return Fail(done, prefix.status());
  Result<std::vector<WebhookRecord>> all = options_.webhooks->List(*prefix);
  if (!all.ok()) return Fail(done, all.status());
  v1::ListWebhooksResponse resp;
  for (const WebhookRecord& w : *all) *resp.add_webhooks() = WebhookProto(w);
  done(Status::Ok(), std::move(resp));
}

void ServiceImpl::GetWebhook(const CallContext& ctx, const v1::GetWebhookRequest& req,
                             Reply<v1::GetWebhookResponse> done) {
  if (options_.webhooks == nullptr) return ApiService::GetWebhook(ctx, req, std::move(done));
  if (Status s = RequireRole(ctx, Role::kTenantAdmin, "get webhook"); !s.ok()) {
    return Fail(done, s);
  }
  Result<WebhookRecord> w = Reachable(*options_.webhooks, ctx, req.id());
  if (!w.ok()) return Fail(done, w.status());
  Result<std::vector<WebhookAttempt>> attempts =
      options_.webhooks->Attempts(w->id, kWebhookAttemptsKept);
  if (!attempts.ok()) return Fail(done, attempts.status());
  v1::GetWebhookResponse resp;
  *resp.mutable_webhook() = WebhookProto(*w);
  for (const WebhookAttempt& a : *attempts) *resp.add_attempts() = AttemptProto(a);
  done(Status::Ok(), std::move(resp));
}

void ServiceImpl::DeleteWebhook(const CallContext& ctx, const v1::DeleteWebhookRequest& req,
                                Reply<v1::DeleteWebhookResponse> done) {
  if (options_.webhooks == nullptr) return ApiService::DeleteWebhook(ctx, req, std::move(done));
  if (Status s = RequireRole(ctx, Role::kTenantAdmin, "delete webhook"); !s.ok()) {
    return Fail(done, s);
  }
  Result<WebhookRecord> w = Reachable(*options_.webhooks, ctx, req.id());
  if (!w.ok()) return Fail(done, w.status());
  if (Status s = options_.webhooks->Delete(w->id); !s.ok()) return Fail(done, s);
  done(Status::Ok(), v1::DeleteWebhookResponse{});
}

void ServiceImpl::EnableWebhook(const CallContext& ctx, const v1::EnableWebhookRequest& req,
                                Reply<v1::Webhook> done) {
  if (options_.webhooks == nullptr) return ApiService::EnableWebhook(ctx, req, std::move(done));
  if (Status s = RequireRole(ctx, Role::kTenantAdmin, "enable webhook"); !s.ok()) {
    return Fail(done, s);
  }
  Result<WebhookRecord> w = Reachable(*options_.webhooks, ctx, req.id());
  if (!w.ok()) return Fail(done, w.status());
  if (Status s = options_.webhooks->SetEnabled(w->id, true, ""); !s.ok()) {
    return Fail(done, s);
  }
  Result<WebhookRecord> now = Reachable(*options_.webhooks, ctx, req.id());
  if (!now.ok()) return Fail(done, now.status());
  done(Status::Ok(), WebhookProto(*now));
}

Status ServiceImpl::PurgeWebhooks(const std::string& tenant) const {
  if (options_.webhooks == nullptr) return Status::Ok();
  GPUPOOL_ASSIGN_OR_RETURN(std::vector<WebhookRecord> kept, options_.webhooks->List(tenant));
  for (const WebhookRecord& w : kept) {
    Status s = options_.webhooks->Delete(w.id);
    if (!s.ok() && s.code() != StatusCode::kNotFound) return s;
  }
  return Status::Ok();
}

}  // namespace gpupool::api
