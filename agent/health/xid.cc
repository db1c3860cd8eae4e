#include "agent/health/xid.h"

namespace gpupool::agent {
namespace {

struct Known {
  int32_t xid;
  bool fatal;
  const char* meaning;
};

// The fatal set and the common non-fatal ones operators see most (xid.h says why).
constexpr Known kKnown[] = {
    {13, false, "graphics engine exception"},
    {31, false, "GPU memory page fault"},
    {43, false, "GPU stopped processing"},
    {45, false, "preemptive cleanup, due to previous errors"},
    {48, true, "double-bit ECC error"},
    {62, true, "internal micro-controller halt"},
    {63, false, "ECC page retirement or row remapping recorded"},
    {64, true, "ECC page retirement or row remapper recording failure"},
    {74, true, "NVLink error"},
    {79, true, "GPU has fallen off the bus"},
    {92, true, "high single-bit ECC error rate"},
    {94, false, "contained ECC error"},
    {95, true, "uncontained ECC error"},
    {119, true, "GSP RPC timeout"},
    {120, true, "GSP error"},
    {140, true, "unrecovered ECC error"},
};

const Known* Find(int32_t xid) {
  for (const Known& k : kKnown) {
    if (k.xid == xid) return &k;
  }
  return nullptr;
}

}  // namespace

bool XidIsFatal(int32_t xid) {
  const Known* k = Find(xid);
  return k != nullptr && k->fatal;
}

std::string DescribeXid(int32_t xid) {
  const Known* k = Find(xid);
  std::string out = "XID " + std::to_string(xid);
  if (k != nullptr) out += std::string(" (") + k->meaning + ")";
  return out;
}

}  // namespace gpupool::agent
