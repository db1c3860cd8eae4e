#include "tests/store/store_testing.h"

#include <chrono>
#include <future>
#include <memory>

namespace gpupool::testing {

Status ApplyAndWait(Store& store, std::vector<Mutation> batch) {
  auto promise = std::make_shared<std::promise<Status>>();
  auto future = promise->get_future();
  store.Apply(std::move(batch), [promise](Status s) { promise->set_value(std::move(s)); });
  if (future.wait_for(std::chrono::seconds(60)) != std::future_status::ready) {
    return Status(StatusCode::kDeadlineExceeded, "Apply: no answer within 60 s");
  }
  return future.get();
}

JobRecord SampleJob(int64_t id, int tasks) {
  JobRecord j;
  j.id = id;
  j.spec.tenant = "acme/ml/o'brien";
  j.spec.pool = "gpu-a";
  j.spec.priority_class = "high";
  j.spec.task_count = tasks;
  j.spec.gang = true;
  j.spec.preemptible = true;
  j.spec.max_runtime_ms = 3'600'000;
  j.spec.labels = {{"team", "vision"}, {"quote", "it's \"x\" \\ y"}};
  j.spec.task_template.command = {"python3", "-c", "print('héllo, 世界')", ""};
  j.spec.task_template.env = {{"A", "1"}, {"PATH", "/usr/bin:/bin"}};
  j.spec.task_template.image = "registry.example:5000/team/app:v1";
  j.spec.task_template.registry_credential = "PULL_TOKEN";
  j.spec.task_template.entrypoint = {"/bin/sh", "-c"};
  j.spec.task_template.working_dir = "/work space/o'brien";
  j.spec.task_template.volumes = {{"/data", "imagenet-1k"}, {"/scratch", ""}};
  j.spec.task_template.ports = {{"http", 8080, "tcp"}, {"", 53, "udp"}};
  ResourceRequest& r = j.spec.task_template.resources;
  r.shape = RequestShape::kWholeGpus;
  r.fractional = Resources{12'500, 40'960};
  r.gpu_count = 2;
  r.models = {"H100-SXM", "A100-80GB"};
  r.mig_profile = "1g.10gb";
  r.sku = "large";
  r.cpu_milli = 4000;
  r.memory_mib = 16384;
  j.spec.max_retries = 3;
  j.spec.submitted_by = "token:o'brien";
  j.state = JobState::kRunning;
  j.reason = "submitted";
  j.submit_us = 1'700'000'000'000'000 + id;
  j.finish_us = 0;
  for (int i = 0; i < tasks; ++i) {
    TaskRecord t;
    t.job_id = id;
    t.index = i;
    t.state = TaskState::kScheduled;
    t.node = "node-" + std::to_string(i);
    Allocation a;
    a.device_id = "GPU-" + std::to_string(i);
    a.amount = Resources{1000, 2048};
    a.slots = 2;
    a.exclusive = i % 2 == 0;
    t.allocations = {a};
    t.attempt = 1;
    t.exit_code = -1;
    t.reason = "placed";
    t.scheduled_us = 11;
    t.started_us = 12;
    t.finished_us = 13;
    j.tasks.push_back(t);
  }
  return j;
}

PoolRecord SamplePool(const std::string& name) {
  PoolRecord p;
  p.name = name;
  p.visibility = Visibility::kPrivate;
  p.allowed_tenants = {"acme", "globex"};
  p.placement_strategy = "best-fit";
  p.compute_overcommit = Ratio{1500};
  p.memory_overcommit = Ratio{1000};
  p.sharing_mode = SharingMode::kTimeSliced;
  p.time_slice_replicas = 4;
  p.create_us = 1'700'000'000'000'001;
  p.mps_tenant_isolation = true;
  p.compute_fair = true;
  p.required_capabilities = {"compute_share", "sandbox", "vram_cap"};
  p.network = TaskNetwork::kIsolated;
  p.pinned_images = {"registry.example:5000/ml/pytorch:2.4", "docker.io/library/busybox:1.36"};
  p.mig_relayout = MigRelayout::kDrain;
  return p;
}

NodeRecord SampleNode(const std::string& name, const std::string& pool) {
  NodeRecord n;
  n.name = name;
  n.pool = pool;
  n.state = NodeState::kCordoned;
  n.labels = {{"zone", "eu-1"}, {"rack", "r7"}};
  n.cpu_milli = 64'000;
  n.memory_mib = 512 * 1024;
  n.spill_budget_mib = 8192;
  n.last_heartbeat_us = 1'700'000'000'000'002;
  for (int i = 0; i < 3; ++i) {
    DeviceRecord d;
    d.id = name + "-GPU-" + std::to_string(i);
    d.model = "H100-SXM";
    d.index = i;
    d.physical = Resources{989'000, 81'920};
    d.mig_profile = i == 2 ? "3g.40gb" : "";
    d.parent_id = i == 2 ? name + "-GPU-1" : "";
    d.healthy = i != 1;
    d.numa_node = i / 2;
    d.mig_enabled = i == 1;
    d.mig_start = i == 2 ? 4 : 0;
    n.devices.push_back(d);
  }
  n.links = {LinkRecord{0, 1, LinkKind::kNvlink, 900}, LinkRecord{1, 2, LinkKind::kPcieHost, 64}};
  // Text that needs quoting in an array literal (commas, quotes, braces) and an empty detail.
  n.capabilities = {{"memory", true, "cgroup v1 memory.limit_in_bytes, \"hard\" {limit}"},
                    {"mps", false, "not managed (mps.enabled: false)"},
                    {"xid_events", true, ""}};
  return n;
}

}  // namespace gpupool::testing
