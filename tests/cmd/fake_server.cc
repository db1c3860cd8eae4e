#include "tests/cmd/fake_server.h"

#include <google/protobuf/util/time_util.h>

#include "api/convert.h"
#include "pool/catalog.h"

namespace gpupool::ctltest {

namespace {

using google::protobuf::util::TimeUtil;
using grpc::ServerContext;
using grpc::Status;
using grpc::StatusCode;

Status CheckAuth(FakeState& s, ServerContext* ctx) {
  auto it = ctx->client_metadata().find("authorization");
  std::string got =
      it == ctx->client_metadata().end() ? "" : std::string(it->second.data(), it->second.size());
  s.last_authorization = got;
  if (!s.token.empty() && got != "Bearer " + s.token) {
    return Status(StatusCode::UNAUTHENTICATED, "missing or wrong bearer token");
  }
  return Status::OK;
}

#define FAKE_AUTH()                                \
  std::lock_guard<std::mutex> lock(s_->mu);        \
  if (Status st = CheckAuth(*s_, ctx); !st.ok()) { \
    return st;                                     \
  }

class Jobs final : public v1::JobService::Service {
 public:
  explicit Jobs(std::shared_ptr<FakeState> s) : s_(std::move(s)) {}

  Status SubmitJob(ServerContext* ctx, const v1::SubmitJobRequest* req,
                   v1::SubmitJobResponse* resp) override {
    FAKE_AUTH();
    s_->last_submit = *req;
    if (req->spec().pool().empty()) {
      return Status(StatusCode::INVALID_ARGUMENT, "spec.pool: required");
    }
    if (!s_->pools.count(req->spec().pool())) {
      return Status(StatusCode::NOT_FOUND, "pool '" + req->spec().pool() + "' not found");
    }
    const int id = s_->next_job++;
    v1::Job& job = s_->jobs[id];
    job.set_id(std::to_string(id));
    *job.mutable_spec() = req->spec();
    job.set_state(v1::JOB_STATE_PENDING);
    job.set_reason("waiting for capacity");
    *job.mutable_submit_time() = TimeUtil::GetCurrentTime();
    for (int i = 0; i < req->spec().task_count(); ++i) {
      v1::Task* t = job.add_tasks();
      t->set_id(job.id() + "." + std::to_string(i));
      t->set_index(i);
      t->set_state(v1::TASK_STATE_PENDING);
    }
    resp->set_job_id(job.id());
    *resp->mutable_job() = job;
    return Status::OK;
  }

  Status GetJob(ServerContext* ctx, const v1::GetJobRequest* req, v1::Job* job) override {
    FAKE_AUTH();
    v1::Job* j = Find(req->job_id());
    if (j == nullptr) return NotFound(req->job_id());
    *job = *j;
    return Status::OK;
  }

  Status ListJobs(ServerContext* ctx, const v1::ListJobsRequest* req,
                  v1::ListJobsResponse* resp) override {
    FAKE_AUTH();
    s_->last_list = *req;
    ++s_->list_calls;
    const int size = req->page_size() == 0 ? 100 : req->page_size();
    const int start = req->page_token().empty() ? 0 : std::stoi(req->page_token());
    int seen = 0;
    for (const auto& [id, job] : s_->jobs) {
      if (!req->pool().empty() && job.spec().pool() != req->pool()) continue;
      if (!req->tenant().empty() && job.spec().tenant() != req->tenant()) continue;
      if (req->state() != v1::JOB_STATE_UNSPECIFIED && job.state() != req->state()) continue;
      if (seen++ < start) continue;
      if (resp->jobs_size() == size) {
        resp->set_next_page_token(std::to_string(start + size));
        break;
      }
      *resp->add_jobs() = job;
    }
    return Status::OK;
  }

  Status CancelJob(ServerContext* ctx, const v1::CancelJobRequest* req, v1::Job* job) override {
    FAKE_AUTH();
    v1::Job* j = Find(req->job_id());
    if (j == nullptr) return NotFound(req->job_id());
    j->set_state(v1::JOB_STATE_CANCELLED);
    j->set_reason(req->reason().empty() ? "cancelled" : req->reason());
    *job = *j;
    return Status::OK;
  }

