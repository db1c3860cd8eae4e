#include "placement/sim/bound.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <set>
#include <tuple>

#include "placement/sim/lp.h"

namespace gpupool::placement::sim {
namespace {

constexpr int32_t kGpuMilli = 1000;

bool Allowed(const std::string& spec, const std::string& model) {
  if (spec.empty()) return true;
  size_t start = 0;
  while (start <= spec.size()) {
    size_t end = spec.find('|', start);
    if (end == std::string::npos) end = spec.size();
    if (spec.compare(start, end - start, model) == 0) return true;
    start = end + 1;
  }
  return false;
}

// One node type's best (relaxed) set for given duals: π_t and how many of each class.
struct TypeSolution {
  double pi = 0;            // π_t (CPU and memory prices included)
  std::vector<int> count;   // per class, in the maximising set (the LP column it makes)
  double cpu = 0, mem = 0;  // CPU and memory that set uses
};

// The GPU-feasible maximum of Σ v over one node of `type` (see bound.h), v_j = w_j − prices.
class TypeSolver {
 public:
  TypeSolver(const PackingInstance& in, size_t t) : in_(in), type_(in.types[t]) {
    int32_t unit = kGpuMilli;
    for (size_t j = 0; j < in.classes.size(); ++j) {
      const PackingClass& c = in.classes[j];
      if (c.num_gpu < 1 || c.num_gpu > type_.gpus || c.cpu_milli > type_.cpu_milli ||
          c.memory_mib > type_.memory_mib || !Allowed(c.gpu_spec, type_.model) ||
          c.gpu_milli <= 0 || c.gpu_milli > kGpuMilli)
        continue;
      eligible_.push_back(j);
      unit = std::gcd(unit, c.gpu_milli);
    }
    unit_ = unit;
    units_ = kGpuMilli / unit;
  }

  void Solve(const PackingDual& d, size_t t, TypeSolution* out) const {
    const double beta = d.cpu_price[t] / std::max<int64_t>(type_.cpu_milli, 1);
    const double gamma = d.mem_price[t] / std::max<int64_t>(type_.memory_mib, 1);
    // Per size (in units) the best single-GPU class; whole 1-GPU tasks are size `units_`.
    std::vector<double> val(static_cast<size_t>(units_) + 1, 0);
    std::vector<int> arg(static_cast<size_t>(units_) + 1, -1);
    struct Multi {
      int k;
      double v;
      int j;
    };
    std::vector<Multi> multi;
    for (size_t j : eligible_) {
      const PackingClass& c = in_.classes[j];
      if (c.count <= 0) continue;
      const double v = std::max(0.0, d.w[j]) - beta * static_cast<double>(c.cpu_milli) -
                       gamma * static_cast<double>(c.memory_mib);
      if (v <= 0) continue;
      if (c.num_gpu == 1) {
        const size_t s = static_cast<size_t>(c.gpu_milli / unit_);
        if (arg[s] < 0 || v > val[s]) val[s] = v, arg[s] = static_cast<int>(j);
      } else {
        multi.push_back(Multi{c.num_gpu, v, static_cast<int>(j)});
      }
    }
    // Unbounded knapsack of one GPU; choice[u] = size taken last (0: a unit left empty).
    std::vector<double> best(static_cast<size_t>(units_) + 1, 0);
    std::vector<int> choice(static_cast<size_t>(units_) + 1, 0);
    for (int u = 1; u <= units_; ++u) {
      best[static_cast<size_t>(u)] = best[static_cast<size_t>(u - 1)];
      for (int s = 1; s <= u; ++s) {
        if (arg[static_cast<size_t>(s)] < 0) continue;
        const double b = best[static_cast<size_t>(u - s)] + val[static_cast<size_t>(s)];
        if (b > best[static_cast<size_t>(u)])
          best[static_cast<size_t>(u)] = b, choice[static_cast<size_t>(u)] = s;
      }
    }
    const double per_gpu = best[static_cast<size_t>(units_)];
    // The node's GPUs: each alone (per_gpu) or k of them for a k-GPU task.
    const size_t g = static_cast<size_t>(type_.gpus);
    std::vector<double> node(g + 1, 0);
    std::vector<int> pick(g + 1, -1);  // −1: one GPU alone; else index into multi
    for (size_t i = 1; i <= g; ++i) {
      node[i] = node[i - 1] + per_gpu;
      for (size_t m = 0; m < multi.size(); ++m) {
        const size_t k = static_cast<size_t>(multi[m].k);
        if (k <= i && node[i - k] + multi[m].v > node[i])
          node[i] = node[i - k] + multi[m].v, pick[i] = static_cast<int>(m);
      }
    }
    out->pi = d.cpu_price[t] + d.mem_price[t] + node[g];
    out->count.assign(in_.classes.size(), 0);
    int alone = 0;
    for (size_t i = g; i > 0;) {
      if (pick[i] < 0) {
        ++alone;
        --i;
      } else {
        const Multi& m = multi[static_cast<size_t>(pick[i])];
        ++out->count[static_cast<size_t>(m.j)];
        i -= static_cast<size_t>(m.k);
      }
    }
    for (int u = units_; u > 0 && alone > 0;) {
      const int s = choice[static_cast<size_t>(u)];
      if (s == 0) {
        --u;
        continue;
      }
      out->count[static_cast<size_t>(arg[static_cast<size_t>(s)])] += alone;
      u -= s;
    }
    out->cpu = out->mem = 0;
    for (size_t j : eligible_) {
      out->cpu += out->count[j] * static_cast<double>(in_.classes[j].cpu_milli);
      out->mem += out->count[j] * static_cast<double>(in_.classes[j].memory_mib);
    }
  }

