// Agent config and the simulated / NVML backends: YAML parsing with file:line errors, the
// catalog, deterministic devices and links, metrics that follow load, and a clear error when
// libnvidia-ml is absent.
#include "agent/config.h"

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <utility>
#include <vector>

#include "agent/driver_files.h"
#include "agent/nvml_backend.h"
#include "agent/sim_backend.h"

namespace gpupool::agent {
namespace {

constexpr const char* kFull = R"(scheduler: 10.0.0.1:7070
node_name: gpu-a1
pool: public
labels: {zone: a, rack: "12"}
token: s3cret
cpu_milli: 96000
memory_mib: 1048576
spill_budget_mib: 65536
backend: simulated
data_dir: /tmp/agent-a1
heartbeat_interval_ms: 500
stop_grace_period_ms: 2000
reconnect: {initial_ms: 50, max_ms: 1000, jitter: 0.1}
gpus:
  - {model: H100-SXM, count: 8, mig: {"0": [3g.40gb, 2g.20gb, 2g.20gb]}}
topology: nvlink-all
)";

// `nvml:` (backend nvml): the driver's library and paths; defaults are the driver's own.
TEST(AgentConfigTest, ParsesTheNvmlSection) {
  auto d = ParseAgentConfig("backend: nvml\n", "agent.yaml");
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->nvml.library, "libnvidia-ml.so.1");
  EXPECT_EQ(d->nvml.dev_dir, "/dev");
  EXPECT_EQ(d->nvml.proc_dir, "/proc/driver/nvidia");
  auto c = ParseAgentConfig(
      "backend: nvml\nnvml:\n  library: /opt/fake/libnvml.so\n  dev_dir: /run/fake/dev\n"
      "  proc_dir: /run/fake/proc\n",
      "agent.yaml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->nvml.library, "/opt/fake/libnvml.so");
  EXPECT_EQ(c->nvml.dev_dir, "/run/fake/dev");
  EXPECT_EQ(c->nvml.proc_dir, "/run/fake/proc");
}

TEST(AgentConfigTest, ParsesEveryKey) {
  auto c = ParseAgentConfig(kFull, "agent.yaml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->scheduler, "10.0.0.1:7070");
  EXPECT_EQ(c->node_name, "gpu-a1");
  EXPECT_EQ(c->pool, "public");
  EXPECT_EQ(c->labels, (std::map<std::string, std::string>{{"zone", "a"}, {"rack", "12"}}));
  EXPECT_EQ(c->token, "s3cret");
  EXPECT_EQ(c->cpu_milli, 96000);
  EXPECT_EQ(c->memory_mib, 1048576);
  EXPECT_EQ(c->spill_budget_mib, 65536);
  EXPECT_EQ(c->data_dir, "/tmp/agent-a1");
  EXPECT_EQ(c->heartbeat_interval_ms, 500);
  EXPECT_EQ(c->stop_grace_period_ms, 2000);
  EXPECT_EQ(c->reconnect.initial_ms, 50);
  EXPECT_EQ(c->reconnect.max_ms, 1000);
  ASSERT_EQ(c->sim.gpus.size(), 1u);
  EXPECT_EQ(c->sim.gpus[0].count, 8);
  EXPECT_EQ(c->sim.gpus[0].mig.at(0).size(), 3u);
  EXPECT_EQ(c->sim.topology, Topology::kNvlinkAll);
  EXPECT_TRUE(ValidateAgentConfig(&*c).ok());
}

struct BadCase {
  const char* yaml;
  const char* error;  // the whole message
};

class AgentConfigErrorTest : public ::testing::TestWithParam<BadCase> {};

TEST_P(AgentConfigErrorTest, NamesFileKeyAndLine) {
  auto c = ParseAgentConfig(GetParam().yaml, "agent.yaml");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(), GetParam().error);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, AgentConfigErrorTest,
    ::testing::Values(
        BadCase{"pool: a\nschedular: x\n",
                "agent.yaml:2:1: schedular: unknown key (see docs/agent.md for the reference)"},
        BadCase{"gpus:\n  - {model: H100-SXM, count: eight}\n",
                "agent.yaml:2:30: gpus[0].count: must be an integer, got 'eight'"},
        BadCase{"gpus:\n  - model: H100-SXM\n    count: 0\n",
                "agent.yaml:3:12: gpus[0].count: must be ≥ 1, got 0"},
        BadCase{"gpus:\n  - {model: B300}\n",
                "agent.yaml:2:13: gpus[0].model: unknown model 'B300' (known: H200, H100-SXM, "
                "H100-PCIe, A100-40GB, A100-80GB, A10, L40S, L4, T4, V100-16GB, V100-32GB, "
                "MI300X, MI250X)"},
        BadCase{"gpus:\n  - model: L4\n    mig: {\"0\": [1g.10gb]}\n",
                "agent.yaml:3:10: gpus[0].mig: model L4 does not support MIG"},
        BadCase{"gpus:\n  - model: H100-SXM\n    mig:\n      \"0\": [4g.40gb, 4g.40gb]\n",
                "agent.yaml:4:12: gpus[0].mig.0: MIG instances use 8 compute slices, GPU has 7"},
        BadCase{"gpus:\n  - model: H100-SXM\n    mig:\n      \"0\": [3g.big]\n",
                "agent.yaml:4:13: gpus[0].mig.0: '3g.big' is not a MIG profile of H100-SXM "
                "(catalog: 1g.10gb, 1g.20gb, 2g.20gb, 3g.40gb, 4g.40gb, 7g.80gb)"},
        BadCase{"gpus:\n  - model: H100-SXM\n    count: 2\n    mig: {\"2\": [7g.80gb]}\n",
                "agent.yaml:4:11: gpus[0].mig.2: GPU index 2 ≥ count 2"},
        BadCase{"gpus: [{model: L4, count: 2}]\ntopology: ring\n",
                "agent.yaml:2:11: topology: unknown topology 'ring' (expected auto, nvlink-all, "
                "nvlink-pairs, pcie-pairs, pcie or none)"},
        BadCase{"gpus: [{model: L4, count: 2}]\nlinks:\n  - {a: 0, b: 2, kind: nvlink}\n",
                "agent.yaml:3:5: links[0]: link 0-2 must join two different GPUs among 0..1"},
        BadCase{"backend: cuda\n",
                "agent.yaml:1:10: backend: unknown backend 'cuda' (expected simulated or nvml)"},
        BadCase{"heartbeat_interval_ms: 1\n",
                "agent.yaml:1:24: heartbeat_interval_ms: must be ≥ 10, got 1"},
        BadCase{"pool: [a, b]\n", "agent.yaml:1:7: pool: must be a string, got a list"},
        BadCase{"sandbox: {enabled: true, uids: 5}\n",
                "agent.yaml:1:26: sandbox.uids: unknown key (expected enabled, cgroup_parent, "
                "uid_pool, tenant_users, pids_max, default_memory_mib, hide, host_dirs)"},
        BadCase{
            "sandbox: {enabled: true, uid_pool: {first: 1000, count: 5}, private_tmp: [/tmp]}\n",
            "agent.yaml:1:61: sandbox.private_tmp: is no longer used: every task gets a fresh "
            "/tmp from the OCI runtime (remove the key; docs/sandbox.md)"},
        BadCase{"sandbox:\n  uid_pool: {first: 200000}\n",
                "agent.yaml:2:13: sandbox.uid_pool: needs first and count, e.g. {first: 200000, "
                "count: 1000}"},
        BadCase{"sandbox:\n  cgroup_parent: /sys/fs/cgroup/x\n",
                "agent.yaml:2:18: sandbox.cgroup_parent: must be a relative cgroup path without "
                "'..', got '/sys/fs/cgroup/x'"},
        BadCase{"sandbox:\n  hide: [etc/certs]\n",
                "agent.yaml:2:9: sandbox.hide: 'etc/certs' is not absolute"},
        BadCase{"sandbox:\n  host_dirs: [/usr, /]\n",
                "agent.yaml:2:14: sandbox.host_dirs: '/' must be an absolute, normalised "
                "directory other than /"},
        BadCase{"sandbox:\n  host_dirs: [/opt/../home]\n",
                "agent.yaml:2:14: sandbox.host_dirs: '/opt/../home' must be an absolute, "
                "normalised directory other than /"},
        BadCase{"sim_device_dir: dev\n",
                "agent.yaml:1:17: sim_device_dir: must be an absolute path, got 'dev'"},
        BadCase{"nvml: {dev_dir: dev}\n",
                "agent.yaml:1:17: nvml.dev_dir: must be an absolute path, got 'dev'"},
        BadCase{"nvml:\n  proc_dir: \"\"\n", "agent.yaml:2:13: nvml.proc_dir: must not be empty"},
        BadCase{"nvml:\n  library: lib/libnvidia-ml.so.1\n",
                "agent.yaml:2:12: nvml.library: must be an absolute path or a library name "
                "(libnvidia-ml.so.1), got 'lib/libnvidia-ml.so.1'"},
        BadCase{"nvml:\n  libary: /opt/nvml.so\n",
                "agent.yaml:2:3: nvml.libary: unknown key (expected library, dev_dir, proc_dir)"},
        BadCase{"nvml: /opt/nvml.so\n", "agent.yaml:1:7: nvml: must be a map, got '/opt/nvml.so'"},
        BadCase{"images:\n  datasets: {ImageNet: /srv/imagenet}\n",
                "agent.yaml:2:14: images.datasets.ImageNet: 'ImageNet' is not "
                "[a-z0-9][a-z0-9._-]* (lowercase letters, digits, and '.', '_', '-' after the "
                "first)"},
        BadCase{"images:\n  datasets: {imagenet: srv/imagenet}\n",
                "agent.yaml:2:24: images.datasets.imagenet: must be an absolute path, got "
                "'srv/imagenet'"},
        BadCase{"time_slicing: {\"0\": 0}\n",
                "agent.yaml:1:21: time_slicing.0: must be ≥ 1, got 0"},
        BadCase{"time_slicing: {\"0\": 65}\n",
                "agent.yaml:1:21: time_slicing.0: must be ≤ 64, got 65"},
        BadCase{"pool: a\n  bad indent: [\n", "agent.yaml:2:13: illegal map value"}));

// Issue 27: a device's default time-slice slots from the node's config, by GPU index or UUID.
TEST(AgentConfigTest, TimeSlicingGivesDevicesTheirSlotsByIndexOrUuid) {
  auto c = ParseAgentConfig("time_slicing: {\"1\": 4, MIG-a: 2}\n", "agent.yaml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->time_slicing, (std::map<std::string, int32_t>{{"1", 4}, {"MIG-a", 2}}));
  std::vector<Device> devices(4);
  devices[0].uuid = "GPU-0";
  devices[0].index = 0;
  devices[1].uuid = "GPU-1";
  devices[1].index = 1;
  devices[2].uuid = "GPU-2";
  devices[2].index = 2;
  devices[3].uuid = "MIG-a";
  devices[3].index = 2;
  devices[3].mig_profile = "3g.40gb";
  devices[3].parent_uuid = "GPU-2";
  ASSERT_TRUE(ApplyTimeSlicing(c->time_slicing, &devices).ok());
  EXPECT_EQ(devices[0].time_slice_slots, 0);
  EXPECT_EQ(devices[1].time_slice_slots, 4);
  EXPECT_EQ(devices[3].time_slice_slots, 2);
  Status none = ApplyTimeSlicing({{"7", 2}}, &devices);
  EXPECT_EQ(none.message(),
            "time_slicing.7: no GPU of that index or device of that UUID on this node");
  Status parent = ApplyTimeSlicing({{"2", 2}}, &devices);
  EXPECT_EQ(parent.message(),
            "time_slicing.2: GPU GPU-2 is partitioned into MIG instances; slice an instance (by "
            "its UUID, e.g. MIG-a) instead");
}

TEST(AgentConfigTest, ParsesTheImagesDatasets) {
  auto c = ParseAgentConfig(
      "images:\n  datasets:\n    imagenet-1k: /srv/data/imagenet\n"
      "    coco: /srv/data/coco\n",
      "agent.yaml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->images.datasets,
            (std::map<std::string, std::string>{{"coco", "/srv/data/coco"},
                                                {"imagenet-1k", "/srv/data/imagenet"}}));
}

TEST(AgentConfigTest, ParsesTheSandboxSection) {
  auto c = ParseAgentConfig(R"(sandbox:
  enabled: true
  cgroup_parent: gpupool/tasks
  uid_pool: {first: 200000, count: 1000}
  tenant_users: {acme/ml: alice, acme/ops: "#3000"}
  pids_max: 512
  default_memory_mib: 2048
  hide: [/etc/gpupool/certs]
  host_dirs: [/usr, /etc, /opt, /srv/tools]
sim_device_dir: /run/gpupool-sim/dev
gpus: [{model: L4}]
)",
                            "agent.yaml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  const sandbox::SandboxOptions& o = c->sandbox;
  EXPECT_TRUE(o.enabled);
  EXPECT_EQ(o.cgroup_parent, "gpupool/tasks");
  EXPECT_EQ(o.uid_pool_first, 200000);
  EXPECT_EQ(o.uid_pool_count, 1000);
  EXPECT_EQ(o.tenant_users.at("acme/ml"), "alice");
  EXPECT_EQ(o.tenant_users.at("acme/ops"), "#3000");
  EXPECT_EQ(o.pids_max, 512);
  EXPECT_EQ(o.default_memory_mib, 2048);
  EXPECT_EQ(o.hide_paths, std::vector<std::string>{"/etc/gpupool/certs"});
  EXPECT_EQ(o.host_dirs, (std::vector<std::string>{"/usr", "/etc", "/opt", "/srv/tools"}));
  EXPECT_EQ(c->sim.device_dir, "/run/gpupool-sim/dev");
  // Off unless asked for.
  auto d = ParseAgentConfig("gpus: [{model: L4}]\n", "a.yaml");
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(d->sandbox.enabled);
  EXPECT_EQ(d->sandbox.host_dirs, (std::vector<std::string>{"/usr", "/etc", "/opt"}));
}

TEST(AgentConfigTest, ParsesTheNetworkSection) {
  auto c = ParseAgentConfig(R"(network:
  isolated: true
  default: isolated
  subnet: 10.50.0.0/20
  deny: [10.0.0.0/8, 192.168.7.9]
  published_ports: 40000-40099
  advertise: gpu-7.example.net
)",
                            "a.yaml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE(c->network.isolated);
  EXPECT_EQ(c->network.default_mode, net::NetworkMode::kIsolated);
  EXPECT_EQ(c->network.options.subnet, "10.50.0.0/20");
  EXPECT_EQ(c->network.options.deny, (std::vector<std::string>{"10.0.0.0/8", "192.168.7.9"}));
  EXPECT_EQ(c->network.options.published_first, 40000);
  EXPECT_EQ(c->network.options.published_count, 100);
  EXPECT_EQ(c->network.advertise, "gpu-7.example.net");
  // Unset: no isolated networks, and tasks of pools that name none get no network.
  auto d = ParseAgentConfig("pool: p\n", "a.yaml");
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(d->network.isolated);
  EXPECT_EQ(d->network.default_mode, net::NetworkMode::kNone);
  EXPECT_EQ(d->network.options.published_first, 30000);
  EXPECT_EQ(d->network.options.published_count, 2768);
  EXPECT_EQ(d->network.advertise, "");
  // Bad values are refused naming the key.
  for (const auto& [yaml, want] : std::vector<std::pair<std::string, std::string>>{
           {"network:\n  default: bridge\n", "network.default: network mode 'bridge'"},
           {"network:\n  subnet: 10.0.0.0/28\n", "network.subnet: the prefix length must be 8..24"},
           {"network:\n  deny: [10.0.0.300]\n", "network.deny: '10.0.0.300': not an IPv4"},
           {"network:\n  published_ports: 40000\n",
            "network.published_ports: '40000': want FIRST-LAST within 1..65535"},
           {"network:\n  published_ports: 40100-40000\n", "want FIRST-LAST"},
           {"network:\n  published_ports: 65000-70000\n", "want FIRST-LAST"},
           {"network:\n  advertise: a b\n", "network.advertise: 'a b': want a host name"},
           {"network:\n  bridge: br0\n", "network.bridge: unknown key"}}) {
    auto bad = ParseAgentConfig(yaml, "a.yaml");
    ASSERT_FALSE(bad.ok()) << yaml;
    EXPECT_NE(bad.status().message().find(want), std::string::npos) << bad.status().message();
  }
}

TEST(AgentConfigTest, TheShippedConfigParsesWithEveryTaskConfined) {
  // Less its token_file line: the token itself lives on the node.
  std::ifstream in(std::string(GPUPOOL_SOURCE_DIR) + "/deploy/etc/gpupool/agent.yaml");
  std::string yaml;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("token_file:", 0) != 0) yaml += line + "\n";
  }
  auto c = ParseAgentConfig(yaml, "deploy/etc/gpupool/agent.yaml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE(c->sandbox.enabled);
  EXPECT_TRUE(c->gpu_slices.enabled);
  EXPECT_TRUE(c->vram_scrub);
  EXPECT_TRUE(c->network.isolated);
  EXPECT_EQ(c->network.default_mode, net::NetworkMode::kNone);
}

TEST(AgentConfigTest, ReadsTheJoinTokenFromAFile) {
  const std::string path = ::testing::TempDir() + "/agent_config_node.token";
  std::ofstream(path) << "  gpj-0123456789abcdef\n";
  Result<AgentConfig> c = ParseAgentConfig("token_file: " + path + "\n", "a.yaml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->token, "gpj-0123456789abcdef");
  EXPECT_EQ(c->token_file, path);
  // Both at once, a missing file and an empty one are refused, naming the key and the file.
  Result<AgentConfig> both = ParseAgentConfig("token: abc\ntoken_file: " + path + "\n", "a.yaml");
  ASSERT_FALSE(both.ok());
  EXPECT_NE(both.status().message().find("set token or token_file, not both"), std::string::npos)
      << both.status().message();
  Result<AgentConfig> missing = ParseAgentConfig("token_file: /nonexistent/node.token\n", "a.yaml");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("a.yaml:1:13: token_file"), std::string::npos)
      << missing.status().message();
  EXPECT_NE(missing.status().message().find("/nonexistent/node.token: cannot read the token file"),
            std::string::npos)
      << missing.status().message();
  std::ofstream(path, std::ios::trunc) << "\n";
  Result<AgentConfig> empty = ParseAgentConfig("token_file: " + path + "\n", "a.yaml");
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.status().message().find("the token file is empty"), std::string::npos);
  std::remove(path.c_str());
}