  Status WatchJob(ServerContext* ctx, const v1::WatchJobRequest* req,
                  grpc::ServerWriter<v1::JobEvent>* writer) override {
    v1::Job job;
    {
      FAKE_AUTH();
      v1::Job* j = Find(req->job_id());
      if (j == nullptr) return NotFound(req->job_id());
      job = *j;
    }
    const std::pair<v1::JobState, std::string> steps[] = {
        {v1::JOB_STATE_PENDING, "submitted"},
        {v1::JOB_STATE_RUNNING, "task " + job.id() + ".0: RUNNING"},
        {v1::JOB_STATE_SUCCEEDED, "all tasks succeeded"},
    };
    int64_t t = 1'795'362'018;
    for (const auto& [state, message] : steps) {
      v1::JobEvent ev;
      *ev.mutable_job() = job;
      ev.mutable_job()->set_state(state);
      ev.set_message(message);
      ev.mutable_time()->set_seconds(t++);
      writer->Write(ev);
    }
    return Status::OK;
  }

  Status GetTaskLogs(ServerContext* ctx, const v1::GetTaskLogsRequest* req,
                     grpc::ServerWriter<v1::TaskLogChunk>* writer) override {
    {
      FAKE_AUTH();
      s_->last_logs = *req;
      const std::string job_id = req->task_id().substr(0, req->task_id().find('.'));
      if (Find(job_id) == nullptr || req->task_id().find('.') == std::string::npos) {
        return Status(StatusCode::NOT_FOUND, "task '" + req->task_id() + "' not found");
      }
    }
    const std::string text = "hello from " + req->task_id() + "\nsecond line\n";
    v1::TaskLogChunk a;
    a.set_offset(0);
    a.set_data(text.substr(0, 11));
    writer->Write(a);
    v1::TaskLogChunk b;
    b.set_offset(11);
    b.set_data(text.substr(11));
    b.set_eof(true);
    writer->Write(b);
    return Status::OK;
  }

 private:
  v1::Job* Find(const std::string& id) {
    for (auto& [n, job] : s_->jobs) {
      if (job.id() == id) return &job;
    }
    return nullptr;
  }
  static Status NotFound(const std::string& id) {
    return Status(StatusCode::NOT_FOUND, "job '" + id + "' not found");
  }
  std::shared_ptr<FakeState> s_;
};

class Pools final : public v1::PoolService::Service {
 public:
  explicit Pools(std::shared_ptr<FakeState> s) : s_(std::move(s)) {}

