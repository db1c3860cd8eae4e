// AgentHub: the scheduler's end of AgentService.Connect, and the AgentGateway and LogFetcher the
// core and the API act through.
//
// One gRPC callback reactor per connected agent. The first message must be Register (else the
// stream ends with INVALID_ARGUMENT); its node token is checked against the configured set (if
// any; UNAUTHENTICATED otherwise) unless the stream came over mutual TLS with the node's own
// certificate (AgentHubOptions::identities, which binds node names to certificates); the
// registration is converted (api/convert.h) and handed to the scheduler's AgentEventsPort
// (scheduler/scheduler.h), and the reply goes back as RegisterAck. Heartbeats and task updates go
// to the same port, LogChunks to the waiting FetchLogs. A new connection for a node replaces the
// old one (which ends with ABORTED); when a stream ends its connection is forgotten — the core's
// heartbeat timeout takes care of the node.
//
// Writes: each connection has a queue with one Write outstanding at a time (as gRPC requires);
// StartTask / StopTask / FetchLogs only enqueue, so they never block. Commands for a node whose
// registration is still being acknowledged are held and sent right after the RegisterAck.
//
// Wiring (the scheduler needs the gateway at construction, so the hub comes first):
//   AgentHub hub({.node_tokens = ...});
//   Scheduler scheduler(options, clock, store, &hub);
//   hub.Attach(&scheduler);            // before agents can connect
//   ServiceImpl api(&scheduler, &scheduler, &hub, ...);
//   grpc::ServerBuilder b; b.RegisterService(&hub); ...
// Destroy the hub after the gRPC server has shut down (every stream is then done).
//
// Thread safety: every public method may be called from any thread.
#pragma once

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "api/audit.h"
#include "api/log_fetcher.h"
#include "base/mutex.h"
#include "gpupool/v1/agent.grpc.pb.h"
#include "scheduler/dispatch.h"

namespace gpupool {
class Catalog;
class AgentEventsPort;
}  // namespace gpupool

namespace gpupool::api {

namespace tls {
class NodeIdentities;
}

struct AgentHubOptions {
  // Accepted node tokens; empty = agents are not authenticated.
  std::set<std::string> node_tokens;
  // Called with the number of connected agents whenever it changes (a metrics gauge); optional.
  std::function<void(size_t)> on_connections_changed;
  // Every registered device is checked against it (pool/catalog_check.h); a registration whose
  // device contradicts the catalog ends with INVALID_ARGUMENT naming the field. Null: unchecked.
  const Catalog* catalog = nullptr;
  // Node certificates (api/tls/node_identity.h): with them, Register's node name must match the
  // connection's verified client certificate (which then replaces the node token), and an
  // enrolled node cannot register without it. Null = node tokens only. Not owned.
  tls::NodeIdentities* identities = nullptr;
};

class AgentHub final : public v1::AgentService::CallbackService,
                       public AgentGateway,
                       public LogFetcher {
 public:
  explicit AgentHub(AgentHubOptions options = {});
  ~AgentHub() override;
  AgentHub(const AgentHub&) = delete;
  AgentHub& operator=(const AgentHub&) = delete;

  // Connects the scheduler (it must outlive the hub's streams). Until then agents are refused
  // with UNAVAILABLE.
  void Attach(AgentEventsPort* events);
  // Where the stream's registrations and task reports are audited (api/agent_audit.h); before
  // agents can connect. Not owned; must outlive the hub's streams. Unset = not audited.
  void AttachAudit(AuditSink* sink) { audit_ = sink; }

  // AgentService (gRPC callback API).
  grpc::ServerBidiReactor<v1::AgentMessage, v1::SchedulerMessage>* Connect(
      grpc::CallbackServerContext* context) override;

  // AgentGateway: false when the node has no connection.
  bool StartTask(const std::string& node, const StartTaskCommand& cmd) override;
  bool StopTask(const std::string& node, const StopTaskCommand& cmd) override;
  bool PinImages(const std::string& node, const PinImagesCommand& cmd) override;
  bool SetMigLayout(const std::string& node, const MigLayoutCommand& cmd) override;

  // LogFetcher: sends FetchLogs to the node's agent and routes its LogChunk back.
  std::function<void()> FetchLogs(const std::string& node, const std::string& task_id,
                                  int64_t offset, int64_t max_bytes, Done done) override;

  // Ends the node's stream, if any, with `why` (its certificate was revoked).
  void Disconnect(const std::string& node, const Status& why);

  // Introspection (tests, metrics).
  size_t connected() const;
  std::vector<std::string> connected_nodes() const;

 private:
  class Conn;
  struct PendingFetch {
    const Conn* conn = nullptr;
    std::string node;
    Done done;
  };

  bool Send(const std::string& node, v1::SchedulerMessage msg);
  // Makes `conn` the connection of its node; returns the one it replaces (or null).
  std::shared_ptr<Conn> Adopt(const std::shared_ptr<Conn>& conn, const std::string& node);
  // Drops `conn` (if still current) and fails its pending log fetches.
  void Forget(const Conn* conn, const std::string& node);
  void RouteLogChunk(const Conn* conn, const v1::LogChunk& chunk);
  void NotifyCount(size_t n);

  const AgentHubOptions options_;
  std::atomic<AgentEventsPort*> events_{nullptr};
  std::atomic<AuditSink*> audit_{nullptr};

  mutable Mutex mu_;  // taken before a Conn's lock
  std::map<std::string, std::shared_ptr<Conn>> conns_ GPUPOOL_GUARDED_BY(mu_);  // by node name
  std::map<std::string, PendingFetch> fetches_ GPUPOOL_GUARDED_BY(mu_);         // by request id
  uint64_t next_request_ GPUPOOL_GUARDED_BY(mu_) = 0;
};

}  // namespace gpupool::api
