// api/convert + api/validate: round trips between proto and domain, and every edge-validation
// message (table-driven: a mutation of a valid request → the exact message it must produce).
#include "api/convert.h"

#include <gmock/gmock.h>
#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include <functional>
#include <tuple>

namespace gpupool::api {
namespace {

using ::testing::HasSubstr;

v1::JobSpec ValidSpec() {
  v1::JobSpec s;
  s.set_tenant("acme/research/alice");
  s.set_pool("gpu-a");
  s.set_priority_class("high");
  s.set_task_count(4);
  s.set_gang(true);
  s.set_preemptible(true);
  s.mutable_max_runtime()->set_seconds(3600);
  s.mutable_max_runtime()->set_nanos(500'000'000);
  (*s.mutable_labels())["team"] = "vision";
  s.set_max_retries(3);
  v1::TaskTemplate* t = s.mutable_template_();
  t->add_command("python");
  t->add_command("train.py");
  (*t->mutable_env())["EPOCHS"] = "10";
  t->mutable_resources()->mutable_fractional()->set_milli_tflops(12'500);
  t->mutable_resources()->mutable_fractional()->set_vram_mib(40'960);
  t->mutable_resources()->set_cpu_milli(4000);
  t->mutable_resources()->set_memory_mib(16384);
  return s;
}

TEST(ConvertJobSpec, ValidSpecConvertsEveryField) {
  Result<JobSpec> r = JobSpecFromProto(ValidSpec());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->tenant, "acme/research/alice");
  EXPECT_EQ(r->pool, "gpu-a");
  EXPECT_EQ(r->priority_class, "high");
  EXPECT_EQ(r->task_count, 4);
  EXPECT_TRUE(r->gang);
  EXPECT_TRUE(r->preemptible);
  EXPECT_EQ(r->max_runtime_ms, 3'600'500);  // 3600 s + 500'000'000 ns
  EXPECT_EQ(r->labels.at("team"), "vision");
  EXPECT_EQ(r->max_retries, 3);
  EXPECT_EQ(r->task_template.command, (std::vector<std::string>{"python", "train.py"}));
  EXPECT_EQ(r->task_template.env.at("EPOCHS"), "10");
  const ResourceRequest& rr = r->task_template.resources;
  EXPECT_EQ(rr.shape, RequestShape::kFractional);
  EXPECT_EQ(rr.fractional, (Resources{12'500, 40'960}));
  EXPECT_EQ(rr.cpu_milli, 4000);
  EXPECT_EQ(rr.memory_mib, 16384);
}

TEST(ConvertTest, ARegistryCredentialNamesASecretEnvEntry) {
  v1::JobSpec s = ValidSpec();
  s.mutable_template_()->set_image("registry.local/private/app:1");
  (*s.mutable_template_()->mutable_secret_env())["PULL"] = "robot:s3cret:with:colons";
  s.mutable_template_()->set_registry_credential("PULL");
  Result<JobSpec> r = JobSpecFromProto(s);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->task_template.registry_credential, "PULL");
  // Shown back by name; the value stays redacted like every secret.
  v1::JobSpec back;
  ToProto(*r, &back);
  EXPECT_EQ(back.template_().registry_credential(), "PULL");
  EXPECT_EQ(back.template_().secret_env().at("PULL"), kRedacted);
  // The error for a bad value names the entry, never its value.
  (*s.mutable_template_()->mutable_secret_env())["PULL"] = "no-colon-secret";
  Result<JobSpec> bad = JobSpecFromProto(s);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message().find("no-colon-secret"), std::string::npos);
}

TEST(ConvertTest, ARegistryCredentialMayNameOneTheTenantKeeps) {
  // Not a secret_env entry: the name of a stored credential, whose existence the service checks
  // (tests/api/service_registry_credentials_test.cc).
  v1::JobSpec s = ValidSpec();
  s.mutable_template_()->set_image("registry.local/private/app:1");
  s.mutable_template_()->set_registry_credential("acme-hub");
  Result<JobSpec> r = JobSpecFromProto(s);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->task_template.registry_credential, "acme-hub");
  EXPECT_TRUE(r->task_template.secret_env.empty());
}

TEST(ConvertTest, AnImagesEntrypointWorkingDirAndVolumesRoundTrip) {
  v1::JobSpec s = ValidSpec();
  v1::TaskTemplate* t = s.mutable_template_();
  t->set_image("registry.local/app:1");
  t->add_entrypoint("/bin/sh");
  t->add_entrypoint("-c");
  t->set_working_dir("/scratch");
  v1::Volume* data = t->add_volumes();
  data->set_mount_path("/data");
  data->set_dataset("imagenet-1k");
  t->add_volumes()->set_mount_path("/scratch");
  Result<JobSpec> r = JobSpecFromProto(s);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->task_template.entrypoint, (std::vector<std::string>{"/bin/sh", "-c"}));
  EXPECT_EQ(r->task_template.working_dir, "/scratch");
  EXPECT_EQ(r->task_template.volumes,
            (std::map<std::string, std::string>{{"/data", "imagenet-1k"}, {"/scratch", ""}}));
  v1::JobSpec back;
  ToProto(*r, &back);
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(s, back)) << back.DebugString();
}

TEST(ConvertTest, PortsRoundTripAndABadOneIsRefusedNamingTheEntry) {
  v1::JobSpec s = ValidSpec();
  v1::Port* http = s.mutable_template_()->add_ports();
  http->set_port(8080);
  http->set_protocol("tcp");
  http->set_name("http");
  v1::Port* dns = s.mutable_template_()->add_ports();
  dns->set_port(53);
  dns->set_protocol("udp");
  Result<JobSpec> r = JobSpecFromProto(s);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->task_template.ports,
            (std::vector<TaskPort>{{"http", 8080, "tcp"}, {"", 53, "udp"}}));
  v1::JobSpec back;
  ToProto(*r, &back);
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(s, back)) << back.DebugString();
  // An empty protocol is tcp.
  dns->clear_protocol();
  dns->set_port(9090);
  ASSERT_TRUE(JobSpecFromProto(s).ok());
  EXPECT_EQ(JobSpecFromProto(s)->task_template.ports[1].protocol, "tcp");
  for (const auto& [port, protocol, want] :
       std::vector<std::tuple<uint32_t, std::string, std::string>>{
           {0, "tcp", "spec.template.ports[1].port: must be 1..65535, got 0"},
           {70000, "tcp", "spec.template.ports[1].port: must be 1..65535, got 70000"},
           {8080, "tcp", "spec.template.ports[1]: 8080/tcp is declared twice"},
           {81, "sctp", "spec.template.ports[1].protocol: want tcp or udp, got 'sctp'"}}) {
    dns->set_port(port);
    dns->set_protocol(protocol);
    Result<JobSpec> bad = JobSpecFromProto(s);
    ASSERT_FALSE(bad.ok()) << port;
    EXPECT_EQ(bad.status().message(), want);
  }
}

