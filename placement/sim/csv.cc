#include "placement/sim/csv.h"

#include <charconv>

namespace gpupool::placement::sim {

std::vector<std::string_view> SplitFields(std::string_view line, char sep) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (true) {
    const size_t at = line.find(sep, start);
    out.push_back(
        line.substr(start, at == std::string_view::npos ? std::string_view::npos : at - start));
    if (at == std::string_view::npos) return out;
    start = at + 1;
  }
}

Status CsvRows::ReadHeader(std::initializer_list<std::string_view> required) {
  std::string_view header;
  if (!NextLine(&header)) return Status::InvalidArgument(source_ + ": empty file (no header)");
  const std::vector<std::string_view> cols = SplitFields(header, ',');
  for (size_t i = 0; i < cols.size(); ++i) columns_[std::string(cols[i])] = i;
  for (std::string_view r : required) {
    if (!columns_.contains(std::string(r)))
      return Status::InvalidArgument(source_ + ":1: missing column '" + std::string(r) + "'");
  }
  return Status::Ok();
}

bool CsvRows::Next() {
  std::string_view line;
  do {
    if (!NextLine(&line)) return false;
  } while (line.empty());
  cells_ = SplitFields(line, ',');
  return true;
}

std::string_view CsvRows::Cell(const std::string& column) const {
  auto it = columns_.find(column);
  if (it == columns_.end() || it->second >= cells_.size()) return {};
  return cells_[it->second];
}

Result<int64_t> CsvRows::Int(const std::string& column, bool required) const {
  const std::string_view c = Cell(column);
  if (c.empty() && !required) return int64_t{0};
  int64_t v = 0;
  auto [p, ec] = std::from_chars(c.data(), c.data() + c.size(), v);
  if (ec != std::errc() || p != c.data() + c.size()) {
    return Error(column, "expected an integer, got '" + std::string(c) + "'");
  }
  return v;
}

Status CsvRows::Error(const std::string& column, const std::string& message) const {
  return Status::InvalidArgument(source_ + ":" + std::to_string(line_) + ": " + column + ": " +
                                 message);
}

bool CsvRows::NextLine(std::string_view* line) {
  if (pos_ >= text_.size()) return false;
  size_t end = text_.find('\n', pos_);
  if (end == std::string_view::npos) end = text_.size();
  *line = text_.substr(pos_, end - pos_);
  if (!line->empty() && line->back() == '\r') line->remove_suffix(1);
  pos_ = end + 1;
  ++line_;
  return true;
}

}  // namespace gpupool::placement::sim
