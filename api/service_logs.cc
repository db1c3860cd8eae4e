// ServiceImpl::GetTaskLogs: a small state machine per stream.
//
//   Probe (core thread: may the caller see the task, where does it run, is it finished?)
//     → Fetch (LogFetcher, bounded by a timeout) → OnRead (send the data)
//     → more now? Fetch again : finished? eof and done : follow? Probe after the poll interval.
//
// The steps run one after another, so the stream's position needs no lock; Cancel only flips
// `finished_` and abandons the fetch in flight.
#include <mutex>

#include "api/convert.h"
#include "api/service_internal.h"
#include "scheduler/scheduler.h"

namespace gpupool::api {

class ServiceImpl::LogStream : public std::enable_shared_from_this<LogStream> {
 public:
  LogStream(ServiceImpl* svc, CallContext ctx, const v1::GetTaskLogsRequest& req, int64_t job_id,
            int32_t index, std::function<void(const v1::TaskLogChunk&)> on_item,
            std::function<void(Status)> done)
      : svc_(svc),
        ctx_(std::move(ctx)),
        task_id_(req.task_id()),
        job_id_(job_id),
        index_(index),
        follow_(req.follow()),
        offset_(req.offset()),
        on_item_(std::move(on_item)),
        done_(std::move(done)) {}

  void Probe() {
    auto self = shared_from_this();
    if (finished_) return;
    svc_->jobs_->GetJob(job_id_, [self](Result<JobRecord> job) {
      if (self->finished_) return;
      if (!job.ok()) return self->Finish(job.status());
      if (!self->checked_) {
        if (Status s = RequireJobAccess(self->ctx_, *job); !s.ok()) return self->Finish(s);
        self->checked_ = true;
      }
      if (self->index_ >= static_cast<int32_t>(job->tasks.size())) {
        return self->Finish(Status::NotFound("task " + self->task_id_ + " not found"));
      }
      const TaskRecord& t = job->tasks[static_cast<size_t>(self->index_)];
      self->terminal_ = IsTerminal(t.state) || IsTerminal(job->state);
      self->node_ = t.node;
      self->OnProbe();
    });
  }

  // Stops the stream without calling done.
  void Cancel() {
    finished_ = true;
    Abandon();
  }

 private:
  void OnProbe() {
    if (!node_.empty()) return Fetch();
    if (terminal_) return SendFinal("");  // ended before it ever ran
    if (follow_) {
      Announce();
      return PollLater();
    }
    Finish(Status::FailedPrecondition("task " + task_id_ + " has not been placed on a node yet"));
  }

  void Fetch() {
    if (finished_) return;
    auto self = shared_from_this();
    auto settled = std::make_shared<std::atomic<bool>>(false);
    std::string node = node_;
    std::function<void()> cancel_timer =
        svc_->timers_->After(svc_->options_.log_fetch_timeout, [self, settled, node] {
          if (settled->exchange(true)) return;
          self->Finish(Status::Unavailable("node " + node + " did not answer for the logs of " +
                                           "task " + self->task_id_));
        });
    std::function<void()> abandon =
        svc_->logs_->FetchLogs(node_, task_id_, offset_, svc_->options_.log_chunk_bytes,
                               [self, settled, cancel_timer](Result<LogRead> r) {
                                 if (settled->exchange(true)) return;
                                 cancel_timer();
                                 self->OnRead(std::move(r));
                               });
    std::lock_guard<std::mutex> lock(mu_);
    abandon_ = std::move(abandon);
  }

  // Not started yet: answer at once with an empty chunk (REST sends its status line and headers,
  // gRPC its metadata), so a follower knows the stream is open while it waits.
  void Announce() {
    if (announced_) return;
    announced_ = true;
    v1::TaskLogChunk opened;
    opened.set_offset(offset_);
    on_item_(opened);
  }

  void OnRead(Result<LogRead> r) {
    if (finished_) return;
    if (!r.ok()) {
      // Placed but not yet started on its node (the image still pulling, say): the node has no
      // log for it yet (NOT_FOUND). A follower waits for it; the task's end still ends the wait.
      if (follow_ && !terminal_ && r.status().code() == StatusCode::kNotFound) {
        Announce();
        return PollLater();
      }
      return Finish(r.status());
    }
    LogRead& read = *r;
    bool drained = read.eof || read.data.empty();
    if (drained && terminal_) {
      offset_ = read.offset;
      return SendFinal(read.data);
    }
    if (!read.data.empty()) {
      v1::TaskLogChunk chunk;
      chunk.set_offset(read.offset);
      chunk.set_data(std::move(read.data));
      offset_ = read.offset + static_cast<int64_t>(chunk.data().size());
      on_item_(chunk);
    }
    if (!drained) return Fetch();
    if (!follow_) return Finish(Status::Ok());
    PollLater();
  }

  void PollLater() {
    auto self = shared_from_this();
    svc_->timers_->After(svc_->options_.log_poll_interval, [self] {
      if (!self->finished_) self->Probe();
    });
  }

  // The last chunk: whatever data is left, eof=true.
  void SendFinal(std::string data) {
    if (finished_) return;
    v1::TaskLogChunk chunk;
    chunk.set_offset(offset_);
    chunk.set_data(std::move(data));
    chunk.set_eof(true);
    on_item_(chunk);
    Finish(Status::Ok());
  }

  void Finish(Status s) {
    if (finished_.exchange(true)) return;
    Abandon();
    done_(std::move(s));
  }

  void Abandon() {
    std::function<void()> abandon;
    {
      std::lock_guard<std::mutex> lock(mu_);
      abandon = std::move(abandon_);
      abandon_ = nullptr;
    }
    if (abandon) abandon();
  }

  ServiceImpl* svc_;
  const CallContext ctx_;
  const std::string task_id_;
  const int64_t job_id_;
  const int32_t index_;
  const bool follow_;
  // Touched by one step at a time (the steps are sequential).
  bool announced_ = false;  // the empty first chunk of a followed, unplaced task was sent
  int64_t offset_;
  std::string node_;
  bool terminal_ = false;
  bool checked_ = false;
  std::function<void(const v1::TaskLogChunk&)> on_item_;
  std::function<void(Status)> done_;
  std::atomic<bool> finished_{false};
  std::mutex mu_;
  std::function<void()> abandon_;  // guarded by mu_
};

Cancel ServiceImpl::GetTaskLogs(const CallContext& ctx, const v1::GetTaskLogsRequest& req,
                                std::function<void(const v1::TaskLogChunk&)> on_item,
                                std::function<void(Status)> done) {
  int64_t job_id = 0;
  int32_t index = 0;
  Status s = ValidateTaskId(req.task_id());
  if (s.ok() && req.offset() < 0) {
    s = Invalid("offset", "must be >= 0, got " + std::to_string(req.offset()));
  }
  if (!s.ok() || !ParseTaskId(req.task_id(), &job_id, &index)) {
    done(s);
    return [] {};
  }
  auto stream = std::make_shared<LogStream>(this, ctx, req, job_id, index, std::move(on_item),
                                            std::move(done));
  stream->Probe();
  return [stream] { stream->Cancel(); };
}

}  // namespace gpupool::api
