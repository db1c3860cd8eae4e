#include "api/agent_hub.h"

#include <deque>
#include <optional>
#include <utility>

#include "api/agent_audit.h"
#include "api/convert.h"
#include "api/status_convert.h"
#include "api/tls/enroll_service.h"
#include "base/log.h"
#include "pool/catalog_check.h"
#include "scheduler/scheduler.h"

namespace gpupool::api {
namespace {

constexpr std::string_view kComponent = "agent_hub";

}  // namespace

// One agent's stream. Owned by itself (self_) from construction until gRPC calls OnDone; the hub
// and pending core callbacks hold further shared_ptrs, so a late callback finds a closed
// connection, never a dangling one.
class AgentHub::Conn final : public grpc::ServerBidiReactor<v1::AgentMessage, v1::SchedulerMessage>,
                             public std::enable_shared_from_this<Conn> {
 public:
  Conn(AgentHub* hub, std::optional<tls::PeerCert> peer, std::string source)
      : hub_(hub), peer_(peer), audit_(hub->audit_.load(), std::move(source), std::move(peer)) {}

  void Begin(std::shared_ptr<Conn> self) {
    self_ = std::move(self);
    if (hub_->events_.load() == nullptr) {
      Close(grpc::Status(grpc::StatusCode::UNAVAILABLE, "the scheduler is starting; retry"));
      return;
    }
    StartRead(&in_);
  }

  // Queues a message; false once the stream is closing. Before the RegisterAck went out,
  // commands are held and follow it.
  bool Send(v1::SchedulerMessage msg) {
    std::unique_lock<std::mutex> lock(mu_);
    if (closing_) return false;
    if (!acked_) {
      held_.push_back(std::move(msg));
      return true;
    }
    queue_.push_back(std::move(msg));
    WriteNext(lock);
    return true;
  }

  // Ends the stream with `status` once the write in flight (if any) is done; queued messages
  // are dropped. Idempotent.
  void Close(grpc::Status status) {
    std::unique_lock<std::mutex> lock(mu_);
    if (closing_) return;
    closing_ = true;
    queue_.clear();
    held_.clear();
    close_status_ = std::move(status);
    if (writing_) return;  // OnWriteDone finishes
    finished_ = true;
    lock.unlock();
    Finish(*close_status_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) return Close(grpc::Status::OK);  // the agent closed its side or went away
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (closing_) return;
    }
    Handle();
    bool closing;
    {
      std::lock_guard<std::mutex> lock(mu_);
      closing = closing_;
    }
    if (!closing) StartRead(&in_);
  }

  void OnWriteDone(bool ok) override {
    std::unique_lock<std::mutex> lock(mu_);
    writing_ = false;
    if (closing_ && !finished_) {
      finished_ = true;
      lock.unlock();
      Finish(*close_status_);
      return;
    }
    if (!ok) {
      queue_.clear();  // broken stream: the read side sees it too and closes
      return;
    }
    WriteNext(lock);
  }

  void OnDone() override {
    hub_->Forget(this, node_);
    std::shared_ptr<Conn> keep = std::move(self_);  // may delete this on return
  }

  void MarkReplaced() { replaced_ = true; }

 private:
  // REQUIRES: `lock` holds mu_. Starts the next write if none is in flight; releases the lock.
  void WriteNext(std::unique_lock<std::mutex>& lock) {
    if (writing_ || queue_.empty() || closing_) return;
    out_ = std::move(queue_.front());
    queue_.pop_front();
    writing_ = true;
    grpc::WriteOptions options;
    if (!queue_.empty()) options.set_buffer_hint();  // more follow at once: coalesce
    lock.unlock();
    StartWrite(&out_, options);
  }

