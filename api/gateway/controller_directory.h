// The gateway's Directory in gpupoold: the ServiceController's services, each with the node
// endpoints of its RUNNING replicas' serving port, and the gateway's load and cold starts fed
// back to it.
//
// Thread safety: as the ServiceController's (any thread).
#pragma once

#include "api/gateway/directory.h"
#include "scheduler/service_controller.h"

namespace gpupool::api::gateway {

class ControllerDirectory final : public Directory {
 public:
  // REQUIRES: `controller` outlives this.
  explicit ControllerDirectory(ServiceController* controller) : controller_(controller) {}

  std::vector<RoutedService> Services() override;
  void ReportLoad(int64_t service_id, const ServiceLoadSample& sample) override {
    controller_->ReportLoad(service_id, sample);
  }
  void ReportColdStart(int64_t service_id, int64_t wait_ms) override {
    controller_->ReportColdStart(service_id, wait_ms);
  }

 private:
  ServiceController* const controller_;
};

// A view's routable replicas: RUNNING ones, at the endpoint of the service's port (a replica of
// an older revision that declared one port only: that one).
RoutedService RouteOf(const ServiceView& view);

}  // namespace gpupool::api::gateway
