// Clang thread-safety annotations (https://clang.llvm.org/docs/ThreadSafetyAnalysis.html) as
// macros: checked by clang with -Wthread-safety (scripts/check-thread-safety, run by CI), no-ops
// on other compilers (the project builds with gcc).
//
// Prefixed (GPUPOOL_GUARDED_BY, …): Abseil, which gRPC includes, defines the bare names.
//
//   Mutex mu_;
//   int count_ GPUPOOL_GUARDED_BY(mu_) = 0;   // read or written only with mu_ held
//   void Bump() GPUPOOL_REQUIRES(mu_);        // callers hold mu_
//   void Get() GPUPOOL_EXCLUDES(mu_);         // callers must not hold mu_ (it takes it)
#pragma once

#if defined(__clang__)
#define GPUPOOL_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define GPUPOOL_THREAD_ANNOTATION(x)
#endif

#define GPUPOOL_CAPABILITY(x) GPUPOOL_THREAD_ANNOTATION(capability(x))
#define GPUPOOL_SCOPED_CAPABILITY GPUPOOL_THREAD_ANNOTATION(scoped_lockable)
#define GPUPOOL_GUARDED_BY(x) GPUPOOL_THREAD_ANNOTATION(guarded_by(x))
#define GPUPOOL_PT_GUARDED_BY(x) GPUPOOL_THREAD_ANNOTATION(pt_guarded_by(x))
#define GPUPOOL_ACQUIRED_BEFORE(...) GPUPOOL_THREAD_ANNOTATION(acquired_before(__VA_ARGS__))
#define GPUPOOL_REQUIRES(...) GPUPOOL_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define GPUPOOL_ACQUIRE(...) GPUPOOL_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define GPUPOOL_RELEASE(...) GPUPOOL_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define GPUPOOL_EXCLUDES(...) GPUPOOL_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
#define GPUPOOL_NO_THREAD_SAFETY_ANALYSIS GPUPOOL_THREAD_ANNOTATION(no_thread_safety_analysis)
