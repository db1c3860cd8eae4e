#include "agent/agent.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <chrono>
#include <deque>
#include <future>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "agent/capabilities.h"
#include "agent/enroll.h"
#include "agent/health/health_monitor.h"
#include "agent/image/image_pins.h"
#include "agent/image_cache_report.h"
#include "agent/lease_keeper.h"
#include "agent/mig_relayout.h"
#include "agent/mps/mps_manager.h"
#include "agent/proto_convert.h"
#include "agent/scrub/device_guard.h"
#include "api/client/leader_follow.h"
#include "base/address_list.h"
#include "base/log.h"
#include "gpupool/v1/agent.grpc.pb.h"

namespace gpupool::agent {

namespace asio = boost::asio;
namespace v1 = gpupool::v1;

namespace {

constexpr int64_t kMaxLogChunk = 1 << 20;
constexpr int kHeartbeatsToConfirm = 2;
// Final reports stay re-sendable this long after they were confirmed, and at most this many:
// a scheduler that received one while its database was down and then died before storing it
// hears it again from the next stream (updates are idempotent by task id and attempt).
constexpr int64_t kFinishedRetentionUs = 15LL * 60 * 1'000'000;
constexpr size_t kFinishedRetentionMax = 256;

// One connection: a gRPC callback reactor whose events are posted to the agent's strand,
// tagged with the connection's generation so stale events are recognized. A hold keeps the call
// alive until the agent, on its strand, releases it (so it never races OnDone with a write).
class Stream final : public grpc::ClientBidiReactor<v1::AgentMessage, v1::SchedulerMessage> {
 public:
  struct Sink {
    virtual ~Sink() = default;
    virtual void OnRead(uint64_t gen, v1::SchedulerMessage msg) = 0;
    virtual void OnWriteDone(uint64_t gen, bool ok) = 0;
    virtual void OnBroken(uint64_t gen) = 0;
    virtual void OnDone(uint64_t gen, grpc::Status status) = 0;
  };

  Stream(v1::AgentService::Stub* stub, std::shared_ptr<Sink> sink, uint64_t gen)
      : sink_(std::move(sink)), gen_(gen) {
    stub->async()->Connect(&ctx_, this);
    AddHold();
    StartRead(&in_);
    StartCall();
  }

  void Write(v1::AgentMessage msg) {
    out_ = std::move(msg);
    StartWrite(&out_);
  }
  void Cancel() { ctx_.TryCancel(); }
  void CloseWrites() { StartWritesDone(); }
  void Release() { RemoveHold(); }

  void OnReadDone(bool ok) override {
    if (!ok) {
      sink_->OnBroken(gen_);
      return;
    }
    sink_->OnRead(gen_, std::move(in_));
    in_.Clear();
    StartRead(&in_);
  }
  void OnWriteDone(bool ok) override {
    sink_->OnWriteDone(gen_, ok);
    if (!ok) ctx_.TryCancel();
  }
  void OnDone(const grpc::Status& s) override {
    sink_->OnDone(gen_, s);
    delete this;
  }

 private:
  std::shared_ptr<Sink> sink_;
  uint64_t gen_;
  grpc::ClientContext ctx_;
  v1::SchedulerMessage in_;
  v1::AgentMessage out_;
};

}  // namespace

class Agent::Impl final : public Stream::Sink, public std::enable_shared_from_this<Agent::Impl> {
 public:
  Impl(AgentConfig config, DeviceBackend* backend, TaskRunner* runner,
       std::shared_ptr<grpc::Channel> channel, asio::io_context& io, const Clock* clock)
      : config_(std::move(config)),
        backend_(backend),
        runner_(runner),
        stub_(v1::AgentService::NewStub(channel)),
        strand_(asio::make_strand(io)),
        heartbeat_timer_(strand_),
        reconnect_timer_(strand_),
        health_timer_(strand_),
        lease_timer_(strand_),
        clock_(clock),
        rng_(std::hash<std::string>{}(config_.node_name) ^
             static_cast<uint64_t>(clock->NowMicros())),
        interval_ms_(config_.heartbeat_interval_ms),
        image_cache_(
            runner->options().containers ? runner->options().containers->options().store : nullptr,
            kImageCacheRefreshMs / std::max<int64_t>(interval_ms_, 1)),
        mig_(backend, config_.models, config_.data_dir + "/mig") {
    stats_.heartbeat_interval_ms = interval_ms_;
    if (runner->options().containers) {
      pins_ = std::make_unique<image::ImagePins>(runner->options().containers->options().store);
    }
  }

  void SetSampleObserver(Agent::SampleObserver observer) { sample_observer_ = std::move(observer); }
  void SetChannelMaker(Agent::ChannelMaker make) {
    follower_ = std::make_unique<api::LeaderFollower>(
        config_.scheduler, std::move(make),
        std::chrono::milliseconds(std::min<int64_t>(250, config_.reconnect.max_ms)));
  }

