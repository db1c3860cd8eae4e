// ImagePins: the images the node's pool pins (Pool.pinned_images), pulled into the node's store
// ahead of any task and held there (docs/images.md, "Prepull and pins").
//
// Set() replaces the whole list (RegisterAck and PinnedImages carry all of it). Each image listed
// is pulled on the pins' own thread, one at a time, in the order listed, and then held by an
// ImageLease for as long as it stays listed, so the store's budget never collects it; an image
// no longer listed is let go and ages out like any other. A pull that fails is retried with
// doubling back-off (kFirstRetry … kMaxRetry) and its error is kept for State() and logged:
// pins are advisory, a task of the image pulls it itself when it must.
//
// Pins are pulled without a credential (public images, or a registry the node may read).
//
// Thread safety: every method may be called from any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "agent/image/image_store.h"

namespace gpupool::agent::image {

class ImagePins {
 public:
  static constexpr std::chrono::milliseconds kFirstRetry{1000};
  static constexpr std::chrono::milliseconds kMaxRetry{300'000};

  struct Pin {
    std::string image;            // as listed (canonical)
    bool held = false;            // pulled and held by a lease
    std::string manifest_digest;  // when held
    int32_t failures = 0;         // pulls that failed since it was listed
    std::string error;            // the last failure ("" once held)
  };

  // `store` must not be null. `retry_scale` shortens the back-off (tests).
  explicit ImagePins(std::shared_ptr<ImageStore> store, double retry_scale = 1.0);
  // Stops the thread; a pull in progress is not waited for (it ends within the store's tool
  // timeouts and then lets its image go).
  ~ImagePins();
  ImagePins(const ImagePins&) = delete;
  ImagePins& operator=(const ImagePins&) = delete;

  void Set(std::vector<std::string> images);
  std::vector<Pin> State() const;
  // Waits until every listed image is held or `timeout` passed; true when all are (tests, tools).
  bool WaitAllHeld(std::chrono::milliseconds timeout) const;

 private:
  struct Shared;  // what the thread touches: it outlives this object while a pull finishes
  static void Run(std::shared_ptr<Shared> shared);
  std::shared_ptr<Shared> shared_;
  std::thread thread_;
};

}  // namespace gpupool::agent::image
