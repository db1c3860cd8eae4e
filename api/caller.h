// CallContext: who is calling — the one identity every face (gRPC, REST) establishes before it
// calls the ApiService, and the one that permission checks and the audit log read.
//
// Fields:
//  * key_id  — which credential authenticated the call: "key:<id>" for an API key stored in
//              PostgreSQL, "token:<principal>" for a bootstrap token from the daemon's YAML,
//              "admin-token" for <data-dir>/admin.token, "insecure" when the daemon runs with
//              --insecure (no authentication, loopback only). Never the secret itself.
//  * scope   — the tenant subtree the caller may act in: a tenant path ("acme/research"); empty
//              for an admin, whose scope is the whole tree.
//  * role    — what the caller may do within its scope (Role below).
//  * source  — the peer address as the transport reports it ("ipv4:127.0.0.1:50432" on gRPC,
//              "127.0.0.1:50432" on REST); empty when unknown.
//
// Roles, from least to most (docs/security.md, "Roles"):
//  * viewer       — read its subtree (jobs, logs, tenants, quotas, visible pools).
//  * member       — viewer + submit jobs for tenants in its subtree and cancel them.
//  * tenant-admin — member + create/delete child tenants below its scope, set quotas below its
//                   scope (within its own), and manage API keys of its subtree.
//  * admin        — everything, including pools, nodes and the whole tenant tree.
//
// Plain data: copied freely, no invariants beyond "an admin's scope is empty".
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"

namespace gpupool::api {

enum class Role : uint8_t { kViewer = 0, kMember = 1, kTenantAdmin = 2, kAdmin = 3 };

// "viewer", "member", "tenant-admin", "admin".
std::string_view RoleName(Role role);
// The inverse of RoleName; INVALID_ARGUMENT lists the accepted names.
Result<Role> ParseRole(std::string_view name);

struct CallContext {
  std::string key_id;
  std::string scope;
  Role role = Role::kViewer;
  std::string source;

  bool admin() const { return role == Role::kAdmin; }
  // At least `r` (roles are ordered: viewer < member < tenant-admin < admin).
  bool AtLeast(Role r) const { return static_cast<uint8_t>(role) >= static_cast<uint8_t>(r); }

  // Whole-tree administrator (the insecure development mode and the admin credential).
  static CallContext Admin(std::string key_id) { return Of(std::move(key_id), "", Role::kAdmin); }
  static CallContext Of(std::string key_id, std::string scope, Role role) {
    CallContext c;
    c.key_id = std::move(key_id);
    c.scope = std::move(scope);
    c.role = role;
    return c;
  }
};

}  // namespace gpupool::api
