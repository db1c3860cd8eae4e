#include "store/pg_key_feed.h"

#include <pqxx/pqxx>

#include "base/log.h"
#include "store/pg_conn.h"

namespace gpupool {

namespace {

constexpr char kChannel[] = "gpupool_api_keys";

// Constructing it issues LISTEN on the connection; each notification goes to the listener.
class Receiver final : public pqxx::notification_receiver {
 public:
  Receiver(pqxx::connection_base& conn, ApiKeyChangeListener* listener)
      : pqxx::notification_receiver(conn, kChannel), listener_(listener) {}
  void operator()(const std::string& payload, int /*backend_pid*/) override {
    listener_->OnKeyChanged(payload);
  }

 private:
  ApiKeyChangeListener* const listener_;
};

}  // namespace

Result<std::unique_ptr<PgKeyChangeFeed>> PgKeyChangeFeed::Start(
    const std::string& uri, ApiKeyChangeListener* listener, std::chrono::milliseconds probe_every) {
  GPUPOOL_ASSIGN_OR_RETURN(PgTarget target, ParsePgTarget(uri));
  std::unique_ptr<PgKeyChangeFeed> feed(
      new PgKeyChangeFeed(target.conninfo, target.display, listener, probe_every));
  feed->thread_ = std::thread([f = feed.get()] { f->Run(); });
  return feed;
}

PgKeyChangeFeed::PgKeyChangeFeed(std::string conninfo, std::string display,
                                 ApiKeyChangeListener* listener,
                                 std::chrono::milliseconds probe_every)
    : conninfo_(std::move(conninfo)),
      display_(std::move(display)),
      listener_(listener),
      probe_every_(probe_every) {}

PgKeyChangeFeed::~PgKeyChangeFeed() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

bool PgKeyChangeFeed::Pause(std::chrono::milliseconds d) {
  std::unique_lock lock(mu_);
  return !cv_.wait_for(lock, d, [this] { return stop_; });
}

void PgKeyChangeFeed::Run() {
  using Clock = std::chrono::steady_clock;
  std::chrono::milliseconds backoff{100};
  bool logged_down = false;
  while (Pause(std::chrono::milliseconds(0))) {
    try {
      pqxx::connection conn(conninfo_);
      Receiver receiver(conn, listener_);  // LISTEN is in effect from here
      listener_->OnFeedUp();
      if (logged_down) LogInfo("store.keys", "key change feed listening again", {{"db", display_}});
      logged_down = false;
      backoff = std::chrono::milliseconds(100);
      Clock::time_point next_probe = Clock::now() + probe_every_;
      while (Pause(std::chrono::milliseconds(0))) {
        conn.await_notification(0, 200'000);  // wakes for a notification or after 200 ms
        if (Clock::now() >= next_probe) {
          pqxx::nontransaction(conn).exec("SELECT 1");  // throws if the connection died silently
          next_probe = Clock::now() + probe_every_;
        }
      }
      return;
    } catch (const std::exception& e) {
      listener_->OnFeedDown();
      if (!logged_down) {
        LogWarn("store.keys",
                "key change feed down; API keys are checked in the database on "
                "every call until it is back",
                {{"db", display_}, {"error", e.what()}});
        logged_down = true;
      }
    }
    if (!Pause(backoff)) return;
    backoff = std::min(backoff * 2, std::chrono::milliseconds(5000));
  }
}

}  // namespace gpupool
