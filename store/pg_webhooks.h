// PgWebhooks: the WebhookStore port (scheduler/webhooks.h) on PostgreSQL, tables `webhooks` and
// `webhook_deliveries` (migration 36), reading the event log (`events`, whose tenant column says
// whose job an event is about). The signing secret is sealed with the daemon's secrets key, bound
// to the webhook's id (store/pg_secrets.h), and re-sealed with every other secret when the key
// rotates. Deliveries keep the newest kWebhookAttemptsKept attempts of each webhook.
//
// One connection of its own, guarded by a mutex, reconnecting with backoff (store/pg_conn.h).
//
// Thread safety: every method may be called from any thread (calls are serialised).
#pragma once

#include <memory>
#include <string>

#include "base/crypto/secret_box.h"
#include "base/mutex.h"
#include "scheduler/webhooks.h"

namespace gpupool {

class PgConnection;

class PgWebhooks final : public WebhookStore {
 public:
  // Connects lazily; INVALID_ARGUMENT for a malformed URI. The schema comes from PgStore::Open.
  // Without a keyring Create and Get are FAILED_PRECONDITION (a secret is never stored in clear).
  static Result<std::unique_ptr<PgWebhooks>> Open(const std::string& uri,
                                                  std::shared_ptr<const SecretKeyring> keyring);
  ~PgWebhooks() override;

  Result<WebhookRecord> Create(WebhookRecord w) override;
  Result<std::optional<WebhookRecord>> Get(int64_t id) override;
  Result<std::vector<WebhookRecord>> List(const std::string& tenant_prefix) override;
  Status Delete(int64_t id) override;
  Status SetEnabled(int64_t id, bool enabled, const std::string& reason) override;
  Result<WebhookBacklog> Backlog(int64_t id, int limit) override;
  Result<WebhookRecord> RecordAttempt(const WebhookAttempt& a, const std::string& status) override;
  Status Advance(int64_t id, int64_t cursor) override;
  Result<std::vector<WebhookAttempt>> Attempts(int64_t id, int limit) override;

 private:
  PgWebhooks(std::unique_ptr<PgConnection> conn, std::shared_ptr<const SecretKeyring> keyring);

  const std::shared_ptr<const SecretKeyring> keyring_;
  Mutex mu_;
  std::unique_ptr<PgConnection> conn_ GPUPOOL_GUARDED_BY(mu_);
};

}  // namespace gpupool
