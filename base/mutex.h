// Mutex and MutexLock: std::mutex and std::lock_guard with the capability annotations clang's
// -Wthread-safety needs (libstdc++'s own types carry none). Same cost: inline wrappers.
//
//   Mutex mu_;
//   std::map<K, V> table_ GPUPOOL_GUARDED_BY(mu_);
//   void Put(K k, V v) GPUPOOL_EXCLUDES(mu_) { MutexLock lock(&mu_); table_[k] = v; }
//
// Thread safety: a Mutex is what makes other things thread-safe; lock it from any thread.
#pragma once

#include <mutex>

#include "base/thread_annotations.h"

namespace gpupool {

class GPUPOOL_CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() GPUPOOL_ACQUIRE() { mu_.lock(); }
  void Unlock() GPUPOOL_RELEASE() { mu_.unlock(); }

 private:
  std::mutex mu_;
};

// Holds `mu` for its scope.
class GPUPOOL_SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex* mu) GPUPOOL_ACQUIRE(mu) : mu_(mu) { mu_->Lock(); }
  ~MutexLock() GPUPOOL_RELEASE() { mu_->Unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex* const mu_;
};

}  // namespace gpupool
