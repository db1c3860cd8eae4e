// scrub_sim: time of a VRAM scrub per GiB with the simulated, file-backed device memory
// (agent/scrub/scrubber.h): zero --size-mib of a file, read it back, verify; --runs times.
// Prints min/median/max seconds per GiB; --json FILE writes them. A real GPU scrub (cuMemsetD8 at
// device bandwidth) is far faster; this measures the simulation the tests run on.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "agent/scrub/scrubber.h"

int main(int argc, char** argv) {
  int64_t size_mib = 1024;
  int runs = 5;
  std::string dir = "/tmp", json;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string { return i + 1 < argc ? argv[++i] : "0"; };
    if (a == "--size-mib") {
      size_mib = std::stoll(value());
    } else if (a == "--runs") {
      runs = std::stoi(value());
    } else if (a == "--dir") {
      dir = value();
    } else if (a == "--json") {
      json = value();
    } else {
      std::printf("usage: scrub_sim [--size-mib N] [--runs N] [--dir DIR] [--json FILE]\n");
      return a == "--help" ? 0 : 2;
    }
  }
  gpupool::agent::SimScrubber s(dir, size_mib << 20);
  const std::string uuid = "GPU-bench-scrub";
  std::vector<double> s_per_gib;
  for (int r = 0; r < runs; ++r) {
    auto res = s.Scrub(uuid);
    if (!res.ok()) {
      std::fprintf(stderr, "%s\n", res.status().ToString().c_str());
      return 1;
    }
    const double gib = static_cast<double>(res->bytes) / (1024.0 * 1024 * 1024);
    s_per_gib.push_back(static_cast<double>(res->micros) / 1e6 / gib);
  }
  std::filesystem::remove(s.PathOf(uuid));
  std::sort(s_per_gib.begin(), s_per_gib.end());
  const double med = s_per_gib[s_per_gib.size() / 2];
  std::printf("%-10s %6s %12s %12s %12s\n", "size MiB", "runs", "min s/GiB", "median s/GiB",
              "max s/GiB");
  std::printf("%-10lld %6d %12.3f %12.3f %12.3f\n", static_cast<long long>(size_mib), runs,
              s_per_gib.front(), med, s_per_gib.back());
  if (!json.empty()) {
    std::ofstream(json) << "{\"benchmark\":\"scrub_sim\",\"size_mib\":" << size_mib
                        << ",\"runs\":" << runs << ",\"min_s_per_gib\":" << s_per_gib.front()
                        << ",\"median_s_per_gib\":" << med
                        << ",\"max_s_per_gib\":" << s_per_gib.back() << "}\n";
  }
  return 0;
}
