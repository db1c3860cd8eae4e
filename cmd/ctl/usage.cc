// usage: the usage ledger's report (UsageService.GetUsage), per period and group, with totals.
#include <algorithm>
#include <cstdio>

#include "cmd/ctl/app.h"
#include "gpupool/v1/usage.grpc.pb.h"

namespace gpupool::ctl {

namespace {

std::string Fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

int Report(Ctx& ctx, const ParsedArgs& a) {
  v1::GetUsageRequest req;
  req.set_tenant(a.Get("tenant"));
  req.set_pool(a.Get("pool"));
  req.set_model(a.Get("model"));
  req.set_priority_class(a.Get("class"));
  req.set_period(a.Get("period"));
  req.set_from(a.Get("from"));
  req.set_to(a.Get("to"));
  if (auto depth = a.Find("depth")) {
    char* end = nullptr;
    const long n = std::strtol(depth->c_str(), &end, 10);
    if (depth->empty() || *end != '\0' || n < 0 || n > 64) {
      return ctx.Usage("--depth: expected a number 0..64, got '" + *depth + "'");
    }
    req.set_tenant_depth(static_cast<int32_t>(n));
  }
  req.set_split_preempted(a.Has("preempted"));
  v1::GetUsageResponse resp;
  auto call = ctx.NewCall();
  grpc::Status s = v1::UsageService::NewStub(ctx.channel())->GetUsage(call.get(), req, &resp);
  if (!s.ok()) return ctx.Fail(s);
  if (ctx.format != OutputFormat::kTable) {
    PrintMessage(ctx.out, resp, ctx.format);
    return kExitOk;
  }
  if (resp.rows_size() == 0) {
    ctx.err << "no usage in this range\n";
    return kExitOk;
  }
  const bool split = req.split_preempted();
  // A SERVICE column only when some of the usage is a service's replicas'.
  const bool services = std::any_of(resp.rows().begin(), resp.rows().end(),
                                    [](const v1::UsageRow& r) { return !r.service().empty(); });
  std::vector<std::string> header = {"PERIOD",   "TENANT", "POOL",       "MODEL",
                                     "CLASS",    "MIG",    "TFLOPS-H",   "VRAM-GIB-H",
                                     "DEVICE-H", "MIG-H",  "SPILL-GIB-H"};
  // Time-slice slot-hours only where some row holds slots: most fleets slice no device.
  const bool slots = resp.totals().slot_seconds() > 0;
  if (slots) header.push_back("SLOT-H");
  if (split) header.insert(header.begin() + 6, "PREEMPTED");
  if (services) header.insert(header.begin() + 2, "SERVICE");
  Table t(header);
  auto add = [&t, split, services, slots](
                 const std::string& period, const std::string& tenant, const std::string& service,
                 const std::string& pool, const std::string& model, const std::string& cls,
                 const std::string& mig, const std::string& preempted, const v1::UsageTotals& u) {
    std::vector<std::string> row = {period,
                                    tenant,
                                    pool,
                                    model,
                                    cls,
                                    mig.empty() ? "-" : mig,
                                    Fixed(u.tflops_seconds() / 3600, 3),
                                    Fixed(u.vram_gib_seconds() / 3600, 3),
                                    Fixed(static_cast<double>(u.device_seconds()) / 3600, 3),
                                    Fixed(static_cast<double>(u.mig_instance_seconds()) / 3600, 3),
                                    Fixed(u.spill_gib_seconds() / 3600, 3)};
    if (slots) row.push_back(Fixed(static_cast<double>(u.slot_seconds()) / 3600, 3));
    if (split) row.insert(row.begin() + 6, preempted);
    if (services) row.insert(row.begin() + 2, period == "TOTAL" ? "" : OrDash(service));
    t.AddRow(row);
  };
  for (const v1::UsageRow& r : resp.rows()) {
    add(FormatTime(r.period_start()), r.tenant(), r.service(), r.pool(), r.model(),
        r.priority_class(), r.mig_profile(), r.preempted() ? "yes" : "no", r.totals());
  }
  add("TOTAL", "", "", "", "", "", "", "", resp.totals());
  t.Print(ctx.out);
  return kExitOk;
}

}  // namespace

std::vector<Command> UsageCommands() {
  return {
      {"usage",
       "[--tenant T] [--pool P] [--model M] [--class C] [--period hour|day|month] [--from T] "
       "[--to T] [--depth N] [--preempted]",
       "Show metered usage (TFLOPS, VRAM, devices, MIG instances, slots) per period, with totals",
       "Sums the usage ledger: what task attempts held while they ran, metered in closed\n"
       "intervals (docs/billing.md). The table shows hours (TFLOPS-hours, GiB-hours, …);\n"
       "-o json gives the exact integer units too. An admin sees every tenant; others see\n"
       "their own subtree. Periods are UTC; an interval counts in [--from, --to) by its start.\n"
       "--preempted splits out the usage of attempts that ended by preemption (what invoices\n"
       "credit at the price plan's preemption_credit_percent).",
       {{"tenant", 0, FlagKind::kValue, "PATH", "this tenant and everything below it"},
        {"pool", 0, FlagKind::kValue, "POOL", "only this pool"},
        {"model", 0, FlagKind::kValue, "MODEL", "only this device model, e.g. H100-SXM"},
        {"class", 0, FlagKind::kValue, "CLASS", "only this priority class"},
        {"period", 0, FlagKind::kValue, "PERIOD", "hour, day (default) or month"},
        {"from", 0, FlagKind::kValue, "TIME", "from this time on, e.g. 2026-11-01T00:00:00Z"},
        {"to", 0, FlagKind::kValue, "TIME", "before this time"},
        {"depth", 0, FlagKind::kValue, "N", "report tenants at this depth (0: full paths)"},
        {"preempted", 0, FlagKind::kBool, "", "a PREEMPTED column: usage of preempted attempts"}},
       "  gpupoolctl usage --period month --from 2026-11-01T00:00:00Z --to 2026-12-01T00:00:00Z\n"
       "  gpupoolctl usage --tenant acme --depth 2 --pool gpu-a\n"
       "  gpupoolctl usage --period hour -o json\n"
       "  gpupoolctl usage --tenant acme --period month --preempted\n",
       0,
       0,
       Report},
  };
}

}  // namespace gpupool::ctl
