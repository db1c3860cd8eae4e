// ServiceImpl: registry credentials kept per tenant (KeyService; scheduler/registry_credentials.h,
// docs/images.md "Private registries"). Synchronous calls to the RegistryCredentialStore on the
// caller's thread: credentials are not scheduling state.
//
// Rights: an admin manages every tenant's credentials; a tenant-admin those of its own subtree.
// Anyone within a tenant may list the credentials it may use (its own subtree's and its
// ancestors'), names and registries only. A credential outside the caller's reach is NOT_FOUND,
// as if it did not exist. The secret is never returned, logged or audited.
#include "api/service_internal.h"
#include "api/utf8.h"
#include "pool/image_reference.h"
#include "scheduler/registry_credentials.h"

namespace gpupool::api {
namespace {

v1::RegistryCredential CredentialProto(const RegistryCredentialRecord& c) {
  v1::RegistryCredential out;
  out.set_name(c.name);
  out.set_tenant(c.tenant);
  out.set_registry(c.registry);
  out.set_username(c.username);
  out.set_created_by(c.created_by);
  SetTimestamp(c.create_ms * 1000, out.mutable_create_time());
  SetTimestamp(c.update_ms * 1000, out.mutable_update_time());
  return out;  // never the secret
}

// May `ctx` use (and so see the name of) a credential kept by `owner`? Its own subtree's and
// its ancestors' (a job of "acme/research" may use one kept by "acme").
bool MayUse(const CallContext& ctx, const std::string& owner) {
  if (ctx.admin()) return true;
  if (ctx.scope.empty()) return false;
  return TenantWithin(owner, ctx.scope) || TenantWithin(ctx.scope, owner);
}

Status ValidateText(const std::string& value, const std::string& field, size_t max) {
  if (value.empty()) return Invalid(field, "required");
  if (value.size() > max) return Invalid(field, "at most " + std::to_string(max) + " bytes");
  for (unsigned char c : value) {
    if (c < 0x20 || c == 0x7f) return Invalid(field, "must not contain control characters");
  }
  if (!IsValidUtf8(value)) return Invalid(field, "must be valid UTF-8");
  return Status::Ok();
}

}  // namespace

void ServiceImpl::CreateRegistryCredential(const CallContext& ctx,
                                           const v1::CreateRegistryCredentialRequest& req,
                                           Reply<v1::RegistryCredential> done) {
  if (options_.registry_credentials == nullptr) {
    return ApiService::CreateRegistryCredential(ctx, req, std::move(done));
  }
  if (Status s = RequireRole(ctx, Role::kTenantAdmin, "create registry credential"); !s.ok()) {
    return Fail(done, s);
  }
  const v1::RegistryCredential& in = req.credential();
  if (Status s = ValidateTenantPath(in.tenant(), "credential.tenant"); !s.ok()) {
    return Fail(done, s);
  }
  if (Status s = RequireTenant(ctx, in.tenant(), "credential.tenant"); !s.ok()) {
    return Fail(done, s);
  }
  if (Status s = CheckRegistryCredentialName(in.name(), "credential.name"); !s.ok()) {
    return Fail(done, s);
  }
  Result<std::string> registry = NormaliseRegistryHost(in.registry(), "credential.registry");
  if (!registry.ok()) return Fail(done, registry.status());
  if (Status s = ValidateText(in.username(), "credential.username", 256); !s.ok()) {
    return Fail(done, s);
  }
  // Only the field is named: the value is the secret.
  if (in.secret().empty()) return Fail(done, Invalid("credential.secret", "required"));
  if (in.secret().size() > 4096 || in.secret().find('\0') != std::string::npos ||
      !IsValidUtf8(in.secret())) {
    return Fail(done,
                Invalid("credential.secret", "must be UTF-8 without NUL, at most 4096 bytes"));
  }
  RegistryCredentialRecord c;
  c.tenant = in.tenant();
  c.name = in.name();
  c.registry = *registry;
  c.username = in.username();
  c.password = in.secret();
  c.created_by = ctx.key_id;
  c.create_ms = c.update_ms = NowMs();
  if (Status s = options_.registry_credentials->Put(c, req.replace()); !s.ok()) {
    return Fail(done, s);
  }
  // A replacement keeps its creator and creation time: answer with what is stored.
  Result<std::optional<RegistryCredentialRecord>> stored =
      options_.registry_credentials->Get(c.tenant, c.name);
  if (stored.ok() && stored->has_value()) c = **stored;
  done(Status::Ok(), CredentialProto(c));
}

void ServiceImpl::ListRegistryCredentials(const CallContext& ctx,
                                          const v1::ListRegistryCredentialsRequest& req,
                                          Reply<v1::ListRegistryCredentialsResponse> done) {
  if (options_.registry_credentials == nullptr) {
    return ApiService::ListRegistryCredentials(ctx, req, std::move(done));
  }
  if (!req.tenant().empty()) {
    if (Status s = ValidateTenantPath(req.tenant(), "tenant"); !s.ok()) return Fail(done, s);
  }
  if (!ctx.admin() && ctx.scope.empty()) {
    return Fail(done, Status::PermissionDenied("list registry credentials: the caller has no "
                                               "tenant"));
  }
  Result<std::vector<RegistryCredentialRecord>> all = options_.registry_credentials->List("");
  if (!all.ok()) return Fail(done, all.status());
  v1::ListRegistryCredentialsResponse resp;
  for (const RegistryCredentialRecord& c : *all) {
    if (!req.tenant().empty() && !TenantWithin(c.tenant, req.tenant())) continue;
    if (MayUse(ctx, c.tenant)) *resp.add_credentials() = CredentialProto(c);
  }
  done(Status::Ok(), std::move(resp));
}

void ServiceImpl::DeleteRegistryCredential(const CallContext& ctx,
                                           const v1::DeleteRegistryCredentialRequest& req,
                                           Reply<v1::DeleteRegistryCredentialResponse> done) {
  if (options_.registry_credentials == nullptr) {
    return ApiService::DeleteRegistryCredential(ctx, req, std::move(done));
  }
  if (Status s = RequireRole(ctx, Role::kTenantAdmin, "delete registry credential"); !s.ok()) {
    return Fail(done, s);
  }
  if (Status s = ValidateTenantPath(req.tenant(), "tenant"); !s.ok()) return Fail(done, s);
  if (Status s = CheckRegistryCredentialName(req.name(), "name"); !s.ok()) return Fail(done, s);
  if (!RequireTenant(ctx, req.tenant(), "tenant").ok()) {
    return Fail(done, Status::NotFound("registry credential '" + req.name() + "' of tenant '" +
                                       req.tenant() + "' does not exist"));
  }
  if (Status s = options_.registry_credentials->Delete(req.tenant(), req.name()); !s.ok()) {
    return Fail(done, s);
  }
  done(Status::Ok(), v1::DeleteRegistryCredentialResponse{});
}

Status ServiceImpl::PurgeRegistryCredentials(const std::string& tenant) const {
  GPUPOOL_ASSIGN_OR_RETURN(std::vector<RegistryCredentialRecord> kept,
                           options_.registry_credentials->List(tenant));
  for (const RegistryCredentialRecord& c : kept) {
    Status s = options_.registry_credentials->Delete(c.tenant, c.name);
    if (!s.ok() && s.code() != StatusCode::kNotFound) return s;
  }
  return Status::Ok();
}

Status ServiceImpl::CheckStoredRegistryCredential(const JobSpec& spec) const {
  const TaskTemplate& t = spec.task_template;
  if (t.registry_credential.empty() || t.secret_env.contains(t.registry_credential)) {
    return Status::Ok();  // none, or the job's own
  }
  const std::string field = "spec.template.registry_credential";
  if (options_.registry_credentials == nullptr) {
    return Invalid(field, "'" + t.registry_credential +
                              "' is not the name of a secret_env entry (this server keeps no "
                              "registry credentials)");
  }
  Result<std::optional<RegistryCredentialRecord>> c =
      ResolveRegistryCredential(*options_.registry_credentials, spec.tenant, t.registry_credential);
  if (!c.ok()) return c.status();
  if (!c->has_value()) {
    return Invalid(field, "'" + t.registry_credential +
                              "' is neither a secret_env entry nor a registry credential of "
                              "tenant '" +
                              spec.tenant + "' or a tenant above it");
  }
  Result<ImageReference> image = ParseImageReference(t.image);
  if (!image.ok()) return image.status();
  if (image->registry != (*c)->registry) {
    return Invalid(field, "registry credential '" + t.registry_credential + "' is for '" +
                              (*c)->registry + "', and the image is from '" + image->registry +
                              "'");
  }
  return Status::Ok();
}

}  // namespace gpupool::api
