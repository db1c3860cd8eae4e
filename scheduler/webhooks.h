// Tenant webhooks (docs/webhooks.md): a tenant registers an HTTPS endpoint, and every event of
// its jobs (the event log's rows whose tenant is it or below it: job.submitted, task.state,
// task.preempted, job.cancelled, …) is POSTed there, signed, in event order.
//
// The event log is the durable source: an event is stored in the same batch as the change it
// describes, before anything is acknowledged, so a dispatcher that follows the log by id from a
// durable per-webhook cursor delivers every event at least once, in order, under a stable
// delivery id "<webhook id>-<event id>" that receivers dedupe on. Event ids grow in commit order:
// one leader writes events, from one writer connection (store/pg_store.h), so a reader never
// sees an id before a smaller one that is still to commit.
//
// WebhookStore is the port that keeps webhooks, their cursors and their recent delivery attempts,
// beside the Store port (like RegistryCredentialStore): webhooks are not scheduling state, and
// their deliveries must never queue behind the core's group commits. store/pg_webhooks.h keeps
// them in PostgreSQL with the signing secret sealed at rest.
//
// Errors: UNAVAILABLE when the database cannot be reached; NOT_FOUND for an unknown webhook id;
// INVALID_ARGUMENT for a malformed record; FAILED_PRECONDITION when the store has no secrets key
// to seal the signing secret with.
//
// Thread safety: implementations are thread-safe; every call is synchronous and durable when it
// returns OK.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "scheduler/model.h"

namespace gpupool {

struct WebhookRecord {
  int64_t id = 0;      // assigned by Create
  std::string tenant;  // the owner, a tenant path; receives the events of its subtree's jobs
  std::string url;     // https://host[:port]/path (see CheckWebhookUrl)
  std::string secret;  // the signing secret; empty in List results
  std::vector<std::string> event_kinds;  // the kinds it wants; empty: every kind
  bool enabled = true;
  std::string disabled_reason;   // why it was disabled; "" while enabled
  int64_t cursor = 0;            // the last event id it is done with (delivered or not its own)
  int32_t failures = 0;          // consecutive failed attempts since the last success
  int64_t first_failure_ms = 0;  // when that run of failures began; 0 when there is none
  int64_t last_attempt_ms = 0;
  std::string last_status;  // "HTTP 204", "HTTP 500", "timeout", … of the last attempt
  std::string created_by;
  int64_t create_ms = 0;
};

// One delivery attempt, as Get shows it.
struct WebhookAttempt {
  int64_t webhook_id = 0;
  int64_t event_id = 0;
  int32_t attempt = 0;  // 1 for the first try of that event
  int64_t time_ms = 0;
  int64_t duration_ms = 0;
  int32_t http_status = 0;  // 0 when no answer came (error says why)
  std::string error;        // "" for a 2xx
  bool ok() const { return http_status >= 200 && http_status < 300; }
};

// An event with its id in the log.
struct LoggedEvent {
  int64_t id = 0;
  EventRecord event;
};

// What a webhook has to deliver next.
struct WebhookBacklog {
  std::vector<LoggedEvent> events;  // its events after its cursor, oldest first
  // Every event up to here is in `events` or not the webhook's: once `events` are delivered the
  // cursor may move here.
  int64_t covered_to = 0;
};

// The most recent attempts a store keeps per webhook.
inline constexpr int kWebhookAttemptsKept = 50;

class WebhookStore {
 public:
  virtual ~WebhookStore() = default;

  // Stores `w` (id ignored) with its cursor at the newest event (it receives what happens from
  // now on), and returns it as stored, id assigned.
  virtual Result<WebhookRecord> Create(WebhookRecord w) = 0;
  // The webhook with its secret; nullopt when there is none of that id.
  virtual Result<std::optional<WebhookRecord>> Get(int64_t id) = 0;
  // Webhooks of `tenant_prefix` and its subtree ("" = all), by id; secrets empty.
  virtual Result<std::vector<WebhookRecord>> List(const std::string& tenant_prefix) = 0;
  virtual Status Delete(int64_t id) = 0;
  // Disables with `reason`, or enables again (clearing the reason and the failures; the cursor
  // stays, so what happened meanwhile is delivered).
  virtual Status SetEnabled(int64_t id, bool enabled, const std::string& reason) = 0;

  // The dispatcher's side. Backlog: at most `limit` events of webhook `id` after its cursor.
  virtual Result<WebhookBacklog> Backlog(int64_t id, int limit) = 0;
  // Records `a`; a 2xx moves the cursor to its event and clears the failures, anything else
  // counts one more failure. Returns the webhook as it is now (secret empty).
  virtual Result<WebhookRecord> RecordAttempt(const WebhookAttempt& a,
                                              const std::string& status) = 0;
  // Moves the cursor forward to `cursor` (never back).
  virtual Status Advance(int64_t id, int64_t cursor) = 0;
  // The latest attempts of webhook `id`, newest first, at most `limit`.
  virtual Result<std::vector<WebhookAttempt>> Attempts(int64_t id, int limit) = 0;
};

// The event kinds a webhook may ask for (those the log writes about jobs and tasks).
const std::vector<std::string>& WebhookEventKinds();

// "<webhook id>-<event id>": the same for every attempt of one event to one webhook.
std::string WebhookDeliveryId(int64_t webhook_id, int64_t event_id);

// A webhook's endpoint, parsed.
struct WebhookUrl {
  bool tls = true;
  std::string host;  // a name or an address (IPv6 without its brackets)
  uint16_t port = 443;
  std::string target;  // "/path?query", "/" when the URL has none
};

// Parses `url`: https://host[:port][/path][?query], at most 2048 characters, no user info or
// fragment. http:// only when `allow_insecure_loopback` and the host is 127.0.0.1, ::1 or
// localhost (for demos and tests). INVALID_ARGUMENT naming `field` otherwise.
Result<WebhookUrl> ParseWebhookUrl(const std::string& url, bool allow_insecure_loopback,
                                   const std::string& field);

// INVALID_ARGUMENT naming the first kind of `kinds` not in WebhookEventKinds(), or a repeat.
Status CheckWebhookEventKinds(const std::vector<std::string>& kinds, const std::string& field);

}  // namespace gpupool
