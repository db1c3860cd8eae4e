#include "tests/support/replica_set.h"

#include <filesystem>
#include <fstream>

#include "gpupool/v1/pools.grpc.pb.h"
#include "tests/support/wait_for.h"

namespace gpupool::testing {

Result<std::unique_ptr<ReplicaSet>> ReplicaSet::Start(Options options) {
  std::unique_ptr<ReplicaSet> set(new ReplicaSet());
  GPUPOOL_ASSIGN_OR_RETURN(set->pg_, TestPostgres::Start({.fsync = options.fsync}));
  GPUPOOL_ASSIGN_OR_RETURN(std::string uri, set->pg_->CreateDatabase());
  GPUPOOL_ASSIGN_OR_RETURN(set->dir_, MakeTempDir("gpupool-" + options.name));
  std::ofstream(set->dir_ + "/gpupoold.yaml") << options.config;
  GPUPOOL_ASSIGN_OR_RETURN(
      set->replicas_,
      DaemonProcess::StartReplicas(options.replicas,
                                   {"--config", set->dir_ + "/gpupoold.yaml", "--database", uri}));
  for (size_t i = 0; i < set->replicas_.size(); ++i) {
    set->targets_ += (i ? "," : "") + set->replicas_[i]->grpc_address();
  }
  set->client_ = std::make_unique<LeaderClient>(set->targets_);
  if (set->Leader(std::chrono::seconds(60)) < 0) {
    return Status::Unavailable("no replica took the lead within 60 s (logs in " + set->dir_ + ")");
  }
  return set;
}

ReplicaSet::~ReplicaSet() { replicas_.clear(); }

int ReplicaSet::Leader(std::chrono::milliseconds timeout) {
  return ServingReplica(replicas_, timeout);
}

Status ReplicaSet::CreatePool(const std::string& name) {
  grpc::Status last;
  const bool created = WaitFor(
      [&] {
        v1::CreatePoolRequest req;
        req.mutable_pool()->set_name(name);
        req.mutable_pool()->add_required_capabilities("none");
        v1::Pool pool;
        last = client_->Call([&](auto ch, grpc::ClientContext* ctx) {
          return v1::PoolService::NewStub(ch)->CreatePool(ctx, req, &pool);
        });
        // A lost answer to a create that committed: the pool is there.
        return last.ok() || last.error_code() == grpc::StatusCode::ALREADY_EXISTS;
      },
      std::chrono::seconds(60));
  if (created) return Status::Ok();
  return Status::Unavailable("create pool '" + name + "': " + last.error_message());
}

int ReplicaSet::Supervise() {
  int restarted = 0;
  for (auto& r : replicas_) {
    if (r->Exited() && r->Restart().ok()) ++restarted;
  }
  return restarted;
}

void ReplicaSet::RemoveDir() {
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

}  // namespace gpupool::testing
