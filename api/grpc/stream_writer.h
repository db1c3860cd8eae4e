// StreamWriter<Item>: a gRPC server-streaming call (ServerWriteReactor) fed by one of
// ApiService's stream methods (WatchJob, GetTaskLogs).
//
// The ApiService pushes items and the final status from any thread, at any pace; gRPC allows one
// write in flight. The writer queues items (at most kMaxQueued: a client that reads too slowly
// loses the stream with RESOURCE_EXHAUSTED rather than growing the server's memory), writes them
// in order, then finishes with the ApiService's status. A client that cancels or goes away cancels
// the upstream stream; Abort() does the same for server shutdown.
//
// Lifetime: gRPC owns the reactor and deletes it in OnDone(); the ApiService's callbacks hold a
// shared_ptr to the State, which outlives the reactor and turns late callbacks into no-ops.
// Every gRPC operation is decided under the State's mutex and started outside it.
//
// Thread safety: all public members may be called from any thread.
#pragma once

#include <grpcpp/support/server_callback.h>

#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <utility>

#include "api/service.h"
#include "api/status_convert.h"

namespace gpupool::api::grpcface {

// What shutdown needs from a live stream.
class Abortable {
 public:
  virtual ~Abortable() = default;
  virtual void Abort(const Status& status) = 0;
};

// The live streams of one server, so that Shutdown() ends them instead of waiting for them.
class StreamTracker {
 public:
  // Registers a stream; when the tracker is already closed the stream is aborted at once.
  void Add(const std::shared_ptr<Abortable>& s);
  void Remove(const std::shared_ptr<Abortable>& s);
  // Closes the tracker and aborts every live stream with `status`.
  void AbortAll(const Status& status);

 private:
  std::mutex mu_;
  bool closed_ = false;                        // guarded by mu_
  std::set<std::shared_ptr<Abortable>> live_;  // guarded by mu_
};

template <typename Item>
class StreamWriter final : public Abortable,
                           public std::enable_shared_from_this<StreamWriter<Item>> {
 public:
  static constexpr size_t kMaxQueued = 1024;

  // Creates the reactor that gRPC will own; the returned State is what callbacks capture.
  static std::pair<grpc::ServerWriteReactor<Item>*, std::shared_ptr<StreamWriter>> Create(
      StreamTracker* tracker) {
    auto state = std::shared_ptr<StreamWriter>(new StreamWriter(tracker));
    auto* reactor = new Reactor(state);
    state->reactor_ = reactor;
    tracker->Add(state);
    return {reactor, state};
  }

  // Upstream side.
  void Push(const Item& item) {
    Actions a;
    {
      std::lock_guard lock(mu_);
      if (final_ || reactor_ == nullptr) return;
      if (!writing_) {
        in_flight_ = item;
        writing_ = true;
        a.reactor = reactor_;
        a.write = &in_flight_;
      } else if (queue_.size() < kMaxQueued) {
        queue_.push_back(item);
      } else {
        EndLocked(Status::ResourceExhausted("stream dropped: the client read too slowly (" +
                                            std::to_string(kMaxQueued) + " messages queued)"),
                  &a);
      }
    }
    Run(a);
  }
  void Done(const Status& status) {
    Actions a;
    {
      std::lock_guard lock(mu_);
      if (!final_) final_ = status;
      MaybeFinishLocked(&a);
    }
    Run(a);
  }
  // Hands over the upstream's Cancel; runs it at once when the stream has already ended early.
  void SetUpstreamCancel(Cancel cancel) {
    Actions a;
    {
      std::lock_guard lock(mu_);
      if (cancel_requested_) {
        a.cancel = std::move(cancel);
      } else {
        upstream_cancel_ = std::move(cancel);
      }
    }
    Run(a);
  }

  void Abort(const Status& status) override {
    Actions a;
    {
      std::lock_guard lock(mu_);
      EndLocked(status, &a);
    }
    Run(a);
  }

 private:
  class Reactor final : public grpc::ServerWriteReactor<Item> {
   public:
    explicit Reactor(std::shared_ptr<StreamWriter> state) : state_(std::move(state)) {}
    void OnWriteDone(bool ok) override { state_->OnWriteDone(ok); }
    void OnCancel() override {
      state_->Abort(Status(StatusCode::kCancelled, "cancelled by the client"));
    }
    void OnDone() override {
      state_->OnDone();
      delete this;
    }

   private:
    std::shared_ptr<StreamWriter> state_;
  };

  // gRPC operations decided under the lock, run after it is released.
  struct Actions {
    grpc::ServerWriteReactor<Item>* reactor = nullptr;
    const Item* write = nullptr;
    std::optional<grpc::Status> finish;
    Cancel cancel;
  };

  explicit StreamWriter(StreamTracker* tracker) : tracker_(tracker) {}

  void OnWriteDone(bool ok) {
    Actions a;
    {
      std::lock_guard lock(mu_);
      writing_ = false;
      if (!ok) {
        EndLocked(Status(StatusCode::kCancelled, "the client went away"), &a);
      } else if (!queue_.empty()) {
        in_flight_ = std::move(queue_.front());
        queue_.pop_front();
        writing_ = true;
        a.reactor = reactor_;
        a.write = &in_flight_;
      } else {
        MaybeFinishLocked(&a);
      }
    }
    Run(a);
  }

  void OnDone() {
    Actions a;
    {
      std::lock_guard lock(mu_);
      reactor_ = nullptr;
      RequestCancelLocked(&a);
    }
    Run(a);
    tracker_->Remove(this->shared_from_this());
  }

  // Ends the stream early: drops queued items, stops the upstream, finishes when no write is out.
  void EndLocked(const Status& status, Actions* a) {
    if (!final_) final_ = status;
    queue_.clear();
    RequestCancelLocked(a);
    MaybeFinishLocked(a);
  }
  void RequestCancelLocked(Actions* a) {
    cancel_requested_ = true;
    if (upstream_cancel_) a->cancel = std::exchange(upstream_cancel_, nullptr);
  }
  void MaybeFinishLocked(Actions* a) {
    if (writing_ || !queue_.empty() || !final_ || finishing_ || reactor_ == nullptr) return;
    finishing_ = true;
    a->reactor = reactor_;
    a->finish = ToGrpcStatus(*final_);
  }
  void Run(Actions& a) {
    // a.reactor stays valid here: gRPC deletes it only after Finish, which only this call starts.
    if (a.write != nullptr) a.reactor->StartWrite(a.write);
    if (a.finish) a.reactor->Finish(std::move(*a.finish));
    if (a.cancel) a.cancel();
  }

  StreamTracker* const tracker_;
  std::mutex mu_;
  grpc::ServerWriteReactor<Item>* reactor_ = nullptr;  // guarded by mu_; null after OnDone
  std::deque<Item> queue_;                             // guarded by mu_
  Item in_flight_;                 // the item gRPC is writing; touched only while writing_
  bool writing_ = false;           // guarded by mu_
  bool finishing_ = false;         // guarded by mu_
  std::optional<Status> final_;    // guarded by mu_
  Cancel upstream_cancel_;         // guarded by mu_
  bool cancel_requested_ = false;  // guarded by mu_
};

}  // namespace gpupool::api::grpcface