  Status Start() {
    auto inv = backend_->Discover();
    if (!inv.ok()) return inv.status().WithContext("backend " + backend_->Name());
    GPUPOOL_RETURN_IF_ERROR(ApplyTimeSlicing(config_.time_slicing, &inv->devices));
    inventory_ = std::move(inv).value();
    // A re-partition a previous agent left half-way is finished before the node registers.
    mig_.Recover(inventory_, [this](const std::string& gpu) { return GpuBusy(gpu); });
    if (auto again = backend_->Discover();
        again.ok() && ApplyTimeSlicing(config_.time_slicing, &again->devices).ok()) {
      inventory_ = std::move(again).value();
    }
    std::weak_ptr<Impl> weak = shared_from_this();
    runner_->SetListener(config_.node_name, [weak](const TaskStatus& st) {
      if (auto self = weak.lock()) {
        if (st.phase == TaskPhase::kPulling) {
          asio::post(self->strand_, [self, st] { self->SendPullProgress(st); });
        } else {
          asio::post(self->strand_, [self, st] { self->QueueUpdate(st); });
        }
      }
    });
    LogInfo("agent", "starting",
            {{"node", config_.node_name},
             {"pool", config_.pool},
             {"backend", backend_->Name()},
             {"scheduler", config_.scheduler},
             {"devices", std::to_string(inventory_.devices.size())}});
    asio::post(strand_, [self = shared_from_this()] {
      self->Connect();
      self->ScheduleHeartbeat();
      self->ScheduleHealthPoll();
    });
    return Status::Ok();
  }

