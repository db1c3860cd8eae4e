// tenants create|get|list|delete.
#include <ctime>

#include "cmd/ctl/app.h"
#include "cmd/ctl/quota_amount.h"
#include "gpupool/v1/tenants.grpc.pb.h"

namespace gpupool::ctl {

namespace {

std::unique_ptr<v1::TenantService::Stub> Stub(Ctx& ctx) {
  return v1::TenantService::NewStub(ctx.channel());
}

void PrintTenant(std::ostream& out, const v1::Tenant& t) {
  PrintFields(out, {{"Path", t.path()},
                    {"Created", FormatTime(t.create_time())},
                    {"Quotas", std::to_string(t.quotas_size())}});
  if (t.quotas_size() == 0) return;
  out << '\n';
  Table table({"POOL", "GUARANTEED", "LIMIT", "USED", "BORROWED"});
  for (const v1::Quota& q : t.quotas()) {
    table.AddRow({q.pool(), FormatQuotaAmount(q.guaranteed(), "-"),
                  FormatQuotaAmount(q.limit(), "unlimited"), FormatQuotaAmount(q.used(), "0"),
                  FormatQuotaAmount(q.borrowed(), "0")});
  }
  table.Print(out);
}

int Create(Ctx& ctx, const ParsedArgs& a) {
  v1::CreateTenantRequest req;
  req.mutable_tenant()->set_path(a.positional[0]);
  v1::Tenant tenant;
  auto call = ctx.NewCall();
  grpc::Status s = Stub(ctx)->CreateTenant(call.get(), req, &tenant);
  if (!s.ok()) return ctx.Fail(s);
  if (ctx.format != OutputFormat::kTable) {
    PrintMessage(ctx.out, tenant, ctx.format);
  } else {
    ctx.out << "tenant " << tenant.path() << " created\n";
  }
  return kExitOk;
}

int Get(Ctx& ctx, const ParsedArgs& a) {
  v1::GetTenantRequest req;
  req.set_path(a.positional[0]);
  v1::Tenant tenant;
  auto call = ctx.NewCall();
  grpc::Status s = Stub(ctx)->GetTenant(call.get(), req, &tenant);
  if (!s.ok()) return ctx.Fail(s);
  if (ctx.format != OutputFormat::kTable) {
    PrintMessage(ctx.out, tenant, ctx.format);
  } else {
    PrintTenant(ctx.out, tenant);
  }
  return kExitOk;
}

int List(Ctx& ctx, const ParsedArgs& a) {
  v1::ListTenantsRequest req;
  req.set_prefix(a.Get("prefix"));
  v1::ListTenantsResponse resp;
  auto call = ctx.NewCall();
  grpc::Status s = Stub(ctx)->ListTenants(call.get(), req, &resp);
  if (!s.ok()) return ctx.Fail(s);
  if (ctx.format != OutputFormat::kTable) {
    PrintMessage(ctx.out, resp, ctx.format);
    return kExitOk;
  }
  if (resp.tenants_size() == 0) {
    ctx.err << "no tenants\n";
    return kExitOk;
  }
  Table t({"PATH", "QUOTAS", "AGE"});
  const int64_t now = static_cast<int64_t>(std::time(nullptr));
  for (const v1::Tenant& tenant : resp.tenants()) {
    std::string pools;
    for (const v1::Quota& q : tenant.quotas()) pools += (pools.empty() ? "" : ",") + q.pool();
    t.AddRow({tenant.path(), pools.empty() ? "-" : pools, FormatAge(tenant.create_time(), now)});
  }
  t.Print(ctx.out);
  return kExitOk;
}

int Delete(Ctx& ctx, const ParsedArgs& a) {
  v1::DeleteTenantRequest req;
  req.set_path(a.positional[0]);
  v1::DeleteTenantResponse resp;
  auto call = ctx.NewCall();
  grpc::Status s = Stub(ctx)->DeleteTenant(call.get(), req, &resp);
  if (!s.ok()) return ctx.Fail(s);
  if (ctx.format != OutputFormat::kTable) {
    PrintMessage(ctx.out, resp, ctx.format);
  } else {
    ctx.out << "tenant " << req.path() << " deleted\n";
  }
  return kExitOk;
}

}  // namespace

std::vector<Command> TenantCommands() {
  const char* path_text =
      "A tenant path is 1 to 3 segments of [a-z0-9._-] joined by '/' (org/project/user),\n"
      "e.g. acme/research/alice. A parent must exist before its children.";
  return {
      {"tenants create",
       "PATH",
       "Create a tenant (admin)",
       path_text,
       {},
       "  gpupoolctl tenants create acme\n"
       "  gpupoolctl tenants create acme/research\n",
       1,
       1,
       Create},
      {"tenants get",
       "PATH",
       "Show a tenant and its quotas with their usage",
       "A tenant sees itself and the tenants below it; an admin sees every tenant.",
       {},
       "  gpupoolctl tenants get acme/research\n",
       1,
       1,
       Get},
      {"tenants list",
       "[--prefix PATH]",
       "List tenants (a tenant and everything under it with --prefix)",
       "Without --prefix an admin sees every tenant, a tenant its own subtree.",
       {{"prefix", 0, FlagKind::kValue, "PATH", "only this tenant and those under it"}},
       "  gpupoolctl tenants list\n  gpupoolctl tenants list --prefix acme\n",
       0,
       0,
       List},
      {"tenants delete",
       "PATH",
       "Delete a tenant and its quotas (admin)",
       "A tenant with children cannot be deleted: delete the children first.",
       {},
       "  gpupoolctl tenants delete acme/research/alice\n",
       1,
       1,
       Delete},
  };
}

}  // namespace gpupool::ctl
