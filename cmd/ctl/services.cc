// services create|update|apply|get|list|rollback|delete: long-running replicas of one template,
// kept at a desired count by gpupoold (api/gpupool/v1/services.proto). A service is written as a
// file (-f, YAML or protobuf JSON: the Service message, as `services get -o yaml` prints it) or
// with flags that spell its template as `jobs submit` does; flags given with a file override it.
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "cmd/ctl/app.h"
#include "cmd/ctl/requests.h"
#include "cmd/ctl/units.h"
#include "gpupool/v1/services.grpc.pb.h"

namespace gpupool::ctl {
namespace {

std::unique_ptr<v1::ServiceService::Stub> Stub(Ctx& ctx) {
  return v1::ServiceService::NewStub(ctx.channel());
}

int64_t DurationMs(const google::protobuf::Duration& d) {
  return d.seconds() * 1000 + d.nanos() / 1'000'000;
}

// "web of acme": how every message names a service.
std::string Named(const std::string& name, const std::string& tenant) {
  return name + " of " + tenant;
}

// What `create`, `update` and `apply` send: the file (-f), then the flags, then NAME.
int BuildService(Ctx& ctx, const ParsedArgs& a, v1::Service* svc) {
  if (auto file = a.Find("file")) {
    Result<std::string> text = ReadFileOrStdin(*file);
    if (!text.ok()) return ctx.Usage("--file: " + text.status().message());
    Status st = ParseServiceText(*text, *file == "-" ? "stdin" : *file, svc);
    if (!st.ok()) return ctx.Usage(st.message());
  }
  if (Status st = ApplyServiceFlags(a, svc); !st.ok()) return ctx.Usage(st.message());
  if (!a.positional.empty()) svc->set_name(a.positional[0]);
  if (svc->name().empty()) return ctx.Usage("name the service: NAME, or 'name:' in the file");
  if (svc->tenant().empty()) return ctx.Usage("say whose service it is: --tenant, or 'tenant:'");
  return kExitOk;
}

// The reply to a change: the Service (-o json|yaml), or one line. Its status is not shown: the
// server answers before its controller has acted on the change.
void PrintChanged(Ctx& ctx, const v1::Service& resp, const std::string& what) {
  if (ctx.format != OutputFormat::kTable) {
    PrintMessage(ctx.out, resp, ctx.format);
    return;
  }
  ctx.out << "service " << Named(resp.name(), resp.tenant()) << " " << what << '\n';
}

std::string CreatedText(const v1::Service& resp) {
  return "created: generation " + std::to_string(resp.generation()) + ", " +
         std::to_string(resp.min_replicas()) + ".." + std::to_string(resp.max_replicas()) +
         " replicas";
}

// An update: a new generation rolls out; else only settings changed. `before` 0: not known.
std::string UpdatedText(int64_t before, const v1::Service& after) {
  const std::string gen = "generation " + std::to_string(after.generation());
  if (before == 0) return "updated: " + gen;
  if (after.generation() == before) return "updated: " + gen + " (template unchanged)";
  return "updated: " + gen + ", rolling out";
}

int Create(Ctx& ctx, const ParsedArgs& a) {
  v1::CreateServiceRequest req;
  if (int code = BuildService(ctx, a, req.mutable_service()); code != kExitOk) return code;
  v1::Service resp;
  auto call = ctx.NewCall();
  grpc::Status s = Stub(ctx)->CreateService(call.get(), req, &resp);
  if (!s.ok()) return ctx.Fail(s);
  PrintChanged(ctx, resp, CreatedText(resp));
  return kExitOk;
}

grpc::Status Fetch(Ctx& ctx, const std::string& tenant, const std::string& name, v1::Service* out) {
  v1::GetServiceRequest req;
  req.set_tenant(tenant);
  req.set_name(name);
  auto call = ctx.NewCall();
  return Stub(ctx)->GetService(call.get(), req, out);
}

int Update(Ctx& ctx, const ParsedArgs& a) {
  v1::UpdateServiceRequest req;
  v1::Service* svc = req.mutable_service();
  int64_t before = 0;
  if (!a.Has("file")) {
    // No file: the service as it is, with the flags' changes.
    if (a.positional.empty() || !a.Has("tenant")) {
      return ctx.Usage("name the service to change: NAME --tenant PATH, or give -f FILE");
    }
    grpc::Status s = Fetch(ctx, a.Get("tenant"), a.positional[0], svc);
    if (!s.ok()) return ctx.Fail(s);
    before = svc->generation();
    ClearServiceOutputOnly(svc);
  }
  if (int code = BuildService(ctx, a, svc); code != kExitOk) return code;
  v1::Service resp;
  auto call = ctx.NewCall();
  grpc::Status s = Stub(ctx)->UpdateService(call.get(), req, &resp);
  if (!s.ok()) return ctx.Fail(s);
  PrintChanged(ctx, resp, UpdatedText(before, resp));
  return kExitOk;
}

int Apply(Ctx& ctx, const ParsedArgs& a) {
  v1::Service svc;
  if (int code = BuildService(ctx, a, &svc); code != kExitOk) return code;
  v1::Service current;
  grpc::Status s = Fetch(ctx, svc.tenant(), svc.name(), &current);
  v1::Service resp;
  if (s.error_code() == grpc::StatusCode::NOT_FOUND) {
    v1::CreateServiceRequest req;
    *req.mutable_service() = std::move(svc);
    auto call = ctx.NewCall();
    s = Stub(ctx)->CreateService(call.get(), req, &resp);
    if (!s.ok()) return ctx.Fail(s);
    PrintChanged(ctx, resp, CreatedText(resp));
    return kExitOk;
  }
  if (!s.ok()) return ctx.Fail(s);
  v1::UpdateServiceRequest req;
  *req.mutable_service() = std::move(svc);
  auto call = ctx.NewCall();
  s = Stub(ctx)->UpdateService(call.get(), req, &resp);
  if (!s.ok()) return ctx.Fail(s);
  PrintChanged(ctx, resp, UpdatedText(current.generation(), resp));
  return kExitOk;
}

std::string Endpoints(const v1::ServiceReplica& r) {
  std::string out;
  for (const v1::Endpoint& e : r.endpoints()) {
    out += (out.empty() ? "" : ",") +
           (r.endpoints_size() > 1 ? std::to_string(e.port()) + "=" : std::string()) + e.host() +
           ":" + std::to_string(e.host_port());
  }
  return out;
}

void PrintService(std::ostream& out, const v1::Service& svc) {
  const v1::ServiceStatus& st = svc.status();
  const v1::TaskTemplate& tmpl = svc.template_();
  std::vector<std::pair<std::string, std::string>> fields = {
      {"Name", svc.name()},
      {"Tenant", svc.tenant()},
      {"Pool", svc.pool()},
      {"Priority", OrDash(svc.priority_class())},
      {"Preemptible", svc.preemptible() ? "yes" : "no"},
      {"Generation",
       std::to_string(svc.generation()) + (svc.has_previous() ? " (can roll back)" : "")},
      {"Replicas", std::to_string(st.ready()) + "/" + std::to_string(st.desired()) + " ready, " +
                       std::to_string(st.updated()) + " of generation " +
                       std::to_string(svc.generation())},
      {"Desired", std::to_string(st.desired()) +
                      (st.desired_reason().empty() ? "" : " (" + st.desired_reason() + ")")},
      {"Scale", std::to_string(svc.min_replicas()) + ".." + std::to_string(svc.max_replicas()) +
                    " replicas, target " + std::to_string(svc.target_in_flight()) +
                    " in flight each, idle " + FormatDurationMs(DurationMs(svc.idle()))},
      {"Rollout", "surge " + std::to_string(svc.max_surge()) + ", unavailable " +
                      std::to_string(svc.max_unavailable())},
      {"Status", st.below_code().empty() ? "ok" : st.below_code() + ": " + st.below_reason()},
  };
  if (st.consecutive_failures() > 0) {
    fields.emplace_back("Failures", std::to_string(st.consecutive_failures()) + " in a row");
  }
  fields.emplace_back("Port", std::to_string(svc.port()) +
                                  (svc.readiness_path().empty()
                                       ? " (ready when it accepts)"
                                       : " (ready when GET " + svc.readiness_path() + " is 2xx)"));
  if (!tmpl.image().empty()) {
    fields.emplace_back("Image", tmpl.image() + (tmpl.registry_credential().empty()
                                                     ? ""
                                                     : " (pulled with registry credential " +
                                                           tmpl.registry_credential() + ")"));
  }
  if (tmpl.entrypoint_size() > 0) fields.emplace_back("Entrypoint", JoinArgv(tmpl.entrypoint()));
  fields.emplace_back("Command", OrDash(JoinArgv(tmpl.command())));
  fields.emplace_back("Resources", DescribeResources(tmpl.resources()));
  std::string ports;
  for (const v1::Port& p : tmpl.ports()) {
    ports += (ports.empty() ? "" : ", ") + std::to_string(p.port()) + "/" +
             (p.protocol().empty() ? "tcp" : p.protocol()) +
             (p.name().empty() ? "" : " (" + p.name() + ")");
  }
  if (!ports.empty()) fields.emplace_back("Ports", ports);
  std::map<std::string, std::string> env(tmpl.env().begin(), tmpl.env().end());
  std::string env_text;
  for (const auto& [k, v] : env) env_text += (env_text.empty() ? "" : ",") + k + "=" + v;
  if (!env_text.empty()) fields.emplace_back("Env", env_text);
  fields.emplace_back("Created", FormatTime(svc.create_time()) + " by " + OrDash(svc.created_by()));
  fields.emplace_back("Updated", FormatTime(svc.update_time()));
  PrintFields(out, fields);
  if (st.replicas_size() == 0) return;
  out << '\n';
  Table t({"JOB", "GEN", "STATE", "READY", "NODE", "ENDPOINTS", "REASON"});
  for (const v1::ServiceReplica& r : st.replicas()) {
    t.AddRow({r.job_id(), std::to_string(r.generation()),
              ShortEnumName(v1::TaskState_Name(r.state()), "TASK_STATE_"), r.ready() ? "yes" : "no",
              OrDash(r.node()), OrDash(Endpoints(r)), OrDash(r.reason())});
  }
  t.Print(out);
}

// get, rollback, delete: NAME --tenant PATH.
int NeedTenant(const Ctx& ctx, const ParsedArgs& a) {
  if (a.Get("tenant").empty()) return ctx.Usage("--tenant: required (the service's tenant)");
  return kExitOk;
}

int Get(Ctx& ctx, const ParsedArgs& a) {
  if (int code = NeedTenant(ctx, a); code != kExitOk) return code;
  v1::Service svc;
  grpc::Status s = Fetch(ctx, a.Get("tenant"), a.positional[0], &svc);
  if (!s.ok()) return ctx.Fail(s);
  if (ctx.format != OutputFormat::kTable) {
    PrintMessage(ctx.out, svc, ctx.format);
  } else {
    PrintService(ctx.out, svc);
  }
  return kExitOk;
}

int List(Ctx& ctx, const ParsedArgs& a) {
  v1::ListServicesRequest req;
  req.set_tenant(a.Get("tenant"));
  v1::ListServicesResponse resp;
  auto call = ctx.NewCall();
  grpc::Status s = Stub(ctx)->ListServices(call.get(), req, &resp);
  if (!s.ok()) return ctx.Fail(s);
  if (ctx.format != OutputFormat::kTable) {
    PrintMessage(ctx.out, resp, ctx.format);
    return kExitOk;
  }
  if (resp.services_size() == 0) {
    ctx.err << "no services\n";
    return kExitOk;
  }
  Table t({"TENANT", "NAME", "POOL", "READY/DESIRED", "MIN-MAX", "GEN", "STATUS"});
  for (const v1::Service& svc : resp.services()) {
    const v1::ServiceStatus& st = svc.status();
    t.AddRow({svc.tenant(), svc.name(), svc.pool(),
              std::to_string(st.ready()) + "/" + std::to_string(st.desired()),
              std::to_string(svc.min_replicas()) + "-" + std::to_string(svc.max_replicas()),
              std::to_string(svc.generation()), st.below_code().empty() ? "ok" : st.below_code()});
  }
  t.Print(ctx.out);
  return kExitOk;
}

int Rollback(Ctx& ctx, const ParsedArgs& a) {
  if (int code = NeedTenant(ctx, a); code != kExitOk) return code;
  v1::RollbackServiceRequest req;
  req.set_tenant(a.Get("tenant"));
  req.set_name(a.positional[0]);
  v1::Service resp;
  auto call = ctx.NewCall();
  grpc::Status s = Stub(ctx)->RollbackService(call.get(), req, &resp);
  if (!s.ok()) return ctx.Fail(s);
  PrintChanged(ctx, resp,
               "rolled back: generation " + std::to_string(resp.generation()) +
                   " runs the previous template, rolling out");
  return kExitOk;
}

int Delete(Ctx& ctx, const ParsedArgs& a) {
  if (int code = NeedTenant(ctx, a); code != kExitOk) return code;
  v1::DeleteServiceRequest req;
  req.set_tenant(a.Get("tenant"));
  req.set_name(a.positional[0]);
  v1::DeleteServiceResponse resp;
  auto call = ctx.NewCall();
  grpc::Status s = Stub(ctx)->DeleteService(call.get(), req, &resp);
  if (!s.ok()) return ctx.Fail(s);
  if (ctx.format == OutputFormat::kTable) {
    ctx.out << "service " << Named(req.name(), req.tenant())
            << " deleted; its replicas are being stopped\n";
  } else {
    PrintMessage(ctx.out, resp, ctx.format);
  }
  return kExitOk;
}

const FlagSpec kTenantFlag = {"tenant", 0, FlagKind::kValue, "PATH", "the service's tenant"};

const char kFileHelp[] =
    "The file is a Service (api/gpupool/v1/services.proto) in YAML or protobuf JSON, field\n"
    "names as in the REST API (snake_case or lowerCamelCase); what `services get -o yaml`\n"
    "prints may be given back (its status and other output-only fields are ignored). In YAML,\n"
    "idle may be written 5m or 1h30m. Flags given as well override the file; the template's\n"
    "flags are those of `jobs submit` (env is merged, --port adds a port, a resource flag\n"
    "replaces the shape, the words after '--' replace the command). With one tcp port and no\n"
    "--serve-port, the service serves on that port.\n"
    "\n"
    "  name: web\n"
    "  tenant: acme/ml\n"
    "  pool: inference\n"
    "  template:\n"
    "    image: registry.example:5000/acme/serve:v3\n"
    "    resources: {fractional: {milli_tflops: 10000, vram_mib: 8192}}\n"
    "    ports: [{port: 8080, name: http}]\n"
    "  port: 8080\n"
    "  readiness_path: /healthz\n"
    "  min_replicas: 2\n"
    "  max_replicas: 8\n"
    "  target_in_flight: 4\n"
    "  idle: 10m";

}  // namespace

std::vector<Command> ServiceCommands() {
  const std::string args = "[NAME] [-f FILE] [flags] [-- COMMAND [ARGS...]]";
  return {
      {"services create", args, "Create a service: replicas of one template at a desired count",
       "gpupoold keeps between --min-replicas and --max-replicas replicas running, each a\n"
       "one-task job of the tenant (placed, counted against quota, preempted and billed as any\n"
       "task), replaces those that end, and scales on the requests in flight. Refused with exit\n"
       "code 7 when the tenant has a service of that name (`services apply` updates it then).\n"
       "Prints the generation (1), or the Service (-o json).\n\n" +
           std::string(kFileHelp),
       ServiceFlags(),
       "  gpupoolctl services create -f web.yaml\n"
       "  gpupoolctl services create web --tenant acme/ml --pool inference --tflops 10 --vram "
       "8GiB --port 8080 --min-replicas 2 --max-replicas 8 -- python serve.py --port 8080\n"
       "  sed s/v3/v4/ web.yaml | gpupoolctl services create -f - web-canary\n",
       0, 1, Create},
      {"services update", args, "Replace a service's settings; a new template rolls out",
       "With -f, the file replaces every setting (as `create` reads it; the pool never changes).\n"
       "Without, NAME and --tenant name the service and the flags given change it. A changed\n"
       "template, port or readiness path is a new generation: its replicas replace the old ones\n"
       "while at most --max-surge extra run and at most --max-unavailable fewer are ready.\n\n" +
           std::string(kFileHelp),
       ServiceFlags(),
       "  gpupoolctl services update -f web.yaml\n"
       "  gpupoolctl services update web --tenant acme/ml --image "
       "registry.example:5000/acme/serve:v4\n"
       "  gpupoolctl services update web --tenant acme/ml --max-replicas 16\n",
       0, 1, Update},
      {"services apply", args, "Create a service, or update it if it exists",
       "Reads the service (-f and flags, as `create` does), creates it if the tenant has none of\n"
       "that name, and otherwise replaces its settings as `update -f` does.\n\n" +
           std::string(kFileHelp),
       ServiceFlags(),
       "  gpupoolctl services apply -f web.yaml\n"
       "  gpupoolctl -o yaml services get web --tenant acme/ml > web.yaml  # edit, then apply\n",
       0, 1, Apply},
      {"services get",
       "NAME --tenant PATH",
       "Show a service, why it is below its desired count, and its replicas",
       "Replicas: ready of desired, and how many run the current generation. Status: ok, or why\n"
       "fewer are ready than desired — STARTING, REPLICA_FAILING (backing off after failures),\n"
       "PREEMPTED, or a pending replica's placement verdict (NO_CAPACITY, OVER_QUOTA, …) —\n"
       "with a sentence. Below, each replica: its job (`jobs get JOB`), generation, task state,\n"
       "node and where its ports are reached.",
       {kTenantFlag},
       "  gpupoolctl services get web --tenant acme/ml\n"
       "  gpupoolctl -o json services get web --tenant acme/ml | jq .status.belowCode\n",
       1,
       1,
       Get},
      {"services list",
       "[--tenant PATH]",
       "List services",
       "One row per service: ready of desired replicas, the replica bounds, the generation, and\n"
       "STATUS: ok, or the code of why fewer are ready than desired (see `services get`).",
       {{"tenant", 0, FlagKind::kValue, "PATH", "only this tenant's and its subtree's"}},
       "  gpupoolctl services list --tenant acme\n",
       0,
       0,
       List},
      {"services rollback",
       "NAME --tenant PATH",
       "Roll a service back to its previous template",
       "A new generation with the previous revision's template, port and readiness path, rolled\n"
       "out as an update is. Refused (exit 4) when there is no previous revision.",
       {kTenantFlag},
       "  gpupoolctl services rollback web --tenant acme/ml\n",
       1,
       1,
       Rollback},
      {"services delete",
       "NAME --tenant PATH",
       "Delete a service and stop its replicas",
       "The service is gone at once; its replicas' jobs are then cancelled.",
       {kTenantFlag},
       "  gpupoolctl services delete web --tenant acme/ml\n",
       1,
       1,
       Delete},
  };
}

}  // namespace gpupool::ctl