TEST(ConvertTest, ANodesImageCacheIsReadWithinBounds) {
  v1::ImageCache cache;
  v1::CachedImage* image = cache.add_images();
  image->set_manifest_digest("sha256:" + std::string(64, 'e'));
  image->add_references("registry.local:5000/team/app:1");
  v1::CachedLayer* layer = image->add_layers();
  layer->set_digest("sha256:" + std::string(64, 'a'));
  layer->set_size(1234);
  Result<std::vector<NodeImage>> ok = NodeImagesFromProto(cache);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  ASSERT_EQ(ok->size(), 1u);
  EXPECT_EQ((*ok)[0].references, (std::vector<std::string>{"registry.local:5000/team/app:1"}));
  EXPECT_EQ((*ok)[0].layers[0], (std::pair<std::string, int64_t>{layer->digest(), 1234}));

  v1::ImageCache bad = cache;
  bad.mutable_images(0)->set_manifest_digest("md5:x");
  EXPECT_EQ(NodeImagesFromProto(bad).status().message(),
            "image_cache.images[0].manifest_digest: must be sha256:<64 lowercase hex digits>");
  bad = cache;
  bad.mutable_images(0)->mutable_layers(0)->set_size(-1);
  EXPECT_EQ(NodeImagesFromProto(bad).status().message(),
            "image_cache.images[0].layers: a layer needs a sha256 digest and a size >= 0");
  bad = cache;
  bad.mutable_images(0)->add_references("Not A Reference");
  EXPECT_EQ(NodeImagesFromProto(bad).status().message(),
            "image_cache.images[0].references: not an image reference");
}

TEST(ConvertJobSpec, RoundTripsEveryShape) {
  std::vector<std::function<void(v1::ResourceRequest*)>> shapes = {
      [](v1::ResourceRequest* r) { r->mutable_fractional()->set_milli_tflops(1); },
      [](v1::ResourceRequest* r) {
        r->mutable_whole_gpus()->set_count(8);
        r->mutable_whole_gpus()->add_models("H100-SXM");
      },
      [](v1::ResourceRequest* r) { r->mutable_mig()->set_profile("1g.10gb"); },
      [](v1::ResourceRequest* r) { r->mutable_sku()->set_name("small"); },
  };
  for (auto& shape : shapes) {
    v1::JobSpec in = ValidSpec();
    v1::ResourceRequest* rr = in.mutable_template_()->mutable_resources();
    rr->Clear();
    shape(rr);
    if (rr->has_fractional()) rr->mutable_fractional()->set_vram_mib(1024);
    Result<JobSpec> domain = JobSpecFromProto(in);
    ASSERT_TRUE(domain.ok()) << domain.status().ToString();
    v1::JobSpec out;
    ToProto(*domain, &out);
    EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(in, out))
        << "in:  " << in.ShortDebugString() << "\nout: " << out.ShortDebugString();
  }
}

struct SpecCase {
  const char* name;
  std::function<void(v1::JobSpec*)> mutate;
  const char* message;  // the exact INVALID_ARGUMENT message
};

class SpecValidation : public ::testing::TestWithParam<SpecCase> {};

TEST_P(SpecValidation, RejectsWithAMessageNamingTheField) {
  v1::JobSpec spec = ValidSpec();
  GetParam().mutate(&spec);
  Result<JobSpec> r = JobSpecFromProto(spec);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(), GetParam().message);
}

auto Frac(int64_t tflops, int64_t vram) {
  return [=](v1::JobSpec* s) {
    auto* f = s->mutable_template_()->mutable_resources()->mutable_fractional();
    f->set_milli_tflops(tflops);
    f->set_vram_mib(vram);
  };
}

