// Lp: a small dense revised simplex for the packing bound (bound.h) — maximise c·x subject to
// A x ≤ b (b ≥ 0), 0 ≤ x ≤ u — that takes new columns between solves (column generation).
//
// Bounded variables are handled in the ratio test (a variable may sit at its upper bound while
// nonbasic). The basis inverse is dense and refactorised every few dozen pivots; Dantzig pricing,
// falling back to Bland's rule when pivots stop improving (the packing LP is very degenerate).
// Sized for a few hundred rows and a few thousand columns.
//
// The bound's validity never rests on this solver: its duals are turned into a certificate that
// bound.cc re-evaluates exactly (DualBound). Thread safety: none.
#pragma once

#include <limits>
#include <utility>
#include <vector>

namespace gpupool::placement::sim {

class Lp {
 public:
  static constexpr double kInf = std::numeric_limits<double>::infinity();
  enum class Result { kOptimal, kUnbounded, kIterationLimit };

  // Rows first (each with its right-hand side b ≥ 0; it adds the row's slack column), then
  // columns.
  int AddRow(double rhs);
  // A column: objective coefficient, upper bound (kInf for none), entries (row, value).
  int AddColumn(double cost, double upper, std::vector<std::pair<int, double>> entries);
  // Changes a column's upper bound. The next Solve keeps the basis if it stays primal feasible,
  // else starts again from the slack basis (always feasible); every column is kept.
  void SetUpper(int column, double upper);

  // Solves from the current basis (the slack basis the first time).
  Result Solve(int max_pivots = 200000);
  double Objective() const;
  double Value(int column) const;
  // Row duals y (≥ 0 at an optimum of this max problem): the objective's rate per unit of b_i.
  std::vector<double> Duals() const;
  int rows() const { return static_cast<int>(rhs_.size()); }
  int columns() const { return static_cast<int>(cost_.size()); }

 private:
  enum class At : unsigned char { kLower, kUpper, kBasic };
  void Start();
  void Refactor();
  void PriceRow(std::vector<double>* y) const;
  void Ftran(int column, std::vector<double>* alpha) const;

  std::vector<double> rhs_;
  std::vector<double> cost_, upper_;
  std::vector<std::vector<std::pair<int, double>>> col_;
  std::vector<At> at_;
  std::vector<int> slack_;    // per row: its slack column
  std::vector<int> basis_;    // per row: basic column
  std::vector<double> binv_;  // rows × rows, row-major
  std::vector<double> xb_;    // basic values
  bool started_ = false;
  bool bounds_changed_ = false;
};

}  // namespace gpupool::placement::sim
