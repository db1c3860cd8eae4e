// What the gateway benches (gateway_latency, gateway_grpc_latency) share: the one-service
// directory they route through, the latency rows they print and write as JSON, and their flags.
#pragma once

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "api/gateway/directory.h"

namespace gpupool::bench {

// The service bench/echo with one replica on 127.0.0.1:port.
class OneService final : public api::gateway::Directory {
 public:
  explicit OneService(int port) {
    svc_.id = 1;
    svc_.tenant = "bench";
    svc_.name = "echo";
    svc_.running = {api::gateway::Backend{1, "127.0.0.1", port}};
  }
  std::vector<api::gateway::RoutedService> Services() override { return {svc_}; }
  void ReportLoad(int64_t, const ServiceLoadSample&) override {}
  void ReportColdStart(int64_t, int64_t) override {}

 private:
  api::gateway::RoutedService svc_;
};

inline double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())));
  return v[i];
}

// One rate and path: what was achieved and its latency from when each request was due.
struct Row {
  double rate = 0;
  std::string path;
  double achieved = 0, p50 = 0, p99 = 0, p999 = 0;
  int64_t errors = 0;
};

inline Row Summarize(double rate, std::string path, const std::vector<double>& latency_ms,
                     double seconds, int64_t errors) {
  return Row{rate,
             std::move(path),
             seconds > 0 ? static_cast<double>(latency_ms.size()) / seconds : 0,
             Percentile(latency_ms, 0.50),
             Percentile(latency_ms, 0.99),
             Percentile(latency_ms, 0.999),
             errors};
}

inline void PrintHeader() {
  std::printf("%9s %-8s %11s %9s %9s %10s %8s\n", "rate/s", "path", "achieved/s", "p50 ms",
              "p99 ms", "p99.9 ms", "errors");
}

inline void PrintRow(const Row& r) {
  std::printf("%9.0f %-8s %11.0f %9.3f %9.3f %10.3f %8lld\n", r.rate, r.path.c_str(), r.achieved,
              r.p50, r.p99, r.p999, static_cast<long long>(r.errors));
}

// `label` row: b's p50 and p99 minus a's.
inline void PrintAdded(double rate, const char* label, const Row& a, const Row& b) {
  std::printf("%9.0f %-8s %11s %9.3f %9.3f\n", rate, label, "", b.p50 - a.p50, b.p99 - a.p99);
}

// `extra` is more of the top-level object, e.g. "\"connections\":32,".
inline void WriteJson(const std::string& file, double seconds, const std::string& extra,
                      const std::vector<Row>& rows) {
  std::ofstream f(file);
  f << "{\"seconds\":" << seconds << "," << extra << "\"rows\":[";
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    f << (i ? "," : "") << "{\"rate\":" << r.rate << ",\"path\":\"" << r.path
      << "\",\"achieved\":" << r.achieved << ",\"p50_ms\":" << r.p50 << ",\"p99_ms\":" << r.p99
      << ",\"p999_ms\":" << r.p999 << ",\"errors\":" << r.errors << "}";
  }
  f << "]}\n";
}

// "1000,10000" → {1000, 10000}; throws std::invalid_argument on a non-number.
inline std::vector<double> ParseRates(const std::string& list) {
  std::vector<double> rates;
  std::stringstream in(list);
  for (std::string r; std::getline(in, r, ',');) rates.push_back(std::stod(r));
  return rates;
}

}  // namespace gpupool::bench
