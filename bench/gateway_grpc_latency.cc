// gateway_grpc_latency: what the services' gateway adds to a gRPC call (HTTP/2 both ways:
// api/gateway/h2_server.h in front, api/gateway/h2_upstream.h to the replica).
//
// One replica (a grpc++ server answering every unary call at once) is called two ways at the same
// offered rate over one HTTP/2 connection each, as a gRPC client does: directly, and through a
// Gateway that routes on the gpupool-service header (plain h2c on both: TLS is a cost of its own).
// The load is open-loop: call k is due at start + k / rate and its latency runs from when it was
// due to when its answer arrived. Prints per rate and path the rate achieved, p50 / p99 / p99.9
// latency and errors, and the gateway's added p50 and p99 (same rate, same run).
//   build/bench/gateway_grpc_latency [--rates 1000,5000] [--seconds 10] [--json FILE]
#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "api/gateway/gateway.h"

namespace gpupool {
namespace {

using Clock = std::chrono::steady_clock;

// Answers every call with "ok" on gRPC's callback threads.
class Replica {
 public:
  Replica() {
    grpc::ServerBuilder b;
    b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    b.RegisterCallbackGenericService(&service_);
    server_ = b.BuildAndStart();
  }
  ~Replica() { server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1)); }
  int port() const { return port_; }

 private:
  class Call final : public grpc::ServerGenericBidiReactor {
   public:
    Call() { StartRead(&request_); }
    void OnReadDone(bool ok) override {
      if (!ok) {
        Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "no request"));
        return;
      }
      grpc::Slice slice(std::string("ok"));
      response_ = grpc::ByteBuffer(&slice, 1);
      StartWriteAndFinish(&response_, grpc::WriteOptions(), grpc::Status::OK);
    }
    void OnDone() override { delete this; }

   private:
    grpc::ByteBuffer request_;
    grpc::ByteBuffer response_;
  };
  class Service final : public grpc::CallbackGenericService {
    grpc::ServerGenericBidiReactor* CreateReactor(grpc::GenericCallbackServerContext*) override {
      return new Call();
    }
  };

  Service service_;
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
};

class OneService final : public api::gateway::Directory {
 public:
  explicit OneService(int port) {
    svc_.id = 1;
    svc_.tenant = "bench";
    svc_.name = "echo";
    svc_.running = {api::gateway::Backend{1, "127.0.0.1", port}};
  }
  std::vector<api::gateway::RoutedService> Services() override { return {svc_}; }
  void ReportLoad(int64_t, const ServiceLoadSample&) override {}
  void ReportColdStart(int64_t, int64_t) override {}

 private:
  api::gateway::RoutedService svc_;
};

struct Sample {
  std::vector<double> latency_ms;
  int64_t errors = 0;
  double seconds = 0;
};

// One call in flight: what its completion needs.
struct Pending {
  grpc::ClientContext ctx;
  grpc::ByteBuffer request;
  grpc::ByteBuffer response;
  Clock::time_point due;
};

Sample Load(int port, bool via_gateway, double rate, double seconds) {
  grpc::ChannelArguments args;
  args.SetInt("grpc.use_local_subchannel_pool", 1);  // a connection of its own per run
  auto channel = grpc::CreateCustomChannel("127.0.0.1:" + std::to_string(port),
                                           grpc::InsecureChannelCredentials(), args);
  grpc::GenericStub stub(channel);
  const int64_t total = static_cast<int64_t>(rate * seconds);
  Sample out;
  out.latency_ms.reserve(static_cast<size_t>(total));
  std::mutex mu;
  std::condition_variable all_done;
  int64_t finished = 0;
  const Clock::time_point start = Clock::now() + std::chrono::milliseconds(50);
  Clock::time_point last = start;
  grpc::Slice payload(std::string(64, 'x'));
  for (int64_t k = 0; k < total; ++k) {
    auto* p = new Pending;
    p->due = start + std::chrono::nanoseconds(static_cast<int64_t>(1e9 * k / rate));
    std::this_thread::sleep_until(p->due);
    p->request = grpc::ByteBuffer(&payload, 1);
    p->ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    if (via_gateway) p->ctx.AddMetadata("gpupool-service", "bench/echo");
    stub.UnaryCall(&p->ctx, "/bench.Echo/Say", grpc::StubOptions(), &p->request, &p->response,
                   [&, p](const grpc::Status& s) {
                     const Clock::time_point done = Clock::now();
                     std::lock_guard lock(mu);
                     if (s.ok()) {
                       out.latency_ms.push_back(
                           std::chrono::duration<double, std::milli>(done - p->due).count());
                       last = std::max(last, done);
                     } else {
                       ++out.errors;
                     }
                     ++finished;
                     delete p;
                     if (finished == total) all_done.notify_all();
                   });
  }
  std::unique_lock lock(mu);
  all_done.wait(lock, [&] { return finished == total; });
  out.seconds = std::chrono::duration<double>(last - start).count();
  return out;
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())));
  return v[i];
}

