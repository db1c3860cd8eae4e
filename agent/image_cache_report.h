// ImageCacheReport: what a node tells gpupoold about the images its store holds, so placement
// can prefer nodes that already have a task's layers (docs/images.md, "Placement by cached
// layers"). The whole cache goes with every Register; a heartbeat carries it when it changed
// since it was last sent, and at least every `refresh_heartbeats` heartbeats (gpupoold drops
// heartbeats that arrive before it acknowledged the registration, and this is advisory: a
// resend, not an acknowledgement, repairs a lost one).
//
// Thread safety: none; the agent's strand owns it.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "agent/image/image_store.h"
#include "gpupool/v1/agent.pb.h"

namespace gpupool::agent {

class ImageCacheReport {
 public:
  // `store` may be null (the node runs no images): nothing is ever filled.
  ImageCacheReport(std::shared_ptr<image::ImageStore> store, int64_t refresh_heartbeats);

  // The whole cache, for a Register. False without a store.
  bool FillRegister(v1::ImageCache* out);
  // The cache when it changed or a refresh is due, for a heartbeat; false = leave it out.
  bool FillHeartbeat(v1::ImageCache* out);

 private:
  void Fill(const std::vector<image::CachedImage>& images, v1::ImageCache* out);
  std::shared_ptr<image::ImageStore> store_;
  int64_t refresh_heartbeats_;
  int64_t since_sent_ = 0;  // heartbeats since the cache last went out
  std::vector<image::CachedImage> sent_;
};

}  // namespace gpupool::agent
