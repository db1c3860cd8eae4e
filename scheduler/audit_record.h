// AuditRecord: one line of the audit log — who did what to which object, from where, and how it
// ended — and the query that reads the log back. Plain data, no I/O: the Store port carries it
// (Store::AppendAudit, Store::ListAudit) and store/ keeps it append-only.
//
// The log holds every mutating API call, whatever its outcome, and every denied call
// (unauthenticated, permission denied, rate limited), reads included. See docs/security.md,
// "Audit log", and api/audit.h for who writes it.
//
// Invariants: `id` is assigned by the store, strictly increasing in append order; `code` is a
// gRPC status code number (0 = OK); text fields are UTF-8 without NUL (the writer cleans them).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace gpupool {

struct AuditRecord {
  int64_t id = 0;       // assigned by the store on append
  int64_t time_us = 0;  // wall clock, microseconds since the Unix epoch
  // The actor: the credential's id (empty for a static token or none), the principal it names
  // (a tenant path or an admin name; empty when unauthenticated), its role ("admin", "tenant",
  // "anonymous", …) and the tenant whose subtree the record belongs to (empty: admin-only).
  std::string key_id;
  std::string principal;
  std::string role;
  std::string tenant;
  std::string verb;      // the API method: "SubmitJob", "DeletePool", …
  std::string resource;  // "job/42", "pool/gpu", "tenant/acme/research", "quota/acme/gpu"
  int32_t code = 0;      // outcome as a gRPC status code
  std::string message;   // the error message when code != 0 (never a secret)
  std::string request_id;
  std::string source;  // the peer: "ipv4:127.0.0.1:51234" or "127.0.0.1:51234"
  friend bool operator==(const AuditRecord&, const AuditRecord&) = default;
};

// A page of the log, newest first. Empty strings and zero times mean "any".
struct AuditQuery {
  std::string principal;  // exact
  std::string verb;       // exact
  std::string resource;   // prefix on text ("job/4" also matches "job/42")
  int32_t code = -1;      // exact gRPC code; -1 = any
  int64_t since_us = 0;   // time_us >= since_us
  int64_t until_us = 0;   // time_us < until_us
  // Only records whose tenant is this tenant or lies below it (the caller's subtree); empty = all.
  std::string tenant_subtree;
  int64_t before_id = 0;  // continue below this id (page token); 0 = from the newest
  int limit = 100;        // 1..1000
};

struct AuditPage {
  std::vector<AuditRecord> records;
  int64_t next_before_id = 0;  // 0 = no more
};

}  // namespace gpupool
