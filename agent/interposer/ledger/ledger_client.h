// ledger_client.h — an interposed process's connection to its task's ledger server.
//
// Thread-safe: one request in flight at a time (a mutex). After fork() the child must call
// Reset() (the interposer does it in a pthread_atfork handler): a connection is charged to the
// process that opened it, so a child opens its own.
//
// The ledger outlives nothing: it runs in the agent, and an agent restart (docs/agent.md, "Agent
// restarts") closes every connection while the task keeps running. A request whose connection
// fails therefore reconnects to the same socket, where the restarted agent serves the task's new
// ledger, for up to kReconnectWaitMs; there it first reclaims what this process held (the last
// answer's conn_vram / conn_spill) and then sends the request again. A request whose answer was
// lost was never charged by the new ledger, and the reclaim states the charge from before it, so
// the retry is counted once. Past the wait the call fails (the caller fails closed).
#ifndef GPUPOOL_AGENT_INTERPOSER_LEDGER_LEDGER_CLIENT_H_
#define GPUPOOL_AGENT_INTERPOSER_LEDGER_LEDGER_CLIENT_H_

#include <pthread.h>
#include <sys/un.h>

#include <atomic>
#include <cstdint>

#include "agent/interposer/ledger/protocol.h"

namespace gpupool::ledger {

// How long a request waits for a restarted ledger (an agent restart takes seconds; the node's
// lease, minutes, bounds how long the task itself may run without one).
inline constexpr int kReconnectWaitMs = 300'000;

class LedgerClient {
 public:
  // Connects to `socket_path` and says hello; false (and no connection) when it cannot.
  bool Connect(const char* socket_path);
  // One request; false when the connection failed and no restarted ledger answered within
  // `reconnect_wait_ms` (the caller fails closed). `start_ns`: Op::kCompute's span start.
  bool Call(Op op, Kind kind, uint64_t bytes, Response* out,
            int reconnect_wait_ms = kReconnectWaitMs, uint64_t start_ns = 0);
  // Forgets the connection without a round trip (the child side of fork()).
  void Reset();
  // Once true, hello() is complete (it is written before the connection is published).
  bool connected() const { return fd_.load(std::memory_order_acquire) >= 0; }
  const Response& hello() const { return hello_; }
  // Reconnections made after a failed request (each one a restarted ledger).
  uint64_t reconnects() const { return reconnects_.load(std::memory_order_relaxed); }

 private:
  // Opens a connection and says hello on it; -1 when it cannot. mu_ not needed.
  static int Open(const sockaddr_un& addr, Response* hello);
  // One round trip on `fd`, remembering the connection's charge from the answer (mu_ held).
  bool Exchange(int fd, const Request& req, Response* out);
  // With mu_ held: reclaims on a new connection what this process held (nothing when it held
  // nothing); false when the ledger did not take it.
  bool ReclaimOn(int fd);
  // With mu_ held: replaces the failed connection by one to a restarted ledger that has taken
  // this process's charge back; false past the deadline.
  bool ReconnectLocked(int wait_ms);

  pthread_mutex_t mu_ = PTHREAD_MUTEX_INITIALIZER;  // serialises use of the socket
  std::atomic<int> fd_{-1};
  Response hello_{};
  sockaddr_un addr_{};  // where Connect() found the ledger
  // This connection's charge per the last answer (mu_).
  uint64_t held_vram_ = 0, held_spill_ = 0;
  std::atomic<uint64_t> reconnects_{0};
};

}  // namespace gpupool::ledger

#endif  // GPUPOOL_AGENT_INTERPOSER_LEDGER_LEDGER_CLIENT_H_