INSTANTIATE_TEST_SUITE_P(
    Table, SpecValidation,
    ::testing::Values(
        SpecCase{"TaskCountZero", [](v1::JobSpec* s) { s->set_task_count(0); },
                 "spec.task_count: must be between 1 and 10000, got 0"},
        SpecCase{"TaskCountHuge", [](v1::JobSpec* s) { s->set_task_count(10001); },
                 "spec.task_count: must be between 1 and 10000, got 10001"},
        SpecCase{"NoShape",
                 [](v1::JobSpec* s) { s->mutable_template_()->mutable_resources()->Clear(); },
                 "spec.template.resources: exactly one of fractional, whole_gpus, mig, sku must "
                 "be set"},
        SpecCase{"NoResources", [](v1::JobSpec* s) { s->mutable_template_()->clear_resources(); },
                 "spec.template.resources: exactly one of fractional, whole_gpus, mig, sku must "
                 "be set"},
        SpecCase{"NegativeVram", Frac(1000, -5),
                 "spec.template.resources.fractional.vram_mib: must be > 0, got -5"},
        SpecCase{"ZeroTflops", Frac(0, 1024),
                 "spec.template.resources.fractional.milli_tflops: must be > 0, got 0"},
        SpecCase{"AbsurdTflops", Frac(100'000'001, 1024),
                 "spec.template.resources.fractional.milli_tflops: must be at most 100000000 "
                 "(100,000 TFLOPS), got 100000001"},
        SpecCase{"AbsurdVram", Frac(1000, 16LL * 1024 * 1024 + 1),
                 "spec.template.resources.fractional.vram_mib: must be at most 16777216 (16 TiB), "
                 "got 16777217"},
        SpecCase{"ZeroGpus",
                 [](v1::JobSpec* s) {
                   s->mutable_template_()->mutable_resources()->mutable_whole_gpus()->set_count(0);
                 },
                 "spec.template.resources.whole_gpus.count: must be between 1 and 64, got 0"},
        SpecCase{"EmptyModel",
                 [](v1::JobSpec* s) {
                   auto* w = s->mutable_template_()->mutable_resources()->mutable_whole_gpus();
                   w->set_count(1);
                   w->add_models("");
                 },
                 "spec.template.resources.whole_gpus.models[0]: must be a catalog model name of "
                 "1 to 128 characters"},
        SpecCase{"BadMig",
                 [](v1::JobSpec* s) {
                   s->mutable_template_()->mutable_resources()->mutable_mig()->set_profile("1G 10");
                 },
                 "spec.template.resources.mig.profile: must be a MIG profile name like 1g.10gb, "
                 "got '1G 10'"},
        SpecCase{"EmptySku",
                 [](v1::JobSpec* s) { s->mutable_template_()->mutable_resources()->mutable_sku(); },
                 "spec.template.resources.sku.name: must not be empty"},
        SpecCase{
            "NegativeCpu",
            [](v1::JobSpec* s) { s->mutable_template_()->mutable_resources()->set_cpu_milli(-1); },
            "spec.template.resources.cpu_milli: must be >= 0, got -1"},
        SpecCase{"EmptyCommand", [](v1::JobSpec* s) { s->mutable_template_()->clear_command(); },
                 "spec.template.command: must not be empty (or set image)"},
        SpecCase{"BadImageRepository",
                 [](v1::JobSpec* s) { s->mutable_template_()->set_image("Team/App:1"); },
                 "spec.template.image: image 'Team/App:1': bad repository 'Team/App' (lowercase "
                 "letters, digits and . _ - separators)"},
        SpecCase{"BadImageDigest",
                 [](v1::JobSpec* s) { s->mutable_template_()->set_image("app@sha256:1234"); },
                 "spec.template.image: image 'app@sha256:1234': digest must be "
                 "sha256:<64 lowercase hex digits>"},
        SpecCase{"CredentialWithoutImage",
                 [](v1::JobSpec* s) {
                   (*s->mutable_template_()->mutable_secret_env())["PULL"] = "robot:s3cret";
                   s->mutable_template_()->set_registry_credential("PULL");
                 },
                 "spec.template.registry_credential: needs image (a plain command pulls nothing)"},
        SpecCase{"CredentialNotASecret",
                 [](v1::JobSpec* s) {
                   s->mutable_template_()->set_image("registry.local/app:1");
                   (*s->mutable_template_()->mutable_env())["PULL"] = "robot:s3cret";
                   s->mutable_template_()->set_registry_credential("PULL");
                 },
                 "spec.template.registry_credential: 'PULL' is not the name of a secret_env "
                 "entry, nor a registry credential's name ([a-z0-9._-])"},
        SpecCase{"CredentialNotUserPassword",
                 [](v1::JobSpec* s) {
                   s->mutable_template_()->set_image("registry.local/app:1");
                   (*s->mutable_template_()->mutable_secret_env())["PULL"] = "s3cret-only";
                   s->mutable_template_()->set_registry_credential("PULL");
                 },
                 "spec.template.registry_credential: the value of secret_env 'PULL' must be "
                 "USERNAME:PASSWORD"},
        SpecCase{"EntrypointWithoutImage",
                 [](v1::JobSpec* s) { s->mutable_template_()->add_entrypoint("/bin/sh"); },
                 "spec.template.entrypoint: needs image (a plain command runs on the node's "
                 "root)"},
        SpecCase{"EmptyEntrypointProgram",
                 [](v1::JobSpec* s) {
                   s->mutable_template_()->set_image("registry.local/app:1");
                   s->mutable_template_()->add_entrypoint("");
                 },
                 "spec.template.entrypoint[0]: the program must not be empty"},
        SpecCase{"RelativeWorkingDir",
                 [](v1::JobSpec* s) {
                   s->mutable_template_()->set_image("registry.local/app:1");
                   s->mutable_template_()->set_working_dir("work");
                 },
                 "spec.template.working_dir: 'work' is not an absolute path"},
        SpecCase{"VolumesWithoutImage",
                 [](v1::JobSpec* s) {
                   s->mutable_template_()->add_volumes()->set_mount_path("/data");
                 },
                 "spec.template.volumes: needs image (a plain command runs on the node's root)"},
        SpecCase{"VolumeNotNormalised",
                 [](v1::JobSpec* s) {
                   s->mutable_template_()->set_image("registry.local/app:1");
                   s->mutable_template_()->add_volumes()->set_mount_path("/data");
                   s->mutable_template_()->add_volumes()->set_mount_path("/a/../etc");
                 },
                 "spec.template.volumes[1].mount_path: '/a/../etc' is not normalised (empty, '.' "
                 "or '..' part)"},
        SpecCase{"VolumeOverTheRuntimesMounts",
                 [](v1::JobSpec* s) {
                   s->mutable_template_()->set_image("registry.local/app:1");
                   s->mutable_template_()->add_volumes()->set_mount_path("/proc/sys");
                 },
                 "spec.template.volumes[0].mount_path: '/proc/sys' is under /proc, which the "
                 "runtime mounts"},
        SpecCase{"VolumeAtTheRoot",
                 [](v1::JobSpec* s) {
                   s->mutable_template_()->set_image("registry.local/app:1");
                   s->mutable_template_()->add_volumes()->set_mount_path("/");
                 },
                 "spec.template.volumes[0].mount_path: '/' is the image's root"},
        SpecCase{"VolumeTwice",
                 [](v1::JobSpec* s) {
                   s->mutable_template_()->set_image("registry.local/app:1");
                   s->mutable_template_()->add_volumes()->set_mount_path("/data");
                   auto* v = s->mutable_template_()->add_volumes();
                   v->set_mount_path("/data");
                   v->set_dataset("imagenet");
                 },
                 "spec.template.volumes[1].mount_path: '/data' is mounted twice"},
        SpecCase{"VolumeInsideAnother",
                 [](v1::JobSpec* s) {
                   s->mutable_template_()->set_image("registry.local/app:1");
                   s->mutable_template_()->add_volumes()->set_mount_path("/data/cache");
                   s->mutable_template_()->add_volumes()->set_mount_path("/data-x");
                   s->mutable_template_()->add_volumes()->set_mount_path("/data");
                 },
                 "spec.template.volumes: '/data/cache' is inside volume '/data'"},
        SpecCase{"BadDatasetName",
                 [](v1::JobSpec* s) {
                   s->mutable_template_()->set_image("registry.local/app:1");
                   auto* v = s->mutable_template_()->add_volumes();
                   v->set_mount_path("/data");
                   v->set_dataset("../etc");
                 },
                 "spec.template.volumes[0].dataset: '../etc' is not [a-z0-9][a-z0-9._-]* "
                 "(lowercase letters, digits, and '.', '_', '-' after the first)"},
        SpecCase{"TooManyVolumes",
                 [](v1::JobSpec* s) {
                   s->mutable_template_()->set_image("registry.local/app:1");
                   for (int i = 0; i < 17; ++i) {
                     s->mutable_template_()->add_volumes()->set_mount_path("/v" +
                                                                          std::to_string(i));
                   }
                 },
                 "spec.template.volumes: at most 16 volumes"},
        SpecCase{"EmptyProgram", [](v1::JobSpec* s) { s->mutable_template_()->set_command(0, ""); },
                 "spec.template.command[0]: the program must not be empty"},
        SpecCase{"NoTemplate", [](v1::JobSpec* s) { s->clear_template_(); },
                 "spec.template: must be set (command and resources)"},
        SpecCase{"BadEnvKey",
                 [](v1::JobSpec* s) { (*s->mutable_template_()->mutable_env())["1X"] = "y"; },
                 "spec.template.env: key '1X' must match [A-Za-z_][A-Za-z0-9_]*"},
        SpecCase{"ReservedEnv",
                 [](v1::JobSpec* s) {
                   (*s->mutable_template_()->mutable_env())["CUDA_VISIBLE_DEVICES"] = "0";
                 },
                 "spec.template.env: key 'CUDA_VISIBLE_DEVICES' is set by the scheduler and may "
                 "not be overridden"},
        SpecCase{"EmptyTenant", [](v1::JobSpec* s) { s->set_tenant(""); },
                 "spec.tenant: must not be empty (a tenant path like org/project/user)"},
        SpecCase{"UpperTenant", [](v1::JobSpec* s) { s->set_tenant("acme/Research"); },
                 "spec.tenant: 'acme/Research': segment 2 'Research' must match "
                 "[a-z0-9][a-z0-9-_.]*"},
        SpecCase{"EmptySegment", [](v1::JobSpec* s) { s->set_tenant("acme//alice"); },
                 "spec.tenant: 'acme//alice': segment 2 must not be empty"},
        SpecCase{"DeepTenant", [](v1::JobSpec* s) { s->set_tenant("a/b/c/d"); },
                 "spec.tenant: 'a/b/c/d' has more than 3 segments (org/project/user)"},
        SpecCase{"EmptyPool", [](v1::JobSpec* s) { s->set_pool(""); },
                 "spec.pool: must not be empty"},
        SpecCase{"BadPool", [](v1::JobSpec* s) { s->set_pool("-gpu"); },
                 "spec.pool: '-gpu' must match [a-z0-9][a-z0-9-_.]*"},
        SpecCase{"LongPool", [](v1::JobSpec* s) { s->set_pool(std::string(64, 'a')); },
                 "spec.pool: must be at most 63 characters, got 64"},
        SpecCase{"BadClass", [](v1::JobSpec* s) { s->set_priority_class("High!"); },
                 "spec.priority_class: 'High!' must match [a-z0-9][a-z0-9-_.]*"},
        SpecCase{"NegativeRuntime",
                 [](v1::JobSpec* s) { s->mutable_max_runtime()->set_seconds(-1); },
                 "spec.max_runtime: must be a non-negative duration"},
        SpecCase{"Retries", [](v1::JobSpec* s) { s->set_max_retries(101); },
                 "spec.max_retries: must be between 0 and 100, got 101"},
        SpecCase{"EmptyLabelKey", [](v1::JobSpec* s) { (*s->mutable_labels())[""] = "x"; },
                 "spec.labels: key '' must be 1 to 128 characters"}),
    [](const ::testing::TestParamInfo<SpecCase>& p) { return std::string(p.param.name); });