  // REQUIRES: the io_context is being run (every wait below is bounded regardless).
  void Shutdown(bool stop_tasks) {
    if (shut_down_.exchange(true)) return;
    auto self = shared_from_this();
    bool stopped_some = stop_tasks;
    if (stop_tasks) {
      runner_->StopAll(config_.node_name, config_.stop_grace_period_ms, "agent shutting down");
    } else {
      // Left running for the next agent process, which re-adopts them (TaskRunner::Recover) —
      // except those it could not rebuild: they stop now, reported, rather than run unguarded.
      stopped_some = StopUnadoptable();
    }
    if (stopped_some) {
      // Let the final updates go out (bounded).
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
      while (std::chrono::steady_clock::now() < until) {
        auto idle = std::make_shared<std::promise<bool>>();
        auto f = idle->get_future();
        asio::post(strand_, [self, idle] {
          idle->set_value(self->stream_ == nullptr || (self->outbox_.empty() && !self->writing_));
        });
        if (f.wait_for(std::chrono::seconds(1)) == std::future_status::ready && f.get()) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    }
    runner_->RemoveListener(config_.node_name);
    auto closed = std::make_shared<std::promise<void>>();
    auto closed_f = closed->get_future();
    asio::post(strand_, [self, closed] {
      self->closing_ = true;
      self->heartbeat_timer_.cancel();
      self->reconnect_timer_.cancel();
      self->health_timer_.cancel();
      self->lease_timer_.cancel();
      if (self->streams_open_ == 0) return closed->set_value();
      self->on_closed_ = [closed] { closed->set_value(); };
      if (self->stream_ == nullptr) return;  // a stream on its way out; OnDone will follow
      // A graceful half-close first (the scheduler sees the stream end after the last update);
      // cancelled below if the scheduler does not finish the call.
      if (!self->writing_) {
        self->stream_->CloseWrites();
      } else {
        self->stream_->Cancel();
      }
    });
    if (closed_f.wait_for(std::chrono::seconds(1)) != std::future_status::ready) {
      asio::post(strand_, [self] {
        if (self->stream_ != nullptr) self->stream_->Cancel();
      });
      if (closed_f.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
        LogWarn("agent", "stream did not close in time", {{"node", config_.node_name}});
      }
    }
    LogInfo("agent", "stopped", {{"node", config_.node_name}});
  }

  AgentStats stats() const {
    std::lock_guard lock(stats_mu_);
    return stats_;
  }
  const AgentConfig& config() const { return config_; }

  // Stream::Sink — called on gRPC threads; everything hops onto the strand.
  void OnRead(uint64_t gen, v1::SchedulerMessage msg) override {
    asio::post(strand_, [self = shared_from_this(), gen, m = std::move(msg)]() mutable {
      if (gen == self->gen_ && self->stream_ != nullptr) self->Handle(std::move(m));
    });
  }
  void OnWriteDone(uint64_t gen, bool ok) override {
    asio::post(strand_, [self = shared_from_this(), gen, ok] { self->WriteDone(gen, ok); });
  }
  void OnBroken(uint64_t gen) override {
    asio::post(strand_, [self = shared_from_this(), gen] { self->Broken(gen); });
  }
  void OnDone(uint64_t gen, grpc::Status status) override {
    asio::post(strand_, [self = shared_from_this(), gen, status] {
      --self->streams_open_;
      LogInfo("agent", "stream closed",
              {{"node", self->config_.node_name},
               {"gen", std::to_string(gen)},
               {"code", std::to_string(status.error_code())},
               {"error", status.error_message()}});
      if (gen == self->gen_ && self->stream_ != nullptr) self->Broken(gen);
      if (gen == self->gen_) self->FollowLeader(status);
      if (self->closing_ && self->streams_open_ == 0 && self->on_closed_) {
        auto done = std::move(self->on_closed_);
        self->on_closed_ = nullptr;
        done();
      }
    });
  }

 private:
  struct Outgoing {
    v1::AgentMessage msg;
    std::string task_id;  // for updates
    uint64_t seq = 0;
  };
  struct Pending {
    v1::TaskUpdate update;
    uint64_t seq = 0;
    uint64_t written_gen = 0;  // 0 = not written on a live stream yet
    int64_t heartbeat_mark = 0;
  };

  // --- connection -------------------------------------------------------------------------
  void Connect() {
    if (closing_) return;
    if (auto inv = backend_->Discover();
        inv.ok() && ApplyTimeSlicing(config_.time_slicing, &inv->devices).ok()) {
      inventory_ = std::move(inv).value();
    }
    if (follower_ && follower_->channel() != stub_channel_) {  // following the leader
      stub_channel_ = follower_->channel();
      stub_ = v1::AgentService::NewStub(stub_channel_);
    }
    ++gen_;
    ++streams_open_;
    outbox_.clear();
    writing_ = false;
    hb_on_stream_ = 0;
    stream_ = new Stream(stub_.get(), shared_from_this(), gen_);
    ExpireFinished();
    register_sent_us_ = clock_->MonotonicMicros();  // a RegisterAck dates the lease from here
    hb_sent_.clear();
    Enqueue({MakeRegister(), "", 0});
    for (auto& [id, p] : pending_) {
      p.written_gen = 0;
      v1::AgentMessage m;
      *m.mutable_task_update() = p.update;
      Enqueue({std::move(m), id, p.seq});
    }
    {
      std::lock_guard lock(stats_mu_);
      stats_.connected = true;
      stats_.registered = false;
      ++stats_.registrations;
    }
  }

  // A standby's NotLeader, or a followed leader that is gone: the next connection goes where the
  // follower says, after its pause instead of the usual backoff (the call was not executed).
  void FollowLeader(const grpc::Status& status) {
    if (!follower_ || closing_ || stream_ != nullptr) return;
    const api::LeaderFollower::Next next = follower_->OnFailure(status);
    if (!next.retry) return;
    LogInfo("agent", "following the leader",
            {{"node", config_.node_name},
             {"target", follower_->target()},
             {"delay_ms", std::to_string(next.delay.count())}});
    reconnect_timer_.expires_after(next.delay);
    reconnect_timer_.async_wait([self = shared_from_this()](boost::system::error_code ec) {
      if (!ec) self->Connect();
    });
  }

  void Broken(uint64_t gen) {
    if (gen != gen_ || stream_ == nullptr) return;
    stream_->Cancel();
    stream_->Release();
    stream_ = nullptr;
    outbox_.clear();
    writing_ = false;
    {
      std::lock_guard lock(stats_mu_);
      stats_.connected = false;
      stats_.registered = false;
    }
    if (closing_) return;
    if (std::exchange(reregister_, false)) {  // not a failure: register again at once
      reconnect_timer_.expires_after(std::chrono::milliseconds(0));
      reconnect_timer_.async_wait([self = shared_from_this()](boost::system::error_code ec) {
        if (!ec) self->Connect();
      });
      return;
    }
    int64_t max_ms = config_.reconnect.max_ms;
    // Reconnect well within the lease, so a restarted or new leader hears from this node (and its
    // finished work) before it may declare the node lost (docs/ha.md).
    if (lease_ms_ > 0) max_ms = std::max<int64_t>(1, std::min(max_ms, lease_ms_ / 4));
    const int64_t base =
        std::min(max_ms, config_.reconnect.initial_ms << std::min<int64_t>(failures_, 20));
    ++failures_;
    std::uniform_real_distribution<double> j(-config_.reconnect.jitter, config_.reconnect.jitter);
    const auto delay = std::max<int64_t>(1, static_cast<int64_t>(base * (1.0 + j(rng_))));
    LogInfo("agent", "stream broken; reconnecting",
            {{"node", config_.node_name},
             {"delay_ms", std::to_string(delay)},
             {"attempt", std::to_string(failures_)}});
    reconnect_timer_.expires_after(std::chrono::milliseconds(delay));
    reconnect_timer_.async_wait([self = shared_from_this()](boost::system::error_code ec) {
      if (!ec) self->Connect();
    });
  }

  void Enqueue(Outgoing out) {
    if (stream_ == nullptr || closing_) return;  // no writes after the half-close
    outbox_.push_back(std::move(out));
    Kick();
  }

  void Kick() {
    if (writing_ || outbox_.empty() || stream_ == nullptr || closing_) return;
    in_flight_ = std::move(outbox_.front());
    outbox_.pop_front();
    writing_ = true;
    stream_->Write(in_flight_.msg);
  }

  void WriteDone(uint64_t gen, bool ok) {
    if (gen != gen_ || stream_ == nullptr) return;
    writing_ = false;
    if (!ok) return;  // OnBroken follows
    std::lock_guard lock(stats_mu_);
    const auto& m = in_flight_.msg;
    if (m.has_heartbeat()) {
      ++stats_.heartbeats;
      ++hb_on_stream_;
      for (auto it = pending_.begin(); it != pending_.end();) {
        const Pending& p = it->second;
        const bool confirmed =
            p.written_gen == gen_ && hb_on_stream_ - p.heartbeat_mark >= kHeartbeatsToConfirm;
        if (confirmed && IsTerminal(p.update.state())) {
          finished_[it->first] = Finished{p.update, clock_->MonotonicMicros()};
        }
        it = confirmed ? pending_.erase(it) : std::next(it);
      }
      if (finished_.size() > kFinishedRetentionMax) ExpireFinished();
    } else if (m.has_task_update()) {
      ++stats_.updates;
      auto it = pending_.find(in_flight_.task_id);
      if (it != pending_.end() && it->second.seq == in_flight_.seq) {
        it->second.written_gen = gen_;
        it->second.heartbeat_mark = hb_on_stream_;
      }
    }
    stats_.pending_updates = static_cast<int64_t>(pending_.size());
    Kick();
  }

  // --- messages out -----------------------------------------------------------------------
  bool OutOfService(const std::string& uuid) const {
    const auto& guard = runner_->options().device_guard;
    return guard && guard->OutOfService(uuid).has_value();
  }

  v1::AgentMessage MakeRegister() {
    v1::AgentMessage m;
    v1::Register* r = m.mutable_register_();
    r->set_node_name(config_.node_name);
    r->set_pool(config_.pool);
    for (const auto& [k, v] : config_.labels) (*r->mutable_labels())[k] = v;
    r->set_cpu_milli(config_.cpu_milli);
    r->set_memory_mib(config_.memory_mib);
    for (const Device& d : inventory_.devices) {
      v1::DeviceInfo* pd = r->add_devices();
      ToProto(d, pd);
      if (OutOfService(d.uuid)) pd->set_healthy(false);
      if (const DeviceFault* f = health_.FaultOf(d.uuid)) {
        pd->set_fault(f->reason);
        pd->set_fault_id(f->fault_id);
      }
    }
    for (const Link& l : inventory_.links) ToProto(l, r->add_links());
    r->set_token(config_.token);
    for (const TaskStatus& t : runner_->Running(config_.node_name)) {
      ToProto(t, r->add_running_tasks());
    }
    r->set_backend(backend_->Name());
    r->set_agent_version(kAgentVersion);
    r->set_spill_budget_mib(config_.spill_budget_mib);
    // Every final report still held, so the scheduler applies them before reconciling.
    for (const auto& [id, p] : pending_) {
      if (IsTerminal(p.update.state())) *r->add_finished_tasks() = p.update;
    }
    for (const auto& [id, f] : finished_) {
      if (!pending_.contains(id)) *r->add_finished_tasks() = f.update;
    }
    for (const sandbox::Capability& c : NodeCapabilities(runner_->options(), backend_)) {
      v1::NodeCapability* pc = r->add_capabilities();
      pc->set_name(c.name);
      pc->set_enforced(c.enforced);
      pc->set_detail(c.detail);
    }
    v1::ImageCache cache;
    if (image_cache_.FillRegister(&cache)) *r->mutable_image_cache() = std::move(cache);
    mig_.FillRegister(r);
    return m;
  }

  void ScheduleHeartbeat() {
    if (closing_) return;
    heartbeat_timer_.expires_after(std::chrono::milliseconds(interval_ms_));
    heartbeat_timer_.async_wait([self = shared_from_this()](boost::system::error_code ec) {
      if (ec) return;
      self->SendHeartbeat();
      self->ScheduleHeartbeat();
    });
  }

  void SendHeartbeat() {
    if (stream_ == nullptr) return;
    for (const Outgoing& o : outbox_) {
      if (o.msg.has_heartbeat()) return;  // the last one has not gone out yet
    }
    const std::vector<TaskStatus> running = runner_->Running(config_.node_name);
    std::map<std::string, DeviceLoad> load;
    for (const TaskStatus& t : running) {
      for (const DeviceGrant& g : t.devices) {
        DeviceLoad& l = load[g.uuid];
        l.uuid = g.uuid;
        l.thread_percentage += g.thread_percentage > 0 ? g.thread_percentage : 100;
        l.vram_mib += g.vram_mib;
      }
    }
    std::vector<DeviceLoad> loads;
    for (auto& [k, v] : load) loads.push_back(v);
    v1::AgentMessage m;
    v1::Heartbeat* hb = m.mutable_heartbeat();
    std::vector<DeviceSample> samples = backend_->Sample(loads);
    for (DeviceSample& s : samples) health_.Annotate(&s);
    if (const auto& mps = runner_->options().mps) {
      std::map<std::string, int32_t> up;
      for (const MpsDaemonState& d : mps->States()) up[d.uuid] += d.up ? 1 : 0;
      for (DeviceSample& s : samples) s.mps_daemons = up[s.uuid];
    }
    if (sample_observer_) {
      // /metrics shows a faulted device unhealthy (gpupool_agent_device_healthy 0).
      std::vector<DeviceSample> shown = samples;
      for (DeviceSample& s : shown) s.healthy = s.healthy && health_.FaultOf(s.uuid) == nullptr;
      sample_observer_(inventory_, shown, running);
    }
    for (const DeviceSample& s : samples) {
      v1::DeviceMetrics* pm = hb->add_devices();
      ToProto(s, pm);
      if (OutOfService(s.uuid)) pm->set_healthy(false);  // a failed VRAM scrub
      // A fault travels apart from `healthy`: gpupoold keeps the device out until an admin
      // clears it, and then the agent's own health bit applies again.
      const HealthMonitor::Counters c = health_.CountersOf(s.uuid);
      pm->set_ecc_errors_corrected(c.ecc_corrected);
      if (const DeviceFault* f = health_.FaultOf(s.uuid)) {
        pm->set_fault(f->reason);
        pm->set_fault_id(f->fault_id);
      }
    }
    for (const TaskStatus& t : running) ToProto(t, hb->add_running_tasks());
    v1::ImageCache cache;
    if (image_cache_.FillHeartbeat(&cache)) *hb->mutable_image_cache() = std::move(cache);
    hb->set_seq(++hb_seq_);
    hb_sent_.emplace_back(hb_seq_, clock_->MonotonicMicros());
    while (hb_sent_.size() > 256) hb_sent_.pop_front();
    Enqueue({std::move(m), "", 0});
  }

  // --- device health -----------------------------------------------------------------------
  void ScheduleHealthPoll() {
    if (closing_) return;
    health_timer_.expires_after(std::chrono::milliseconds(config_.health_poll_ms));
    health_timer_.async_wait([self = shared_from_this()](boost::system::error_code ec) {
      if (ec) return;
      self->PollHealth();
      self->ScheduleHealthPoll();
    });
  }

  void PollHealth() {
    if (const auto& mps = runner_->options().mps) {
      // A dead control daemon took its clients' GPU contexts with it: their tasks fail.
      for (const MpsFailure& f : mps->Supervise()) {
        const std::vector<std::string> failed = runner_->FailIf(
            config_.node_name, [&](const TaskSpec& s) { return mps->UsedBy(s, f); }, f.reason);
        LogWarn("agent", "MPS control daemon failed; failing its tasks",
                {{"node", config_.node_name},
                 {"device", f.uuid},
                 {"reason", f.reason},
                 {"tasks", std::to_string(failed.size())}});
      }
    }
    const std::vector<DeviceEvent> events = backend_->PollEvents();
    if (events.empty()) return;
    for (const DeviceEvent& e : events) {
      LogInfo("agent", "device event",
              {{"node", config_.node_name},
               {"device", e.uuid},
               {"kind", e.kind == DeviceEvent::Kind::kXid            ? "xid"
                        : e.kind == DeviceEvent::Kind::kEccCorrected ? "ecc_corrected"
                                                                     : "ecc_uncorrected"},
               {"xid", std::to_string(e.xid)}});
    }
    const std::vector<DeviceFault> faults = health_.Observe(events, inventory_);
    if (faults.empty()) return;
    for (const DeviceFault& f : faults) {
      const std::string reason = "device " + f.uuid + " failed: " + f.reason;
      const std::vector<std::string> failed =
          runner_->FailDevices(config_.node_name, {f.uuid}, reason);
      LogWarn("agent", "fatal device fault; failing its tasks",
              {{"node", config_.node_name},
               {"device", f.uuid},
               {"reason", f.reason},
               {"tasks", std::to_string(failed.size())}});
    }
    SendHeartbeat();  // tell gpupoold now, not at the next interval
  }

  // Stops every running task a restarted agent could not re-adopt and waits (bounded by the stop
  // grace and a margin) until they have ended. True when there was one.
  bool StopUnadoptable() {
    std::vector<std::string> stopping;
    for (const TaskStatus& t : runner_->Running(config_.node_name)) {
      const std::string why = runner_->WhyNotAdoptable(t.task_id);
      if (why.empty()) continue;
      runner_->Stop(t.task_id, t.attempt, config_.stop_grace_period_ms,
                    "agent shutting down; this task cannot outlive it: " + why);
      stopping.push_back(t.task_id);
    }
    const bool any = !stopping.empty();
    const auto until = std::chrono::steady_clock::now() +
                       std::chrono::milliseconds(config_.stop_grace_period_ms) +
                       std::chrono::seconds(5);
    while (!stopping.empty() && std::chrono::steady_clock::now() < until) {
      std::erase_if(stopping, [&](const std::string& id) {
        const std::optional<TaskStatus> st = runner_->Get(id);
        return !st || st->terminal();
      });
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return any;
  }

  void QueueUpdate(const TaskStatus& st) {
    Pending& p = pending_[st.task_id];
    const bool replaced_terminal =
        p.update.attempt() > st.attempt ||
        (p.update.attempt() == st.attempt && IsTerminal(p.update.state()) &&
         st.phase == TaskPhase::kRunning);
    if (replaced_terminal) return;  // never go back from a newer or final state
    ToProto(st, max_epoch_, &p.update);
    if (st.terminal() && st.phase != TaskPhase::kSucceeded &&
        (lease_stopped_.contains({st.task_id, st.attempt}) || LeaseLapsedNow())) {
      // Stopped because the lease lapsed (by the agent or its keeper): requeue, not a failure.
      p.update.set_lease_expired(true);
      lease_stopped_.erase({st.task_id, st.attempt});
    }
    p.seq = ++seq_;
    p.written_gen = 0;
    v1::AgentMessage m;
    *m.mutable_task_update() = p.update;
    Enqueue({std::move(m), st.task_id, p.seq});
    std::lock_guard lock(stats_mu_);
    stats_.pending_updates = static_cast<int64_t>(pending_.size());
  }

  // A pull's progress goes out on the live stream only: it is not kept in pending_ or sent
  // again after a reconnect (the next progress, or RUNNING, supersedes it), and it never
  // replaces the task's reliable updates.
  void SendPullProgress(const TaskStatus& st) {
    v1::AgentMessage m;
    ToProto(st, max_epoch_, m.mutable_task_update());
    Enqueue({std::move(m), "", 0});
  }

  void QueueNotRunning(const std::string& task_id, int32_t attempt, const std::string& reason) {
    TaskStatus st;
    st.owner = config_.node_name;
    st.task_id = task_id;
    st.attempt = attempt;
    st.phase = TaskPhase::kCancelled;
    st.reason = reason;
    QueueUpdate(st);
  }

  // --- messages in ------------------------------------------------------------------------
  bool Stale(int64_t epoch, const char* what, const std::string& task_id) {
    if (epoch < max_epoch_) {
      LogWarn("agent", "ignoring command from an older epoch",
              {{"node", config_.node_name},
               {"command", what},
               {"task", task_id},
               {"epoch", std::to_string(epoch)},
               {"newest", std::to_string(max_epoch_)}});
      std::lock_guard lock(stats_mu_);
      ++stats_.ignored_commands;
      return true;
    }
    SetEpoch(epoch);
    return false;
  }

  void SetEpoch(int64_t epoch) {
    max_epoch_ = std::max(max_epoch_, epoch);
    std::lock_guard lock(stats_mu_);
    stats_.epoch = max_epoch_;
  }

  void Handle(v1::SchedulerMessage m) {
    switch (m.msg_case()) {
      case v1::SchedulerMessage::kRegisterAck:
        return HandleAck(m.register_ack());
      case v1::SchedulerMessage::kStartTask:
        return HandleStart(m.start_task());
      case v1::SchedulerMessage::kStopTask:
        return HandleStop(m.stop_task());
      case v1::SchedulerMessage::kFetchLogs:
        return HandleFetchLogs(m.fetch_logs());
      case v1::SchedulerMessage::kLeaseRenewal:
        return HandleRenewal(m.lease_renewal());
      case v1::SchedulerMessage::kPinnedImages:
        if (Stale(m.pinned_images().epoch(), "PinnedImages", "")) return;
        return SetPins(m.pinned_images().images());
      case v1::SchedulerMessage::kSetMigLayout:
        if (Stale(m.set_mig_layout().epoch(), "SetMigLayout", "")) return;
        return HandleMigLayout(m.set_mig_layout());
      default:
        break;
    }
  }

  void HandleAck(const v1::RegisterAck& ack) {
    if (Stale(ack.epoch(), "RegisterAck", "")) return;
    failures_ = 0;
    if (follower_) follower_->OnSuccess();
    {
      std::lock_guard lock(stats_mu_);
      stats_.registered = true;
    }
    LogInfo("agent", "registered",
            {{"node", config_.node_name},
             {"epoch", std::to_string(ack.epoch())},
             {"stop_tasks", std::to_string(ack.stop_task_ids_size())}});
    if (ack.heartbeat_interval_ms() > 0 && ack.heartbeat_interval_ms() != interval_ms_) {
      interval_ms_ = ack.heartbeat_interval_ms();
      {
        std::lock_guard lock(stats_mu_);
        stats_.heartbeat_interval_ms = interval_ms_;
      }
      heartbeat_timer_.cancel();
      ScheduleHeartbeat();
    }
    for (const std::string& id : ack.stop_task_ids()) {
      StopOne(id, 0, config_.stop_grace_period_ms, "unknown to the scheduler");
    }
    if (ack.lease_ms() > 0) {
      lease_ms_ = ack.lease_ms();
      lease_grace_ms_ = ack.lease_stop_grace_ms();
      lease_lapsed_ = false;
      RenewLease(register_sent_us_);
    }
    SetPins(ack.pinned_images());
  }

  // --- dynamic MIG (agent/mig_relayout.h) ----------------------------------------------------
  // Whether a running task holds GPU `gpu` or one of its MIG instances.
  bool GpuBusy(const std::string& gpu) const {
    for (const TaskStatus& t : runner_->Running(config_.node_name)) {
      for (const DeviceGrant& g : t.devices) {
        if (g.uuid == gpu) return true;
        for (const Device& d : inventory_.devices) {
          if (d.uuid == g.uuid && d.parent_uuid == gpu) return true;
        }
      }
    }
    return false;
  }

  // Applied (or refused), then the node registers again: its new devices and the outcome.
  void HandleMigLayout(const v1::SetMigLayout& req) {
    mig_.Apply(req, inventory_, [this](const std::string& gpu) { return GpuBusy(gpu); });
    if (stream_ == nullptr || closing_) return;  // the next Connect registers anyway
    reregister_ = true;
    Broken(gen_);
  }

  // The pool's pinned images (docs/images.md, "Prepull and pins"); a node without images
  // ignores them.
  void SetPins(const google::protobuf::RepeatedPtrField<std::string>& images) {
    if (pins_) pins_->Set({images.begin(), images.end()});
  }

  // --- node lease (docs/ha.md) ------------------------------------------------------------
  void HandleRenewal(const v1::LeaseRenewal& r) {
    if (Stale(r.epoch(), "LeaseRenewal", "") || lease_ms_ <= 0 || lease_lapsed_) return;
    while (!hb_sent_.empty() && hb_sent_.front().first < r.heartbeat_seq()) hb_sent_.pop_front();
    if (hb_sent_.empty() || hb_sent_.front().first != r.heartbeat_seq()) return;
    RenewLease(hb_sent_.front().second);
    hb_sent_.pop_front();
  }

  // The lease now runs lease_ms from `sent_us` (when the answered message was sent: never later
  // than when the scheduler received it, so this deadline is never later than its view).
  void RenewLease(int64_t sent_us) {
    const int64_t deadline = sent_us + lease_ms_ * 1000;
    if (deadline <= lease_deadline_us_) return;
    lease_deadline_us_ = deadline;
    const int64_t now = clock_->MonotonicMicros();
    if (const auto& keeper = runner_->options().lease_keeper) {
      keeper->Renew(LeaseKeeper::MonotonicNowUs() + (deadline - now) + lease_grace_ms_ * 1000);
    }
    lease_timer_.expires_after(std::chrono::microseconds(std::max<int64_t>(0, deadline - now)));
    lease_timer_.async_wait([self = shared_from_this()](boost::system::error_code ec) {
      if (!ec) self->CheckLease();
    });
  }

  bool LeaseLapsedNow() const {
    return lease_lapsed_ ||
           (lease_deadline_us_ > 0 && clock_->MonotonicMicros() >= lease_deadline_us_);
  }

  // No renewal for lease_ms: stop every task (the keeper kills what is left after the grace),
  // then register again so the scheduler reconciles this node before it gets new work.
  void CheckLease() {
    if (closing_ || lease_lapsed_ || !LeaseLapsedNow()) return;
    lease_lapsed_ = true;
    const std::vector<TaskStatus> running = runner_->Running(config_.node_name);
    LogWarn("agent", "node lease lapsed: stopping tasks",
            {{"node", config_.node_name},
             {"lease_ms", std::to_string(lease_ms_)},
             {"tasks", std::to_string(running.size())}});
    const std::string why =
        "node lease lapsed: no renewal from the scheduler for " + std::to_string(lease_ms_) + " ms";
    for (const TaskStatus& t : running) {
      lease_stopped_.insert({t.task_id, t.attempt});
      runner_->Stop(t.task_id, t.attempt, lease_grace_ms_, why);
    }
    if (stream_ != nullptr) Broken(gen_);
  }

  void HandleStart(const v1::StartTask& s) {
    if (Stale(s.epoch(), "StartTask", s.task_id())) return;
    if (LeaseLapsedNow()) {
      // Without a lease nothing starts: the scheduler may already count this node as lost.
      lease_stopped_.insert({s.task_id(), s.attempt()});
      return QueueNotRunning(s.task_id(), s.attempt(), "not started: the node lease lapsed");
    }
    TaskSpec spec = FromProto(s, config_.node_name, inventory_);
    auto st = runner_->Start(spec);
    if (!st.ok()) {
      TaskStatus failed;
      failed.owner = config_.node_name;
      failed.task_id = s.task_id();
      failed.attempt = s.attempt();
      failed.phase = TaskPhase::kFailed;
      failed.exit_code = 127;
      failed.reason = st.status().message();
      return QueueUpdate(failed);
    }
    // An image task that is pulling reports when its container starts (the runner's listener)
    // or when it ends; the heartbeat lists it meanwhile, so it is not taken for lost.
    if (st->phase == TaskPhase::kPulling) return;
    QueueUpdate(*st);
  }

  void HandleStop(const v1::StopTask& s) {
    if (Stale(s.epoch(), "StopTask", s.task_id())) return;
    const int64_t grace =
        s.grace_period_ms() > 0 ? s.grace_period_ms() : config_.stop_grace_period_ms;
    StopOne(s.task_id(), s.attempt(), grace,
            s.reason().empty() ? "stopped by scheduler" : s.reason());
  }

  void StopOne(const std::string& id, int32_t attempt, int64_t grace, const std::string& reason) {
    auto st = runner_->Stop(id, attempt, grace, reason);
    if (!st) return QueueNotRunning(id, attempt, "not running on this node");
    if (st->terminal()) QueueUpdate(*st);  // re-report; a running one reports when it ends
  }

  void HandleFetchLogs(const v1::FetchLogs& f) {
    v1::AgentMessage m;
    v1::LogChunk* c = m.mutable_log_chunk();
    c->set_request_id(f.request_id());
    c->set_task_id(f.task_id());
    const int64_t max = f.max_bytes() > 0 ? std::min(f.max_bytes(), kMaxLogChunk) : 64 * 1024;
    auto slice = runner_->ReadLog(f.task_id(), f.offset(), max);
    if (!slice.ok()) {
      c->set_offset(f.offset());
      c->set_eof(true);
      c->set_error(slice.status().message());
    } else {
      c->set_offset(slice->offset);
      c->set_data(std::move(slice->data));
      c->set_eof(slice->eof);
    }
    Enqueue({std::move(m), "", 0});
  }

  AgentConfig config_;
  DeviceBackend* backend_;
  TaskRunner* runner_;
  std::unique_ptr<v1::AgentService::Stub> stub_;
  std::unique_ptr<api::LeaderFollower> follower_;  // set before Start(); used on the strand
  std::shared_ptr<grpc::Channel> stub_channel_;    // the follower's channel stub_ calls on
  asio::strand<asio::io_context::executor_type> strand_;
  asio::steady_timer heartbeat_timer_;
  asio::steady_timer reconnect_timer_;
  asio::steady_timer health_timer_;
  asio::steady_timer lease_timer_;
  const Clock* clock_;
  std::mt19937_64 rng_;
  std::atomic<bool> shut_down_{false};

  // Strand state.
  Inventory inventory_;
  HealthMonitor health_;                   // XID/ECC events → device faults
  Agent::SampleObserver sample_observer_;  // set before Start(); runs on the strand
  int64_t interval_ms_;
  uint64_t gen_ = 0;
  int streams_open_ = 0;
  Stream* stream_ = nullptr;  // valid until Broken() releases it
  std::deque<Outgoing> outbox_;
  Outgoing in_flight_;
  bool writing_ = false;
  int64_t hb_on_stream_ = 0;
  int64_t failures_ = 0;
  int64_t max_epoch_ = 0;
  uint64_t seq_ = 0;
  std::map<std::string, Pending> pending_;
  // Node lease (docs/ha.md): granted by RegisterAck, renewed by LeaseRenewal.
  int64_t lease_ms_ = 0;  // 0: the scheduler grants none
  int64_t lease_grace_ms_ = 0;
  int64_t lease_deadline_us_ = 0;  // monotonic; 0: none yet
  bool lease_lapsed_ = false;      // until the next RegisterAck
  int64_t register_sent_us_ = 0;
  uint64_t hb_seq_ = 0;
  // The node's images, for placement: sent on change, and at least once a minute.
  static constexpr int64_t kImageCacheRefreshMs = 60'000;
  ImageCacheReport image_cache_;
  MigRelayouter mig_;        // dynamic MIG
  bool reregister_ = false;  // the stream is closed to register again, not for a failure
  std::unique_ptr<image::ImagePins> pins_;                   // null: the node runs no images
  std::deque<std::pair<uint64_t, int64_t>> hb_sent_;         // heartbeat seq → sent (monotonic)
  std::set<std::pair<std::string, int32_t>> lease_stopped_;  // (task, attempt) stopped by lapse
  // Confirmed final reports, re-sent after every Register while retained (kFinishedRetention*).
  struct Finished {
    v1::TaskUpdate update;
    int64_t confirmed_us = 0;  // monotonic
  };
  std::map<std::string, Finished> finished_;

  void ExpireFinished() {
    const int64_t now = clock_->MonotonicMicros();
    std::erase_if(finished_, [&](const auto& kv) {
      return now - kv.second.confirmed_us > kFinishedRetentionUs;
    });
    while (finished_.size() > kFinishedRetentionMax) {
      auto oldest =
          std::min_element(finished_.begin(), finished_.end(), [](const auto& a, const auto& b) {
            return a.second.confirmed_us < b.second.confirmed_us;
          });
      finished_.erase(oldest);
    }
  }
  bool closing_ = false;
  std::function<void()> on_closed_;

  mutable std::mutex stats_mu_;  // guards stats_
  AgentStats stats_;
};

std::shared_ptr<grpc::Channel> MakeAgentChannel(const AgentConfig& config, bool own_connection) {
  if (!config.ca_file.empty()) return MakeTlsAgentChannel(config, own_connection);  // enroll.h
  return grpc::CreateCustomChannel(GrpcTargetOf(config.scheduler),
                                   grpc::InsecureChannelCredentials(),
                                   AgentChannelArgs(config, own_connection));
}

Agent::Agent(AgentConfig config, DeviceBackend* backend, TaskRunner* runner,
             std::shared_ptr<grpc::Channel> channel, asio::io_context& io, const Clock* clock)
    : impl_(std::make_shared<Impl>(std::move(config), backend, runner, std::move(channel), io,
                                   clock)) {}

Agent::~Agent() { impl_->Shutdown(false); }

void Agent::SetSampleObserver(SampleObserver observer) {
  impl_->SetSampleObserver(std::move(observer));
}
void Agent::SetChannelMaker(ChannelMaker make) { impl_->SetChannelMaker(std::move(make)); }
Status Agent::Start() { return impl_->Start(); }
void Agent::Shutdown(bool stop_tasks) { impl_->Shutdown(stop_tasks); }
AgentStats Agent::stats() const { return impl_->stats(); }
const AgentConfig& Agent::config() const { return impl_->config(); }

}  // namespace gpupool::agent
