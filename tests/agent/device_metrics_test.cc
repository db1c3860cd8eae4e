// DeviceMetrics: DCGM-named series with the exporter's labels plus pool, tenant and task, and
// series that follow tasks coming and going (no stale label sets left behind).
#include "agent/device_metrics.h"

#include <gtest/gtest.h>
#include <prometheus/text_serializer.h>

namespace gpupool::agent {
namespace {

std::string Scrape(prometheus::Registry& registry) {
  return prometheus::TextSerializer().Serialize(registry.Collect());
}

bool Has(const std::string& text, const std::string& line) {
  return text.find(line) != std::string::npos;
}

class DeviceMetricsTest : public ::testing::Test {
 protected:
  DeviceMetricsTest() {
    Device gpu;
    gpu.uuid = "GPU-0";
    gpu.model = "H100-SXM";
    gpu.index = 0;
    gpu.vram_mib = 81920;
    Device mig;
    mig.uuid = "MIG-1-0";
    mig.model = "H100-SXM";
    mig.index = 1;
    mig.vram_mib = 10240;
    mig.mig_profile = "1g.10gb";
    mig.parent_uuid = "GPU-1";
    inventory_.devices = {gpu, mig};
  }

  DeviceSample Sample(const std::string& uuid, int util, int64_t used_mib) {
    DeviceSample s;
    s.uuid = uuid;
    s.utilization_pct = util;
    s.memory_used_mib = used_mib;
    s.power_watts = 350;
    s.temperature_c = 61;
    s.memory_util_pct = util / 2;
    return s;
  }

  TaskStatus Task(const std::string& id, const std::string& tenant, const std::string& uuid) {
    TaskStatus t;
    t.task_id = id;
    t.tenant = tenant;
    DeviceGrant g;
    g.uuid = uuid;
    t.devices.push_back(g);
    return t;
  }

  std::shared_ptr<prometheus::Registry> registry_ = std::make_shared<prometheus::Registry>();
  DeviceMetrics metrics_{registry_, "node-a", "shared"};
  Inventory inventory_;
};

TEST_F(DeviceMetricsTest, DcgmNamesWithExporterLabelsPoolTenantAndTask) {
  metrics_.Observe(inventory_, {Sample("GPU-0", 80, 20480), Sample("MIG-1-0", 0, 0)},
                   {Task("7.0", "acme/ml/ann", "GPU-0"), Task("8.0", "globex/x/bob", "GPU-0")});
  const std::string text = Scrape(*registry_);
  // Two tenants share GPU-0 (fractional): both appear, sorted and comma-joined.
  const std::string gpu0 =
      R"({Hostname="node-a",UUID="GPU-0",device="nvidia0",gpu="0",model_name="H100-SXM",)"
      R"(pool="shared",task="7.0,8.0",tenant="acme/ml/ann,globex/x/bob"})";
  EXPECT_TRUE(Has(text, "DCGM_FI_DEV_GPU_UTIL" + gpu0 + " 80")) << text;
  EXPECT_TRUE(Has(text, "DCGM_FI_DEV_MEM_COPY_UTIL" + gpu0 + " 40")) << text;
  EXPECT_TRUE(Has(text, "DCGM_FI_DEV_FB_USED" + gpu0 + " 20480")) << text;
  EXPECT_TRUE(Has(text, "DCGM_FI_DEV_FB_FREE" + gpu0 + " 61440")) << text;  // 81920 - 20480
  EXPECT_TRUE(Has(text, "DCGM_FI_DEV_POWER_USAGE" + gpu0 + " 350")) << text;
  EXPECT_TRUE(Has(text, "DCGM_FI_DEV_GPU_TEMP" + gpu0 + " 61")) << text;
  EXPECT_TRUE(Has(text, "DCGM_FI_DEV_XID_ERRORS" + gpu0 + " 0")) << text;
  EXPECT_TRUE(Has(text, "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL" + gpu0 + " 0")) << text;
  // A MIG instance carries its profile, like the DCGM exporter's GPU_I_PROFILE; idle: no task.
  EXPECT_TRUE(Has(text, R"(DCGM_FI_DEV_GPU_UTIL{GPU_I_PROFILE="1g.10gb",Hostname="node-a",)"
                        R"(UUID="MIG-1-0",device="nvidia1",gpu="1",model_name="H100-SXM",)"
                        R"(pool="shared",task="",tenant=""} 0)"))
      << text;
  EXPECT_TRUE(Has(text, R"(gpupool_agent_task_device_info{Hostname="node-a",UUID="GPU-0",)"
                        R"(pool="shared",task="7.0",tenant="acme/ml/ann"} 1)"))
      << text;
}

TEST_F(DeviceMetricsTest, SeriesFollowTasksAndUnknownFieldsAreLeftOut) {
  metrics_.Observe(inventory_, {Sample("GPU-0", 80, 20480), Sample("MIG-1-0", 0, 0)},
                   {Task("7.0", "acme/ml/ann", "GPU-0")});
  DeviceSample no_bandwidth = Sample("GPU-0", 5, 0);
  no_bandwidth.memory_util_pct = -1;  // the backend cannot tell
  no_bandwidth.healthy = false;
  no_bandwidth.last_xid = 79;
  no_bandwidth.xid_errors = 1;
  metrics_.Observe(inventory_, {no_bandwidth, Sample("MIG-1-0", 0, 0)}, {});
  const std::string text = Scrape(*registry_);
  EXPECT_FALSE(Has(text, "7.0")) << text;  // the task ended: no series keeps its label
  EXPECT_FALSE(Has(text, "gpupool_agent_task_device_info{")) << text;
  EXPECT_FALSE(Has(text, R"(DCGM_FI_DEV_MEM_COPY_UTIL{Hostname="node-a",UUID="GPU-0")")) << text;
  const std::string gpu0 =
      R"({Hostname="node-a",UUID="GPU-0",device="nvidia0",gpu="0",model_name="H100-SXM",)"
      R"(pool="shared",task="",tenant=""})";
  EXPECT_TRUE(Has(text, "DCGM_FI_DEV_GPU_UTIL" + gpu0 + " 5")) << text;
  EXPECT_TRUE(Has(text, "DCGM_FI_DEV_XID_ERRORS" + gpu0 + " 79")) << text;
  EXPECT_TRUE(Has(text, "gpupool_agent_device_xid_errors" + gpu0 + " 1")) << text;
  EXPECT_TRUE(Has(text, "gpupool_agent_device_healthy" + gpu0 + " 0")) << text;
  // A device that disappears from the samples takes its series with it.
  metrics_.Observe(inventory_, {Sample("MIG-1-0", 0, 0)}, {});
  EXPECT_FALSE(Has(Scrape(*registry_), R"(UUID="GPU-0")"));
}

}  // namespace
}  // namespace gpupool::agent
