#include "agent/device_metrics.h"

#include <algorithm>
#include <set>
#include <utility>

namespace gpupool::agent {

struct DeviceMetrics::Field {
  prometheus::Family<prometheus::Gauge>* family = nullptr;
  // The series each device currently has; replaced when its labels change (a task came or went).
  std::map<std::string, std::pair<Labels, prometheus::Gauge*>> series;
};

namespace {

std::string Join(const std::set<std::string>& items) {
  std::string out;
  for (const std::string& s : items) {
    if (!out.empty()) out += ',';
    out += s;
  }
  return out;
}

// The device file a whole GPU is opened through; a MIG instance names its parent's.
std::string DeviceFile(const Device& d) { return "nvidia" + std::to_string(d.index); }

}  // namespace

DeviceMetrics::DeviceMetrics(std::shared_ptr<prometheus::Registry> registry, std::string node,
                             std::string pool)
    : registry_(std::move(registry)), node_(std::move(node)), pool_(std::move(pool)) {
  auto field = [this](const char* name, const char* help) {
    auto f = std::make_unique<Field>();
    f->family = &prometheus::BuildGauge().Name(name).Help(help).Register(*registry_);
    fields_.push_back(std::move(f));
    return fields_.back().get();
  };
  util_ = field("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).");
  mem_copy_util_ = field("DCGM_FI_DEV_MEM_COPY_UTIL", "Memory utilization (in %).");
  fb_used_ = field("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).");
  fb_free_ = field("DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB).");
  power_ = field("DCGM_FI_DEV_POWER_USAGE", "Power draw (in W).");
  temp_ = field("DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C).");
  ecc_dbe_ = field("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
                   "Total number of double-bit (uncorrectable) volatile ECC errors.");
  xid_ = field("DCGM_FI_DEV_XID_ERRORS", "Value of the last XID error encountered (0 = none).");
  xid_count_ = field("gpupool_agent_device_xid_errors",
                     "XID errors seen on the device since the agent started.");
  healthy_ = field("gpupool_agent_device_healthy",
                   "1 while the device is healthy and schedulable, 0 after a fatal error.");
  mps_daemons_ = field("gpupool_agent_mps_daemons",
                       "MPS control daemons running for the device (one per tenant with "
                       "mps.isolation: tenant); absent when the agent does not manage MPS.");
  task_info_ = &prometheus::BuildGauge()
                    .Name("gpupool_agent_task_device_info")
                    .Help("1 for each running task and each device it holds (labels for joins).")
                    .Register(*registry_);
}

DeviceMetrics::~DeviceMetrics() = default;

void DeviceMetrics::Set(Field& field, const std::string& uuid, const Labels& labels, double value) {
  auto it = field.series.find(uuid);
  if (it != field.series.end() && it->second.first != labels) {
    field.family->Remove(it->second.second);
    field.series.erase(it);
    it = field.series.end();
  }
  if (it == field.series.end()) {
    it = field.series.emplace(uuid, std::make_pair(labels, &field.family->Add(labels))).first;
  }
  it->second.second->Set(value);
}

void DeviceMetrics::Drop(Field& field, const std::string& uuid) {
  auto it = field.series.find(uuid);
  if (it == field.series.end()) return;
  field.family->Remove(it->second.second);
  field.series.erase(it);
}

void DeviceMetrics::Observe(const Inventory& inventory, const std::vector<DeviceSample>& samples,
                            const std::vector<TaskStatus>& running) {
  std::map<std::string, const Device*> devices;
  for (const Device& d : inventory.devices) devices[d.uuid] = &d;
  std::map<std::string, std::set<std::string>> tasks_on, tenants_on;
  std::map<Labels, bool> info_now;
  for (const TaskStatus& t : running) {
    for (const DeviceGrant& g : t.devices) {
      tasks_on[g.uuid].insert(t.task_id);
      tenants_on[g.uuid].insert(t.tenant);
      info_now[{{"task", t.task_id},
                {"tenant", t.tenant},
                {"UUID", g.uuid},
                {"Hostname", node_},
                {"pool", pool_}}] = true;
    }
  }

  std::set<std::string> seen;
  for (const DeviceSample& s : samples) {
    auto d = devices.find(s.uuid);
    if (d == devices.end()) continue;
    const Device& dev = *d->second;
    seen.insert(s.uuid);
    Labels labels{{"gpu", std::to_string(dev.index)},
                  {"UUID", dev.uuid},
                  {"device", DeviceFile(dev)},
                  {"model_name", dev.model},
                  {"Hostname", node_},
                  {"pool", pool_},
                  {"tenant", Join(tenants_on[s.uuid])},
                  {"task", Join(tasks_on[s.uuid])}};
    if (!dev.mig_profile.empty()) labels["GPU_I_PROFILE"] = dev.mig_profile;
    Set(*util_, s.uuid, labels, s.utilization_pct);
    if (s.memory_util_pct >= 0) {
      Set(*mem_copy_util_, s.uuid, labels, s.memory_util_pct);
    } else {
      Drop(*mem_copy_util_, s.uuid);
    }
    Set(*fb_used_, s.uuid, labels, static_cast<double>(s.memory_used_mib));
    Set(*fb_free_, s.uuid, labels,
        static_cast<double>(std::max<int64_t>(0, dev.vram_mib - s.memory_used_mib)));
    Set(*power_, s.uuid, labels, s.power_watts);
    Set(*temp_, s.uuid, labels, s.temperature_c);
    Set(*ecc_dbe_, s.uuid, labels, static_cast<double>(s.ecc_errors));
    Set(*xid_, s.uuid, labels, s.last_xid);
    Set(*xid_count_, s.uuid, labels, static_cast<double>(s.xid_errors));
    Set(*healthy_, s.uuid, labels, s.healthy ? 1 : 0);
    if (s.mps_daemons >= 0) {
      Set(*mps_daemons_, s.uuid, labels, s.mps_daemons);
    } else {
      Drop(*mps_daemons_, s.uuid);
    }
  }
  for (auto& field : fields_) {
    std::vector<std::string> gone;
    for (const auto& [uuid, series] : field->series) {
      if (!seen.count(uuid)) gone.push_back(uuid);
    }
    for (const std::string& uuid : gone) Drop(*field, uuid);
  }

  for (auto it = task_info_series_.begin(); it != task_info_series_.end();) {
    if (info_now.count(it->first)) {
      ++it;
      continue;
    }
    task_info_->Remove(it->second);
    it = task_info_series_.erase(it);
  }
  for (const auto& [labels, unused] : info_now) {
    if (task_info_series_.count(labels)) continue;
    prometheus::Gauge& g = task_info_->Add(labels);
    g.Set(1);
    task_info_series_.emplace(labels, &g);
  }
}

}  // namespace gpupool::agent
