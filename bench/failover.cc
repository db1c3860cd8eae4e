// failover: leader takeover time of gpupoold replicas (docs/ha.md, "Leader election").
//
// Starts a PostgreSQL server of its own, three gpupoold replicas on it (`ha.enabled`, lease
// --lease-ms) and --agents simulated agents that know all three addresses, and a submitter that
// submits one-task jobs back to back through the address list. Then --kills times: find the
// leader, kill it with -9, and time until another replica answers an API call (kill → new
// leader serving: lease expiry + the standby's poll + recovery + listening); the killed replica
// is restarted as a standby. At the end every acknowledged job must still be known to the
// leader (GetJob). Prints p50/p90/p99/max of the takeover time, the time until the submitter
// (following standbys' NotLeader answers, api/client/leader_follow.h) has a submission
// acknowledged again, acknowledged and lost jobs; --json FILE writes them.
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <thread>

#include "gpupool/v1/jobs.grpc.pb.h"
#include "gpupool/v1/pools.grpc.pb.h"
#include "tests/support/agent_process.h"
#include "tests/support/daemon_process.h"
#include "tests/support/leader_client.h"
#include "tests/support/pg_fixture.h"

namespace gpupool {
namespace {

using namespace std::chrono_literals;
using testing::DaemonProcess;

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

int Run(int argc, char** argv) {
  int kills = 20, agents = 1, lease_ms = 1000;
  std::string json;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string { return i + 1 < argc ? argv[++i] : "0"; };
    if (a == "--kills")
      kills = std::stoi(value());
    else if (a == "--agents")
      agents = std::stoi(value());
    else if (a == "--lease-ms")
      lease_ms = std::stoi(value());
    else if (a == "--json")
      json = value();
    else {
      std::printf("usage: failover [--kills N] [--agents N] [--lease-ms MS] [--json FILE]\n");
      return a == "--help" ? 0 : 2;
    }
  }
  auto pg = testing::TestPostgres::Start({.fsync = true});
  if (!pg.ok()) {
    std::fprintf(stderr, "cannot start PostgreSQL: %s\n", pg.status().ToString().c_str());
    return 1;
  }
  Result<std::string> uri = (*pg)->CreateDatabase();
  Result<std::string> dir = testing::MakeTempDir("gpupool-failover");
  if (!uri.ok() || !dir.ok()) return 1;
  std::ofstream(*dir + "/gpupoold.yaml")
      << "scheduler:\n  heartbeat_interval_ms: 500\n  heartbeat_timeout_ms: 10000\n"
      << "ha:\n  enabled: true\n  lease_ms: " << lease_ms << "\n";
  std::vector<std::unique_ptr<DaemonProcess>> replicas;
  std::string targets;
  for (int i = 0; i < 3; ++i) {
    auto d = DaemonProcess::Start(
        {.data_dir = "",
         .extra_args = {"--config", *dir + "/gpupoold.yaml", "--database", *uri},
         .wait_until_serving = false});
    if (!d.ok()) {
      std::fprintf(stderr, "cannot start gpupoold: %s\n", d.status().ToString().c_str());
      return 1;
    }
    targets += (i ? "," : "") + (*d)->grpc_address();
    replicas.push_back(std::move(d).value());
  }
  auto leader = [&](std::chrono::milliseconds timeout, int skip) {
    const auto end = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < end) {
      for (int i = 0; i < 3; ++i) {
        if (i != skip && replicas[static_cast<size_t>(i)]->Serving()) return i;
      }
      std::this_thread::sleep_for(5ms);
    }
    return -1;
  };
  if (leader(60s, -1) < 0) {
    std::fprintf(stderr, "no replica leads\n");
    return 1;
  }
  // Clients follow the leader as gpupoolctl does: a standby's NotLeader names it
  // (api/client/leader_follow.h).
  testing::LeaderClient admin(targets);
  {
    v1::CreatePoolRequest req;
    req.mutable_pool()->set_name("gpu");
    v1::Pool p;
    grpc::Status st = admin.Call([&](auto ch, grpc::ClientContext* ctx) {
      return v1::PoolService::NewStub(ch)->CreatePool(ctx, req, &p);
    });
    if (!st.ok()) {
      std::fprintf(stderr, "create pool: %s\n", st.error_message().c_str());
      return 1;
    }
  }
  std::vector<std::unique_ptr<testing::ChildProcess>> agent_procs;
  for (int i = 0; i < agents; ++i) {
    testing::AgentProcessOptions o;
    o.dir = *dir;
    o.node = "node-" + std::to_string(i);
    o.scheduler = targets;
    o.gpus = 8;
    o.heartbeat_interval_ms = 500;
    auto a = testing::StartAgentProcess(o);
    if (a.ok()) agent_procs.push_back(std::move(a).value());
  }
  std::atomic<bool> stop{false};
  std::mutex mu;
  std::vector<std::string> acknowledged;
  std::atomic<int64_t> refused{0};
  // When the submitter's latest acknowledgement came (steady clock, µs).
  std::atomic<int64_t> last_ack_us{0};
  auto now_us = [] {
    return std::chrono::duration_cast<std::chrono::microseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  };
  std::thread submitter([&] {
    testing::LeaderClient client(targets);
    while (!stop) {
      v1::SubmitJobRequest req;
      v1::JobSpec* s = req.mutable_spec();
      s->set_tenant("acme/bench/failover");
      s->set_pool("gpu");
      s->set_task_count(1);
      s->mutable_template_()->add_command("/bin/true");
      s->mutable_template_()->mutable_resources()->mutable_whole_gpus()->set_count(1);
      v1::SubmitJobResponse resp;
      grpc::Status st = client.Call(
          [&](auto ch, grpc::ClientContext* ctx) {
            return v1::JobService::NewStub(ch)->SubmitJob(ctx, req, &resp);
          },
          2s);
      if (st.ok()) {
        std::lock_guard lock(mu);
        acknowledged.push_back(resp.job_id());
        last_ack_us = now_us();
      } else {
        if (refused++ % 1000 == 0) {
          std::fprintf(stderr, "refused: %s\n", st.error_message().c_str());
        }
        std::this_thread::sleep_for(5ms);
      }
    }
  });
  std::vector<double> takeover_ms, client_ms, post_lease_ms;
  // The new leader's own account of the part after it won the lease (recovery, opening its
  // ports): ms_since_lease on its "ready" log line.
  auto post_lease = [&](int i) -> double {
    const std::string tail = replicas[static_cast<size_t>(i)]->LogTail(40);
    const size_t ready = tail.rfind("msg=ready");
    if (ready == std::string::npos) return -1;
    const size_t at = tail.find("ms_since_lease=", ready);
    if (at == std::string::npos) return -1;
    return std::atof(tail.c_str() + at + 15);
  };
  for (int k = 0; k < kills; ++k) {
    const int old = leader(60s, -1);
    if (old < 0) break;
    std::this_thread::sleep_for(500ms);  // let the submitter and agents settle on the leader
    const auto killed = std::chrono::steady_clock::now();
    replicas[static_cast<size_t>(old)]->Kill9();
    const int next = leader(60s, old);
    if (next < 0) {
      std::fprintf(stderr, "kill %d: no standby took over\n", k);
      break;
    }
    takeover_ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - killed)
            .count());
    // Kill → the submitter's first acknowledgement from the new leader (it followed a standby's
    // NotLeader or went back to the address list).
    const int64_t killed_us =
        std::chrono::duration_cast<std::chrono::microseconds>(killed.time_since_epoch()).count();
    const auto wait_end = std::chrono::steady_clock::now() + 30s;
    while (last_ack_us.load() <= killed_us && std::chrono::steady_clock::now() < wait_end) {
      std::this_thread::sleep_for(2ms);
    }
    if (const double ms = post_lease(next); ms >= 0) post_lease_ms.push_back(ms);
    if (last_ack_us.load() > killed_us) {
      client_ms.push_back(static_cast<double>(last_ack_us.load() - killed_us) / 1000.0);
    }
    std::printf("kill %2d: replica %d -> %d in %.0f ms (client acknowledged after %.0f ms)\n", k,
                old, next, takeover_ms.back(), client_ms.empty() ? 0.0 : client_ms.back());
    (void)replicas[static_cast<size_t>(old)]->Restart();
  }
  stop = true;
  submitter.join();
  int lost = 0;
  for (const std::string& id : acknowledged) {
    v1::GetJobRequest req;
    req.set_job_id(id);
    v1::Job job;
    grpc::Status st = admin.Call(
        [&](auto ch, grpc::ClientContext* ctx) {
          return v1::JobService::NewStub(ch)->GetJob(ctx, req, &job);
        },
        10s);
    if (!st.ok()) {
      if (lost++ == 0) std::fprintf(stderr, "job %s: %s\n", id.c_str(), st.error_message().c_str());
    }
  }
  const double p50 = Percentile(takeover_ms, 0.5), p90 = Percentile(takeover_ms, 0.9),
               p99 = Percentile(takeover_ms, 0.99),
               max = takeover_ms.empty()
                         ? 0
                         : *std::max_element(takeover_ms.begin(), takeover_ms.end());
  const double c50 = Percentile(client_ms, 0.5), c99 = Percentile(client_ms, 0.99);
  const double l50 = Percentile(post_lease_ms, 0.5), l99 = Percentile(post_lease_ms, 0.99);
  std::printf("\nafter winning the lease (recover + serve): p50 %.0f ms, p99 %.0f ms\n", l50, l99);
  std::printf(
      "\nkills  lease_ms  takeover p50  p90  p99  max (ms)  client p50  p99 (ms)   acknowledged  "
      "lost  refused\n");
  std::printf("%5zu  %8d  %12.0f %4.0f %4.0f %4.0f        %10.0f %4.0f        %12zu  %4d  %7lld\n",
              takeover_ms.size(), lease_ms, p50, p90, p99, max, c50, c99, acknowledged.size(), lost,
              static_cast<long long>(refused.load()));
  if (!json.empty()) {
    std::ofstream(json) << "{\"benchmark\":\"failover\",\"kills\":" << takeover_ms.size()
                        << ",\"lease_ms\":" << lease_ms << ",\"p50_ms\":" << p50
                        << ",\"p90_ms\":" << p90 << ",\"p99_ms\":" << p99 << ",\"max_ms\":" << max
                        << ",\"client_p50_ms\":" << c50 << ",\"client_p99_ms\":" << c99
                        << ",\"post_lease_p50_ms\":" << l50 << ",\"post_lease_p99_ms\":" << l99
                        << ",\"acknowledged\":" << acknowledged.size() << ",\"lost\":" << lost
                        << "}\n";
  }
  for (auto& a : agent_procs) a->Signal(SIGTERM);
  return lost == 0 && static_cast<int>(takeover_ms.size()) == kills ? 0 : 1;
}

}  // namespace
}  // namespace gpupool

int main(int argc, char** argv) { return gpupool::Run(argc, argv); }
