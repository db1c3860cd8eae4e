// enroll: the agent's side of node identity (docs/security.md, "Agents").
//
// With `ca_file` set (gpupoold's <data-dir>/tls/ca.crt), the agent speaks TLS to the scheduler
// and authenticates with its own certificate, kept in <data_dir>/tls/ (node.key, node.crt, ca.crt;
// files 0600):
//  * EnsureNodeCertificate, at start: with no certificate, it makes a key and a CSR and calls
//    NodeEnrollService.Join with `token` as the join token; with one in the last third of its
//    life, it renews it (Renew, over mutual TLS); else it keeps it.
//  * MakeTlsAgentChannel: a channel whose credentials watch those files, so a certificate the
//    renewer rewrites is used by the next connection without a restart.
//  * RenewIfDue, called periodically: Renew when the certificate entered its last third.
// Errors name what failed (UNAUTHENTICATED "the join token is not accepted", …).
//
// Thread safety: the functions may be called from any thread; RenewIfDue must not run twice at
// once for one data dir.
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "agent/config.h"
#include "base/status.h"

namespace gpupool::agent {

struct NodeCertPaths {
  std::string dir, key, cert, ca;
};
NodeCertPaths NodeCertPathsOf(const AgentConfig& config);

Status EnsureNodeCertificate(const AgentConfig& config);
// OK and false when nothing was due.
Result<bool> RenewIfDue(const AgentConfig& config);

grpc::ChannelArguments AgentChannelArgs(const AgentConfig& config, bool own_connection);
std::shared_ptr<grpc::Channel> MakeTlsAgentChannel(const AgentConfig& config, bool own_connection);

}  // namespace gpupool::agent
