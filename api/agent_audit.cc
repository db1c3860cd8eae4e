#include "api/agent_audit.h"

#include <chrono>

#include "gpupool/v1/agent.pb.h"
#include "gpupool/v1/jobs.pb.h"

namespace gpupool::api {

AgentAudit::AgentAudit(AuditSink* sink, std::string source, std::optional<tls::PeerCert> cert)
    : sink_(sink),
      source_(std::move(source)),
      cert_(std::move(cert)),
      request_id_(RequestIdOr("")) {}

void AgentAudit::Register(const std::string& claimed_node, const Status& outcome) const {
  Record("RegisterNode", "node/" + claimed_node, claimed_node, outcome);
}

void AgentAudit::TaskReport(const std::string& node, const v1::TaskUpdate& u,
                            const Status& outcome) const {
  // A pull's progress, a few a second while bytes move, changes nothing: the RUNNING or final
  // report that follows is audited. A malformed one is.
  if (outcome.ok() && u.state() == v1::TASK_STATE_PULLING) return;
  std::string what = outcome.message();
  if (outcome.ok()) {
    what = "state=" + v1::TaskState_Name(u.state()) + " attempt=" + std::to_string(u.attempt());
    if (u.state() != v1::TASK_STATE_RUNNING) what += " exit_code=" + std::to_string(u.exit_code());
  }
  Record("ReportTask", "task/" + u.task_id(), node, Status(outcome.code(), what));
}

void AgentAudit::Record(std::string_view verb, std::string resource,
                        const std::string& claimed_node, const Status& outcome) const {
  if (sink_ == nullptr) return;
  AuditEntry e;
  e.time_us = std::chrono::duration_cast<std::chrono::microseconds>(
                  std::chrono::system_clock::now().time_since_epoch())
                  .count();
  if (cert_) {
    e.actor.key_id = "cert:" + cert_->serial_hex;
    e.actor.principal = cert_->common_name;
  } else {
    e.actor.key_id = by_token_ ? "node-token" : "none";
    e.actor.principal = claimed_node;
  }
  e.actor.role = "node";
  e.verb = std::string(verb);
  e.resource = std::move(resource);
  e.code = outcome.code();
  e.message = outcome.message();
  e.request_id = request_id_;
  e.source = source_;
  sink_->Record(std::move(e), /*must_keep=*/true, nullptr);
}

}  // namespace gpupool::api
