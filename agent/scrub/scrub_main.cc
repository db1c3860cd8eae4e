// gpupool-scrub — zeroes and verifies the free memory of one GPU in a process of its own: the
// CUDA scrubber (scrubber.h) without the agent, for scripts/gpu-verify and for operators who
// want to clear a device by hand before handing it on.
//   gpupool-scrub GPU-UUID     prints "scrubbed bytes=N us=M"; exit 1 (with the reason) when the
//                              device cannot be scrubbed or did not read back as zero
#include <cstdio>
#include <cstring>
#include <string>

#include "agent/scrub/scrubber.h"

int main(int argc, char** argv) {
  if (argc != 2 || std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0) {
    std::fprintf(argc == 2 ? stdout : stderr,
                 "usage: gpupool-scrub GPU-UUID\n"
                 "Zeroes every free byte of the GPU's memory and reads it all back (nvidia-smi -L\n"
                 "lists the UUIDs). Memory held by running processes is theirs and is not "
                 "touched.\n");
    return argc == 2 ? 0 : 2;
  }
  auto scrubber = gpupool::agent::OpenCudaScrubber();
  if (!scrubber.ok()) {
    std::fprintf(stderr, "gpupool-scrub: %s\n", scrubber.status().message().c_str());
    return 1;
  }
  auto r = (*scrubber)->Scrub(argv[1]);
  if (!r.ok()) {
    std::fprintf(stderr, "gpupool-scrub: %s\n", r.status().message().c_str());
    return 1;
  }
  std::printf("scrubbed bytes=%lld us=%lld\n", static_cast<long long>(r->bytes),
              static_cast<long long>(r->micros));
  return 0;
}
