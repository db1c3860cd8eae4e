// ServiceImpl::ListAuditRecords: the audit log's read side. Validates the filters, scopes a
// non-admin to its own subtree, and reads through the AuditLog's reader thread.
#include <google/protobuf/util/time_util.h>

#include "api/convert.h"
#include "api/service_impl.h"
#include "api/service_internal.h"
#include "api/validate.h"

namespace gpupool::api {
namespace {

Result<int64_t> ParseTime(const std::string& text, std::string_view field) {
  if (text.empty()) return int64_t{0};
  google::protobuf::Timestamp ts;
  if (!google::protobuf::util::TimeUtil::FromString(text, &ts)) {
    return Invalid(field, "'" + text + "' is not an RFC 3339 time such as 2026-11-23T22:00:00Z");
  }
  return google::protobuf::util::TimeUtil::TimestampToMicroseconds(ts);
}

Result<int32_t> ParseOutcome(const std::string& name) {
  if (name.empty()) return -1;
  for (int c = 0; c <= 16; ++c) {
    if (StatusCodeName(static_cast<StatusCode>(c)) == name) return c;
  }
  return Invalid("outcome", "'" + name +
                                "' is not a status code name such as OK or "
                                "PERMISSION_DENIED");
}

Result<AuditQuery> AuditQueryFromProto(const v1::ListAuditRecordsRequest& req) {
  AuditQuery q;
  q.principal = req.principal();
  q.verb = req.verb();
  q.resource = req.resource();
  GPUPOOL_ASSIGN_OR_RETURN(q.code, ParseOutcome(req.outcome()));
  GPUPOOL_ASSIGN_OR_RETURN(q.since_us, ParseTime(req.since(), "since"));
  GPUPOOL_ASSIGN_OR_RETURN(q.until_us, ParseTime(req.until(), "until"));
  if (q.since_us != 0 && q.until_us != 0 && q.until_us <= q.since_us) {
    return Invalid("until", "must be after since");
  }
  if (req.page_size() < 0 || req.page_size() > 1000) {
    return Invalid("page_size", "must be 0..1000 (0 = 100)");
  }
  q.limit = req.page_size() == 0 ? 100 : req.page_size();
  GPUPOOL_ASSIGN_OR_RETURN(q.before_id, DecodePageToken(req.page_token()));
  return q;
}

void ToProto(const AuditRecord& r, v1::AuditRecord* out) {
  out->set_id(std::to_string(r.id));
  SetTimestamp(r.time_us, out->mutable_time());
  out->set_key_id(r.key_id);
  out->set_principal(r.principal);
  out->set_role(r.role);
  out->set_tenant(r.tenant);
  out->set_verb(r.verb);
  out->set_resource(r.resource);
  out->set_outcome(std::string(StatusCodeName(static_cast<StatusCode>(r.code))));
  out->set_message(r.message);
  out->set_request_id(r.request_id);
  out->set_source(r.source);
}

}  // namespace

void ServiceImpl::ListAuditRecords(const CallContext& ctx, const v1::ListAuditRecordsRequest& req,
                                   Reply<v1::ListAuditRecordsResponse> done) {
  if (options_.audit == nullptr) {
    return Fail(done, Status::Unimplemented("ListAuditRecords: this server keeps no audit log"));
  }
  if (Status s = RequireRole(ctx, Role::kTenantAdmin, "audit"); !s.ok()) return Fail(done, s);
  Result<AuditQuery> query = AuditQueryFromProto(req);
  if (!query.ok()) return Fail(done, query.status());
  if (!ctx.admin()) {
    if (ctx.scope.empty()) {
      return Fail(done, Status::PermissionDenied("audit: the caller has no tenant"));
    }
    query->tenant_subtree = ctx.scope;
  }
  options_.audit->List(std::move(query).value(), [done = std::move(done)](Result<AuditPage> page) {
    if (!page.ok()) return Fail(done, page.status());
    v1::ListAuditRecordsResponse resp;
    for (const AuditRecord& r : page->records) ToProto(r, resp.add_records());
    resp.set_next_page_token(EncodePageToken(page->next_before_id));
    done(Status::Ok(), std::move(resp));
  });
}

}  // namespace gpupool::api
