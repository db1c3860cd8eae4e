// webhooks create|list|get|delete|enable: HTTPS endpoints a tenant registers for the events of
// its jobs (docs/webhooks.md). The signing secret is printed once, by create.
#include <charconv>

#include "cmd/ctl/app.h"
#include "gpupool/v1/webhooks.grpc.pb.h"

namespace gpupool::ctl {
namespace {

std::unique_ptr<v1::WebhookService::Stub> Stub(Ctx& ctx) {
  return v1::WebhookService::NewStub(ctx.channel());
}

// The webhook id of the first positional argument, or 0.
int64_t IdOf(const ParsedArgs& a) {
  const std::string& s = a.positional[0];
  int64_t id = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), id);
  return ec == std::errc() && end == s.data() + s.size() && id > 0 ? id : 0;
}

std::string State(const v1::Webhook& w) {
  return w.enabled() ? "enabled" : "disabled: " + w.disabled_reason();
}

std::string Kinds(const v1::Webhook& w) {
  std::string out;
  for (const std::string& k : w.event_kinds()) out += (out.empty() ? "" : ",") + k;
  return out.empty() ? "all" : out;
}

int Create(Ctx& ctx, const ParsedArgs& a) {
  v1::CreateWebhookRequest req;
  req.mutable_webhook()->set_url(a.positional[0]);
  req.mutable_webhook()->set_tenant(a.Get("tenant"));
  for (const std::string& k : a.GetAll("event")) req.mutable_webhook()->add_event_kinds(k);
  v1::CreateWebhookResponse resp;
  auto call = ctx.NewCall();
  grpc::Status s = Stub(ctx)->CreateWebhook(call.get(), req, &resp);
  if (!s.ok()) return ctx.Fail(s);
  if (ctx.format != OutputFormat::kTable) {
    PrintMessage(ctx.out, resp, ctx.format);
  } else {
    ctx.out << "webhook " << resp.webhook().id() << " of " << resp.webhook().tenant() << " to "
            << resp.webhook().url() << " created\n"
            << "signing secret (shown once; verify Gpupool-Signature with it):\n"
            << resp.secret() << "\n";
  }
  return kExitOk;
}

int List(Ctx& ctx, const ParsedArgs& a) {
  v1::ListWebhooksRequest req;
  req.set_tenant(a.Get("tenant"));
  v1::ListWebhooksResponse resp;
  auto call = ctx.NewCall();
  grpc::Status s = Stub(ctx)->ListWebhooks(call.get(), req, &resp);
  if (!s.ok()) return ctx.Fail(s);
  if (ctx.format != OutputFormat::kTable) {
    PrintMessage(ctx.out, resp, ctx.format);
    return kExitOk;
  }
  if (resp.webhooks_size() == 0) {
    ctx.err << "no webhooks\n";
    return kExitOk;
  }
  Table t({"ID", "TENANT", "URL", "EVENTS", "LAST", "STATE"});
  for (const v1::Webhook& w : resp.webhooks()) {
    t.AddRow({std::to_string(w.id()), w.tenant(), w.url(), Kinds(w), w.last_status(), State(w)});
  }
  t.Print(ctx.out);
  return kExitOk;
}

int Get(Ctx& ctx, const ParsedArgs& a) {
  v1::GetWebhookRequest req;
  if (IdOf(a) == 0) return ctx.Usage("ID: a webhook id (a positive number)");
  req.set_id(a.positional[0]);
  v1::GetWebhookResponse resp;
  auto call = ctx.NewCall();
  grpc::Status s = Stub(ctx)->GetWebhook(call.get(), req, &resp);
  if (!s.ok()) return ctx.Fail(s);
  if (ctx.format != OutputFormat::kTable) {
    PrintMessage(ctx.out, resp, ctx.format);
    return kExitOk;
  }
  const v1::Webhook& w = resp.webhook();
  ctx.out << "webhook " << w.id() << " of " << w.tenant() << "\n"
          << "  url:       " << w.url() << "\n"
          << "  events:    " << Kinds(w) << "\n"
          << "  state:     " << State(w) << "\n"
          << "  failures:  " << w.failures() << " in a row\n"
          << "  last:      " << w.last_status() << "\n"
          << "  created:   " << FormatTime(w.create_time()) << " by " << w.created_by() << "\n";
  if (resp.attempts_size() == 0) return kExitOk;
  Table t({"DELIVERY", "ATTEMPT", "TIME", "MS", "STATUS", "ERROR"});
  for (const v1::WebhookAttempt& d : resp.attempts()) {
    t.AddRow({d.delivery_id(), std::to_string(d.attempt()), FormatTime(d.time()),
              std::to_string(d.duration_ms()),
              d.http_status() == 0 ? "-" : std::to_string(d.http_status()), d.error()});
  }
  t.Print(ctx.out);
  return kExitOk;
}

