#include "placement/sim/bound.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <numeric>
#include <set>
#include <string>
#include <tuple>

#include "placement/sim/forced.h"
#include "placement/sim/lp.h"

namespace gpupool::placement::sim {
namespace {

constexpr int32_t kGpuMilli = 1000;
// The LP's bonus per forced task, in GPUs: more than a whole 8-GPU node, so dropping a forced
// task never pays for whatever it would free.
constexpr double kForcedBonus = 16;

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
      if (c.cpu_milli > type_.cpu_milli || c.memory_mib > type_.memory_mib) continue;
      if (c.num_gpu == 0) {  // CPU-only: as many as the node's CPU and memory allow alone
        if (c.cpu_milli > 0 || c.memory_mib > 0) eligible_.push_back(j);
        continue;
      }
      if (c.num_gpu > type_.gpus || !SpecAllowsModel(c.gpu_spec, type_.model) || c.gpu_milli <= 0 ||
          c.gpu_milli > kGpuMilli)
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
    std::vector<double> value(in_.classes.size(), 0);
    for (size_t j : eligible_) {
      const PackingClass& c = in_.classes[j];
      value[j] = std::max(0.0, d.w[j]) - beta * static_cast<double>(c.cpu_milli) -
                 gamma * static_cast<double>(c.memory_mib);
    }
    out->pi = d.cpu_price[t] + d.mem_price[t] + Best(value, out);
  }

