// Agent config and the simulated / NVML backends: YAML parsing with file:line errors, the
// catalog, deterministic devices and links, metrics that follow load, and a clear error when
// libnvidia-ml is absent.
#include "agent/config.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "agent/catalog.h"
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
                "agent.yaml:2:13: gpus[0].model: unknown model 'B300' (known: A10, A100-40GB, "
                "A100-80GB, H100-PCIe, H100-SXM, H200, L4, L40S, MI250X, MI300X, T4, V100-16GB, "
                "V100-32GB)"},
        BadCase{"gpus:\n  - model: L4\n    mig: {\"0\": [1g.10gb]}\n",
                "agent.yaml:3:10: gpus[0].mig: model L4 does not support MIG"},
        BadCase{"gpus:\n  - model: H100-SXM\n    mig:\n      \"0\": [4g.40gb, 4g.40gb]\n",
                "agent.yaml:4:12: gpus[0].mig.0: MIG instances use 8 compute slices, GPU has 7"},
        BadCase{"gpus:\n  - model: H100-SXM\n    mig:\n      \"0\": [3g.big]\n",
                "agent.yaml:4:13: gpus[0].mig.0: MIG profile '3g.big': expected "
                "<slices>g.<memory>gb, e.g. 3g.40gb"},
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
                "uid_pool, tenant_users, pids_max, default_memory_mib, hide, private_tmp)"},
        BadCase{"sandbox:\n  uid_pool: {first: 200000}\n",
                "agent.yaml:2:13: sandbox.uid_pool: needs first and count, e.g. {first: 200000, "
                "count: 1000}"},
        BadCase{"sandbox:\n  cgroup_parent: /sys/fs/cgroup/x\n",
                "agent.yaml:2:18: sandbox.cgroup_parent: must be a relative cgroup path without "
                "'..', got '/sys/fs/cgroup/x'"},
        BadCase{"sandbox:\n  hide: [etc/certs]\n",
                "agent.yaml:2:9: sandbox.hide: 'etc/certs' is not absolute"},
        BadCase{"sim_device_dir: dev\n",
                "agent.yaml:1:17: sim_device_dir: must be an absolute path, got 'dev'"},
        BadCase{"pool: a\n  bad indent: [\n", "agent.yaml:2:13: illegal map value"}));

