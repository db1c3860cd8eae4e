// registry-credentials create|list|delete: registry credentials a tenant keeps once for its
// private images (docs/images.md, "Private registries"). The secret is read from stdin or a file,
// never from the command line (where `ps` and shell history would show it), and never printed.
#include "cmd/ctl/app.h"
#include "gpupool/v1/keys.grpc.pb.h"

namespace gpupool::ctl {
namespace {

std::unique_ptr<v1::KeyService::Stub> Stub(Ctx& ctx) {
  return v1::KeyService::NewStub(ctx.channel());
}

// The secret from FILE ('-' = stdin), without the line end a shell or editor leaves.
Result<std::string> ReadSecret(const std::string& path) {
  GPUPOOL_ASSIGN_OR_RETURN(std::string text, ReadFileOrStdin(path));
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  if (text.empty()) {
    return Status::InvalidArgument("--secret-file: " + (path == "-" ? "stdin" : path) +
                                   " holds no secret");
  }
  return text;
}

int Create(Ctx& ctx, const ParsedArgs& a) {
  v1::CreateRegistryCredentialRequest req;
  v1::RegistryCredential* c = req.mutable_credential();
  c->set_name(a.positional[0]);
  c->set_tenant(a.Get("tenant"));
  c->set_registry(a.Get("registry"));
  c->set_username(a.Get("username"));
  Result<std::string> secret = ReadSecret(a.Get("secret-file", "-"));
  if (!secret.ok()) return ctx.Usage(secret.status().message());
  c->set_secret(*secret);
  req.set_replace(a.Has("replace"));
  v1::RegistryCredential resp;
  auto call = ctx.NewCall();
  grpc::Status s = Stub(ctx)->CreateRegistryCredential(call.get(), req, &resp);
  if (!s.ok()) return ctx.Fail(s);
  if (ctx.format != OutputFormat::kTable) {
    PrintMessage(ctx.out, resp, ctx.format);
  } else {
    ctx.out << "registry credential " << resp.name() << " of " << resp.tenant() << " for "
            << resp.registry() << (req.replace() ? " stored" : " created") << "\n";
  }
  return kExitOk;
}

int List(Ctx& ctx, const ParsedArgs& a) {
  v1::ListRegistryCredentialsRequest req;
  req.set_tenant(a.Get("tenant"));
  v1::ListRegistryCredentialsResponse resp;
  auto call = ctx.NewCall();
  grpc::Status s = Stub(ctx)->ListRegistryCredentials(call.get(), req, &resp);
  if (!s.ok()) return ctx.Fail(s);
  if (ctx.format != OutputFormat::kTable) {
    PrintMessage(ctx.out, resp, ctx.format);
    return kExitOk;
  }
  if (resp.credentials_size() == 0) {
    ctx.err << "no registry credentials\n";
    return kExitOk;
  }
  Table t({"TENANT", "NAME", "REGISTRY", "USERNAME", "UPDATED", "CREATED BY"});
  for (const v1::RegistryCredential& c : resp.credentials()) {
    t.AddRow({c.tenant(), c.name(), c.registry(), c.username(), FormatTime(c.update_time()),
              c.created_by()});
  }
  t.Print(ctx.out);
  return kExitOk;
}

int Delete(Ctx& ctx, const ParsedArgs& a) {
  v1::DeleteRegistryCredentialRequest req;
  req.set_name(a.positional[0]);
  req.set_tenant(a.Get("tenant"));
  v1::DeleteRegistryCredentialResponse resp;
  auto call = ctx.NewCall();
  grpc::Status s = Stub(ctx)->DeleteRegistryCredential(call.get(), req, &resp);
  if (!s.ok()) return ctx.Fail(s);
  if (ctx.format == OutputFormat::kTable) {
    ctx.out << "registry credential " << req.name() << " of " << req.tenant() << " deleted\n";
  } else {
    PrintMessage(ctx.out, resp, ctx.format);
  }
  return kExitOk;
}

}  // namespace

std::vector<Command> RegistryCredentialCommands() {
  return {
      {"registry-credentials create",
       "NAME --tenant PATH --registry HOST --username USER [--secret-file FILE] [--replace]",
       "Store a registry credential for a tenant's private images (secret from stdin)",
       "Jobs of --tenant and of every tenant below it pull their images with it by naming it:\n"
       "`jobs submit --image REF --registry-credential NAME`. It is sent only to pulls from\n"
       "--registry. The secret (a password or token) is read from --secret-file, or stdin by\n"
       "default, sealed at rest and never shown back. --replace rotates an existing one: the\n"
       "next task start uses the new secret. Requires the tenant-admin role (or admin).",
       {{"tenant", 0, FlagKind::kValue, "PATH", "the tenant that keeps it"},
        {"registry", 0, FlagKind::kValue, "HOST",
         "the registry it is for: registry.example.com, 127.0.0.1:5000, docker.io"},
        {"username", 0, FlagKind::kValue, "USER", "the user name the registry expects"},
        {"secret-file", 0, FlagKind::kValue, "FILE", "where the secret is ('-' = stdin, default)"},
        {"replace", 0, FlagKind::kBool, "", "replace a credential of the same name (rotate)"}},
       "  printf %s \"$TOKEN\" | gpupoolctl registry-credentials create acme-registry \\\n"
       "      --tenant acme --registry registry.acme.example --username robot\n",
       1,
       1,
       Create},
      {"registry-credentials list",
       "[--tenant PATH]",
       "List the registry credentials a caller may use (never their secrets)",
       "A tenant sees the credentials of its subtree and of the tenants above it; an admin all.",
       {{"tenant", 0, FlagKind::kValue, "PATH", "only credentials kept by this subtree"}},
       "  gpupoolctl registry-credentials list --tenant acme\n",
       0,
       0,
       List},
      {"registry-credentials delete",
       "NAME --tenant PATH",
       "Delete a registry credential; tasks started later pull without it",
       "",
       {{"tenant", 0, FlagKind::kValue, "PATH", "the tenant that keeps it"}},
       "  gpupoolctl registry-credentials delete acme-registry --tenant acme\n",
       1,
       1,
       Delete},
  };
}

}  // namespace gpupool::ctl