TEST(ConvertJob, RecordToProtoHasTaskIdsTimestampsAndStates) {
  JobRecord j;
  j.id = 12;
  j.spec = *JobSpecFromProto(ValidSpec());
  j.state = JobState::kRunning;
  j.reason = "1 of 2 tasks running";
  j.submit_us = 1'700'000'000'123'456;
  TaskRecord t;
  t.job_id = 12;
  t.index = 1;
  t.state = TaskState::kRunning;
  t.node = "node-3";
  t.allocations = {{"GPU-0", {12'500, 40'960}}};
  t.attempt = 2;
  t.scheduled_us = 1'700'000'001'000'000;
  t.started_us = 1'700'000'002'500'000;
  j.tasks = {t};
  v1::Job out;
  ToProto(j, &out);
  EXPECT_EQ(out.id(), "12");
  EXPECT_EQ(out.state(), v1::JOB_STATE_RUNNING);
  EXPECT_EQ(out.reason(), "1 of 2 tasks running");
  EXPECT_EQ(out.submit_time().seconds(), 1'700'000'000);
  EXPECT_EQ(out.submit_time().nanos(), 123'456'000);
  EXPECT_FALSE(out.has_finish_time());
  ASSERT_EQ(out.tasks_size(), 1);
  const v1::Task& pt = out.tasks(0);
  EXPECT_EQ(pt.id(), "12.1");
  EXPECT_EQ(pt.state(), v1::TASK_STATE_RUNNING);
  EXPECT_EQ(pt.node(), "node-3");
  EXPECT_EQ(pt.attempt(), 2);
  ASSERT_EQ(pt.allocations_size(), 1);
  EXPECT_EQ(pt.allocations(0).device_id(), "GPU-0");
  EXPECT_EQ(pt.allocations(0).milli_tflops(), 12'500);
  EXPECT_EQ(pt.start_time().seconds(), 1'700'000'002);
  EXPECT_EQ(pt.start_time().nanos(), 500'000'000);
  EXPECT_FALSE(pt.has_finish_time());
}

// The typed "why pending" and the last preemption reach the API next to the human reason.
TEST(ConvertJob, PendingVerdictAndLastPreemption) {
  TaskRecord t;
  t.job_id = 7;
  t.index = 0;
  t.state = TaskState::kPending;
  t.attempt = 1;
  t.pending = {PendingCode::kNoCapacity, "", {{"vram", 3}, {"cpu", 1}}};
  t.preempted_by = Preemption{9, 2, PreemptRule::kReclaim, true};
  v1::Task out;
  ToProto(t, &out);
  ASSERT_TRUE(out.has_pending());
  EXPECT_EQ(out.pending().code(), v1::PendingReason::NO_CAPACITY);
  EXPECT_EQ(out.pending().nodes_by_reason().at("vram"), 3);
  EXPECT_EQ(out.pending().nodes_by_reason().at("cpu"), 1);
  EXPECT_EQ(out.last_preemption().by_task(), "9.2");
  EXPECT_EQ(out.last_preemption().rule(), "reclaim");
  // Running: no pending verdict, the last preemption stays.
  t.state = TaskState::kRunning;
  v1::Task running;
  ToProto(t, &running);
  EXPECT_FALSE(running.has_pending());
  EXPECT_TRUE(running.has_last_preemption());
}

// A SCHEDULED task whose node reported its pull for this attempt shows PULLING with the bytes;
// one of an earlier attempt shows plain SCHEDULED.
TEST(ConvertJob, AScheduledTaskWithAPullShowsPulling) {
  TaskRecord t;
  t.job_id = 7;
  t.state = TaskState::kScheduled;
  t.node = "node-1";
  t.attempt = 1;
  t.pull = {1, "registry.local/app:1", 3 << 20, 8 << 20};
  v1::Task out;
  ToProto(t, &out);
  EXPECT_EQ(out.state(), v1::TASK_STATE_PULLING);
  EXPECT_EQ(out.pull().image(), "registry.local/app:1");
  EXPECT_EQ(out.pull().bytes_done(), 3 << 20);
  EXPECT_EQ(out.pull().bytes_total(), 8 << 20);
  t.pull.attempt = 0;
  v1::Task stale;
  ToProto(t, &stale);
  EXPECT_EQ(stale.state(), v1::TASK_STATE_SCHEDULED);
  EXPECT_FALSE(stale.has_pull());
}

TEST(ConvertJob, EnumsMapOneToOne) {
  for (int s = 1; s <= 6; ++s) {
    auto js = static_cast<JobState>(s);
    EXPECT_EQ(FromProto(ToProto(js)), js);
  }
  for (int s = 1; s <= 8; ++s) {
    auto ts = static_cast<TaskState>(s);
    EXPECT_EQ(FromProto(ToProto(ts)), ts);
  }
  EXPECT_EQ(FromProto(v1::JOB_STATE_UNSPECIFIED), std::nullopt);
  EXPECT_EQ(FromProto(static_cast<v1::JobState>(42)), std::nullopt);
}

TEST(ListJobsFilter, DefaultsAndPageToken) {
  v1::ListJobsRequest req;
  Result<JobFilter> f = JobFilterFromProto(req);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->limit, 100);
  EXPECT_EQ(f->after_id, 0);
  req.set_page_size(1000);
  req.set_page_token(EncodePageToken(41));
  req.set_state(v1::JOB_STATE_SUCCEEDED);
  req.set_tenant("acme");
  f = JobFilterFromProto(req);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->limit, 1000);
  EXPECT_EQ(f->after_id, 41);
  EXPECT_EQ(f->state, JobState::kSucceeded);
  EXPECT_EQ(f->tenant, "acme");
  EXPECT_EQ(EncodePageToken(0), "");
}

TEST(ListJobsFilter, RejectsBadInput) {
  struct Case {
    std::function<void(v1::ListJobsRequest*)> mutate;
    const char* message;
  };
  std::vector<Case> cases = {
      {[](auto* r) { r->set_page_size(1001); }, "page_size: must be between 0 and 1000, got 1001"},
      {[](auto* r) { r->set_page_size(-1); }, "page_size: must be between 0 and 1000, got -1"},
      {[](auto* r) { r->set_page_token("garbage!"); },
       "page_token: malformed page token; pass next_page_token from a previous response"},
      {[](auto* r) { r->set_page_token("YWZ0ZXI6LTE"); },  // "after:-1"
       "page_token: malformed page token; pass next_page_token from a previous response"},
      {[](auto* r) { r->set_state(static_cast<v1::JobState>(9)); }, "state: unknown value 9"},
      {[](auto* r) { r->set_tenant("ACME"); },
       "tenant: 'ACME': segment 1 'ACME' must match [a-z0-9][a-z0-9-_.]*"},
  };
  for (const Case& c : cases) {
    v1::ListJobsRequest req;
    c.mutate(&req);
    Result<JobFilter> f = JobFilterFromProto(req);
    ASSERT_FALSE(f.ok()) << c.message;
    EXPECT_EQ(f.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(f.status().message(), c.message);
  }
}

TEST(Validate, IdsAndTenantTree) {
  EXPECT_EQ(*JobIdFromString("17"), 17);
  EXPECT_EQ(JobIdFromString("x").status().message(), "job_id: must be a positive integer, got 'x'");
  EXPECT_EQ(JobIdFromString("-3").status().message(),
            "job_id: must be a positive integer, got '-3'");
  EXPECT_EQ(JobIdFromString("").status().message(), "job_id: must not be empty");
  EXPECT_TRUE(ValidateTaskId("12.0").ok());
  EXPECT_EQ(ValidateTaskId("12").message(),
            "task_id: must look like <job>.<index>, e.g. 12.0, got '12'");
  EXPECT_TRUE(TenantWithin("acme/research/alice", "acme"));
  EXPECT_TRUE(TenantWithin("acme/research", "acme/research"));
  EXPECT_FALSE(TenantWithin("acme/researchers", "acme/research"));  // segments, not strings
  EXPECT_FALSE(TenantWithin("acme", "acme/research"));
  EXPECT_FALSE(TenantWithin("acme", ""));
}

// ---- Pools ----

v1::Pool ValidPool() {
  v1::Pool p;
  p.set_name("gpu-a");
  p.set_visibility(v1::VISIBILITY_PRIVATE);
  p.add_allowed_tenants("acme/research");
  p.set_placement_strategy("best-fit");
  p.set_compute_overcommit(1.5);
  p.set_memory_overcommit(2.0);
  p.set_sharing_mode(v1::SHARING_MODE_TIME_SLICED);
  p.set_time_slice_replicas(4);
  p.add_required_capabilities("sandbox");
  p.add_required_capabilities("vram_scrub");
  p.set_mig_relayout(v1::MIG_RELAYOUT_IDLE);
  return p;
}

// A new pool requires vram_cap, compute_share and sandbox unless its creator names a requirement;
// "none" alone is no requirement; an update's empty list or "none" clears it.
TEST(ConvertPool, ANewPoolGetsTheDefaultRequirementAndNoneMeansNone) {
  v1::Pool p;
  p.set_name("p");
  Result<PoolRecord> r = PoolFromProto(p);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->required_capabilities,
            (std::vector<std::string>{"compute_share", "sandbox", "vram_cap"}));
  p.add_required_capabilities("none");
  r = PoolFromProto(p);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->required_capabilities.empty());
  p.add_required_capabilities("sandbox");
  r = PoolFromProto(p);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("required_capabilities"), std::string::npos)
      << r.status().message();
  EXPECT_NE(r.status().message().find("'none' stands alone"), std::string::npos)
      << r.status().message();

  v1::UpdatePoolRequest u;
  u.mutable_pool()->set_name("p");
  u.mutable_pool()->add_required_capabilities("none");
  u.mutable_update_mask()->add_paths("required_capabilities");
  Result<PoolPatch> patch = PoolPatchFromProto(u);
  ASSERT_TRUE(patch.ok()) << patch.status().ToString();
  ASSERT_TRUE(patch->required_capabilities.has_value());
  EXPECT_TRUE(patch->required_capabilities->empty());
  u.mutable_pool()->clear_required_capabilities();
  patch = PoolPatchFromProto(u);
  ASSERT_TRUE(patch.ok()) << patch.status().ToString();
  ASSERT_TRUE(patch->required_capabilities.has_value());
  EXPECT_TRUE(patch->required_capabilities->empty());
}

