// audit: read the audit log (AuditService.ListAuditRecords), newest first.
#include "cmd/ctl/app.h"
#include "gpupool/v1/audit.grpc.pb.h"

namespace gpupool::ctl {

namespace {

int List(Ctx& ctx, const ParsedArgs& a) {
  v1::ListAuditRecordsRequest req;
  req.set_principal(a.Get("actor"));
  req.set_verb(a.Get("verb"));
  req.set_resource(a.Get("resource"));
  req.set_outcome(a.Get("outcome"));
  req.set_since(a.Get("since"));
  req.set_until(a.Get("until"));
  req.set_page_token(a.Get("page-token"));
  if (auto limit = a.Find("limit")) {
    char* end = nullptr;
    const long n = std::strtol(limit->c_str(), &end, 10);
    if (limit->empty() || *end != '\0' || n < 1 || n > 1000) {
      return ctx.Usage("--limit: expected a number 1..1000, got '" + *limit + "'");
    }
    req.set_page_size(static_cast<int32_t>(n));
  }
  v1::ListAuditRecordsResponse resp;
  auto call = ctx.NewCall();
  grpc::Status s =
      v1::AuditService::NewStub(ctx.channel())->ListAuditRecords(call.get(), req, &resp);
  if (!s.ok()) return ctx.Fail(s);
  if (ctx.format != OutputFormat::kTable) {
    PrintMessage(ctx.out, resp, ctx.format);
    return kExitOk;
  }
  if (resp.records_size() == 0) {
    ctx.err << "no audit records\n";
    return kExitOk;
  }
  Table t({"TIME", "ACTOR", "ROLE", "VERB", "RESOURCE", "OUTCOME", "SOURCE", "REQUEST"});
  for (const v1::AuditRecord& r : resp.records()) {
    const std::string actor = r.principal().empty() ? "-" : r.principal();
    t.AddRow({FormatTime(r.time()), actor, r.role(), r.verb(),
              r.resource().empty() ? "-" : r.resource(), r.outcome(), r.source(), r.request_id()});
  }
  t.Print(ctx.out);
  if (!resp.next_page_token().empty()) {
    ctx.err << "more: --page-token " << resp.next_page_token() << "\n";
  }
  return kExitOk;
}

}  // namespace

std::vector<Command> AuditCommands() {
  return {
      {"audit",
       "[--actor P] [--verb V] [--resource R] [--outcome CODE] [--since T] [--until T] "
       "[--limit N]",
       "Show the audit log: every change and every denied call, newest first",
       "Each record says when, who (principal, role), what (verb, resource), how it ended\n"
       "(OK, PERMISSION_DENIED, …), the request id and the caller's address. An admin sees\n"
       "every record; a tenant sees those of its own subtree. Times are RFC 3339.",
       {{"actor", 0, FlagKind::kValue, "PRINCIPAL", "only calls by this principal (exact)"},
        {"verb", 0, FlagKind::kValue, "VERB", "only this API method, e.g. SubmitJob"},
        {"resource", 0, FlagKind::kValue, "PREFIX", "only resources starting so, e.g. job/42"},
        {"outcome", 0, FlagKind::kValue, "CODE", "only this outcome, e.g. PERMISSION_DENIED"},
        {"since", 0, FlagKind::kValue, "TIME", "from this time on, e.g. 2026-11-23T22:00:00Z"},
        {"until", 0, FlagKind::kValue, "TIME", "before this time"},
        {"limit", 0, FlagKind::kValue, "N", "at most N records (1..1000, default 100)"},
        {"page-token", 0, FlagKind::kValue, "TOKEN", "the next page, as printed after a page"}},
       "  gpupoolctl audit\n"
       "  gpupoolctl audit --outcome PERMISSION_DENIED --since 2026-11-23T00:00:00Z\n"
       "  gpupoolctl audit --actor acme/research --verb SubmitJob -o json\n",
       0,
       0,
       List},
  };
}

}  // namespace gpupool::ctl
