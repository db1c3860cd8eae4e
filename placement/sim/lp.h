// Lp: the packing bound's LP (bound.h) — maximise c·x subject to A x ≤ b (b ≥ 0), 0 ≤ x ≤ u —
// that takes new columns between solves (column generation) and new column bounds between
// scenarios. A thin front for COIN-OR CLP's simplex (Debian `coinor-libclp-dev`): the bound's
// LPs have hundreds to thousands of rows and tens of thousands of columns, where the dense
// hand-written simplex this replaced (cubic refactorisation in the rows) took over an hour.
//
// Rows and columns are buffered and handed to CLP at the next Solve, which starts from the last
// basis: the primal simplex after new columns (the basis stays primal feasible), the dual simplex
// after changed bounds (it stays dual feasible). Column and row ids are dense from 0 in the order
// added; no slack columns are exposed.
//
// The bound's validity never rests on this solver: its duals are turned into a certificate that
// bound.cc re-evaluates exactly (DualBound). Keeps the CLP headers out of every includer.
// Thread safety: none (one Lp per thread).
#pragma once

#include <limits>
#include <memory>
#include <utility>
#include <vector>

class ClpSimplex;

namespace gpupool::placement::sim {

class Lp {
 public:
  static constexpr double kInf = std::numeric_limits<double>::infinity();
  // kFailed: CLP stopped without an answer (primal infeasible, which b ≥ 0 rules out, or
  // numerical trouble); callers treat it like an iteration limit — no optimum to read.
  enum class Result { kOptimal, kUnbounded, kIterationLimit, kFailed };

  Lp();
  ~Lp();
  Lp(Lp&&) noexcept;
  Lp& operator=(Lp&&) noexcept;

  // Rows first (each with its right-hand side b ≥ 0; a negative b is read as 0), then columns.
  int AddRow(double rhs);
  // A column: objective coefficient, upper bound (kInf for none), entries (row, value).
  int AddColumn(double cost, double upper, std::vector<std::pair<int, double>> entries);
  // Changes a column's upper bound; the next Solve starts from the current basis.
  void SetUpper(int column, double upper);

  // Solves from the current basis (a slack basis the first time).
  Result Solve(int max_pivots = 2000000);
  double Objective() const;
  double Value(int column) const;
  // Row duals y (≥ 0 at an optimum of this max problem): the objective's rate per unit of b_i.
  std::vector<double> Duals() const;
  int rows() const { return rows_; }
  int columns() const { return columns_; }

 private:
  void Flush();

  std::unique_ptr<ClpSimplex> clp_;
  int rows_ = 0, columns_ = 0;
  // Not yet handed to CLP: rows' right-hand sides, and columns (CSC: starts, rows, values).
  std::vector<double> new_rhs_;
  std::vector<double> new_cost_, new_upper_;
  std::vector<int> new_start_ = {0}, new_row_;
  std::vector<double> new_value_;
  bool bounds_changed_ = false;
};

}  // namespace gpupool::placement::sim