struct Row {
  double rate = 0;
  std::string path;
  double achieved = 0, p50 = 0, p99 = 0, p999 = 0;
  int64_t errors = 0;
};

int Run(int argc, char** argv) {
  std::vector<double> rates = {1000, 5000};
  double seconds = 10;
  std::string json;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::printf("usage: gateway_grpc_latency [--rates 1000,5000] [--seconds 10] [--json FILE]\n");
      return 0;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "gateway_grpc_latency: %s needs a value\n", a.c_str());
      return 2;
    }
    const std::string v = argv[++i];
    try {
      if (a == "--rates") {
        rates.clear();
        std::stringstream in(v);
        for (std::string r; std::getline(in, r, ',');) rates.push_back(std::stod(r));
      } else if (a == "--seconds") {
        seconds = std::stod(v);
      } else if (a == "--json") {
        json = v;
      } else {
        std::fprintf(stderr, "gateway_grpc_latency: unknown option %s\n", a.c_str());
        return 2;
      }
    } catch (const std::exception&) {
      std::fprintf(stderr, "gateway_grpc_latency: %s: not a number: '%s'\n", a.c_str(), v.c_str());
      return 2;
    }
  }
  Replica replica;
  OneService directory(replica.port());
  api::gateway::Gateway gateway(&directory, api::gateway::GatewayOptions{});
  if (Status s = gateway.Start(); !s.ok()) {
    std::fprintf(stderr, "gateway_grpc_latency: %s\n", s.ToString().c_str());
    return 1;
  }
  // The gateway probes the replica before it routes to it.
  for (int i = 0; i < 100 && Load(gateway.port(), true, 100, 0.05).errors > 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  Load(replica.port(), false, 1000, 1);  // warm both paths
  Load(gateway.port(), true, 1000, 1);

  std::vector<Row> rows;
  std::printf("%9s %-8s %11s %9s %9s %10s %8s\n", "rate/s", "path", "achieved/s", "p50 ms",
              "p99 ms", "p99.9 ms", "errors");
  for (double rate : rates) {
    for (const std::string path : {"direct", "gateway"}) {
      const bool direct = path == "direct";
      Sample s = Load(direct ? replica.port() : gateway.port(), !direct, rate, seconds);
      Row r{rate,
            path,
            s.seconds > 0 ? static_cast<double>(s.latency_ms.size()) / s.seconds : 0,
            Percentile(s.latency_ms, 0.50),
            Percentile(s.latency_ms, 0.99),
            Percentile(s.latency_ms, 0.999),
            s.errors};
      std::printf("%9.0f %-8s %11.0f %9.3f %9.3f %10.3f %8lld\n", r.rate, r.path.c_str(),
                  r.achieved, r.p50, r.p99, r.p999, static_cast<long long>(r.errors));
      rows.push_back(r);
    }
    const Row& d = rows[rows.size() - 2];
    const Row& g = rows.back();
    std::printf("%9.0f added    %11s %9.3f %9.3f\n", rate, "", g.p50 - d.p50, g.p99 - d.p99);
  }
  gateway.Stop();
  if (!json.empty()) {
    std::ofstream f(json);
    f << "{\"seconds\":" << seconds << ",\"rows\":[";
    for (size_t i = 0; i < rows.size(); ++i) {
      const Row& r = rows[i];
      f << (i ? "," : "") << "{\"rate\":" << r.rate << ",\"path\":\"" << r.path
        << "\",\"achieved\":" << r.achieved << ",\"p50_ms\":" << r.p50 << ",\"p99_ms\":" << r.p99
        << ",\"p999_ms\":" << r.p999 << ",\"errors\":" << r.errors << "}";
    }
    f << "]}\n";
  }
  return 0;
}

}  // namespace
}  // namespace gpupool

int main(int argc, char** argv) { return gpupool::Run(argc, argv); }