TEST(AgentConfigTest, AnEnabledSandboxNeedsUids) {
  auto c =
      ParseAgentConfig("node_name: n\nsandbox: {enabled: true}\ngpus: [{model: L4}]\n", "a.yaml");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(ValidateAgentConfig(&*c).message(),
            "a.yaml: sandbox: enabled needs sandbox.uid_pool (e.g. {first: 200000, count: "
            "1000}) or sandbox.tenant_users");
}

// One sandbox path (issue 25): the OCI runtime is the sandbox, so a sandbox without images is
// refused at start, naming the key, instead of failing every task later.
TEST(AgentConfigTest, AnEnabledSandboxNeedsTheRuntime) {
  auto c = ParseAgentConfig(
      "node_name: n\nsandbox: {enabled: true, uid_pool: {first: 200000, count: 10}}\n"
      "images: {enabled: false}\ngpus: [{model: L4}]\n",
      "a.yaml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(ValidateAgentConfig(&*c).message(),
            "a.yaml: images.enabled: false leaves the sandbox nothing to confine tasks with: "
            "sandbox.enabled needs images.enabled (the OCI runtime is the sandbox; "
            "docs/sandbox.md)");
}

TEST(AgentConfigTest, ValidateNeedsGpusForSimulated) {
  auto c = ParseAgentConfig("node_name: n\n", "a.yaml");
  ASSERT_TRUE(c.ok());
  const Status st = ValidateAgentConfig(&*c);
  EXPECT_EQ(st.message(),
            "a.yaml: gpus: backend simulated needs at least one entry, e.g. gpus: [{model: "
            "H100-SXM, count: 8}]");
}

