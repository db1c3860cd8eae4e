#include "pool/yaml_error.h"

#include <fstream>
#include <limits>
#include <set>
#include <sstream>

namespace gpupool {

namespace {

int LineOf(const YAML::Node& node) {
  if (!node.IsDefined()) return 0;
  const YAML::Mark mark = node.Mark();
  return mark.is_null() ? 0 : mark.line + 1;
}

std::string Quote(std::string_view s) {
  std::string out = "\"";
  out += s;
  out += '"';
  return out;
}

std::string JoinAllowed(std::initializer_list<std::string_view> allowed) {
  std::string out;
  for (std::string_view a : allowed) {
    if (!out.empty()) out += ", ";
    out += a;
  }
  return out;
}

std::string FormatMilli(int64_t milli) {
  std::string out = std::to_string(milli / 1000);
  if (milli % 1000 != 0) {
    std::string frac = std::to_string(1000 + (milli < 0 ? -milli : milli) % 1000).substr(1);
    while (frac.back() == '0') frac.pop_back();
    out += "." + frac;
  }
  return out;
}

}  // namespace

YamlPath YamlPath::Key(std::string_view key) const {
  if (path_.empty()) return YamlPath(std::string(key));
  return YamlPath(path_ + "." + std::string(key));
}

YamlPath YamlPath::Index(size_t i) const { return YamlPath(path_ + "[" + std::to_string(i) + "]"); }

std::string FormatYamlError(std::string_view source, int line, std::string_view key,
                            std::string_view message) {
  std::string out(source);
  if (line > 0) out += ":" + std::to_string(line);
  out += ": ";
  if (!key.empty()) {
    out += key;
    out += ": ";
  }
  out += message;
  return out;
}

Status YamlError(std::string_view source, const YAML::Node& at, std::string_view key,
                 std::string_view message) {
  return Status::InvalidArgument(FormatYamlError(source, LineOf(at), key, message));
}

Result<YAML::Node> ParseYaml(std::string_view text, std::string_view source) {
  try {
    return YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    const int line = e.mark.is_null() ? 0 : e.mark.line + 1;
    return Status::InvalidArgument(FormatYamlError(source, line, "", e.msg));
  }
}

Result<std::string> ReadTextFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound(path + ": cannot open file");
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return Status::Internal(path + ": read error");
  return ss.str();
}

Status YamlDoc::Error(const YAML::Node& at, const YamlPath& key, std::string_view message) const {
  return YamlError(source_, at, key.str(), message);
}

Status YamlDoc::RequireMap(const YAML::Node& node, const YamlPath& path) const {
  if (!node.IsMap()) return Error(node, path, "must be a mapping (key: value)");
  return Status::Ok();
}

Status YamlDoc::RequireSequence(const YAML::Node& node, const YamlPath& path) const {
  if (!node.IsSequence()) return Error(node, path, "must be a list");
  return Status::Ok();
}

Status YamlDoc::CheckKeys(const YAML::Node& node, const YamlPath& path,
                          std::initializer_list<std::string_view> allowed) const {
  GPUPOOL_RETURN_IF_ERROR(RequireMap(node, path));
  std::set<std::string> seen;
  for (auto it = node.begin(); it != node.end(); ++it) {
    if (!it->first.IsScalar()) return Error(it->first, path, "keys must be plain strings");
    const std::string key = it->first.Scalar();
    bool known = false;
    for (std::string_view a : allowed) known = known || a == key;
    if (!known) {
      return Error(it->first, path.Key(key), "unknown key (allowed: " + JoinAllowed(allowed) + ")");
    }
    if (!seen.insert(key).second) return Error(it->first, path.Key(key), "duplicate key");
  }
  return Status::Ok();
}

Result<YAML::Node> YamlDoc::Scalar(const YAML::Node& map, const YamlPath& path,
                                   std::string_view key) const {
  const YAML::Node value = map[std::string(key)];
  if (!value.IsDefined()) return Error(map, path.Key(key), "missing required key");
  if (!value.IsScalar()) return Error(value, path.Key(key), "must be a single value");
  return value;
}

Result<std::string> YamlDoc::String(const YAML::Node& map, const YamlPath& path,
                                    std::string_view key) const {
  GPUPOOL_ASSIGN_OR_RETURN(YAML::Node value, Scalar(map, path, key));
  if (value.Scalar().empty()) return Error(value, path.Key(key), "must not be empty");
  return value.Scalar();
}

Result<std::optional<std::string>> YamlDoc::OptionalString(const YAML::Node& map,
                                                           const YamlPath& path,
                                                           std::string_view key) const {
  if (!map[std::string(key)].IsDefined()) return std::optional<std::string>();
  GPUPOOL_ASSIGN_OR_RETURN(std::string s, String(map, path, key));
  return std::optional<std::string>(std::move(s));
}