TEST(ConvertPool, RoundTrip) {
  Result<PoolRecord> r = PoolFromProto(ValidPool());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->compute_overcommit.permille, 1500);
  EXPECT_EQ(r->memory_overcommit.permille, 2000);
  EXPECT_EQ(r->visibility, Visibility::kPrivate);
  EXPECT_EQ(r->sharing_mode, SharingMode::kTimeSliced);
  v1::Pool out;
  ToProto(*r, &out);
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(ValidPool(), out))
      << out.ShortDebugString();
}

TEST(ConvertPool, DefaultsForUnsetFields) {
  v1::Pool p;
  p.set_name("p");
  Result<PoolRecord> r = PoolFromProto(p);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->visibility, Visibility::kPublic);
  EXPECT_EQ(r->sharing_mode, SharingMode::kFractional);
  EXPECT_EQ(r->compute_overcommit.permille, 1000);  // 0 means 1.0
  EXPECT_EQ(r->placement_strategy, "");             // the server default
}

TEST(ConvertPool, RejectsWithAMessageNamingTheField) {
  struct Case {
    std::function<void(v1::Pool*)> mutate;
    std::string message;
  };
  std::vector<Case> cases = {
      {[](auto* p) { p->set_name("Bad Name"); },
       "pool.name: 'Bad Name' must match [a-z0-9][a-z0-9-_.]*"},
      {[](auto* p) { p->set_compute_overcommit(0.5); },
       "pool.compute_overcommit: must be between 1.0 and 10.0 (0 means 1.0), got 0.5"},
      {[](auto* p) { p->set_memory_overcommit(10.5); },
       "pool.memory_overcommit: must be between 1.0 and 10.0 (0 means 1.0), got 10.5"},
      {[](auto* p) { p->set_time_slice_replicas(1); },
       "pool.time_slice_replicas: must be between 2 and 64, got 1"},
      {[](auto* p) { p->set_time_slice_replicas(65); },
       "pool.time_slice_replicas: must be between 2 and 64, got 65"},
      {[](auto* p) { p->set_sharing_mode(v1::SHARING_MODE_EXCLUSIVE); },
       "pool.time_slice_replicas: only allowed with sharing_mode SHARING_MODE_TIME_SLICED, got 4"},
      {[](auto* p) {
         p->set_sharing_mode(v1::SHARING_MODE_EXCLUSIVE);
         p->set_time_slice_replicas(0);
         p->set_mps_tenant_isolation(true);
       },
       "pool.mps_tenant_isolation: only allowed with sharing_mode SHARING_MODE_FRACTIONAL or "
       "SHARING_MODE_TIME_SLICED"},
      {[](auto* p) {
         p->set_sharing_mode(v1::SHARING_MODE_EXCLUSIVE);
         p->set_time_slice_replicas(0);
         p->set_compute_fair(true);
       },
       "pool.compute_fair: only allowed with sharing_mode SHARING_MODE_FRACTIONAL or "
       "SHARING_MODE_TIME_SLICED"},
      {[](auto* p) { p->set_sharing_mode(static_cast<v1::SharingMode>(7)); },
       "pool.sharing_mode: unknown value 7; use SHARING_MODE_EXCLUSIVE, SHARING_MODE_FRACTIONAL "
       "or SHARING_MODE_TIME_SLICED"},
      {[](auto* p) { p->set_network(static_cast<v1::NetworkMode>(9)); },
       "pool.network: unknown value 9; use NETWORK_MODE_NONE, NETWORK_MODE_ISOLATED or "
       "NETWORK_MODE_HOST"},
      {[](auto* p) { p->set_visibility(static_cast<v1::Visibility>(5)); },
       "pool.visibility: unknown value 5; use VISIBILITY_PUBLIC or VISIBILITY_PRIVATE"},
      {[](auto* p) { p->set_visibility(v1::VISIBILITY_PUBLIC); },
       "pool.allowed_tenants: only allowed with visibility VISIBILITY_PRIVATE"},
      {[](auto* p) { p->add_allowed_tenants("Nope"); },
       "pool.allowed_tenants[1]: 'Nope': segment 1 'Nope' must match [a-z0-9][a-z0-9-_.]*"},
  };
  for (const Case& c : cases) {
    v1::Pool p = ValidPool();
    c.mutate(&p);
    Result<PoolRecord> r = PoolFromProto(p);
    ASSERT_FALSE(r.ok()) << c.message;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(r.status().message(), c.message);
  }
}

