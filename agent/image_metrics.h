// Cold start on the agent's /metrics (docs/images.md, "Metrics"): what the node's image store
// pulled and served from its cache, and how long tasks took from the agent's StartTask to
// running, by kind (image or plain command) and, for images, cache hit or miss.
//
//   gpupool_agent_image_pulls_total, gpupool_agent_image_pull_cache_hits_total
//       (hit ratio = rate(hits) / rate(pulls)); gpupool_agent_image_pull_bytes_total (pull
//       bytes/s = its rate); gpupool_agent_image_blobs_collected_total;
//   gpupool_agent_image_store_bytes, gpupool_agent_image_store_blobs,
//   gpupool_agent_image_store_images; gpupool_agent_task_start_seconds{kind="image"|"plain",
//   cache="hit"|"miss"|""} (histogram).
//
// ImageStoreCollector reads the store's own counters at each scrape (nothing to keep in step);
// StartLatency is fed by the task runner (TaskRunnerOptions::on_start).
//
// Thread safety: both are safe from any thread.
#pragma once

#include <prometheus/collectable.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <memory>
#include <string>
#include <vector>

#include "agent/image/image_store.h"
#include "agent/task_runner.h"

namespace gpupool::agent {

class ImageStoreCollector : public prometheus::Collectable {
 public:
  ImageStoreCollector(std::shared_ptr<image::ImageStore> store, std::string node);
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  std::shared_ptr<image::ImageStore> store_;
  std::string node_;
};

class StartLatency {
 public:
  StartLatency(prometheus::Registry& registry, const std::string& node);
  void Observe(const TaskStartTiming& timing);

 private:
  prometheus::Family<prometheus::Histogram>* family_;
  std::string node_;
};

}  // namespace gpupool::agent
