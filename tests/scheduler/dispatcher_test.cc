// Dispatcher: the StartTask / StopTask commands built from a task, and the MPS share policy.
#include "scheduler/dispatcher.h"

#include <gtest/gtest.h>

namespace gpupool {
namespace {

TEST(MpsPolicyTest, PercentageOfTheDeviceRoundedUpWithinOneToHundred) {
  struct Case {
    int64_t granted, device;
    bool exclusive;
    int32_t want;
  };
  for (const Case& c : std::vector<Case>{
           {247'000, 989'000, false, 25},  // 24.97% → 25
           {989'000, 989'000, false, 100},
           {1, 989'000, false, 1},            // never starved: at least 1%
           {2'000'000, 989'000, false, 100},  // never above 100
           {100'000, 989'000, true, 100},     // exclusive: the whole device
           {100'000, 0, false, 100},          // compute unknown
       }) {
    EXPECT_EQ(MpsThreadPercentage(c.granted, c.device, c.exclusive), c.want)
        << c.granted << "/" << c.device;
  }
}

TEST(DispatcherTest, BuildsStartFromTheTaskAndStopWithGraceAndEpoch) {
  JobEntry job;
  job.head.id = 12;
  job.head.spec.tenant = "acme/research";
  job.head.spec.max_runtime_ms = 60'000;
  job.head.spec.task_template.command = {"python", "train.py"};
  job.head.spec.task_template.env = {{"EPOCHS", "3"}};
  job.head.spec.task_template.secret_env = {{"PULL", "robot:s3cret"}};
  job.head.spec.task_template.image = "registry.local/private/app:1";
  job.head.spec.task_template.registry_credential = "PULL";
  job.head.spec.task_template.entrypoint = {"/bin/sh", "-c"};
  job.head.spec.task_template.working_dir = "/scratch";
  job.head.spec.task_template.volumes = {{"/data", "imagenet"}, {"/scratch", ""}};
  job.head.spec.task_template.resources.cpu_milli = 2000;
  job.head.spec.task_template.resources.memory_mib = 4096;
  job.tasks.resize(2);
  TaskRecord& t = job.task(1).rec;
  t.job_id = 12;
  t.index = 1;
  t.attempt = 2;
  t.node = "n1";
  t.allocations = {Allocation{"GPU-a", Resources{494'500, 40'960}, 0, false},
                   Allocation{"GPU-b", Resources{989'000, 81'920}, 0, true}};
  NodeRecord node;
  node.name = "n1";
  for (const char* id : {"GPU-a", "GPU-b"}) {
    DeviceRecord d;
    d.id = id;
    d.physical = Resources{989'000, 81'920};
    node.devices.push_back(d);
  }

  StartTaskCommand s = Dispatcher::BuildStart(job, 1, &node, 7);
  EXPECT_EQ(s.task_id, "12.1");
  EXPECT_EQ(s.job_id, 12);
  EXPECT_EQ(s.tenant, "acme/research");
  EXPECT_EQ(s.attempt, 2);
  EXPECT_EQ(s.argv, (std::vector<std::string>{"python", "train.py"}));
  EXPECT_EQ(s.env.at("EPOCHS"), "3");
  // The pull credential travels as a named env entry; the agent takes it out of the task's.
  EXPECT_EQ(s.env.at("PULL"), "robot:s3cret");
  EXPECT_EQ(s.image, "registry.local/private/app:1");
  EXPECT_EQ(s.registry_credential_env, "PULL");
  EXPECT_EQ(s.entrypoint, (std::vector<std::string>{"/bin/sh", "-c"}));
  EXPECT_EQ(s.working_dir, "/scratch");
  EXPECT_EQ(s.volumes, job.head.spec.task_template.volumes);
  EXPECT_EQ(s.max_runtime_ms, 60'000);
  EXPECT_EQ(s.epoch, 7);
  EXPECT_EQ(s.cpu_milli, 2000);
  EXPECT_EQ(s.memory_mib, 4096);
  ASSERT_EQ(s.devices.size(), 2u);
  EXPECT_EQ(s.devices[0].uuid, "GPU-a");
  EXPECT_EQ(s.devices[0].vram_mib, 40'960);
  EXPECT_EQ(s.devices[0].thread_percentage, 50);  // half the device's TFLOPS
  EXPECT_EQ(s.devices[1].thread_percentage, 100);

  // Without the node's devices (an unknown node): every grant at 100%.
  EXPECT_EQ(Dispatcher::BuildStart(job, 1, nullptr, 7).devices[0].thread_percentage, 100);

  // The pool's MPS isolation travels with the start; no pool, or a pool without it: none.
  EXPECT_FALSE(s.mps_tenant_isolation);
  PoolRecord pool;
  pool.name = "gpu";
  EXPECT_FALSE(Dispatcher::BuildStart(job, 1, &node, 7, &pool).mps_tenant_isolation);
  pool.mps_tenant_isolation = true;
  EXPECT_TRUE(Dispatcher::BuildStart(job, 1, &node, 7, &pool).mps_tenant_isolation);
  // So does its compute sharing.
  EXPECT_FALSE(s.compute_fair);
  pool.compute_fair = true;
  EXPECT_TRUE(Dispatcher::BuildStart(job, 1, &node, 7, &pool).compute_fair);
  // So does its network; no pool: each node's default.
  EXPECT_EQ(s.network, TaskNetwork::kNodeDefault);
  pool.network = TaskNetwork::kIsolated;
  EXPECT_EQ(Dispatcher::BuildStart(job, 1, &node, 7, &pool).network, TaskNetwork::kIsolated);

  Dispatcher d(nullptr, 10'000, [](const std::string&) { return nullptr; });
  d.set_epoch(9);
  StopTaskCommand stop = d.BuildStop(job, 1, "preempted");
  EXPECT_EQ(stop.task_id, "12.1");
  EXPECT_EQ(stop.attempt, 2);
  EXPECT_EQ(stop.grace_period_ms, 10'000);
  EXPECT_EQ(stop.reason, "preempted");
  EXPECT_EQ(stop.epoch, 9);
}

}  // namespace
}  // namespace gpupool
