// The agents' device samples on the way to the API: a heartbeat's DeviceMetrics become the
// core's DeviceSample (out-of-range figures clamped), the core keeps the last one per device,
// and GetNode / ListNodes show it with the device's total memory and the time it arrived.
#include <gtest/gtest.h>

#include "api/convert.h"
#include "tests/api/service_harness.h"

namespace gpupool::api {
namespace {

using testing::ServiceHarness;

v1::Heartbeat Beat(int32_t util, int64_t used_mib, int64_t xid) {
  v1::Heartbeat hb;
  v1::DeviceMetrics* m = hb.add_devices();
  m->set_uuid("GPU-0");
  m->set_utilization_pct(util);
  m->set_memory_used_mib(used_mib);
  m->set_power_watts(350);
  m->set_temperature_c(61);
  m->set_ecc_errors(0);
  m->set_xid_errors(xid);
  m->set_healthy(true);
  return hb;
}

TEST(NodeSamples, HeartbeatFiguresAreClampedAtTheEdge) {
  const std::vector<DeviceHealth> d = DeviceHealthFromProto(Beat(140, -5, -1));
  ASSERT_EQ(d.size(), 1u);
  ASSERT_TRUE(d[0].sample.has_value());
  EXPECT_EQ(d[0].sample->utilization_pct, 100);
  EXPECT_EQ(d[0].sample->memory_used_mib, 0);
  EXPECT_EQ(d[0].sample->xid_errors, 0);
  EXPECT_EQ(d[0].sample->power_watts, 350);
}

TEST(NodeSamples, TheLastSampleShowsWithTheNode) {
  ServiceHarness h;
  ASSERT_TRUE(h.CreatePool("gpu").first.ok());
  ASSERT_TRUE(h.RegisterNode("n1", "gpu").ok());

  v1::GetNodeRequest req;
  req.set_name("n1");
  auto [s0, before] = h.Call(&ApiService::GetNode, req);
  ASSERT_TRUE(s0.ok()) << s0.ToString();
  ASSERT_EQ(before.devices_size(), 1);
  EXPECT_FALSE(before.devices(0).has_sample());  // no heartbeat yet

  for (const v1::Heartbeat& hb : {Beat(10, 1000, 0), Beat(87, 61'440, 2)}) {
    h.scheduler->OnHeartbeat("n1", DeviceHealthFromProto(hb));
  }
  h.scheduler->Flush();
  auto [s1, node] = h.Call(&ApiService::GetNode, req);
  ASSERT_TRUE(s1.ok()) << s1.ToString();
  ASSERT_TRUE(node.devices(0).has_sample());
  const v1::DeviceSample& s = node.devices(0).sample();
  EXPECT_EQ(s.utilization_pct(), 87);
  EXPECT_EQ(s.memory_used_mib(), 61'440);
  EXPECT_EQ(s.memory_total_mib(), 81'920);
  EXPECT_EQ(s.power_watts(), 350);
  EXPECT_EQ(s.temperature_c(), 61);
  EXPECT_EQ(s.xid_errors(), 2);
  EXPECT_GT(s.sample_time().seconds(), 0);

  auto [s2, list] = h.Call(&ApiService::ListNodes, v1::ListNodesRequest{});
  ASSERT_TRUE(s2.ok()) << s2.ToString();
  ASSERT_EQ(list.nodes_size(), 1);
  EXPECT_EQ(list.nodes(0).devices(0).sample().utilization_pct(), 87);
}

}  // namespace
}  // namespace gpupool::api
