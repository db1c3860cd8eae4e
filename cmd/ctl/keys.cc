// keys create|list|revoke: API keys kept by gpupoold (docs/security.md, "API keys"). The secret
// is printed once, by `keys create`; the server keeps only its digest.
#include <chrono>
#include <ctime>

#include "cmd/ctl/app.h"
#include "cmd/ctl/units.h"
#include "gpupool/v1/keys.grpc.pb.h"

namespace gpupool::ctl {
namespace {

std::unique_ptr<v1::KeyService::Stub> Stub(Ctx& ctx) {
  return v1::KeyService::NewStub(ctx.channel());
}

std::string State(const v1::ApiKey& k, int64_t now) {
  if (k.has_revoke_time()) return "revoked";
  if (k.has_expire_time() && k.expire_time().seconds() <= now) return "expired";
  return "active";
}

int Create(Ctx& ctx, const ParsedArgs& a) {
  v1::CreateApiKeyRequest req;
  v1::ApiKey* k = req.mutable_key();
  k->set_name(a.Get("name"));
  k->set_tenant(a.Get("tenant"));
  k->set_role(a.Get("role", "member"));
  if (auto ttl = a.Find("expires-in")) {
    Result<int64_t> ms = ParseDurationMs(*ttl);
    if (!ms.ok()) return ctx.Usage("--expires-in: " + ms.status().message());
    const auto at = std::chrono::system_clock::now() + std::chrono::milliseconds(*ms);
    k->mutable_expire_time()->set_seconds(
        std::chrono::duration_cast<std::chrono::seconds>(at.time_since_epoch()).count());
  }
  v1::CreateApiKeyResponse resp;
  auto call = ctx.NewCall();
  grpc::Status s = Stub(ctx)->CreateApiKey(call.get(), req, &resp);
  if (!s.ok()) return ctx.Fail(s);
  if (ctx.format != OutputFormat::kTable) {
    PrintMessage(ctx.out, resp, ctx.format);
    return kExitOk;
  }
  ctx.out << "API key " << resp.key().id() << " created (" << resp.key().role()
          << (resp.key().tenant().empty() ? "" : " of " + resp.key().tenant()) << ").\n"
          << "Its secret is shown only now; store it safely:\n"
          << resp.secret() << "\n";
  return kExitOk;
}

int List(Ctx& ctx, const ParsedArgs& a) {
  v1::ListApiKeysRequest req;
  req.set_tenant(a.Get("tenant"));
  v1::ListApiKeysResponse resp;
  auto call = ctx.NewCall();
  grpc::Status s = Stub(ctx)->ListApiKeys(call.get(), req, &resp);
  if (!s.ok()) return ctx.Fail(s);
  if (ctx.format != OutputFormat::kTable) {
    PrintMessage(ctx.out, resp, ctx.format);
    return kExitOk;
  }
  if (resp.keys_size() == 0) {
    ctx.err << "no API keys\n";
    return kExitOk;
  }
  const int64_t now = static_cast<int64_t>(std::time(nullptr));
  Table t({"ID", "NAME", "TENANT", "ROLE", "STATE", "EXPIRES", "CREATED BY"});
  for (const v1::ApiKey& k : resp.keys()) {
    t.AddRow({k.id(), k.name(), k.tenant().empty() ? "-" : k.tenant(), k.role(), State(k, now),
              k.has_expire_time() ? FormatTime(k.expire_time()) : "never", k.created_by()});
  }
  t.Print(ctx.out);
  return kExitOk;
}

int Revoke(Ctx& ctx, const ParsedArgs& a) {
  v1::RevokeApiKeyRequest req;
  req.set_id(a.positional[0]);
  v1::ApiKey key;
  auto call = ctx.NewCall();
  grpc::Status s = Stub(ctx)->RevokeApiKey(call.get(), req, &key);
  if (!s.ok()) return ctx.Fail(s);
  if (ctx.format != OutputFormat::kTable) {
    PrintMessage(ctx.out, key, ctx.format);
  } else {
    ctx.out << "API key " << key.id() << " revoked\n";
  }
  return kExitOk;
}

}  // namespace

std::vector<Command> KeyCommands() {
  return {
      {"keys create",
       "--name NAME [--tenant PATH] [--role ROLE] [--expires-in DURATION]",
       "Create an API key and print its secret (once)",
       "A key acts within --tenant's subtree with --role: viewer, member (default), tenant-admin,\n"
       "or admin (no --tenant). A tenant-admin may create keys for its own subtree, at most its\n"
       "own role. The server keeps only a SHA-256 digest of the secret.",
       {{"name", 0, FlagKind::kValue, "NAME", "what the key is for (1-64 characters)"},
        {"tenant", 0, FlagKind::kValue, "PATH", "the subtree the key acts in"},
        {"role", 0, FlagKind::kValue, "ROLE", "viewer, member, tenant-admin or admin"},
        {"expires-in", 0, FlagKind::kValue, "DURATION",
         "expire after e.g. 30d, 12h (default never)"}},
       "  gpupoolctl keys create --name ci --tenant acme/research --role member --expires-in 90d\n",
       0,
       0,
       Create},
      {"keys list",
       "[--tenant PATH]",
       "List API keys (never their secrets)",
       "An admin sees every key; a tenant-admin the keys of its subtree.",
       {{"tenant", 0, FlagKind::kValue, "PATH", "only keys of this subtree"}},
       "  gpupoolctl keys list --tenant acme\n",
       0,
       0,
       List},
      {"keys revoke",
       "ID",
       "Revoke an API key; every daemon refuses it from the next request",
       "",
       {},
       "  gpupoolctl keys revoke 3f9c0a1b2c4d\n",
       1,
       1,
       Revoke},
  };
}

}  // namespace gpupool::ctl
