// bench/store_commit: durable Apply() throughput of PgStore with group commit.
//
// Starts an embedded PostgreSQL (fsync on, synchronous_commit on: every acknowledged batch is on
// disk) in a temporary directory, or uses --uri. For each concurrency level, that many threads
// each loop: Apply({InsertJob (1 task), AppendEvent}) and wait for done — what one job
// submission costs the store. Prints a table (batches/s, latency p50/p99, mean group size) and,
// with --json FILE, writes the same numbers as JSON.
//
//   bench/store_commit [--seconds 5] [--concurrency 1,16,64] [--uri postgresql://…] [--json F]
#include <dirent.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "base/log.h"
#include "store/embedded_postgres.h"
#include "store/pg_store.h"

namespace gpupool {
namespace {

struct Options {
  double seconds = 5;
  std::vector<int> concurrency = {1, 16, 64};
  std::string uri;
  std::string json;
  bool fsync = true;  // --no-fsync: diagnosis only (not durable)
};

// CPU seconds used so far by this process.
double SelfCpu() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

// CPU seconds used so far by the PostgreSQL server `postmaster` and its live children (the
// backends, WAL writer…); 0 when unknown (an external server).
double ServerCpu(int postmaster) {
  if (postmaster <= 0) return 0;
  double total = 0;
  long hz = sysconf(_SC_CLK_TCK);
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return 0;
  while (dirent* e = readdir(proc)) {
    int pid = std::atoi(e->d_name);
    if (pid <= 0) continue;
    std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
    std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    auto close_paren = stat.rfind(')');
    if (close_paren == std::string::npos) continue;
    std::istringstream fields(stat.substr(close_paren + 2));
    std::string state;
    long ppid = 0;
    fields >> state >> ppid;
    if (pid != postmaster && ppid != postmaster) continue;
    std::string skip;
    for (int i = 0; i < 9; ++i) fields >> skip;  // pgrp … cmajflt
    long utime = 0, stime = 0;
    fields >> utime >> stime;
    total += static_cast<double>(utime + stime) / static_cast<double>(hz);
  }
  closedir(proc);
  return total;
}

int PostmasterPid(const std::string& cluster_dir) {
  std::ifstream in(cluster_dir + "/postmaster.pid");
  int pid = 0;
  in >> pid;
  return pid;
}

struct Row {
  int concurrency = 0;
  int64_t batches = 0;
  double per_second = 0;
  double p50_ms = 0;
  double p99_ms = 0;
  double group = 0;
  double client_cpu_us = 0;  // per batch
  double server_cpu_us = 0;  // per batch
};

JobRecord Job(int64_t id) {
  JobRecord j;
  j.id = id;
  j.spec.tenant = "bench";
  j.spec.pool = "default";
  j.spec.priority_class = "normal";
  j.spec.task_template.command = {"sleep", "1"};
  j.spec.task_template.resources.fractional = Resources{10'000, 8192};
  j.spec.labels = {{"bench", "store_commit"}};
  j.submit_us = id;
  TaskRecord t;
  t.job_id = id;
  j.tasks.push_back(t);
  return j;
}

// Applies one batch and waits for its done.
Status ApplySync(Store& store, std::vector<Mutation> batch) {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  Status result;
  store.Apply(std::move(batch), [&](Status st) {
    std::lock_guard lock(mu);
    result = std::move(st);
    done = true;
    cv.notify_one();
  });
  std::unique_lock lock(mu);
  cv.wait(lock, [&] { return done; });
  return result;
}

Row RunLevel(PgStore& store, int concurrency, double seconds, std::atomic<int64_t>& next_id,
             int postmaster) {
  using Clock = std::chrono::steady_clock;
  std::vector<std::vector<double>> latencies(concurrency);
  std::atomic<int64_t> errors{0};
  PgStore::Stats before = store.stats();
  double cpu0 = SelfCpu(), server0 = ServerCpu(postmaster);
  auto start = Clock::now();
  auto deadline =
      start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  std::vector<std::thread> threads;
  for (int t = 0; t < concurrency; ++t) {
    threads.emplace_back([&, t] {
      while (Clock::now() < deadline) {
        int64_t id = next_id++;
        auto t0 = Clock::now();
        Status st = ApplySync(
            store, {InsertJob{Job(id)},
                    AppendEvent{EventRecord{id, "job.submitted", "job/" + std::to_string(id),
                                            "submitted by bench", "bench"}}});
        auto t1 = Clock::now();
        if (!st.ok()) {
          if (errors++ == 0) std::fprintf(stderr, "apply failed: %s\n", st.ToString().c_str());
          continue;
        }
        latencies[t].push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
      }
    });
  }
  for (auto& th : threads) th.join();
  double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  PgStore::Stats after = store.stats();
  double cpu1 = SelfCpu(), server1 = ServerCpu(postmaster);
  std::vector<double> all;
  for (auto& l : latencies) all.insert(all.end(), l.begin(), l.end());
  std::sort(all.begin(), all.end());
  Row row;
  row.concurrency = concurrency;
  row.batches = static_cast<int64_t>(all.size());
  row.per_second = static_cast<double>(all.size()) / elapsed;
  if (!all.empty()) {
    row.p50_ms = all[all.size() / 2];
    row.p99_ms = all[std::min(all.size() - 1, all.size() * 99 / 100)];
  }
  if (!all.empty()) {
    row.client_cpu_us = (cpu1 - cpu0) * 1e6 / static_cast<double>(all.size());
    row.server_cpu_us = (server1 - server0) * 1e6 / static_cast<double>(all.size());
  }
  int64_t txns = after.transactions - before.transactions;
  row.group = txns > 0 ? static_cast<double>(after.batches - before.batches) / txns : 0;
  return row;
}

bool ParseArgs(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--seconds") {
      o->seconds = std::atof(next().c_str());
    } else if (a == "--concurrency") {
      o->concurrency.clear();
      std::stringstream ss(next());
      for (std::string part; std::getline(ss, part, ',');)
        o->concurrency.push_back(std::stoi(part));
    } else if (a == "--uri") {
      o->uri = next();
    } else if (a == "--no-fsync") {
      o->fsync = false;
    } else if (a == "--json") {
      o->json = next();
    } else {
      std::fprintf(stderr,
                   "usage: store_commit [--seconds N] [--concurrency 1,16,64] [--uri URI] "
                   "[--json FILE]\n");
      return false;
    }
  }
  return o->seconds > 0 && !o->concurrency.empty();
}

int Main(int argc, char** argv) {
  Options opts;
  if (!ParseArgs(argc, argv, &opts)) return 2;
  SetLogLevel(LogLevel::kWarn);
  std::unique_ptr<EmbeddedPostgres> pg;
  std::string dir;
  if (opts.uri.empty()) {
    char tmpl[] = "/tmp/gpupool-bench-XXXXXX";
    if (mkdtemp(tmpl) == nullptr) return 1;
    dir = tmpl;
    chmod(tmpl, 0755);
    EmbeddedPostgresOptions po;
    po.data_dir = dir + "/data";
    po.fsync = opts.fsync;  // durable by default: the numbers include the WAL flush
    auto started = EmbeddedPostgres::Start(po);
    if (!started.ok()) {
      std::fprintf(stderr, "%s\n", started.status().ToString().c_str());
      return 1;
    }
    pg = std::move(started).value();
    opts.uri = pg->uri();
  }
  PgStoreOptions so;
  so.uri = opts.uri;
  auto store = PgStore::Open(so);
  if (!store.ok() || !(*store)->AcquireLeadership().ok()) {
    std::fprintf(stderr, "open: %s\n", store.status().ToString().c_str());
    return 1;
  }
  std::atomic<int64_t> next_id{1};
  std::vector<Row> rows;
  int postmaster = pg ? PostmasterPid(pg->cluster_dir()) : 0;
  std::printf("%-12s %10s %11s %9s %9s %12s %14s %14s\n", "concurrency", "batches", "batches/s",
              "p50 ms", "p99 ms", "batches/txn", "client cpu us", "server cpu us");
  for (int c : opts.concurrency) {
    Row r = RunLevel(**store, c, opts.seconds, next_id, postmaster);
    rows.push_back(r);
    std::printf("%-12d %10lld %11.0f %9.3f %9.3f %12.1f %14.1f %14.1f\n", r.concurrency,
                static_cast<long long>(r.batches), r.per_second, r.p50_ms, r.p99_ms, r.group,
                r.client_cpu_us, r.server_cpu_us);
    std::fflush(stdout);
  }
  if (!opts.json.empty()) {
    std::ofstream out(opts.json);
    out << "{\"benchmark\":\"store_commit\",\"durable\":true,\"results\":[";
    for (size_t i = 0; i < rows.size(); ++i) {
      const Row& r = rows[i];
      out << (i ? "," : "") << "{\"concurrency\":" << r.concurrency << ",\"batches\":" << r.batches
          << ",\"per_second\":" << r.per_second << ",\"p50_ms\":" << r.p50_ms
          << ",\"p99_ms\":" << r.p99_ms << ",\"batches_per_txn\":" << r.group
          << ",\"client_cpu_us_per_batch\":" << r.client_cpu_us
          << ",\"server_cpu_us_per_batch\":" << r.server_cpu_us << "}";
    }
    out << "]}\n";
  }
  store->reset();
  pg.reset();
  if (!dir.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
  return 0;
}

}  // namespace
}  // namespace gpupool

int main(int argc, char** argv) { return gpupool::Main(argc, argv); }
