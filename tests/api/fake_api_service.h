// FakeApiService: an in-test ApiService that records every call and answers with canned
// results, so adapter tests check translation (route → method, fields, codes) and nothing else.
//
// Thread safety: all members may be called from any thread.
#pragma once

#include <google/protobuf/message.h>

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "api/service.h"

namespace gpupool::api::testing {

class FakeApiService final : public ApiService {
 public:
  struct Call {
    std::string method;
    CallContext ctx;
    std::shared_ptr<google::protobuf::Message> request;
  };

  ~FakeApiService() override {
    std::vector<std::thread> threads;
    {
      std::lock_guard lock(mu_);
      threads.swap(threads_);
    }
    for (auto& t : threads) t.join();
  }

  // Every following call fails with `status` (OK = succeed again).
  void FailWith(Status status) {
    std::lock_guard lock(mu_);
    fail_ = std::move(status);
  }
  // The reply of method `name` (e.g. "GetJob"); default-constructed when unset.
  void SetReply(const std::string& name, const google::protobuf::Message& reply) {
    std::lock_guard lock(mu_);
    replies_[name].reset(reply.New());
    replies_[name]->CopyFrom(reply);
  }
  // Replies from a fresh thread instead of inside the call.
  void ReplyAsync(bool async) { async_ = async; }
  void SetReady(Status status) {
    std::lock_guard lock(mu_);
    ready_ = std::move(status);
  }

  // Streams: the events WatchJob sends (GetTaskLogs sends `log_chunks`), then `stream_end` —
  // unless `hold_streams`, which keeps them open until cancelled.
  void SetStream(std::vector<v1::JobEvent> events, Status end, bool hold = false) {
    std::lock_guard lock(mu_);
    events_ = std::move(events);
    stream_end_ = std::move(end);
    hold_ = hold;
  }
  void SetLogChunks(std::vector<v1::TaskLogChunk> chunks) {
    std::lock_guard lock(mu_);
    chunks_ = std::move(chunks);
  }
  int cancels() const { return cancels_; }

