// NodeEnrolmentStore: the port through which gpupoold keeps which certificate speaks for which
// node, and which nodes are revoked (docs/security.md, "Agents"; api/tls/node_identity.h is its
// user). Beside the Store port rather than in it, like ApiKeyStore: enrolments are not
// scheduling state, are read on agent threads, and must not queue behind the core's group
// commits. store/pg_node_enrolments.h keeps them in PostgreSQL, so every replica sharing the
// database sees the same bindings and revocations; store/memory_node_enrolments.h keeps them in
// memory for tests. tests/store/node_enrolment_conformance.cc holds both to one suite.
//
// A node has at most one row: the serial of its current certificate, that certificate's expiry,
// and whether it is revoked. A revoked row stays (so the name can be re-enrolled, and audits can
// still name it) until a new Join binds the name again.
//
// Errors: UNAVAILABLE when the database cannot be reached; FAILED_PRECONDITION from Bind when the
// node's binding is not the one expected (another call or replica changed it first); NOT_FOUND
// from Revoke for a node never enrolled; INVALID_ARGUMENT for an empty node name or serial.
//
// Thread safety: implementations are thread-safe; every call is synchronous and durable when it
// returns OK.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"

namespace gpupool {

struct NodeEnrolment {
  std::string node;
  std::string serial_hex;  // the current certificate's serial, lowercase hex
  int64_t not_after_s = 0;
  bool revoked = false;
  friend bool operator==(const NodeEnrolment&, const NodeEnrolment&) = default;
};

class NodeEnrolmentStore {
 public:
  virtual ~NodeEnrolmentStore() = default;
  // nullopt when the node was never enrolled.
  virtual Result<std::optional<NodeEnrolment>> Get(const std::string& node) = 0;
  // Binds `e.node` to the certificate `e.serial_hex` (not revoked), compare-and-set:
  //   expected_serial == "": the node must have no live binding (never enrolled, or revoked) —
  //                          a Join;
  //   otherwise:             its live binding must carry `expected_serial` — a Renew.
  // FAILED_PRECONDITION when it does not; nothing changes then.
  virtual Status Bind(const NodeEnrolment& e, const std::string& expected_serial) = 0;
  // Marks the node revoked (revoking a revoked node is OK). NOT_FOUND when never enrolled.
  virtual Status Revoke(const std::string& node) = 0;
  // Adds the rows for nodes the store does not know yet (a one-time import of an older
  // install's file); a node it knows keeps its row. Returns how many rows were added.
  virtual Result<int> Import(const std::vector<NodeEnrolment>& rows) = 0;
};

}  // namespace gpupool
