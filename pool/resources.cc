#include "pool/resources.h"

#include <cstdio>

namespace gpupool {

std::string FormatTflops(int64_t milli_tflops) {
  char buf[40];
  const char* sign = milli_tflops < 0 ? "-" : "";
  int64_t v = milli_tflops < 0 ? -milli_tflops : milli_tflops;
  std::snprintf(buf, sizeof buf, "%s%lld.%03lld", sign, static_cast<long long>(v / 1000),
                static_cast<long long>(v % 1000));
  std::string s(buf);
  while (s.back() == '0') s.pop_back();
  if (s.back() == '.') s.pop_back();
  return s;
}

std::string Resources::ToString() const {
  return FormatTflops(milli_tflops) + " TFLOPS, " + std::to_string(vram_mib) + " MiB";
}

}  // namespace gpupool