  std::vector<Call> calls() const {
    std::lock_guard lock(mu_);
    return calls_;
  }
  size_t call_count() const {
    std::lock_guard lock(mu_);
    return calls_.size();
  }
  Call last() const {
    std::lock_guard lock(mu_);
    return calls_.empty() ? Call{} : calls_.back();
  }

#define GPUPOOL_FAKE_UNARY(Name, Req, Resp)                                              \
  void Name(const CallContext& ctx, const v1::Req& req, Reply<v1::Resp> done) override { \
    Unary<v1::Resp>(#Name, ctx, req, std::move(done));                                   \
  }
  GPUPOOL_FAKE_UNARY(SubmitJob, SubmitJobRequest, SubmitJobResponse)
  GPUPOOL_FAKE_UNARY(GetJob, GetJobRequest, Job)
  GPUPOOL_FAKE_UNARY(ListJobs, ListJobsRequest, ListJobsResponse)
  GPUPOOL_FAKE_UNARY(CancelJob, CancelJobRequest, Job)
  GPUPOOL_FAKE_UNARY(CreatePool, CreatePoolRequest, Pool)
  GPUPOOL_FAKE_UNARY(GetPool, GetPoolRequest, Pool)
  GPUPOOL_FAKE_UNARY(ListPools, ListPoolsRequest, ListPoolsResponse)
  GPUPOOL_FAKE_UNARY(UpdatePool, UpdatePoolRequest, Pool)
  GPUPOOL_FAKE_UNARY(DeletePool, DeletePoolRequest, DeletePoolResponse)
  GPUPOOL_FAKE_UNARY(ListNodes, ListNodesRequest, ListNodesResponse)
  GPUPOOL_FAKE_UNARY(GetNode, GetNodeRequest, Node)
  GPUPOOL_FAKE_UNARY(CordonNode, NodeActionRequest, Node)
  GPUPOOL_FAKE_UNARY(UncordonNode, NodeActionRequest, Node)
  GPUPOOL_FAKE_UNARY(DrainNode, NodeActionRequest, Node)
  GPUPOOL_FAKE_UNARY(ClearDeviceFault, ClearDeviceFaultRequest, Node)
  GPUPOOL_FAKE_UNARY(SetDeviceSlots, SetDeviceSlotsRequest, Node)
  GPUPOOL_FAKE_UNARY(SetMigLayout, SetMigLayoutRequest, Node)
  GPUPOOL_FAKE_UNARY(FenceNode, NodeActionRequest, Node)
  GPUPOOL_FAKE_UNARY(ListGpuModels, ListGpuModelsRequest, ListGpuModelsResponse)
  GPUPOOL_FAKE_UNARY(ListPriorityClasses, ListPriorityClassesRequest, ListPriorityClassesResponse)
  GPUPOOL_FAKE_UNARY(ListSkus, ListSkusRequest, ListSkusResponse)
  GPUPOOL_FAKE_UNARY(CreateTenant, CreateTenantRequest, Tenant)
  GPUPOOL_FAKE_UNARY(GetTenant, GetTenantRequest, Tenant)
  GPUPOOL_FAKE_UNARY(ListTenants, ListTenantsRequest, ListTenantsResponse)
  GPUPOOL_FAKE_UNARY(DeleteTenant, DeleteTenantRequest, DeleteTenantResponse)
  GPUPOOL_FAKE_UNARY(SetQuota, SetQuotaRequest, Quota)
  GPUPOOL_FAKE_UNARY(GetQuota, GetQuotaRequest, Quota)
  GPUPOOL_FAKE_UNARY(ListQuotas, ListQuotasRequest, ListQuotasResponse)
  GPUPOOL_FAKE_UNARY(DeleteQuota, DeleteQuotaRequest, DeleteQuotaResponse)
#undef GPUPOOL_FAKE_UNARY

  Cancel WatchJob(const CallContext& ctx, const v1::WatchJobRequest& req,
                  std::function<void(const v1::JobEvent&)> on_item,
                  std::function<void(Status)> done) override {
    std::vector<v1::JobEvent> events;
    {
      std::lock_guard lock(mu_);
      events = events_;
    }
    return Stream("WatchJob", ctx, req, events, std::move(on_item), std::move(done));
  }
  Cancel GetTaskLogs(const CallContext& ctx, const v1::GetTaskLogsRequest& req,
                     std::function<void(const v1::TaskLogChunk&)> on_item,
                     std::function<void(Status)> done) override {
    std::vector<v1::TaskLogChunk> chunks;
    {
      std::lock_guard lock(mu_);
      chunks = chunks_;
    }
    return Stream("GetTaskLogs", ctx, req, chunks, std::move(on_item), std::move(done));
  }

  Status Ready() const override {
    std::lock_guard lock(mu_);
    return ready_;
  }

 private:
  void Record(const char* name, const CallContext& ctx, const google::protobuf::Message& req) {
    std::shared_ptr<google::protobuf::Message> copy(req.New());
    copy->CopyFrom(req);
    std::lock_guard lock(mu_);
    calls_.push_back({name, ctx, std::move(copy)});
  }

  template <typename Resp, typename Req>
  void Unary(const char* name, const CallContext& ctx, const Req& req, Reply<Resp> done) {
    Record(name, ctx, req);
    Resp resp;
    Status status;
    {
      std::lock_guard lock(mu_);
      if (auto it = replies_.find(name); it != replies_.end()) resp.CopyFrom(*it->second);
      status = fail_;
    }
    if (!status.ok()) resp.Clear();
    if (!async_) return done(status, std::move(resp));
    std::lock_guard lock(mu_);
    threads_.emplace_back([done = std::move(done), status, resp = std::move(resp)]() mutable {
      done(status, std::move(resp));
    });
  }

  template <typename Req, typename Item>
  Cancel Stream(const char* name, const CallContext& ctx, const Req& req,
                const std::vector<Item>& items, std::function<void(const Item&)> on_item,
                std::function<void(Status)> done) {
    Record(name, ctx, req);
    Status fail, end;
    bool hold;
    {
      std::lock_guard lock(mu_);
      fail = fail_;
      end = stream_end_;
      hold = hold_;
    }
    auto cancelled = std::make_shared<std::atomic<bool>>(false);
    Cancel cancel = [this, cancelled] {
      if (!cancelled->exchange(true)) ++cancels_;
    };
    if (!fail.ok()) {
      done(fail);
      return cancel;
    }
    if (!async_) {
      for (const Item& item : items) on_item(item);
      if (!hold) done(end);
      return cancel;
    }
    // Answered later from another thread, as the real service does (it probes the core first);
    // a stream cancelled in the meantime sends nothing, as the real one does.
    std::lock_guard lock(mu_);
    threads_.emplace_back(
        [items, hold, end, cancelled, on_item = std::move(on_item), done = std::move(done)] {
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
          for (const Item& item : items) {
            if (cancelled->load()) return;
            on_item(item);
          }
          if (!hold && !cancelled->load()) done(end);
        });
    return cancel;
  }

  mutable std::mutex mu_;
  std::vector<Call> calls_;
  std::map<std::string, std::unique_ptr<google::protobuf::Message>> replies_;
  Status fail_;
  Status ready_;
  std::vector<v1::JobEvent> events_;
  std::vector<v1::TaskLogChunk> chunks_;
  Status stream_end_;
  bool hold_ = false;
  std::atomic<bool> async_{false};
  std::atomic<int> cancels_{0};
  std::vector<std::thread> threads_;
};

}  // namespace gpupool::api::testing
