// A small in-memory gpupool server for gpupoolctl's end-to-end test: the four public services
// (JobService, PoolService, NodeService, CatalogService) over real gRPC on loopback, so that the
// test checks the wire, the exit codes and the output of the real binary. It stands in until
// gpupoold exists; the behaviour is the minimum the CLI needs (no scheduling).
//
// Auth: when `token` is non-empty every call must carry "authorization: Bearer <token>", else
// UNAUTHENTICATED. The last request of each kind is kept for assertions.
//
// Thread safety: all state behind one mutex; gRPC calls handlers on its own threads.
#pragma once

#include <grpcpp/grpcpp.h>

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "gpupool/v1/jobs.grpc.pb.h"
#include "gpupool/v1/pools.grpc.pb.h"

namespace gpupool::ctltest {

namespace v1 = ::gpupool::v1;

struct FakeState {
  std::mutex mu;
  std::string token;
  int next_job = 1;
  std::map<int, v1::Job> jobs;  // by numeric id, so listing is in submission order
  std::map<std::string, v1::Pool> pools;
  std::map<std::string, v1::Node> nodes;
  // Last requests, for assertions.
  v1::SubmitJobRequest last_submit;
  v1::UpdatePoolRequest last_update;
  v1::GetTaskLogsRequest last_logs;
  v1::ListJobsRequest last_list;
  int list_calls = 0;
  std::string last_authorization;
};

class FakeServer {
 public:
  explicit FakeServer(std::string token);
  ~FakeServer();

  // "127.0.0.1:PORT".
  const std::string& address() const { return address_; }
  FakeState& state() { return *state_; }

 private:
  std::shared_ptr<FakeState> state_;
  std::unique_ptr<grpc::Service> jobs_, pools_, nodes_, catalog_;
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
};

}  // namespace gpupool::ctltest
