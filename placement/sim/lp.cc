#include "placement/sim/lp.h"

#include <ClpSimplex.hpp>
#include <CoinFinite.hpp>
#include <algorithm>
#include <cstddef>

namespace gpupool::placement::sim {
namespace {

size_t Z(int i) { return static_cast<size_t>(i); }

double ClpBound(double upper) { return upper == Lp::kInf ? COIN_DBL_MAX : upper; }

}  // namespace

// CLP minimises −c·x: its duals are then the rate of −objective per unit of b, negated below.
Lp::Lp() : clp_(std::make_unique<ClpSimplex>()) {
  clp_->setLogLevel(0);
  clp_->setOptimizationDirection(1);
}

Lp::~Lp() = default;
Lp::Lp(Lp&&) noexcept = default;
Lp& Lp::operator=(Lp&&) noexcept = default;

int Lp::AddRow(double rhs) {
  new_rhs_.push_back(rhs < 0 ? 0 : rhs);
  return rows_++;
}

int Lp::AddColumn(double cost, double upper, std::vector<std::pair<int, double>> entries) {
  new_cost_.push_back(-cost);
  new_upper_.push_back(ClpBound(upper));
  for (const auto& [row, v] : entries) {
    new_row_.push_back(row);
    new_value_.push_back(v);
  }
  new_start_.push_back(static_cast<int>(new_row_.size()));
  return columns_++;
}

void Lp::SetUpper(int column, double upper) {
  const int have = clp_->numberColumns();
  if (column < have) {
    clp_->setColumnUpper(column, ClpBound(upper));
    bounds_changed_ = true;
  } else {
    new_upper_[Z(column - have)] = ClpBound(upper);
  }
}

void Lp::Flush() {
  if (!new_rhs_.empty()) {
    // Rows come before columns (lp.h), so an empty row block is all there is to add.
    const std::vector<double> lower(new_rhs_.size(), -COIN_DBL_MAX);
    const std::vector<CoinBigIndex> starts(new_rhs_.size() + 1, 0);
    const int no_column = 0;
    const double no_value = 0;
    clp_->addRows(static_cast<int>(new_rhs_.size()), lower.data(), new_rhs_.data(), starts.data(),
                  &no_column, &no_value);
    new_rhs_.clear();
  }
  if (!new_cost_.empty()) {
    const std::vector<double> lower(new_cost_.size(), 0);
    const std::vector<CoinBigIndex> starts(new_start_.begin(), new_start_.end());
    clp_->addColumns(static_cast<int>(new_cost_.size()), lower.data(), new_upper_.data(),
                     new_cost_.data(), starts.data(), new_row_.data(), new_value_.data());
    new_cost_.clear();
    new_upper_.clear();
    new_start_.assign(1, 0);
    new_row_.clear();
    new_value_.clear();
  }
}

Lp::Result Lp::Solve(int max_pivots) {
  Flush();
  clp_->setMaximumIterations(max_pivots);
  // New bounds can leave the basis primal infeasible but not dual infeasible: the dual simplex
  // repairs that; new columns only price in, which is the primal simplex's job.
  if (bounds_changed_) {
    clp_->dual();
  } else {
    clp_->primal();
  }
  bounds_changed_ = false;
  switch (clp_->status()) {
    case 0:
      return Result::kOptimal;
    case 2:
      return Result::kUnbounded;
    case 3:
      return Result::kIterationLimit;
    default:
      return Result::kFailed;
  }
}

double Lp::Objective() const { return -clp_->objectiveValue(); }

double Lp::Value(int column) const {
  if (column >= clp_->numberColumns()) return 0;  // added after the last solve
  return clp_->primalColumnSolution()[column];
}

std::vector<double> Lp::Duals() const {
  const int m = clp_->numberRows();
  const double* y = clp_->dualRowSolution();
  std::vector<double> out(Z(rows_), 0);
  for (int i = 0; i < m; ++i) out[Z(i)] = -y[i];
  return out;
}

}  // namespace gpupool::placement::sim