  void Handle() {
    switch (in_.msg_case()) {
      case v1::AgentMessage::kRegister:
        return OnRegister(in_.register_());
      case v1::AgentMessage::MSG_NOT_SET:
        return;
      default:
        break;
    }
    if (node_.empty()) {
      return Close(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                "the first message on the agent stream must be register"));
    }
    AgentEventsPort* events = hub_->events_.load();
    switch (in_.msg_case()) {
      case v1::AgentMessage::kHeartbeat: {
        if (replaced_) return;
        {
          // Before the RegisterAck the registration is still being stored: the ack itself
          // renews the lease, and a verdict now would see the node as it was (maybe lost).
          std::lock_guard<std::mutex> lock(mu_);
          if (!acked_) return;
        }
        if (in_.heartbeat().has_image_cache()) {
          events->OnNodeImages(node_, CachedImages(in_.heartbeat().image_cache()));
        }
        events->OnLeaseHeartbeat(
            node_, DeviceHealthFromProto(in_.heartbeat()),
            [self = shared_from_this(), seq = in_.heartbeat().seq()](LeaseAnswer a) {
              if (a.verdict == LeaseVerdict::kRenewed) {
                v1::SchedulerMessage m;
                m.mutable_lease_renewal()->set_epoch(a.epoch);
                m.mutable_lease_renewal()->set_heartbeat_seq(seq);
                self->Send(std::move(m));
                return;
              }
              // Declared lost (docs/ha.md): no renewal; the agent registers again and reconciles.
              LogWarn(kComponent, "heartbeat of a lost node; asking it to register again",
                      {{"node", self->node_}});
              self->MarkReplaced();
              self->Close(grpc::Status(
                  grpc::StatusCode::FAILED_PRECONDITION,
                  "node '" + self->node_ + "' was declared lost; register again to reconcile"));
            });
        return;
      }
      case v1::AgentMessage::kTaskUpdate: {
        if (replaced_) return;
        Result<TaskReport> report = TaskReportFromProto(node_, in_.task_update());
        audit_.TaskReport(node_, in_.task_update(), report.status());
        if (!report.ok()) {
          LogWarn(kComponent, "ignoring a malformed task update",
                  {{"node", node_}, {"error", report.status().message()}});
          return;
        }
        events->OnTaskReport(std::move(report).value());
        return;
      }
      case v1::AgentMessage::kLogChunk:
        return hub_->RouteLogChunk(this, in_.log_chunk());
      default:
        return;
    }
  }

  void OnRegister(const v1::Register& reg) {
    if (!node_.empty()) {
      audit_.Register(reg.node_name(),
                      Status::InvalidArgument("register may be sent only once per stream"));
      return Close(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                "register may be sent only once per stream"));
    }
    tls::NodeIdentities* ids = hub_->options_.identities;
    if (ids != nullptr) {
      // The node name is bound to the certificate: node A's cannot register as node B, and an
      // enrolled node cannot be impersonated with the shared node token.
      if (Status s = ids->CheckRegister(peer_ ? &*peer_ : nullptr, reg.node_name()); !s.ok()) {
        LogWarn(kComponent, "agent rejected",
                {{"node", reg.node_name()},
                 {"certificate", peer_ ? peer_->common_name : std::string("none")},
                 {"error", s.message()}});
        audit_.Register(reg.node_name(), s);
        return Close(ToGrpcStatus(s));
      }
    }
    const std::set<std::string>& tokens = hub_->options_.node_tokens;
    const bool by_certificate = ids != nullptr && peer_.has_value();
    if (!by_certificate && !tokens.empty() && !tokens.contains(reg.token())) {
      LogWarn(kComponent, "agent rejected: bad node token", {{"node", reg.node_name()}});
      const Status refused =
          Status::Unauthenticated("node '" + reg.node_name() + "': the node token is not accepted");
      audit_.Register(reg.node_name(), refused);
      return Close(ToGrpcStatus(refused));
    }
    if (!by_certificate && !tokens.empty()) audit_.TokenAccepted();
    Result<AgentRegistration> converted = RegistrationFromProto(reg);
    if (!converted.ok()) {
      audit_.Register(reg.node_name(), converted.status());
      return Close(ToGrpcStatus(converted.status()));
    }
    if (Status st = CheckDevicesAgainstCatalog(*converted); !st.ok()) {
      LogWarn(kComponent, "agent rejected: a device contradicts the catalog",
              {{"node", reg.node_name()}, {"error", st.message()}});
      audit_.Register(reg.node_name(), st);
      return Close(ToGrpcStatus(st));
    }
    node_ = reg.node_name();
    std::shared_ptr<Conn> self = shared_from_this();
    if (std::shared_ptr<Conn> old = hub_->Adopt(self, node_)) {
      old->MarkReplaced();
      old->Close(grpc::Status(grpc::StatusCode::ABORTED,
                              "replaced by a newer connection of node " + node_));
    }
    LogInfo(
        kComponent, "agent connected",
        {{"node", node_}, {"pool", reg.pool()}, {"devices", std::to_string(reg.devices_size())}});
    AgentEventsPort* events = hub_->events_.load();
    // Final reports first: the scheduler runs calls in order, so the core records the work that
    // finished before it reconciles the node's running tasks (which would call it lost).
    for (const v1::TaskUpdate& u : reg.finished_tasks()) {
      Result<TaskReport> report = TaskReportFromProto(node_, u);
      audit_.TaskReport(node_, u, report.status());
      if (!report.ok()) {
        LogWarn(kComponent, "ignoring a malformed finished task in register",
                {{"node", node_}, {"error", report.status().message()}});
        continue;
      }
      events->OnTaskReport(std::move(report).value());
    }
    std::vector<NodeImage> images = CachedImages(reg.image_cache());
    events->OnAgentRegister(std::move(converted).value(),
                            [self, images = std::move(images)](Result<RegistrationResult> r) {
                              self->audit_.Register(self->node_, r.status());
                              if (!r.ok()) {
                                self->hub_->Forget(self.get(), self->node_);
                                return self->Close(ToGrpcStatus(r.status()));
                              }
                              // Once the core knows the node (placement by cached layers).
                              self->hub_->events_.load()->OnNodeImages(self->node_, images);
                              v1::SchedulerMessage ack;
                              ToProto(*r, ack.mutable_register_ack());
                              self->SendAck(std::move(ack));
                            });
  }

  // A node's image cache; one that breaks the protocol's bounds is logged and read as empty
  // (advisory: it only steers placement among equals).
  std::vector<NodeImage> CachedImages(const v1::ImageCache& cache) const {
    Result<std::vector<NodeImage>> images = NodeImagesFromProto(cache);
    if (images.ok()) return std::move(images).value();
    LogWarn(kComponent, "ignoring a malformed image cache",
            {{"node", node_}, {"error", images.status().message()}});
    return {};
  }

  Status CheckDevicesAgainstCatalog(const AgentRegistration& reg) const {
    const Catalog* catalog = hub_->options_.catalog;
    if (catalog == nullptr) return Status::Ok();
    for (size_t i = 0; i < reg.node.devices.size(); ++i) {
      const DeviceRecord& d = reg.node.devices[i];
      GPUPOOL_RETURN_IF_ERROR(CheckDevice(
          *catalog, {d.model, d.mig_profile, d.physical.milli_tflops, d.physical.vram_mib},
          "register.devices[" + std::to_string(i) + "]"));
    }
    return Status::Ok();
  }

  void SendAck(v1::SchedulerMessage ack) {
    std::unique_lock<std::mutex> lock(mu_);
    if (closing_) return;
    acked_ = true;
    queue_.push_back(std::move(ack));
    for (v1::SchedulerMessage& m : held_) queue_.push_back(std::move(m));
    held_.clear();
    WriteNext(lock);
  }

  AgentHub* const hub_;
  const std::optional<tls::PeerCert> peer_;  // the verified client certificate, if any
  const AgentAudit audit_;
  std::shared_ptr<Conn> self_;
  // Reader side: touched only by the read reactions, which gRPC runs one at a time.
  v1::AgentMessage in_;
  std::string node_;  // set by the first Register
  std::atomic<bool> replaced_{false};

  std::mutex mu_;  // guards what follows
  std::deque<v1::SchedulerMessage> queue_;
  std::vector<v1::SchedulerMessage> held_;  // commands that wait for the RegisterAck
  v1::SchedulerMessage out_;                // the write in flight
  bool acked_ = false;
  bool writing_ = false;
  bool closing_ = false;
  bool finished_ = false;
  std::optional<grpc::Status> close_status_;
};

