// Registry credentials stored per tenant (registry_credentials.h).
#include "scheduler/registry_credentials.h"

#include "base/log.h"
#include "pool/image_reference.h"

namespace gpupool {

Status CheckRegistryCredentialName(const std::string& name, const std::string& field) {
  bool ok = !name.empty() && name.size() <= 63;
  for (size_t i = 0; ok && i < name.size(); ++i) {
    const char c = name[i];
    const bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
    ok = alnum || (i > 0 && (c == '.' || c == '_' || c == '-'));
  }
  if (ok) return Status::Ok();
  return Status::InvalidArgument(field + ": '" + name +
                                 "' must be 1 to 63 of [a-z0-9._-], starting with [a-z0-9]");
}

Result<std::string> NormaliseRegistryHost(const std::string& registry, const std::string& field) {
  // Docker Hub's other names are the one an image reference without a host resolves to.
  if (registry == "index.docker.io" || registry == "registry-1.docker.io") {
    return std::string("docker.io");
  }
  const bool host_like = registry.find('.') != std::string::npos ||
                         registry.find(':') != std::string::npos || registry == "localhost";
  Result<ImageReference> ref = ParseImageReference(registry + "/probe/probe");
  if (!host_like || registry.find('/') != std::string::npos || !ref.ok() ||
      ref->registry != registry) {
    return Status::InvalidArgument(field + ": '" + registry +
                                   "' is not a registry host (\"registry.example.com\", "
                                   "\"127.0.0.1:5000\", \"docker.io\")");
  }
  return registry;
}

Result<std::optional<RegistryCredentialRecord>> ResolveRegistryCredential(
    RegistryCredentialStore& store, const std::string& tenant, const std::string& name) {
  std::string owner = tenant;
  while (!owner.empty()) {
    Result<std::optional<RegistryCredentialRecord>> c = store.Get(owner, name);
    if (!c.ok() || c->has_value()) return c;
    const size_t slash = owner.rfind('/');
    owner = slash == std::string::npos ? "" : owner.substr(0, slash);
  }
  return std::optional<RegistryCredentialRecord>();
}

StartTaskCommand CredentialInjectingGateway::WithCredential(const StartTaskCommand& cmd) const {
  const std::string& name = cmd.registry_credential_env;
  if (name.empty() || cmd.env.contains(name)) return cmd;  // none, or the job's own
  StartTaskCommand out = cmd;
  out.registry_credential_env.clear();
  Result<std::optional<RegistryCredentialRecord>> c =
      ResolveRegistryCredential(*store_, cmd.tenant, name);
  Result<ImageReference> image = ParseImageReference(cmd.image);
  std::string why;
  if (!c.ok()) {
    why = "the credential store failed: " + c.status().message();
  } else if (!c->has_value()) {
    why = "tenant '" + cmd.tenant + "' has no registry credential of that name";
  } else if (!image.ok() || image->registry != (*c)->registry) {
    why = "it is for registry '" + (*c)->registry + "', not the image's";
  } else {
    out.env[kStoredRegistryCredentialEnv] = (*c)->username + ":" + (*c)->password;
    out.registry_credential_env = kStoredRegistryCredentialEnv;
    return out;
  }
  LogWarn("dispatch", "registry credential not sent; the image is pulled without one",
          {{"task", cmd.task_id}, {"credential", name}, {"why", why}});
  return out;
}

bool CredentialInjectingGateway::StartTask(const std::string& node, const StartTaskCommand& cmd) {
  if (cmd.registry_credential_env.empty()) return inner_->StartTask(node, cmd);
  return inner_->StartTask(node, WithCredential(cmd));
}

}  // namespace gpupool