TEST(AgentConfigTest, ValidateFillsHostDefaults) {
  auto c = ParseAgentConfig("gpus: [{model: T4}]\n", "a.yaml");
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE(ValidateAgentConfig(&*c).ok());
  EXPECT_FALSE(c->node_name.empty());
  EXPECT_GT(c->cpu_milli, 0);
  EXPECT_GT(c->memory_mib, 0);
}

TEST(AgentConfigTest, MissingFileIsNamed) {
  auto c = LoadAgentConfigFile("/nonexistent/agent.yaml");
  EXPECT_EQ(c.status().message(), "/nonexistent/agent.yaml: cannot open config file");
}

TEST(CatalogTest, TheAgentUsesThePoolCatalog) {
  // The agent has no table of its own: compute, VRAM and MIG come from pool/catalog.yaml.
  AgentConfig c;
  EXPECT_EQ(c.models.source(), Catalog::Builtin().source());
  auto l = ParseSimLayout("gpus: [{model: h100, count: 1}]\n", Catalog::Builtin());
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  EXPECT_EQ(l->gpus[0].model, "H100-SXM");  // an alias reports as the catalog's name
}

TEST(CatalogTest, ACatalogFileReplacesTheBuiltinOne) {
  const std::string path = testing::TempDir() + "/agent_catalog.yaml";
  std::ofstream(path) << "models:\n  - {name: X1, vendor: V, fp16_tflops: 10.5, vram_mib: 1024}\n";
  auto c = ParseAgentConfig("catalog: " + path + "\ngpus: [{model: X1, count: 2}]\n", "a.yaml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  SimulatedBackend b("n", c->sim, c->models);
  auto inv = b.Discover();
  ASSERT_TRUE(inv.ok());
  EXPECT_EQ(inv->devices[0].milli_tflops, 10'500);
  EXPECT_EQ(inv->devices[0].vram_mib, 1024);
  // Models of the built-in catalog are not there any more.
  auto h100 = ParseAgentConfig("catalog: " + path + "\ngpus: [{model: H100-SXM}]\n", "a.yaml");
  EXPECT_EQ(h100.status().message(),
            "a.yaml:2:16: gpus[0].model: unknown model 'H100-SXM' (known: X1)");
}

TEST(CatalogTest, CatalogErrorsNameFileAndLine) {
  const std::string path = testing::TempDir() + "/bad_catalog.yaml";
  std::ofstream(path) << "models:\n  - name: X1\n    bf16_tflops: lots\n    vram_mib: 1024\n";
  auto c = ParseAgentConfig("catalog: " + path + "\n", "a.yaml");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("a.yaml:1:10: catalog: " + path + ":2:"), std::string::npos)
      << c.status().message();
}

TEST(CatalogTest, NvmlNamesAreCatalogAliases) {
  const std::vector<std::pair<const char*, const char*>> cases = {
      {"NVIDIA H100 80GB HBM3", "H100-SXM"},
      {"NVIDIA H100 PCIe", "H100-PCIe"},
      {"NVIDIA H200", "H200"},
      {"NVIDIA A100-SXM4-40GB", "A100-40GB"},
      {"NVIDIA A100-SXM4-80GB", "A100-80GB"},
      {"NVIDIA A100 80GB PCIe", "A100-80GB"},
      {"NVIDIA L40S", "L40S"},
      {"NVIDIA L4", "L4"},
      {"NVIDIA A10", "A10"},
      {"Tesla T4", "T4"},
      {"Tesla V100-SXM2-16GB", "V100-16GB"},
      {"Tesla V100-SXM2-32GB", "V100-32GB"},
  };
  for (const auto& [nvml, model] : cases) {
    const GpuModel* m = Catalog::Builtin().Find(nvml);
    ASSERT_NE(m, nullptr) << nvml;
    EXPECT_EQ(m->name, model) << nvml;
  }
  EXPECT_EQ(Catalog::Builtin().Find("NVIDIA GeForce RTX 4090"), nullptr);
}

TEST(CatalogTest, MigProfilesMustBeTheModels) {
  auto bad =
      ParseSimLayout("gpus: [{model: A100-40GB, mig: {\"0\": [3g.40gb]}}]\n", Catalog::Builtin());
  EXPECT_EQ(bad.status().message(),
            "<sim>:1:39: gpus[0].mig.0: '3g.40gb' is not a MIG profile of A100-40GB (catalog: "
            "1g.5gb, 1g.10gb, 2g.10gb, 3g.20gb, 4g.20gb, 7g.40gb)");
  auto no_mig =
      ParseSimLayout("gpus: [{model: L4, mig: {\"0\": [1g.10gb]}}]\n", Catalog::Builtin());
  EXPECT_NE(no_mig.status().message().find("model L4 does not support MIG"), std::string::npos)
      << no_mig.status().message();
}

SimLayout Layout(const std::string& yaml) {
  auto l = ParseSimLayout(yaml, Catalog::Builtin());
  EXPECT_TRUE(l.ok()) << l.status().ToString();
  return l.ok() ? *l : SimLayout{};
}

TEST(SimulatedBackendTest, DevicesAndMigArithmetic) {
  SimulatedBackend b("n1",
                     Layout("gpus: [{model: H100-SXM, count: 2, mig: {\"1\": [3g.40gb, "
                            "2g.20gb, 1g.10gb]}}]\n"),
                     Catalog::Builtin());
  EXPECT_EQ(b.Name(), "simulated");
  auto inv = b.Discover();
  ASSERT_TRUE(inv.ok());
  ASSERT_EQ(inv->devices.size(), 5u);  // GPU 0, GPU 1, its 3 instances
  const Device& g0 = inv->devices[0];
  EXPECT_EQ(g0.uuid, "GPU-sim-n1-0");
  EXPECT_EQ(g0.model, "H100-SXM");
  EXPECT_EQ(g0.milli_tflops, 989'500);
  EXPECT_EQ(g0.vram_mib, 81'920);
  const Device& m0 = inv->devices[2];
  EXPECT_EQ(m0.uuid, "MIG-sim-n1-1-0");
  EXPECT_EQ(m0.parent_uuid, "GPU-sim-n1-1");
  EXPECT_EQ(m0.mig_profile, "3g.40gb");
  EXPECT_EQ(m0.index, 1);
  // 989500 × 3 / 7 = 424071.4 → 424071; 40 GB → 40960 MiB.
  EXPECT_EQ(m0.milli_tflops, 424'071);
  EXPECT_EQ(m0.vram_mib, 40'960);
  // 989500 × 1 / 7 = 141357.1 → 141357.
  EXPECT_EQ(inv->devices[4].milli_tflops, 141'357);
  // auto topology with NVLink-capable models: nvlink-all; 2 GPUs → 1 link.
  ASSERT_EQ(inv->links.size(), 1u);
  EXPECT_EQ(inv->links[0].kind, LinkKind::kNvlink);
  // The catalog's NVLink 900 GB/s (both directions) × 8 = 7200 Gbit/s.
  EXPECT_EQ(inv->links[0].bandwidth_gbps, 7200);
}

TEST(SimulatedBackendTest, Topologies) {
  auto links_of = [](const std::string& yaml) {
    SimulatedBackend b("n", Layout(yaml), Catalog::Builtin());
    return b.Discover()->links;
  };
  // 8 GPUs: 8 × 7 / 2 = 28 pairs.
  auto all = links_of("gpus: [{model: H100-SXM, count: 8}]\ntopology: nvlink-all\n");
  ASSERT_EQ(all.size(), 28u);
  for (const Link& l : all) EXPECT_EQ(l.kind, LinkKind::kNvlink);
  // pcie-pairs on 4 L4: (0,1),(2,3) switch; (0,2),(0,3),(1,2),(1,3) cross the NUMA halves.
  auto pairs = links_of("gpus: [{model: L4, count: 4}]\ntopology: pcie-pairs\n");
  ASSERT_EQ(pairs.size(), 6u);
  int sw = 0, sys = 0;
  for (const Link& l : pairs) {
    sw += l.kind == LinkKind::kPcieSwitch;
    sys += l.kind == LinkKind::kSystem;
  }
  EXPECT_EQ(sw, 2);
  EXPECT_EQ(sys, 4);
  // L4: PCIe Gen4 x16 64 GB/s both directions → 64 × 8 / 2 = 256 Gbit/s one way; a system link
  // (across NUMA halves) half of that.
  for (const Link& l : pairs) {
    EXPECT_EQ(l.bandwidth_gbps, l.kind == LinkKind::kPcieSwitch ? 256 : 128);
  }
  // Explicit links replace the generated one for their pair.
  auto expl = links_of(
      "gpus: [{model: L4, count: 2}]\ntopology: pcie\nlinks: [{a: 1, b: 0, kind: nvlink, gbps: "
      "100}]\n");
  ASSERT_EQ(expl.size(), 1u);
  EXPECT_EQ(expl[0].a, 0);
  EXPECT_EQ(expl[0].b, 1);
  EXPECT_EQ(expl[0].kind, LinkKind::kNvlink);
  EXPECT_EQ(expl[0].bandwidth_gbps, 100);
  EXPECT_TRUE(links_of("gpus: [{model: L4, count: 3}]\ntopology: none\n").empty());
}

TEST(SimulatedBackendTest, MetricsFollowLoadAndAreDeterministic) {
  const SimLayout layout = Layout("gpus: [{model: H100-SXM, count: 2}]\nsim_seed: 7\n");
  SimulatedBackend a("n", layout, Catalog::Builtin());
  SimulatedBackend b("n", layout, Catalog::Builtin());
  const std::vector<DeviceLoad> load = {{"GPU-sim-n-0", 50, 20'480}};
  for (int i = 0; i < 5; ++i) {
    auto sa = a.Sample(load);
    auto sb = b.Sample(load);
    ASSERT_EQ(sa.size(), 2u);
    EXPECT_EQ(sa[0].utilization_pct, sb[0].utilization_pct);  // same seed, same series
    EXPECT_EQ(sa[0].temperature_c, sb[0].temperature_c);
    EXPECT_NEAR(sa[0].utilization_pct, 50, 3);  // 50% ± 3 noise
    EXPECT_EQ(sa[0].memory_used_mib, 20'480);   // granted VRAM
    // TDP 700 W (catalog), idle 700 / 8 = 87 W:
    // power = 87 + (700 − 87) × util / 100 ≈ 393 W at 50%.
    EXPECT_NEAR(sa[0].power_watts, 393, 25);
    EXPECT_EQ(sa[1].utilization_pct, 0);  // idle device
    EXPECT_EQ(sa[1].power_watts, 87);
    EXPECT_LT(sa[1].temperature_c, sa[0].temperature_c);
  }
}

TEST(SimulatedBackendTest, HealthFromConfigAndOverride) {
  SimulatedBackend b("n", Layout("gpus: [{model: L4, count: 2, unhealthy: [1]}]\n"),
                     Catalog::Builtin());
  EXPECT_TRUE(b.Discover()->devices[0].healthy);
  EXPECT_FALSE(b.Discover()->devices[1].healthy);
  b.SetHealthy("GPU-sim-n-0", false);
  EXPECT_FALSE(b.Discover()->devices[0].healthy);
  auto s = b.Sample({});
  EXPECT_FALSE(s[0].healthy);
  EXPECT_EQ(s[0].xid_errors, 1);
}

TEST(NvmlBackendTest, AbsentLibraryGivesAClearError) {
  auto b = NvmlBackend::Open(Catalog::Builtin(), "libnvidia-ml-absent.so.1");
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(b.status().message(),
            "backend=nvml unavailable: libnvidia-ml-absent.so.1: cannot open shared object "
            "file: No such file or directory; use backend: simulated");
}

TEST(NvmlBackendTest, DefaultLibraryOpensOrSaysWhy) {
  // On a machine with an NVIDIA driver this discovers real GPUs; elsewhere it explains itself.
  auto b = NvmlBackend::Open(Catalog::Builtin());
  if (b.ok()) {
    EXPECT_EQ((*b)->Name(), "nvml");
    EXPECT_TRUE((*b)->Discover().ok());
  } else {
    EXPECT_TRUE(b.status().message().starts_with("backend=nvml unavailable: "))
        << b.status().message();
    EXPECT_TRUE(b.status().message().ends_with("; use backend: simulated"));
  }
}

}  // namespace
}  // namespace gpupool::agent

namespace gpupool::agent {
namespace {

// NvmlBackend against tests/agent/fake_nvml.cc: two H100 joined by NVLink, GPU 0 in MIG mode
// with two 3g.40gb instances, GPU 1 lost.
TEST(NvmlBackendTest, DiscoversAndSamplesThroughTheLoadedLibrary) {
  auto opened = NvmlBackend::Open(Catalog::Builtin(), GPUPOOL_FAKE_NVML);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  NvmlBackend& b = **opened;
  EXPECT_EQ(b.Name(), "nvml");
  auto inv = b.Discover();
  ASSERT_TRUE(inv.ok()) << inv.status().ToString();
  ASSERT_EQ(inv->devices.size(), 4u);  // GPU 0, its 2 instances, GPU 1
  const Device& g0 = inv->devices[0];
  EXPECT_EQ(g0.uuid, "GPU-fake-0");
  EXPECT_EQ(g0.model, "H100-SXM");      // "NVIDIA H100 80GB HBM3"
  EXPECT_EQ(g0.vram_mib, 81'559);       // what the driver reports
  EXPECT_EQ(g0.milli_tflops, 989'500);  // from the catalog
  const Device& m1 = inv->devices[2];
  EXPECT_EQ(m1.uuid, "MIG-fake-0-1");
  EXPECT_EQ(m1.parent_uuid, "GPU-fake-0");
  EXPECT_EQ(m1.mig_profile, "3g.40gb");
  EXPECT_EQ(m1.index, 0);
  EXPECT_EQ(m1.vram_mib, 40'448);
  EXPECT_EQ(m1.milli_tflops, 424'071);  // 989500 × 3 / 7
  EXPECT_EQ(inv->devices[3].uuid, "GPU-fake-1");
  ASSERT_EQ(inv->links.size(), 1u);
  EXPECT_EQ(inv->links[0].kind, LinkKind::kNvlink);

  auto s = b.Sample({});
  ASSERT_EQ(s.size(), 4u);
  EXPECT_EQ(s[0].utilization_pct, 42);
  EXPECT_EQ(s[0].memory_used_mib, 1024);
  EXPECT_EQ(s[0].power_watts, 350);  // 350500 mW
  EXPECT_EQ(s[0].temperature_c, 61);
  EXPECT_EQ(s[0].ecc_errors, 2);
  EXPECT_TRUE(s[0].healthy);
  EXPECT_EQ(s[1].utilization_pct, 0);  // not supported on a MIG instance
  EXPECT_EQ(s[1].memory_used_mib, 512);
  EXPECT_FALSE(s[3].healthy);  // GPU_IS_LOST

  // Events: both GPUs registered (GPU 1 for XIDs only: it refuses ECC events), the set drained
  // without blocking.
  EXPECT_EQ(b.EventSource(), "NVML events (XID, ECC) on 2 GPU(s)");
  std::vector<DeviceEvent> events = b.PollEvents();
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].uuid, "GPU-fake-1");
  EXPECT_EQ(events[0].kind, DeviceEvent::Kind::kXid);
  EXPECT_EQ(events[0].xid, 79);
  EXPECT_GT(events[0].time_us, 0);
  EXPECT_EQ(events[1].uuid, "GPU-fake-0");
  EXPECT_EQ(events[1].kind, DeviceEvent::Kind::kEccCorrected);
  EXPECT_TRUE(b.PollEvents().empty());
}

// The device files a sandboxed task needs, as the driver lays them out: /dev/nvidia<minor> (the
// minor from NVML, not the index), a MIG instance's parent node and its two access capabilities
// from /proc/driver/nvidia/capabilities, and no control file that does not exist.
TEST(NvmlBackendTest, ListsEachDevicesFilesByMinorNumberAndMigCapability) {
  const std::string root = ::testing::TempDir() + "/nvml_paths_" + std::to_string(getpid());
  std::filesystem::remove_all(root);
  const std::string mig = root + "/proc/capabilities/gpu3/mig";
  for (const auto& [dir, minor] : std::vector<std::pair<std::string, int>>{
           {"/gi1", 21}, {"/gi1/ci0", 22}, {"/gi2", 30}, {"/gi2/ci0", 31}}) {
    std::filesystem::create_directories(mig + dir);
    std::ofstream(mig + dir + "/access")
        << "DeviceFileMinor: " << minor << "\nDeviceFileMode: 292\nDeviceFileModify: 1\n";
  }
  std::filesystem::create_directories(root + "/dev");
  auto opened = NvmlBackend::Open(
      Catalog::Builtin(), GPUPOOL_FAKE_NVML,
      {.dev_dir = root + "/dev", .proc_dir = root + "/proc", .driver_dirs = {}, .bin_dirs = {}});
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  auto inv = (*opened)->Discover();
  ASSERT_TRUE(inv.ok()) << inv.status().ToString();
  ASSERT_EQ(inv->devices.size(), 4u);
  const std::string dev = root + "/dev";
  EXPECT_EQ(inv->devices[0].device_files, std::vector<std::string>{dev + "/nvidia3"});
  EXPECT_EQ(inv->devices[1].device_files,
            (std::vector<std::string>{dev + "/nvidia3", dev + "/nvidia-caps/nvidia-cap21",
                                      dev + "/nvidia-caps/nvidia-cap22"}));
  EXPECT_EQ(inv->devices[2].device_files,
            (std::vector<std::string>{dev + "/nvidia3", dev + "/nvidia-caps/nvidia-cap30",
                                      dev + "/nvidia-caps/nvidia-cap31"}));
  EXPECT_EQ(inv->devices[3].device_files, std::vector<std::string>{dev + "/nvidia0"});
  EXPECT_TRUE(inv->control_device_files.empty());  // none exists under this dev dir
  std::filesystem::remove_all(root);
}

// An image carries no driver (issue 25): the node's compute and utility libraries — by their
// versioned names and soname links — and its binaries are what a GPU task from an image gets bound
// read-only; the development link, another capability's library, an unrelated library, a dangling
// link and other binaries are not.
TEST(DriverFilesTest, FindsTheDriversComputeAndUtilityFilesOnly) {
  const std::string root =
      std::filesystem::path(::testing::TempDir() + "/driver_files_" + std::to_string(getpid()))
          .lexically_normal()
          .string();
  std::filesystem::remove_all(root);
  std::filesystem::create_directories(root + "/lib");
  std::filesystem::create_directories(root + "/bin");
  const std::string lib = root + "/lib/";
  for (const char* f : {"libcuda.so.550.54.15", "libnvidia-ml.so.550.54.15",
                        "libnvidia-glcore.so.550.54.15", "libfoo.so.1"}) {
    std::ofstream(lib + f) << "elf";
  }
  std::filesystem::create_symlink("libcuda.so.550.54.15", lib + "libcuda.so.1");
  std::filesystem::create_symlink("libcuda.so.1", lib + "libcuda.so");
  std::filesystem::create_symlink("libnvidia-ml.so.550.54.15", lib + "libnvidia-ml.so.1");
  std::filesystem::create_symlink("absent.so", lib + "libnvidia-ptxjitcompiler.so.1");
  std::ofstream(root + "/bin/nvidia-smi") << "#!";
  std::ofstream(root + "/bin/nvidia-settings") << "#!";
  EXPECT_EQ(FindDriverFiles({root + "/lib"}, {root + "/none", root + "/bin"}),
            (std::vector<std::string>{root + "/bin/nvidia-smi", lib + "libcuda.so.1",
                                      lib + "libcuda.so.550.54.15", lib + "libnvidia-ml.so.1",
                                      lib + "libnvidia-ml.so.550.54.15"}));
  EXPECT_TRUE(FindDriverFiles({root + "/absent"}, {}).empty());

  // The NVML backend reports them with its inventory; by default it looks next to the
  // libnvidia-ml it loaded, where the driver's installer puts every library.
  auto opened = NvmlBackend::Open(Catalog::Builtin(), GPUPOOL_FAKE_NVML,
                                  {.dev_dir = "/dev",
                                   .proc_dir = "/proc/driver/nvidia",
                                   .driver_dirs = {root + "/lib"},
                                   .bin_dirs = {root + "/bin"}});
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  auto inv = (*opened)->Discover();
  ASSERT_TRUE(inv.ok()) << inv.status().ToString();
  EXPECT_EQ(inv->driver_files.size(), 5u);
  void* handle = dlopen(GPUPOOL_FAKE_NVML, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(handle, nullptr);
  EXPECT_EQ(LoadedLibraryDir(handle),
            std::filesystem::canonical(GPUPOOL_FAKE_NVML).parent_path().string());
  dlclose(handle);
  EXPECT_EQ(LoadedLibraryDir(nullptr), "");
  std::filesystem::remove_all(root);
}

}  // namespace
}  // namespace gpupool::agent
