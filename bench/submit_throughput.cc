// submit_throughput: durable job submissions per second and their latency over gRPC.
//
// Starts a fresh gpupoold on its embedded PostgreSQL (fsync on: every acknowledged submission is
// committed), creates a pool, then for each concurrency level keeps that many SubmitJob calls in
// flight for --seconds and reports throughput and p50/p99/max latency. --server ADDR measures an
// already running daemon instead. Prints a table; --json FILE writes the figures.
//
// Without flags the daemon runs --insecure (plaintext, no credentials). --tls-auth measures the
// secure default instead: TLS with the daemon's private CA and a tenant's bearer token on every
// call, so each is authenticated, authorised against the tenant, rate-limit checked (with a limit
// too high to bind) and audited as in plaintext. Compare the two (docs/benchmarks.md). The
// credential is an API key (`gpk_…`, created through KeyService at the start, as a tenant would
// use), or with --credential token the config file's static bootstrap token.
//
// It also says where the CPU went, in microseconds per acknowledged submission: this process (the
// load generator), gpupoold and PostgreSQL (postmaster and its children, from /proc). On a
// machine with few cores the three share them, so these explain the rate; with --server only
// the client's share is known.
#include <grpcpp/grpcpp.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "gpupool/v1/jobs.grpc.pb.h"
#include "gpupool/v1/keys.grpc.pb.h"
#include "gpupool/v1/pools.grpc.pb.h"
#include "tests/support/daemon_process.h"

namespace gpupool {
namespace {

using Clock = std::chrono::steady_clock;

// The bearer token every call carries (--tls-auth); empty = none.
std::string g_token;

struct Level {
  int concurrency = 0;
  int64_t ok = 0;
  int64_t failed = 0;
  double seconds = 0;
  double p50_ms = 0, p99_ms = 0, max_ms = 0;
  // CPU microseconds per acknowledged submission; negative when unknown.
  double client_us = -1, daemon_us = -1, postgres_us = -1;
};

// CPU seconds (user + system) a process has used, from /proc/<pid>/stat; 0 when it is gone.
double ProcessCpuSeconds(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(in, line)) return 0;
  size_t close = line.rfind(')');  // the command name may hold spaces
  if (close == std::string::npos) return 0;
  std::istringstream rest(line.substr(close + 2));
  std::string field;
  double ticks = 0;
  for (int i = 3; rest >> field && i <= 15; ++i) {
    if (i == 14 || i == 15) ticks += std::stod(field);  // utime, stime
  }
  return ticks / static_cast<double>(sysconf(_SC_CLK_TCK));
}

// The postmaster of the daemon's embedded PostgreSQL and its children (backends, WAL writer…).
std::vector<pid_t> PostgresPids(const std::string& data_dir) {
  std::ifstream pidfile(data_dir + "/pg/pg/postmaster.pid");
  pid_t postmaster = 0;
  if (!(pidfile >> postmaster) || postmaster <= 0) return {};
  std::vector<pid_t> out{postmaster};
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(entry.path() / "stat");
    std::string line;
    if (!std::getline(in, line)) continue;
    size_t close = line.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(line.substr(close + 2));
    std::string state;
    pid_t ppid = 0;
    if (rest >> state >> ppid && ppid == postmaster) out.push_back(std::stoi(name));
  }
  return out;
}

double SelfCpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  auto s = [](const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec / 1e6; };
  return s(u.ru_utime) + s(u.ru_stime);
}

// CPU of the three parties, sampled at the start and end of a level.
struct CpuSample {
  double client = 0, daemon = 0, postgres = 0;
  static CpuSample Take(pid_t daemon, const std::vector<pid_t>& postgres) {
    CpuSample c;
    c.client = SelfCpuSeconds();
    if (daemon > 0) c.daemon = ProcessCpuSeconds(daemon);
    for (pid_t p : postgres) c.postgres += ProcessCpuSeconds(p);
    return c;
  }
};

constexpr char kBenchToken[] = "bench-tenant-token-0123456789";

