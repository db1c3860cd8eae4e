// PgKeyChangeFeed: tells an ApiKeyChangeListener (scheduler/api_keys.h) which API keys changed in
// PostgreSQL, whichever daemon changed them: migration 11's trigger notifies channel
// gpupool_api_keys on every UPDATE or DELETE of `api_keys`, and the feed LISTENs on a connection
// of its own. This is what lets a daemon cache verified keys (api/key_cache.h) and still refuse a
// revoked key at once.
//
//   auto feed = PgKeyChangeFeed::Start(uri, &cache);   // cache.OnFeedUp() once it listens
//   …
//   feed.reset();                                       // stops and joins its thread
//
// The listener hears OnFeedUp() each time LISTEN is in effect (first, and after a reconnect:
// whatever changed in between was missed), OnFeedDown() as soon as the connection is found
// broken, and OnKeyChanged(id) for each notification. A connection that dies without a word (a
// network partition) is found by a `SELECT 1` every `probe_every`, and by TCP keepalives.
// Reconnects back off from 100 ms to 5 s.
//
// Thread safety: Start and the destructor from one thread; the listener is called on the feed's
// thread and must outlive the feed.
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "base/status.h"
#include "scheduler/api_keys.h"

namespace gpupool {

class PgKeyChangeFeed {
 public:
  // INVALID_ARGUMENT for a malformed URI; connects in the background.
  static Result<std::unique_ptr<PgKeyChangeFeed>> Start(
      const std::string& uri, ApiKeyChangeListener* listener,
      std::chrono::milliseconds probe_every = std::chrono::seconds(5));
  ~PgKeyChangeFeed();
  PgKeyChangeFeed(const PgKeyChangeFeed&) = delete;
  PgKeyChangeFeed& operator=(const PgKeyChangeFeed&) = delete;

 private:
  PgKeyChangeFeed(std::string conninfo, std::string display, ApiKeyChangeListener* listener,
                  std::chrono::milliseconds probe_every);
  void Run();
  // Sleeps up to `d`; false once the feed is stopping.
  bool Pause(std::chrono::milliseconds d);

  const std::string conninfo_;
  const std::string display_;
  ApiKeyChangeListener* const listener_;
  const std::chrono::milliseconds probe_every_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;  // guarded by mu_
  std::thread thread_;
};

}  // namespace gpupool
