// XID classification: which XID codes take a device out of service.
//
// NVIDIA's "Xid Errors" documentation (docs.nvidia.com/deploy/xid-errors/, the Xid catalog for
// Ampere and newer) sorts each XID by its immediate action. Those whose action is a GPU reset,
// a node reboot or a call to support — the device can no longer be trusted with the next
// tenant's work — are fatal here:
//   48  double-bit (uncorrectable) ECC error
//   62  internal micro-controller halt
//   64  ECC page retirement / row remapper recording failure
//   74  NVLink error
//   79  GPU has fallen off the bus
//   92  high single-bit ECC error rate
//   95  uncontained ECC error
//   119 GSP RPC timeout
//   120 GSP error
//   140 unrecovered ECC error
// Everything else (13 graphics engine exception, 31 memory page fault, 43 GPU stopped
// processing, 45 preemptive cleanup, 94 contained ECC error, …) is the application's fault or
// already contained: counted and reported, the device stays in service.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <string>

namespace gpupool::agent {

bool XidIsFatal(int32_t xid);
// "XID 79 (GPU has fallen off the bus)"; unknown codes print as "XID 123".
std::string DescribeXid(int32_t xid);

}  // namespace gpupool::agent
