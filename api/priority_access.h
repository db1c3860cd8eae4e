// PriorityAccess: which priority classes a tenant may submit at — so that no tenant can preempt
// everyone by asking for `system`.
//
// Model (docs/security.md, "Priority classes"):
//  * Each tenant may be given its own list of classes (config `tenants[].priority_classes`). A
//    tenant without a list inherits the list of its nearest ancestor that has one; a tenant with
//    no such ancestor gets the default list.
//  * The default list is config `tenant_defaults.priority_classes`, or, when that is not set,
//    every class that is preemptible and no higher than the server's default class (`low` and
//    `normal` among the built-ins): a class above it (`high`, which may preempt other tenants'
//    `normal` work) is granted to the tenants that should have it, and a class whose tasks cannot
//    be preempted (`system`) is an operator's tool.
//  * A list lies within the list of the nearest ancestor that has one (checked by Add), so a
//    subtree is never granted more than the tenant above it. A tenant with no list above it may
//    be granted any class: that is the operator's explicit choice (e.g. `ops: [system]`).
//  * Admins may submit at any class. An empty class means the server's default class, and is
//    checked as that class.
//
// Check() answers PERMISSION_DENIED naming the class, the tenant and what it may use.
//
// Thread safety: immutable after set-up; Check() may be called from any thread.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "base/status.h"
#include "scheduler/options.h"

namespace gpupool::api {

class PriorityAccess {
 public:
  // Every class allowed to everyone (test doubles and servers that do not restrict classes).
  PriorityAccess() = default;

  // `defaults`: the default list; empty = every preemptible class of `options`. NOT_FOUND names
  // a class that `options` does not define.
  static Result<PriorityAccess> Create(const SchedulerOptions& options,
                                       const std::vector<std::string>& defaults = {});

  // Gives `tenant` its own list. INVALID_ARGUMENT for an unknown class or one outside the list
  // of its nearest ancestor that has one. Add parents before children.
  Status Add(const std::string& tenant, const std::vector<std::string>& classes);

  // The classes `tenant` may use (inherited or its own), sorted by name.
  std::set<std::string> Allowed(const std::string& tenant) const;

  // OK when an admin, or when `cls` (empty = the default class) is allowed for `tenant`.
  Status Check(bool admin, const std::string& tenant, const std::string& cls) const;

 private:
  bool HasOwnAbove(const std::string& tenant) const;

  bool restricted_ = false;
  std::string default_class_;
  std::set<std::string> known_;
  std::set<std::string> defaults_;
  std::map<std::string, std::set<std::string>> own_;  // tenant path → its own list
};

}  // namespace gpupool::api
