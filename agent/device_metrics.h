// DeviceMetrics: the agent's device samples as Prometheus gauges named like NVIDIA's DCGM
// exporter, so dashboards and alerts written for DCGM work against gpupool-agent unchanged.
//
// One series per device and field (DCGM_FI_DEV_GPU_UTIL, DCGM_FI_DEV_FB_USED, …), labelled like
// the DCGM exporter (gpu, UUID, device, Hostname; GPU_I_PROFILE for a MIG instance) except that
// the model is model_name, not DCGM's camel-case modelName, which promtool's linter rejects; plus
// gpupool's own labels: pool and, while tasks run there, tenant and task. A device shared by
// several tasks (fractional, time-sliced) carries their sorted, comma-joined ids; for joins,
// gpupool_agent_task_device_info{task, tenant, UUID, …} is 1 for each task and device it holds.
// Fields a backend does not report (memory bandwidth utilisation on some devices) are left out
// rather than exported as 0.
//
// Thread safety: Observe() is called from the agent's strand; the registry is read by the
// exporter's threads (prometheus-cpp's families are internally synchronised).
#pragma once

#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "agent/backend.h"
#include "agent/task_runner.h"

namespace gpupool::agent {

class DeviceMetrics {
 public:
  DeviceMetrics(std::shared_ptr<prometheus::Registry> registry, std::string node, std::string pool);
  ~DeviceMetrics();
  DeviceMetrics(const DeviceMetrics&) = delete;
  DeviceMetrics& operator=(const DeviceMetrics&) = delete;

  // One heartbeat's samples (same order as inventory.devices, as backends return them) and the
  // tasks running on this node. Series of devices and tasks no longer present are removed.
  void Observe(const Inventory& inventory, const std::vector<DeviceSample>& samples,
               const std::vector<TaskStatus>& running);

 private:
  using Labels = std::map<std::string, std::string>;
  struct Field;  // one DCGM field: its family and the label set of each device's series

  void Set(Field& field, const std::string& uuid, const Labels& labels, double value);
  void Drop(Field& field, const std::string& uuid);

  const std::shared_ptr<prometheus::Registry> registry_;
  const std::string node_;
  const std::string pool_;
  std::vector<std::unique_ptr<Field>> fields_;
  Field* util_;
  Field* mem_copy_util_;
  Field* fb_used_;
  Field* fb_free_;
  Field* power_;
  Field* temp_;
  Field* ecc_dbe_;
  Field* xid_;
  Field* xid_count_;
  Field* healthy_;
  Field* mps_daemons_;
  prometheus::Family<prometheus::Gauge>* task_info_;
  std::map<Labels, prometheus::Gauge*> task_info_series_;
};

}  // namespace gpupool::agent
