// Secret env values reach the agent: StartTask carries them in its env beside the plain ones,
// and they survive a restart (the store keeps them; the API never shows them — see
// tests/api/job_secrets_test.cc).
#include <gtest/gtest.h>

#include "tests/scheduler/core_harness.h"

namespace gpupool::testing {
namespace {

TEST(SecretEnv, StartTaskCarriesSecretValuesAndTheyAreStored) {
  std::shared_ptr<MemoryDatabase> db = MemoryStore().database();  // outlives both cores
  int64_t id = 0;
  {
    CoreHarness h(SchedulerOptions::Defaults(), db);
    ASSERT_TRUE(h.CreatePool("gpu").ok());
    JobSpec spec = CoreHarness::Fractional("gpu", 100'000, 1024);
    spec.task_template.env = {{"EPOCHS", "3"}};
    spec.task_template.secret_env = {{"HF_TOKEN", "hf_s3cret"}};
    Result<JobRecord> job = h.Submit(spec);
    ASSERT_TRUE(job.ok()) << job.status().ToString();
    id = job->id;
  }
  CoreHarness h(SchedulerOptions::Defaults(), db);  // restarted: recovered from the store
  EXPECT_EQ(h.core->GetJob(id)->spec.task_template.secret_env.at("HF_TOKEN"), "hf_s3cret");
  ASSERT_TRUE(h.Register("n1", "gpu", 1).ok());
  ASSERT_EQ(h.agents.starts.size(), 1u);
  const StartTaskCommand& cmd = h.agents.starts[0].second;
  EXPECT_EQ(cmd.env.at("EPOCHS"), "3");
  EXPECT_EQ(cmd.env.at("HF_TOKEN"), "hf_s3cret");
}

}  // namespace
}  // namespace gpupool::testing