// Pinned images (docs/images.md, "Prepull and pins"): stored canonical in the order given, shown
// back, cleared only through the mask; a bad reference, a duplicate (in any spelling) or too many
// are refused naming the entry.
TEST(ConvertPool, PinnedImagesAreCanonicalAndCheckedEntryByEntry) {
  v1::Pool in = ValidPool();
  in.add_pinned_images("busybox");
  in.add_pinned_images("127.0.0.1:5000/ml/app:2");
  Result<PoolRecord> r = PoolFromProto(in);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->pinned_images, (std::vector<std::string>{"docker.io/library/busybox:latest",
                                                        "127.0.0.1:5000/ml/app:2"}));
  v1::Pool shown;
  ToProto(*r, &shown);
  ASSERT_EQ(shown.pinned_images_size(), 2);
  EXPECT_EQ(shown.pinned_images(0), "docker.io/library/busybox:latest");

  v1::Pool bad = ValidPool();
  bad.add_pinned_images("busybox");
  bad.add_pinned_images("Not An Image");
  EXPECT_THAT(PoolFromProto(bad).status().message(), HasSubstr("pool.pinned_images[1]: "));
  v1::Pool twice = ValidPool();
  twice.add_pinned_images("busybox:latest");
  twice.add_pinned_images("docker.io/library/busybox");
  EXPECT_EQ(PoolFromProto(twice).status().message(),
            "pool.pinned_images[1]: 'docker.io/library/busybox' is pinned twice");
  v1::Pool many = ValidPool();
  for (int i = 0; i <= kMaxPinnedImages; ++i) many.add_pinned_images("img" + std::to_string(i));
  EXPECT_EQ(PoolFromProto(many).status().message(),
            "pool.pinned_images: 17 images; a pool pins at most 16");

  // Update: set without a mask; an empty list clears them only when the mask names the field.
  PoolRecord p = *r;
  v1::UpdatePoolRequest set;
  set.mutable_pool()->set_name("gpu-a");
  set.mutable_pool()->add_pinned_images("alpine:3.20");
  ASSERT_TRUE(ApplyPoolPatch(*PoolPatchFromProto(set), &p).ok());
  EXPECT_EQ(p.pinned_images, std::vector<std::string>{"docker.io/library/alpine:3.20"});
  v1::UpdatePoolRequest other;
  other.mutable_pool()->set_name("gpu-a");
  other.mutable_pool()->set_compute_overcommit(2.0);
  ASSERT_TRUE(ApplyPoolPatch(*PoolPatchFromProto(other), &p).ok());
  EXPECT_EQ(p.pinned_images.size(), 1u) << "not given, not changed";
  v1::UpdatePoolRequest clear;
  clear.mutable_pool()->set_name("gpu-a");
  clear.mutable_update_mask()->add_paths("pinned_images");
  ASSERT_TRUE(ApplyPoolPatch(*PoolPatchFromProto(clear), &p).ok());
  EXPECT_TRUE(p.pinned_images.empty());
  v1::UpdatePoolRequest wrong;
  wrong.mutable_pool()->set_name("gpu-a");
  wrong.mutable_pool()->add_pinned_images("UPPER/case");
  EXPECT_THAT(PoolPatchFromProto(wrong).status().message(), HasSubstr("pool.pinned_images[0]: "));
}

TEST(ConvertPool, UnknownStrategyListsTheKnownOnes) {
  v1::Pool p = ValidPool();
  p.set_placement_strategy("tetris");
  Result<PoolRecord> r = PoolFromProto(p);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("pool.placement_strategy: "));
  EXPECT_THAT(r.status().message(), HasSubstr("tetris"));
  EXPECT_THAT(r.status().message(), HasSubstr("first-fit"));
}