AgentHub::AgentHub(AgentHubOptions options) : options_(std::move(options)) {}

AgentHub::~AgentHub() = default;

void AgentHub::Attach(AgentEventsPort* events) { events_ = events; }

grpc::ServerBidiReactor<v1::AgentMessage, v1::SchedulerMessage>* AgentHub::Connect(
    grpc::CallbackServerContext* context) {
  auto conn = std::make_shared<Conn>(this, tls::PeerCertOf(*context), context->peer());
  Conn* raw = conn.get();
  raw->Begin(std::move(conn));
  return raw;
}

bool AgentHub::Send(const std::string& node, v1::SchedulerMessage msg) {
  std::shared_ptr<Conn> conn;
  {
    MutexLock lock(&mu_);
    auto it = conns_.find(node);
    if (it == conns_.end()) return false;
    conn = it->second;
  }
  return conn->Send(std::move(msg));
}

void AgentHub::Disconnect(const std::string& node, const Status& why) {
  std::shared_ptr<Conn> conn;
  {
    MutexLock lock(&mu_);
    auto it = conns_.find(node);
    if (it == conns_.end()) return;
    conn = it->second;
  }
  conn->MarkReplaced();  // nothing it says from now on counts
  conn->Close(ToGrpcStatus(why));
}

bool AgentHub::StartTask(const std::string& node, const StartTaskCommand& cmd) {
  v1::SchedulerMessage msg;
  ToProto(cmd, msg.mutable_start_task());
  return Send(node, std::move(msg));
}

