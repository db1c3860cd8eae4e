// TwinReport as an SVG line chart (report.h), written by hand: allocation, demand and
// fragmentation in percent on the left axis, queue depth on the right, simulated hours below.
#include <algorithm>
#include <cstdio>
#include <sstream>

#include "twin/report.h"

namespace gpupool::twin {
namespace {

constexpr double kW = 960, kH = 420, kLeft = 60, kRight = 70, kTop = 40, kBottom = 50;

std::string F(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

std::string Escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '<')
      out += "&lt;";
    else if (c == '>')
      out += "&gt;";
    else if (c == '&')
      out += "&amp;";
    else
      out += c;
  }
  return out;
}

struct Scale {
  double t_max = 1, pct_max = 100, queue_max = 1;
  double X(double t) const { return kLeft + (kW - kLeft - kRight) * t / t_max; }
  double YPct(double p) const { return kH - kBottom - (kH - kTop - kBottom) * p / pct_max; }
  double YQueue(double q) const { return kH - kBottom - (kH - kTop - kBottom) * q / queue_max; }
};

template <typename Get>
void Line(std::ostringstream& o, const TwinReport& r, const Scale& s, const char* color, bool dash,
          Get y) {
  o << "<polyline fill=\"none\" stroke=\"" << color << "\" stroke-width=\"1.5\""
    << (dash ? " stroke-dasharray=\"6,3\"" : "") << " points=\"";
  for (const SeriesPoint& p : r.series) o << F(s.X(p.t_s / 3600)) << "," << F(y(p)) << " ";
  o << "\"/>\n";
}

}  // namespace

std::string ToSvg(const TwinReport& a, const TwinReport* b) {
  Scale s;
  double pct = 100, queue = 1;
  for (const TwinReport* r : {&a, b}) {
    if (r == nullptr) continue;
    s.t_max = std::max(s.t_max, r->horizon_s / 3600);
    for (const SeriesPoint& p : r->series) {
      pct = std::max({pct, p.alloc_pct, p.demand_pct});
      queue = std::max(queue, static_cast<double>(p.queue_depth));
    }
  }
  s.pct_max = std::min(400.0, pct * 1.05);
  s.queue_max = queue * 1.1;
  std::ostringstream o;
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << kW << "\" height=\"" << kH
    << "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  o << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  std::string title = "gpupool-twin: " + a.workload + ", " + a.label + " (" + a.strategy + ")";
  if (b != nullptr) title += " vs " + b->label + " (" + b->strategy + ", dashed)";
  o << "<text x=\"" << kLeft << "\" y=\"22\" font-size=\"14\">" << Escape(title) << "</text>\n";
  // Axes and grid.
  const double x0 = kLeft, x1 = kW - kRight, y0 = kH - kBottom, y1 = kTop;
  o << "<g stroke=\"#ccc\">\n";
  for (int i = 0; i <= 5; ++i) {
    double p = s.pct_max * i / 5, y = s.YPct(p);
    o << "<line x1=\"" << x0 << "\" x2=\"" << x1 << "\" y1=\"" << F(y) << "\" y2=\"" << F(y)
      << "\"/>\n";
  }
  o << "</g>\n<g fill=\"#333\">\n";
  for (int i = 0; i <= 5; ++i) {
    double p = s.pct_max * i / 5, y = s.YPct(p);
    o << "<text x=\"" << x0 - 6 << "\" y=\"" << F(y + 4) << "\" text-anchor=\"end\">" << F(p)
      << "%</text>\n";
    double q = s.queue_max * i / 5;
    o << "<text x=\"" << x1 + 6 << "\" y=\"" << F(s.YQueue(q) + 4) << "\">" << F(q) << "</text>\n";
  }
  for (int i = 0; i <= 6; ++i) {
    double t = s.t_max * i / 6;
    o << "<text x=\"" << F(s.X(t)) << "\" y=\"" << y0 + 18 << "\" text-anchor=\"middle\">" << F(t)
      << "</text>\n";
  }
  o << "<text x=\"" << (x0 + x1) / 2 << "\" y=\"" << kH - 12
    << "\" text-anchor=\"middle\">simulated time (h)</text>\n";
  o << "<text x=\"" << x1 + 50 << "\" y=\"" << (y0 + y1) / 2 << "\" transform=\"rotate(90 "
    << x1 + 50 << " " << (y0 + y1) / 2 << ")\" text-anchor=\"middle\">queue depth (tasks)</text>\n";
  o << "</g>\n";
  o << "<rect x=\"" << x0 << "\" y=\"" << y1 << "\" width=\"" << x1 - x0 << "\" height=\""
    << y0 - y1 << "\" fill=\"none\" stroke=\"#333\"/>\n";
  for (const TwinReport* r : {&a, b}) {
    if (r == nullptr) continue;
    bool dash = r == b;
    Line(o, *r, s, "#2b6cb0", dash,
         [&](const SeriesPoint& p) { return s.YPct(std::min(p.alloc_pct, s.pct_max)); });
    Line(o, *r, s, "#a0aec0", dash,
         [&](const SeriesPoint& p) { return s.YPct(std::min(p.demand_pct, s.pct_max)); });
    Line(o, *r, s, "#dd6b20", dash,
         [&](const SeriesPoint& p) { return s.YPct(std::min(p.frag_pct, s.pct_max)); });
    Line(o, *r, s, "#38a169", dash,
         [&](const SeriesPoint& p) { return s.YQueue(static_cast<double>(p.queue_depth)); });
  }
  // Legend.
  struct Entry {
    const char* color;
    const char* name;
  };
  const Entry legend[] = {{"#2b6cb0", "GPU allocation %"},
                          {"#a0aec0", "demand % (running + waiting)"},
                          {"#dd6b20", "fragmentation %"},
                          {"#38a169", "queue depth (right axis)"}};
  double lx = x0 + 10;
  for (const Entry& e : legend) {
    o << "<line x1=\"" << lx << "\" x2=\"" << lx + 20 << "\" y1=\"" << y1 + 14 << "\" y2=\""
      << y1 + 14 << "\" stroke=\"" << e.color << "\" stroke-width=\"2\"/>\n";
    o << "<text x=\"" << lx + 25 << "\" y=\"" << y1 + 18 << "\">" << e.name << "</text>\n";
    lx += 210;
  }
  o << "</svg>\n";
  return o.str();
}

}  // namespace gpupool::twin
