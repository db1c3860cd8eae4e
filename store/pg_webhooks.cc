#include "store/pg_webhooks.h"

#include <algorithm>
#include <pqxx/pqxx>
#include <stdexcept>

#include "store/pg_conn.h"
#include "store/pg_secrets.h"
#include "store/pg_txn.h"
#include "store/validate.h"

namespace gpupool {
namespace {

constexpr const char* kColumns =
    "id, tenant, url, secret, array_to_string(event_kinds, ','), enabled, disabled_reason, "
    "cursor, failures, first_failure_ms, last_attempt_ms, last_status, created_by, create_ms";

std::vector<std::string> SplitKinds(const std::string& joined) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start < joined.size()) {
    size_t comma = joined.find(',', start);
    if (comma == std::string::npos) comma = joined.size();
    out.push_back(joined.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

// Event kinds are checked names ([a-z._]), so the array literal needs no quoting.
std::string KindsLiteral(const std::vector<std::string>& kinds) {
  std::string out = "{";
  for (const std::string& k : kinds) out += (out.size() > 1 ? "," : "") + k;
  return out + "}";
}

WebhookRecord Row(const pqxx::row& r) {
  WebhookRecord w;
  w.id = r[0].as<int64_t>();
  w.tenant = r[1].as<std::string>();
  w.url = r[2].as<std::string>();
  w.secret = r[3].as<std::string>();  // sealed here; opened by the caller
  w.event_kinds = SplitKinds(r[4].as<std::string>());
  w.enabled = r[5].as<bool>();
  w.disabled_reason = r[6].as<std::string>();
  w.cursor = r[7].as<int64_t>();
  w.failures = r[8].as<int32_t>();
  w.first_failure_ms = r[9].as<int64_t>();
  w.last_attempt_ms = r[10].as<int64_t>();
  w.last_status = r[11].as<std::string>();
  w.created_by = r[12].as<std::string>();
  w.create_ms = r[13].as<int64_t>();
  return w;
}

Status NotFound(int64_t id) {
  return Status::NotFound("webhook " + std::to_string(id) + " does not exist");
}

}  // namespace

Result<std::unique_ptr<PgWebhooks>> PgWebhooks::Open(const std::string& uri,
                                                     std::shared_ptr<const SecretKeyring> keyring) {
  GPUPOOL_ASSIGN_OR_RETURN(PgTarget target, ParsePgTarget(uri));
  return std::unique_ptr<PgWebhooks>(new PgWebhooks(
      std::make_unique<PgConnection>(std::move(target), "webhooks"), std::move(keyring)));
}

PgWebhooks::PgWebhooks(std::unique_ptr<PgConnection> conn,
                       std::shared_ptr<const SecretKeyring> keyring)
    : keyring_(std::move(keyring)), conn_(std::move(conn)) {}
PgWebhooks::~PgWebhooks() = default;

Result<WebhookRecord> PgWebhooks::Create(WebhookRecord w) {
  GPUPOOL_RETURN_IF_ERROR(ValidateWebhook(w));
  if (keyring_ == nullptr) {
    return Status::FailedPrecondition(
        "webhooks need a secrets key to seal their signing secret with, and this daemon has none");
  }
  MutexLock lock(&mu_);
  Result<WebhookRecord> stored = InTxn<WebhookRecord>(*conn_, [&](pqxx::work& txn) {
    // The id first: the sealed secret is bound to it.
    const int64_t id = txn.exec("SELECT nextval('webhooks_id_seq')")[0][0].as<int64_t>();
    Result<std::string> sealed = keyring_->Seal(w.secret, WebhookSecretContext(id));
    if (!sealed.ok()) throw std::runtime_error("sealing the secret: " + sealed.status().ToString());
    pqxx::result r = txn.exec_params(
        std::string("INSERT INTO webhooks (id, tenant, url, secret, event_kinds, enabled, "
                    "disabled_reason, cursor, failures, first_failure_ms, last_attempt_ms, "
                    "last_status, created_by, create_ms) VALUES ($1, $2, $3, $4, $5::text[], "
                    "true, '', (SELECT coalesce(max(id), 0) FROM events), 0, 0, 0, '', $6, $7) "
                    "RETURNING ") +
            kColumns,
        id, w.tenant, w.url, *sealed, KindsLiteral(w.event_kinds), w.created_by, w.create_ms);
    WebhookRecord out = Row(r[0]);
    out.secret = w.secret;
    return out;
  });
  return stored;
}

Result<std::optional<WebhookRecord>> PgWebhooks::Get(int64_t id) {
  Result<std::optional<WebhookRecord>> row = [&] {
    MutexLock lock(&mu_);
    return InTxn<std::optional<WebhookRecord>>(
        *conn_, [&](pqxx::work& txn) -> std::optional<WebhookRecord> {
          pqxx::result r = txn.exec_params(
              std::string("SELECT ") + kColumns + " FROM webhooks WHERE id = $1", id);
          if (r.empty()) return std::nullopt;
          return Row(r[0]);
        });
  }();
  if (!row.ok() || !row->has_value()) return row;
  WebhookRecord& w = **row;
  GPUPOOL_ASSIGN_OR_RETURN(w.secret, OpenStored(keyring_.get(), w.secret, WebhookSecretContext(id),
                                                "webhook " + std::to_string(id) + " secret"));
  return row;
}

Result<std::vector<WebhookRecord>> PgWebhooks::List(const std::string& tenant_prefix) {
  MutexLock lock(&mu_);
  return InTxn<std::vector<WebhookRecord>>(*conn_, [&](pqxx::work& txn) {
    std::vector<WebhookRecord> out;
    // The subtree of a path: itself and what starts with "<path>/" (no LIKE: '_' and '%' are
    // literal in tenant paths).
    for (const auto& r : txn.exec_params(std::string("SELECT ") + kColumns +
                                             " FROM webhooks WHERE $1 = '' OR tenant = $1 OR "
                                             "left(tenant, length($1) + 1) = $1 || '/' ORDER BY id",
                                         tenant_prefix)) {
      out.push_back(Row(r));
      out.back().secret.clear();
    }
    return out;
  });
}

Status PgWebhooks::Delete(int64_t id) {
  MutexLock lock(&mu_);
  Result<bool> found = InTxn<bool>(*conn_, [&](pqxx::work& txn) {
    return !txn.exec_params("DELETE FROM webhooks WHERE id = $1 RETURNING id", id).empty();
  });
  if (!found.ok()) return found.status();
  return *found ? Status::Ok() : NotFound(id);
}

Status PgWebhooks::SetEnabled(int64_t id, bool enabled, const std::string& reason) {
  if (!StorableText(reason)) {
    return Status::InvalidArgument("webhook " + std::to_string(id) + ": reason is not UTF-8");
  }
  MutexLock lock(&mu_);
  Result<bool> found = InTxn<bool>(*conn_, [&](pqxx::work& txn) {
    const std::string sql =
        enabled ? "UPDATE webhooks SET enabled = true, disabled_reason = '', failures = 0, "
                  "first_failure_ms = 0 WHERE id = $1 RETURNING id"
                : "UPDATE webhooks SET enabled = false, disabled_reason = $2 WHERE id = $1 "
                  "RETURNING id";
    return !(enabled ? txn.exec_params(sql, id) : txn.exec_params(sql, id, reason)).empty();
  });
  if (!found.ok()) return found.status();
  return *found ? Status::Ok() : NotFound(id);
}

Result<WebhookBacklog> PgWebhooks::Backlog(int64_t id, int limit) {
  MutexLock lock(&mu_);
  Result<std::optional<WebhookBacklog>> out =
      InTxn<std::optional<WebhookBacklog>>(*conn_, [&](pqxx::work& txn) {
        std::optional<WebhookBacklog> b;
        pqxx::result w = txn.exec_params(
            "SELECT tenant, cursor, array_to_string(event_kinds, ',') FROM webhooks "
            "WHERE id = $1",
            id);
        if (w.empty()) return b;
        const std::string tenant = w[0][0].as<std::string>();
        const int64_t cursor = w[0][1].as<int64_t>();
        const std::vector<std::string> kinds = SplitKinds(w[0][2].as<std::string>());
        b.emplace();
        // What is visible now bounds what this page covers when it is not full.
        const int64_t newest =
            txn.exec("SELECT coalesce(max(id), 0) FROM events")[0][0].as<int64_t>();
        pqxx::result r = txn.exec_params(
            "SELECT id, time_us, kind, subject, message, tenant FROM events "
            "WHERE id > $1 AND id <= $2 AND (tenant = $3 OR left(tenant, length($3) + 1) = "
            "$3 || '/') AND (cardinality($4::text[]) = 0 OR kind = ANY($4::text[])) ORDER BY id "
            "LIMIT $5",
            cursor, newest, tenant, KindsLiteral(kinds), limit);
        for (const auto& e : r) {
          b->events.push_back(LoggedEvent{
              e[0].as<int64_t>(),
              EventRecord{e[1].as<int64_t>(), e[2].as<std::string>(), e[3].as<std::string>(),
                          e[4].as<std::string>(), e[5].as<std::string>()}});
        }
        const bool full = static_cast<int>(b->events.size()) >= limit;
        b->covered_to = full ? b->events.back().id : std::max(newest, cursor);
        return b;
      });
  if (!out.ok()) return out.status();
  if (!out->has_value()) return NotFound(id);
  return std::move(**out);
}

Result<WebhookRecord> PgWebhooks::RecordAttempt(const WebhookAttempt& a,
                                                const std::string& status) {
  if (!StorableText(a.error) || !StorableText(status)) {
    return Status::InvalidArgument("webhook attempt: error or status is not UTF-8");
  }
  MutexLock lock(&mu_);
  Result<std::optional<WebhookRecord>> out =
      InTxn<std::optional<WebhookRecord>>(*conn_, [&](pqxx::work& txn) {
        std::optional<WebhookRecord> w;
        pqxx::result r =
            a.ok() ? txn.exec_params(
                         std::string("UPDATE webhooks SET cursor = greatest(cursor, $2), "
                                     "failures = 0, first_failure_ms = 0, last_attempt_ms = $3, "
                                     "last_status = $4 WHERE id = $1 RETURNING ") +
                             kColumns,
                         a.webhook_id, a.event_id, a.time_ms, status)
                   : txn.exec_params(
                         std::string("UPDATE webhooks SET failures = failures + 1, "
                                     "first_failure_ms = CASE WHEN failures = 0 THEN $2 ELSE "
                                     "first_failure_ms END, last_attempt_ms = $2, "
                                     "last_status = $3 WHERE id = $1 RETURNING ") +
                             kColumns,
                         a.webhook_id, a.time_ms, status);
        if (r.empty()) return w;
        w = Row(r[0]);
        w->secret.clear();
        txn.exec_params(
            "INSERT INTO webhook_deliveries (webhook_id, event_id, attempt, time_ms, "
            "duration_ms, http_status, error) VALUES ($1, $2, $3, $4, $5, $6, $7)",
            a.webhook_id, a.event_id, a.attempt, a.time_ms, a.duration_ms, a.http_status, a.error);
        // Bounded: the newest kWebhookAttemptsKept attempts stay.
        txn.exec_params(
            "DELETE FROM webhook_deliveries WHERE webhook_id = $1 AND seq <= (SELECT seq FROM "
            "webhook_deliveries WHERE webhook_id = $1 ORDER BY seq DESC OFFSET $2 LIMIT 1)",
            a.webhook_id, kWebhookAttemptsKept);
        return w;
      });
  if (!out.ok()) return out.status();
  if (!out->has_value()) return NotFound(a.webhook_id);
  return std::move(**out);
}

Status PgWebhooks::Advance(int64_t id, int64_t cursor) {
  MutexLock lock(&mu_);
  Result<bool> found = InTxn<bool>(*conn_, [&](pqxx::work& txn) {
    return !txn.exec_params(
                   "UPDATE webhooks SET cursor = greatest(cursor, $2) WHERE id = $1 RETURNING id",
                   id, cursor)
                .empty();
  });
  if (!found.ok()) return found.status();
  return *found ? Status::Ok() : NotFound(id);
}

Result<std::vector<WebhookAttempt>> PgWebhooks::Attempts(int64_t id, int limit) {
  MutexLock lock(&mu_);
  return InTxn<std::vector<WebhookAttempt>>(*conn_, [&](pqxx::work& txn) {
    std::vector<WebhookAttempt> out;
    for (const auto& r : txn.exec_params(
             "SELECT webhook_id, event_id, attempt, time_ms, duration_ms, http_status, error "
             "FROM webhook_deliveries WHERE webhook_id = $1 ORDER BY seq DESC LIMIT $2",
             id, limit)) {
      out.push_back(WebhookAttempt{r[0].as<int64_t>(), r[1].as<int64_t>(), r[2].as<int32_t>(),
                                   r[3].as<int64_t>(), r[4].as<int64_t>(), r[5].as<int32_t>(),
                                   r[6].as<std::string>()});
    }
    return out;
  });
}

}  // namespace gpupool
