// jobs submit|get|list|cancel|watch and logs.
#include <chrono>
#include <cstdio>
#include <ctime>
#include <iostream>
#include <limits>
#include <map>
#include <sstream>
#include <thread>

#include "cmd/ctl/app.h"
#include "cmd/ctl/requests.h"
#include "cmd/ctl/units.h"
#include "gpupool/v1/jobs.grpc.pb.h"
#include "pool/yaml_error.h"

namespace gpupool::ctl {

namespace {

std::string JobState(v1::JobState s) { return ShortEnumName(v1::JobState_Name(s), "JOB_STATE_"); }
std::string TaskState(v1::TaskState s) {
  return ShortEnumName(v1::TaskState_Name(s), "TASK_STATE_");
}

int64_t Now() { return static_cast<int64_t>(std::time(nullptr)); }

void PrintJob(std::ostream& out, const v1::Job& job) {
  const v1::JobSpec& s = job.spec();
  std::vector<std::pair<std::string, std::string>> fields = {
      {"ID", job.id()},
      {"Tenant", OrDash(s.tenant())},
      {"Pool", OrDash(s.pool())},
      {"Priority", OrDash(s.priority_class())},
      {"State", JobState(job.state())},
      {"Reason", OrDash(job.reason())},
      {"Tasks", std::to_string(s.task_count()) + (s.gang() ? " (gang)" : "")},
      {"Preemptible", s.preemptible() ? "yes" : "no"},
      {"Resources", DescribeResources(s.template_().resources())},
      {"Command", OrDash(JoinArgv(s.template_().command()))},
      {"Submitted", FormatTime(job.submit_time())},
      {"Submitter", OrDash(job.submitted_by())},
      {"Finished", FormatTime(job.finish_time())},
  };
  // What an image task runs in; a plain command shows none of these.
  const v1::TaskTemplate& tmpl = s.template_();
  if (!tmpl.image().empty()) {
    fields.emplace_back("Image", tmpl.image() + (tmpl.registry_credential().empty()
                                                     ? ""
                                                     : " (pulled with secret_env " +
                                                           tmpl.registry_credential() + ")"));
  }
  if (tmpl.entrypoint_size() > 0) fields.emplace_back("Entrypoint", JoinArgv(tmpl.entrypoint()));
  if (!tmpl.working_dir().empty()) fields.emplace_back("Workdir", tmpl.working_dir());
  std::string volumes;
  for (const v1::Volume& v : tmpl.volumes()) {
    volumes += (volumes.empty() ? "" : ", ") + v.mount_path() +
               (v.dataset().empty() ? " (scratch)" : "=" + v.dataset() + " (read-only)");
  }
  if (!volumes.empty()) fields.emplace_back("Volumes", volumes);
  std::string ports;
  for (const v1::Port& p : tmpl.ports()) {
    ports += (ports.empty() ? "" : ", ") + std::to_string(p.port()) + "/" + p.protocol() +
             (p.name().empty() ? "" : " (" + p.name() + ")");
  }
  if (!ports.empty()) fields.emplace_back("Ports", ports);
  if (s.has_max_runtime()) {
    fields.emplace_back("Max runtime", FormatDurationMs(s.max_runtime().seconds() * 1000 +
                                                        s.max_runtime().nanos() / 1'000'000));
  }
  std::string labels;
  for (const auto& [k, v] : s.labels()) labels += (labels.empty() ? "" : ",") + k + "=" + v;
  if (!labels.empty()) fields.emplace_back("Labels", labels);
  PrintFields(out, fields);
  if (job.tasks_size() == 0) return;
  out << '\n';
  Table t({"TASK", "STATE", "NODE", "DEVICES", "ATTEMPT", "EXIT", "REASON"});
  for (const v1::Task& task : job.tasks()) {
    std::string devices;
    for (const v1::Allocation& a : task.allocations()) {
      devices += (devices.empty() ? "" : ",") + a.device_id();
    }
    const bool finished =
        task.state() == v1::TASK_STATE_SUCCEEDED || task.state() == v1::TASK_STATE_FAILED;
    t.AddRow({task.id(), TaskState(task.state()), OrDash(task.node()), OrDash(devices),
              std::to_string(task.attempt()), finished ? std::to_string(task.exit_code()) : "-",
              OrDash(task.reason())});
  }
  t.Print(out);
  // Typed facts beside the reasons: why a task waits (a code to act on), who last preempted it.
  for (const v1::Task& task : job.tasks()) {
    if (task.has_pending() && task.pending().code() != v1::PendingReason::CODE_UNSPECIFIED) {
      const v1::PendingReason& p = task.pending();
      out << "task " << task.id() << " pending: " << v1::PendingReason::Code_Name(p.code());
      if (!p.binding().empty()) out << " (" << p.binding() << ")";
      std::map<std::string, int32_t> nodes(p.nodes_by_reason().begin(), p.nodes_by_reason().end());
      for (const auto& [why, n] : nodes) out << ", " << n << " node(s) short of " << why;
      out << '\n';
    }
    if (task.state() == v1::TASK_STATE_PULLING && task.has_pull()) {
      // Its node's image pull (docs/images.md, "Cold start"): bytes fetched of those it must.
      const v1::PullProgress& p = task.pull();
      char line[160];
      std::snprintf(
          line, sizeof(line), "%.1f of %.1f MiB (%d%%)",
          static_cast<double>(p.bytes_done()) / (1 << 20),
          static_cast<double>(p.bytes_total()) / (1 << 20),
          p.bytes_total() > 0 ? static_cast<int>(100 * p.bytes_done() / p.bytes_total()) : 0);
      out << "task " << task.id() << " pulling " << p.image() << " on " << task.node() << ": "
          << line << '\n';
    }
    for (const v1::Endpoint& e : task.endpoints()) {
      // Where its node publishes a declared port (docs/network.md, "Published ports").
      out << "task " << task.id() << " port " << e.port() << "/" << e.protocol()
          << (e.name().empty() ? "" : " (" + e.name() + ")") << " at " << e.host() << ":"
          << e.host_port() << '\n';
    }
    if (task.has_last_preemption()) {
      out << "task " << task.id() << " last preempted by task " << task.last_preemption().by_task()
          << " (rule " << task.last_preemption().rule() << ")\n";
    }
    if (task.has_usage()) {
      // From the task's cgroup when its last attempt ended (docs/sandbox.md).
      const v1::TaskUsage& u = task.usage();
      char cpu[32];
      std::snprintf(cpu, sizeof(cpu), "%.2f", static_cast<double>(u.cpu_usage_us()) / 1e6);
      out << "task " << task.id() << " used: cpu " << cpu << " s, peak memory "
          << FormatMib(u.peak_memory_bytes() / (1024 * 1024)) << ", oom kills " << u.oom_kills()
          << '\n';
    }
  }
}

int Submit(Ctx& ctx, const ParsedArgs& a) {
  v1::SubmitJobRequest req;
  if (auto file = a.Find("file")) {
    Result<std::string> text = ReadFileOrStdin(*file);
    if (!text.ok()) return ctx.Usage("--file: " + text.status().message());
    Status st = ParseJobSpecText(*text, *file == "-" ? "stdin" : *file, req.mutable_spec());
    if (!st.ok()) return ctx.Usage(st.message());
  }
  if (Status st = ApplySubmitFlags(a, req.mutable_spec()); !st.ok()) {
    return ctx.Usage(st.message());
  }
  req.set_idempotency_key(a.Get("idempotency-key"));
  v1::SubmitJobResponse resp;
  auto call = ctx.NewCall();
  grpc::Status s = v1::JobService::NewStub(ctx.channel())->SubmitJob(call.get(), req, &resp);
  if (!s.ok()) return ctx.Fail(s);
  if (ctx.format != OutputFormat::kTable) {
    PrintMessage(ctx.out, resp, ctx.format);
    return kExitOk;
  }
  const v1::JobSpec& spec = resp.has_job() ? resp.job().spec() : req.spec();
  ctx.out << "job " << resp.job_id() << " submitted: " << spec.task_count()
          << (spec.task_count() == 1 ? " task" : " tasks") << " in pool " << OrDash(spec.pool())
          << '\n';
  return kExitOk;
}

int Get(Ctx& ctx, const ParsedArgs& a) {
  v1::GetJobRequest req;
  req.set_job_id(a.positional[0]);
  v1::Job job;
  auto call = ctx.NewCall();
  grpc::Status s = v1::JobService::NewStub(ctx.channel())->GetJob(call.get(), req, &job);
  if (!s.ok()) return ctx.Fail(s);
  if (ctx.format != OutputFormat::kTable) {
    PrintMessage(ctx.out, job, ctx.format);
  } else {
    PrintJob(ctx.out, job);
  }
  return kExitOk;
}

std::vector<std::string> JobRow(const v1::Job& j, int64_t now) {
  return {j.id(),
          OrDash(j.spec().tenant()),
          OrDash(j.spec().pool()),
          OrDash(j.spec().priority_class()),
          std::to_string(j.spec().task_count()),
          DescribeResources(j.spec().template_().resources()),
          JobState(j.state()),
          FormatAge(j.submit_time(), now)};
}

const std::vector<std::string> kJobColumns = {"ID",    "TENANT",    "POOL",  "PRIORITY",
                                              "TASKS", "RESOURCES", "STATE", "AGE"};

// What a watcher reports as a change: the job's state, and its tasks' states.
std::string ChangeKey(const v1::Job& j) {
  std::string key = std::to_string(j.state());
  for (const v1::Task& t : j.tasks()) key += "," + std::to_string(t.state());
  return key;
}

// Fetches one page, or every page with `all`.
grpc::Status FetchJobs(Ctx& ctx, v1::ListJobsRequest req, bool all, v1::ListJobsResponse* merged) {
  merged->Clear();
  auto stub = v1::JobService::NewStub(ctx.channel());
  while (true) {
    v1::ListJobsResponse resp;
    auto call = ctx.NewCall();
    grpc::Status s = stub->ListJobs(call.get(), req, &resp);
    if (!s.ok()) return s;
    for (v1::Job& j : *resp.mutable_jobs()) merged->add_jobs()->Swap(&j);
    merged->set_next_page_token(resp.next_page_token());
    if (!all || resp.next_page_token().empty()) return grpc::Status::OK;
    req.set_page_token(resp.next_page_token());
  }
}

// jobs list -w: the list once, then one line per job that appears or changes (kubectl's -w), until
// interrupted or --watch-timeout passes. With -o json, one Job per line (JSON Lines).
int WatchList(Ctx& ctx, const v1::ListJobsRequest& req, bool all, int64_t interval_ms,
              int64_t timeout_ms) {
  std::map<std::string, std::string> seen;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  bool first = true;
  while (true) {
    v1::ListJobsResponse resp;
    grpc::Status s = FetchJobs(ctx, req, all, &resp);
    if (!s.ok()) return ctx.Fail(s);
    Table t(kJobColumns);
    const int64_t now = Now();
    for (const v1::Job& j : resp.jobs()) {
      std::string key = ChangeKey(j);
      auto [it, added] = seen.emplace(j.id(), key);
      if (!added && it->second == key) continue;
      it->second = std::move(key);
      if (ctx.format == OutputFormat::kTable) {
        t.AddRow(JobRow(j, now));
      } else {
        ctx.out << ToJson(j, false) << '\n';
      }
    }
    if (ctx.format == OutputFormat::kTable && (t.size() > 0 || first)) {
      // Only the first print carries the header; later lines are the changes alone.
      std::ostringstream text;
      t.Print(text);
      std::string lines = text.str();
      if (!first) lines.erase(0, lines.find('\n') + 1);
      ctx.out << lines;
    }
    ctx.out.flush();
    first = false;
    if (timeout_ms > 0 && std::chrono::steady_clock::now() >= deadline) return kExitOk;
    std::this_thread::sleep_for(std::chrono::milliseconds(interval_ms));
  }
}

int List(Ctx& ctx, const ParsedArgs& a) {
  v1::ListJobsRequest req;
  req.set_tenant(a.Get("tenant"));
  req.set_pool(a.Get("pool"));
  if (auto st = a.Find("state")) {
    v1::JobState state;
    if (Status p = ParseJobState(*st, &state); !p.ok()) return ctx.Usage("--state: " + p.message());
    req.set_state(state);
  }
  if (auto l = a.Find("limit")) {
    Result<int64_t> n = ParseInt(*l, 1, 1000);
    if (!n.ok()) return ctx.Usage("--limit: " + n.status().message());
    req.set_page_size(static_cast<int32_t>(*n));
  }
  req.set_page_token(a.Get("page-token"));
  const bool all = a.GetBool("all");
  if (a.GetBool("watch")) {
    int64_t interval_ms = 2000, timeout_ms = 0;
    if (auto i = a.Find("interval")) {
      Result<int64_t> ms = ParseDurationMs(*i);
      if (!ms.ok() || *ms < 100) return ctx.Usage("--interval: a duration of at least 100ms");
      interval_ms = *ms;
    }
    if (auto w = a.Find("watch-timeout")) {
      Result<int64_t> ms = ParseDurationMs(*w);
      if (!ms.ok() || *ms <= 0) return ctx.Usage("--watch-timeout: a positive duration");
      timeout_ms = *ms;
    }
    return WatchList(ctx, req, all, interval_ms, timeout_ms);
  }
  v1::ListJobsResponse merged;
  if (grpc::Status s = FetchJobs(ctx, req, all, &merged); !s.ok()) return ctx.Fail(s);
  if (ctx.format != OutputFormat::kTable) {
    PrintMessage(ctx.out, merged, ctx.format);
    return kExitOk;
  }
  Table t(kJobColumns);
  const int64_t now = Now();
  for (const v1::Job& j : merged.jobs()) t.AddRow(JobRow(j, now));
  if (t.size() == 0) {
    ctx.err << "no jobs\n";
  } else {
    t.Print(ctx.out);
  }
  if (!merged.next_page_token().empty()) {
    ctx.err << "more jobs: add --page-token " << merged.next_page_token() << " (or --all)\n";
  }
  return kExitOk;
}

int Cancel(Ctx& ctx, const ParsedArgs& a) {
  v1::CancelJobRequest req;
  req.set_job_id(a.positional[0]);
  req.set_reason(a.Get("reason"));
  v1::Job job;
  auto call = ctx.NewCall();
  grpc::Status s = v1::JobService::NewStub(ctx.channel())->CancelJob(call.get(), req, &job);
  if (!s.ok()) return ctx.Fail(s);
  if (ctx.format != OutputFormat::kTable) {
    PrintMessage(ctx.out, job, ctx.format);
  } else {
    ctx.out << "job " << job.id() << ": " << JobState(job.state()) << '\n';
  }
  return kExitOk;
}

int Watch(Ctx& ctx, const ParsedArgs& a) {
  v1::WatchJobRequest req;
  req.set_job_id(a.positional[0]);
  auto call = ctx.NewCall(/*streaming=*/true);
  auto reader = v1::JobService::NewStub(ctx.channel())->WatchJob(call.get(), req);
  v1::JobEvent ev;
  while (reader->Read(&ev)) {
    if (ctx.format == OutputFormat::kTable) {
      ctx.out << FormatTime(ev.time()) << "   " << JobState(ev.job().state()) << "   "
              << ev.message() << '\n';
    } else {
      // One object per line (JSON Lines) so that a script can read events as they come.
      ctx.out << ToJson(ev, false) << '\n';
    }
    ctx.out.flush();
  }
  grpc::Status s = reader->Finish();
  return s.ok() ? kExitOk : ctx.Fail(s);
}

int Logs(Ctx& ctx, const ParsedArgs& a) {
  v1::GetTaskLogsRequest req;
  req.set_task_id(a.positional[0]);
  req.set_follow(a.GetBool("follow"));
  if (auto o = a.Find("offset")) {
    Result<int64_t> n = ParseInt(*o, 0, std::numeric_limits<int64_t>::max() / 10);
    if (!n.ok()) return ctx.Usage("--offset: " + n.status().message());
    req.set_offset(*n);
  }
  auto call = ctx.NewCall(/*streaming=*/true);
  auto reader = v1::JobService::NewStub(ctx.channel())->GetTaskLogs(call.get(), req);
  v1::TaskLogChunk chunk;
  while (reader->Read(&chunk)) {
    ctx.out << chunk.data();
    ctx.out.flush();
  }
  grpc::Status s = reader->Finish();
  return s.ok() ? kExitOk : ctx.Fail(s);
}

}  // namespace

std::vector<Command> JobCommands() {
  return {
      {"jobs submit", "[flags] -- COMMAND [ARGS...]", "Submit a job",
       "Each of the job's tasks runs COMMAND with one resource shape: a fractional share\n"
       "(--tflops with --vram), whole GPUs (--gpus, optionally --model), a MIG instance (--mig)\n"
       "or a named SKU (--sku). With --image the tasks run in that OCI image's container, pulled\n"
       "once per node; COMMAND then replaces the image's Cmd and may be left out. With -f the spec "
       "comes from a file in protobuf JSON or YAML\n"
       "(field names as in the REST API); flags given as well override it. Units: TFLOPS are\n"
       "decimals (12.5), sizes take MiB/GiB/TiB (20GiB), durations ms/s/m/h/d (1h30m).\n"
       "Prints the job id (table) or the SubmitJobResponse (-o json).",
       SubmitFlags(),
       "  gpupoolctl jobs submit --tenant acme/ml/alice --pool training --tflops 12.5 --vram "
       "20GiB -- python train.py --epochs 3\n"
       "  gpupoolctl jobs submit --pool training --tasks 8 --gang --gpus 2 --model H100-SXM "
       "--max-runtime 12h -- torchrun train.py\n"
       "  gpupoolctl jobs submit --pool inference --mig 1g.10gb --env MODEL=llama -- serve\n"
       "  gpupoolctl jobs submit --pool inference --tflops 10 --vram 8GiB --image "
       "registry.example:5000/team/serve:v3\n"
       "  gpupoolctl jobs submit --pool inference --gpus 1 --image registry.example/private/app:v2 "
       "--secret-env PULL=robot:s3cret --registry-credential PULL\n"
       "  gpupoolctl jobs submit -f job.yaml --priority high\n"
       "  gpupoolctl jobs submit -f job.yaml --idempotency-key nightly-2026-11-23 "
       "--secret-env HF_TOKEN=hf_xxx\n",
       0, 0, Submit},
      {"jobs get",
       "JOB_ID",
       "Show a job and its tasks",
       "Each task's state, node, devices and reason; below the table, why a task waits, who last\n"
       "preempted it, what its last attempt used, and, while its node pulls its image (state\n"
       "PULLING), the bytes fetched of those it must.\n",
       {},
       "  gpupoolctl jobs get 42\n  gpupoolctl -o json jobs get 42 | jq -r .state\n",
       1,
       1,
       Get},
      {"jobs list",
       "[flags]",
       "List jobs",
       "Shows one page (--limit, default 100 on the server); --all follows every page.\n"
       "With -w, prints the list and then one line per job that appears or changes state\n"
       "(polling every --interval) until interrupted or --watch-timeout passes.",
       {{"tenant", 0, FlagKind::kValue, "PATH", "only this tenant"},
        {"pool", 0, FlagKind::kValue, "NAME", "only this pool"},
        {"state", 0, FlagKind::kValue, "STATE",
         "only this state: pending, running, succeeded, failed, cancelling, cancelled"},
        {"limit", 0, FlagKind::kValue, "N", "page size, 1..1000"},
        {"page-token", 0, FlagKind::kValue, "TOKEN", "continue from a previous page"},
        {"all", 0, FlagKind::kBool, "", "fetch every page"},
        {"watch", 'w', FlagKind::kBool, "", "keep watching: print jobs as they change"},
        {"interval", 0, FlagKind::kValue, "DURATION", "with -w: how often to look (default 2s)"},
        {"watch-timeout", 0, FlagKind::kValue, "DURATION", "with -w: stop after this long"}},
       "  gpupoolctl jobs list --pool training --state running\n"
       "  gpupoolctl jobs list -w --tenant acme\n"
       "  gpupoolctl -o json jobs list --all --tenant acme\n",
       0,
       0,
       List},
      {"jobs cancel",
       "JOB_ID [flags]",
       "Cancel a job and stop its tasks",
       "A member may cancel only the jobs it submitted (`jobs get` shows its 'Submitter');\n"
       "a tenant-admin any job of its subtree; an admin any job.",
       {{"reason", 0, FlagKind::kValue, "TEXT", "recorded with the cancellation"}},
       "  gpupoolctl jobs cancel 42 --reason 'wrong dataset'\n",
       1,
       1,
       Cancel},
      {"jobs watch",
       "JOB_ID",
       "Follow a job's state changes until it finishes",
       "Prints one line per event; with -o json one JSON object per line (JSON Lines).",
       {},
       "  gpupoolctl jobs watch 42\n  gpupoolctl -o json jobs watch 42 | jq -r .message\n",
       1,
       1,
       Watch},
      {"logs",
       "TASK_ID [flags]",
       "Print a task's output (stdout and stderr combined)",
       "TASK_ID is \"<job id>.<index>\". With -f, keeps printing new output until the task ends.",
       {{"follow", 'f', FlagKind::kBool, "", "stream new output as it appears"},
        {"offset", 0, FlagKind::kValue, "BYTES", "start at this byte offset"}},
       "  gpupoolctl logs 42.0\n  gpupoolctl logs 42.3 -f\n",
       1,
       1,
       Logs},
  };
}

}  // namespace gpupool::ctl
