// End to end: a real gpupoold on its embedded PostgreSQL, submissions over real gRPC, kill -9,
// restart — every acknowledged job must still be there.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <atomic>
#include <fstream>
#include <mutex>
#include <set>
#include <thread>

#include "gpupool/v1/jobs.grpc.pb.h"
#include "gpupool/v1/pools.grpc.pb.h"
#include "tests/support/daemon_process.h"

namespace gpupool {
namespace {

using testing::DaemonProcess;

v1::SubmitJobRequest SmallJob(int i) {
  v1::SubmitJobRequest req;
  v1::JobSpec* spec = req.mutable_spec();
  spec->set_tenant("acme/research/alice");
  spec->set_pool("gpu");
  spec->set_task_count(1);
  spec->mutable_template_()->add_command("/bin/echo");
  spec->mutable_template_()->add_command("job-" + std::to_string(i));
  auto* frac = spec->mutable_template_()->mutable_resources()->mutable_fractional();
  frac->set_milli_tflops(10'000);
  frac->set_vram_mib(1024);
  return req;
}

void CreatePool(const std::string& address) {
  auto stub =
      v1::PoolService::NewStub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  v1::CreatePoolRequest req;
  req.mutable_pool()->set_name("gpu");
  req.mutable_pool()->set_visibility(v1::VISIBILITY_PUBLIC);
  req.mutable_pool()->set_sharing_mode(v1::SHARING_MODE_FRACTIONAL);
  v1::Pool pool;
  grpc::Status st = stub->CreatePool(&ctx, req, &pool);
  ASSERT_TRUE(st.ok()) << st.error_message();
}

std::set<std::string> ListAllJobIds(const std::string& address) {
  auto stub =
      v1::JobService::NewStub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  std::set<std::string> ids;
  std::string token;
  do {
    grpc::ClientContext ctx;
    v1::ListJobsRequest req;
    req.set_page_size(1000);
    req.set_page_token(token);
    v1::ListJobsResponse resp;
    grpc::Status st = stub->ListJobs(&ctx, req, &resp);
    EXPECT_TRUE(st.ok()) << st.error_message();
    if (!st.ok()) break;
    for (const v1::Job& j : resp.jobs()) ids.insert(j.id());
    token = resp.next_page_token();
  } while (!token.empty());
  return ids;
}

// The daemon's resident memory in KiB (VmRSS), or -1.
int64_t ResidentKib(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with("VmRSS:")) return std::stoll(line.substr(6));
  }
  return -1;
}

// A restarted gpupoold holds its state once. It used to keep the recovered snapshot beside the
// core's own tables for its whole life, so a restart doubled the memory a deep queue took
// (224 MB fresh, 458 MB restarted with 95,000 queued jobs; docs/benchmarks.md, "Restart with a
// deep queue"). 100,000 queued tasks make the difference plain; memory, not time, is compared.
TEST(DurabilityTest, ARestartedDaemonHoldsItsRecoveredStateOnce) {
  auto d = DaemonProcess::Start({});
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  DaemonProcess& daemon = **d;
  CreatePool(daemon.grpc_address());
  auto stub = v1::JobService::NewStub(
      grpc::CreateChannel(daemon.grpc_address(), grpc::InsecureChannelCredentials()));
  for (int i = 0; i < 10; ++i) {
    v1::SubmitJobRequest req = SmallJob(i);
    req.mutable_spec()->set_task_count(10'000);
    grpc::ClientContext ctx;
    v1::SubmitJobResponse resp;
    grpc::Status st = stub->SubmitJob(&ctx, req, &resp);
    ASSERT_TRUE(st.ok()) << st.error_message();
  }
  std::this_thread::sleep_for(std::chrono::seconds(1));
  const int64_t fresh = ResidentKib(daemon.pid());
  ASSERT_EQ(daemon.Stop(), 0) << daemon.LogTail(20);
  Status back = daemon.Restart();
  ASSERT_TRUE(back.ok()) << back.ToString();
  std::this_thread::sleep_for(std::chrono::seconds(1));
  const int64_t restarted = ResidentKib(daemon.pid());
  ASSERT_GT(fresh, 0);
  EXPECT_LT(restarted, fresh * 3 / 2)
      << "fresh " << fresh << " KiB, restarted " << restarted << " KiB";
  EXPECT_EQ(daemon.Stop(), 0) << daemon.LogTail(20);
}

TEST(DurabilityTest, AcknowledgedJobsSurviveKill9) {
  Result<std::unique_ptr<DaemonProcess>> started = DaemonProcess::Start({});
  ASSERT_TRUE(started.ok()) << started.status().ToString();
  DaemonProcess& daemon = **started;
  CreatePool(daemon.grpc_address());

  // 16 clients submit as fast as they can; after 300 acknowledgements the daemon is killed
  // while submissions are still in flight.
  std::mutex mu;
  std::set<std::string> acked;
  std::atomic<bool> stop{false};
  std::atomic<int> count{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < 16; ++c) {
    clients.emplace_back([&, c] {
      auto stub = v1::JobService::NewStub(
          grpc::CreateChannel(daemon.grpc_address(), grpc::InsecureChannelCredentials()));
      for (int i = 0; !stop.load(); ++i) {
        grpc::ClientContext ctx;
        ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
        v1::SubmitJobResponse resp;
        if (stub->SubmitJob(&ctx, SmallJob(c * 100000 + i), &resp).ok()) {
          std::lock_guard<std::mutex> lock(mu);
          acked.insert(resp.job_id());
          ++count;
        }
      }
    });
  }
  while (count.load() < 300) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  daemon.Kill9();
  stop = true;
  for (std::thread& t : clients) t.join();
  ASSERT_GE(acked.size(), 300u);

  Status restarted = daemon.Restart();
  ASSERT_TRUE(restarted.ok()) << restarted.ToString();
  std::set<std::string> stored = ListAllJobIds(daemon.grpc_address());
  std::vector<std::string> missing;
  for (const std::string& id : acked) {
    if (!stored.contains(id)) missing.push_back(id);
  }
  EXPECT_TRUE(missing.empty()) << missing.size() << " acknowledged job(s) lost, e.g. "
                               << missing.front();
  EXPECT_EQ(daemon.Stop(), 0) << daemon.LogTail(20);
}

}  // namespace
}  // namespace gpupool
