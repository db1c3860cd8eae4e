#include "api/rest/json_mapping.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <memory>

#include "api/utf8.h"

namespace gpupool::api::rest {
namespace {

namespace pb = google::protobuf;

pb::util::JsonParseOptions ParseOptions() {
  pb::util::JsonParseOptions o;
  o.ignore_unknown_fields = false;
  return o;
}

// protobuf says "(spec) bogus: Cannot find field."; people want the field's name and where.
std::string RewriteParseError(std::string_view msg) {
  constexpr std::string_view kUnknown = ": Cannot find field.";
  if (msg.size() > kUnknown.size() && msg.substr(msg.size() - kUnknown.size()) == kUnknown) {
    std::string_view head = msg.substr(0, msg.size() - kUnknown.size());
    std::string_view where;
    if (!head.empty() && head.front() == '(') {
      const size_t close = head.find(')');
      if (close != std::string_view::npos) {
        where = head.substr(1, close - 1);
        head = head.substr(close + 1);
      }
    }
    while (!head.empty() && head.front() == ' ') head.remove_prefix(1);
    std::string out = "unknown field '" + std::string(head) + "'";
    if (!where.empty()) out += " in '" + std::string(where) + "'";
    return out;
  }
  std::string out(msg);
  while (!out.empty() && std::isspace(static_cast<unsigned char>(out.back()))) out.pop_back();
  if (out.rfind(": Root element must be a message.", 0) == 0) {
    return "the body must be a JSON object";
  }
  return "invalid JSON: " + out;
}

bool IsBlank(std::string_view s) {
  for (char c : s) {
    if (!std::isspace(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

const pb::FieldDescriptor* FindField(const pb::Descriptor* d, std::string_view name) {
  const std::string n(name);
  if (const auto* f = d->FindFieldByName(n)) return f;
  return d->FindFieldByCamelcaseName(n);
}

std::string AllowedParams(const pb::Descriptor* d) {
  std::string out;
  for (int i = 0; i < d->field_count(); ++i) {
    const pb::FieldDescriptor* f = d->field(i);
    if (f->is_map()) continue;
    if (f->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE &&
        f->message_type()->full_name() != "google.protobuf.FieldMask") {
      continue;
    }
    if (!out.empty()) out += ", ";
    out += f->json_name();
  }
  return out.empty() ? "none" : out;
}

// One query value as a JSON value for field `f`; protobuf's parser accepts strings for numbers.
Result<std::string> QueryValueJson(const pb::FieldDescriptor* f, const std::string& value) {
  switch (f->cpp_type()) {
    case pb::FieldDescriptor::CPPTYPE_BOOL:
      if (value == "true" || value == "1" || value.empty()) return std::string("true");
      if (value == "false" || value == "0") return std::string("false");
      return Status::InvalidArgument("query parameter '" + f->json_name() +
                                     "': expected true or false, got '" + value + "'");
    case pb::FieldDescriptor::CPPTYPE_ENUM: {
      const bool numeric =
          !value.empty() && value.find_first_not_of("0123456789") == std::string::npos;
      if (numeric && value.size() < 10) return value;
      return JsonQuote(value);
    }
    default:
      return JsonQuote(value);
  }
}

// protobuf's JSON parser takes "yes", "t" and "1" (strings) for a bool field; a request that says
// `"gang": "yes"` is more likely a mistake than a wish, so bools must be JSON true or false. The
// body is read once more as a google.protobuf.Value, which keeps JSON's types, and walked beside
// the message's descriptor. Shapes protobuf rejects anyway (unknown fields, wrong nesting) are
// left to it.
bool IsWellKnown(const pb::Descriptor* d) { return d->file()->package() == "google.protobuf"; }

Status CheckStrictTypes(const pb::Value& v, const pb::Descriptor* d, const std::string& where);

Status CheckFieldValue(const pb::Value& v, const pb::FieldDescriptor* f, const std::string& where) {
  if (v.kind_case() == pb::Value::kNullValue) return Status::Ok();
  if (f->cpp_type() == pb::FieldDescriptor::CPPTYPE_BOOL &&
      v.kind_case() != pb::Value::kBoolValue) {
    std::string got = v.kind_case() == pb::Value::kStringValue
                          ? "the string " + JsonQuote(v.string_value())
                          : std::string("a non-boolean");
    return Status::InvalidArgument("request body: field '" + where +
                                   "': expected true or false, got " + got);
  }
  if (f->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE && !IsWellKnown(f->message_type())) {
    return CheckStrictTypes(v, f->message_type(), where);
  }
  return Status::Ok();
}

Status CheckStrictTypes(const pb::Value& v, const pb::Descriptor* d, const std::string& where) {
  if (v.kind_case() != pb::Value::kStructValue) return Status::Ok();
  for (const auto& [key, value] : v.struct_value().fields()) {
    const pb::FieldDescriptor* f = FindField(d, key);
    if (f == nullptr) continue;
    const std::string here = where.empty() ? key : where + "." + key;
    if (f->is_map()) {
      if (value.kind_case() != pb::Value::kStructValue) continue;
      const pb::FieldDescriptor* mv = f->message_type()->map_value();
      for (const auto& [k, item] : value.struct_value().fields()) {
        GPUPOOL_RETURN_IF_ERROR(CheckFieldValue(item, mv, here + "[" + k + "]"));
      }
    } else if (f->is_repeated()) {
      if (value.kind_case() != pb::Value::kListValue) continue;
      const auto& items = value.list_value().values();
      for (int i = 0; i < items.size(); ++i) {
        GPUPOOL_RETURN_IF_ERROR(CheckFieldValue(items[i], f, here + "[" + std::to_string(i) + "]"));
      }
    } else {
      GPUPOOL_RETURN_IF_ERROR(CheckFieldValue(value, f, here));
    }
  }
  return Status::Ok();
}

}  // namespace

Status ParseJsonBody(std::string_view body, pb::Message* msg) {
  msg->Clear();
  if (IsBlank(body)) return Status::Ok();
  const auto st =
      pb::util::JsonStringToMessage(pb::StringPiece(body.data(), body.size()), msg, ParseOptions());
  if (!st.ok()) {
    return Status::InvalidArgument("request body: " + RewriteParseError(std::string(st.message())));
  }
  pb::Value raw;
  if (pb::util::JsonStringToMessage(pb::StringPiece(body.data(), body.size()), &raw).ok()) {
    if (Status s = CheckStrictTypes(raw, msg->GetDescriptor(), ""); !s.ok()) {
      msg->Clear();
      return s;
    }
  }
  return Status::Ok();
}

Status ApplyQueryParams(const std::vector<std::pair<std::string, std::string>>& params,
                        pb::Message* msg) {
  if (params.empty()) return Status::Ok();
  const pb::Descriptor* d = msg->GetDescriptor();
  // field → JSON values, in order of first appearance.
  std::vector<std::pair<const pb::FieldDescriptor*, std::vector<std::string>>> values;
  for (const auto& [key, value] : params) {
    const pb::FieldDescriptor* f = FindField(d, key);
    const bool settable = f != nullptr && !f->is_map() &&
                          (f->cpp_type() != pb::FieldDescriptor::CPPTYPE_MESSAGE ||
                           f->message_type()->full_name() == "google.protobuf.FieldMask");
    if (!settable) {
      return Status::InvalidArgument("unknown query parameter '" + key +
                                     "'; this route accepts: " + AllowedParams(d));
    }
    GPUPOOL_ASSIGN_OR_RETURN(std::string json, QueryValueJson(f, value));
    auto it =
        std::find_if(values.begin(), values.end(), [f](const auto& v) { return v.first == f; });
    if (it == values.end()) {
      values.push_back({f, {std::move(json)}});
    } else if (f->is_repeated()) {
      it->second.push_back(std::move(json));
    } else {
      return Status::InvalidArgument("query parameter '" + f->json_name() +
                                     "' given more than once");
    }
  }
  for (const auto& [f, vals] : values) {
    std::string json = "{" + JsonQuote(f->json_name()) + ":";
    if (f->is_repeated()) json += "[";
    for (size_t i = 0; i < vals.size(); ++i) json += (i ? "," : "") + vals[i];
    if (f->is_repeated()) json += "]";
    json += "}";
    std::unique_ptr<pb::Message> parsed(msg->New());
    const auto st = pb::util::JsonStringToMessage(json, parsed.get(), ParseOptions());
    if (!st.ok()) {
      // protobuf: "(page_size): invalid value "x" for type TYPE_INT32" — keep what follows "): ".
      std::string why(st.message().data(), st.message().size());
      const size_t cut = why.find("): ");
      if (cut != std::string::npos) why = why.substr(cut + 3);
      return Status::InvalidArgument("query parameter '" + f->json_name() + "': " + why);
    }
    msg->MergeFrom(*parsed);
  }
  return Status::Ok();
}

Status ApplyPathParam(std::string_view field_path, std::string_view value, pb::Message* msg) {
  pb::Message* cur = msg;
  std::string_view rest = field_path;
  while (true) {
    const size_t dot = rest.find('.');
    const std::string name(rest.substr(0, dot));
    const pb::FieldDescriptor* f = cur->GetDescriptor()->FindFieldByName(name);
    if (f == nullptr || f->is_repeated()) {
      return Status::Internal("route binds unknown field '" + std::string(field_path) + "'");
    }
    const pb::Reflection* r = cur->GetReflection();
    if (dot == std::string_view::npos) {
      if (f->cpp_type() != pb::FieldDescriptor::CPPTYPE_STRING) {
        return Status::Internal("route binds non-string field '" + std::string(field_path) + "'");
      }
      const std::string existing = r->GetString(*cur, f);
      if (!existing.empty() && existing != value) {
        return Status::InvalidArgument(std::string(field_path) + ": the URL says '" +
                                       std::string(value) + "' but the body says '" + existing +
                                       "'");
      }
      r->SetString(cur, f, std::string(value));
      return Status::Ok();
    }
    if (f->cpp_type() != pb::FieldDescriptor::CPPTYPE_MESSAGE) {
      return Status::Internal("route binds non-message field '" + name + "'");
    }
    cur = r->MutableMessage(cur, f);
    rest = rest.substr(dot + 1);
  }
}

Result<std::string> ToJson(const pb::Message& msg) {
  pb::util::JsonPrintOptions o;
  o.always_print_primitive_fields = true;
  o.preserve_proto_field_names = false;
  std::string out;
  const auto st = pb::util::MessageToJsonString(msg, &out, o);
  if (!st.ok()) {
    return Status::Internal("cannot encode the reply as JSON: " + std::string(st.message()));
  }
  return out;
}

std::string ErrorJson(const Status& status) {
  std::string out = "{\"code\":" + std::to_string(static_cast<int>(status.code()));
  out += ",\"message\":" + JsonQuote(ValidUtf8(status.message()));
  out += ",\"details\":[]}";
  return out;
}

std::string JsonQuote(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          static constexpr char kHex[] = "0123456789abcdef";
          out += "\\u00";
          out += kHex[(c >> 4) & 0xf];
          out += kHex[c & 0xf];
        } else {
          out += c;
        }
    }
  }
  out += "\"";
  return out;
}

}  // namespace gpupool::api::rest
