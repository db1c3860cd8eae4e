// ledger_write: how fast the usage ledger is written with many running tasks.
//
// A Core (the daemon's own scheduling core) on a PgStore over a throwaway PostgreSQL with fsync
// ON, an injected clock and agents that accept everything: --tasks fractional tasks are placed on
// simulated 8-GPU nodes and hold their slices; then the clock jumps past --boundaries interval
// boundaries, one at a time, and each boundary's tick closes one interval of every running task
// (batches of metering.max_intervals_per_batch rows, folded by group commit). Reported per
// boundary: rows written, wall time from the tick until every batch is durable, the rate, and the
// core-thread time the tick itself took (building the rows). Prints a table; --json FILE writes
// the figures.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "base/clock.h"
#include "scheduler/core.h"
#include "store/pg_store.h"
#include "tests/support/completion_loop.h"
#include "tests/support/pg_fixture.h"

namespace gpupool {
namespace {

class AcceptingAgents : public AgentGateway {
 public:
  bool StartTask(const std::string&, const StartTaskCommand&) override { return true; }
  bool StopTask(const std::string&, const StopTaskCommand&) override { return true; }
};

int Run(int argc, char** argv) {
  int tasks = 10'000, boundaries = 5;
  std::string json;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string { return i + 1 < argc ? argv[++i] : "0"; };
    if (a == "--tasks") {
      tasks = std::max(1, std::stoi(value()));
    } else if (a == "--boundaries") {
      boundaries = std::max(1, std::stoi(value()));
    } else if (a == "--json") {
      json = value();
    } else {
      std::printf(
          "usage: ledger_write [--tasks 10000] [--boundaries 5] [--json FILE]\n"
          "Places --tasks running tasks on a Core over PostgreSQL (fsync on), then times the\n"
          "usage-ledger writes of --boundaries interval boundaries.\n");
      return a == "--help" ? 0 : 2;
    }
  }
  auto pg = testing::TestPostgres::Start({.fsync = true});
  if (!pg.ok()) {
    std::fprintf(stderr, "postgres: %s\n", pg.status().ToString().c_str());
    return 1;
  }
  auto uri = (*pg)->CreateDatabase();
  if (!uri.ok()) return 1;
  PgStoreOptions opts;
  opts.uri = *uri;
  auto opened = PgStore::Open(opts);
  if (!opened.ok()) {
    std::fprintf(stderr, "store: %s\n", opened.status().ToString().c_str());
    return 1;
  }
  std::unique_ptr<PgStore> pg_store = std::move(opened).value();
  testing::CountingStore store(pg_store.get());
  ManualClock clock(1'795'392'000LL * 1'000'000 + 250'000);
  AcceptingAgents agents;
  testing::CompletionLoop loop;
  SchedulerOptions options = SchedulerOptions::Defaults();
  options.max_tasks_per_pass = std::max(options.max_tasks_per_pass, tasks);
  Core core(options, &clock, &store, &agents, loop.executor());
  auto idle = [&] { loop.Idle(store); };
  {
    auto epoch = store.AcquireLeadership();
    auto state = store.Recover();
    if (!epoch.ok() || !state.ok() || !core.Recover(*state, *epoch).ok()) return 1;
  }
  PoolRecord pool;
  pool.name = "bench";
  pool.placement_strategy = "first-fit";
  core.CreatePool(pool, [](Result<PoolView>) {});
  idle();
  // 80 slices of (10 TFLOPS, 1 GiB) fit one H100 by VRAM: 640 per 8-GPU node.
  const int nodes = (tasks + 639) / 640;
  for (int n = 0; n < nodes; ++n) {
    AgentRegistration reg;
    reg.node.name = "node-" + std::to_string(n);
    reg.node.pool = "bench";
    reg.node.cpu_milli = 64'000;
    reg.node.memory_mib = 512 * 1024;
    for (int g = 0; g < 8; ++g) {
      DeviceRecord d;
      d.id = "GPU-" + std::to_string(n) + "-" + std::to_string(g);
      d.model = "H100-SXM";
      d.index = g;
      d.physical = Resources{989'000, 81'920};
      reg.node.devices.push_back(d);
    }
    core.OnAgentRegister(reg, [](Result<RegistrationResult>) {});
  }
  idle();
  for (int left = tasks; left > 0; left -= 1000) {
    JobSpec s;
    s.tenant = "acme/bench/ledger";
    s.pool = "bench";
    s.task_count = std::min(left, 1000);
    s.task_template.command = {"/bin/true"};
    s.task_template.resources.fractional = Resources{10'000, 1024};
    core.SubmitJob(s, [](Result<JobRecord>) {});
    idle();
  }
  core.Tick();
  idle();
  std::printf("ledger_write: %d running tasks on %d nodes, 60-s intervals, batches of %d rows\n",
              tasks, nodes, options.metering.max_intervals_per_batch);
  std::printf("%-9s %8s %10s %12s %12s\n", "boundary", "rows", "wall_ms", "rows_per_s",
              "tick_cpu_ms");
  std::string out = "{\"tasks\": " + std::to_string(tasks) + ", \"boundaries\": [";
  int64_t total_rows = 0;
  double total_ms = 0;
  for (int b = 0; b < boundaries; ++b) {
    clock.Advance(60LL * 1'000'000);
    // The agents' heartbeats: the nodes stay alive (their leases renewed) across the jump.
    for (int n = 0; n < nodes; ++n) core.OnHeartbeat("node-" + std::to_string(n), {});
    auto before = store.QueryUsage({});
    int64_t rows_before = 0;
    if (before.ok())
      for (const auto& r : *before) rows_before += r.totals.intervals;
    const auto t0 = std::chrono::steady_clock::now();
    core.Tick();
    const auto t1 = std::chrono::steady_clock::now();
    idle();
    const auto t2 = std::chrono::steady_clock::now();
    auto after = store.QueryUsage({});
    int64_t rows = -rows_before;
    if (after.ok())
      for (const auto& r : *after) rows += r.totals.intervals;
    const double wall_ms = std::chrono::duration<double, std::milli>(t2 - t0).count();
    const double tick_ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
    std::printf("%-9d %8lld %10.1f %12.0f %12.2f\n", b + 1, static_cast<long long>(rows), wall_ms,
                static_cast<double>(rows) / (wall_ms / 1000), tick_ms);
    out += std::string(b > 0 ? ", " : "") + "{\"rows\": " + std::to_string(rows) +
           ", \"wall_ms\": " + std::to_string(wall_ms) +
           ", \"tick_ms\": " + std::to_string(tick_ms) + "}";
    total_rows += rows;
    total_ms += wall_ms;
  }
  std::printf(
      "total: %lld rows in %.1f ms: %.0f rows/s; sustained need at 60-s intervals: %.0f "
      "rows/s\n",
      static_cast<long long>(total_rows), total_ms,
      static_cast<double>(total_rows) / (total_ms / 1000), tasks / 60.0);
  out += "]}\n";
  if (!json.empty()) std::ofstream(json) << out;
  return 0;
}

}  // namespace
}  // namespace gpupool

int main(int argc, char** argv) { return gpupool::Run(argc, argv); }
