// gpupoolctl priority-classes list, skus list: the server's scheduling vocabulary — which
// priority classes a job may name (and which the caller may use) and which SKUs a request or a
// quota may be given in.
#include "cmd/ctl/app.h"
#include "cmd/ctl/requests.h"
#include "cmd/ctl/units.h"
#include "gpupool/v1/pools.grpc.pb.h"

namespace gpupool::ctl {
namespace {

namespace v1 = ::gpupool::v1;

int ListPriorityClasses(Ctx& ctx, const ParsedArgs& a) {
  v1::ListPriorityClassesRequest req;
  req.set_tenant(a.Get("tenant"));
  v1::ListPriorityClassesResponse resp;
  auto call = ctx.NewCall();
  grpc::Status s =
      v1::CatalogService::NewStub(ctx.channel())->ListPriorityClasses(call.get(), req, &resp);
  if (!s.ok()) return ctx.Fail(s);
  if (ctx.format != OutputFormat::kTable) {
    PrintMessage(ctx.out, resp, ctx.format);
    return kExitOk;
  }
  Table t({"NAME", "VALUE", "PREEMPTIBLE", "MAY PREEMPT", "MIN RUNTIME", "DEFAULT"});
  for (const v1::PriorityClass& c : resp.priority_classes()) {
    t.AddRow({c.name(), std::to_string(c.value()), c.preemptible() ? "yes" : "no",
              c.may_preempt() ? "yes" : "no",
              c.min_runtime_ms() > 0 ? FormatDurationMs(c.min_runtime_ms()) : "-",
              c.is_default() ? "yes" : ""});
  }
  t.Print(ctx.out);
  return kExitOk;
}

int ListSkus(Ctx& ctx, const ParsedArgs&) {
  v1::ListSkusResponse resp;
  auto call = ctx.NewCall();
  grpc::Status s = v1::CatalogService::NewStub(ctx.channel())
                       ->ListSkus(call.get(), v1::ListSkusRequest(), &resp);
  if (!s.ok()) return ctx.Fail(s);
  if (ctx.format != OutputFormat::kTable) {
    PrintMessage(ctx.out, resp, ctx.format);
    return kExitOk;
  }
  Table t({"NAME", "REQUEST"});
  for (const v1::Sku& sku : resp.skus()) t.AddRow({sku.name(), DescribeResources(sku.request())});
  t.Print(ctx.out);
  return kExitOk;
}

}  // namespace

std::vector<Command> PolicyCommands() {
  return {
      {"priority-classes list",
       "[flags]",
       "List the priority classes you may submit at (an admin: all of them)",
       "Highest value first. A job names its class with 'jobs submit --priority-class'; one that "
       "names none gets the DEFAULT class. Tenants see the classes their tenant may use "
       "(docs/tenancy.md); an admin sees every class, or a tenant's with --tenant.",
       {{"tenant", 0, FlagKind::kValue, "PATH",
         "the classes this tenant may use (yours or one below you, unless you are an admin)"}},
       "  gpupoolctl priority-classes list\n"
       "  gpupoolctl priority-classes list --tenant acme/ml\n"
       "  gpupoolctl -o json priority-classes list | jq -r '.priorityClasses[].name'\n",
       0,
       0,
       ListPriorityClasses},
      {"skus list",
       "",
       "List the SKUs: named request shapes for 'jobs submit --sku' and quotas",
       "A SKU is a share of one device (TFLOPS + VRAM) or whole GPUs, plus host CPU and memory, "
       "defined in gpupoold's config (docs/operations.md). The GPU models behind them, and how "
       "many of each the fleet has, are in 'gpupoolctl catalog list'.",
       {},
       "  gpupoolctl skus list\n  gpupoolctl -o yaml skus list\n",
       0,
       0,
       ListSkus},
  };
}

}  // namespace gpupool::ctl