  Status CreatePool(ServerContext* ctx, const v1::CreatePoolRequest* req, v1::Pool* pool) override {
    FAKE_AUTH();
    const v1::Pool& p = req->pool();
    if (p.name().empty()) return Status(StatusCode::INVALID_ARGUMENT, "pool.name: required");
    if (p.compute_overcommit() != 0 &&
        (p.compute_overcommit() < 1 || p.compute_overcommit() > 10)) {
      return Status(StatusCode::INVALID_ARGUMENT, "pool.compute_overcommit: must be 1.0..10.0");
    }
    if (s_->pools.count(p.name())) {
      return Status(StatusCode::ALREADY_EXISTS, "pool '" + p.name() + "' already exists");
    }
    v1::Pool& stored = s_->pools[p.name()];
    stored = p;
    if (stored.visibility() == v1::VISIBILITY_UNSPECIFIED) {
      stored.set_visibility(v1::VISIBILITY_PUBLIC);
    }
    if (stored.compute_overcommit() == 0) stored.set_compute_overcommit(1.0);
    if (stored.memory_overcommit() == 0) stored.set_memory_overcommit(1.0);
    // Two H100-SXM: 2 × 989.5 TFLOPS, 2 × 80 GiB; 12.5 TFLOPS and 20 GiB allocated.
    v1::Capacity* c = stored.mutable_capacity();
    c->mutable_physical()->set_milli_tflops(1'979'000);
    c->mutable_physical()->set_vram_mib(163'840);
    c->mutable_offered()->set_milli_tflops(
        static_cast<int64_t>(1'979'000 * stored.compute_overcommit()));
    c->mutable_offered()->set_vram_mib(static_cast<int64_t>(163'840 * stored.memory_overcommit()));
    c->mutable_allocated()->set_milli_tflops(12'500);
    c->mutable_allocated()->set_vram_mib(20'480);
    c->set_devices(2);
    c->set_nodes(1);
    stored.mutable_create_time()->set_seconds(1'795'362'018);
    // What the placement learned: 40 tasks, mostly 12.5 TFLOPS + 20 GiB shares, some 2-GPU jobs.
    stored.set_learned_tasks(40);
    v1::LearnedClass* share = stored.add_learned_classes();
    share->mutable_shape()->mutable_fractional()->set_milli_tflops(12'500);
    share->mutable_shape()->mutable_fractional()->set_vram_mib(20'480);
    share->mutable_shape()->set_cpu_milli(2'000);
    share->mutable_shape()->set_memory_mib(8'192);
    share->set_share(0.75);
    v1::LearnedClass* whole = stored.add_learned_classes();
    whole->mutable_shape()->mutable_whole_gpus()->set_count(2);
    whole->mutable_shape()->mutable_whole_gpus()->add_models("H100-SXM");
    whole->mutable_shape()->set_cpu_milli(16'000);
    whole->mutable_shape()->set_memory_mib(65'536);
    whole->set_share(0.25);
    *pool = stored;
    return Status::OK;
  }

  Status GetPool(ServerContext* ctx, const v1::GetPoolRequest* req, v1::Pool* pool) override {
    FAKE_AUTH();
    auto it = s_->pools.find(req->name());
    if (it == s_->pools.end()) return NotFound(req->name());
    *pool = it->second;
    return Status::OK;
  }

  Status ListPools(ServerContext* ctx, const v1::ListPoolsRequest*,
                   v1::ListPoolsResponse* resp) override {
    FAKE_AUTH();
    for (const auto& [name, p] : s_->pools) *resp->add_pools() = p;
    return Status::OK;
  }

  Status UpdatePool(ServerContext* ctx, const v1::UpdatePoolRequest* req, v1::Pool* pool) override {
    FAKE_AUTH();
    s_->last_update = *req;
    auto it = s_->pools.find(req->pool().name());
    if (it == s_->pools.end()) return NotFound(req->pool().name());
    for (const std::string& path : req->update_mask().paths()) {
      if (path == "compute_overcommit") {
        it->second.set_compute_overcommit(req->pool().compute_overcommit());
      } else if (path == "placement_strategy") {
        it->second.set_placement_strategy(req->pool().placement_strategy());
      }
    }
    *pool = it->second;
    return Status::OK;
  }

  Status DeletePool(ServerContext* ctx, const v1::DeletePoolRequest* req,
                    v1::DeletePoolResponse*) override {
    FAKE_AUTH();
    if (s_->pools.erase(req->name()) == 0) return NotFound(req->name());
    return Status::OK;
  }

 private:
  static Status NotFound(const std::string& name) {
    return Status(StatusCode::NOT_FOUND, "pool '" + name + "' not found");
  }
  std::shared_ptr<FakeState> s_;
};

class Nodes final : public v1::NodeService::Service {
 public:
  explicit Nodes(std::shared_ptr<FakeState> s) : s_(std::move(s)) {}

  Status ListNodes(ServerContext* ctx, const v1::ListNodesRequest* req,
                   v1::ListNodesResponse* resp) override {
    FAKE_AUTH();
    for (const auto& [name, n] : s_->nodes) {
      if (req->pool().empty() || n.pool() == req->pool()) *resp->add_nodes() = n;
    }
    return Status::OK;
  }
  Status GetNode(ServerContext* ctx, const v1::GetNodeRequest* req, v1::Node* node) override {
    FAKE_AUTH();
    return Lookup(req->name(), node);
  }
  Status CordonNode(ServerContext* ctx, const v1::NodeActionRequest* req, v1::Node* node) override {
    FAKE_AUTH();
    return SetState(req->name(), v1::NODE_STATE_CORDONED, node);
  }
  Status UncordonNode(ServerContext* ctx, const v1::NodeActionRequest* req,
                      v1::Node* node) override {
    FAKE_AUTH();
    return SetState(req->name(), v1::NODE_STATE_READY, node);
  }
  Status DrainNode(ServerContext* ctx, const v1::NodeActionRequest* req, v1::Node* node) override {
    FAKE_AUTH();
    return SetState(req->name(), v1::NODE_STATE_DRAINING, node);
  }

 private:
  Status Lookup(const std::string& name, v1::Node* node) {
    auto it = s_->nodes.find(name);
    if (it == s_->nodes.end()) {
      return Status(StatusCode::NOT_FOUND, "node '" + name + "' not found");
    }
    *node = it->second;
    return Status::OK;
  }
  Status SetState(const std::string& name, v1::NodeState state, v1::Node* node) {
    auto it = s_->nodes.find(name);
    if (it != s_->nodes.end()) it->second.set_state(state);
    return Lookup(name, node);
  }
  std::shared_ptr<FakeState> s_;
};

class CatalogSvc final : public v1::CatalogService::Service {
 public:
  explicit CatalogSvc(std::shared_ptr<FakeState> s) : s_(std::move(s)) {}

  Status ListGpuModels(ServerContext* ctx, const v1::ListGpuModelsRequest*,
                       v1::ListGpuModelsResponse* resp) override {
    FAKE_AUTH();
    for (const GpuModel& m : Catalog::Builtin().models()) {
      api::ToProto(m, resp->add_models());  // the daemon's own conversion
    }
    return Status::OK;
  }

 private:
  std::shared_ptr<FakeState> s_;
};

v1::Node MakeNode(const std::string& name, const std::string& pool) {
  v1::Node n;
  n.set_name(name);
  n.set_pool(pool);
  n.set_state(v1::NODE_STATE_READY);
  n.set_cpu_milli(64'000);
  n.set_memory_mib(512 * 1024);
  (*n.mutable_labels())["zone"] = "a";
  n.set_running_tasks(1);
  for (int i = 0; i < 2; ++i) {
    v1::Device* d = n.add_devices();
    d->set_id("GPU-" + name + "-" + std::to_string(i));
    d->set_model("H100-SXM");
    d->set_index(i);
    d->set_healthy(true);
    d->mutable_capacity()->mutable_offered()->set_milli_tflops(989'500);
    d->mutable_capacity()->mutable_offered()->set_vram_mib(81'920);
    d->mutable_capacity()->mutable_allocated()->set_milli_tflops(i == 0 ? 12'500 : 0);
    d->mutable_capacity()->mutable_allocated()->set_vram_mib(i == 0 ? 20'480 : 0);
    if (i == 0) {  // the agent's last sample; GPU 1 has none yet
      v1::DeviceSample* s = d->mutable_sample();
      s->set_utilization_pct(87);
      s->set_memory_used_mib(20'480);
      s->set_memory_total_mib(81'920);
      s->set_power_watts(412);
      s->set_temperature_c(64);
      s->set_xid_errors(1);
    }
  }
  n.mutable_capacity()->mutable_offered()->set_milli_tflops(1'979'000);
  n.mutable_capacity()->mutable_offered()->set_vram_mib(163'840);
  n.mutable_capacity()->mutable_allocated()->set_milli_tflops(12'500);
  n.mutable_capacity()->mutable_allocated()->set_vram_mib(20'480);
  return n;
}

}  // namespace

FakeServer::FakeServer(std::string token) : state_(std::make_shared<FakeState>()) {
  state_->token = std::move(token);
  state_->nodes["gpu-01"] = MakeNode("gpu-01", "training");
  state_->nodes["gpu-02"] = MakeNode("gpu-02", "inference");
  jobs_ = std::make_unique<Jobs>(state_);
  pools_ = std::make_unique<Pools>(state_);
  nodes_ = std::make_unique<Nodes>(state_);
  catalog_ = std::make_unique<CatalogSvc>(state_);
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(jobs_.get());
  builder.RegisterService(pools_.get());
  builder.RegisterService(nodes_.get());
  builder.RegisterService(catalog_.get());
  server_ = builder.BuildAndStart();
  address_ = "127.0.0.1:" + std::to_string(port);
}

FakeServer::~FakeServer() {
  if (server_) server_->Shutdown();
}

}  // namespace gpupool::ctltest
