// Output for gpupoolctl: aligned tables and "Key: value" blocks for people, protobuf's JSON
// mapping (the same JSON the REST API speaks) or YAML for scripts.
//
// Thread safety: plain values and functions.
#pragma once

#include <google/protobuf/message.h>
#include <google/protobuf/repeated_ptr_field.h>
#include <google/protobuf/timestamp.pb.h>

#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"

namespace gpupool::ctl {

enum class OutputFormat { kTable, kJson, kYaml };

// "table" | "json" | "yaml".
Result<OutputFormat> ParseOutputFormat(std::string_view text);

// Columns padded to the widest cell, three spaces apart, no trailing blanks. Headers are
// printed as given (upper case by convention).
class Table {
 public:
  explicit Table(std::vector<std::string> headers) : headers_(std::move(headers)) {}
  // REQUIRES: cells.size() == number of headers.
  void AddRow(std::vector<std::string> cells) { rows_.push_back(std::move(cells)); }
  size_t size() const { return rows_.size(); }
  void Print(std::ostream& out) const;

 private:
  std::vector<std::string> headers_;
  std::vector<std::vector<std::string>> rows_;
};

// "Name:      value" lines, values aligned.
void PrintFields(std::ostream& out, const std::vector<std::pair<std::string, std::string>>& fields);

// Protobuf JSON mapping (lowerCamelCase names, int64 as strings, enums by name).
// pretty: indented, for one object; otherwise one line (JSON Lines for streams).
std::string ToJson(const google::protobuf::Message& m, bool pretty);
// The JSON above re-emitted as block YAML.
std::string ToYaml(const google::protobuf::Message& m);
// Writes `m` in `format` (REQUIRES: format is kJson or kYaml), ending with a newline.
void PrintMessage(std::ostream& out, const google::protobuf::Message& m, OutputFormat format);

// "2026-11-22T15:40:18Z"; "-" when unset.
std::string FormatTime(const google::protobuf::Timestamp& t);
// Time since t, coarse: "45s", "12m", "3h", "2d"; "-" when unset.
std::string FormatAge(const google::protobuf::Timestamp& t, int64_t now_unix_seconds);
// The value, or "-" where it is empty (a table cell or field that has nothing to show).
std::string OrDash(const std::string& s);
// An argv as one line for people: words joined by spaces, a word with a blank or a quote in
// single quotes (for reading, not for pasting into a shell).
std::string JoinArgv(const google::protobuf::RepeatedPtrField<std::string>& words);
// "JOB_STATE_RUNNING" → "RUNNING" (drops the enum's type prefix, up to "STATE_"/"MODE_"/…).
std::string ShortEnumName(std::string_view full, std::string_view prefix);

}  // namespace gpupool::ctl
