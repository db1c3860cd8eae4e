// The audit hook of the API faces: what one call looks like to the audit log, and the one helper
// (AuditHook) that the gRPC face (api/grpc/services.cc) and the REST face (api/rest/routes.cc)
// call around every ApiService call — never the handlers.
//
// What is recorded (docs/security.md, "Audit log"):
//   * every call of a mutating verb (IsMutatingVerb), whatever its outcome;
//   * every denied call, reads included: UNAUTHENTICATED (bad or missing credential),
//     PERMISSION_DENIED, and RESOURCE_EXHAUSTED (rate limited).
//
// Durability, decided here once for both faces:
//   * a mutating call is refused before it runs (UNAVAILABLE) while the log cannot be written
//     (AuditSink::AdmitMutation) — fail closed;
//   * its reply is held until its record is committed, or — if the database fails right then —
//     until the record is queued for retry (the call already took effect, so the client still
//     hears its true outcome, and the retry backlog closes the door for the next mutations);
//   * records of denied reads are best effort: queued without waiting; when the queue is full
//     they are dropped and counted (gpupool_audit_records_dropped_total).
//
// The actor comes from the CallContext through ActorOf(), the one adapter to change when the
// caller identity gains key ids and roles.
//
// Thread safety: AuditHook is immutable; its methods may be called from any thread.
#pragma once

#include <google/protobuf/message.h>

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "api/service.h"
#include "base/status.h"

namespace gpupool::api {

struct AuditActor {
  std::string key_id;
  std::string principal;
  std::string role;    // "admin", "tenant-admin", "member", "viewer"; "anonymous"
  std::string tenant;  // the subtree the actor's own records belong to; empty for admins
};

struct AuditEntry {
  int64_t time_us = 0;
  AuditActor actor;
  std::string tenant;  // the subtree the record belongs to (see RecordTenant in audit.cc)
  std::string verb;
  std::string resource;
  StatusCode code = StatusCode::kOk;
  std::string message;
  std::string request_id;
  std::string source;
};

// Where records go (api/audit_log.h over the Store port).
class AuditSink {
 public:
  virtual ~AuditSink() = default;
  // OK, or UNAVAILABLE while records cannot be written (mutating calls are then refused).
  virtual Status AdmitMutation() = 0;
  // Takes `entry`. `durable` (may be empty) runs once, from any thread, when the record is
  // committed or queued for retry after a failed write. With `must_keep` false the record may be
  // dropped (and counted) when the queue is full; `durable` still runs.
  virtual void Record(AuditEntry entry, bool must_keep, std::function<void()> durable) = 0;
};

bool IsMutatingVerb(std::string_view verb);
bool IsDenial(StatusCode code);

// Today's CallContext as an actor; the adapter to switch when the caller identity grows.
AuditActor ActorOf(const CallContext& caller);

// The object a request names: "job/42", "pool/gpu", "tenant/acme", "quota/acme/gpu", "jobs"
// (a list); SubmitJob's is its new job once `reply` (may be null) carries one.
std::string ResourceOf(const google::protobuf::Message& req,
                       const google::protobuf::Message* reply);

// The caller's request id when it is 1..128 characters of [A-Za-z0-9._:-], else a new random one.
std::string RequestIdOr(std::string_view given);

// Where a call came from and what it carried, as a face knows it.
struct CallOrigin {
  std::string request_id;
  std::string source;
};

class AuditHook {
 public:
  explicit AuditHook(AuditSink* sink = nullptr) : sink_(sink) {}

  // Before the call: OK, or the refusal of a mutating verb while the log is down.
  Status Admit(std::string_view verb) const;

  // After the call (or its refusal). `caller` is null when authentication failed. Records what
  // must be recorded, then runs `reply` — after the record is durable for a mutating verb, at
  // once otherwise.
  void Finish(const CallOrigin& origin, const CallContext* caller, std::string_view verb,
              const google::protobuf::Message* req, const google::protobuf::Message* reply,
              const Status& status, std::function<void()> reply_fn) const;

 private:
  AuditSink* sink_;
};

}  // namespace gpupool::api
