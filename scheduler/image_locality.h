// ImageLocality: which nodes hold which images' layers, as their agents report them (Register and
// heartbeats, docs/images.md "Placement by cached layers"), and for a task's image the nodes that
// would fetch fewer bytes before it starts — placement's Request::warm.
//
// Advisory and in memory only: a report replaces the node's previous one, a restarted gpupoold
// learns again from the next Register, and a wrong guess costs a slower start, never a wrong
// placement (packing decides first; this breaks ties). An image's layers are known once any node
// reports holding it under the task's reference (canonical form, pool/image_reference.h); nodes
// that hold some of those layers (a shared base image) count what they miss.
//
// Thread safety: none; the scheduler's strand owns it.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "placement/placement.h"
#include "scheduler/model.h"

namespace gpupool {

class ImageLocality {
 public:
  // The node's whole cache, replacing what it reported before.
  void Report(const std::string& node, const std::vector<NodeImage>& images);
  void Forget(const std::string& node);

  // Nodes holding at least one layer of `reference`'s image, each with the bytes it still lacks
  // (0 = it has them all). Empty when no node reports the image or the reference does not parse.
  std::vector<placement::WarmNode> WarmFor(const std::string& reference) const;

  // The references `node` last reported holding, sorted (canonical form).
  std::vector<std::string> ReferencesOn(const std::string& node) const;

  size_t nodes() const { return nodes_.size(); }

 private:
  struct Held {
    std::map<std::string, std::vector<std::pair<std::string, int64_t>>> layers_by_ref;
    std::set<std::string> layers;
  };
  std::map<std::string, Held> nodes_;                         // node →
  std::map<std::string, std::set<std::string>> holders_;      // canonical reference → nodes
  std::map<std::string, std::set<std::string>> layer_nodes_;  // layer digest → nodes
};

}  // namespace gpupool
