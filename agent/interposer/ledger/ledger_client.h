// ledger_client.h — an interposed process's connection to its task's ledger server.
// Thread-safe: one request in flight at a time (a mutex). After fork() the child must call
// Reset() (the interposer does it in a pthread_atfork handler): a connection is charged to the
// process that opened it, so a child opens its own.
#ifndef GPUPOOL_AGENT_INTERPOSER_LEDGER_LEDGER_CLIENT_H_
#define GPUPOOL_AGENT_INTERPOSER_LEDGER_LEDGER_CLIENT_H_

#include <pthread.h>

#include <atomic>
#include <cstdint>

#include "agent/interposer/ledger/protocol.h"

namespace gpupool::ledger {

class LedgerClient {
 public:
  // Connects to `socket_path` and says hello; false (and no connection) when it cannot.
  bool Connect(const char* socket_path);
  // One request; false when the connection failed (the caller fails closed).
  bool Call(Op op, Kind kind, uint64_t bytes, Response* out);
  // Forgets the connection without a round trip (the child side of fork()).
  void Reset();
  // Once true, hello() is complete (it is written before the connection is published).
  bool connected() const { return fd_.load(std::memory_order_acquire) >= 0; }
  const Response& hello() const { return hello_; }

 private:
  pthread_mutex_t mu_ = PTHREAD_MUTEX_INITIALIZER;  // serialises use of the socket
  std::atomic<int> fd_{-1};
  Response hello_{};
};

}  // namespace gpupool::ledger

#endif  // GPUPOOL_AGENT_INTERPOSER_LEDGER_LEDGER_CLIENT_H_