TEST(ConvertPool, PatchWithMaskAndWithout) {
  PoolRecord current = *PoolFromProto(ValidPool());
  v1::UpdatePoolRequest req;
  req.mutable_pool()->set_name("gpu-a");
  req.mutable_pool()->set_compute_overcommit(3.0);
  req.mutable_pool()->set_placement_strategy("spread");
  req.mutable_update_mask()->add_paths("compute_overcommit");
  Result<PoolPatch> patch = PoolPatchFromProto(req);
  ASSERT_TRUE(patch.ok()) << patch.status().ToString();
  PoolRecord p = current;
  ASSERT_TRUE(ApplyPoolPatch(*patch, &p).ok());
  EXPECT_EQ(p.compute_overcommit.permille, 3000);
  EXPECT_EQ(p.placement_strategy, "best-fit");  // not in the mask

  req.clear_update_mask();  // every set field
  patch = PoolPatchFromProto(req);
  ASSERT_TRUE(patch.ok());
  p = current;
  ASSERT_TRUE(ApplyPoolPatch(*patch, &p).ok());
  EXPECT_EQ(p.placement_strategy, "spread");

  // Leaving time-sliced clears the replicas; going public clears the access list.
  v1::UpdatePoolRequest mode;
  mode.mutable_pool()->set_name("gpu-a");
  mode.mutable_pool()->set_sharing_mode(v1::SHARING_MODE_EXCLUSIVE);
  mode.mutable_pool()->set_visibility(v1::VISIBILITY_PUBLIC);
  p = current;
  ASSERT_TRUE(ApplyPoolPatch(*PoolPatchFromProto(mode), &p).ok());
  EXPECT_EQ(p.time_slice_replicas, 0);
  EXPECT_TRUE(p.allowed_tenants.empty());

  // MPS isolation: set through the mask (false needs it: an unset bool is "not given"); going
  // exclusive clears it.
  v1::UpdatePoolRequest iso;
  iso.mutable_pool()->set_name("gpu-a");
  iso.mutable_pool()->set_mps_tenant_isolation(true);
  p = current;
  ASSERT_TRUE(ApplyPoolPatch(*PoolPatchFromProto(iso), &p).ok());
  EXPECT_TRUE(p.mps_tenant_isolation);
  v1::UpdatePoolRequest off;
  off.mutable_pool()->set_name("gpu-a");
  off.mutable_update_mask()->add_paths("mps_tenant_isolation");
  PoolRecord q = p;
  ASSERT_TRUE(ApplyPoolPatch(*PoolPatchFromProto(off), &q).ok());
  EXPECT_FALSE(q.mps_tenant_isolation);
  ASSERT_TRUE(ApplyPoolPatch(*PoolPatchFromProto(mode), &p).ok());
  EXPECT_FALSE(p.mps_tenant_isolation);

  // Fair compute sharing: the same rules, and shown back.
  v1::UpdatePoolRequest fair;
  fair.mutable_pool()->set_name("gpu-a");
  fair.mutable_pool()->set_compute_fair(true);
  p = current;
  ASSERT_TRUE(ApplyPoolPatch(*PoolPatchFromProto(fair), &p).ok());
  EXPECT_TRUE(p.compute_fair);
  v1::Pool fair_shown;
  ToProto(p, &fair_shown);
  EXPECT_TRUE(fair_shown.compute_fair());
  v1::UpdatePoolRequest strict;
  strict.mutable_pool()->set_name("gpu-a");
  strict.mutable_update_mask()->add_paths("compute_fair");
  q = p;
  ASSERT_TRUE(ApplyPoolPatch(*PoolPatchFromProto(strict), &q).ok());
  EXPECT_FALSE(q.compute_fair);
  ASSERT_TRUE(ApplyPoolPatch(*PoolPatchFromProto(mode), &p).ok());
  EXPECT_FALSE(p.compute_fair);

  // Network: set, shown back, and back to each node's default through the mask.
  v1::UpdatePoolRequest net;
  net.mutable_pool()->set_name("gpu-a");
  net.mutable_pool()->set_network(v1::NETWORK_MODE_ISOLATED);
  ASSERT_TRUE(ApplyPoolPatch(*PoolPatchFromProto(net), &p).ok());
  EXPECT_EQ(p.network, TaskNetwork::kIsolated);
  v1::Pool shown;
  ToProto(p, &shown);
  EXPECT_EQ(shown.network(), v1::NETWORK_MODE_ISOLATED);
  v1::UpdatePoolRequest back;
  back.mutable_pool()->set_name("gpu-a");
  back.mutable_update_mask()->add_paths("network");
  ASSERT_TRUE(ApplyPoolPatch(*PoolPatchFromProto(back), &p).ok());
  EXPECT_EQ(p.network, TaskNetwork::kNodeDefault);

  req.mutable_update_mask()->add_paths("name");
  EXPECT_EQ(PoolPatchFromProto(req).status().message(),
            "update_mask: 'name' is not a mutable pool field");

  v1::UpdatePoolRequest bad;
  bad.mutable_pool()->set_name("gpu-a");
  bad.mutable_pool()->set_sharing_mode(v1::SHARING_MODE_TIME_SLICED);
  p = *PoolFromProto([] {
    v1::Pool x;
    x.set_name("gpu-a");
    return x;
  }());
  Status s = ApplyPoolPatch(*PoolPatchFromProto(bad), &p);
  EXPECT_EQ(s.message(), "pool.time_slice_replicas: must be between 2 and 64, got 0");
}