TEST(AgentConfigTest, ParsesTheSandboxSection) {
  auto c = ParseAgentConfig(R"(sandbox:
  enabled: true
  cgroup_parent: gpupool/tasks
  uid_pool: {first: 200000, count: 1000}
  tenant_users: {acme/ml: alice, acme/ops: "#3000"}
  pids_max: 512
  default_memory_mib: 2048
  hide: [/etc/gpupool/certs]
  private_tmp: [/tmp]
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
  EXPECT_EQ(o.private_tmp, std::vector<std::string>{"/tmp"});
  EXPECT_EQ(c->sim.device_dir, "/run/gpupool-sim/dev");
  // Off unless asked for.
  auto d = ParseAgentConfig("gpus: [{model: L4}]\n", "a.yaml");
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(d->sandbox.enabled);
}

TEST(AgentConfigTest, AnEnabledSandboxNeedsUids) {
  auto c =
      ParseAgentConfig("node_name: n\nsandbox: {enabled: true}\ngpus: [{model: L4}]\n", "a.yaml");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(ValidateAgentConfig(&*c).message(),
            "a.yaml: sandbox: enabled needs sandbox.uid_pool (e.g. {first: 200000, count: "
            "1000}) or sandbox.tenant_users");
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

TEST(CatalogTest, LoadsTheProjectCatalog) {
  ModelTable t = ModelTable::BuiltIn();
  const std::string path = std::string(GPUPOOL_SOURCE_DIR) + "/pool/catalog.yaml";
  ASSERT_TRUE(t.LoadCatalogFile(path).ok()) << t.LoadCatalogFile(path).ToString();
  // bf16 when > 0, else fp16 (T4 has no bf16: 65 TFLOPS fp16).
  EXPECT_EQ(t.Find("H100-SXM")->milli_tflops, 989'500);
  EXPECT_EQ(t.Find("H100-SXM")->vram_mib, 81'920);
  EXPECT_EQ(t.Find("T4")->milli_tflops, 65'000);
  EXPECT_EQ(t.Find("L40S")->milli_tflops, 362'050);
  // The built-in table agrees with the catalog on every model it has.
  const ModelTable builtin = ModelTable::BuiltIn();
  for (const auto& [name, spec] : builtin.models()) {
    ASSERT_NE(t.Find(name), nullptr) << name;
    EXPECT_EQ(t.Find(name)->milli_tflops, spec.milli_tflops) << name;
    EXPECT_EQ(t.Find(name)->vram_mib, spec.vram_mib) << name;
  }
}

TEST(CatalogTest, CatalogErrorsNameFileAndLine) {
  const std::string path = testing::TempDir() + "/bad_catalog.yaml";
  std::ofstream(path) << "models:\n  - name: X1\n    bf16_tflops: lots\n    vram_mib: 1024\n";
  ModelTable t = ModelTable::BuiltIn();
  EXPECT_EQ(t.LoadCatalogFile(path).message(),
            path + ":3: key 'X1.bf16_tflops': expected a number");
}

TEST(CatalogTest, NvmlNames) {
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
    auto m = ModelFromNvmlName(nvml);
    ASSERT_TRUE(m.has_value()) << nvml;
    EXPECT_EQ(*m, model) << nvml;
  }
  EXPECT_FALSE(ModelFromNvmlName("NVIDIA GeForce RTX 4090").has_value());
}

TEST(CatalogTest, MigProfiles) {
  auto p = ParseMigProfile("3g.40gb");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->compute_slices, 3);
  EXPECT_EQ(p->vram_mib, 40 * 1024);
  EXPECT_FALSE(ParseMigProfile("8g.10gb").ok());
  EXPECT_FALSE(ParseMigProfile("g.10gb").ok());
  EXPECT_FALSE(ParseMigProfile("1g.10").ok());
}

SimLayout Layout(const std::string& yaml) {
  auto l = ParseSimLayout(yaml, ModelTable::BuiltIn());
  EXPECT_TRUE(l.ok()) << l.status().ToString();
  return l.ok() ? *l : SimLayout{};
}

TEST(SimulatedBackendTest, DevicesAndMigArithmetic) {
  SimulatedBackend b("n1",
                     Layout("gpus: [{model: H100-SXM, count: 2, mig: {\"1\": [3g.40gb, "
                            "2g.20gb, 1g.10gb]}}]\n"),
                     ModelTable::BuiltIn());
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
}

TEST(SimulatedBackendTest, Topologies) {
  auto links_of = [](const std::string& yaml) {
    SimulatedBackend b("n", Layout(yaml), ModelTable::BuiltIn());
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
  SimulatedBackend a("n", layout, ModelTable::BuiltIn());
  SimulatedBackend b("n", layout, ModelTable::BuiltIn());
  const std::vector<DeviceLoad> load = {{"GPU-sim-n-0", 50, 20'480}};
  for (int i = 0; i < 5; ++i) {
    auto sa = a.Sample(load);
    auto sb = b.Sample(load);
    ASSERT_EQ(sa.size(), 2u);
    EXPECT_EQ(sa[0].utilization_pct, sb[0].utilization_pct);  // same seed, same series
    EXPECT_EQ(sa[0].temperature_c, sb[0].temperature_c);
    EXPECT_NEAR(sa[0].utilization_pct, 50, 3);  // 50% ± 3 noise
    EXPECT_EQ(sa[0].memory_used_mib, 20'480);   // granted VRAM
    // power = 90 + (700 − 90) × util / 100 ≈ 395 W at 50%.
    EXPECT_NEAR(sa[0].power_watts, 395, 25);
    EXPECT_EQ(sa[1].utilization_pct, 0);  // idle device
    EXPECT_EQ(sa[1].power_watts, 90);
    EXPECT_LT(sa[1].temperature_c, sa[0].temperature_c);
  }
}

TEST(SimulatedBackendTest, HealthFromConfigAndOverride) {
  SimulatedBackend b("n", Layout("gpus: [{model: L4, count: 2, unhealthy: [1]}]\n"),
                     ModelTable::BuiltIn());
  EXPECT_TRUE(b.Discover()->devices[0].healthy);
  EXPECT_FALSE(b.Discover()->devices[1].healthy);
  b.SetHealthy("GPU-sim-n-0", false);
  EXPECT_FALSE(b.Discover()->devices[0].healthy);
  auto s = b.Sample({});
  EXPECT_FALSE(s[0].healthy);
  EXPECT_EQ(s[0].xid_errors, 1);
}

TEST(NvmlBackendTest, AbsentLibraryGivesAClearError) {
  auto b = NvmlBackend::Open(ModelTable::BuiltIn(), "libnvidia-ml-absent.so.1");
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(b.status().message(),
            "backend=nvml unavailable: libnvidia-ml-absent.so.1: cannot open shared object "
            "file: No such file or directory; use backend: simulated");
}

TEST(NvmlBackendTest, DefaultLibraryOpensOrSaysWhy) {
  // On a machine with an NVIDIA driver this discovers real GPUs; elsewhere it explains itself.
  auto b = NvmlBackend::Open(ModelTable::BuiltIn());
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
  auto opened = NvmlBackend::Open(ModelTable::BuiltIn(), GPUPOOL_FAKE_NVML);
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
}

}  // namespace
}  // namespace gpupool::agent
