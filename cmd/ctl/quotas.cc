// quotas set|get|list|delete.
#include "cmd/ctl/app.h"
#include "cmd/ctl/quota_amount.h"
#include "gpupool/v1/tenants.grpc.pb.h"

namespace gpupool::ctl {

namespace {

std::unique_ptr<v1::TenantService::Stub> Stub(Ctx& ctx) {
  return v1::TenantService::NewStub(ctx.channel());
}

// A limit of zero in a dimension does not limit it: all zero reads "unlimited".
std::string Guaranteed(const v1::Quota& q) { return FormatQuotaAmount(q.guaranteed(), "-"); }
std::string Limit(const v1::Quota& q) { return FormatQuotaAmount(q.limit(), "unlimited"); }

int Output(Ctx& ctx, const v1::Quota& q) {
  if (ctx.format != OutputFormat::kTable) {
    PrintMessage(ctx.out, q, ctx.format);
    return kExitOk;
  }
  PrintFields(ctx.out, {{"Tenant", q.tenant()},
                        {"Pool", q.pool()},
                        {"Guaranteed", Guaranteed(q)},
                        {"Limit", Limit(q)},
                        {"Used", FormatQuotaAmount(q.used(), "0") + " (with the tenants below)"},
                        {"Borrowed", FormatQuotaAmount(q.borrowed(), "0")}});
  return kExitOk;
}

int Set(Ctx& ctx, const ParsedArgs& a) {
  v1::SetQuotaRequest req;
  if (Status st = BuildQuota(a, req.mutable_quota()); !st.ok()) return ctx.Usage(st.message());
  v1::Quota quota;
  auto call = ctx.NewCall();
  grpc::Status s = Stub(ctx)->SetQuota(call.get(), req, &quota);
  if (!s.ok()) return ctx.Fail(s);
  if (ctx.format != OutputFormat::kTable) return Output(ctx, quota);
  ctx.out << "quota of " << quota.tenant() << " in pool " << quota.pool() << " set: guaranteed "
          << Guaranteed(quota) << "; limit " << Limit(quota) << '\n';
  return kExitOk;
}

int Get(Ctx& ctx, const ParsedArgs& a) {
  v1::GetQuotaRequest req;
  req.set_tenant(a.positional[0]);
  req.set_pool(a.positional[1]);
  v1::Quota quota;
  auto call = ctx.NewCall();
  grpc::Status s = Stub(ctx)->GetQuota(call.get(), req, &quota);
  if (!s.ok()) return ctx.Fail(s);
  return Output(ctx, quota);
}

int List(Ctx& ctx, const ParsedArgs& a) {
  v1::ListQuotasRequest req;
  req.set_tenant_prefix(a.Get("tenant"));
  req.set_pool(a.Get("pool"));
  v1::ListQuotasResponse resp;
  auto call = ctx.NewCall();
  grpc::Status s = Stub(ctx)->ListQuotas(call.get(), req, &resp);
  if (!s.ok()) return ctx.Fail(s);
  if (ctx.format != OutputFormat::kTable) {
    PrintMessage(ctx.out, resp, ctx.format);
    return kExitOk;
  }
  if (resp.quotas_size() == 0) {
    ctx.err << "no quotas\n";
    return kExitOk;
  }
  Table t({"TENANT", "POOL", "GUARANTEED", "LIMIT", "USED", "BORROWED"});
  for (const v1::Quota& q : resp.quotas()) {
    t.AddRow({q.tenant(), q.pool(), Guaranteed(q), Limit(q), FormatQuotaAmount(q.used(), "0"),
              FormatQuotaAmount(q.borrowed(), "0")});
  }
  t.Print(ctx.out);
  return kExitOk;
}

int Delete(Ctx& ctx, const ParsedArgs& a) {
  v1::DeleteQuotaRequest req;
  req.set_tenant(a.positional[0]);
  req.set_pool(a.positional[1]);
  v1::DeleteQuotaResponse resp;
  auto call = ctx.NewCall();
  grpc::Status s = Stub(ctx)->DeleteQuota(call.get(), req, &resp);
  if (!s.ok()) return ctx.Fail(s);
  if (ctx.format != OutputFormat::kTable) {
    PrintMessage(ctx.out, resp, ctx.format);
  } else {
    ctx.out << "quota of " << req.tenant() << " in pool " << req.pool() << " deleted\n";
  }
  return kExitOk;
}

}  // namespace

std::vector<Command> QuotaCommands() {
  const char* set_text =
      "Replaces the quota of TENANT in POOL. An amount is comma-separated key=value pairs:\n"
      "tflops (decimal), vram (20GiB, 1TiB), devices (whole GPUs and MIG instances), or\n"
      "sku and count (the server's SKU table converts them). A dimension left out is zero:\n"
      "nothing guaranteed, or not limited. The limit binds the tenant and every tenant below\n"
      "it; a child's limit may not exceed its parent's, and the children's guarantees may not\n"
      "add up to more than the parent's in any dimension (a child guaranteed VRAM needs a\n"
      "parent guaranteed VRAM). Refusals exit with code 4 and name the quota.";
  return {
      {"quotas set", "TENANT POOL [--guaranteed AMOUNT] [--limit AMOUNT]",
       "Set a tenant's quota in a pool (admin)", set_text, QuotaFlags(),
       "  gpupoolctl quotas set acme shared --guaranteed tflops=2000,vram=400GiB --limit "
       "tflops=4000,devices=8\n"
       "  gpupoolctl quotas set acme/research shared --guaranteed sku=medium,count=4\n",
       2, 2, Set},
      {"quotas get",
       "TENANT POOL",
       "Show a quota with what the tenant's subtree uses and borrows",
       "",
       {},
       "  gpupoolctl quotas get acme shared\n",
       2,
       2,
       Get},
      {"quotas list",
       "[--tenant PATH] [--pool NAME]",
       "List quotas with guaranteed, limit, used and borrowed",
       "USED is what the tenant and the tenants below it hold in the pool now; BORROWED is the\n"
       "part of it beyond the guarantee, which reclaim may take back. Without --tenant an admin\n"
       "sees every quota, a tenant those of its own subtree.",
       {{"tenant", 0, FlagKind::kValue, "PATH", "only this tenant and those under it"},
        {"pool", 0, FlagKind::kValue, "NAME", "only this pool"}},
       "  gpupoolctl quotas list\n  gpupoolctl quotas list --tenant acme --pool shared\n",
       0,
       0,
       List},
      {"quotas delete",
       "TENANT POOL",
       "Delete a tenant's quota in a pool (admin)",
       "",
       {},
       "  gpupoolctl quotas delete acme/research shared\n",
       2,
       2,
       Delete},
  };
}

}  // namespace gpupool::ctl
