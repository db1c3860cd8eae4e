#include "agent/image/image_pins.h"

#include <algorithm>
#include <condition_variable>
#include <map>
#include <mutex>

#include "base/log.h"

namespace gpupool::agent::image {

struct ImagePins::Shared {
  struct Entry {
    Pin pin;
    ImageLease lease;  // holds the image once pin.held
    std::chrono::steady_clock::time_point next_try{};
  };
  std::shared_ptr<ImageStore> store;
  double retry_scale = 1.0;
  mutable std::mutex mu;
  mutable std::condition_variable changed;
  std::vector<std::string> order;        // guarded by mu: as listed
  std::map<std::string, Entry> entries;  // guarded by mu: image →
  bool pulling = false;                  // guarded by mu
  bool stopping = false;                 // guarded by mu
};

ImagePins::ImagePins(std::shared_ptr<ImageStore> store, double retry_scale)
    : shared_(std::make_shared<Shared>()) {
  shared_->store = std::move(store);
  shared_->retry_scale = retry_scale;
  thread_ = std::thread(&ImagePins::Run, shared_);
}

ImagePins::~ImagePins() {
  bool pulling = false;
  {
    std::lock_guard lock(shared_->mu);
    shared_->stopping = true;
    pulling = shared_->pulling;
    // Let go of the held images now: the store may outlive this object.
    shared_->entries.clear();
    shared_->order.clear();
  }
  shared_->changed.notify_all();
  if (pulling) {
    thread_.detach();  // it owns `Shared` too, and exits when its pull returns
  } else {
    thread_.join();
  }
}

void ImagePins::Set(std::vector<std::string> images) {
  std::vector<ImageLease> released;  // let go outside the lock (the store takes its own)
  {
    std::lock_guard lock(shared_->mu);
    for (auto it = shared_->entries.begin(); it != shared_->entries.end();) {
      if (std::find(images.begin(), images.end(), it->first) == images.end()) {
        released.push_back(std::move(it->second.lease));
        LogInfo("agent.images", "image unpinned", {{"image", it->first}});
        it = shared_->entries.erase(it);
      } else {
        ++it;
      }
    }
    for (const std::string& image : images) {
      if (shared_->entries.contains(image)) continue;
      shared_->entries[image].pin.image = image;
      LogInfo("agent.images", "image pinned", {{"image", image}});
    }
    shared_->order = std::move(images);
  }
  shared_->changed.notify_all();
}

std::vector<ImagePins::Pin> ImagePins::State() const {
  std::lock_guard lock(shared_->mu);
  std::vector<Pin> out;
  for (const std::string& image : shared_->order) out.push_back(shared_->entries.at(image).pin);
  return out;
}

bool ImagePins::WaitAllHeld(std::chrono::milliseconds timeout) const {
  std::unique_lock lock(shared_->mu);
  return shared_->changed.wait_for(lock, timeout, [&] {
    return std::all_of(shared_->order.begin(), shared_->order.end(), [&](const std::string& image) {
      return shared_->entries.at(image).pin.held;
    });
  });
}

void ImagePins::Run(std::shared_ptr<Shared> sh) {
  std::unique_lock lock(sh->mu);
  while (!sh->stopping) {
    // The first listed image not held whose retry is due; else sleep until the earliest retry.
    const auto now = std::chrono::steady_clock::now();
    std::string next;
    auto wake = std::chrono::steady_clock::time_point::max();
    for (const std::string& image : sh->order) {
      const Shared::Entry& e = sh->entries.at(image);
      if (e.pin.held) continue;
      if (e.next_try <= now) {
        next = image;
        break;
      }
      wake = std::min(wake, e.next_try);
    }
    if (next.empty()) {
      if (wake == std::chrono::steady_clock::time_point::max()) {
        sh->changed.wait(lock);
      } else {
        sh->changed.wait_until(lock, wake);
      }
      continue;
    }
    sh->pulling = true;
    lock.unlock();
    Result<ImageLease> lease = sh->store->Pull(next, {});
    lock.lock();
    sh->pulling = false;
    auto it = sh->entries.find(next);
    if (it == sh->entries.end()) continue;  // unpinned while it was pulled: `lease` lets it go
    Shared::Entry& e = it->second;
    if (lease.ok()) {
      e.pin.held = true;
      e.pin.manifest_digest = lease->image().manifest_digest;
      e.pin.error.clear();
      e.lease = std::move(*lease);
      LogInfo("agent.images", "pinned image held",
              {{"image", next}, {"digest", e.pin.manifest_digest}});
    } else {
      // Doubling back-off, kFirstRetry … kMaxRetry.
      const int shift = std::min<int32_t>(e.pin.failures, 20);
      e.pin.failures++;
      e.pin.error = lease.status().message();
      const double base_ms =
          static_cast<double>(kFirstRetry.count()) * static_cast<double>(int64_t{1} << shift);
      const double delay_ms =
          std::min(base_ms, static_cast<double>(kMaxRetry.count())) * sh->retry_scale;
      e.next_try = std::chrono::steady_clock::now() +
                   std::chrono::microseconds(static_cast<int64_t>(delay_ms * 1000));
      LogWarn("agent.images", "pinned image not pulled; retrying",
              {{"image", next},
               {"error", e.pin.error},
               {"failures", std::to_string(e.pin.failures)},
               {"retry_ms", std::to_string(static_cast<int64_t>(delay_ms))}});
    }
    sh->changed.notify_all();
  }
}

}  // namespace gpupool::agent::image