// The secure path's daemon config: a tenant token (the load; the pool is created with the
// daemon's own admin.token), and a rate limit too high to bind.
std::string WriteTlsAuthConfig(const std::string& dir) {
  const std::string path = dir + "/bench-gpupoold.yaml";
  std::ofstream out(path);
  out << "auth:\n  api_tokens:\n    - {token: \"" << kBenchToken
      << "\", principal: \"bench\", admin: false}\n"
      << "tenant_defaults:\n  submit_rate_per_second: 1000000\n  submit_burst: 1000000\n";
  return path;
}

v1::SubmitJobRequest Job(const std::string& pool) {
  v1::SubmitJobRequest req;
  v1::JobSpec* s = req.mutable_spec();
  s->set_tenant("bench/load/client");
  s->set_pool(pool);
  s->set_task_count(1);
  s->mutable_template_()->add_command("/bin/true");
  auto* f = s->mutable_template_()->mutable_resources()->mutable_fractional();
  f->set_milli_tflops(1000);
  f->set_vram_mib(256);
  return req;
}

// One lane: issues the next call as soon as the previous one completes.
class Lane {
 public:
  Lane(v1::JobService::Stub* stub, const v1::SubmitJobRequest* req, Clock::time_point end,
       std::vector<double>* latencies, std::mutex* mu, std::atomic<int64_t>* failed,
       std::atomic<int>* running, std::condition_variable* cv)
      : stub_(stub),
        req_(req),
        end_(end),
        latencies_(latencies),
        mu_(mu),
        failed_(failed),
        running_(running),
        cv_(cv) {}

  void Next() {
    if (Clock::now() >= end_) {
      std::lock_guard<std::mutex> lock(*mu_);
      --*running_;
      cv_->notify_all();
      return;
    }
    ctx_ = std::make_unique<grpc::ClientContext>();
    if (!token_.empty()) ctx_->AddMetadata("authorization", "Bearer " + token_);
    started_ = Clock::now();
    stub_->async()->SubmitJob(ctx_.get(), req_, &resp_, [this](grpc::Status st) {
      double ms = std::chrono::duration<double, std::milli>(Clock::now() - started_).count();
      if (st.ok()) {
        std::lock_guard<std::mutex> lock(*mu_);
        latencies_->push_back(ms);
      } else {
        ++*failed_;
      }
      Next();
    });
  }

 private:
  v1::JobService::Stub* stub_;
  const v1::SubmitJobRequest* req_;
  Clock::time_point end_;
  std::vector<double>* latencies_;
  std::mutex* mu_;
  std::atomic<int64_t>* failed_;
  std::atomic<int>* running_;
  std::condition_variable* cv_;
  std::unique_ptr<grpc::ClientContext> ctx_;
  std::string token_ = g_token;
  v1::SubmitJobResponse resp_;
  Clock::time_point started_;
};

Level Measure(const std::vector<std::unique_ptr<v1::JobService::Stub>>& stubs,
              const v1::SubmitJobRequest& req, int concurrency, double seconds,
              const testing::DaemonProcess* daemon = nullptr) {
  const pid_t daemon_pid = daemon != nullptr ? daemon->pid() : -1;
  // Backends live as long as their connections: the ones alive now are the ones that work.
  const std::vector<pid_t> pg =
      daemon != nullptr ? PostgresPids(daemon->data_dir()) : std::vector<pid_t>{};
  const CpuSample cpu0 = CpuSample::Take(daemon_pid, pg);
  std::vector<double> latencies;
  latencies.reserve(1 << 20);
  std::mutex mu;
  std::condition_variable cv;
  std::atomic<int64_t> failed{0};
  std::atomic<int> running{concurrency};
  auto start = Clock::now();
  auto end =
      start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  std::vector<std::unique_ptr<Lane>> lanes;
  for (int i = 0; i < concurrency; ++i) {
    lanes.push_back(std::make_unique<Lane>(stubs[static_cast<size_t>(i) % stubs.size()].get(), &req,
                                           end, &latencies, &mu, &failed, &running, &cv));
  }
  for (auto& l : lanes) l->Next();
  {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return running.load() == 0; });
  }
  Level lv;
  lv.concurrency = concurrency;
  lv.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  lv.ok = static_cast<int64_t>(latencies.size());
  lv.failed = failed.load();
  std::sort(latencies.begin(), latencies.end());
  auto pct = [&](double p) {
    if (latencies.empty()) return 0.0;
    return latencies[std::min(latencies.size() - 1,
                              static_cast<size_t>(p * static_cast<double>(latencies.size())))];
  };
  lv.p50_ms = pct(0.50);
  lv.p99_ms = pct(0.99);
  lv.max_ms = latencies.empty() ? 0 : latencies.back();
  const CpuSample cpu1 = CpuSample::Take(daemon_pid, pg);
  if (lv.ok > 0) {
    const double per = 1e6 / static_cast<double>(lv.ok);
    lv.client_us = (cpu1.client - cpu0.client) * per;
    if (daemon_pid > 0) lv.daemon_us = (cpu1.daemon - cpu0.daemon) * per;
    if (!pg.empty()) lv.postgres_us = (cpu1.postgres - cpu0.postgres) * per;
  }
  return lv;
}