  // The largest Σ value over GPU-feasible sets of one node (CPU-only classes each as many as the
  // node holds alone; classes of count 0 left out), with the set in *out (count, cpu, mem; pi
  // untouched). Any per-class values: the time-indexed LP adds its fill and residual prices.
  double Best(const std::vector<double>& value, TypeSolution* out) const {
    // Per size (in units) the best single-GPU class; whole 1-GPU tasks are size `units_`.
    std::vector<double> val(static_cast<size_t>(units_) + 1, 0);
    std::vector<int> arg(static_cast<size_t>(units_) + 1, -1);
    struct Multi {
      int k;
      double v;
      int j;
    };
    std::vector<Multi> multi;
    out->count.assign(in_.classes.size(), 0);
    double cpu_only = 0;  // CPU-only classes, each at the most the node holds of it alone
    for (size_t j : eligible_) {
      const PackingClass& c = in_.classes[j];
      if (c.count <= 0) continue;
      const double v = value[j];
      if (v <= 0) continue;
      if (c.num_gpu == 0) {
        int64_t most = INT64_MAX;
        if (c.cpu_milli > 0) most = std::min(most, type_.cpu_milli / c.cpu_milli);
        if (c.memory_mib > 0) most = std::min(most, type_.memory_mib / c.memory_mib);
        most = std::min<int64_t>(most, c.count);
        out->count[j] = static_cast<int>(most);
        cpu_only += v * static_cast<double>(most);
      } else if (c.num_gpu == 1) {
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
    const double best_value = node[g] + cpu_only;
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
    return best_value;
  }

 private:
  const PackingInstance& in_;
  const PackingNodeType& type_;
  std::vector<size_t> eligible_;
  int32_t unit_ = 1;
  int units_ = kGpuMilli;
};

// `ub` plus the certificate's class terms (bound.h, parts 1 and 2): Σ_j forced_j · (s_j − w_j) +
// (n_j − forced_j) · max(0, s_j − w_j), negative credits read as 0.
double PlusClassTerms(double ub, const std::vector<PackingClass>& classes,
                      const std::vector<double>& w) {
  double sum = ub;
  for (size_t j = 0; j < classes.size(); ++j) {
    const PackingClass& c = classes[j];
    const double gain = static_cast<double>(c.Demand()) - std::max(0.0, w[j]);
    sum += static_cast<double>(c.forced) * gain +
           static_cast<double>(c.count - c.forced) * std::max(0.0, gain);
  }
  return sum;
}

double Bound(const PackingInstance& in, const PackingDual& d,
             const std::vector<TypeSolver>& solvers, std::vector<TypeSolution>* sol) {
  double ub = 0;
  for (size_t t = 0; t < in.types.size(); ++t) {
    solvers[t].Solve(d, t, &(*sol)[t]);
    ub += static_cast<double>(in.types[t].count) * (*sol)[t].pi;
  }
  return PlusClassTerms(ub, in.classes, d.w);
}

// Host memory rounded down to a power of two: classes merge (fewer LP rows) and the bound stays
// valid, since a task needing less memory only makes more packings possible.
int64_t MemoryKey(int64_t mib) {
  if (mib <= 0) return 0;
  int64_t p = 1;
  while (p <= mib / 2) p *= 2;
  return p;
}

// CPU rounded down to two significant bits of whole cores (2, 3, 4, 6, 8, 12, 16, 24, … cores):
// at most a third below the need, where a power of two loses up to half. With `fine`, never by
// more than 2 cores (… 6, 8, 10, 12, 14, 16, 18 …): the level tried first, since where CPU is what
// runs out (cpu-scarce) every core a class loses is a core the LP can hand to a GPU task.
int64_t CpuKey(int64_t milli, bool fine) {
  const int64_t cores = milli / 1000;
  if (cores <= 0) return 0;
  int64_t step = std::max<int64_t>(MemoryKey(cores) / 2, 1);
  if (fine) step = std::min<int64_t>(step, 2);
  return cores / step * step * 1000;
}

// A task's class at a coarseness level: CPU, memory (rounded down), GPUs, share, models; CPU-only
// tasks (no GPU demand) are (cpu, memory, 0, 0, "") whatever their other fields say. Levels
// (MakeInstance picks the finest one with at most max_classes classes): 0 exact; 1 memory left
// out and CPU rounded down by at most 2 cores (CpuKey, fine); 2 CPU rounded down to two
// significant bits; 3 to a power of two; 4 CPU left out. (Memory left out with CPU exact is not a
// level: it saves few classes, and those it yields took the LP many minutes on cpu-scarce, 727.)
// Every level only lowers what a task needs and never its GPU demand (the value a packing
// counts), so every packing of the tasks is a packing of their classes worth as much: the bound
// stays valid, only looser.
std::tuple<int64_t, int64_t, int, int32_t, std::string> ClassKey(const TraceTask& t, int level,
                                                                 bool exact_memory) {
  const int64_t cpu = level >= 4   ? 0
                      : level == 3 ? MemoryKey(t.cpu_milli)
                      : level >= 1 ? CpuKey(t.cpu_milli, level == 1)
                                   : t.cpu_milli;
  const int64_t mem = level >= 1 ? 0 : exact_memory ? t.memory_mib : MemoryKey(t.memory_mib);
  if (t.GpuMilli() <= 0) return {cpu, mem, 0, 0, ""};
  return {cpu, mem, t.num_gpu, t.gpu_milli, t.gpu_spec};
}

constexpr int kCoarsest = 4;

std::vector<TypeSolver> Solvers(const PackingInstance& in) {
  std::vector<TypeSolver> s;
  for (size_t t = 0; t < in.types.size(); ++t) s.emplace_back(in, t);
  return s;
}

}  // namespace

PackingInstance MakeInstance(const std::vector<TraceNode>& nodes,
                             const std::vector<TraceTask>& tasks, size_t max_classes,
                             bool exact_memory) {
  PackingInstance in;
  std::map<std::tuple<int64_t, int64_t, int, std::string>, size_t> types;
  for (const TraceNode& n : nodes) {
    // CPU-only nodes are types too: a scenario that forces a CPU-only task into the packing must
    // be free to put it there rather than on a GPU node's CPU (leaving them out made the bound
    // unsound: small instances beat it by up to 25 points). Their GPUs and model are nil, so only
    // CPU-only classes are eligible on them (TypeSolver).
    const int gpus = std::max(n.gpus, 0);
    const std::string model = gpus > 0 ? n.model : "";
    auto [it, added] =
        types.try_emplace(std::tuple{n.cpu_milli, n.memory_mib, gpus, model}, in.types.size());
    if (added) in.types.push_back(PackingNodeType{0, n.cpu_milli, n.memory_mib, gpus, model});
    ++in.types[it->second].count;
  }
  if (exact_memory) {
    std::set<std::tuple<int64_t, int64_t, int, int32_t, std::string>> keys;
    for (const TraceTask& t : tasks) keys.insert(ClassKey(t, 0, true));
    in.exact_memory = keys.size() <= std::min(max_classes, kMaxExactMemoryClasses);
  }
  for (in.coarse = 0; !in.exact_memory; ++in.coarse) {
    std::set<std::tuple<int64_t, int64_t, int, int32_t, std::string>> keys;
    for (const TraceTask& t : tasks) keys.insert(ClassKey(t, in.coarse, false));
    if (keys.size() <= max_classes || in.coarse == kCoarsest) break;
  }
  std::map<std::tuple<int64_t, int64_t, int, int32_t, std::string>, size_t> classes;
  for (const TraceTask& t : tasks) {
    const auto key = ClassKey(t, in.coarse, in.exact_memory);
    if (std::get<0>(key) <= 0 && std::get<1>(key) <= 0 && std::get<2>(key) == 0) continue;
    auto [it, added] = classes.try_emplace(key, in.classes.size());
    if (added)
      in.classes.push_back(PackingClass{0, 0, std::get<0>(key), std::get<1>(key), std::get<2>(key),
                                        std::get<3>(key), std::get<4>(key)});
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
    auto it = index.find(ClassKey(t, in.coarse, in.exact_memory));
    out.push_back(it != index.end() ? it->second : -1);
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
    // Per class two columns on its row: the forced tasks, worth a bonus that makes the LP place
    // them first (so its optimum is the forced one's whenever that is feasible), and the rest.
    for (size_t j = 0; j < nc; ++j) {
      const double s = static_cast<double>(in.classes[j].Demand()) / kGpuMilli;
      forced_.push_back(lp_.AddColumn(s + kForcedBonus, 0, {{static_cast<int>(j), 1.0}}));
      z_.push_back(lp_.AddColumn(s, 0, {{static_cast<int>(j), 1.0}}));
    }
  }

  // Solves for the current class counts; the dual found goes to *dual.
  double Solve(PackingDual* dual, std::vector<double>* placed = nullptr) {
    const size_t nc = in_.classes.size(), nt = in_.types.size();
    for (size_t j = 0; j < nc; ++j) {
      const PackingClass& c = in_.classes[j];
      lp_.SetUpper(forced_[j], static_cast<double>(c.forced));
      lp_.SetUpper(z_[j], static_cast<double>(c.count - c.forced));
    }
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
    if (placed != nullptr) {
      placed->clear();
      for (size_t j = 0; j < nc; ++j) placed->push_back(lp_.Value(forced_[j]) + lp_.Value(z_[j]));
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
  std::vector<int> forced_, z_;
  std::set<std::vector<int>> seen_;
};

// The time-indexed LP of a first key drop T (bound.h, part 4). The classes come twice: copies
// [0, n) for the tasks that arrived before T's bucket ends ("before": they may count towards
// filling a node; tasks of the bucket after T get credit they do not have, which only loosens),
// copies [n, 2n) for the tasks after it. A node of a type that could host T when empty refused
// it, so at T it was full in one resource: mode 1 CPU, 2 memory, 3 GPUs (GPU keys only), each a
// row per node type in that mode
//   fill      (R − r + 1) · nodes − Σ before-copies' r  ≤ 0    (r exact in the classes), or
//   residual  Σ after-copies' r − (r − 1) · nodes        ≤ 0    (r rounded down: still true),
// R the node's CPU or memory and r the largest need of the scenario's keys (GPUs: below). Types
// that cannot host every candidate take mode 0 (no row). The columns are (mode, configuration)
// pairs; per mode CPU and memory rows Σ (use − capacity) ≤ 0, and per type Σ over its modes ≤
// m_t. The certificate (Certificate) is Σ_t m_t · max over t's modes of π_{t,k} + the class
// terms, each π_{t,k} the exact per-node maximum under the mode's prices: valid whatever the
// duals, since every node is in one mode and its tasks satisfy that mode's row.
// What the scenario knows of the dropped key T: at most this CPU and memory; its kind (0 CPU-only,
// 1 a share of at most `share` milli, 2 at most `whole` whole GPUs); the models every candidate
// allows (`any`, or the set).
struct TimedKey {
  int64_t cpu = 0, mem = 0;
  int kind = 0;
  int32_t share = 0;
  int whole = 0;
  bool any = true;
  std::set<std::string> models;

  auto Tie() const { return std::tie(cpu, mem, kind, share, whole, any, models); }
  bool operator<(const TimedKey& o) const { return Tie() < o.Tie(); }
};

class TimedColumnGeneration {
 public:
  TimedColumnGeneration(const PackingInstance& in, const TimedKey& key) : n_(in.classes.size()) {
    const int64_t key_cpu = key.cpu, key_mem = key.mem;
    in2_.types = in.types;
    in2_.coarse = in.coarse;
    in2_.exact_memory = in.exact_memory;
    in2_.classes = in.classes;
    in2_.classes.insert(in2_.classes.end(), in.classes.begin(), in.classes.end());
    solvers_ = Solvers(in2_);
    const bool cpu_exact = in.coarse == 0, mem_exact = in.coarse == 0 && in.exact_memory;
    for (size_t j = 0; j < 2 * n_; ++j) lp_.AddRow(0);
    for (size_t t = 0; t < in2_.types.size(); ++t) {
      const PackingNodeType& type = in2_.types[t];
      node_row_.push_back(lp_.AddRow(static_cast<double>(type.count)));
      // Types that could host every candidate for T when empty refused it, through one resource.
      bool hosts = type.cpu_milli >= key_cpu && type.memory_mib >= key_mem;
      if (key.kind != 0)
        hosts = hosts && type.gpus >= (key.kind == 1 ? 1 : key.whole) &&
                (key.any || key.models.count(type.model) != 0);
      const int last_kind = !hosts ? 0 : key.kind == 0 ? 2 : 3;
      for (int kind = hosts ? 1 : 0; kind <= last_kind; ++kind) {
        Mode m;
        m.type = t;
        m.kind = kind;
        m.key_kind = key.kind;
        m.row = lp_.AddRow(0);
        lp_.AddRow(0);
        if (kind != 0) lp_.AddRow(0);
        if (kind == 1) {
          m.fill = cpu_exact;
          m.scale = static_cast<double>(std::max<int64_t>(type.cpu_milli, 1));
          m.constant = m.fill ? static_cast<double>(type.cpu_milli - key_cpu + 1)
                              : -static_cast<double>(key_cpu - 1);
        } else if (kind == 2) {
          m.fill = mem_exact;
          m.scale = static_cast<double>(std::max<int64_t>(type.memory_mib, 1));
          m.constant = m.fill ? static_cast<double>(type.memory_mib - key_mem + 1)
                              : -static_cast<double>(key_mem - 1);
        } else if (kind == 3) {
          // GPUs (forced.h): a share s refused means every GPU holds more than 1000 − s, so
          // ≥ G·(1001 − s) milli before T; k whole GPUs refused means ≥ G − k + 1 GPUs touched,
          // and the tasks before T touch at most one GPU per share and k per k-GPU task. Both
          // counted exactly in the classes.
          m.fill = true;
          const double g = static_cast<double>(type.gpus);
          if (key.kind == 1) {
            m.scale = g * kGpuMilli;
            m.constant = g * (kGpuMilli + 1 - key.share);
          } else {
            m.scale = g;
            m.constant = g - key.whole + 1;
          }
        }
        modes_.push_back(m);
      }
    }
    for (size_t j = 0; j < 2 * n_; ++j) {
      const double s = static_cast<double>(in2_.classes[j].Demand()) / kGpuMilli;
      forced_.push_back(lp_.AddColumn(s + kForcedBonus, 0, {{static_cast<int>(j), 1.0}}));
      z_.push_back(lp_.AddColumn(s, 0, {{static_cast<int>(j), 1.0}}));
    }
  }

  // count/forced: per class copy (2n). Returns the certificate's bound (milli-GPU).
  double Solve(const std::vector<int64_t>& count, const std::vector<int64_t>& forced) {
    for (size_t j = 0; j < 2 * n_; ++j) {
      in2_.classes[j].count = count[j];
      in2_.classes[j].forced = forced[j];
      lp_.SetUpper(forced_[j], static_cast<double>(forced[j]));
      lp_.SetUpper(z_[j], static_cast<double>(count[j] - forced[j]));
    }
    // Every round's duals are a certificate (the prices computed for the columns give it at no
    // extra cost); the least is kept.
    double ub = Lp::kInf;
    TypeSolution sol;
    for (int round = 0; round < 10000; ++round) {
      if (lp_.Solve() != Lp::Result::kOptimal) break;
      const Duals d = Read(lp_.Duals());
      std::vector<double> pi(in2_.types.size(), -Lp::kInf);
      std::vector<std::pair<size_t, TypeSolution>> better;
      for (size_t k = 0; k < modes_.size(); ++k) {
        const double p = Price(d, k, &sol);
        pi[modes_[k].type] = std::max(pi[modes_[k].type], p);
        if (p > d.node[modes_[k].type] + 1e-6) better.emplace_back(k, sol);
      }
      ub = std::min(ub, Certificate(d, pi));
      bool added = false;
      for (auto& [k, s] : better) {
        std::vector<int> key = s.count;
        key.push_back(static_cast<int>(k));
        if (!seen_.insert(key).second) continue;
        AddConfig(k, s);
        added = true;
      }
      if (!added) break;
    }
    if (ub == Lp::kInf) {
      const Duals d = Read(std::vector<double>(static_cast<size_t>(lp_.rows()), 0));
      std::vector<double> pi(in2_.types.size(), -Lp::kInf);
      for (size_t k = 0; k < modes_.size(); ++k)
        pi[modes_[k].type] = std::max(pi[modes_[k].type], Price(d, k, &sol));
      ub = Certificate(d, pi);
    }
    return ub;
  }

 private:
  struct Mode {
    size_t type = 0;
    int kind = 0;      // 0 none, 1 CPU, 2 memory, 3 GPUs
    int key_kind = 0;  // TimedKey::kind
    int row = 0;       // CPU row; memory row + 1; mode row + 2
    bool fill = false;
    double scale = 1, constant = 0;
  };
  // Duals in milli-GPU: w per class copy, per mode the prices of a milli of CPU, a MiB, a unit of
  // the mode row (per unit of r), and per type the node row's.
  struct Duals {
    std::vector<double> w, beta, gamma, mu, node;
  };

  Duals Read(const std::vector<double>& y) const {
    Duals d;
    for (size_t j = 0; j < 2 * n_; ++j) d.w.push_back(std::max(0.0, y[j]) * kGpuMilli);
    for (const Mode& m : modes_) {
      const PackingNodeType& type = in2_.types[m.type];
      const auto at = [&](int r) { return std::max(0.0, y[static_cast<size_t>(r)]) * kGpuMilli; };
      d.beta.push_back(at(m.row) / static_cast<double>(std::max<int64_t>(type.cpu_milli, 1)));
      d.gamma.push_back(at(m.row + 1) / static_cast<double>(std::max<int64_t>(type.memory_mib, 1)));
      d.mu.push_back(m.kind != 0 ? at(m.row + 2) / m.scale : 0.0);
    }
    for (int r : node_row_) d.node.push_back(std::max(0.0, y[static_cast<size_t>(r)]) * kGpuMilli);
    return d;
  }

  // How much a task of copy j adds to the mode's row (per unit of r).
  double Coef(const Mode& m, size_t j) const {
    if (m.kind == 0) return 0;
    const PackingClass& c = in2_.classes[j];
    const bool before = j < n_;
    if (m.kind == 3) {
      if (!before || c.num_gpu == 0) return 0;
      return m.key_kind == 1 ? -static_cast<double>(c.Demand())
                             : -static_cast<double>(c.gpu_milli < kGpuMilli ? 1 : c.num_gpu);
    }
    const double r = static_cast<double>(m.kind == 1 ? c.cpu_milli : c.memory_mib);
    if (m.fill) return before ? -r : 0;
    return before ? 0 : r;
  }

  // π of mode k under d: the exact per-node maximum (TypeSolver::Best) plus the constants.
  double Price(const Duals& d, size_t k, TypeSolution* sol) const {
    const Mode& m = modes_[k];
    const PackingNodeType& type = in2_.types[m.type];
    std::vector<double> value(2 * n_);
    for (size_t j = 0; j < 2 * n_; ++j) {
      const PackingClass& c = in2_.classes[j];
      value[j] = d.w[j] - d.beta[k] * static_cast<double>(c.cpu_milli) -
                 d.gamma[k] * static_cast<double>(c.memory_mib) - d.mu[k] * Coef(m, j);
    }
    return d.beta[k] * static_cast<double>(type.cpu_milli) +
           d.gamma[k] * static_cast<double>(type.memory_mib) - d.mu[k] * m.constant +
           solvers_[m.type].Best(value, sol);
  }

  // UB for duals d, pi[t] the largest π over type t's modes.
  double Certificate(const Duals& d, const std::vector<double>& pi) const {
    double ub = 0;
    for (size_t t = 0; t < in2_.types.size(); ++t)
      ub += static_cast<double>(in2_.types[t].count) * pi[t];
    return PlusClassTerms(ub, in2_.classes, d.w);
  }

  void AddConfig(size_t k, const TypeSolution& s) {
    const Mode& m = modes_[k];
    const PackingNodeType& type = in2_.types[m.type];
    std::vector<std::pair<int, double>> e;
    double row = m.constant;
    for (size_t j = 0; j < 2 * n_; ++j) {
      if (s.count[j] <= 0) continue;
      e.emplace_back(static_cast<int>(j), -static_cast<double>(s.count[j]));
      row += s.count[j] * Coef(m, j);
    }
    e.emplace_back(node_row_[m.type], 1.0);
    e.emplace_back(m.row, s.cpu / static_cast<double>(std::max<int64_t>(type.cpu_milli, 1)) - 1);
    e.emplace_back(m.row + 1,
                   s.mem / static_cast<double>(std::max<int64_t>(type.memory_mib, 1)) - 1);
    if (m.kind != 0) e.emplace_back(m.row + 2, row / m.scale);
    lp_.AddColumn(0, Lp::kInf, std::move(e));
  }

  size_t n_;
  PackingInstance in2_;
  std::vector<TypeSolver> solvers_;
  std::vector<Mode> modes_;
  std::vector<int> node_row_;
  Lp lp_;
  std::vector<int> forced_, z_;
  std::set<std::vector<int>> seen_;
};

}  // namespace

double PackingUpperBound(const PackingInstance& in, PackingDual* dual,
                         std::vector<double>* placed) {
  double demand = 0;
  for (const PackingClass& c : in.classes)
    demand += static_cast<double>(c.count) * static_cast<double>(c.Demand());
  ColumnGeneration cg(in);
  return std::min(cg.Solve(dual, placed), demand);
}

namespace {

// What a task needs of one node, for the protocol's drop rule: `whole` fully free GPUs (0 for a
// share), one GPU with `share` milli free, CPU, memory, and allowed models (`any` or a set).
struct Need {
  int whole = 0;
  int32_t share = 0;
  int64_t cpu = 0, mem = 0;
  bool any = true;
  std::set<std::string> models;
};

Need NeedOf(const TraceTask& t) {
  Need n;
  n.cpu = t.cpu_milli;
  n.mem = t.memory_mib;
  if (t.GpuMilli() <= 0) return n;  // CPU-only: any node with the CPU and memory
  if (t.gpu_milli >= kGpuMilli) n.whole = t.num_gpu;
  n.share = t.gpu_milli;
  n.cpu = t.cpu_milli;
  n.mem = t.memory_mib;
  size_t start = 0;
  while (start < t.gpu_spec.size()) {
    size_t end = t.gpu_spec.find('|', start);
    if (end == std::string::npos) end = t.gpu_spec.size();
    if (end > start) n.models.insert(t.gpu_spec.substr(start, end - start));
    start = end + 1;
  }
  n.any = n.models.empty();
  return n;
}

// The least need that covers both: whatever can host it can host a and b.
Need Meet(const Need& a, const Need& b) {
  Need n;
  n.whole = std::max(a.whole, b.whole);
  n.share = std::max(a.share, b.share);
  n.cpu = std::max(a.cpu, b.cpu);
  n.mem = std::max(a.mem, b.mem);
  n.any = a.any && b.any;
  if (a.any) {
    n.models = b.models;
  } else if (b.any) {
    n.models = a.models;
  } else {
    for (const std::string& m : a.models)
      if (b.models.count(m) != 0) n.models.insert(m);
  }
  return n;
}

// Whether every node that can host `t` can also host a task needing `r` (so if no node can
// host r at some moment, none can host t from then on: tasks never depart).
bool Covers(const Need& t, const Need& r) {
  if (t.cpu < r.cpu || t.mem < r.mem || t.share < r.share) return false;
  if (r.whole > 0 && t.whole < r.whole) return false;
  if (r.any) return true;
  if (t.any) return false;
  for (const std::string& m : t.models)
    if (r.models.count(m) == 0) return false;
  return true;
}

// The first-drop scenarios' groups of keys (ProtocolBounder::Scenarios): the kind of need
// (CPU-only, a share, whole GPUs) and the CPU's power of two in whole cores — so that a group's
// meet (the least need covering all its keys) stays close to each of them. Any grouping is
// sound; finer ones cost more LPs and give tighter bounds.
int GroupOf(const TraceTask& t) {
  const int kind = t.GpuMilli() <= 0 ? 0 : t.gpu_milli < kGpuMilli ? 1 : 2;
  int level = 0;
  for (int64_t cores = t.cpu_milli / 1000; cores > 0; cores >>= 1) ++level;
  return kind * 64 + level;
}

// The protocol-aware bound on a prefix (bound.h, part 2), with the LP's columns
// kept from one prefix and scenario to the next.
class ProtocolBounder {
 public:
  ProtocolBounder(const std::vector<TraceNode>& nodes, const std::vector<TraceTask>& arrivals,
                  const BoundOptions& options)
      : arrivals_(arrivals),
        options_(options),
        in_(MakeInstance(nodes, arrivals, options.max_classes, options.protocol && options.timed)),
        cls_(ClassOf(in_, arrivals)),
        cg_(in_) {
    for (const TraceNode& n : nodes) capacity_ += int64_t{kGpuMilli} * n.gpus;
    for (const TraceTask& t : arrivals) {
      need_.push_back(NeedOf(t));
      group_.push_back(GroupOf(t));
    }
    if (options_.protocol) forced_ = ForcedArrivals(nodes, arrivals);
    forced_.resize(arrivals.size(), false);
    // Per task, the GPU demand of all arrivals that need at least as much (its cover).
    std::vector<double> cover(arrivals.size(), 0);
    std::map<std::tuple<int64_t, int64_t, int, int32_t, std::string>, double> memo;
    for (size_t i = 0; i < arrivals.size(); ++i) {
      const TraceTask& t = arrivals[i];
      if (cls_[i] < 0) continue;
      auto [it, added] = memo.try_emplace(
          std::tuple{t.cpu_milli, t.memory_mib, t.num_gpu, t.gpu_milli, t.gpu_spec}, 0.0);
      if (added)
        for (size_t k = 0; k < arrivals.size(); ++k)
          if (arrivals[k].GpuMilli() > 0 && Covers(need_[k], need_[i]))
            it->second += static_cast<double>(arrivals[k].GpuMilli());
      cover[i] = it->second;
    }
    // Key sets: tasks whose drop would force the drop of much later demand.
    for (double share : options_.key_covers) {
      std::vector<bool> keys(arrivals.size(), false);
      for (size_t i = 0; i < arrivals.size(); ++i)
        keys[i] = cls_[i] >= 0 && cover[i] >= share * static_cast<double>(capacity_);
      keys_.push_back(std::move(keys));
      timed_.push_back(false);
    }
    // Part 4: the first key set (none: no key) with every CPU-only task a key too, whose CPU-only
    // first drops are bounded by the time-indexed LP (it fills every node that could host it).
    if (options_.protocol && options_.timed) {
      std::vector<bool> keys =
          keys_.empty() ? std::vector<bool>(arrivals.size(), false) : keys_.front();
      bool any = false;
      for (size_t i = 0; i < arrivals.size(); ++i)
        if (cls_[i] >= 0 && !forced_[i] && arrivals[i].GpuMilli() <= 0) keys[i] = any = true;
      if (any) {
        keys_.push_back(std::move(keys));
        timed_.push_back(true);
      }
    }
  }

  // UB on what is allocated after task `last` (tasks 0…last have arrived).
  double Prefix(size_t last) {
    PackingDual dual;
    Set(last, 0, last + 1, nullptr, nullptr);
    const double demand = demand_;
    double ub = cg_.Solve(&dual);
    if (options_.protocol)
      for (size_t k = 0; k < keys_.size(); ++k)
        ub = std::min(ub, Scenarios(last, keys_[k], timed_[k], ub));
    // One milli-GPU of margin covers the floating-point sums (≈10⁻⁶ milli at this scale).
    return std::min(ub + 1.0, demand);
  }

 private:
  // The largest LP over the scenarios of the first drop of a key task (bound.h), or `plain` if
  // one reaches it.
  double Scenarios(size_t last, const std::vector<bool>& keys, bool timed, double plain) {
    PackingDual dual;
    // Split points: tasks after which arrived first exceeds each split %, then last + 1.
    std::vector<size_t> split = {0};
    int64_t arrived = 0;
    size_t next = 0;
    for (size_t i = 0; i <= last; ++i) {
      arrived += arrivals_[i].GpuMilli();
      while (next < options_.splits_pct.size() &&
             100.0 * static_cast<double>(arrived) >
                 options_.splits_pct[next] * static_cast<double>(capacity_)) {
        if (i + 1 > split.back() && i + 1 <= last) split.push_back(i + 1);
        ++next;
      }
    }
    split.push_back(last + 1);
    // No key task dropped through `last`: every key task placed.
    Set(last, last + 1, last + 1, nullptr, &keys);
    double worst = cg_.Solve(&dual);
    // The first key drop is a task T in [split_q, split_q+1): key tasks before split_q placed;
    // tasks from split_q+1 on that need at least what every key candidate T needs, dropped.
    // Latest first: those score highest, and a scenario whose tasks demand no more than the
    // worst so far cannot raise it.
    // Each bucket is split further by kind of need (GroupOf): T lies in one group, and whatever
    // covers that group's meet covers T, so each group is a scenario of its own (one meet over
    // the whole bucket would mix a 1-core CPU-only key with an 810-milli share and cover next to
    // nothing).
    std::vector<Pending> pending;
    for (size_t q = split.size() - 1; q-- > 0;) {
      std::map<int, Need> meet;                         // per group
      std::map<int, std::pair<int64_t, int64_t>> join;  // per group: most CPU and memory
      std::map<int, int32_t> share_join;                // per group: largest share
      // The first key dropped is one that some history could drop: forced ones are left out.
      for (size_t i = split[q]; i < split[q + 1]; ++i) {
        if (!keys[i] || forced_[i]) continue;
        const int g = options_.group_keys ? group_[i] : 0;
        auto [it, added] = meet.try_emplace(g, need_[i]);
        if (!added) it->second = Meet(it->second, need_[i]);
        auto [jt, fresh] = join.try_emplace(g, need_[i].cpu, need_[i].mem);
        if (!fresh)
          jt->second = {std::max(jt->second.first, need_[i].cpu),
                        std::max(jt->second.second, need_[i].mem)};
        int32_t& sj = share_join[g];
        sj = std::max(sj, need_[i].share);
      }
      // Groups of CPU-only keys in a timed key set (part 4): bounded by the time-indexed LP,
      // which may score below the plain LP, so they never stand in for another group.
      const auto is_timed = [&](int g) { return timed && options_.group_keys && g >= 0; };
      for (auto it = meet.begin(); it != meet.end(); ++it) {
        const Need& r = it->second;
        // A group whose meet another group's covers drops a superset of that one's tasks: its
        // LP cannot score higher (of two equal meets, the first is kept).
        bool dominated = false;
        for (auto other = meet.begin(); other != meet.end() && !dominated; ++other)
          dominated = other != it && !is_timed(other->first) && Covers(other->second, r) &&
                      (other->first < it->first || !Covers(r, other->second));
        if (dominated) continue;
        if (!Set(last, split[q], split[q + 1], &r, &keys)) continue;
        if (demand_ <= worst) continue;
        const double v = cg_.Solve(&dual);
        if (v <= worst) continue;
        if (!is_timed(it->first)) {
          worst = v;
          if (worst >= plain) return plain;
          continue;
        }
        Pending p{v, q, r, {}};
        p.key.cpu = join[it->first].first;
        p.key.mem = join[it->first].second;
        p.key.kind = it->first / 64;
        p.key.share = share_join[it->first];
        p.key.whole = r.whole;
        p.key.any = r.any;
        p.key.models = r.models;
        pending.push_back(std::move(p));
      }
    }
    // Part 4, lazily: the time-indexed LP is never above the plain one (same counts, more rows),
    // so scenarios are taken by plain value, highest first, until the next plain value cannot
    // raise the maximum any more.
    std::sort(pending.begin(), pending.end(),
              [](const Pending& a, const Pending& b) { return a.plain > b.plain; });
    for (const Pending& p : pending) {
      if (p.plain <= worst) break;
      Set(last, split[p.q], split[p.q + 1], &p.drop, &keys);
      worst = std::max(worst, std::min(p.plain, Timed(p.key, split[p.q + 1])));
      if (worst >= plain) return plain;
    }
    return worst;
  }

  // A scenario of a timed key set whose plain LP is above the maximum so far (Scenarios).
  struct Pending {
    double plain;
    size_t q;   // its bucket
    Need drop;  // its group's meet
    TimedKey key;
  };

  // The time-indexed LP (part 4) for the counts Set left in the instance (it keeps, per arrival,
  // whether it counted and was forced), with the arrivals before `end` (the bucket's end) as the
  // "before" copies; one LP per join of needs, kept from one prefix and scenario to the next.
  double Timed(TimedKey key, size_t end) {
    // Needs rounded up to a whole core and GiB: fewer LPs, and a larger need only weakens the
    // rows (R − r + 1 and r − 1), so the bound stays valid.
    key.cpu = (key.cpu + 999) / 1000 * 1000;
    key.mem = (key.mem + 1023) / 1024 * 1024;
    auto it = timed_lp_.find(key);
    if (it == timed_lp_.end())
      it = timed_lp_.emplace(key, std::make_unique<TimedColumnGeneration>(in_, key)).first;
    const size_t n = in_.classes.size();
    std::vector<int64_t> count(2 * n, 0), forced(2 * n, 0);
    for (size_t i = 0; i < counted_.size(); ++i) {
      if (!counted_[i]) continue;
      const size_t j = static_cast<size_t>(cls_[i]) + (i < end ? 0 : n);
      ++count[j];
      if (placed_[i]) ++forced[j];
    }
    return it->second->Solve(count, forced);
  }

  // Counts for tasks 0…last: those before `placed_before` that are keys forced, and those that
  // every protocol-following policy places (ForcedArrivals); those from `dropped_from` on that
  // `drop` covers left out. False when the scenario cannot happen: a forced task would be dropped.
  bool Set(size_t last, size_t placed_before, size_t dropped_from, const Need* drop,
           const std::vector<bool>* keys) {
    for (PackingClass& c : in_.classes) c.count = c.forced = 0;
    demand_ = 0;
    bool possible = true;
    counted_.assign(last + 1, false);
    placed_.assign(last + 1, false);
    for (size_t i = 0; i <= last; ++i) {
      if (cls_[i] < 0) continue;
      if (drop != nullptr && i >= dropped_from && Covers(need_[i], *drop)) {
        if (forced_[i]) possible = false;
        continue;
      }
      PackingClass& c = in_.classes[static_cast<size_t>(cls_[i])];
      ++c.count;
      counted_[i] = true;
      if (forced_[i] || (i < placed_before && keys != nullptr && (*keys)[i])) {
        ++c.forced;
        placed_[i] = true;
      }
      demand_ += static_cast<double>(c.Demand());
    }
    return possible;
  }

  const std::vector<TraceTask>& arrivals_;
  BoundOptions options_;
  PackingInstance in_;
  std::vector<int> cls_;
  std::vector<Need> need_;
  std::vector<int> group_;    // per arrival: GroupOf
  std::vector<bool> forced_;  // per arrival: placed by every protocol-following policy
  std::vector<std::vector<bool>> keys_;
  std::vector<bool> timed_;  // per key set: its CPU-only groups take the time-indexed LP
  ColumnGeneration cg_;
  std::map<TimedKey, std::unique_ptr<TimedColumnGeneration>> timed_lp_;
  std::vector<bool> counted_, placed_;  // per arrival, from the last Set
  int64_t capacity_ = 0;
  double demand_ = 0;
};

}  // namespace

std::string BoundRefusal(const std::vector<TraceNode>& nodes) {
  for (const TraceNode& n : nodes)
    if (n.gpus > 0) return "";
  return "the node list has no GPU, so there is no GPU capacity to bound";
}

double AllocatedUpperBound(const std::vector<TraceNode>& nodes,
                           const std::vector<TraceTask>& arrivals, const BoundOptions& options) {
  if (arrivals.empty()) return 0;
  ProtocolBounder bounder(nodes, arrivals, options);
  return bounder.Prefix(arrivals.size() - 1);
}

MetricBound UnallocatedLowerBound(const std::vector<TraceNode>& nodes,
                                  const std::vector<TraceTask>& arrivals, int x,
                                  const BoundOptions& options) {
  MetricBound out;
  out.refused = BoundRefusal(nodes);
  if (!out.refused.empty()) {
    out.packable_pct = 100;
    return out;
  }
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
  // Checkpoints: every `stride`-th event and the last; UB of each prefix.
  std::vector<size_t> checkpoints;
  for (size_t e = 0; e < events.size(); e += static_cast<size_t>(std::max(options.stride, 1)))
    checkpoints.push_back(e);
  if (checkpoints.back() != events.size() - 1) checkpoints.push_back(events.size() - 1);
  std::vector<double> ub(checkpoints.size());
  ProtocolBounder bounder(nodes, arrivals, options);
  for (size_t c = 0; c < checkpoints.size(); ++c) ub[c] = bounder.Prefix(events[checkpoints[c]]);
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
