#include "api/priority_access.h"

namespace gpupool::api {
namespace {

std::string Join(const std::set<std::string>& s) {
  std::string out;
  for (const std::string& x : s) out += (out.empty() ? "" : ", ") + x;
  return out.empty() ? "none" : out;
}

}  // namespace

Result<PriorityAccess> PriorityAccess::Create(const SchedulerOptions& options,
                                              const std::vector<std::string>& defaults) {
  PriorityAccess a;
  a.restricted_ = true;
  a.default_class_ = options.default_priority_class;
  // Classes above the server's default class (high: it preempts other tenants' normal work) are
  // granted, never a tenant's by default.
  const auto def = options.priority_classes.find(options.default_priority_class);
  const int32_t ceiling = def != options.priority_classes.end() ? def->second.value : INT32_MAX;
  for (const auto& [name, cls] : options.priority_classes) {
    a.known_.insert(name);
    if (defaults.empty() && cls.preemptible && cls.value <= ceiling) a.defaults_.insert(name);
  }
  for (const std::string& name : defaults) {
    if (!a.known_.contains(name)) {
      return Status::NotFound("priority class '" + name +
                              "' is not defined (defined: " + Join(a.known_) + ")");
    }
    a.defaults_.insert(name);
  }
  return a;
}

Status PriorityAccess::Add(const std::string& tenant, const std::vector<std::string>& classes) {
  // The nearest ancestor with a list of its own bounds this one; a tenant with none above it may
  // be given any class (the operator grants it explicitly).
  const std::set<std::string> inherited =
      HasOwnAbove(tenant) ? Allowed(tenant.substr(0, tenant.rfind('/'))) : known_;
  std::set<std::string> own;
  for (const std::string& name : classes) {
    if (!known_.contains(name)) {
      return Status::InvalidArgument("priority class '" + name +
                                     "' is not defined (defined: " + Join(known_) + ")");
    }
    if (!inherited.contains(name)) {
      return Status::InvalidArgument("priority class '" + name + "' is not allowed for '" + tenant +
                                     "': the tenants above it allow only " + Join(inherited));
    }
    own.insert(name);
  }
  own_[tenant] = std::move(own);
  return Status::Ok();
}

bool PriorityAccess::HasOwnAbove(const std::string& tenant) const {
  std::string path = tenant;
  while (true) {
    const size_t slash = path.rfind('/');
    if (slash == std::string::npos) return false;
    path = path.substr(0, slash);
    if (own_.contains(path)) return true;
  }
}

std::set<std::string> PriorityAccess::Allowed(const std::string& tenant) const {
  if (!restricted_) return known_;
  // The nearest prefix of the path, on '/' boundaries, that has its own list.
  std::string path = tenant;
  while (!path.empty()) {
    if (auto it = own_.find(path); it != own_.end()) return it->second;
    const size_t slash = path.rfind('/');
    path = slash == std::string::npos ? "" : path.substr(0, slash);
  }
  return defaults_;
}

Status PriorityAccess::Check(bool admin, const std::string& tenant, const std::string& cls) const {
  if (admin || !restricted_) return Status::Ok();
  const std::string& name = cls.empty() ? default_class_ : cls;
  if (!known_.contains(name)) return Status::Ok();  // the core says NOT_FOUND, naming it
  const std::set<std::string> allowed = Allowed(tenant);
  if (allowed.contains(name)) return Status::Ok();
  return Status::PermissionDenied("spec.priority_class: tenant '" + tenant +
                                  "' may not submit at priority class '" + name +
                                  "' (allowed: " + Join(allowed) + ")");
}

}  // namespace gpupool::api
