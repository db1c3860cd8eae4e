// whatif: the operator's pre-flight (WhatIfService.Compare; docs/twin.md, "Pre-flight"). Builds
// the candidate change from flags, asks gpupoold to replay the pool's recent workload under the
// live config and under the change, and prints both reports side by side with the deltas.
#include <cstdio>
#include <cstdlib>
#include <set>

#include "cmd/ctl/app.h"
#include "cmd/ctl/quota_amount.h"
#include "gpupool/v1/whatif.grpc.pb.h"

namespace gpupool::ctl {

namespace {

// Replays take longer than an ordinary call: without --timeout, wait up to this long.
constexpr int64_t kWhatIfTimeoutMs = 300'000;

std::string Fixed(double v, int decimals, bool sign = false) {
  char buf[64];
  std::snprintf(buf, sizeof buf, sign ? "%+.*f" : "%.*f", decimals, v);
  return buf;
}

std::string Signed(int64_t v) { return (v > 0 ? "+" : "") + std::to_string(v); }

// "--quota TENANT=AMOUNT" into the change's quota of TENANT (its guarantee, or its limit).
Status AddQuota(const std::string& flag, const std::string& value, bool limit,
                v1::WhatIfChange* change) {
  const size_t eq = value.find('=');
  if (eq == std::string::npos || eq == 0) {
    return Status::InvalidArgument(
        "--" + flag + ": expected TENANT=AMOUNT, e.g. acme/ml=tflops=200,devices=2, got '" + value +
        "'");
  }
  const std::string tenant = value.substr(0, eq);
  Result<v1::QuotaAmount> amount = ParseQuotaAmount(value.substr(eq + 1));
  if (!amount.ok()) {
    return Status::InvalidArgument("--" + flag + " " + tenant + ": " + amount.status().message());
  }
  v1::WhatIfQuota* q = nullptr;
  for (v1::WhatIfQuota& existing : *change->mutable_quotas()) {
    if (existing.tenant() == tenant) q = &existing;
  }
  if (q == nullptr) {
    q = change->add_quotas();
    q->set_tenant(tenant);
  }
  if ((limit && q->has_limit()) || (!limit && q->has_guaranteed())) {
    return Status::InvalidArgument("--" + flag + ": tenant '" + tenant + "' is given twice");
  }
  *(limit ? q->mutable_limit() : q->mutable_guaranteed()) = *amount;
  return Status::Ok();
}

Status BuildRequest(const ParsedArgs& a, v1::CompareWhatIfRequest* req) {
  req->set_pool(a.Get("pool"));
  if (req->pool().empty()) return Status::InvalidArgument("--pool: required");
  req->set_window(a.Get("window"));
  v1::WhatIfChange* c = req->mutable_change();
  c->set_strategy(a.Get("strategy"));
  if (auto r = a.Find("overcommit")) {
    char* end = nullptr;
    const double v = std::strtod(r->c_str(), &end);
    if (r->empty() || *end != '\0' || !(v >= 1.0)) {
      return Status::InvalidArgument(
          "--overcommit: expected a ratio of at least 1, e.g. 1.5, got '" + *r + "'");
    }
    c->set_compute_overcommit(v);
  }
  if (auto p = a.Find("preemption")) {
    if (*p != "on" && *p != "off") {
      return Status::InvalidArgument("--preemption: expected on or off, got '" + *p + "'");
    }
    c->set_preemption(*p);
  }
  if (auto m = a.Find("mig-relayout")) {
    if (*m != "off" && *m != "idle" && *m != "drain") {
      return Status::InvalidArgument("--mig-relayout: expected off, idle or drain, got '" + *m +
                                     "'");
    }
    c->set_mig_relayout(*m);
  }
  for (const std::string& v : a.GetAll("quota")) {
    GPUPOOL_RETURN_IF_ERROR(AddQuota("quota", v, false, c));
  }
  for (const std::string& v : a.GetAll("quota-limit")) {
    GPUPOOL_RETURN_IF_ERROR(AddQuota("quota-limit", v, true, c));
  }
  return Status::Ok();
}

void PrintComparison(std::ostream& out, const v1::CompareWhatIfResponse& r) {
  out << "what-if on pool " << r.pool() << ": " << FormatTime(r.from()) << " to "
      << FormatTime(r.to()) << ", " << r.tasks() << " tasks on " << r.nodes() << " nodes ("
      << r.gpus() << " GPUs)\n";
  if (r.running_censored() + r.pending_censored() > 0) {
    out << "  censored at now: " << r.running_censored() << " still running, "
        << r.pending_censored() << " still waiting\n";
  }
  if (r.never_ran() + r.unmodelled() > 0) {
    out << "  left out: " << r.never_ran() << " ended without starting, " << r.unmodelled()
        << " requests the replay cannot shape (a MIG profile no GPU of the pool has, an unknown "
           "SKU)\n";
  }
  if (r.unmodelled_gpus() > 0) {
    out << "  left out: " << r.unmodelled_gpus()
        << " MIG GPUs of a model or profile the catalog lacks\n";
  }
  if (r.truncated()) out << "  truncated: the window held more tasks than a what-if replays\n";
  out << "\n";
  const v1::WhatIfReport& a = r.baseline();
  const v1::WhatIfReport& b = r.candidate();
  Table t({"", "BASELINE", "CANDIDATE", "DELTA"});
  t.AddRow({"strategy", a.strategy().empty() ? "(default)" : a.strategy(),
            b.strategy().empty() ? "(default)" : b.strategy(), ""});
  t.AddRow({"compute overcommit", Fixed(a.compute_overcommit(), 2),
            Fixed(b.compute_overcommit(), 2), ""});
  t.AddRow({"preemption", a.preemption() ? "on" : "off", b.preemption() ? "on" : "off", ""});
  const bool mig = a.mig_relayout() != "off" || b.mig_relayout() != "off" ||
                   a.mig_relayouts() + b.mig_relayouts() > 0;
  if (mig) {
    t.AddRow({"MIG re-layout", a.mig_relayout(), b.mig_relayout(), ""});
    t.AddRow({"MIG layouts changed", std::to_string(a.mig_relayouts()),
              std::to_string(b.mig_relayouts()), Signed(b.mig_relayouts() - a.mig_relayouts())});
  }
  t.AddRow({"GPU allocation %", Fixed(a.time_avg_gpu_allocation_pct(), 1),
            Fixed(b.time_avg_gpu_allocation_pct(), 1),
            Fixed(r.delta().time_avg_gpu_allocation_pct(), 1, true)});
  t.AddRow({"offered allocation %", Fixed(a.time_avg_gpu_allocation_offered_pct(), 1),
            Fixed(b.time_avg_gpu_allocation_offered_pct(), 1), ""});
  t.AddRow({"demand %", Fixed(a.time_avg_demand_pct(), 1), Fixed(b.time_avg_demand_pct(), 1), ""});
  std::set<std::string> classes;
  for (const auto& [cls, w] : a.wait_by_class()) classes.insert(cls);
  for (const auto& [cls, w] : b.wait_by_class()) classes.insert(cls);
  const v1::WhatIfWait none;
  for (const std::string& cls : classes) {
    const v1::WhatIfWait& wa = a.wait_by_class().contains(cls) ? a.wait_by_class().at(cls) : none;
    const v1::WhatIfWait& wb = b.wait_by_class().contains(cls) ? b.wait_by_class().at(cls) : none;
    const v1::WhatIfClassDelta d = r.delta().wait_by_class().contains(cls)
                                       ? r.delta().wait_by_class().at(cls)
                                       : v1::WhatIfClassDelta{};
    t.AddRow({"wait p50 " + cls + " (s)", Fixed(wa.p50_s(), 1), Fixed(wb.p50_s(), 1),
              Fixed(d.p50_s(), 1, true)});
    t.AddRow({"wait p99 " + cls + " (s)", Fixed(wa.p99_s(), 1), Fixed(wb.p99_s(), 1),
              Fixed(d.p99_s(), 1, true)});
  }
  t.AddRow({"preemptions", std::to_string(a.preemptions()), std::to_string(b.preemptions()),
            Signed(r.delta().preemptions())});
  t.AddRow({"lost GPU-seconds", Fixed(a.lost_gpu_s(), 0), Fixed(b.lost_gpu_s(), 0), ""});
  t.AddRow({"quota violations", std::to_string(a.quota_violations()),
            std::to_string(b.quota_violations()), Signed(r.delta().quota_violations())});
  t.Print(out);
}

int Compare(Ctx& ctx, const ParsedArgs& a) {
  v1::CompareWhatIfRequest req;
  if (Status st = BuildRequest(a, &req); !st.ok()) return ctx.Usage(st.message());
  if (!ctx.timeout_set) ctx.timeout_ms = kWhatIfTimeoutMs;
  v1::CompareWhatIfResponse resp;
  auto call = ctx.NewCall();
  grpc::Status s = v1::WhatIfService::NewStub(ctx.channel())->Compare(call.get(), req, &resp);
  if (!s.ok()) return ctx.Fail(s);
  if (ctx.format != OutputFormat::kTable) {
    PrintMessage(ctx.out, resp, ctx.format);
    return kExitOk;
  }
  PrintComparison(ctx.out, resp);
  return kExitOk;
}

}  // namespace

std::vector<Command> WhatIfCommands() {
  return {
      {"whatif",
       "--pool P [--strategy S] [--overcommit R] [--preemption on|off] "
       "[--mig-relayout off|idle|drain] [--quota TENANT=AMOUNT] [--quota-limit TENANT=AMOUNT] "
       "[--window 24h]",
       "Pre-flight a config change: replay the pool's recent workload under it (admins)",
       "gpupoold replays the pool's real tasks of the last --window (their submissions, and\n"
       "run times from their starts and ends; tasks still running or waiting are cut at now)\n"
       "through the cluster twin twice — under the pool's live config and with the change —\n"
       "and prints both side by side: GPU allocation, waits p50/p99 per priority class,\n"
       "preemptions, quota violations, with the deltas. MIG GPUs replay with their current\n"
       "layouts; with --mig-relayout the replayed scheduler re-lays them out as gpupoold's\n"
       "planner would under that policy, and the table counts the layouts it changed.\n"
       "Nothing in production changes: the replays run on the twin's own in-memory store and\n"
       "clock. One what-if runs at a time per daemon (exit 4, RESOURCE_EXHAUSTED, while\n"
       "another runs: retry). Admins only.\n"
       "Amounts are written like `quotas set` amounts (tflops=200,vram=40GiB,devices=4).\n"
       "Without --timeout the call may take up to 5 minutes.",
       {{"pool", 0, FlagKind::kValue, "POOL", "the pool to replay (required)"},
        {"strategy", 0, FlagKind::kValue, "STRATEGY", "placement strategy, e.g. best-fit"},
        {"overcommit", 0, FlagKind::kValue, "RATIO", "compute overcommit ratio, at least 1"},
        {"preemption", 0, FlagKind::kValue, "on|off", "preemption in the candidate"},
        {"mig-relayout", 0, FlagKind::kValue, "off|idle|drain",
         "the pool's MIG re-layout policy in the candidate"},
        {"quota", 0, FlagKind::kRepeated, "TENANT=AMOUNT", "a tenant's guaranteed amount"},
        {"quota-limit", 0, FlagKind::kRepeated, "TENANT=AMOUNT", "a tenant's limit"},
        {"window", 0, FlagKind::kValue, "DURATION",
         "how much recent workload to replay, 1m..168h (default 24h)"}},
       "  gpupoolctl whatif --pool gpu-a --strategy best-fit\n"
       "  gpupoolctl whatif --pool gpu-a --overcommit 1.5 --preemption off --window 6h\n"
       "  gpupoolctl whatif --pool mig-a --mig-relayout idle\n"
       "  gpupoolctl whatif --pool gpu-a --quota acme/ml=tflops=800 "
       "--quota-limit acme/ml=devices=8 -o json\n",
       0,
       0,
       Compare},
  };
}

}  // namespace gpupool::ctl