int Delete(Ctx& ctx, const ParsedArgs& a) {
  v1::DeleteWebhookRequest req;
  if (IdOf(a) == 0) return ctx.Usage("ID: a webhook id (a positive number)");
  req.set_id(a.positional[0]);
  v1::DeleteWebhookResponse resp;
  auto call = ctx.NewCall();
  grpc::Status s = Stub(ctx)->DeleteWebhook(call.get(), req, &resp);
  if (!s.ok()) return ctx.Fail(s);
  if (ctx.format == OutputFormat::kTable) {
    ctx.out << "webhook " << req.id() << " deleted\n";
  } else {
    PrintMessage(ctx.out, resp, ctx.format);
  }
  return kExitOk;
}

int Enable(Ctx& ctx, const ParsedArgs& a) {
  v1::EnableWebhookRequest req;
  if (IdOf(a) == 0) return ctx.Usage("ID: a webhook id (a positive number)");
  req.set_id(a.positional[0]);
  v1::Webhook resp;
  auto call = ctx.NewCall();
  grpc::Status s = Stub(ctx)->EnableWebhook(call.get(), req, &resp);
  if (!s.ok()) return ctx.Fail(s);
  if (ctx.format == OutputFormat::kTable) {
    ctx.out << "webhook " << resp.id() << " enabled; it resumes after event " << resp.cursor()
            << "\n";
  } else {
    PrintMessage(ctx.out, resp, ctx.format);
  }
  return kExitOk;
}

}  // namespace

std::vector<Command> WebhookCommands() {
  return {
      {"webhooks create",
       "URL --tenant PATH [--event KIND]...",
       "Register an HTTPS endpoint for the events of a tenant's jobs (prints the secret once)",
       "Every event of the jobs of --tenant and its subtree is POSTed to URL as JSON, in order,\n"
       "signed: Gpupool-Signature: t=<unix>,v1=<hex HMAC-SHA256(secret, \"<t>.<body>\")>.\n"
       "Gpupool-Delivery is the same for every attempt of one event: dedupe on it. A failure\n"
       "is retried with back-off; an endpoint failing for a day is disabled (see `webhooks\n"
       "get`). Kinds: job.submitted, job.cancelled, task.state, task.preempted, task.lost,\n"
       "task.gang_stopped, service.created, service.updated, service.deleted, service.scaled,\n"
       "service.degraded, service.recovered, service.rollout_done (default: all). Requires the\n"
       "tenant-admin role (or admin).",
       {{"tenant", 0, FlagKind::kValue, "PATH",
         "the tenant whose jobs' and services' events it gets"},
        {"event", 0, FlagKind::kRepeated, "KIND", "an event kind to send (repeatable)"}},
       "  gpupoolctl webhooks create https://hooks.acme.example/gpupool --tenant acme\n"
       "  gpupoolctl webhooks create https://ci.acme.example/hook --tenant acme/ci \\\n"
       "      --event task.state --event job.cancelled\n",
       1,
       1,
       Create},
      {"webhooks list",
       "[--tenant PATH]",
       "List webhooks, their last outcome and whether they are disabled (and why)",
       "",
       {{"tenant", 0, FlagKind::kValue, "PATH", "only this subtree's webhooks"}},
       "  gpupoolctl webhooks list --tenant acme\n",
       0,
       0,
       List},
      {"webhooks get",
       "ID",
       "Show a webhook and its latest delivery attempts",
       "",
       {},
       "  gpupoolctl webhooks get 3\n",
       1,
       1,
       Get},
      {"webhooks delete",
       "ID",
       "Delete a webhook; nothing more is sent to it",
       "",
       {},
       "  gpupoolctl webhooks delete 3\n",
       1,
       1,
       Delete},
      {"webhooks enable",
       "ID",
       "Enable a disabled webhook; it resumes where it stopped",
       "The events that happened while it was disabled are delivered, in order.",
       {},
       "  gpupoolctl webhooks enable 3\n",
       1,
       1,
       Enable},
  };
}

}  // namespace gpupool::ctl
