// What the services' gateway (api/gateway/gateway.h) needs of the rest of gpupoold: the services
// it routes to and where their running replicas are reached, and where its view of their load
// goes. gpupoold gives it the ServiceController's (api/gateway/controller_directory.h); tests
// give it a table of their own.
//
// Thread safety: implementations are called from the gateway's thread and must be thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "scheduler/autoscaler.h"

namespace gpupool::api::gateway {

// A running replica's serving port, as its node publishes it.
struct Backend {
  int64_t replica = 0;  // its job id
  std::string host;
  int port = 0;
  friend bool operator==(const Backend&, const Backend&) = default;
};

struct RoutedService {
  int64_t id = 0;
  std::string tenant;
  std::string name;
  std::string readiness_path;    // "" = ready once its port accepts a connection
  std::vector<Backend> running;  // RUNNING replicas (not yet probed ready)
  std::string below_reason;      // why it is short of replicas, for a 503's body
};

class Directory {
 public:
  virtual ~Directory() = default;
  virtual std::vector<RoutedService> Services() = 0;
  // One tick of the gateway's view of a service (scheduler/autoscaler.h).
  virtual void ReportLoad(int64_t service_id, const ServiceLoadSample& sample) = 0;
  // A request that found no ready replica and was served once one was: how long it waited.
  virtual void ReportColdStart(int64_t service_id, int64_t wait_ms) = 0;
};

}  // namespace gpupool::api::gateway
