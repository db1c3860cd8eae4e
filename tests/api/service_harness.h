// A real scheduler stack for the API service tests: MemoryStore, the Scheduler (Core on its running
// loop), the AgentHub as its gateway (optionally served over gRPC on loopback) and ServiceImpl on
// top — wired exactly as gpupoold wires them. Plus synchronous helpers over the async ApiService.
#pragma once

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "api/agent_hub.h"
#include "api/service_impl.h"
#include "base/clock.h"
#include "scheduler/scheduler.h"
#include "store/memory_store.h"

namespace gpupool::api::testing {

using namespace std::chrono_literals;

inline CallContext Admin() { return CallContext::Admin("test-admin"); }
inline CallContext Tenant(const std::string& path, Role role = Role::kMember) {
  // Not `std::move(path)` beside "test:" + path: argument order is unspecified, and a moved-from
  // path left the key id "test:".
  return CallContext::Of("test:" + path, path, role);
}

// What a stream delivered, gathered for assertions.
template <typename Item>
class Collector {
 public:
  std::function<void(const Item&)> OnItem() {
    return [this](const Item& item) {
      std::lock_guard<std::mutex> lock(mu_);
      items_.push_back(item);
      cv_.notify_all();
    };
  }
  std::function<void(Status)> OnDone() {
    return [this](Status s) {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = std::move(s);
      cv_.notify_all();
    };
  }
  // The final status, or INTERNAL "timed out".
  Status WaitDone(std::chrono::milliseconds timeout = 10s) {
    std::unique_lock<std::mutex> lock(mu_);
    if (!cv_.wait_for(lock, timeout, [&] { return done_.has_value(); })) {
      return Status::Internal("stream did not end in time");
    }
    return *done_;
  }
  bool WaitItems(size_t n, std::chrono::milliseconds timeout = 10s) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return items_.size() >= n; });
  }
  std::vector<Item> items() {
    std::lock_guard<std::mutex> lock(mu_);
    return items_;
  }
  bool done() {
    std::lock_guard<std::mutex> lock(mu_);
    return done_.has_value();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Item> items_;
  std::optional<Status> done_;
};

class ServiceHarness {
 public:
  explicit ServiceHarness(AgentHubOptions hub_options = {}, ServiceOptions service_options = {})
      : hub(std::move(hub_options)) {
    scheduler = std::make_unique<Scheduler>(SchedulerOptions::Defaults(), &clock, &store, &hub);
    hub.Attach(scheduler.get());
    Result<int64_t> epoch = store.AcquireLeadership();
    Result<RecoveredState> state = store.Recover();
    EXPECT_TRUE(epoch.ok() && state.ok());
    Status recovered = epoch.ok() && state.ok() ? scheduler->Start(*state, *epoch, 50ms)
                                                : Status::Unavailable("store not recovered");
    EXPECT_TRUE(recovered.ok()) << recovered.ToString();
    service = std::make_unique<ServiceImpl>(scheduler.get(), scheduler.get(), &hub,
                                            std::move(service_options));
    service->SetRecovered(true);
  }

  // The order gpupoold stops in: the core's loop first, so no step that calls back into the
  // service (a log stream's probe, say) runs while the service is being destroyed.
  ~ServiceHarness() {
    StopServer();
    scheduler->Stop();
    service.reset();
  }

  // Serves the hub's AgentService on 127.0.0.1 (a free port); returns "127.0.0.1:PORT".
  std::string StartServer() {
    grpc::ServerBuilder b;
    int port = 0;
    b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    b.RegisterService(&hub);
    server = b.BuildAndStart();
    EXPECT_NE(server, nullptr);
    return "127.0.0.1:" + std::to_string(port);
  }
  void StopServer() {
    if (server) server->Shutdown(std::chrono::system_clock::now() + 2s);
    server.reset();
  }