 private:
  const PackingInstance& in_;
  const PackingNodeType& type_;
  std::vector<size_t> eligible_;
  int32_t unit_ = 1;
  int units_ = kGpuMilli;
};

double Bound(const PackingInstance& in, const PackingDual& d,
             const std::vector<TypeSolver>& solvers, std::vector<TypeSolution>* sol) {
  double ub = 0;
  for (size_t t = 0; t < in.types.size(); ++t) {
    solvers[t].Solve(d, t, &(*sol)[t]);
    ub += static_cast<double>(in.types[t].count) * (*sol)[t].pi;
  }
  for (size_t j = 0; j < in.classes.size(); ++j)
    ub += static_cast<double>(in.classes[j].count) *
          std::max(0.0, static_cast<double>(in.classes[j].Demand()) - std::max(0.0, d.w[j]));
  return ub;
}

// Host memory rounded down to a power of two: classes merge (fewer LP rows) and the bound stays
// valid, since a task needing less memory only makes more packings possible.
int64_t MemoryKey(int64_t mib) {
  if (mib <= 0) return 0;
  int64_t p = 1;
  while (p <= mib / 2) p *= 2;
  return p;
}

std::vector<TypeSolver> Solvers(const PackingInstance& in) {
  std::vector<TypeSolver> s;
  for (size_t t = 0; t < in.types.size(); ++t) s.emplace_back(in, t);
  return s;
}

}  // namespace

PackingInstance MakeInstance(const std::vector<TraceNode>& nodes,
                             const std::vector<TraceTask>& tasks) {
  PackingInstance in;
  std::map<std::tuple<int64_t, int64_t, int, std::string>, size_t> types;
  for (const TraceNode& n : nodes) {
    if (n.gpus <= 0) continue;
    auto [it, added] =
        types.try_emplace(std::tuple{n.cpu_milli, n.memory_mib, n.gpus, n.model}, in.types.size());
    if (added) in.types.push_back(PackingNodeType{0, n.cpu_milli, n.memory_mib, n.gpus, n.model});
    ++in.types[it->second].count;
  }
  std::map<std::tuple<int64_t, int64_t, int, int32_t, std::string>, size_t> classes;
  for (const TraceTask& t : tasks) {
    if (t.GpuMilli() <= 0) continue;
    auto [it, added] = classes.try_emplace(
        std::tuple{t.cpu_milli, MemoryKey(t.memory_mib), t.num_gpu, t.gpu_milli, t.gpu_spec},
        in.classes.size());
    if (added)
      in.classes.push_back(PackingClass{0, t.cpu_milli, MemoryKey(t.memory_mib), t.num_gpu,
                                        t.gpu_milli, t.gpu_spec});
  }
  return in;
}

std::vector<int> ClassOf(const PackingInstance& in, const std::vector<TraceTask>& tasks) {
  std::map<std::tuple<int64_t, int64_t, int, int32_t, std::string>, int> index;
  for (size_t j = 0; j < in.classes.size(); ++j) {
    const PackingClass& c = in.classes[j];
    index.emplace(std::tuple{c.cpu_milli, c.memory_mib, c.num_gpu, c.gpu_milli, c.gpu_spec},
                  static_cast<int>(j));
  }
  std::vector<int> out;
  out.reserve(tasks.size());
  for (const TraceTask& t : tasks) {
    auto it = index.find(
        std::tuple{t.cpu_milli, MemoryKey(t.memory_mib), t.num_gpu, t.gpu_milli, t.gpu_spec});
    out.push_back(t.GpuMilli() > 0 && it != index.end() ? it->second : -1);
  }
  return out;
}

PackingDual StartDual(const PackingInstance& in) {
  PackingDual d;
  for (const PackingClass& c : in.classes) d.w.push_back(static_cast<double>(c.Demand()));
  d.cpu_price.assign(in.types.size(), 0);
  d.mem_price.assign(in.types.size(), 0);
  return d;
}

double DualBound(const PackingInstance& in, const PackingDual& d) {
  std::vector<TypeSolution> sol(in.types.size());
  PackingDual clean = d;
  for (double& p : clean.cpu_price) p = std::max(0.0, p);
  for (double& p : clean.mem_price) p = std::max(0.0, p);
  return Bound(in, clean, Solvers(in), &sol);
}

namespace {

// The configuration LP (the primal of the certificate), solved by column generation:
//   max Σ_j s_j z_j  s.t.  z_j ≤ Σ_c a_cj y_c (row j),  Σ_{c of t} y_c ≤ m_t,
//   Σ_{c of t} cpu(c)/cpu_t · y_c ≤ m_t,  Σ_{c of t} mem(c)/mem_t · y_c ≤ m_t,  0 ≤ z_j ≤ n_j.
// Its duals are w_j (row j), π'_t and the CPU and memory prices of type t; a type's best set
// for those duals (TypeSolver) is the column to add while its value exceeds π'_t.
class ColumnGeneration {
 public:
  explicit ColumnGeneration(const PackingInstance& in) : in_(in), solvers_(Solvers(in)) {
    const size_t nc = in.classes.size(), nt = in.types.size();
    for (size_t j = 0; j < nc; ++j) lp_.AddRow(0);
    for (size_t t = 0; t < nt; ++t)
      for (int k = 0; k < 3; ++k) lp_.AddRow(static_cast<double>(in.types[t].count));
    for (size_t j = 0; j < nc; ++j)
      z_.push_back(lp_.AddColumn(static_cast<double>(in.classes[j].Demand()) / kGpuMilli, 0,
                                 {{static_cast<int>(j), 1.0}}));
  }

