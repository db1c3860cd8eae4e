// Every method of the operator- and tenant-facing services is either a read (Get…, List…,
// Watch…, Export…) or a verb the audit log records (IsMutatingVerb): a new mutating method cannot
// slip past the log unnoticed. ClearDeviceFault did (it returned a device to service unrecorded).
#include <google/protobuf/descriptor.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "api/audit.h"
#include "gpupool/v1/agent.pb.h"
#include "gpupool/v1/audit.pb.h"
#include "gpupool/v1/billing.pb.h"
#include "gpupool/v1/jobs.pb.h"
#include "gpupool/v1/keys.pb.h"
#include "gpupool/v1/pools.pb.h"
#include "gpupool/v1/tenants.pb.h"
#include "gpupool/v1/usage.pb.h"
#include "gpupool/v1/webhooks.pb.h"
#include "gpupool/v1/whatif.pb.h"

namespace gpupool::api {
namespace {

bool IsRead(const std::string& m) {
  for (const char* prefix : {"Get", "List", "Watch", "Export"})
    if (m.rfind(prefix, 0) == 0) return true;
  return false;
}

TEST(AuditVerbs, EveryMethodIsAReadOrAudited) {
  const auto* pool = google::protobuf::DescriptorPool::generated_pool();
  // The node-facing calls (AgentService.Connect, NodeEnrollService.Join/Renew) are recorded by
  // AgentAudit and the enrollment path, not by the API faces' hook.
  const std::vector<std::string> node_facing = {"Connect", "Join", "Renew"};
  int checked = 0;
  for (const char* name :
       {"AuditService", "BillingService", "JobService", "KeyService", "PoolService", "NodeService",
        "CatalogService", "TenantService", "UsageService", "WhatIfService", "NodeEnrollService",
        "AgentService", "WebhookService"}) {
    const auto* service = pool->FindServiceByName(std::string("gpupool.v1.") + name);
    ASSERT_NE(service, nullptr) << name;
    for (int i = 0; i < service->method_count(); ++i) {
      const std::string m = service->method(i)->name();
      if (IsRead(m) || std::find(node_facing.begin(), node_facing.end(), m) != node_facing.end())
        continue;
      // The faces name a call by its verb, the method's name but for one (api/grpc/services.cc).
      const std::string verb = m == "Compare" ? "CompareWhatIf" : m;
      EXPECT_TRUE(IsMutatingVerb(verb)) << name << "." << m << " changes state but is not audited";
      ++checked;
    }
  }
  EXPECT_GE(checked, 20);
}

}  // namespace
}  // namespace gpupool::api