TEST(ConvertPool, ViewCarriesCapacity) {
  PoolView v;
  v.pool = *PoolFromProto(ValidPool());
  v.capacity.physical = {989'000, 81'920};
  v.capacity.offered = {1'483'500, 163'840};
  v.capacity.allocated = {100'000, 1024};
  v.capacity.devices = 1;
  v.capacity.nodes = 1;
  v1::Pool out;
  ToProto(v, &out);
  EXPECT_EQ(out.capacity().offered().milli_tflops(), 1'483'500);
  EXPECT_EQ(out.capacity().allocated().vram_mib(), 1024);
  EXPECT_EQ(out.capacity().nodes(), 1);
}

// ---- Agents ----

v1::Register ValidRegister() {
  v1::Register r;
  r.set_node_name("node-1");
  r.set_pool("gpu-a");
  r.set_cpu_milli(64'000);
  r.set_memory_mib(512 * 1024);
  r.set_spill_budget_mib(1024);
  (*r.mutable_labels())["zone"] = "a";
  for (int i = 0; i < 2; ++i) {
    v1::DeviceInfo* d = r.add_devices();
    d->set_uuid("GPU-" + std::to_string(i));
    d->set_model("H100-SXM");
    d->set_index(i);
    d->set_vram_mib(81'920);
    d->set_milli_tflops(989'000);
    d->set_healthy(true);
    d->set_numa_node(i);
  }
  v1::DeviceLink* l = r.add_links();
  l->set_a(0);
  l->set_b(1);
  l->set_kind(v1::LINK_KIND_NVLINK);
  l->set_bandwidth_gbps(900);
  v1::RunningTask* t = r.add_running_tasks();
  t->set_task_id("7.0");
  t->set_attempt(1);
  return r;
}

TEST(ConvertAgent, Register) {
  Result<AgentRegistration> r = RegistrationFromProto(ValidRegister());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const NodeRecord& n = r->node;
  EXPECT_EQ(n.name, "node-1");
  EXPECT_EQ(n.pool, "gpu-a");
  EXPECT_EQ(n.spill_budget_mib, 1024);
  ASSERT_EQ(n.devices.size(), 2u);
  EXPECT_EQ(n.devices[1].id, "GPU-1");
  EXPECT_EQ(n.devices[1].physical, (Resources{989'000, 81'920}));
  EXPECT_EQ(n.devices[1].numa_node, 1);
  ASSERT_EQ(n.links.size(), 1u);
  EXPECT_EQ(n.links[0].kind, LinkKind::kNvlink);
  EXPECT_EQ(n.links[0].bandwidth_gbps, 900);
  ASSERT_EQ(r->running.size(), 1u);
  EXPECT_EQ(r->running[0].task_id, "7.0");
  EXPECT_EQ(r->running[0].attempt, 1);
}

TEST(ConvertAgent, RegisterRejects) {
  struct Case {
    std::function<void(v1::Register*)> mutate;
    std::string message;
  };
  std::vector<Case> cases = {
      {[](auto* r) { r->set_node_name(""); }, "register.node_name: must not be empty"},
      {[](auto* r) { r->mutable_devices(1)->set_uuid("GPU-0"); },
       "register.devices[1].uuid: duplicate device 'GPU-0'"},
      {[](auto* r) { r->mutable_devices(0)->set_vram_mib(-1); },
       "register.devices[0].vram_mib: must be between 0 and 16777216, got -1"},
      {[](auto* r) { r->mutable_links(0)->set_b(5); },
       "register.links[0]: links devices 0 and 5, which are not both reported"},
      {[](auto* r) { r->mutable_running_tasks(0)->set_task_id("x"); },
       "register.running_tasks[0].task_id: must look like <job>.<index>, e.g. 12.0, got 'x'"},
  };
  for (const Case& c : cases) {
    v1::Register r = ValidRegister();
    c.mutate(&r);
    Result<AgentRegistration> out = RegistrationFromProto(r);
    ASSERT_FALSE(out.ok()) << c.message;
    EXPECT_EQ(out.status().message(), c.message);
  }
}

TEST(ConvertAgent, TaskUpdateAndCommands) {
  v1::TaskUpdate u;
  u.set_task_id("7.2");
  u.set_attempt(1);
  u.set_state(v1::TASK_STATE_FAILED);
  u.set_exit_code(137);
  u.set_signal(9);
  u.set_oom(true);
  u.set_reason("OOM killed");
  Result<TaskReport> r = TaskReportFromProto("node-1", u);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->node, "node-1");
  EXPECT_EQ(r->state, TaskState::kFailed);
  EXPECT_EQ(r->exit_code, 137);
  EXPECT_TRUE(r->oom);
  u.set_state(v1::TASK_STATE_SCHEDULED);
  EXPECT_EQ(TaskReportFromProto("node-1", u).status().message(),
            "task_update.state: must be RUNNING, SUCCEEDED, FAILED, CANCELLED, PREEMPTED or "
            "PULLING, got 2");
  // PULLING: progress, carried as a SCHEDULED report with its bytes; nonsense bytes refused.
  u.set_state(v1::TASK_STATE_PULLING);
  u.mutable_pull()->set_image("registry.local/app:1");
  u.mutable_pull()->set_bytes_done(10);
  u.mutable_pull()->set_bytes_total(40);
  Result<TaskReport> pulling = TaskReportFromProto("node-1", u);
  ASSERT_TRUE(pulling.ok()) << pulling.status().ToString();
  EXPECT_EQ(pulling->state, TaskState::kScheduled);
  EXPECT_EQ(pulling->pull.image, "registry.local/app:1");
  EXPECT_EQ(pulling->pull.bytes_done, 10);
  EXPECT_EQ(pulling->pull.bytes_total, 40);
  u.mutable_pull()->set_bytes_done(41);
  EXPECT_EQ(TaskReportFromProto("node-1", u).status().message(),
            "task_update.pull: bytes must satisfy 0 <= done <= total, got 41 of 40");
  u.mutable_pull()->set_bytes_done(-1);
  EXPECT_FALSE(TaskReportFromProto("node-1", u).ok());
  u.mutable_pull()->set_bytes_done(1);
  u.mutable_pull()->set_image(std::string(1025, 'a'));
  EXPECT_EQ(TaskReportFromProto("node-1", u).status().message(),
            "task_update.pull.image: must be at most 1024 bytes");

  StartTaskCommand cmd;
  cmd.task_id = "7.2";
  cmd.job_id = 7;
  cmd.tenant = "acme";
  cmd.attempt = 1;
  cmd.argv = {"sleep", "1"};
  cmd.env = {{"A", "b"}};
  cmd.devices = {{"GPU-0", 500'000, 40'960, 50}};
  cmd.max_runtime_ms = 1000;
  cmd.epoch = 3;
  cmd.image = "registry.local/private/app:1";
  cmd.registry_credential_env = "A";
  cmd.entrypoint = {"/bin/sh", "-c"};
  cmd.working_dir = "/scratch";
  cmd.volumes = {{"/data", "imagenet"}, {"/scratch", ""}};
  v1::StartTask st;
  ToProto(cmd, &st);
  EXPECT_EQ(st.entrypoint_size(), 2);
  EXPECT_EQ(st.working_dir(), "/scratch");
  ASSERT_EQ(st.volumes_size(), 2);
  EXPECT_EQ(st.volumes(0).mount_path(), "/data");
  EXPECT_EQ(st.volumes(0).dataset(), "imagenet");
  EXPECT_EQ(st.volumes(1).mount_path(), "/scratch");
  EXPECT_EQ(st.volumes(1).dataset(), "");
  EXPECT_EQ(st.image(), "registry.local/private/app:1");
  EXPECT_EQ(st.registry_credential_env(), "A");
  EXPECT_EQ(st.job_id(), "7");
  EXPECT_EQ(st.argv_size(), 2);
  EXPECT_EQ(st.env().at("A"), "b");
  EXPECT_EQ(st.devices(0).thread_percentage(), 50);
  EXPECT_EQ(st.epoch(), 3);

  StopTaskCommand stop{"7.2", 1, 10'000, "cancelled", 3};
  v1::StopTask sp;
  ToProto(stop, &sp);
  EXPECT_EQ(sp.grace_period_ms(), 10'000);
  EXPECT_EQ(sp.reason(), "cancelled");
}

}  // namespace
}  // namespace gpupool::api
