#include "placement/sim/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

namespace gpupool::placement::sim {
namespace {

std::string Fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

// Mean over seeds of the unallocated % at each arrived %, for one strategy.
std::vector<double> MeanCurve(Strategy s, const std::vector<ReplayResult>& results) {
  std::vector<double> sum(kMaxArrivedPct + 1, 0.0);
  std::vector<int> n(kMaxArrivedPct + 1, 0);
  for (const ReplayResult& r : results) {
    if (r.strategy != s) continue;
    for (int x = 0; x <= kMaxArrivedPct; ++x) {
      const double u = r.UnallocatedAt(x);
      if (std::isnan(u)) continue;
      sum[static_cast<size_t>(x)] += u;
      ++n[static_cast<size_t>(x)];
    }
  }
  for (size_t x = 0; x < sum.size(); ++x) sum[x] = n[x] > 0 ? sum[x] / n[x] : NAN;
  return sum;
}

// Mean, sample sd, min and max of `v`.
Summary Describe(const std::vector<double>& v) {
  Summary out;
  out.runs = static_cast<int>(v.size());
  if (v.empty()) return out;
  out.min = out.max = v[0];
  for (double x : v) {
    out.mean += x;
    out.min = std::min(out.min, x);
    out.max = std::max(out.max, x);
  }
  out.mean /= static_cast<double>(v.size());
  for (double x : v) out.sd += (x - out.mean) * (x - out.mean);
  out.sd = v.size() > 1 ? std::sqrt(out.sd / static_cast<double>(v.size() - 1)) : 0;
  return out;
}

}  // namespace

Summary Summarize(Strategy s, const std::vector<ReplayResult>& results) {
  std::vector<double> v;
  for (const ReplayResult& r : results)
    if (r.strategy == s && !std::isnan(r.UnallocatedAt(100))) v.push_back(r.UnallocatedAt(100));
  Summary out = Describe(v);
  out.strategy = s;
  return out;
}

Summary SummarizeBound(const std::vector<SeedBound>& bounds) {
  std::vector<double> v;
  for (const SeedBound& b : bounds)
    if (b.bound.events > 0) v.push_back(b.bound.unallocated_pct);
  Summary out = Describe(v);
  out.label = "bound";
  return out;
}

std::string Table(const std::string& workload, const std::vector<Summary>& rows,
                  const std::string& mode) {
  std::ostringstream o;
  o << "workload: " << workload
    << (mode == "online"
            ? "   mode: online (workload learned from the arrivals so far, as gpupoold)"
            : "   mode: oracle (workload from the whole trace; no daemon has that)")
    << "\n"
    << "   unallocated GPU % at arrived = 100% (mean ± sd over seeds); per replay: wall and CPU "
       "seconds; decisions per CPU second\n";
  char line[256];
  std::snprintf(line, sizeof line, "%-16s %16s %8s %8s %5s %10s %10s %14s\n", "strategy",
                "unallocated %", "min", "max", "runs", "wall s", "cpu s", "decisions/s");
  o << line;
  for (const Summary& s : rows) {
    const std::string name = s.label.empty() ? std::string(StrategyName(s.strategy)) : s.label;
    std::snprintf(line, sizeof line, "%-16s %9.2f ± %4.2f %8.2f %8.2f %5d %10.4f %10.4f %14.0f\n",
                  name.c_str(), s.mean, s.sd, s.min, s.max, s.runs, s.seconds_per_replay,
                  s.cpu_seconds_per_replay, s.decisions_per_second);
    o << line;
    if (s.label == "packing bound")
      o << "  (packing bound: no policy, even one that refuses tasks, can leave less "
           "unallocated on these arrival sequences — an LP certificate, docs/placement.md; its "
           "seconds are its own)\n";
    else if (!s.label.empty())
      o << "  (" << s.label
        << ": no policy that drops a task only when no node can host it can leave less "
           "unallocated on these arrival sequences; one that may refuse tasks is bound only by "
           "--bound packing — LP certificates, docs/placement.md; its seconds are its own)\n";
  }
  return o.str();
}

std::string PerSeedTable(const std::string& workload, const std::vector<ReplayResult>& results,
                         const std::vector<SeedBound>& bounds) {
  std::vector<Strategy> strategies;
  std::vector<uint64_t> seeds;
  for (const ReplayResult& r : results) {
    if (std::find(strategies.begin(), strategies.end(), r.strategy) == strategies.end())
      strategies.push_back(r.strategy);
    if (std::find(seeds.begin(), seeds.end(), r.seed) == seeds.end()) seeds.push_back(r.seed);
  }
  std::ostringstream o;
  o << "workload: " << workload << "   per seed: unallocated GPU % at arrived = 100%\n";
  char cell[64];
  std::snprintf(cell, sizeof cell, "%-6s", "seed");
  o << cell;
  for (Strategy s : strategies) {
    std::snprintf(cell, sizeof cell, " %14s", std::string(StrategyName(s)).c_str());
    o << cell;
  }
  if (!bounds.empty()) o << "          bound  best − bound";
  o << "\n";
  for (uint64_t seed : seeds) {
    std::snprintf(cell, sizeof cell, "%-6llu", static_cast<unsigned long long>(seed));
    o << cell;
    double best = NAN;
    for (Strategy s : strategies) {
      double u = NAN;
      for (const ReplayResult& r : results)
        if (r.strategy == s && r.seed == seed) u = r.UnallocatedAt(100);
      if (!std::isnan(u) && (std::isnan(best) || u < best)) best = u;
      std::snprintf(cell, sizeof cell, " %14.2f", u);
      o << cell;
    }
    for (const SeedBound& b : bounds) {
      if (b.seed != seed) continue;
      std::snprintf(cell, sizeof cell, " %14.2f %13.2f", b.bound.unallocated_pct,
                    best - b.bound.unallocated_pct);
      o << cell;
    }
    o << "\n";
  }
  return o.str();
}

std::string Json(const std::string& workload, double tune, const std::vector<ReplayResult>& results,
                 const std::vector<Summary>& rows, const std::vector<SeedBound>& bounds,
                 const std::string& mode) {
  std::ostringstream o;
  o << "{\n  \"workload\": \"" << workload << "\",\n  \"mode\": \"" << mode
    << "\",\n  \"tune\": " << tune << ",\n  \"summary\": [";
  for (size_t i = 0; i < rows.size(); ++i) {
    const Summary& s = rows[i];
    const std::string name = s.label.empty() ? std::string(StrategyName(s.strategy)) : s.label;
    o << (i ? "," : "") << "\n    {\"strategy\": \"" << name << "\", \"mean\": " << Fixed(s.mean, 4)
      << ", \"sd\": " << Fixed(s.sd, 4) << ", \"runs\": " << s.runs
      << ", \"seconds_per_replay\": " << Fixed(s.seconds_per_replay, 6)
      << ", \"decisions_per_second\": " << Fixed(s.decisions_per_second, 0) << "}";
  }
  o << "\n  ],\n  \"runs\": [";
  for (size_t i = 0; i < results.size(); ++i) {
    const ReplayResult& r = results[i];
    o << (i ? "," : "") << "\n    {\"strategy\": \"" << StrategyName(r.strategy)
      << "\", \"seed\": " << r.seed << ", \"tasks\": " << r.tasks << ", \"placed\": " << r.placed
      << ", \"dropped\": " << r.dropped << ", \"unallocated_pct_by_arrived_pct\": {";
    bool first = true;
    for (int x = 0; x <= kMaxArrivedPct; ++x) {
      const double u = r.UnallocatedAt(x);
      if (std::isnan(u)) continue;
      o << (first ? "" : ", ") << "\"" << x << "\": " << Fixed(u, 4);
      first = false;
    }
    o << "}}";
  }
  o << "\n  ]";
  if (!bounds.empty()) {
    const Summary b = SummarizeBound(bounds);
    o << ",\n  \"bound\": {\"mean\": " << Fixed(b.mean, 4) << ", \"sd\": " << Fixed(b.sd, 4)
      << ", \"per_seed\": [";
    for (size_t i = 0; i < bounds.size(); ++i)
      o << (i ? "," : "") << "\n    {\"seed\": " << bounds[i].seed
        << ", \"unallocated_pct\": " << Fixed(bounds[i].bound.unallocated_pct, 4)
        << ", \"packable_pct\": " << Fixed(bounds[i].bound.packable_pct, 4)
        << ", \"events\": " << bounds[i].bound.events << "}";
    o << "\n  ]}";
  }
  o << "\n}\n";
  return o.str();
}

std::string Svg(const std::string& workload, const std::vector<ReplayResult>& results) {
  // Plot area: x = arrived 50…130 %, y = unallocated 0…50 % — where the strategies differ
  // (below 50% arrived every strategy allocates everything).
  constexpr int kX0 = 50, kX1 = 130, kY1 = 50;
  const double left = 60, top = 30, width = 640, height = 400;
  auto px = [&](double x) { return left + (x - kX0) / (kX1 - kX0) * width; };
  auto py = [&](double y) { return top + (1.0 - y / kY1) * height; };
  static const char* kColors[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                  "#8c564b", "#e377c2", "#000000", "#7f7f7f", "#bcbd22"};
  std::ostringstream o;
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"860\" height=\"480\" "
       "font-family=\"sans-serif\" font-size=\"12\">\n";
  o << "<rect width=\"860\" height=\"480\" fill=\"white\"/>\n";
  o << "<text x=\"" << left << "\" y=\"18\">Unallocated GPU % vs arrived GPU % — " << workload
    << " (mean over seeds)</text>\n";
  for (int x = kX0; x <= kX1; x += 10) {
    o << "<line x1=\"" << px(x) << "\" y1=\"" << top << "\" x2=\"" << px(x) << "\" y2=\""
      << top + height << "\" stroke=\"#eee\"/><text x=\"" << px(x) - 8 << "\" y=\""
      << top + height + 16 << "\">" << x << "</text>\n";
  }
  for (int y = 0; y <= kY1; y += 5) {
    o << "<line x1=\"" << left << "\" y1=\"" << py(y) << "\" x2=\"" << left + width << "\" y2=\""
      << py(y) << "\" stroke=\"#eee\"/><text x=\"" << left - 28 << "\" y=\"" << py(y) + 4 << "\">"
      << y << "</text>\n";
  }
  o << "<text x=\"" << left + width / 2 - 60 << "\" y=\"" << top + height + 34
    << "\">arrived GPU request (% of capacity)</text>\n";
  o << "<text transform=\"translate(16," << top + height / 2 + 60
    << ") rotate(-90)\">unallocated GPU %</text>\n";
  int legend = 0;
  for (Strategy s : AllStrategies()) {
    const std::vector<double> curve = MeanCurve(s, results);
    std::ostringstream pts;
    for (int x = kX0; x <= kX1; ++x)
      if (!std::isnan(curve[static_cast<size_t>(x)]) && curve[static_cast<size_t>(x)] <= kY1)
        pts << Fixed(px(x), 1) << "," << Fixed(py(curve[static_cast<size_t>(x)]), 1) << " ";
    if (pts.str().empty()) continue;
    const char* color = kColors[legend % 10];
    o << "<polyline fill=\"none\" stroke=\"" << color << "\" stroke-width=\"1.5\" points=\""
      << pts.str() << "\"/>\n";
    o << "<text x=\"" << left + width + 12 << "\" y=\"" << top + 14 + 16 * legend << "\" fill=\""
      << color << "\">" << StrategyName(s) << " (" << Fixed(curve[100], 2) << "% at 100)</text>\n";
    ++legend;
  }
  o << "</svg>\n";
  return o.str();
}

}  // namespace gpupool::placement::sim
