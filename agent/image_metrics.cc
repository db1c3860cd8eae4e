#include "agent/image_metrics.h"

#include <prometheus/metric_family.h>

namespace gpupool::agent {
namespace {

prometheus::MetricFamily One(const char* name, const char* help, prometheus::MetricType type,
                             const std::string& node, double value) {
  prometheus::MetricFamily f;
  f.name = name;
  f.help = help;
  f.type = type;
  prometheus::ClientMetric m;
  m.label.push_back({"node", node});
  if (type == prometheus::MetricType::Counter) {
    m.counter.value = value;
  } else {
    m.gauge.value = value;
  }
  f.metric.push_back(std::move(m));
  return f;
}

// From a warm start (tens of ms) to a large cold pull (minutes).
const prometheus::Histogram::BucketBoundaries kStartBuckets = {
    0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600};

}  // namespace

ImageStoreCollector::ImageStoreCollector(std::shared_ptr<image::ImageStore> store, std::string node)
    : store_(std::move(store)), node_(std::move(node)) {}

std::vector<prometheus::MetricFamily> ImageStoreCollector::Collect() const {
  const image::ImageStoreStats s = store_->stats();
  using prometheus::MetricType;
  return {
      One("gpupool_agent_image_pulls_total", "Image pulls that returned an image (hits included)",
          MetricType::Counter, node_, static_cast<double>(s.pulls)),
      One("gpupool_agent_image_pull_cache_hits_total",
          "Image pulls served from the node's store without fetching a blob", MetricType::Counter,
          node_, static_cast<double>(s.cache_hits)),
      One("gpupool_agent_image_pull_bytes_total", "Bytes of blobs fetched from registries",
          MetricType::Counter, node_, static_cast<double>(s.bytes_fetched)),
      One("gpupool_agent_image_blobs_collected_total",
          "Blobs removed to keep the store within its budget", MetricType::Counter, node_,
          static_cast<double>(s.blobs_collected)),
      One("gpupool_agent_image_store_bytes", "Bytes of blobs in the node's image store",
          MetricType::Gauge, node_, static_cast<double>(s.stored_bytes)),
      One("gpupool_agent_image_store_blobs", "Blobs in the node's image store", MetricType::Gauge,
          node_, static_cast<double>(s.blobs)),
      One("gpupool_agent_image_store_images", "Images in the node's image store", MetricType::Gauge,
          node_, static_cast<double>(s.images)),
  };
}

StartLatency::StartLatency(prometheus::Registry& registry, const std::string& node)
    : family_(&prometheus::BuildHistogram()
                   .Name("gpupool_agent_task_start_seconds")
                   .Help("From the agent's StartTask to the task's program running (an image "
                         "task's pull, root file system and runtime included)")
                   .Register(registry)),
      node_(node) {}

void StartLatency::Observe(const TaskStartTiming& timing) {
  const std::string cache = !timing.image ? "" : timing.cache_hit ? "hit" : "miss";
  family_
      ->Add({{"node", node_}, {"kind", timing.image ? "image" : "plain"}, {"cache", cache}},
            kStartBuckets)
      .Observe(timing.seconds);
}

}  // namespace gpupool::agent
