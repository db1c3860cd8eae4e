// ServiceImpl: API keys (KeyService). Synchronous calls to the ApiKeyStore on the caller's thread
// (the core is not involved: keys are not scheduling state).
//
// Rights (docs/security.md, "Roles"): an admin manages every key. A tenant-admin manages the keys
// whose scope lies within its own and may give them at most its own role, so no key it makes can
// do more than it can. Other callers are refused. A key outside the caller's reach is NOT_FOUND,
// as if it did not exist.
#include <chrono>

#include "api/credentials.h"
#include "api/service_internal.h"
#include "api/utf8.h"
#include "scheduler/api_keys.h"
#include "scheduler/tenancy.h"

namespace gpupool::api {
namespace {

v1::ApiKey KeyProto(const ApiKeyRecord& k) {
  v1::ApiKey out;
  out.set_id(k.id);
  out.set_name(k.name);
  out.set_tenant(k.tenant);
  out.set_role(k.role);
  out.set_created_by(k.created_by);
  SetTimestamp(k.create_ms * 1000, out.mutable_create_time());
  if (k.expire_ms > 0) SetTimestamp(k.expire_ms * 1000, out.mutable_expire_time());
  if (k.revoke_ms > 0) SetTimestamp(k.revoke_ms * 1000, out.mutable_revoke_time());
  return out;
}

// May `ctx` see and manage key `k`?
bool Manages(const CallContext& ctx, const ApiKeyRecord& k) {
  if (ctx.admin()) return true;
  if (!ctx.AtLeast(Role::kTenantAdmin) || ctx.scope.empty() || k.tenant.empty()) return false;
  return TenantWithin(k.tenant, ctx.scope);
}

Status ValidateName(const std::string& name) {
  if (name.empty() || name.size() > 64) return Invalid("key.name", "must be 1 to 64 characters");
  for (unsigned char c : name) {
    if (c < 0x20 || c == 0x7f) return Invalid("key.name", "must not contain control characters");
  }
  if (!IsValidUtf8(name)) return Invalid("key.name", "must be valid UTF-8");
  return Status::Ok();
}

}  // namespace

void ServiceImpl::CreateApiKey(const CallContext& ctx, const v1::CreateApiKeyRequest& req,
                               Reply<v1::CreateApiKeyResponse> done) {
  if (options_.api_keys == nullptr) return ApiService::CreateApiKey(ctx, req, std::move(done));
  if (Status s = RequireRole(ctx, Role::kTenantAdmin, "create API key"); !s.ok()) {
    return Fail(done, s);
  }
  const v1::ApiKey& in = req.key();
  if (Status s = ValidateName(in.name()); !s.ok()) return Fail(done, s);
  Result<Role> role = ParseRole(in.role());
  if (!role.ok())
    return Fail(done, Invalid("key.role", "must be viewer, member, tenant-admin or admin"));
  if (*role == Role::kAdmin) {
    if (!in.tenant().empty())
      return Fail(done, Invalid("key.tenant", "must be empty for an admin key"));
  } else {
    if (in.tenant().empty())
      return Fail(done, Invalid("key.tenant", "required unless role is admin"));
    if (Status s = ValidateTenantPath(in.tenant(), "key.tenant"); !s.ok()) return Fail(done, s);
  }
  if (!ctx.admin()) {
    if (Status s = RequireTenant(ctx, in.tenant(), "key.tenant"); !s.ok()) return Fail(done, s);
    if (static_cast<int>(*role) > static_cast<int>(ctx.role)) {
      return Fail(done, Status::PermissionDenied("key.role: '" + in.role() +
                                                 "' is above the caller's own role"));
    }
  }
  const int64_t now = NowMs();
  int64_t expire_ms = 0;
  if (in.has_expire_time()) {
    expire_ms = in.expire_time().seconds() * 1000 + in.expire_time().nanos() / 1'000'000;
    if (expire_ms <= now) return Fail(done, Invalid("key.expire_time", "must be in the future"));
  }
  Result<ApiKeySecret> secret = NewApiKeySecret();
  if (!secret.ok()) return Fail(done, secret.status());
  ApiKeyRecord k;
  k.id = secret->id;
  k.name = in.name();
  k.tenant = in.tenant();
  k.role = std::string(RoleName(*role));
  k.secret_sha256 = Sha256Hex(secret->secret);
  k.created_by = ctx.key_id;
  k.create_ms = now;
  k.expire_ms = expire_ms;
  if (Status s = options_.api_keys->Create(k); !s.ok()) return Fail(done, s);
  v1::CreateApiKeyResponse resp;
  *resp.mutable_key() = KeyProto(k);
  resp.set_secret(secret->Text());
  done(Status::Ok(), std::move(resp));
}

void ServiceImpl::ListApiKeys(const CallContext& ctx, const v1::ListApiKeysRequest& req,
                              Reply<v1::ListApiKeysResponse> done) {
  if (options_.api_keys == nullptr) return ApiService::ListApiKeys(ctx, req, std::move(done));
  if (Status s = RequireRole(ctx, Role::kTenantAdmin, "list API keys"); !s.ok()) {
    return Fail(done, s);
  }
  Result<std::string> prefix = ListPrefix(ctx, req.tenant(), "tenant");
  if (!prefix.ok()) return Fail(done, prefix.status());
  Result<std::vector<ApiKeyRecord>> keys = options_.api_keys->List(*prefix);
  if (!keys.ok()) return Fail(done, keys.status());
  v1::ListApiKeysResponse resp;
  for (const ApiKeyRecord& k : *keys) {
    if (Manages(ctx, k)) *resp.add_keys() = KeyProto(k);
  }
  done(Status::Ok(), std::move(resp));
}

void ServiceImpl::RevokeApiKey(const CallContext& ctx, const v1::RevokeApiKeyRequest& req,
                               Reply<v1::ApiKey> done) {
  if (options_.api_keys == nullptr) return ApiService::RevokeApiKey(ctx, req, std::move(done));
  if (Status s = RequireRole(ctx, Role::kTenantAdmin, "revoke API key"); !s.ok()) {
    return Fail(done, s);
  }
  const Status not_found = Status::NotFound("API key '" + req.id() + "' not found");
  if (req.id().empty() || req.id().size() > 64)
    return Fail(done, Invalid("id", "must be a key id"));
  Result<std::optional<ApiKeyRecord>> k = options_.api_keys->Get(req.id());
  if (!k.ok()) return Fail(done, k.status());
  if (!k->has_value() || !Manages(ctx, **k)) return Fail(done, not_found);
  Result<ApiKeyRecord> revoked = options_.api_keys->Revoke(req.id(), NowMs());
  if (!revoked.ok()) return Fail(done, revoked.status());
  done(Status::Ok(), KeyProto(*revoked));
}

}  // namespace gpupool::api
