#include "api/caller.h"

namespace gpupool::api {

std::string_view RoleName(Role role) {
  switch (role) {
    case Role::kViewer:
      return "viewer";
    case Role::kMember:
      return "member";
    case Role::kTenantAdmin:
      return "tenant-admin";
    case Role::kAdmin:
      return "admin";
  }
  return "viewer";
}

Result<Role> ParseRole(std::string_view name) {
  for (Role r : {Role::kViewer, Role::kMember, Role::kTenantAdmin, Role::kAdmin}) {
    if (RoleName(r) == name) return r;
  }
  return Status::InvalidArgument("role '" + std::string(name) +
                                 "' is unknown: expected viewer, member, tenant-admin or admin");
}

}  // namespace gpupool::api
