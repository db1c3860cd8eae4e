#include "cmd/ctl/requests.h"

#include <google/protobuf/descriptor.h>
#include <yaml-cpp/yaml.h>

#include <cctype>
#include <cstdio>
#include <utility>

#include "api/message_yaml.h"
#include "cmd/ctl/format.h"
#include "cmd/ctl/units.h"
#include "pool/ports.h"
#include "pool/resources.h"

namespace gpupool::ctl {

namespace {

std::string Upper(std::string_view s) {
  std::string out;
  for (char c : s)
    out += c == '-' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

// Splits "a,b" and repeated flags into one list; empty items dropped.
std::vector<std::string> SplitList(const std::vector<std::string>& values) {
  std::vector<std::string> out;
  for (const std::string& v : values) {
    size_t start = 0;
    while (start <= v.size()) {
      size_t comma = v.find(',', start);
      if (comma == std::string::npos) comma = v.size();
      if (comma > start) out.push_back(v.substr(start, comma - start));
      start = comma + 1;
    }
  }
  return out;
}

Status WithFlag(const Status& s, std::string_view flag) {
  return s.ok() ? s : Status::InvalidArgument("--" + std::string(flag) + ": " + s.message());
}

// "K=V" into a map; the key must be non-empty.
Status ParseKeyValues(const std::vector<std::string>& values, std::string_view flag,
                      google::protobuf::Map<std::string, std::string>* out) {
  for (const std::string& kv : values) {
    const size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) {
      return Status::InvalidArgument("--" + std::string(flag) + ": want KEY=VALUE, got '" + kv +
                                     "'");
    }
    (*out)[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return Status::Ok();
}

}  // namespace

const std::vector<FlagSpec>& SubmitFlags() {
  static const std::vector<FlagSpec> flags = {
      {"file", 'f', FlagKind::kValue, "FILE",
       "JobSpec in protobuf JSON or YAML ('-' = stdin); other flags override it"},
      {"tenant", 0, FlagKind::kValue, "PATH", "tenant path, org/project/user"},
      {"pool", 0, FlagKind::kValue, "NAME", "pool to run in"},
      {"priority", 0, FlagKind::kValue, "CLASS", "priority class (server default when unset)"},
      {"tasks", 0, FlagKind::kValue, "N", "number of tasks, 1..10000 (default 1)"},
      {"gang", 0, FlagKind::kBool, "", "place all tasks together or none"},
      {"preemptible", 0, FlagKind::kBool, "", "tasks may be preempted by higher priorities"},
      {"max-runtime", 0, FlagKind::kValue, "DURATION", "longest a task may run, e.g. 1h30m"},
      {"retries", 0, FlagKind::kValue, "N", "requeues of a lost or preempted task"},
      {"label", 0, FlagKind::kRepeated, "KEY=VALUE", "job label"},
      {"image", 0, FlagKind::kValue, "REF",
       "OCI image the tasks run in, e.g. registry.example:5000/team/app:v1; the command after "
       "'--' then replaces the image's Cmd and may be left out"},
      {"registry-credential", 0, FlagKind::kValue, "NAME",
       "pull --image with the credential NAME: a --secret-env entry whose value is "
       "USERNAME:PASSWORD, or else one the tenant keeps (registry-credentials create); it "
       "reaches the node's image store only, never the task"},
      {"entrypoint", 0, FlagKind::kRepeated, "ARG",
       "with --image: replaces the image's Entrypoint (and drops its Cmd), one argument per flag; "
       "the command after '--' follows it"},
      {"workdir", 0, FlagKind::kValue, "DIR",
       "with --image: the directory the tasks start in (absolute)"},
      {"volume", 0, FlagKind::kRepeated, "PATH[=DATASET]",
       "with --image: mount the node's dataset DATASET read-only at PATH, or without =DATASET a "
       "scratch directory, writable and removed with the task"},
      {"port", 0, FlagKind::kRepeated, "PORT[/PROTOCOL][:NAME]",
       "a port each task listens on (tcp unless /udp), published on a port of its node's in an "
       "isolated network; `jobs get` shows where (docs/network.md, \"Published ports\")"},
      {"env", 0, FlagKind::kRepeated, "KEY=VALUE", "environment variable of each task"},
      {"secret-env", 0, FlagKind::kRepeated, "KEY=VALUE",
       "like --env, but the value is never shown by the API nor logged (e.g. a token)"},
      {"idempotency-key", 0, FlagKind::kValue, "KEY",
       "retry-safe submission: the same key again returns the same job (1..128 of "
       "[A-Za-z0-9._:-])"},
      {"tflops", 0, FlagKind::kValue, "TFLOPS", "fractional share: compute, e.g. 12.5"},
      {"vram", 0, FlagKind::kValue, "SIZE", "fractional share: GPU memory, e.g. 20GiB"},
      {"gpus", 0, FlagKind::kValue, "N", "whole GPUs on one node"},
      {"model", 0, FlagKind::kRepeated, "MODEL",
       "with --gpus: allowed catalog models (comma-separated)"},
      {"mig", 0, FlagKind::kValue, "PROFILE", "one MIG instance, e.g. 1g.10gb"},
      {"sku", 0, FlagKind::kValue, "NAME", "a named request shape from the server's SKU table"},
      {"cpu", 0, FlagKind::kValue, "CORES", "host CPU per task, e.g. 4, 0.5 or 500m"},
      {"memory", 0, FlagKind::kValue, "SIZE", "host memory per task, e.g. 16GiB"},
  };
  return flags;
}

const std::vector<FlagSpec>& PoolFlags() {
  static const std::vector<FlagSpec> flags = {
      {"visibility", 0, FlagKind::kValue, "public|private", "who may submit"},
      {"allow", 0, FlagKind::kRepeated, "TENANT",
       "tenant allowed in a private pool (comma-separated)"},
      {"strategy", 0, FlagKind::kValue, "NAME", "placement strategy, e.g. first-fit, fgd"},
      {"compute-overcommit", 0, FlagKind::kValue, "RATIO", "offered/physical TFLOPS, 1.0..10.0"},
      {"memory-overcommit", 0, FlagKind::kValue, "RATIO", "offered/physical VRAM, 1.0..10.0"},
      {"sharing", 0, FlagKind::kValue, "MODE", "exclusive, fractional or time-sliced"},
      {"replicas", 0, FlagKind::kValue, "N", "time-sliced replicas per device, 2..64"},
      {"mps-isolation", 0, FlagKind::kValue, "device|tenant",
       "shared GPUs: one MPS control daemon per GPU, or per tenant per GPU (fault isolation)"},
      {"compute-share", 0, FlagKind::kValue, "strict|fair",
       "a slice's compute share: a strict cap, or fair (bursts into idle GPU time, gives it back "
       "within 1 s)"},
      {"requires", 0, FlagKind::kRepeated, "CAPABILITY",
       "what a node must enforce to take shared work (comma-separated: vram_cap, compute_share, "
       "spill, sandbox, vram_scrub, mps; 'none' clears)"},
      {"network", 0, FlagKind::kValue, "MODE",
       "what its tasks' networks reach: none, isolated (outbound through NAT only) or host"},
      {"mig-relayout", 0, FlagKind::kValue, "off|idle|drain",
       "dynamic MIG: off (admins set layouts), idle (re-partition idle GPUs for waiting MIG work) "
       "or drain (also drain one busy GPU at a time for it)"},
  };
  return flags;
}

namespace {

// YamlToJson, reading the document as `msg` when given (api/message_yaml.h).
Result<std::string> YamlToJsonAs(std::string_view yaml, std::string_view source,
                                 const google::protobuf::Descriptor* msg) {
  try {
    Result<std::string> json = api::YamlNodeToJson(YAML::Load(std::string(yaml)), msg);
    if (!json.ok()) {
      return Status::InvalidArgument(std::string(source) + ": " + json.status().message());
    }
    return json;
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(std::string(source) + ":" + std::to_string(e.mark.line + 1) +
                                   ": " + e.msg);
  }
}

// Parses protobuf JSON (text starting with '{') or YAML into *m; `what` names the message.
Status ParseMessageText(std::string_view text, std::string_view source, std::string_view what,
                        google::protobuf::Message* m) {
  size_t first = text.find_first_not_of(" \t\r\n");
  std::string json;
  if (first != std::string_view::npos && text[first] == '{') {
    json = std::string(text);
  } else {
    GPUPOOL_ASSIGN_OR_RETURN(json, YamlToJsonAs(text, source, m->GetDescriptor()));
  }
  if (json == "null" || json.empty()) {
    return Status::InvalidArgument(std::string(source) + ": empty " + std::string(what));
  }
  return api::MessageFromJson(json, m).WithContext(source);
}

void SetDurationMs(int64_t ms, google::protobuf::Duration* d) {
  d->set_seconds(ms / 1000);
  d->set_nanos(static_cast<int32_t>(ms % 1000) * 1'000'000);
}

}  // namespace

Result<std::string> YamlToJson(std::string_view yaml, std::string_view source) {
  return YamlToJsonAs(yaml, source, nullptr);
}

Status ParseJobSpecText(std::string_view text, std::string_view source, v1::JobSpec* spec) {
  return ParseMessageText(text, source, "job spec", spec);
}

Status ParseServiceText(std::string_view text, std::string_view source, v1::Service* service) {
  GPUPOOL_RETURN_IF_ERROR(ParseMessageText(text, source, "service", service));
  ClearServiceOutputOnly(service);
  return Status::Ok();
}

void ClearServiceOutputOnly(v1::Service* service) {
  service->clear_id();
  service->clear_generation();
  service->clear_has_previous();
  service->clear_status();
  service->clear_created_by();
  service->clear_create_time();
  service->clear_update_time();
}

const std::vector<FlagSpec>& ServiceFlags() {
  static const std::vector<FlagSpec> flags = [] {
    std::vector<FlagSpec> v = {
        {"file", 'f', FlagKind::kValue, "FILE",
         "Service in protobuf JSON or YAML ('-' = stdin); other flags override it"},
        {"tenant", 0, FlagKind::kValue, "PATH", "the tenant whose service it is"},
        {"pool", 0, FlagKind::kValue, "NAME", "pool the replicas run in (never changes)"},
        {"priority", 0, FlagKind::kValue, "CLASS", "priority class (server default when unset)"},
        {"preemptible", 0, FlagKind::kBool, "",
         "a higher class may preempt replicas (each waits to be placed again)"},
    };
    // The replicas' template: as `jobs submit` spells it.
    for (const FlagSpec& f : SubmitFlags()) {
      for (const char* name : {"image", "entrypoint", "workdir", "volume", "port", "env", "tflops",
                               "vram", "gpus", "model", "mig", "sku", "cpu", "memory"}) {
        if (f.name == name) v.push_back(f);
      }
    }
    v.push_back({"registry-credential", 0, FlagKind::kValue, "NAME",
                 "pull --image with a credential the tenant keeps (registry-credentials create)"});
    for (FlagSpec f : std::vector<FlagSpec>{
             {"serve-port", 0, FlagKind::kValue, "PORT",
              "the port requests are served on, one of the --port ones (default: the only tcp "
              "one)"},
             {"readiness-path", 0, FlagKind::kValue, "PATH",
              "HTTP GET path answering 2xx when a replica is ready (default: the port accepts)"},
             {"min-replicas", 0, FlagKind::kValue, "N",
              "replicas kept at least, 0..max (0: scale to zero after --idle)"},
             {"max-replicas", 0, FlagKind::kValue, "N", "replicas at most, 1..1000"},
             {"target-in-flight", 0, FlagKind::kValue, "N",
              "requests in flight per replica the autoscaler aims for (default 1)"},
             {"idle", 0, FlagKind::kValue, "DURATION",
              "no request for this long scales down to --min-replicas, 10s..30d (default 5m)"},
             {"max-surge", 0, FlagKind::kValue, "N",
              "a rollout may run this many replicas beyond the desired count (default 1)"},
             {"max-unavailable", 0, FlagKind::kValue, "N",
              "a rollout may have this many fewer ready than desired (default 0)"},
         }) {
      v.push_back(std::move(f));
    }
    return v;
  }();
  return flags;
}

Status ApplyServiceFlags(const ParsedArgs& a, v1::Service* s) {
  if (auto v = a.Find("tenant")) s->set_tenant(*v);
  if (auto v = a.Find("pool")) s->set_pool(*v);
  if (auto v = a.Find("priority")) s->set_priority_class(*v);
  if (a.Has("preemptible")) s->set_preemptible(a.GetBool("preemptible"));
  bool template_flags = a.saw_dash_dash;
  for (const char* name :
       {"image", "registry-credential", "entrypoint", "workdir", "volume", "port", "env", "tflops",
        "vram", "gpus", "model", "mig", "sku", "cpu", "memory"}) {
    template_flags = template_flags || a.Has(name);
  }
  // Only then checked here: a file alone goes to the server, whose errors name its fields.
  if (template_flags) {
    v1::JobSpec spec;
    *spec.mutable_template_() = s->template_();
    GPUPOOL_RETURN_IF_ERROR(ApplySubmitFlags(a, &spec));
    *s->mutable_template_() = std::move(*spec.mutable_template_());
  }
  if (auto v = a.Find("serve-port")) {
    Result<int64_t> n = ParseInt(*v, 1, 65535);
    if (!n.ok()) return WithFlag(n.status(), "serve-port");
    s->set_port(static_cast<uint32_t>(*n));
  }
  if (auto v = a.Find("readiness-path")) s->set_readiness_path(*v);
  // Ranges are the server's to check (its errors name the field); here only the numbers.
  const std::pair<const char*, void (v1::Service::*)(int32_t)> counts[] = {
      {"min-replicas", &v1::Service::set_min_replicas},
      {"max-replicas", &v1::Service::set_max_replicas},
      {"target-in-flight", &v1::Service::set_target_in_flight},
      {"max-surge", &v1::Service::set_max_surge},
      {"max-unavailable", &v1::Service::set_max_unavailable},
  };
  for (const auto& [flag, set] : counts) {
    if (auto v = a.Find(flag)) {
      Result<int64_t> n = ParseInt(*v, 0, 1'000'000);
      if (!n.ok()) return WithFlag(n.status(), flag);
      (s->*set)(static_cast<int32_t>(*n));
    }
  }
  if (auto v = a.Find("idle")) {
    Result<int64_t> ms = ParseDurationMs(*v);
    if (!ms.ok()) return WithFlag(ms.status(), "idle");
    SetDurationMs(*ms, s->mutable_idle());
  }
  if (s->port() == 0) {
    const v1::Port* only = nullptr;
    int tcp = 0;
    for (const v1::Port& p : s->template_().ports()) {
      if (p.protocol().empty() || p.protocol() == "tcp") only = &p, ++tcp;
    }
    if (tcp == 1) s->set_port(only->port());
  }
  return Status::Ok();
}

Status ApplySubmitFlags(const ParsedArgs& a, v1::JobSpec* spec) {
  if (auto v = a.Find("tenant")) spec->set_tenant(*v);
  if (auto v = a.Find("pool")) spec->set_pool(*v);
  if (auto v = a.Find("priority")) spec->set_priority_class(*v);
  if (auto v = a.Find("tasks")) {
    Result<int64_t> n = ParseInt(*v, 1, 10000);
    if (!n.ok()) return WithFlag(n.status(), "tasks");
    spec->set_task_count(static_cast<int32_t>(*n));
  }
  if (spec->task_count() == 0) spec->set_task_count(1);
  if (a.Has("gang")) spec->set_gang(a.GetBool("gang"));
  if (a.Has("preemptible")) spec->set_preemptible(a.GetBool("preemptible"));
  if (auto v = a.Find("max-runtime")) {
    Result<int64_t> ms = ParseDurationMs(*v);
    if (!ms.ok()) return WithFlag(ms.status(), "max-runtime");
    spec->mutable_max_runtime()->set_seconds(*ms / 1000);
    spec->mutable_max_runtime()->set_nanos(static_cast<int32_t>(*ms % 1000) * 1'000'000);
  }
  if (auto v = a.Find("retries")) {
    Result<int64_t> n = ParseInt(*v, 0, 1000);
    if (!n.ok()) return WithFlag(n.status(), "retries");
    spec->set_max_retries(static_cast<int32_t>(*n));
  }
  GPUPOOL_RETURN_IF_ERROR(ParseKeyValues(a.GetAll("label"), "label", spec->mutable_labels()));
  v1::TaskTemplate* tmpl = spec->mutable_template_();
  if (auto v = a.Find("image")) tmpl->set_image(*v);
  if (auto v = a.Find("registry-credential")) tmpl->set_registry_credential(*v);
  for (const std::string& arg : a.GetAll("entrypoint")) tmpl->add_entrypoint(arg);
  if (auto v = a.Find("workdir")) tmpl->set_working_dir(*v);
  for (const std::string& v : a.GetAll("volume")) {
    // The server checks the path and the name; here only the shape.
    const size_t eq = v.find('=');
    if (v.empty() || eq == 0 || (eq != std::string::npos && eq + 1 == v.size())) {
      return Status::InvalidArgument("--volume: expected PATH or PATH=DATASET, got '" + v + "'");
    }
    v1::Volume* vol = tmpl->add_volumes();
    vol->set_mount_path(v.substr(0, eq));
    if (eq != std::string::npos) vol->set_dataset(v.substr(eq + 1));
  }
  for (const std::string& text : a.GetAll("port")) {
    auto port = ParseTaskPort(text);
    if (!port.ok()) return Status::InvalidArgument("--port: " + port.status().message());
    v1::Port* p = tmpl->add_ports();
    p->set_port(static_cast<uint32_t>(port->port));
    p->set_protocol(port->protocol);
    p->set_name(port->name);
  }
  GPUPOOL_RETURN_IF_ERROR(ParseKeyValues(a.GetAll("env"), "env", tmpl->mutable_env()));
  GPUPOOL_RETURN_IF_ERROR(
      ParseKeyValues(a.GetAll("secret-env"), "secret-env", tmpl->mutable_secret_env()));

  v1::ResourceRequest* res = tmpl->mutable_resources();
  const bool fractional = a.Has("tflops") || a.Has("vram");
  const int shapes = int{fractional} + int{a.Has("gpus")} + int{a.Has("mig")} + int{a.Has("sku")};
  if (shapes > 1) {
    return Status::InvalidArgument(
        "give one resource shape: --tflops with --vram, --gpus, --mig or --sku");
  }
  if (a.Has("model") && !a.Has("gpus")) {
    return Status::InvalidArgument("--model only goes with --gpus");
  }
  if (fractional) {
    if (!a.Has("tflops") || !a.Has("vram")) {
      return Status::InvalidArgument("a fractional request needs both --tflops and --vram");
    }
    Result<int64_t> milli = ParseTflops(a.Get("tflops"));
    if (!milli.ok()) return WithFlag(milli.status(), "tflops");
    Result<int64_t> mib = ParseMemoryMib(a.Get("vram"));
    if (!mib.ok()) return WithFlag(mib.status(), "vram");
    res->mutable_fractional()->set_milli_tflops(*milli);
    res->mutable_fractional()->set_vram_mib(*mib);
  } else if (a.Has("gpus")) {
    Result<int64_t> n = ParseInt(a.Get("gpus"), 1, 1024);
    if (!n.ok()) return WithFlag(n.status(), "gpus");
    v1::WholeGpuRequest* w = res->mutable_whole_gpus();
    w->set_count(static_cast<int32_t>(*n));
    for (const std::string& m : SplitList(a.GetAll("model"))) w->add_models(m);
  } else if (a.Has("mig")) {
    res->mutable_mig()->set_profile(a.Get("mig"));
  } else if (a.Has("sku")) {
    res->mutable_sku()->set_name(a.Get("sku"));
  }
  if (res->shape_case() == v1::ResourceRequest::SHAPE_NOT_SET) {
    return Status::InvalidArgument(
        "say what each task needs: --tflops 12.5 --vram 20GiB, --gpus N, --mig PROFILE or "
        "--sku NAME");
  }
  if (auto v = a.Find("cpu")) {
    Result<int64_t> milli = ParseCpuMilli(*v);
    if (!milli.ok()) return WithFlag(milli.status(), "cpu");
    res->set_cpu_milli(*milli);
  }
  if (auto v = a.Find("memory")) {
    Result<int64_t> mib = ParseMemoryMib(*v);
    if (!mib.ok()) return WithFlag(mib.status(), "memory");
    res->set_memory_mib(*mib);
  }
  if (a.saw_dash_dash) {
    tmpl->clear_command();
    for (const std::string& w : a.rest) tmpl->add_command(w);
  }
  if (tmpl->command_size() == 0 && tmpl->image().empty()) {
    return Status::InvalidArgument(
        "give the task's command after '--', e.g. -- python train.py (or an --image)");
  }
  return Status::Ok();
}

Status ApplyPoolFlags(const ParsedArgs& a, v1::Pool* pool, std::vector<std::string>* mask) {
  if (auto v = a.Find("visibility")) {
    v1::Visibility vis;
    if (!v1::Visibility_Parse("VISIBILITY_" + Upper(*v), &vis) ||
        vis == v1::VISIBILITY_UNSPECIFIED) {
      return Status::InvalidArgument("--visibility: want public or private, got '" + *v + "'");
    }
    pool->set_visibility(vis);
    mask->push_back("visibility");
  }
  if (a.Has("allow")) {
    pool->clear_allowed_tenants();
    for (const std::string& t : SplitList(a.GetAll("allow"))) pool->add_allowed_tenants(t);
    mask->push_back("allowed_tenants");
  }
  if (auto v = a.Find("strategy")) {
    pool->set_placement_strategy(*v);
    mask->push_back("placement_strategy");
  }
  for (const char* flag : {"compute-overcommit", "memory-overcommit"}) {
    if (auto v = a.Find(flag)) {
      Result<double> r = ParsePositiveDecimal(*v);
      if (!r.ok()) return WithFlag(r.status(), flag);
      const bool compute = flag[0] == 'c';
      if (compute) {
        pool->set_compute_overcommit(*r);
      } else {
        pool->set_memory_overcommit(*r);
      }
      mask->push_back(compute ? "compute_overcommit" : "memory_overcommit");
    }
  }
  if (auto v = a.Find("sharing")) {
    v1::SharingMode mode;
    if (!v1::SharingMode_Parse("SHARING_MODE_" + Upper(*v), &mode) ||
        mode == v1::SHARING_MODE_UNSPECIFIED) {
      return Status::InvalidArgument("--sharing: want exclusive, fractional or time-sliced, got '" +
                                     *v + "'");
    }
    pool->set_sharing_mode(mode);
    mask->push_back("sharing_mode");
  }
  if (auto v = a.Find("replicas")) {
    Result<int64_t> n = ParseInt(*v, 2, 64);
    if (!n.ok()) return WithFlag(n.status(), "replicas");
    pool->set_time_slice_replicas(static_cast<int32_t>(*n));
    mask->push_back("time_slice_replicas");
  }
  if (auto v = a.Find("mps-isolation")) {
    if (*v != "device" && *v != "tenant") {
      return Status::InvalidArgument("--mps-isolation: want device or tenant, got '" + *v + "'");
    }
    pool->set_mps_tenant_isolation(*v == "tenant");
    mask->push_back("mps_tenant_isolation");
  }
  if (auto v = a.Find("compute-share")) {
    if (*v != "strict" && *v != "fair") {
      return Status::InvalidArgument("--compute-share: want strict or fair, got '" + *v + "'");
    }
    pool->set_compute_fair(*v == "fair");
    mask->push_back("compute_fair");
  }
  if (auto v = a.Find("mig-relayout")) {
    const v1::MigRelayout mode = *v == "off"     ? v1::MIG_RELAYOUT_OFF
                                 : *v == "idle"  ? v1::MIG_RELAYOUT_IDLE
                                 : *v == "drain" ? v1::MIG_RELAYOUT_DRAIN
                                                 : v1::MIG_RELAYOUT_UNSPECIFIED;
    if (mode == v1::MIG_RELAYOUT_UNSPECIFIED) {
      return Status::InvalidArgument("--mig-relayout: want off, idle or drain, got '" + *v + "'");
    }
    pool->set_mig_relayout(mode);
    mask->push_back("mig_relayout");
  }
  if (auto v = a.Find("network")) {
    const v1::NetworkMode mode = *v == "none"       ? v1::NETWORK_MODE_NONE
                                 : *v == "isolated" ? v1::NETWORK_MODE_ISOLATED
                                 : *v == "host"     ? v1::NETWORK_MODE_HOST
                                                    : v1::NETWORK_MODE_UNSPECIFIED;
    if (mode == v1::NETWORK_MODE_UNSPECIFIED) {
      return Status::InvalidArgument("--network: want none, isolated or host, got '" + *v + "'");
    }
    pool->set_network(mode);
    mask->push_back("network");
  }
  if (a.Has("requires")) {
    for (const std::string& c : SplitList(a.GetAll("requires"))) {
      pool->add_required_capabilities(c);  // "none" included; the server names an unknown one
    }
    mask->push_back("required_capabilities");
  }
  if (pool->visibility() == v1::VISIBILITY_PUBLIC && pool->allowed_tenants_size() > 0) {
    return Status::InvalidArgument("--allow only applies to --visibility private");
  }
  if (pool->time_slice_replicas() != 0 && pool->sharing_mode() != v1::SHARING_MODE_TIME_SLICED &&
      a.Has("sharing")) {
    return Status::InvalidArgument("--replicas only applies to --sharing time-sliced");
  }
  return Status::Ok();
}

Status ParseJobState(std::string_view text, v1::JobState* state) {
  std::string name = Upper(text);
  if (name.rfind("JOB_STATE_", 0) != 0) name = "JOB_STATE_" + name;
  if (!v1::JobState_Parse(name, state) || *state == v1::JOB_STATE_UNSPECIFIED) {
    return Status::InvalidArgument("unknown job state '" + std::string(text) +
                                   "' (pending, running, succeeded, failed, cancelled)");
  }
  return Status::Ok();
}

std::string DescribeResources(const v1::ResourceRequest& r) {
  std::string out;
  switch (r.shape_case()) {
    case v1::ResourceRequest::kFractional:
      out = FormatTflops(r.fractional().milli_tflops()) + " TFLOPS, " +
            FormatMib(r.fractional().vram_mib()) + " VRAM";
      break;
    case v1::ResourceRequest::kWholeGpus: {
      out =
          std::to_string(r.whole_gpus().count()) + (r.whole_gpus().count() == 1 ? " GPU" : " GPUs");
      std::string models;
      for (const std::string& m : r.whole_gpus().models())
        models += (models.empty() ? "" : ",") + m;
      if (!models.empty()) out += " (" + models + ")";
      break;
    }
    case v1::ResourceRequest::kMig:
      out = "MIG " + r.mig().profile();
      break;
    case v1::ResourceRequest::kSku:
      out = "SKU " + r.sku().name();
      break;
    default:
      out = "-";
  }
  if (r.cpu_milli() > 0) out += ", " + FormatTflops(r.cpu_milli()) + " CPU";
  if (r.memory_mib() > 0) out += ", " + FormatMib(r.memory_mib()) + " RAM";
  return out;
}

}  // namespace gpupool::ctl
