#include "scheduler/image_locality.h"

#include "pool/image_reference.h"

namespace gpupool {

void ImageLocality::Forget(const std::string& node) {
  auto it = nodes_.find(node);
  if (it == nodes_.end()) return;
  const auto drop = [&](std::map<std::string, std::set<std::string>>* index,
                        const std::string& key) {
    auto at = index->find(key);
    if (at == index->end()) return;
    at->second.erase(node);
    if (at->second.empty()) index->erase(at);
  };
  for (const auto& [ref, layers] : it->second.layers_by_ref) drop(&holders_, ref);
  for (const std::string& layer : it->second.layers) drop(&layer_nodes_, layer);
  nodes_.erase(it);
}

void ImageLocality::Report(const std::string& node, const std::vector<NodeImage>& images) {
  Forget(node);
  if (images.empty()) return;
  Held& held = nodes_[node];
  for (const NodeImage& image : images) {
    for (const std::string& ref : image.references) {
      held.layers_by_ref[ref] = image.layers;
      holders_[ref].insert(node);
    }
    for (const auto& [digest, size] : image.layers) {
      held.layers.insert(digest);
      layer_nodes_[digest].insert(node);
    }
  }
}

std::vector<std::string> ImageLocality::ReferencesOn(const std::string& node) const {
  std::vector<std::string> out;
  auto it = nodes_.find(node);
  if (it == nodes_.end()) return out;
  for (const auto& [ref, layers] : it->second.layers_by_ref) out.push_back(ref);
  return out;
}

std::vector<placement::WarmNode> ImageLocality::WarmFor(const std::string& reference) const {
  Result<ImageReference> ref = ParseImageReference(reference);
  if (!ref.ok()) return {};
  auto holders = holders_.find(ref->Canonical());
  if (holders == holders_.end()) return {};
  // The image's layers, as its first holder knows them.
  const auto& layers = nodes_.at(*holders->second.begin()).layers_by_ref.at(ref->Canonical());
  std::set<std::string> candidates;
  for (const auto& [digest, size] : layers) {
    auto at = layer_nodes_.find(digest);
    if (at != layer_nodes_.end()) candidates.insert(at->second.begin(), at->second.end());
  }
  std::vector<placement::WarmNode> out;
  for (const std::string& node : candidates) {
    const Held& held = nodes_.at(node);
    int64_t missing = 0;
    for (const auto& [digest, size] : layers) {
      if (!held.layers.contains(digest)) missing += size;
    }
    out.push_back({node, missing});
  }
  return out;
}

}  // namespace gpupool
