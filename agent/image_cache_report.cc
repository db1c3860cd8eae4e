#include "agent/image_cache_report.h"

#include <algorithm>
#include <utility>

namespace gpupool::agent {

ImageCacheReport::ImageCacheReport(std::shared_ptr<image::ImageStore> store,
                                   int64_t refresh_heartbeats)
    : store_(std::move(store)), refresh_heartbeats_(std::max<int64_t>(refresh_heartbeats, 1)) {}

void ImageCacheReport::Fill(const std::vector<image::CachedImage>& images, v1::ImageCache* out) {
  out->Clear();
  for (const image::CachedImage& i : images) {
    v1::CachedImage* p = out->add_images();
    p->set_manifest_digest(i.manifest_digest);
    for (const std::string& r : i.references) p->add_references(r);
    for (const image::BlobRef& l : i.layers) {
      v1::CachedLayer* pl = p->add_layers();
      pl->set_digest(l.digest);
      pl->set_size(l.size);
    }
  }
  sent_ = images;
  since_sent_ = 0;
}

bool ImageCacheReport::FillRegister(v1::ImageCache* out) {
  if (!store_) return false;
  Fill(store_->Images(), out);
  return true;
}

bool ImageCacheReport::FillHeartbeat(v1::ImageCache* out) {
  if (!store_) return false;
  std::vector<image::CachedImage> now = store_->Images();
  if (now == sent_ && ++since_sent_ < refresh_heartbeats_) return false;
  Fill(now, out);
  return true;
}

}  // namespace gpupool::agent