int Run(int argc, char** argv) {
  std::string server, json;
  bool tls_auth = false;
  std::string credential = "key";
  double seconds = 5;
  int channels = 4;
  std::vector<int> levels{1, 16, 64};
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--server")
      server = value();
    else if (a == "--json")
      json = value();
    else if (a == "--seconds")
      seconds = std::stod(value());
    else if (a == "--tls-auth")
      tls_auth = true;
    else if (a == "--credential")
      credential = value();
    else if (a == "--channels")
      channels = std::max(1, std::stoi(value()));
    else if (a == "--levels") {
      levels.clear();
      std::string v = value();
      for (size_t p = 0; p < v.size();) {
        size_t q = v.find(',', p);
        levels.push_back(std::stoi(v.substr(p, q - p)));
        p = q == std::string::npos ? v.size() : q + 1;
      }
    } else {
      std::printf(
          "usage: submit_throughput [--server HOST:PORT] [--seconds S] [--levels 1,16,64] "
          "[--channels 4] [--tls-auth [--credential key|token]] [--json FILE]\n\nWithout --server, "
          "starts a fresh gpupoold "
          "(embedded PostgreSQL, fsync on) from this build and also reports the CPU microseconds "
          "per submission of the client, gpupoold and PostgreSQL.\n--tls-auth: calls go over TLS "
          "(the daemon's private CA) with a tenant's bearer credential (needs no --server): an API "
          "key made at the start (default) or the config's static token (--credential token).\n");
      return a == "--help" ? 0 : 2;
    }
  }
  std::unique_ptr<testing::DaemonProcess> daemon;
  std::shared_ptr<grpc::ChannelCredentials> creds = grpc::InsecureChannelCredentials();
  std::string admin_token;
  if (credential != "key" && credential != "token") {
    std::fprintf(stderr, "--credential: expected key or token, got '%s'\n", credential.c_str());
    return 2;
  }
  if (tls_auth && !server.empty()) {
    std::fprintf(stderr, "--tls-auth starts its own gpupoold; it does not go with --server\n");
    return 2;
  }
  if (server.empty()) {
    testing::DaemonProcess::Options options;
    if (tls_auth) {
      auto dir = testing::MakeTempDir("submit-throughput");
      if (!dir.ok()) return 1;
      options.data_dir = *dir;
      options.secure = true;  // TLS on the gRPC port, credentials required
      options.extra_args = {"--config", WriteTlsAuthConfig(*dir)};
    }
    auto started = testing::DaemonProcess::Start(options);
    if (!started.ok()) {
      std::fprintf(stderr, "cannot start gpupoold: %s\n", started.status().ToString().c_str());
      return 1;
    }
    daemon = std::move(started).value();
    server = daemon->grpc_address();
    if (tls_auth) {
      grpc::SslCredentialsOptions ssl;
      ssl.pem_root_certs = daemon->ca_pem();
      creds = grpc::SslCredentials(ssl);
      admin_token = daemon->admin_token();
      g_token = kBenchToken;
      if (credential == "key") {  // a member key of the tenant, as tenants authenticate
        auto keys = v1::KeyService::NewStub(grpc::CreateChannel(server, creds));
        grpc::ClientContext ctx;
        ctx.AddMetadata("authorization", "Bearer " + admin_token);
        v1::CreateApiKeyRequest kreq;
        kreq.mutable_key()->set_name("bench");
        kreq.mutable_key()->set_tenant("bench");
        kreq.mutable_key()->set_role("member");
        v1::CreateApiKeyResponse kresp;
        const grpc::Status st = keys->CreateApiKey(&ctx, kreq, &kresp);
        if (!st.ok()) {
          std::fprintf(stderr, "cannot create an API key: %s\n", st.error_message().c_str());
          return 1;
        }
        g_token = kresp.secret();
      }
    }
  }
  // Several channels, so that client-side HTTP/2 framing does not serialise the lanes.
  std::vector<std::unique_ptr<v1::JobService::Stub>> stubs;
  for (int i = 0; i < channels; ++i) {
    grpc::ChannelArguments args;
    args.SetInt("grpc.channel_id", i);  // distinct channels, not one shared subchannel
    stubs.push_back(v1::JobService::NewStub(grpc::CreateCustomChannel(server, creds, args)));
  }
  // The pool is an admin's to create (over the same channel kind as the submissions).
  auto pools = v1::PoolService::NewStub(grpc::CreateChannel(server, creds));
  {
    grpc::ClientContext ctx;
    if (!admin_token.empty()) ctx.AddMetadata("authorization", "Bearer " + admin_token);
    v1::CreatePoolRequest req;
    req.mutable_pool()->set_name("bench");
    v1::Pool out;
    pools->CreatePool(&ctx, req, &out);  // ALREADY_EXISTS on a re-run is fine
  }
  v1::SubmitJobRequest req = Job("bench");
  Measure(stubs, req, 8, 1.0);  // warm-up
  std::vector<Level> results;
  std::printf("%-12s %10s %9s %8s %8s %8s %7s   %s\n", "concurrency", "submits/s", "acked",
              "p50 ms", "p99 ms", "max ms", "failed",
              "CPU us/submission: client gpupoold postgres");
  auto us = [](double v) { return v < 0 ? std::string("-") : std::to_string(std::lround(v)); };
  for (int c : levels) {
    Level lv = Measure(stubs, req, c, seconds, daemon.get());
    results.push_back(lv);
    std::printf("%-12d %10.0f %9lld %8.2f %8.2f %8.2f %7lld   %6s %8s %8s\n", c,
                static_cast<double>(lv.ok) / lv.seconds, static_cast<long long>(lv.ok), lv.p50_ms,
                lv.p99_ms, lv.max_ms, static_cast<long long>(lv.failed), us(lv.client_us).c_str(),
                us(lv.daemon_us).c_str(), us(lv.postgres_us).c_str());
  }
  if (!json.empty()) {
    std::ofstream out(json);
    out << "{\"benchmark\":\"submit_throughput\",\"seconds\":" << seconds << ",\"levels\":[";
    for (size_t i = 0; i < results.size(); ++i) {
      const Level& lv = results[i];
      out << (i ? "," : "") << "{\"concurrency\":" << lv.concurrency
          << ",\"submits_per_second\":" << static_cast<double>(lv.ok) / lv.seconds
          << ",\"acknowledged\":" << lv.ok << ",\"failed\":" << lv.failed
          << ",\"p50_ms\":" << lv.p50_ms << ",\"p99_ms\":" << lv.p99_ms
          << ",\"max_ms\":" << lv.max_ms
          << ",\"cpu_us_per_submission\":{\"client\":" << lv.client_us
          << ",\"gpupoold\":" << lv.daemon_us << ",\"postgres\":" << lv.postgres_us << "}}";
    }
    out << "]}\n";
  }
  return 0;
}

}  // namespace
}  // namespace gpupool

int main(int argc, char** argv) { return gpupool::Run(argc, argv); }
