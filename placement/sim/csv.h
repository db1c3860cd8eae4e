// CsvRows: the rows of a CSV file with a header — the openb trace's node and pod lists, read by
// gpupool-sim (placement/sim/trace.h) and the cluster twin (twin/workload.h) — as column name →
// cell, with "<source>:<line>: <column>: …" in every error.
//
// The trace's CSV is plain: no quoting, ',' between cells, '\n' or "\r\n" between lines. Cells
// are looked up by header name, so files with more or fewer columns read the same; a column a
// row lacks is an empty cell. Blank lines are skipped.
//
// Thread safety: one reader per object; the text must outlive it.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace gpupool::placement::sim {

// `line` cut at every `sep` (an empty line is one empty field).
std::vector<std::string_view> SplitFields(std::string_view line, char sep);

class CsvRows {
 public:
  CsvRows(std::string_view text, std::string source) : text_(text), source_(std::move(source)) {}

  // Reads the header; INVALID_ARGUMENT naming the first `required` column it lacks.
  Status ReadHeader(std::initializer_list<std::string_view> required);
  bool Has(const std::string& column) const { return columns_.contains(column); }
  // The next row; false at the end.
  bool Next();
  // The current row's cell in `column` (empty when the file or the row has none).
  std::string_view Cell(const std::string& column) const;
  // The cell as an integer; an empty cell is 0 unless `required`.
  Result<int64_t> Int(const std::string& column, bool required = true) const;
  // INVALID_ARGUMENT "<source>:<line>: <column>: <message>" for the current row.
  Status Error(const std::string& column, const std::string& message) const;

 private:
  bool NextLine(std::string_view* line);

  std::string_view text_;
  std::string source_;
  size_t pos_ = 0;
  int64_t line_ = 0;
  std::map<std::string, size_t> columns_;
  std::vector<std::string_view> cells_;
};

}  // namespace gpupool::placement::sim
