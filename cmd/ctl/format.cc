#include "cmd/ctl/format.h"

#include <google/protobuf/util/json_util.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <ctime>

namespace gpupool::ctl {

Result<OutputFormat> ParseOutputFormat(std::string_view text) {
  if (text == "table") return OutputFormat::kTable;
  if (text == "json") return OutputFormat::kJson;
  if (text == "yaml") return OutputFormat::kYaml;
  return Status::InvalidArgument("unknown output format '" + std::string(text) +
                                 "' (table, json or yaml)");
}

void Table::Print(std::ostream& out) const {
  std::vector<size_t> width(headers_.size(), 0);
  auto measure = [&](const std::vector<std::string>& row) {
    for (size_t i = 0; i < row.size() && i < width.size(); ++i) {
      width[i] = std::max(width[i], row[i].size());
    }
  };
  measure(headers_);
  for (const auto& r : rows_) measure(r);
  auto print = [&](const std::vector<std::string>& row) {
    std::string line;
    for (size_t i = 0; i < row.size() && i < width.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line += std::string(width[i] - row[i].size() + 3, ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out << line << '\n';
  };
  print(headers_);
  for (const auto& r : rows_) print(r);
}

void PrintFields(std::ostream& out,
                 const std::vector<std::pair<std::string, std::string>>& fields) {
  size_t width = 0;
  for (const auto& [k, v] : fields) width = std::max(width, k.size() + 1);
  for (const auto& [k, v] : fields) {
    out << k << ':' << std::string(width - k.size() + 1, ' ') << v << '\n';
  }
}

std::string ToJson(const google::protobuf::Message& m, bool pretty) {
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = pretty;
  std::string out;
  // Printing a valid in-memory message cannot fail for the types gpupool uses.
  (void)google::protobuf::util::MessageToJsonString(m, &out, options);
  if (!pretty && !out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

namespace {

// JSON parses as flow style; people read block style.
void SetBlockStyle(YAML::Node node) {
  if (node.IsMap() || node.IsSequence()) {
    node.SetStyle(YAML::EmitterStyle::Block);
    for (auto it = node.begin(); it != node.end(); ++it) {
      SetBlockStyle(node.IsMap() ? it->second : *it);
    }
  }
}

}  // namespace

std::string ToYaml(const google::protobuf::Message& m) {
  try {
    YAML::Node root = YAML::Load(ToJson(m, false));
    SetBlockStyle(root);
    YAML::Emitter emitter;
    emitter << root;
    return emitter.c_str();
  } catch (const YAML::Exception&) {
    return ToJson(m, true);  // JSON is YAML too
  }
}

void PrintMessage(std::ostream& out, const google::protobuf::Message& m, OutputFormat format) {
  std::string text = format == OutputFormat::kYaml ? ToYaml(m) : ToJson(m, true);
  if (text.empty() || text.back() != '\n') text += '\n';
  out << text;
}

std::string FormatTime(const google::protobuf::Timestamp& t) {
  if (t.seconds() == 0 && t.nanos() == 0) return "-";
  const std::time_t secs = static_cast<std::time_t>(t.seconds());
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string FormatAge(const google::protobuf::Timestamp& t, int64_t now_unix_seconds) {
  if (t.seconds() == 0 && t.nanos() == 0) return "-";
  const int64_t d = std::max<int64_t>(0, now_unix_seconds - t.seconds());
  if (d < 120) return std::to_string(d) + "s";
  if (d < 2 * 3600) return std::to_string(d / 60) + "m";
  if (d < 2 * 86400) return std::to_string(d / 3600) + "h";
  return std::to_string(d / 86400) + "d";
}

std::string ShortEnumName(std::string_view full, std::string_view prefix) {
  if (full.substr(0, prefix.size()) == prefix) full.remove_prefix(prefix.size());
  return std::string(full);
}

std::string OrDash(const std::string& s) { return s.empty() ? "-" : s; }

std::string JoinArgv(const google::protobuf::RepeatedPtrField<std::string>& words) {
  std::string out;
  for (const std::string& w : words) {
    if (!out.empty()) out += ' ';
    out += w.find_first_of(" \t'\"") == std::string::npos ? w : "'" + w + "'";
  }
  return out;
}

}  // namespace gpupool::ctl