  // Calls an ApiService method and waits for its reply.
  template <typename Req, typename Resp>
  std::pair<Status, Resp> Call(void (ApiService::*method)(const CallContext&, const Req&,
                                                          Reply<Resp>),
                               const Req& req, const CallContext& ctx = Admin()) {
    auto p = std::make_shared<std::promise<std::pair<Status, Resp>>>();
    auto f = p->get_future();
    (service.get()->*method)(ctx, req, [p](Status s, Resp r) {
      p->set_value({std::move(s), std::move(r)});
    });
    if (f.wait_for(10s) != std::future_status::ready) {
      return {Status::Internal("no reply in time"), Resp{}};
    }
    return f.get();
  }

  // A pool that requires nothing of nodes for shared work ("none"): the harness's nodes are
  // registered straight with the core and enforce nothing. The default requirement has its own
  // test (ServiceImpl.ANewPoolRequiresSliceEnforcementAndTheSandboxUnlessToldOtherwise).
  std::pair<Status, v1::Pool> CreatePool(const std::string& name,
                                         v1::Visibility vis = v1::VISIBILITY_PUBLIC,
                                         std::vector<std::string> allowed = {}) {
    v1::CreatePoolRequest req;
    req.mutable_pool()->set_name(name);
    req.mutable_pool()->set_visibility(vis);
    req.mutable_pool()->add_required_capabilities("none");
    for (const std::string& t : allowed) req.mutable_pool()->add_allowed_tenants(t);
    return Call(&ApiService::CreatePool, req);
  }

  static v1::SubmitJobRequest Job(const std::string& tenant, const std::string& pool,
                                  int64_t milli_tflops = 100'000, int64_t vram_mib = 1024) {
    v1::SubmitJobRequest req;
    v1::JobSpec* s = req.mutable_spec();
    s->set_tenant(tenant);
    s->set_pool(pool);
    s->set_task_count(1);
    s->mutable_template_()->add_command("/bin/echo");
    s->mutable_template_()->add_command("hi");
    auto* f = s->mutable_template_()->mutable_resources()->mutable_fractional();
    f->set_milli_tflops(milli_tflops);
    f->set_vram_mib(vram_mib);
    return req;
  }

  // Registers node `name` (one H100) straight with the core, with no agent stream behind it.
  Status RegisterNode(const std::string& name, const std::string& pool) {
    AgentRegistration reg;
    reg.node.name = name;
    reg.node.pool = pool;
    DeviceRecord d;
    d.id = "GPU-0";
    d.model = "H100-SXM";
    d.physical = {989'000, 81'920};
    reg.node.devices.push_back(d);
    auto registered = std::make_shared<std::promise<Status>>();
    scheduler->OnAgentRegister(
        reg, [registered](Result<RegistrationResult> r) { registered->set_value(r.status()); });
    return registered->get_future().get();
  }

  std::pair<Status, v1::SubmitJobResponse> Submit(const v1::SubmitJobRequest& req,
                                                  const CallContext& ctx = Admin()) {
    return Call(&ApiService::SubmitJob, req, ctx);
  }

  std::pair<Status, v1::Job> Get(const std::string& id, const CallContext& ctx = Admin()) {
    v1::GetJobRequest req;
    req.set_job_id(id);
    return Call(&ApiService::GetJob, req, ctx);
  }

  // Polls GetJob until `pred` holds (or 10 s pass).
  template <typename Pred>
  v1::Job WaitJob(const std::string& id, Pred pred) {
    v1::Job job;
    for (auto deadline = std::chrono::steady_clock::now() + 10s;
         std::chrono::steady_clock::now() < deadline; std::this_thread::sleep_for(10ms)) {
      auto [s, j] = Get(id);
      job = j;
      if (s.ok() && pred(job)) break;
    }
    return job;
  }

  ManualClock clock;
  MemoryStore store;
  AgentHub hub;
  std::unique_ptr<Scheduler> scheduler;
  std::unique_ptr<ServiceImpl> service;
  std::unique_ptr<grpc::Server> server;
};

}  // namespace gpupool::api::testing