Result<int64_t> YamlDoc::Int(const YAML::Node& map, const YamlPath& path, std::string_view key,
                             int64_t min, int64_t max) const {
  GPUPOOL_ASSIGN_OR_RETURN(YAML::Node value, Scalar(map, path, key));
  const std::string& text = value.Scalar();
  int64_t v = 0;
  size_t i = 0;
  bool negative = false;
  if (!text.empty() && (text[0] == '-' || text[0] == '+')) {
    negative = text[0] == '-';
    i = 1;
  }
  bool ok = i < text.size();
  for (; ok && i < text.size(); ++i) {
    if (text[i] < '0' || text[i] > '9' || v > (std::numeric_limits<int64_t>::max() - 9) / 10) {
      ok = false;
      break;
    }
    v = v * 10 + (text[i] - '0');
  }
  if (!ok) return Error(value, path.Key(key), "must be an integer, got " + Quote(text));
  if (negative) v = -v;
  if (v < min || v > max) {
    std::string what;
    if (v < min && min == 1) {
      what = "must be a positive integer";
    } else if (v < min && min == 0) {
      what = "must not be negative";
    } else if (max == std::numeric_limits<int64_t>::max()) {
      what = "must be at least " + std::to_string(min);
    } else {
      what = "must be between " + std::to_string(min) + " and " + std::to_string(max);
    }
    return Error(value, path.Key(key), what + ", got " + Quote(text));
  }
  return v;
}

Result<int64_t> YamlDoc::Milli(const YAML::Node& map, const YamlPath& path, std::string_view key,
                               int64_t min, int64_t max) const {
  GPUPOOL_ASSIGN_OR_RETURN(YAML::Node value, Scalar(map, path, key));
  const std::string& text = value.Scalar();
  int64_t v = 0;
  if (!ParseDecimalMilli(text, &v)) {
    return Error(value, path.Key(key),
                 "must be a decimal number with at most 3 places, got " + Quote(text));
  }
  if (v < min) {
    const std::string what = v <= 0 && min > 0   ? "must be greater than zero"
                             : v < 0 && min == 0 ? "must not be negative"
                                                 : "must be at least " + FormatMilli(min);
    return Error(value, path.Key(key), what + ", got " + Quote(text));
  }
  if (v > max) {
    return Error(value, path.Key(key),
                 "must be at most " + FormatMilli(max) + ", got " + Quote(text));
  }
  return v;
}

Result<bool> YamlDoc::Bool(const YAML::Node& map, const YamlPath& path, std::string_view key,
                           bool default_value) const {
  if (!map[std::string(key)].IsDefined()) return default_value;
  GPUPOOL_ASSIGN_OR_RETURN(YAML::Node value, Scalar(map, path, key));
  const std::string& t = value.Scalar();
  if (t == "true" || t == "True" || t == "yes") return true;
  if (t == "false" || t == "False" || t == "no") return false;
  return Error(value, path.Key(key), "must be true or false, got " + Quote(t));
}

Result<std::vector<std::string>> YamlDoc::StringList(const YAML::Node& map, const YamlPath& path,
                                                     std::string_view key) const {
  std::vector<std::string> out;
  const YAML::Node list = map[std::string(key)];
  if (!list.IsDefined()) return out;
  const YamlPath lpath = path.Key(key);
  GPUPOOL_RETURN_IF_ERROR(RequireSequence(list, lpath));
  for (size_t i = 0; i < list.size(); ++i) {
    const YAML::Node item = list[i];
    if (!item.IsScalar() || item.Scalar().empty()) {
      return Error(item, lpath.Index(i), "must be a non-empty string");
    }
    out.push_back(item.Scalar());
  }
  return out;
}

bool ParseDecimalMilli(std::string_view text, int64_t* out) {
  size_t i = 0;
  bool negative = false;
  if (!text.empty() && (text[0] == '-' || text[0] == '+')) {
    negative = text[0] == '-';
    i = 1;
  }
  int64_t whole = 0;
  size_t digits = 0;
  constexpr int64_t kMaxWhole = std::numeric_limits<int64_t>::max() / 1000 - 1;
  for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i, ++digits) {
    whole = whole * 10 + (text[i] - '0');
    if (whole > kMaxWhole) return false;
  }
  int64_t frac = 0;
  size_t places = 0;
  if (i < text.size() && text[i] == '.') {
    ++i;
    for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i, ++places) {
      if (places == 3) return false;
      frac = frac * 10 + (text[i] - '0');
    }
  }
  if (i != text.size() || digits + places == 0) return false;
  for (size_t p = places; p < 3; ++p) frac *= 10;
  const int64_t v = whole * 1000 + frac;
  *out = negative ? -v : v;
  return true;
}

}  // namespace gpupool
