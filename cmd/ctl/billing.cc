// priceplans list|show|create|update, invoices, usage-feed: billing (BillingService;
// docs/billing.md). Money is shown exactly as the server sends it (decimal strings).
#include <google/protobuf/util/time_util.h>

#include <iostream>
#include <sstream>

#include "api/price_plan_yaml.h"
#include "cmd/ctl/app.h"
#include "gpupool/v1/billing.grpc.pb.h"
#include "pool/yaml_error.h"

namespace gpupool::ctl {
namespace {

std::unique_ptr<v1::BillingService::Stub> Stub(Ctx& ctx) {
  return v1::BillingService::NewStub(ctx.channel());
}

std::string Join(const google::protobuf::RepeatedPtrField<std::string>& v) {
  std::string out;
  for (const std::string& s : v) out += (out.empty() ? "" : ",") + s;
  return out.empty() ? "-" : out;
}

int ListPlans(Ctx& ctx, const ParsedArgs& a) {
  v1::ListPricePlansRequest req;
  req.set_name(a.Get("name"));
  req.set_all_versions(a.GetBool("all-versions"));
  v1::ListPricePlansResponse resp;
  auto call = ctx.NewCall();
  grpc::Status s = Stub(ctx)->ListPricePlans(call.get(), req, &resp);
  if (!s.ok()) return ctx.Fail(s);
  if (ctx.format != OutputFormat::kTable) {
    PrintMessage(ctx.out, resp, ctx.format);
    return kExitOk;
  }
  if (resp.plans_size() == 0) {
    ctx.err << "no price plans\n";
    return kExitOk;
  }
  Table t({"NAME", "VERSION", "EFFECTIVE", "CURRENCY", "RATES", "CREDIT%", "TENANTS"});
  for (const v1::PricePlan& p : resp.plans()) {
    t.AddRow({p.name(), std::to_string(p.version()), FormatTime(p.effective_time()), p.currency(),
              std::to_string(p.rates_size()), p.preemption_credit_percent(), Join(p.tenants())});
  }
  t.Print(ctx.out);
  return kExitOk;
}

int ShowPlan(Ctx& ctx, const ParsedArgs& a) {
  v1::ListPricePlansRequest req;
  req.set_name(a.positional[0]);
  req.set_all_versions(a.GetBool("all-versions"));
  v1::ListPricePlansResponse resp;
  auto call = ctx.NewCall();
  grpc::Status s = Stub(ctx)->ListPricePlans(call.get(), req, &resp);
  if (!s.ok()) return ctx.Fail(s);
  if (resp.plans_size() == 0) {
    ctx.err << "gpupoolctl: NOT_FOUND: price plan '" << req.name() << "' not found\n";
    return kExitNotFound;
  }
  if (ctx.format != OutputFormat::kTable) {
    PrintMessage(ctx.out, resp, ctx.format);
    return kExitOk;
  }
  for (const v1::PricePlan& p : resp.plans()) {
    ctx.out << "Plan " << p.name() << " v" << p.version() << " (" << p.currency() << "), effective "
            << FormatTime(p.effective_time()) << "\n";
    if (!p.description().empty()) ctx.out << "  " << p.description() << "\n";
    ctx.out << "  tenants: " << Join(p.tenants())
            << "   preemption credit: " << p.preemption_credit_percent() << "%\n";
    Table t({"UNIT", "POOL", "MODEL", "MIG PROFILE", "PRICE/UNIT-HOUR"});
    for (const v1::PriceRate& r : p.rates()) {
      t.AddRow({r.unit(), OrDash(r.pool()), OrDash(r.model()), OrDash(r.mig_profile()), r.price()});
    }
    t.Print(ctx.out);
    if (p.priority_multipliers_size() > 0) {
      std::map<std::string, std::string> sorted(p.priority_multipliers().begin(),
                                                p.priority_multipliers().end());
      ctx.out << "  multipliers:";
      for (const auto& [cls, m] : sorted) ctx.out << " " << cls << "=x" << m;
      ctx.out << "\n";
    }
  }
  return kExitOk;
}

Status ReadPlanFile(const std::string& path, v1::PricePlan* plan) {
  GPUPOOL_ASSIGN_OR_RETURN(std::string text, ReadFileOrStdin(path));
  const std::string source = path == "-" ? "stdin" : path;
  GPUPOOL_ASSIGN_OR_RETURN(YAML::Node root, ParseYaml(text, source));
  return api::PricePlanFromYaml(YamlDoc(source), root, YamlPath{}, plan);
}

int WritePlan(Ctx& ctx, const ParsedArgs& a, bool create) {
  v1::PricePlan plan;
  if (Status st = ReadPlanFile(a.Get("file"), &plan); !st.ok()) return ctx.Usage(st.message());
  v1::PricePlan resp;
  auto call = ctx.NewCall();
  grpc::Status s;
  if (create) {
    v1::CreatePricePlanRequest req;
    *req.mutable_plan() = plan;
    s = Stub(ctx)->CreatePricePlan(call.get(), req, &resp);
  } else {
    v1::UpdatePricePlanRequest req;
    *req.mutable_plan() = plan;
    s = Stub(ctx)->UpdatePricePlan(call.get(), req, &resp);
  }
  if (!s.ok()) return ctx.Fail(s);
  if (ctx.format != OutputFormat::kTable) {
    PrintMessage(ctx.out, resp, ctx.format);
  } else {
    ctx.out << "price plan " << resp.name() << " version " << resp.version() << " effective "
            << FormatTime(resp.effective_time()) << "\n";
  }
  return kExitOk;
}

int CreatePlan(Ctx& ctx, const ParsedArgs& a) { return WritePlan(ctx, a, true); }
int UpdatePlan(Ctx& ctx, const ParsedArgs& a) { return WritePlan(ctx, a, false); }

// --tenant, --period, --from/--to into a request with those fields.
template <typename Req>
Status PeriodFlags(const ParsedArgs& a, Req* req) {
  req->set_tenant(a.Get("tenant"));
  req->set_period(a.Get("period"));
  for (const char* flag : {"from", "to"}) {
    auto v = a.Find(flag);
    if (!v) continue;
    google::protobuf::Timestamp* t =
        std::string_view(flag) == "from" ? req->mutable_start_time() : req->mutable_end_time();
    if (!google::protobuf::util::TimeUtil::FromString(*v, t)) {
      return Status::InvalidArgument(std::string("--") + flag +
                                     ": expected an RFC 3339 time, e.g. 2026-11-01T00:00:00Z");
    }
  }
  return Status::Ok();
}

// --format csv|json|table (default table); json/yaml also via -o.
Result<std::string> FormatFlag(const Ctx& ctx, const ParsedArgs& a) {
  std::string f = a.Get("format", ctx.format == OutputFormat::kJson   ? "json"
                                  : ctx.format == OutputFormat::kYaml ? "yaml"
                                                                      : "table");
  if (f != "csv" && f != "json" && f != "table" && f != "yaml") {
    return Status::InvalidArgument("--format: expected csv, json or table, got '" + f + "'");
  }
  return f;
}

int PrintExport(Ctx& ctx, const grpc::Status& s, const v1::ExportResponse& file) {
  if (!s.ok()) return ctx.Fail(s);
  ctx.out << file.body();
  return kExitOk;
}

int Invoices(Ctx& ctx, const ParsedArgs& a) {
  v1::ListInvoicesRequest req;
  if (Status st = PeriodFlags(a, &req); !st.ok()) return ctx.Usage(st.message());
  Result<std::string> format = FormatFlag(ctx, a);
  if (!format.ok()) return ctx.Usage(format.status().message());
  auto call = ctx.NewCall();
  if (*format == "csv") {
    v1::ExportResponse file;
    return PrintExport(ctx, Stub(ctx)->ExportInvoices(call.get(), req, &file), file);
  }
  v1::ListInvoicesResponse resp;
  grpc::Status s = Stub(ctx)->ListInvoices(call.get(), req, &resp);
  if (!s.ok()) return ctx.Fail(s);
  if (*format != "table") {
    PrintMessage(ctx.out, resp, *format == "json" ? OutputFormat::kJson : OutputFormat::kYaml);
    return kExitOk;
  }
  if (resp.invoices_size() == 0) {
    ctx.err << "no invoices (no usage in the period)\n";
    return kExitOk;
  }
  for (const v1::Invoice& inv : resp.invoices()) {
    ctx.out << "Invoice " << inv.tenant() << "  " << FormatTime(inv.period_start()) << " .. "
            << FormatTime(inv.period_end()) << "  (" << inv.currency() << ")\n";
    Table t({"TENANT", "SERVICE", "POOL", "MODEL", "CLASS", "UNIT", "QUANTITY", "PRICE", "X",
             "AMOUNT"});
    auto add = [&](const v1::InvoiceLine& l, bool credit) {
      t.AddRow({l.tenant(), OrDash(l.service()), l.pool(),
                OrDash(l.model()) + (l.mig_profile().empty() ? "" : " " + l.mig_profile()),
                OrDash(l.priority_class()),
                credit ? "credit " + l.credit_percent() + "%" : l.unit(), l.quantity(),
                l.unit_price(), l.multiplier(), (credit ? "-" : "") + l.amount()});
    };
    for (const v1::InvoiceLine& l : inv.lines()) add(l, false);
    for (const v1::InvoiceLine& l : inv.credits()) add(l, true);
    t.Print(ctx.out);
    ctx.out << "  subtotal " << inv.subtotal() << "   credits -" << inv.credit_total()
            << "   total " << inv.total() << " " << inv.currency() << "\n";
  }
  return kExitOk;
}

int UsageFeed(Ctx& ctx, const ParsedArgs& a) {
  v1::GetUsageFeedRequest req;
  if (Status st = PeriodFlags(a, &req); !st.ok()) return ctx.Usage(st.message());
  Result<std::string> format = FormatFlag(ctx, a);
  if (!format.ok()) return ctx.Usage(format.status().message());
  auto call = ctx.NewCall();
  if (*format == "csv") {
    v1::ExportResponse file;
    return PrintExport(ctx, Stub(ctx)->ExportUsageFeed(call.get(), req, &file), file);
  }
  v1::GetUsageFeedResponse resp;
  grpc::Status s = Stub(ctx)->GetUsageFeed(call.get(), req, &resp);
  if (!s.ok()) return ctx.Fail(s);
  if (*format != "table") {
    PrintMessage(ctx.out, resp, *format == "json" ? OutputFormat::kJson : OutputFormat::kYaml);
    return kExitOk;
  }
  Table t({"ACCOUNT", "ITEM", "QUANTITY", "UNIT", "AMOUNT", "CURRENCY"});
  for (const v1::UsageFeedItem& it : resp.items()) {
    t.AddRow({it.account(), it.item_code(), it.quantity(), it.unit(), it.amount(), it.currency()});
  }
  t.Print(ctx.out);
  return kExitOk;
}

const std::vector<FlagSpec> kPeriodFlags = {
    {"tenant", 0, FlagKind::kValue, "PATH", "the subtree to bill (default: your own; admin: all)"},
    {"period", 0, FlagKind::kValue, "PERIOD", "a month 2026-11 or a day 2026-11-05 (UTC)"},
    {"from", 0, FlagKind::kValue, "TIME", "start of a custom period (RFC 3339), with --to"},
    {"to", 0, FlagKind::kValue, "TIME", "end of a custom period (exclusive)"},
    {"format", 0, FlagKind::kValue, "FORMAT", "table (default), csv or json"}};

}  // namespace

std::vector<Command> BillingCommands() {
  return {
      {"priceplans list",
       "[--name NAME] [--all-versions]",
       "List price plans (the newest version of each)",
       "An admin sees every plan; a tenant-admin the plans that rate its subtree.",
       {{"name", 0, FlagKind::kValue, "NAME", "only this plan"},
        {"all-versions", 0, FlagKind::kBool, "", "every version, not only the newest"}},
       "  gpupoolctl priceplans list\n  gpupoolctl priceplans list --name standard "
       "--all-versions\n",
       0,
       0,
       ListPlans},
      {"priceplans show",
       "NAME [--all-versions]",
       "Show a price plan's rates, multipliers and credit",
       "",
       {{"all-versions", 0, FlagKind::kBool, "", "every version, oldest first"}},
       "  gpupoolctl priceplans show standard\n",
       1,
       1,
       ShowPlan},
      {"priceplans create",
       "-f FILE",
       "Create a price plan (version 1) from a YAML or JSON file (admin)",
       "The file holds name, currency, rates (unit, price, optional pool/model/mig_profile),\n"
       "optional tenants, priority_multipliers, preemption_credit_percent, effective_time\n"
       "(default now; never in the past). Units: tflops-hour, vram-gib-hour, device-hour,\n"
       "mig-profile-hour, spill-gib-hour, slot-hour. Prices are exact decimals per unit-hour.\n"
       "See "
       "docs/billing.md.",
       {{"file", 'f', FlagKind::kValue, "FILE", "the plan, YAML or JSON ('-' = stdin)"}},
       "  gpupoolctl priceplans create -f standard.yaml\n",
       0,
       0,
       CreatePlan},
      {"priceplans update",
       "-f FILE",
       "Add a new version of a price plan (admin); past invoices keep the old prices",
       "The file is the whole new version (as for create). It takes effect at effective_time\n"
       "(default now), never before the previous version.",
       {{"file", 'f', FlagKind::kValue, "FILE", "the plan, YAML or JSON ('-' = stdin)"}},
       "  gpupoolctl priceplans update -f standard.yaml\n",
       0,
       0,
       UpdatePlan},
      {"invoices", "[--tenant PATH] [--period P | --from T --to T] [--format table|csv|json]",
       "Rate the usage ledger into invoices (admin, or tenant-admin for its subtree)",
       "One invoice per subtree: charge lines (quantity, unit price, priority multiplier,\n"
       "amount rounded half-even to the currency's minor unit), credits for preempted work,\n"
       "subtotal, credits and total. Default period: the current month (UTC).",
       kPeriodFlags,
       "  gpupoolctl invoices --tenant acme --period 2026-11\n"
       "  gpupoolctl invoices --period 2026-11 --format csv > invoices-2026-11.csv\n",
       0, 0, Invoices},
      {"usage-feed", "[--tenant PATH] [--period P | --from T --to T] [--format table|csv|json]",
       "Per-account usage items for a billing engine (WHMCS-style)",
       "Each item: account (tenant path), item code (gpu.<unit>.<pool>.<model>.<class>),\n"
       "quantity in unit-hours, unit, unit price, amount (credits negative), currency and\n"
       "period. See docs/billing.md, \"Usage feed\".",
       kPeriodFlags, "  gpupoolctl usage-feed --period 2026-11 --format csv\n", 0, 0, UsageFeed},
  };
}

}  // namespace gpupool::ctl
