#include "api/message_yaml.h"

#include <google/protobuf/descriptor.pb.h>
#include <google/protobuf/duration.pb.h>
#include <google/protobuf/util/json_util.h>

#include <cctype>
#include <cstdio>

#include "pool/duration_text.h"

namespace gpupool::api {
namespace {

// A duration in protobuf's JSON form: "300s", "1.500s".
std::string ProtoJsonDuration(int64_t ms) {
  std::string out = std::to_string(ms / 1000);
  if (ms % 1000 != 0) {
    char frac[8];
    std::snprintf(frac, sizeof frac, ".%03d", static_cast<int>(ms % 1000));
    out += frac;
  }
  return out + "s";
}

void AppendJsonString(std::string_view s, std::string* out) {
  *out += '"';
  for (char c : s) {
    switch (c) {
      case '"':
        *out += "\\\"";
        break;
      case '\\':
        *out += "\\\\";
        break;
      case '\n':
        *out += "\\n";
        break;
      case '\t':
        *out += "\\t";
        break;
      case '\r':
        *out += "\\r";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          *out += buf;
        } else {
          *out += c;
        }
    }
  }
  *out += '"';
}

// True for a JSON number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
bool IsJsonNumber(std::string_view s) {
  size_t i = 0;
  auto digits = [&] {
    const size_t start = i;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
    return i - start;
  };
  if (i < s.size() && s[i] == '-') ++i;
  const size_t start = i;
  const size_t whole = digits();
  if (whole == 0 || (whole > 1 && s[start] == '0')) return false;
  if (i < s.size() && s[i] == '.') {
    ++i;
    if (digits() == 0) return false;
  }
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
    if (digits() == 0) return false;
  }
  return i == s.size();
}

// What a node is to be, when the message it is read into is known: a message's fields (`msg`),
// or a string field's value (`str`: a plain 8080 or true is then the text, as people mean in
// `env: {PORT: 8080}` and as `-o yaml` prints a numeric-looking string).
struct Want {
  const google::protobuf::Descriptor* msg = nullptr;
  bool str = false;
};

// The value `field` holds (an element of it, when repeated).
Want WantOf(const google::protobuf::FieldDescriptor* field) {
  if (field == nullptr) return {};
  if (field->cpp_type() == google::protobuf::FieldDescriptor::CPPTYPE_MESSAGE) {
    return {field->message_type(), false};
  }
  return {nullptr, field->cpp_type() == google::protobuf::FieldDescriptor::CPPTYPE_STRING};
}

// True for a zero duration in any unit ("0", "0s", "0.0m"): ParseDurationMs wants a positive one.
bool IsZeroDuration(std::string_view s) {
  while (!s.empty() && std::isalpha(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return !s.empty() && s.find_first_not_of("0.") == std::string_view::npos && s.front() == '0';
}

// Appends `node` as JSON, read as `want` says. `path` is where it is ("template.resources");
// the first value no field can hold sets *error ("idle: invalid duration 'soon': ...").
void NodeToJson(const YAML::Node& node, std::string* out, Want want, const std::string& path,
                std::string* error) {
  switch (node.Type()) {
    case YAML::NodeType::Map: {
      *out += '{';
      bool first = true;
      for (auto it = node.begin(); it != node.end(); ++it) {
        if (!first) *out += ',';
        first = false;
        const std::string& key = it->first.Scalar();
        AppendJsonString(key, out);
        *out += ':';
        Want child;
        if (want.msg != nullptr) {
          // A map field's entries: their values are the map's. Else a field, by either name.
          if (want.msg->options().map_entry()) {
            child = WantOf(want.msg->map_value());
          } else {
            const google::protobuf::FieldDescriptor* f = want.msg->FindFieldByName(key);
            if (f == nullptr) f = want.msg->FindFieldByCamelcaseName(key);
            child = WantOf(f);
            if (f != nullptr && f->is_map()) child = {f->message_type(), false};
          }
        }
        NodeToJson(it->second, out, child, path.empty() ? key : path + "." + key, error);
      }
      *out += '}';
      return;
    }
    case YAML::NodeType::Sequence: {
      *out += '[';
      for (size_t i = 0; i < node.size(); ++i) {
        if (i > 0) *out += ',';
        NodeToJson(node[i], out, want, path + "[" + std::to_string(i) + "]", error);
      }
      *out += ']';
      return;
    }
    case YAML::NodeType::Scalar: {
      const std::string& s = node.Scalar();
      if (want.msg != nullptr &&
          want.msg->full_name() == google::protobuf::Duration::descriptor()->full_name()) {
        // 5m as people write it (and protobuf's own 300s, 1.5s).
        Result<int64_t> ms = ParseDurationMs(s);
        if (!ms.ok() && !IsZeroDuration(s) && error->empty()) {
          *error = (path.empty() ? "" : path + ": ") + ms.status().message();
        }
        AppendJsonString(ms.ok() ? ProtoJsonDuration(*ms) : "0s", out);
        return;
      }
      if (node.Tag() != "!") {  // plain (unquoted) scalar
        if (s == "null" || s == "~") {
          *out += "null";
          return;
        }
        if (!want.str && (s == "true" || s == "false" || IsJsonNumber(s))) {
          *out += s;
          return;
        }
      }
      AppendJsonString(s, out);
      return;
    }
    default:
      *out += "null";
  }
}

}  // namespace

Result<std::string> YamlNodeToJson(const YAML::Node& node,
                                   const google::protobuf::Descriptor* msg) {
  std::string out, error;
  NodeToJson(node, &out, {msg, false}, "", &error);
  if (!error.empty()) return Status::InvalidArgument(error);
  return out;
}

Status MessageFromJson(const std::string& json, google::protobuf::Message* m) {
  google::protobuf::util::JsonParseOptions options;  // unknown fields are errors
  auto st = google::protobuf::util::JsonStringToMessage(json, m, options);
  if (!st.ok()) {
    return Status::InvalidArgument("not a valid " + std::string(m->GetDescriptor()->name()) + ": " +
                                   std::string(st.message()));
  }
  return Status::Ok();
}

}  // namespace gpupool::api