  // Solves for the current class counts; the dual found goes to *dual.
  double Solve(PackingDual* dual) {
    const size_t nc = in_.classes.size(), nt = in_.types.size();
    for (size_t j = 0; j < nc; ++j) lp_.SetUpper(z_[j], static_cast<double>(in_.classes[j].count));
    *dual = StartDual(in_);
    std::vector<TypeSolution> sol(nt);
    for (int round = 0; round < 10000; ++round) {
      if (lp_.Solve() != Lp::Result::kOptimal) break;
      const std::vector<double> y = lp_.Duals();
      for (size_t j = 0; j < nc; ++j) dual->w[j] = std::max(0.0, y[j]) * kGpuMilli;
      for (size_t t = 0; t < nt; ++t) {
        dual->cpu_price[t] = std::max(0.0, y[nc + 3 * t + 1]) * kGpuMilli;
        dual->mem_price[t] = std::max(0.0, y[nc + 3 * t + 2]) * kGpuMilli;
      }
      bool added = false;
      for (size_t t = 0; t < nt; ++t) {
        solvers_[t].Solve(*dual, t, &sol[t]);
        const double value = sol[t].pi - dual->cpu_price[t] - dual->mem_price[t];
        if (value <= std::max(0.0, y[nc + 3 * t]) * kGpuMilli + 1e-6) continue;
        std::vector<int> key = sol[t].count;
        key.push_back(static_cast<int>(t));
        if (!seen_.insert(key).second) continue;  // already a column: numerical noise
        AddConfig(t, sol[t]);
        added = true;
      }
      if (!added) break;
    }
    return DualBound(in_, *dual);
  }

