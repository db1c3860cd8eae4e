// protocol.h — the wire format between an interposed process and its task's ledger server.
//
// Transport: a unix SOCK_SEQPACKET socket, so every read is exactly one frame. A client sends a
// Request and reads one Response. The server identifies the client by SO_PEERCRED (the kernel's
// word, not the client's), charges every reservation to that connection, and frees a
// connection's charge once its process has ended. Limits live only in the server: no request
// can change them.
//
// Validation (a frame failing any check is refused and its connection dropped; the charge of a
// dropped connection stays until its process ends): exact size, magic, version, a known op and
// kind, and a byte count that cannot overflow the counters.
#ifndef GPUPOOL_AGENT_INTERPOSER_LEDGER_PROTOCOL_H_
#define GPUPOOL_AGENT_INTERPOSER_LEDGER_PROTOCOL_H_

#include <cstdint>

namespace gpupool::ledger {

inline constexpr uint32_t kMagic = 0x67706c67;  // "gplg"
inline constexpr uint16_t kVersion = 3;
// The environment variable that names the ledger's socket to the interposer in a task.
inline constexpr const char* kSocketEnv = "GPUPOOL_LEDGER_SOCKET";

enum class Op : uint16_t {
  kHello = 1,    // returns the limits; required before anything else
  kReserve = 2,  // charge `bytes` of `kind`; refused past the limit
  kRelease = 3,  // give back `bytes` of `kind` this connection holds
  kQuery = 4,    // the task's usage and limits
  // Report a span of `bytes` ns in which the process had work on the device, from `start_ns`
  // (CLOCK_MONOTONIC; 0: unknown, charged in full); answers how long to wait. On an agent's
  // ledger the span is charged as the device's arbiter splits it among its tenants
  // (device_arbiter.h); it ends at most kComputeAheadNs past the server's clock.
  kCompute = 5,
  // After its ledger restarted (the agent restarted, docs/agent.md "Agent restarts"): `bytes` of
  // `kind` this process held under the previous ledger (at most the limit). Charged as held,
  // even when the task's total passes the limit (the memory exists), so that what follows is
  // measured against it. Allowed once per kind and only before the connection's first
  // reservation or release. When the same process left an
  // orphan charge on this ledger, that charge is taken instead: the server's word over the
  // client's.
  kReclaim = 6,
};

enum class Kind : uint32_t { kVram = 0, kSpill = 1, kNone = 2 };

enum class Status : int32_t {
  kOk = 0,
  kOverLimit = 1,   // a reservation past the grant
  kBadRequest = 2,  // malformed: the connection is closed after this answer
  kNotHeld = 3,     // a release of more than this connection holds (nothing is released)
};

struct Request {
  uint32_t magic;
  uint16_t version;
  uint16_t op;        // Op
  uint32_t kind;      // Kind
  uint32_t reserved;  // must be 0
  uint64_t bytes;
  uint64_t start_ns;  // kCompute only (else 0)
};
static_assert(sizeof(Request) == 32);
// How far past the server's clock a reported span may end (the two clocks are one; this covers
// the mapping of the device's timer onto it).
inline constexpr uint64_t kComputeAheadNs = 100'000'000;

struct Response {
  int32_t status;            // Status
  uint32_t compute_percent;  // the strict cap, 1..100
  uint64_t vram_limit;
  uint64_t spill_limit;
  uint64_t context_bytes;  // what the interposer reserves for each CUDA context
  uint64_t vram_used;      // the task's, over all its processes
  uint64_t spill_used;
  uint64_t conn_vram;  // this connection's
  uint64_t conn_spill;
  uint64_t wait_ns;      // kCompute: sleep this long before the next launch
  uint64_t lease_bytes;  // VRAM a client may keep reserved ahead of its allocations (0: none)
};
static_assert(sizeof(Response) == 80);

}  // namespace gpupool::ledger

#endif  // GPUPOOL_AGENT_INTERPOSER_LEDGER_PROTOCOL_H_
