// Stateless checks that every Store implementation applies to a batch before touching data, so
// MemoryStore and PgStore reject the same malformed mutations with the same message.
//
// INVALID_ARGUMENT when: a text field holds a NUL byte or invalid UTF-8; an InsertJob has a
// non-positive id, a task whose job_id differs from the job's, a repeated or negative task index,
// or a negative service id or generation; an UpdateJob/UpdateTask names a non-positive job id; a
// pool or node name is empty; an UpsertNode has an empty or repeated device id; a tenant path or
// a quota's tenant or pool is empty.
//
// Thread safety: pure function.
#pragma once

#include <string_view>
#include <vector>

#include "base/status.h"
#include "scheduler/join_tokens.h"
#include "scheduler/node_enrolments.h"
#include "scheduler/registry_credentials.h"
#include "scheduler/service.h"
#include "scheduler/store.h"
#include "scheduler/webhooks.h"

namespace gpupool {

Status ValidateBatch(const std::vector<Mutation>& batch);
// Audit records: text UTF-8 without NUL; a limit of 1..1000 and a code of -1..16 in a query.
Status ValidateAuditRecords(const std::vector<AuditRecord>& records);
Status ValidateAuditQuery(const AuditQuery& query);
// Price plans: billing::ValidatePricePlan, and every text field UTF-8 without NUL.
Status ValidatePricePlanRecord(const billing::PricePlan& plan);
// Node enrolments (scheduler/node_enrolments.h): a node name and a serial, both non-empty.
Status ValidateNodeEnrolment(const NodeEnrolment& e);
// Join tokens: a 12-hex id, a 64-hex digest, non-negative limits, UTF-8 text without NUL.
Status ValidateJoinToken(const JoinTokenRecord& t);
// Registry credentials: a tenant, a valid name, a registry, a user name and a secret, all UTF-8
// without NUL; no secret in the message.
Status ValidateRegistryCredential(const RegistryCredentialRecord& c);
// A webhook to create: a tenant, a URL ParseWebhookUrl takes (http:// to loopback included: the
// API decides whether that is allowed), known event kinds, a secret, UTF-8 text.
Status ValidateWebhook(const WebhookRecord& w);
// True when `s` is UTF-8 without NUL: text every store keeps.
bool StorableText(std::string_view s);
// Services (scheduler/service.h), as both ServiceStores refuse them: a tenant and a name; every
// text UTF-8 without NUL; the template's ports well-formed; no secret env (services keep none).
// The spec's own rules (CheckServiceSpec) are the edge's to check, not the store's.
Status ValidateService(const ServiceRecord& s);
// ServiceStore::Update's `next`: as ValidateService without the tenant and name (which Update
// never changes), and a generation that is `expected_generation` (scaling only) or the one after
// it (a new revision).
Status ValidateServiceUpdate(const ServiceRecord& next, int64_t expected_generation);
// The revisions a service keeps: its current one and those before it, newest first; Update
// drops older ones.
inline constexpr int64_t kServiceRevisionsKept = 10;
// The version AddPricePlan gives `plan`, given the stored versions of its name (any order):
// see Store::AddPricePlan for the errors. Both stores use it, so both answer alike.
Result<int64_t> NextPricePlanVersion(const std::vector<const billing::PricePlan*>& existing,
                                     const billing::PricePlan& plan, bool create);

// True when `record` passes every filter of `query` except the page position and limit.
bool AuditMatches(const AuditRecord& record, const AuditQuery& query);

// Usage queries: from, to and depth not negative, to after from when given, text UTF-8.
Status ValidateUsageQuery(const UsageQuery& query);
// True when the interval passes every filter of `query` (its start in [from, to), tenant
// subtree, pool, model, class).
bool UsageMatches(const UsageInterval& interval, const UsageQuery& query);

// Messages both stores use for stateful failures, so callers (and the conformance suite) see the
// same words whichever store runs.
std::string JobExistsMessage(int64_t job_id);                    // "job 12: already exists"
std::string JobNotFoundMessage(int64_t job_id);                  // "job 12: not found"
std::string TaskNotFoundMessage(int64_t job_id, int32_t index);  // "task 12.0: not found"
std::string PoolNotFoundMessage(const std::string& pool);        // "pool 'a': not found"
std::string PoolHasNodesMessage(const std::string& pool);        // "pool 'a': still has nodes"
std::string NodeNotFoundMessage(const std::string& node);        // "node 'n1': not found"
std::string NodePoolNotFoundMessage(const std::string& node, const std::string& pool);
std::string TenantNotFoundMessage(const std::string& tenant);  // "tenant 'acme': not found"
// "tenant 'acme': idempotency key 'k' already names job 12"
std::string IdempotencyKeyUsedMessage(const std::string& tenant, const std::string& key,
                                      int64_t job_id);
// "quota of tenant 'acme' in pool 'a': not found"
std::string QuotaNotFoundMessage(const std::string& tenant, const std::string& pool);
// "service 'web' of tenant 'acme' already exists" (ALREADY_EXISTS from ServiceStore::Create)
std::string ServiceExistsMessage(const std::string& tenant, const std::string& name);
std::string ServiceNotFoundMessage(int64_t id);  // "service 12 does not exist"
// "service 12 changed meanwhile (generation 3)": ABORTED from ServiceStore::Update
std::string ServiceChangedMessage(int64_t id, int64_t generation);

}  // namespace gpupool
