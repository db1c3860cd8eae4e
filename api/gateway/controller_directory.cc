#include "api/gateway/controller_directory.h"

namespace gpupool::api::gateway {

RoutedService RouteOf(const ServiceView& v) {
  RoutedService r;
  r.id = v.record.id;
  r.tenant = v.record.spec.tenant;
  r.name = v.record.spec.name;
  r.readiness_path = v.record.spec.revision.readiness_path;
  r.below_reason = v.below_reason;
  const int port = v.record.spec.revision.port;
  for (const ServiceReplicaView& rep : v.replicas) {
    if (!rep.ready) continue;
    const TaskEndpoint* at = nullptr;
    for (const TaskEndpoint& e : rep.endpoints) {
      if (e.port.port == port && e.port.protocol == "tcp") at = &e;
    }
    if (at == nullptr && rep.endpoints.size() == 1) at = &rep.endpoints.front();
    if (at == nullptr || at->host.empty() || at->host_port <= 0) continue;
    r.running.push_back(Backend{rep.job_id, at->host, at->host_port});
  }
  return r;
}

std::vector<RoutedService> ControllerDirectory::Services() {
  std::vector<RoutedService> out;
  for (const ServiceView& v : controller_->List("")) out.push_back(RouteOf(v));
  return out;
}

}  // namespace gpupool::api::gateway
