// budgets set|list|delete: monthly budgets with alerts (BillingService; docs/billing.md,
// "Budgets"). Money is shown exactly as the server sends it (decimal strings).
#include <charconv>
#include <iostream>

#include "cmd/ctl/app.h"
#include "gpupool/v1/billing.grpc.pb.h"

namespace gpupool::ctl {
namespace {

std::unique_ptr<v1::BillingService::Stub> Stub(Ctx& ctx) {
  return v1::BillingService::NewStub(ctx.channel());
}

std::string Percents(const v1::Budget& b) {
  std::string out;
  for (int32_t p : b.alert_percents()) out += (out.empty() ? "" : ",") + std::to_string(p);
  return out;
}

int Set(Ctx& ctx, const ParsedArgs& a) {
  v1::SetBudgetRequest req;
  v1::Budget* b = req.mutable_budget();
  b->set_tenant(a.positional[0]);
  b->set_amount(a.Get("amount"));
  if (b->amount().empty()) return ctx.Usage("--amount: the monthly budget, e.g. 1000");
  b->set_currency(a.Get("currency"));
  for (const std::string& text : a.GetAll("alert")) {
    int32_t p = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), p);
    if (ec != std::errc() || end != text.data() + text.size()) {
      return ctx.Usage("--alert: '" + text + "' is not a whole percent (e.g. 80)");
    }
    b->add_alert_percents(p);
  }
  v1::Budget resp;
  auto call = ctx.NewCall();
  grpc::Status s = Stub(ctx)->SetBudget(call.get(), req, &resp);
  if (!s.ok()) return ctx.Fail(s);
  if (ctx.format != OutputFormat::kTable) {
    PrintMessage(ctx.out, resp, ctx.format);
  } else {
    ctx.out << "budget of " << resp.tenant() << ": " << resp.amount() << " " << resp.currency()
            << " a month, alerts at " << Percents(resp) << "%\n";
  }
  return kExitOk;
}

int List(Ctx& ctx, const ParsedArgs& a) {
  v1::ListBudgetsRequest req;
  req.set_tenant(a.Get("tenant"));
  v1::ListBudgetsResponse resp;
  auto call = ctx.NewCall();
  grpc::Status s = Stub(ctx)->ListBudgets(call.get(), req, &resp);
  if (!s.ok()) return ctx.Fail(s);
  if (ctx.format != OutputFormat::kTable) {
    PrintMessage(ctx.out, resp, ctx.format);
    return kExitOk;
  }
  if (resp.budgets_size() == 0) {
    ctx.err << "no budgets\n";
    return kExitOk;
  }
  Table t({"TENANT", "AMOUNT", "CURRENCY", "ALERTS%", "PERIOD", "SPENT", "USED%"});
  for (const v1::Budget& b : resp.budgets()) {
    auto or_dash = [](const std::string& v) { return v.empty() ? std::string("-") : v; };
    t.AddRow({b.tenant(), b.amount(), b.currency(), Percents(b), or_dash(b.period()),
              or_dash(b.spent()), or_dash(b.percent_used())});
  }
  t.Print(ctx.out);
  return kExitOk;
}

int Delete(Ctx& ctx, const ParsedArgs& a) {
  v1::DeleteBudgetRequest req;
  req.set_tenant(a.positional[0]);
  v1::DeleteBudgetResponse resp;
  auto call = ctx.NewCall();
  grpc::Status s = Stub(ctx)->DeleteBudget(call.get(), req, &resp);
  if (!s.ok()) return ctx.Fail(s);
  if (ctx.format == OutputFormat::kTable) {
    ctx.out << "budget of " << req.tenant() << " deleted\n";
  } else {
    PrintMessage(ctx.out, resp, ctx.format);
  }
  return kExitOk;
}

}  // namespace

std::vector<Command> BudgetCommands() {
  return {
      {"budgets set",
       "TENANT --amount AMOUNT [--currency CODE] [--alert PERCENT]...",
       "Set a tenant subtree's monthly budget and its alert thresholds",
       "A budget stops nothing. When the subtree's spend for the calendar month (UTC) reaches\n"
       "an alert threshold, the leader sends one budget.threshold event to the tenant's\n"
       "webhooks (once per month and threshold). Spend is the month's invoice total so far.\n"
       "The currency must be the one the tenant is rated in (default: that one). Admin, or\n"
       "tenant-admin for its own subtree. See docs/billing.md, \"Budgets\".",
       {{"amount", 0, FlagKind::kValue, "AMOUNT", "per month, an exact decimal (e.g. 1000)"},
        {"currency", 0, FlagKind::kValue, "CODE", "ISO 4217 (default: the tenant's plan's)"},
        {"alert", 0, FlagKind::kRepeated, "PERCENT",
         "alert at this percent of the amount, 1..1000 (repeat; default 50, 80, 100)"}},
       "  gpupoolctl budgets set acme/research --amount 1000\n"
       "  gpupoolctl budgets set acme --amount 25000 --alert 75 --alert 90 --alert 100\n",
       1,
       1,
       Set},
      {"budgets list",
       "[--tenant PATH]",
       "List budgets with the month's spend so far",
       "",
       {{"tenant", 0, FlagKind::kValue, "PATH", "only this subtree's budgets"}},
       "  gpupoolctl budgets list\n",
       0,
       0,
       List},
      {"budgets delete",
       "TENANT",
       "Delete a tenant's budget (its alerts already sent stay in the event log)",
       "",
       {},
       "  gpupoolctl budgets delete acme/research\n",
       1,
       1,
       Delete},
  };
}

}  // namespace gpupool::ctl