 private:
  void AddConfig(size_t t, const TypeSolution& s) {
    const size_t nc = in_.classes.size();
    const PackingNodeType& type = in_.types[t];
    std::vector<std::pair<int, double>> e;
    for (size_t j = 0; j < nc; ++j)
      if (s.count[j] > 0) e.emplace_back(static_cast<int>(j), -static_cast<double>(s.count[j]));
    const int row = static_cast<int>(nc + 3 * t);
    e.emplace_back(row, 1.0);
    if (s.cpu > 0) e.emplace_back(row + 1, s.cpu / static_cast<double>(type.cpu_milli));
    if (s.mem > 0) e.emplace_back(row + 2, s.mem / static_cast<double>(type.memory_mib));
    lp_.AddColumn(0, Lp::kInf, std::move(e));
  }

  const PackingInstance& in_;
  std::vector<TypeSolver> solvers_;
  Lp lp_;
  std::vector<int> z_;
  std::set<std::vector<int>> seen_;
};

}  // namespace

double PackingUpperBound(const PackingInstance& in, PackingDual* dual) {
  double demand = 0;
  for (const PackingClass& c : in.classes)
    demand += static_cast<double>(c.count) * static_cast<double>(c.Demand());
  ColumnGeneration cg(in);
  return std::min(cg.Solve(dual), demand);
}

MetricBound UnallocatedLowerBound(const std::vector<TraceNode>& nodes,
                                  const std::vector<TraceTask>& arrivals, int x, int stride) {
  MetricBound out;
  int64_t capacity = 0;
  for (const TraceNode& n : nodes) capacity += int64_t{kGpuMilli} * n.gpus;
  if (capacity <= 0) return out;
  // The bin's events: after task i, round(100 × arrived / capacity) = x.
  std::vector<size_t> events;
  std::vector<int64_t> arrived_at;
  int64_t arrived = 0;
  for (size_t i = 0; i < arrivals.size(); ++i) {
    arrived += arrivals[i].GpuMilli();
    const long b =
        std::lround(100.0 * static_cast<double>(arrived) / static_cast<double>(capacity));
    if (b == x) events.push_back(i), arrived_at.push_back(arrived);
    if (b > x) break;
  }
  out.events = static_cast<int>(events.size());
  if (events.empty()) return out;
  PackingInstance in = MakeInstance(nodes, arrivals);
  const std::vector<int> cls = ClassOf(in, arrivals);
  // Checkpoints: every `stride`-th event and the last; UB of each prefix (columns carried over).
  std::vector<size_t> checkpoints;
  for (size_t e = 0; e < events.size(); e += static_cast<size_t>(std::max(stride, 1)))
    checkpoints.push_back(e);
  if (checkpoints.back() != events.size() - 1) checkpoints.push_back(events.size() - 1);
  std::vector<double> ub(checkpoints.size());
  ColumnGeneration cg(in);
  PackingDual dual;
  size_t counted = 0;
  for (size_t c = 0; c < checkpoints.size(); ++c) {
    double demand = 0;
    for (; counted <= events[checkpoints[c]]; ++counted)
      if (cls[counted] >= 0) ++in.classes[static_cast<size_t>(cls[counted])].count;
    for (const PackingClass& k : in.classes)
      demand += static_cast<double>(k.count) * static_cast<double>(k.Demand());
    // One milli-GPU of margin covers the floating-point sums (≈10⁻⁶ milli at this scale).
    ub[c] = std::min(cg.Solve(&dual) + 1.0, demand);
  }
  out.packable_pct = 100.0 * ub.back() / static_cast<double>(capacity);
  double sum = 0;
  for (size_t e = 0; e < events.size(); ++e) {
    double alloc = static_cast<double>(arrived_at[e]);
    for (size_t c = 0; c < checkpoints.size(); ++c) {
      const size_t ce = checkpoints[c];
      if (ce >= e) alloc = std::min(alloc, ub[c]);
      if (ce <= e)
        alloc = std::min(alloc, ub[c] + static_cast<double>(arrived_at[e] - arrived_at[ce]));
    }
    sum += 100.0 * alloc / static_cast<double>(capacity);
  }
  out.unallocated_pct = 100.0 - sum / static_cast<double>(events.size());
  return out;
}

}  // namespace gpupool::placement::sim