bool AgentHub::StopTask(const std::string& node, const StopTaskCommand& cmd) {
  v1::SchedulerMessage msg;
  ToProto(cmd, msg.mutable_stop_task());
  return Send(node, std::move(msg));
}

bool AgentHub::PinImages(const std::string& node, const PinImagesCommand& cmd) {
  v1::SchedulerMessage msg;
  ToProto(cmd, msg.mutable_pinned_images());
  return Send(node, std::move(msg));
}

bool AgentHub::SetMigLayout(const std::string& node, const MigLayoutCommand& cmd) {
  v1::SchedulerMessage msg;
  ToProto(cmd, msg.mutable_set_mig_layout());
  return Send(node, std::move(msg));
}

std::function<void()> AgentHub::FetchLogs(const std::string& node, const std::string& task_id,
                                          int64_t offset, int64_t max_bytes, Done done) {
  std::shared_ptr<Conn> conn;
  std::string id;
  {
    MutexLock lock(&mu_);
    auto it = conns_.find(node);
    if (it != conns_.end()) {
      conn = it->second;
      id = "logs-" + std::to_string(++next_request_);
      fetches_[id] = PendingFetch{conn.get(), node, done};
    }
  }
  Status unavailable = Status::Unavailable("node " + node + " is not connected");
  if (!conn) {
    done(unavailable);
    return [] {};
  }
  v1::SchedulerMessage msg;
  v1::FetchLogs* f = msg.mutable_fetch_logs();
  f->set_request_id(id);
  f->set_task_id(task_id);
  f->set_offset(offset);
  f->set_max_bytes(max_bytes);
  if (!conn->Send(std::move(msg))) {
    bool mine;
    {
      MutexLock lock(&mu_);
      mine = fetches_.erase(id) > 0;
    }
    if (mine) done(unavailable);
    return [] {};
  }
  return [this, id] {
    MutexLock lock(&mu_);
    fetches_.erase(id);
  };
}

void AgentHub::RouteLogChunk(const Conn* conn, const v1::LogChunk& chunk) {
  PendingFetch pending;
  {
    MutexLock lock(&mu_);
    auto it = fetches_.find(chunk.request_id());
    if (it == fetches_.end() || it->second.conn != conn) return;  // abandoned or stale
    pending = std::move(it->second);
    fetches_.erase(it);
  }
  if (!chunk.error().empty()) {
    return pending.done(Status::NotFound("logs of task " + chunk.task_id() + " on node " +
                                         pending.node + ": " + chunk.error()));
  }
  pending.done(LogRead{chunk.offset(), chunk.data(), chunk.eof()});
}

std::shared_ptr<AgentHub::Conn> AgentHub::Adopt(const std::shared_ptr<Conn>& conn,
                                                const std::string& node) {
  std::shared_ptr<Conn> old;
  size_t n;
  {
    MutexLock lock(&mu_);
    std::shared_ptr<Conn>& slot = conns_[node];
    old = std::exchange(slot, conn);
    n = conns_.size();
  }
  NotifyCount(n);
  return old;
}

void AgentHub::Forget(const Conn* conn, const std::string& node) {
  std::vector<PendingFetch> failed;
  size_t n;
  bool removed = false;
  {
    MutexLock lock(&mu_);
    auto it = conns_.find(node);
    if (it != conns_.end() && it->second.get() == conn) {
      conns_.erase(it);
      removed = true;
    }
    for (auto f = fetches_.begin(); f != fetches_.end();) {
      if (f->second.conn == conn) {
        failed.push_back(std::move(f->second));
        f = fetches_.erase(f);
      } else {
        ++f;
      }
    }
    n = conns_.size();
  }
  if (removed) {
    LogInfo(kComponent, "agent disconnected", {{"node", node}});
    NotifyCount(n);
  }
  for (PendingFetch& f : failed) {
    f.done(Status::Unavailable("node " + f.node + " disconnected before sending the logs"));
  }
}

void AgentHub::NotifyCount(size_t n) {
  if (options_.on_connections_changed) options_.on_connections_changed(n);
}

size_t AgentHub::connected() const {
  MutexLock lock(&mu_);
  return conns_.size();
}

std::vector<std::string> AgentHub::connected_nodes() const {
  MutexLock lock(&mu_);
  std::vector<std::string> out;
  for (const auto& [name, conn] : conns_) out.push_back(name);
  return out;
}

}  // namespace gpupool::api
