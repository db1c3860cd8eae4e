// Unit tests of gpupoolctl's pieces that do not touch the network: flag parsing, units, request
// building, spec files and output formatting.
#include <gtest/gtest.h>

#include <sstream>

#include "cmd/ctl/app.h"
#include "cmd/ctl/args.h"
#include "cmd/ctl/format.h"
#include "cmd/ctl/quota_amount.h"
#include "cmd/ctl/requests.h"
#include "cmd/ctl/units.h"

namespace gpupool::ctl {
namespace {

using Words = std::vector<std::string>;

const std::vector<FlagSpec> kSpecs = {
    {"pool", 0, FlagKind::kValue, "NAME", ""},    {"gang", 0, FlagKind::kBool, "", ""},
    {"label", 0, FlagKind::kRepeated, "K=V", ""}, {"follow", 'f', FlagKind::kBool, "", ""},
    {"output", 'o', FlagKind::kValue, "FMT", ""},
};

TEST(ParseFlags, AcceptedForms) {
  const struct {
    const char* name;
    Words words;
    std::string pool, output;
    bool gang, follow;
    Words labels, positional, rest;
  } rows[] = {
      {"space", {"--pool", "a"}, "a", "", false, false, {}, {}, {}},
      {"equals", {"--pool=a"}, "a", "", false, false, {}, {}, {}},
      {"last wins", {"--pool", "a", "--pool", "b"}, "b", "", false, false, {}, {}, {}},
      {"bool", {"--gang"}, "", "", true, false, {}, {}, {}},
      {"bool explicit false", {"--gang=false"}, "", "", false, false, {}, {}, {}},
      {"short bool", {"-f"}, "", "", false, true, {}, {}, {}},
      {"short value", {"-o", "json"}, "", "json", false, false, {}, {}, {}},
      {"short equals", {"-o=yaml"}, "", "yaml", false, false, {}, {}, {}},
      {"repeated", {"--label", "a=1", "--label=b=2"}, "", "", false, false, {"a=1", "b=2"}, {}, {}},
      {"positional mixed", {"x", "--gang", "y"}, "", "", true, false, {}, {"x", "y"}, {}},
      {"dash is a value", {"-"}, "", "", false, false, {}, {"-"}, {}},
      {"after --",
       {"--pool", "p", "--", "python", "--pool", "-f"},
       "p",
       "",
       false,
       false,
       {},
       {},
       {"python", "--pool", "-f"}},
  };
  for (const auto& r : rows) {
    SCOPED_TRACE(r.name);
    Result<ParsedArgs> a = ParseFlags(kSpecs, r.words);
    ASSERT_TRUE(a.ok()) << a.status().ToString();
    EXPECT_EQ(a->Get("pool"), r.pool);
    EXPECT_EQ(a->Get("output"), r.output);
    EXPECT_EQ(a->GetBool("gang"), r.gang);
    EXPECT_EQ(a->GetBool("follow"), r.follow);
    EXPECT_EQ(a->GetAll("label"), r.labels);
    EXPECT_EQ(a->positional, r.positional);
    EXPECT_EQ(a->rest, r.rest);
  }
}

TEST(ParseFlags, Errors) {
  const struct {
    Words words;
    const char* message;
  } rows[] = {
      {{"--pol", "a"}, "unknown flag --pol"},
      {{"-x"}, "unknown flag -x"},
      {{"--pool"}, "flag --pool needs a value (NAME)"},
      {{"--pool", "--"}, "flag --pool needs a value (NAME)"},
      {{"--gang=maybe"}, "flag --gang takes true or false, got 'maybe'"},
  };
  for (const auto& r : rows) {
    SCOPED_TRACE(r.message);
    Result<ParsedArgs> a = ParseFlags(kSpecs, r.words);
    ASSERT_FALSE(a.ok());
    EXPECT_EQ(a.status().message(), r.message);
  }
}

TEST(Units, Tflops) {
  const struct {
    const char* text;
    int64_t milli;  // -1 = error
  } rows[] = {{"12.5", 12'500}, {"0.001", 1},   {"989.5", 989'500}, {"3", 3'000}, {"0", -1},
              {"-1", -1},       {"1.0001", -1}, {"abc", -1},        {"", -1}};
  for (const auto& r : rows) {
    SCOPED_TRACE(r.text);
    Result<int64_t> v = ParseTflops(r.text);
    EXPECT_EQ(v.ok() ? *v : -1, r.milli);
  }
}

TEST(Units, Memory) {
  const struct {
    const char* text;
    int64_t mib;  // -1 = error
  } rows[] = {
      {"20GiB", 20 * 1024},  {"20Gi", 20 * 1024},   {"512MiB", 512},   {"1.5GiB", 1536},
      {"1TiB", 1024 * 1024}, {"0.5Ti", 512 * 1024}, {"20", -1},        {"20GB", -1},
      {"20G", -1},           {"0GiB", -1},          {"1.0001GiB", -1}, {"GiB", -1},
      {"20XB", -1},          {"0.1MiB", -1},
  };
  for (const auto& r : rows) {
    SCOPED_TRACE(r.text);
    Result<int64_t> v = ParseMemoryMib(r.text);
    EXPECT_EQ(v.ok() ? *v : -1, r.mib);
  }
  EXPECT_EQ(ParseMemoryMib("20GB").status().message(),
            "memory size '20GB': use binary units MiB, GiB or TiB (e.g. 20GiB)");
  EXPECT_EQ(ParseMemoryMib("20").status().message(),
            "memory size '20' needs a unit: MiB, GiB or TiB (e.g. 20GiB)");
}

TEST(Units, CpuAndDuration) {
  const struct {
    const char* text;
    int64_t milli;
  } cpu[] = {{"4", 4000}, {"0.5", 500}, {"250m", 250}, {"0", -1}, {"m", -1}, {"x", -1}};
  for (const auto& r : cpu) {
    SCOPED_TRACE(r.text);
    Result<int64_t> v = ParseCpuMilli(r.text);
    EXPECT_EQ(v.ok() ? *v : -1, r.milli);
  }
  const struct {
    const char* text;
    int64_t ms;
  } dur[] = {{"1h", 3'600'000}, {"30m", 1'800'000},
             {"90s", 90'000},   {"1h30m", 5'400'000},
             {"1500ms", 1'500}, {"2d", 172'800'000},
             {"1.5s", 1'500},   {"10", -1},
             {"1x", -1},        {"", -1},
             {"0s", -1},        {"h", -1}};
  for (const auto& r : dur) {
    SCOPED_TRACE(r.text);
    Result<int64_t> v = ParseDurationMs(r.text);
    EXPECT_EQ(v.ok() ? *v : -1, r.ms);
  }
}

TEST(Units, Formatting) {
  EXPECT_EQ(FormatMib(81920), "80GiB");
  EXPECT_EQ(FormatMib(1536), "1.5GiB");
  EXPECT_EQ(FormatMib(4864), "4.75GiB");
  EXPECT_EQ(FormatMib(512), "512MiB");
  EXPECT_EQ(FormatMib(0), "0MiB");
  EXPECT_EQ(FormatMib(2 * 1024 * 1024), "2TiB");
  EXPECT_EQ(FormatDurationMs(5'400'000), "1h30m");
  EXPECT_EQ(FormatDurationMs(1'500), "1.5s");
  EXPECT_EQ(FormatDurationMs(30'000), "30s");
  EXPECT_EQ(FormatUsedOf(12'500, 989'500), "12.5/989.5");
}

ParsedArgs SubmitArgs(const Words& words) {
  Result<ParsedArgs> a = ParseFlags(SubmitFlags(), words);
  EXPECT_TRUE(a.ok()) << a.status().ToString();
  return a.ok() ? *a : ParsedArgs{};
}

TEST(SubmitFlags, BuildsTheSpec) {
  v1::JobSpec spec;
  ASSERT_TRUE(ApplySubmitFlags(SubmitArgs({"--tenant",
                                           "acme/ml/alice",
                                           "--pool",
                                           "training",
                                           "--priority",
                                           "high",
                                           "--tasks",
                                           "4",
                                           "--gang",
                                           "--preemptible",
                                           "--max-runtime",
                                           "1h30m",
                                           "--retries",
                                           "2",
                                           "--label",
                                           "team=ml",
                                           "--env",
                                           "A=1",
                                           "--env",
                                           "B=x=y",
                                           "--tflops",
                                           "12.5",
                                           "--vram",
                                           "20GiB",
                                           "--cpu",
                                           "4",
                                           "--memory",
                                           "16GiB",
                                           "--",
                                           "python",
                                           "train.py",
                                           "--lr",
                                           "0.1"}),
                               &spec)
                  .ok());
  EXPECT_EQ(spec.tenant(), "acme/ml/alice");
  EXPECT_EQ(spec.pool(), "training");
  EXPECT_EQ(spec.priority_class(), "high");
  EXPECT_EQ(spec.task_count(), 4);
  EXPECT_TRUE(spec.gang());
  EXPECT_TRUE(spec.preemptible());
  EXPECT_EQ(spec.max_runtime().seconds(), 5400);
  EXPECT_EQ(spec.max_retries(), 2);
  EXPECT_EQ(spec.labels().at("team"), "ml");
  EXPECT_EQ(spec.template_().env().at("B"), "x=y");
  const v1::ResourceRequest& r = spec.template_().resources();
  EXPECT_EQ(r.fractional().milli_tflops(), 12'500);
  EXPECT_EQ(r.fractional().vram_mib(), 20'480);
  EXPECT_EQ(r.cpu_milli(), 4'000);
  EXPECT_EQ(r.memory_mib(), 16'384);
  EXPECT_EQ(spec.template_().command_size(), 4);
  EXPECT_EQ(spec.template_().command(3), "0.1");
  EXPECT_EQ(DescribeResources(r), "12.5 TFLOPS, 20GiB VRAM, 4 CPU, 16GiB RAM");
}

TEST(SubmitFlags, AnImageNeedsNoCommand) {
  v1::JobSpec spec;
  ASSERT_TRUE(ApplySubmitFlags(
                  SubmitArgs({"--gpus", "1", "--image", "reg.example:5000/team/app:v1"}), &spec)
                  .ok());
  EXPECT_EQ(spec.template_().image(), "reg.example:5000/team/app:v1");
  EXPECT_EQ(spec.template_().command_size(), 0);
  ASSERT_TRUE(
      ApplySubmitFlags(
          SubmitArgs({"--gpus", "1", "--image", "app:1", "--", "serve", "--port", "80"}), &spec)
          .ok());
  EXPECT_EQ(spec.template_().command_size(), 3);
}

TEST(SubmitFlags, EntrypointWorkdirAndVolumes) {
  v1::JobSpec spec;
  ASSERT_TRUE(
      ApplySubmitFlags(SubmitArgs({"--gpus", "1", "--image", "app:1", "--entrypoint", "/bin/sh",
                                   "--entrypoint", "-c", "--workdir", "/scratch", "--volume",
                                   "/data=imagenet-1k", "--volume", "/scratch", "--", "make test"}),
                       &spec)
          .ok());
  const v1::TaskTemplate& t = spec.template_();
  ASSERT_EQ(t.entrypoint_size(), 2);
  EXPECT_EQ(t.entrypoint(1), "-c");
  EXPECT_EQ(t.working_dir(), "/scratch");
  ASSERT_EQ(t.volumes_size(), 2);
  EXPECT_EQ(t.volumes(0).mount_path(), "/data");
  EXPECT_EQ(t.volumes(0).dataset(), "imagenet-1k");
  EXPECT_EQ(t.volumes(1).mount_path(), "/scratch");
  EXPECT_EQ(t.volumes(1).dataset(), "");
  for (const char* bad : {"=imagenet", "/data="}) {
    v1::JobSpec other;
    const Status st =
        ApplySubmitFlags(SubmitArgs({"--gpus", "1", "--image", "app:1", "--volume", bad}), &other);
    EXPECT_EQ(st.message(),
              std::string("--volume: expected PATH or PATH=DATASET, got '") + bad + "'");
  }
}

TEST(SubmitFlags, Shapes) {
  const struct {
    Words words;
    const char* describe;  // or the error message
    bool ok;
  } rows[] = {
      {{"--gpus", "2", "--model", "H100-SXM,A100-80GB", "--", "x"},
       "2 GPUs (H100-SXM,A100-80GB)",
       true},
      {{"--gpus", "1", "--", "x"}, "1 GPU", true},
      {{"--mig", "1g.10gb", "--", "x"}, "MIG 1g.10gb", true},
      {{"--sku", "small", "--", "x"}, "SKU small", true},
      {{"--gpus", "2", "--mig", "1g.10gb", "--", "x"},
       "give one resource shape: --tflops with --vram, --gpus, --mig or --sku",
       false},
      {{"--tflops", "1", "--", "x"}, "a fractional request needs both --tflops and --vram", false},
      {{"--model", "H100", "--mig", "1g.10gb", "--", "x"}, "--model only goes with --gpus", false},
      {{"--", "x"},
       "say what each task needs: --tflops 12.5 --vram 20GiB, --gpus N, --mig PROFILE or --sku "
       "NAME",
       false},
      {{"--gpus", "2"},
       "give the task's command after '--', e.g. -- python train.py (or an --image)",
       false},
      {{"--gpus", "0", "--", "x"}, "--gpus: number '0' is out of range 1..1024", false},
      {{"--tflops", "1", "--vram", "1GB", "--", "x"},
       "--vram: memory size '1GB': use binary units MiB, GiB or TiB (e.g. 20GiB)",
       false},
      {{"--tasks", "0", "--gpus", "1", "--", "x"},
       "--tasks: number '0' is out of range 1..10000",
       false},
      {{"--label", "novalue", "--gpus", "1", "--", "x"},
       "--label: want KEY=VALUE, got 'novalue'",
       false},
      {{"--max-runtime", "10", "--gpus", "1", "--", "x"},
       "--max-runtime: invalid duration '10': want e.g. 90s, 30m, 1h30m or 2d (units ms s m h d)",
       false},
  };
  for (const auto& r : rows) {
    SCOPED_TRACE(r.describe);
    v1::JobSpec spec;
    Status st = ApplySubmitFlags(SubmitArgs(r.words), &spec);
    EXPECT_EQ(st.ok(), r.ok);
    if (r.ok) {
      EXPECT_EQ(DescribeResources(spec.template_().resources()), r.describe);
      EXPECT_EQ(spec.task_count(), 1);
    } else {
      EXPECT_EQ(st.message(), r.describe);
    }
  }
}

TEST(SpecFile, JsonAndYamlGiveTheSameSpec) {
  const char* json = R"({"tenant": "acme", "pool": "p", "taskCount": 2, "gang": true,
    "maxRuntime": "3600s", "template": {"command": ["python", "t.py"],
    "resources": {"wholeGpus": {"count": 1, "models": ["H100-SXM"]}, "memoryMib": "1024"}}})";
  const char* yaml = R"(tenant: acme
pool: p
task_count: 2
gang: true
max_runtime: 3600s
template:
  command: [python, t.py]
  resources:
    whole_gpus: {count: 1, models: [H100-SXM]}
    memory_mib: 1024
)";
  v1::JobSpec a, b;
  ASSERT_TRUE(ParseJobSpecText(json, "a.json", &a).ok());
  Status st = ParseJobSpecText(yaml, "b.yaml", &b);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(a.SerializeAsString(), b.SerializeAsString());
  EXPECT_EQ(b.max_runtime().seconds(), 3600);
  EXPECT_EQ(b.template_().resources().memory_mib(), 1024);

  // Flags override the file; the file's resources and command stay when no flag replaces them.
  ASSERT_TRUE(ApplySubmitFlags(SubmitArgs({"--pool", "q", "--label", "x=1"}), &b).ok());
  EXPECT_EQ(b.pool(), "q");
  EXPECT_EQ(b.template_().command(0), "python");
  EXPECT_EQ(b.template_().resources().whole_gpus().count(), 1);
}

TEST(SpecFile, YamlScalarsBecomeJsonTypes) {
  const struct {
    const char* yaml;
    const char* json;
  } rows[] = {
      {"a: 1", R"({"a":1})"},
      {"a: -3", R"({"a":-3})"},
      {"a: 1.5", R"({"a":1.5})"},
      {"a: 1e3", R"({"a":1e3})"},
      {"a: 01", R"({"a":"01"})"},
      {"a: 1.", R"({"a":"1."})"},
      {"a: 0x10", R"({"a":"0x10"})"},
      {"a: '7'", R"({"a":"7"})"},
      {"a: true", R"({"a":true})"},
      {"a: \"false\"", R"({"a":"false"})"},
      {"a: ~", R"({"a":null})"},
      {"a: [x, \"q\\\"\"]", R"({"a":["x","q\""]})"},
      {"a: {b: 3600s}", R"({"a":{"b":"3600s"}})"},
  };
  for (const auto& r : rows) {
    SCOPED_TRACE(r.yaml);
    Result<std::string> j = YamlToJson(r.yaml, "t.yaml");
    ASSERT_TRUE(j.ok()) << j.status().ToString();
    EXPECT_EQ(*j, r.json);
  }
}

TEST(SpecFile, Errors) {
  v1::JobSpec spec;
  Status st = ParseJobSpecText("tenant: a\ncolour: red\n", "job.yaml", &spec);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("job.yaml: not a valid JobSpec"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("colour"), std::string::npos) << st.message();
  st = ParseJobSpecText("tenant: [a\n", "job.yaml", &spec);
  EXPECT_EQ(st.message().rfind("job.yaml:", 0), 0u) << st.message();
  st = ParseJobSpecText("", "job.yaml", &spec);
  EXPECT_EQ(st.message(), "job.yaml: empty job spec");
  // A quoted "true" stays a string: JobSpec.tenant gets the text.
  ASSERT_TRUE(ParseJobSpecText("tenant: 'true'\n", "job.yaml", &spec).ok());
  EXPECT_EQ(spec.tenant(), "true");
  // A plain scalar for a string field is its text (as `-o yaml` prints "8"); numbers stay numbers.
  Status plain = ParseJobSpecText(
      "tenant: 42\ntask_count: 2\ntemplate: {command: [sleep, 10], env: {PORT: 8080, ON: true}}\n",
      "job.yaml", &spec);
  ASSERT_TRUE(plain.ok()) << plain.ToString();
  EXPECT_EQ(spec.tenant(), "42");
  EXPECT_EQ(spec.task_count(), 2);
  EXPECT_EQ(spec.template_().command(1), "10");
  EXPECT_EQ(spec.template_().env().at("PORT"), "8080");
  EXPECT_EQ(spec.template_().env().at("ON"), "true");
}

TEST(ServiceFile, YamlIdleAsPeopleWriteItAndOutputOnlyFieldsDropped) {
  v1::Service svc;
  Status st = ParseServiceText(
      "name: web\ntenant: acme\npool: p\nidle: 1h30m\nport: 8080\ngeneration: '7'\n"
      "id: '3'\nstatus: {desired: 2, belowCode: STARTING}\ncreatedBy: 'token:x'\n"
      "template: {command: [serve], ports: [{port: 8080}]}\n",
      "web.yaml", &svc);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(svc.name(), "web");
  EXPECT_EQ(svc.idle().seconds(), 5400);
  EXPECT_EQ(svc.port(), 8080u);
  EXPECT_EQ(svc.generation(), 0);
  EXPECT_EQ(svc.id(), "");
  EXPECT_FALSE(svc.has_status());
  EXPECT_EQ(svc.created_by(), "");
  ASSERT_TRUE(ParseServiceText("idle: 1.5s\n", "a.yaml", &svc).ok());
  EXPECT_EQ(svc.idle().seconds(), 1);
  EXPECT_EQ(svc.idle().nanos(), 500'000'000);
  // JSON is protobuf's mapping, as the REST API speaks it.
  ASSERT_TRUE(
      ParseServiceText(R"({"name": "web", "idle": "300s", "minReplicas": 2})", "a.json", &svc)
          .ok());
  EXPECT_EQ(svc.idle().seconds(), 300);
  EXPECT_EQ(svc.min_replicas(), 2);

  st = ParseServiceText("name: web\nidle: soon\n", "web.yaml", &svc);
  EXPECT_EQ(st.message().rfind("web.yaml: idle: invalid duration 'soon'", 0), 0u) << st.message();
  st = ParseServiceText("name: web\nreplicas: 2\n", "web.yaml", &svc);
  EXPECT_NE(st.message().find("web.yaml: not a valid Service"), std::string::npos) << st.message();
  st = ParseServiceText("", "web.yaml", &svc);
  EXPECT_EQ(st.message(), "web.yaml: empty service");
}

// Every Duration in a YAML file is read as people write it, not only a service's idle period.
TEST(JobFile, AnyDurationAsPeopleWriteIt) {
  v1::JobSpec spec;
  ASSERT_TRUE(ParseJobSpecText("max_runtime: 2h30m\n", "job.yaml", &spec).ok());
  EXPECT_EQ(spec.max_runtime().seconds(), 9000);
  ASSERT_TRUE(ParseJobSpecText("max_runtime: 0s\n", "job.yaml", &spec).ok());
  EXPECT_EQ(spec.max_runtime().seconds(), 0);
  ASSERT_TRUE(ParseJobSpecText("max_runtime: 1.250s\n", "job.yaml", &spec).ok());
  EXPECT_EQ(spec.max_runtime().nanos(), 250'000'000);
  Status st = ParseJobSpecText("max_runtime: forever\n", "job.yaml", &spec);
  EXPECT_EQ(st.message().rfind("job.yaml: max_runtime: invalid duration 'forever'", 0), 0u)
      << st.message();
}

TEST(ServiceFlags, TemplateAsJobsSubmitSpellsItAndTheOnlyTcpPortServes) {
  Result<ParsedArgs> a =
      ParseFlags(ServiceFlags(),
                 {"--tenant", "acme",  "--pool",         "p",         "--tflops",         "2",
                  "--vram",   "4GiB",  "--port",         "9000:http", "--port",           "53/udp",
                  "--env",    "A=1",   "--min-replicas", "1",         "--max-replicas",   "3",
                  "--idle",   "10m",   "--max-surge",    "2",         "--readiness-path", "/ready",
                  "--",       "serve", "--fast"});
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  v1::Service svc;
  ASSERT_TRUE(ApplyServiceFlags(*a, &svc).ok());
  EXPECT_EQ(svc.tenant(), "acme");
  EXPECT_EQ(svc.pool(), "p");
  EXPECT_EQ(svc.template_().command_size(), 2);
  EXPECT_EQ(svc.template_().resources().fractional().milli_tflops(), 2000);
  EXPECT_EQ(svc.template_().ports_size(), 2);
  EXPECT_EQ(svc.template_().env().at("A"), "1");
  EXPECT_EQ(svc.port(), 9000u);  // the only tcp one
  EXPECT_EQ(svc.min_replicas(), 1);
  EXPECT_EQ(svc.max_replicas(), 3);
  EXPECT_EQ(svc.idle().seconds(), 600);
  EXPECT_EQ(svc.max_surge(), 2);
  EXPECT_EQ(svc.readiness_path(), "/ready");

  // Settings alone leave the template as it is (a file's template goes to the server as is).
  a = ParseFlags(ServiceFlags(), {"--max-replicas", "9"});
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(ApplyServiceFlags(*a, &svc).ok());
  EXPECT_EQ(svc.max_replicas(), 9);
  EXPECT_EQ(svc.template_().command_size(), 2);
  v1::Service empty;
  ASSERT_TRUE(ApplyServiceFlags(*a, &empty).ok());
  EXPECT_FALSE(empty.has_template_());

  a = ParseFlags(ServiceFlags(), {"--min-replicas", "two"});
  ASSERT_TRUE(a.ok());
  Status st = ApplyServiceFlags(*a, &svc);
  EXPECT_EQ(st.message().rfind("--min-replicas: ", 0), 0u) << st.message();
  a = ParseFlags(ServiceFlags(), {"--image", "app:v1", "--gpus", "1", "--tflops", "1"});
  ASSERT_TRUE(a.ok());
  EXPECT_FALSE(ApplyServiceFlags(*a, &empty).ok());
}

TEST(PoolFlags, BuildsPoolAndMask) {
  Result<ParsedArgs> a = ParseFlags(
      PoolFlags(), {"--visibility", "private", "--allow", "acme/ml,acme/infra", "--allow", "x",
                    "--strategy", "fgd", "--compute-overcommit", "1.5", "--memory-overcommit",
                    "1.0", "--sharing", "time-sliced", "--replicas", "4"});
  ASSERT_TRUE(a.ok());
  v1::Pool pool;
  std::vector<std::string> mask;
  ASSERT_TRUE(ApplyPoolFlags(*a, &pool, &mask).ok());
  EXPECT_EQ(pool.visibility(), v1::VISIBILITY_PRIVATE);
  ASSERT_EQ(pool.allowed_tenants_size(), 3);
  EXPECT_EQ(pool.allowed_tenants(1), "acme/infra");
  EXPECT_EQ(pool.placement_strategy(), "fgd");
  EXPECT_DOUBLE_EQ(pool.compute_overcommit(), 1.5);
  EXPECT_DOUBLE_EQ(pool.memory_overcommit(), 1.0);
  EXPECT_EQ(pool.sharing_mode(), v1::SHARING_MODE_TIME_SLICED);
  EXPECT_EQ(pool.time_slice_replicas(), 4);
  EXPECT_EQ(mask, (std::vector<std::string>{"visibility", "allowed_tenants", "placement_strategy",
                                            "compute_overcommit", "memory_overcommit",
                                            "sharing_mode", "time_slice_replicas"}));

  const struct {
    Words words;
    const char* message;
  } bad[] = {
      {{"--visibility", "secret"}, "--visibility: want public or private, got 'secret'"},
      {{"--sharing", "mps"}, "--sharing: want exclusive, fractional or time-sliced, got 'mps'"},
      {{"--replicas", "1"}, "--replicas: number '1' is out of range 2..64"},
      {{"--compute-overcommit", "-1"},
       "--compute-overcommit: invalid number '-1': want a positive decimal such as 1.5"},
      {{"--visibility", "public", "--allow", "a"}, "--allow only applies to --visibility private"},
      {{"--sharing", "exclusive", "--replicas", "4"},
       "--replicas only applies to --sharing time-sliced"},
  };
  for (const auto& r : bad) {
    SCOPED_TRACE(r.message);
    Result<ParsedArgs> b = ParseFlags(PoolFlags(), r.words);
    ASSERT_TRUE(b.ok());
    v1::Pool p;
    std::vector<std::string> m;
    Status st = ApplyPoolFlags(*b, &p, &m);
    EXPECT_EQ(st.message(), r.message);
  }
}

TEST(QuotaAmount, ParsesUnitsOrSkus) {
  const struct {
    const char* text;
    int64_t milli_tflops, vram_mib;
    int32_t devices;
    const char* sku;
    int32_t count;
  } rows[] = {
      {"tflops=200", 200'000, 0, 0, "", 0},
      {"tflops=12.5,vram=40GiB,devices=4", 12'500, 40'960, 4, "", 0},
      {"vram=1.5TiB", 0, 1'572'864, 0, "", 0},
      {"devices=8", 0, 0, 8, "", 0},
      {"sku=medium,count=4", 0, 0, 0, "medium", 4},
      {"count=2,sku=large", 0, 0, 0, "large", 2},
  };
  for (const auto& r : rows) {
    SCOPED_TRACE(r.text);
    Result<v1::QuotaAmount> a = ParseQuotaAmount(r.text);
    ASSERT_TRUE(a.ok()) << a.status().ToString();
    EXPECT_EQ(a->resources().milli_tflops(), r.milli_tflops);
    EXPECT_EQ(a->resources().vram_mib(), r.vram_mib);
    EXPECT_EQ(a->devices(), r.devices);
    EXPECT_EQ(a->sku(), r.sku);
    EXPECT_EQ(a->sku_count(), r.count);
  }
}

TEST(QuotaAmount, ErrorsNameTheKey) {
  const struct {
    const char* text;
    const char* message;
  } rows[] = {
      {"", "empty amount: e.g. tflops=200,vram=40GiB or sku=medium,count=4"},
      {"200",
       "'200' is not key=value (keys: tflops, vram, devices, sku, count; e.g. "
       "tflops=200,vram=40GiB or sku=medium,count=4)"},
      {"tflops=200,", "'' is not key=value"},
      {"gpus=2", "unknown key 'gpus' (keys: tflops, vram, devices, sku, count)"},
      {"tflops=1,tflops=2", "'tflops' given twice"},
      {"tflops=lots", "tflops: invalid TFLOPS 'lots'"},
      {"vram=40GB", "vram: memory size '40GB': use binary units MiB, GiB or TiB"},
      {"devices=0", "devices: number '0' is out of range 1..10000000"},
      {"sku=medium", "sku needs a count, e.g. sku=medium,count=4"},
      {"count=3", "count needs a sku, e.g. sku=medium,count=3"},
      {"sku=medium,count=2,tflops=5", "give either tflops/vram/devices or sku and count, not both"},
  };
  for (const auto& r : rows) {
    SCOPED_TRACE(r.text);
    Result<v1::QuotaAmount> a = ParseQuotaAmount(r.text);
    ASSERT_FALSE(a.ok());
    EXPECT_EQ(a.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(a.status().message().rfind(r.message, 0), 0u) << a.status().message();
  }
}

TEST(QuotaAmount, BuildsTheQuotaAndFormats) {
  Result<ParsedArgs> a =
      ParseFlags(QuotaFlags(), {"acme/research", "gpu", "--guaranteed", "sku=medium,count=4",
                                "--limit", "tflops=4000,devices=8"});
  ASSERT_TRUE(a.ok());
  v1::Quota q;
  ASSERT_TRUE(BuildQuota(*a, &q).ok());
  EXPECT_EQ(q.tenant(), "acme/research");
  EXPECT_EQ(q.pool(), "gpu");
  EXPECT_EQ(q.guaranteed().sku(), "medium");
  EXPECT_EQ(q.limit().resources().milli_tflops(), 4'000'000);
  EXPECT_EQ(q.limit().devices(), 8);

  Result<ParsedArgs> none = ParseFlags(QuotaFlags(), {"acme", "gpu"});
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(BuildQuota(*none, &q).message(), "give --guaranteed, --limit or both");
  Result<ParsedArgs> bad = ParseFlags(QuotaFlags(), {"acme", "gpu", "--limit", "tflops=-1"});
  ASSERT_TRUE(bad.ok());
  EXPECT_EQ(BuildQuota(*bad, &q).message(),
            "--limit: tflops: TFLOPS must be greater than zero, got '-1'");

  v1::QuotaAmount amount;
  EXPECT_EQ(FormatQuotaAmount(amount, "unlimited"), "unlimited");
  amount.mutable_resources()->set_milli_tflops(12'500);
  amount.mutable_resources()->set_vram_mib(40'960);
  amount.set_devices(1);
  EXPECT_EQ(FormatQuotaAmount(amount, "-"), "12.5 TFLOPS, 40GiB VRAM, 1 device");
  amount.set_devices(8);
  amount.mutable_resources()->Clear();
  EXPECT_EQ(FormatQuotaAmount(amount, "-"), "8 devices");
}

TEST(JobState, Parse) {
  v1::JobState s;
  ASSERT_TRUE(ParseJobState("running", &s).ok());
  EXPECT_EQ(s, v1::JOB_STATE_RUNNING);
  ASSERT_TRUE(ParseJobState("JOB_STATE_FAILED", &s).ok());
  EXPECT_EQ(s, v1::JOB_STATE_FAILED);
  EXPECT_FALSE(ParseJobState("unspecified", &s).ok());
  EXPECT_FALSE(ParseJobState("done", &s).ok());
}

TEST(Format, TableAlignsColumnsWithoutTrailingBlanks) {
  Table t({"NAME", "TFLOPS", "STATE"});
  t.AddRow({"a", "12.5/989.5", "READY"});
  t.AddRow({"longer-name", "0/1", ""});
  std::ostringstream out;
  t.Print(out);
  EXPECT_EQ(out.str(),
            "NAME          TFLOPS       STATE\n"
            "a             12.5/989.5   READY\n"
            "longer-name   0/1\n");
}

TEST(Format, FieldsJsonYamlAndTimes) {
  std::ostringstream out;
  PrintFields(out, {{"ID", "42"}, {"State", "RUNNING"}});
  EXPECT_EQ(out.str(), "ID:     42\nState:  RUNNING\n");

  v1::GpuModel m;
  m.set_name("H100-SXM");
  m.set_vram_mib(81920);
  EXPECT_EQ(ToJson(m, false), R"({"name":"H100-SXM","vramMib":"81920"})");
  EXPECT_EQ(ToYaml(m), "name: H100-SXM\nvramMib: 81920");

  google::protobuf::Timestamp ts;
  EXPECT_EQ(FormatTime(ts), "-");
  ts.set_seconds(1'795'362'018);  // 2026-11-22T15:40:18Z
  EXPECT_EQ(FormatTime(ts), "2026-11-22T15:40:18Z");
  EXPECT_EQ(FormatAge(ts, 1'795'362'018 + 59), "59s");
  EXPECT_EQ(FormatAge(ts, 1'795'362'018 + 600), "10m");
  EXPECT_EQ(FormatAge(ts, 1'795'362'018 + 3 * 3600), "3h");
  EXPECT_EQ(FormatAge(ts, 1'795'362'018 + 3 * 86400), "3d");
  EXPECT_EQ(ShortEnumName("JOB_STATE_RUNNING", "JOB_STATE_"), "RUNNING");
}

TEST(ExitCodes, MapGrpcCodes) {
  const struct {
    grpc::StatusCode code;
    int exit;
  } rows[] = {
      {grpc::StatusCode::OK, 0},
      {grpc::StatusCode::INTERNAL, 1},
      {grpc::StatusCode::UNKNOWN, 1},
      {grpc::StatusCode::UNIMPLEMENTED, 1},
      {grpc::StatusCode::NOT_FOUND, 3},
      {grpc::StatusCode::INVALID_ARGUMENT, 4},
      {grpc::StatusCode::FAILED_PRECONDITION, 4},
      {grpc::StatusCode::OUT_OF_RANGE, 4},
      {grpc::StatusCode::RESOURCE_EXHAUSTED, 4},
      {grpc::StatusCode::UNAVAILABLE, 5},
      {grpc::StatusCode::DEADLINE_EXCEEDED, 5},
      {grpc::StatusCode::ABORTED, 5},
      {grpc::StatusCode::PERMISSION_DENIED, 6},
      {grpc::StatusCode::UNAUTHENTICATED, 6},
      {grpc::StatusCode::ALREADY_EXISTS, 7},
  };
  for (const auto& r : rows) EXPECT_EQ(ExitCodeFor(r.code), r.exit) << r.code;
}

// Run() without a server: help and usage paths.
TEST(Run, HelpAndUsage) {
  const struct {
    Words args;
    int exit;
    const char* out_has;
    const char* err_has;
  } rows[] = {
      {{"--help"}, 0, "Usage: gpupoolctl [global flags] COMMAND", ""},
      {{"help", "jobs", "submit"}, 0, "Usage: gpupoolctl jobs submit", ""},
      {{"jobs", "--help"}, 0, "jobs watch", ""},
      {{"pools", "create", "-h"}, 0, "--compute-overcommit RATIO", ""},
      {{"--help"}, 0, "quotas set", ""},
      {{"tenants", "--help"}, 0, "tenants delete", ""},
      {{"help", "quotas", "set"}, 0, "--guaranteed AMOUNT", ""},
      {{"quotas", "list", "-h"}, 0, "--tenant PATH", ""},
      {{"tenants", "create"}, 2, "", "gpupoolctl: USAGE: missing argument: expected PATH"},
      {{"quotas", "get", "acme"}, 2, "", "missing argument: expected TENANT POOL"},
      {{"quotas", "set", "acme", "gpu"}, 2, "", "give --guaranteed, --limit or both"},
      {{"quotas", "set", "acme", "gpu", "--limit", "gpus=2"},
       2,
       "",
       "gpupoolctl: USAGE: --limit: unknown key 'gpus'"},
      {{}, 2, "", "Usage: gpupoolctl [global flags] COMMAND"},
      {{"jobs"}, 2, "", "jobs submit"},
      {{"jobz"}, 2, "", "gpupoolctl: USAGE: unknown command 'jobz'"},
      {{"help", "nope"}, 2, "", "gpupoolctl: USAGE: unknown help topic 'nope'"},
      {{"jobs", "get"}, 2, "", "gpupoolctl: USAGE: missing argument: expected JOB_ID"},
      {{"jobs", "get", "1", "2"}, 2, "", "gpupoolctl: USAGE: unexpected argument '2'"},
      {{"jobs", "list", "--bogus"}, 2, "", "gpupoolctl: USAGE: unknown flag --bogus"},
      {{"-o", "xml", "catalog", "list"}, 2, "", "unknown output format 'xml'"},
      {{"catalog", "list", "--timeout", "soon"}, 2, "", "--timeout: invalid duration 'soon'"},
      {{"jobs", "submit", "--gpus", "1"}, 2, "", "give the task's command after '--'"},
      {{"pools", "update", "p"}, 2, "", "nothing to update"},
      {{"nodes", "list", "--", "x"}, 2, "", "'--' is only used by 'jobs submit'"},
      {{"jobs", "submit", "-f", "/nonexistent/job.yaml"},
       2,
       "",
       "--file: /nonexistent/job.yaml: cannot open file"},
  };
  for (const auto& r : rows) {
    std::string joined;
    for (const auto& w : r.args) joined += w + " ";
    SCOPED_TRACE(joined);
    std::ostringstream out, err;
    EXPECT_EQ(ctl::Run(r.args, Environment{}, out, err), r.exit);
    EXPECT_NE(out.str().find(r.out_has), std::string::npos) << out.str();
    EXPECT_NE(err.str().find(r.err_has), std::string::npos) << err.str();
  }
}

}  // namespace
}  // namespace gpupool::ctl
