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
#include "bench/gateway_bench.h"

namespace gpupool {
namespace {

using bench::OneService;
using bench::Row;

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
        rates = bench::ParseRates(v);
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
  bench::PrintHeader();
  for (double rate : rates) {
    for (const std::string path : {"direct", "gateway"}) {
      const bool direct = path == "direct";
      Sample s = Load(direct ? replica.port() : gateway.port(), !direct, rate, seconds);
      rows.push_back(bench::Summarize(rate, path, s.latency_ms, s.seconds, s.errors));
      bench::PrintRow(rows.back());
    }
    const Row& d = rows[rows.size() - 2];
    const Row& g = rows.back();
    bench::PrintAdded(rate, "added", d, g);
  }
  gateway.Stop();
  if (!json.empty()) bench::WriteJson(json, seconds, "", rows);
  return 0;
}

}  // namespace
}  // namespace gpupool

int main(int argc, char** argv) { return gpupool::Run(argc, argv); }
