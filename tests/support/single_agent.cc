#include "tests/support/single_agent.h"

#include <signal.h>

#include "tests/support/agent_process.h"

namespace gpupool::testing {

SingleAgent::SingleAgent(std::string dir, std::string pool, std::string extra_config)
    : dir_(std::move(dir)), pool_(std::move(pool)), extra_config_(std::move(extra_config)) {}

SingleAgent::~SingleAgent() {
  if (running()) Stop();
}

void SingleAgent::Connect(const std::string& grpc_address) {
  scheduler_ = grpc_address;
  auto channel = grpc::CreateChannel(grpc_address, grpc::InsecureChannelCredentials());
  jobs_ = v1::JobService::NewStub(channel);
  nodes_ = v1::NodeService::NewStub(channel);
}

Status SingleAgent::Start() {
  AgentProcessOptions o;
  o.dir = dir_;
  o.node = kNode;
  o.scheduler = scheduler_;
  o.pool = pool_;
  o.gpus = 1;
  o.health_poll_ms = 50;
  o.extra_config = extra_config_;
  GPUPOOL_ASSIGN_OR_RETURN(process_, StartAgentProcess(o));
  return Status::Ok();
}

void SingleAgent::Stop() {
  process_->Signal(SIGTERM);
  process_->Wait(std::chrono::seconds(20));
  process_.reset();
}

v1::Node SingleAgent::Node() {
  grpc::ClientContext ctx;
  v1::GetNodeRequest req;
  req.set_name(kNode);
  v1::Node n;
  if (!nodes_->GetNode(&ctx, req, &n).ok()) return {};
  return n;
}

v1::Task SingleAgent::Task(const std::string& job_id) {
  grpc::ClientContext ctx;
  v1::GetJobRequest req;
  req.set_job_id(job_id);
  v1::Job job;
  if (!jobs_->GetJob(&ctx, req, &job).ok() || job.tasks_size() == 0) return {};
  return job.tasks(0);
}

}  // namespace gpupool::testing
