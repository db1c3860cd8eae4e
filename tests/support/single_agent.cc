#include "tests/support/single_agent.h"

#include <gtest/gtest.h>
#include <signal.h>

#include "tests/support/agent_process.h"
#include "tests/support/wait_for.h"

namespace gpupool::testing {

std::string SubmitShellJob(v1::JobService::Stub& jobs, const ShellJob& job) {
  v1::SubmitJobRequest req;
  v1::JobSpec* s = req.mutable_spec();
  s->set_tenant(job.tenant);
  if (!job.priority_class.empty()) s->set_priority_class(job.priority_class);
  s->set_pool(job.pool);
  s->set_task_count(1);
  s->set_max_retries(job.retries);
  s->mutable_template_()->add_command("/bin/sh");
  s->mutable_template_()->add_command("-c");
  s->mutable_template_()->add_command(job.script);
  s->mutable_template_()->mutable_resources()->mutable_whole_gpus()->set_count(job.gpus);
  grpc::ClientContext ctx;
  v1::SubmitJobResponse resp;
  grpc::Status st = jobs.SubmitJob(&ctx, req, &resp);
  EXPECT_TRUE(st.ok()) << "submit '" << job.script << "': " << st.error_message();
  return resp.job_id();
}

v1::Task FirstTask(v1::JobService::Stub& jobs, const std::string& job_id) {
  grpc::ClientContext ctx;
  v1::GetJobRequest req;
  req.set_job_id(job_id);
  v1::Job job;
  if (!jobs.GetJob(&ctx, req, &job).ok() || job.tasks_size() == 0) return {};
  return job.tasks(0);
}

std::string TaskLogs(v1::JobService::Stub& jobs, const std::string& task_id) {
  grpc::ClientContext ctx;
  v1::GetTaskLogsRequest req;
  req.set_task_id(task_id);
  auto reader = jobs.GetTaskLogs(&ctx, req);
  std::string out;
  v1::TaskLogChunk chunk;
  while (reader->Read(&chunk)) out += chunk.data();
  grpc::Status st = reader->Finish();
  EXPECT_TRUE(st.ok()) << "logs of " << task_id << ": " << st.error_message();
  return out;
}

SingleAgent::SingleAgent(Options options) : options_(std::move(options)) {}

SingleAgent::SingleAgent(std::string dir, std::string pool, std::string extra_config) {
  options_.dir = std::move(dir);
  options_.pool = std::move(pool);
  options_.extra_config = std::move(extra_config);
}

SingleAgent::~SingleAgent() {
  if (running()) Stop();
}

void SingleAgent::Connect(const std::string& grpc_address, std::shared_ptr<grpc::Channel> channel) {
  scheduler_ = grpc_address;
  if (channel == nullptr) {
    channel = grpc::CreateChannel(grpc_address, grpc::InsecureChannelCredentials());
  }
  jobs_ = v1::JobService::NewStub(channel);
  nodes_ = v1::NodeService::NewStub(channel);
}

void SingleAgent::Connect(const DaemonProcess& daemon) {
  Connect(daemon.grpc_address(), daemon.AdminChannel());
  if (daemon.secure()) {
    const std::string token =
        options_.token_file.empty() ? daemon.node_token_path() : options_.token_file;
    join_config_ = "token_file: " + token + "\nca_file: " + daemon.ca_path() + "\n";
  }
}

Status SingleAgent::Start() {
  AgentProcessOptions o;
  o.dir = options_.dir;
  o.node = options_.node;
  o.scheduler = scheduler_;
  o.pool = options_.pool;
  o.gpus = options_.gpus;
  o.health_poll_ms = options_.health_poll_ms;
  o.extra_config = options_.extra_config + join_config_;
  o.extra_args = options_.extra_args;
  GPUPOOL_ASSIGN_OR_RETURN(process_, StartAgentProcess(o));
  return Status::Ok();
}

bool SingleAgent::StartAndWaitReady(std::chrono::seconds timeout) {
  if (Status st = Start(); !st.ok()) {
    ADD_FAILURE() << "agent " << node() << ": " << st.ToString();
    return false;
  }
  return WaitFor([&] { return Node().state() == v1::NODE_STATE_READY; }, timeout,
                 std::chrono::milliseconds(50));
}

void SingleAgent::Stop() {
  process_->Signal(SIGTERM);
  process_->Wait(std::chrono::seconds(20));
  process_.reset();
}

void SingleAgent::Kill() {
  process_->Signal(SIGKILL);
  process_->Wait(std::chrono::seconds(20));
  process_.reset();
}

v1::Node SingleAgent::Node() {
  grpc::ClientContext ctx;
  v1::GetNodeRequest req;
  req.set_name(options_.node);
  v1::Node n;
  if (!nodes_->GetNode(&ctx, req, &n).ok()) return {};
  return n;
}

v1::Task SingleAgent::Task(const std::string& job_id) { return FirstTask(*jobs_, job_id); }

}  // namespace gpupool::testing
