#include "placement/sim/lp.h"

#include <cmath>
#include <cstddef>

namespace gpupool::placement::sim {
namespace {

constexpr double kCostTol = 1e-9;   // reduced cost that counts as improving
constexpr double kPivotTol = 1e-9;  // smallest |α| a ratio test accepts
constexpr double kFeasTol = 1e-9;   // a basic value this far outside its bounds is infeasible
constexpr int kRefactorEvery = 100;
constexpr int kStallBeforeBland = 50;

size_t Z(int i) { return static_cast<size_t>(i); }

}  // namespace

int Lp::AddRow(double rhs) {
  rhs_.push_back(rhs < 0 ? 0 : rhs);
  const int row = static_cast<int>(rhs_.size()) - 1;
  slack_.push_back(AddColumn(0, kInf, {{row, 1.0}}));
  started_ = false;
  return row;
}

int Lp::AddColumn(double cost, double upper, std::vector<std::pair<int, double>> entries) {
  cost_.push_back(cost);
  upper_.push_back(upper);
  col_.push_back(std::move(entries));
  at_.push_back(At::kLower);
  return static_cast<int>(cost_.size()) - 1;
}

void Lp::SetUpper(int column, double upper) {
  upper_[Z(column)] = upper;
  if (at_[Z(column)] == At::kUpper && upper == kInf) at_[Z(column)] = At::kLower;
  bounds_changed_ = true;
}

void Lp::Start() {
  const size_t m = rhs_.size();
  for (At& a : at_) a = At::kLower;
  basis_ = slack_;
  for (int j : basis_) at_[Z(j)] = At::kBasic;
  binv_.assign(m * m, 0);
  for (size_t i = 0; i < m; ++i) binv_[i * m + i] = 1;
  xb_ = rhs_;
  started_ = true;
}

void Lp::Refactor() {
  const size_t m = rhs_.size();
  // Gauss–Jordan on [B | I] with partial pivoting.
  std::vector<double> a(m * m, 0);
  for (size_t i = 0; i < m; ++i)
    for (const auto& [r, v] : col_[Z(basis_[i])]) a[Z(r) * m + i] = v;
  binv_.assign(m * m, 0);
  for (size_t i = 0; i < m; ++i) binv_[i * m + i] = 1;
  for (size_t c = 0; c < m; ++c) {
    size_t p = c;
    for (size_t r = c + 1; r < m; ++r)
      if (std::fabs(a[r * m + c]) > std::fabs(a[p * m + c])) p = r;
    if (p != c)
      for (size_t k = 0; k < m; ++k) {
        std::swap(a[p * m + k], a[c * m + k]);
        std::swap(binv_[p * m + k], binv_[c * m + k]);
      }
    const double d = a[c * m + c];
    if (std::fabs(d) < 1e-14) continue;  // singular: keep going; pivots will repair it
    for (size_t k = 0; k < m; ++k) a[c * m + k] /= d, binv_[c * m + k] /= d;
    for (size_t r = 0; r < m; ++r) {
      const double f = a[r * m + c];
      if (r == c || f == 0) continue;
      for (size_t k = 0; k < m; ++k)
        a[r * m + k] -= f * a[c * m + k], binv_[r * m + k] -= f * binv_[c * m + k];
    }
  }
  // x_B = B⁻¹ (b − Σ over columns at their upper bound of A_j u_j).
  std::vector<double> r = rhs_;
  for (size_t j = 0; j < col_.size(); ++j)
    if (at_[j] == At::kUpper)
      for (const auto& [row, v] : col_[j]) r[Z(row)] -= v * upper_[j];
  xb_.assign(m, 0);
  for (size_t i = 0; i < m; ++i)
    for (size_t k = 0; k < m; ++k) xb_[i] += binv_[i * m + k] * r[k];
}

void Lp::PriceRow(std::vector<double>* y) const {
  const size_t m = rhs_.size();
  y->assign(m, 0);
  for (size_t i = 0; i < m; ++i) {
    const double c = cost_[Z(basis_[i])];
    if (c == 0) continue;
    for (size_t k = 0; k < m; ++k) (*y)[k] += c * binv_[i * m + k];
  }
}

void Lp::Ftran(int column, std::vector<double>* alpha) const {
  const size_t m = rhs_.size();
  alpha->assign(m, 0);
  for (const auto& [row, v] : col_[Z(column)])
    for (size_t i = 0; i < m; ++i) (*alpha)[i] += binv_[i * m + Z(row)] * v;
}

Lp::Result Lp::Solve(int max_pivots) {
  if (started_ && bounds_changed_) {
    // Keep the basis if it is still primal feasible with the new bounds; else start over.
    Refactor();
    for (size_t i = 0; i < xb_.size() && started_; ++i)
      if (xb_[i] < -kFeasTol || xb_[i] > upper_[Z(basis_[i])] + kFeasTol) started_ = false;
  }
  bounds_changed_ = false;
  if (!started_) Start();
  const size_t m = rhs_.size();
  std::vector<double> y, alpha;
  int stall = 0, since_refactor = 0;
  for (int pivot = 0; pivot < max_pivots; ++pivot) {
    PriceRow(&y);
    const bool bland = stall >= kStallBeforeBland;
    int q = -1;
    double best = 0;  // the entering column's gain per unit of movement
    for (size_t j = 0; j < col_.size(); ++j) {
      if (at_[j] == At::kBasic) continue;
      double d = cost_[j];
      for (const auto& [row, v] : col_[j]) d -= y[Z(row)] * v;
      const double gain = at_[j] == At::kLower ? d : -d;
      if (gain <= kCostTol) continue;
      if (bland) {
        q = static_cast<int>(j), best = gain;
        break;
      }
      if (gain > best) best = gain, q = static_cast<int>(j);
    }
    if (q < 0) return Result::kOptimal;
    Ftran(q, &alpha);
    // The entering variable moves by θ ≥ 0 in direction dir (+1 up from lower, −1 down from
    // upper); basic i changes by −dir·α_i·θ.
    const double dir = at_[Z(q)] == At::kLower ? 1.0 : -1.0;
    double theta = upper_[Z(q)];  // a bound flip
    int leave = -1;
    for (size_t i = 0; i < m; ++i) {
      const double delta = -dir * alpha[i];
      if (std::fabs(delta) < kPivotTol) continue;
      const double ub = upper_[Z(basis_[i])];
      double t;
      if (delta < 0) {
        t = std::max(0.0, xb_[i]) / -delta;
      } else if (ub != kInf) {
        t = std::max(0.0, ub - xb_[i]) / delta;
      } else {
        continue;
      }
      const bool tie = leave >= 0 && std::fabs(t - theta) <= 1e-12;
      const bool better =
          t < theta - 1e-12 || (tie && (bland ? basis_[i] < basis_[Z(leave)]
                                              : std::fabs(alpha[i]) > std::fabs(alpha[Z(leave)])));
      if (leave < 0 ? t < theta : better) theta = t, leave = static_cast<int>(i);
    }
    if (theta == kInf) return Result::kUnbounded;
    for (size_t i = 0; i < m; ++i) xb_[i] -= dir * alpha[i] * theta;
    if (leave < 0) {
      at_[Z(q)] = at_[Z(q)] == At::kLower ? At::kUpper : At::kLower;
    } else {
      const size_t r = Z(leave);
      const int out = basis_[r];
      // The leaving variable sits at whichever bound it reached.
      at_[Z(out)] = (-dir * alpha[r] > 0 && upper_[Z(out)] != kInf) ? At::kUpper : At::kLower;
      const double entering = dir > 0 ? theta : upper_[Z(q)] - theta;
      basis_[r] = q;
      at_[Z(q)] = At::kBasic;
      xb_[r] = entering;
      const double p = alpha[r];
      for (size_t k = 0; k < m; ++k) binv_[r * m + k] /= p;
      for (size_t i = 0; i < m; ++i) {
        if (i == r || alpha[i] == 0) continue;
        const double f = alpha[i];
        for (size_t k = 0; k < m; ++k) binv_[i * m + k] -= f * binv_[r * m + k];
      }
      if (++since_refactor >= kRefactorEvery) Refactor(), since_refactor = 0;
    }
    if (best * theta > 1e-12) {
      stall = 0;
    } else {
      ++stall;
    }
  }
  return Result::kIterationLimit;
}

double Lp::Objective() const {
  double z = 0;
  for (size_t j = 0; j < col_.size(); ++j)
    if (at_[j] == At::kUpper) z += cost_[j] * upper_[j];
  for (size_t i = 0; i < basis_.size(); ++i) z += cost_[Z(basis_[i])] * xb_[i];
  return z;
}

double Lp::Value(int column) const {
  if (at_[Z(column)] == At::kUpper) return upper_[Z(column)];
  if (at_[Z(column)] == At::kLower) return 0;
  for (size_t i = 0; i < basis_.size(); ++i)
    if (basis_[i] == column) return xb_[i];
  return 0;
}

std::vector<double> Lp::Duals() const {
  std::vector<double> y;
  PriceRow(&y);
  return y;
}

}  // namespace gpupool::placement::sim
