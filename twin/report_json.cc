// TwinReport as JSON (report.h). A small writer of our own: the report is flat numbers, maps
// and arrays, and its key order is fixed so two runs diff cleanly.
#include <cmath>
#include <cstdio>
#include <sstream>

#include "twin/report.h"

namespace gpupool::twin {
namespace {

std::string Num(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4f", v);
  std::string s = buf;
  while (s.find('.') != std::string::npos && (s.back() == '0' || s.back() == '.')) {
    bool dot = s.back() == '.';
    s.pop_back();
    if (dot) break;
  }
  return s;
}

std::string Str(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string Wait(const WaitStats& w) {
  return "{\"count\": " + std::to_string(w.count) +
         ", \"never_started\": " + std::to_string(w.never_started) + ", \"p50\": " + Num(w.p50) +
         ", \"p99\": " + Num(w.p99) + ", \"max\": " + Num(w.max) + ", \"mean\": " + Num(w.mean) +
         "}";
}

std::string WaitMap(const std::map<std::string, WaitStats>& m, const std::string& indent) {
  std::string out = "{";
  bool first = true;
  for (const auto& [k, w] : m) {
    out += (first ? "\n" : ",\n") + indent + "  " + Str(k) + ": {\"wait_s\": " + Wait(w) + "}";
    first = false;
  }
  return out + (first ? "}" : "\n" + indent + "}");
}

}  // namespace

std::string ToJson(const TwinReport& r) {
  std::ostringstream o;
  o << "{\n";
  o << "  \"label\": " << Str(r.label) << ",\n";
  o << "  \"workload\": " << Str(r.workload) << ",\n";
  o << "  \"strategy\": " << Str(r.strategy) << ",\n";
  o << "  \"queue_order\": " << Str(r.queue_order) << ",\n";
  o << "  \"preemption\": " << (r.preemption ? "true" : "false") << ",\n";
  o << "  \"preempted_tasks_resume\": " << (r.resume_remaining ? "true" : "false") << ",\n";
  o << "  \"nodes\": " << r.nodes << ",\n  \"gpus\": " << r.gpus << ",\n";
  o << "  \"tasks\": " << r.tasks << ",\n  \"skipped_cpu_only\": " << r.skipped_cpu_only << ",\n";
  o << "  \"rejected\": " << r.rejected << ",\n";
  o << "  \"mig_relayout\": " << Str(r.mig_relayout) << ",\n";
  o << "  \"mig_relayouts\": " << r.mig_relayouts << ",\n";
  o << "  \"horizon_s\": " << Num(r.horizon_s) << ",\n  \"warmup_s\": " << Num(r.warmup_s) << ",\n";
  o << "  \"time_avg_gpu_allocation_pct\": " << Num(r.time_avg_gpu_allocation_pct) << ",\n";
  o << "  \"time_avg_gpu_allocation_offered_pct\": " << Num(r.time_avg_gpu_allocation_offered_pct)
    << ",\n";
  o << "  \"time_avg_demand_pct\": " << Num(r.time_avg_demand_pct) << ",\n";
  o << "  \"time_avg_frag_pct\": " << Num(r.time_avg_frag_pct) << ",\n";
  o << "  \"time_avg_queue_depth\": " << Num(r.time_avg_queue_depth) << ",\n";
  o << "  \"classes\": " << WaitMap(r.wait_by_class, "  ") << ",\n";
  o << "  \"requeued_classes\": " << WaitMap(r.requeue_wait_by_class, "  ") << ",\n";
  o << "  \"leaf_tenants\": " << WaitMap(r.wait_by_tenant, "  ") << ",\n";
  o << "  \"preemptions\": " << r.preemptions << ",\n";
  o << "  \"lost_gpu_s\": " << Num(r.lost_gpu_s) << ",\n";
  o << "  \"tasks_preempted_twice_or_more\": " << r.tasks_preempted_twice_or_more << ",\n";
  o << "  \"max_preemptions_of_a_task\": " << r.max_preemptions_of_a_task << ",\n";
  o << "  \"preempted_before_min_runtime\": " << r.preempted_before_min_runtime << ",\n";
  o << "  \"repreempted_within_min_runtime\": " << r.repreempted_within_min_runtime << ",\n";
  o << "  \"quota_violations\": " << r.quota_violations << ",\n";
  o << "  \"overallocated_devices\": " << r.overallocated_devices << ",\n";
  o << "  \"tenants\": [";
  for (size_t i = 0; i < r.tenants.size(); ++i) {
    const TenantReport& t = r.tenants[i];
    o << (i ? ",\n" : "\n") << "    {\"tenant\": " << Str(t.tenant)
      << ", \"guaranteed_gpus\": " << Num(t.guaranteed_gpus)
      << ", \"limit_gpus\": " << Num(t.limit_gpus)
      << ", \"time_avg_gpus\": " << Num(t.time_avg_gpus) << ", \"wait_s\": " << Wait(t.wait)
      << ", \"samples_with_waiting\": " << t.samples_with_waiting
      << ", \"below_guarantee_samples\": " << t.below_guarantee_samples
      << ", \"below_guarantee_s\": " << Num(t.below_guarantee_s) << ",\n     \"share\": [";
    for (size_t k = 0; k < t.share.size(); ++k)
      o << (k ? ", " : "") << "[" << Num(t.share[k].first) << ", " << Num(t.share[k].second) << "]";
    o << "]}";
  }
  o << (r.tenants.empty() ? "],\n" : "\n  ],\n");
  o << "  \"series\": {\"t_s\": [";
  auto column = [&](auto get) {
    for (size_t i = 0; i < r.series.size(); ++i) o << (i ? ", " : "") << get(r.series[i]);
  };
  column([](const SeriesPoint& p) { return Num(p.t_s); });
  o << "],\n    \"alloc_pct\": [";
  column([](const SeriesPoint& p) { return Num(p.alloc_pct); });
  o << "],\n    \"frag_pct\": [";
  column([](const SeriesPoint& p) { return Num(p.frag_pct); });
  o << "],\n    \"demand_pct\": [";
  column([](const SeriesPoint& p) { return Num(p.demand_pct); });
  o << "],\n    \"queue_depth\": [";
  column([](const SeriesPoint& p) { return std::to_string(p.queue_depth); });
  o << "]},\n";
  o << "  \"events\": " << r.events << ",\n";
  o << "  \"wall_s\": " << Num(r.wall_s) << ",\n";
  o << "  \"cpu_s\": " << Num(r.cpu_s) << ",\n";
  o << "  \"speedup_vs_real_time\": " << Num(r.speedup) << "\n";
  o << "}\n";
  return o.str();
}

std::string WhatIfJson(const TwinReport& a, const TwinReport& b) {
  auto indent = [](std::string s) {
    std::string out;
    for (char c : s) {
      out += c;
      if (c == '\n') out += "  ";
    }
    while (!out.empty() && (out.back() == ' ' || out.back() == '\n')) out.pop_back();
    return out;
  };
  auto p99 = [](const TwinReport& r, const std::string& cls) {
    auto it = r.wait_by_class.find(cls);
    return it == r.wait_by_class.end() ? 0.0 : it->second.p99;
  };
  std::ostringstream o;
  o << "{\n  \"baseline\": " << indent(ToJson(a)) << ",\n  \"candidate\": " << indent(ToJson(b))
    << ",\n  \"delta\": {\n";
  o << "    \"time_avg_gpu_allocation_pct\": "
    << Num(b.time_avg_gpu_allocation_pct - a.time_avg_gpu_allocation_pct) << ",\n";
  o << "    \"time_avg_frag_pct\": " << Num(b.time_avg_frag_pct - a.time_avg_frag_pct) << ",\n";
  o << "    \"preemptions\": " << (b.preemptions - a.preemptions) << ",\n";
  o << "    \"lost_gpu_s\": " << Num(b.lost_gpu_s - a.lost_gpu_s) << ",\n";
  o << "    \"wait_p99_s\": {";
  bool first = true;
  for (const auto& [cls, _] : a.wait_by_class) {
    o << (first ? "" : ", ") << Str(cls) << ": " << Num(p99(b, cls) - p99(a, cls));
    first = false;
  }
  o << "}\n  }\n}\n";
  return o.str();
}

}  // namespace gpupool::twin
