#include "cmd/ctl/args.h"

#include <algorithm>

namespace gpupool::ctl {

namespace {

const FlagSpec* FindSpec(const std::vector<FlagSpec>& specs, std::string_view name, bool is_short) {
  for (const FlagSpec& s : specs) {
    if (is_short ? (name.size() == 1 && s.short_name == name[0]) : s.name == name) return &s;
  }
  return nullptr;
}

std::string Display(const FlagSpec& s) { return "--" + s.name; }

}  // namespace

bool ParsedArgs::Has(std::string_view flag) const { return values_.find(flag) != values_.end(); }

std::optional<std::string> ParsedArgs::Find(std::string_view flag) const {
  auto it = values_.find(flag);
  if (it == values_.end() || it->second.empty()) return std::nullopt;
  return it->second.back();
}

std::string ParsedArgs::Get(std::string_view flag, std::string fallback) const {
  return Find(flag).value_or(std::move(fallback));
}

std::vector<std::string> ParsedArgs::GetAll(std::string_view flag) const {
  auto it = values_.find(flag);
  return it == values_.end() ? std::vector<std::string>{} : it->second;
}

bool ParsedArgs::GetBool(std::string_view flag) const { return Get(flag, "false") == "true"; }

Result<ParsedArgs> ParseFlags(const std::vector<FlagSpec>& specs,
                              const std::vector<std::string>& words) {
  ParsedArgs out;
  for (size_t i = 0; i < words.size(); ++i) {
    const std::string& w = words[i];
    if (out.saw_dash_dash) {
      out.rest.push_back(w);
      continue;
    }
    if (w == "--") {
      out.saw_dash_dash = true;
      continue;
    }
    if (w.size() < 2 || w[0] != '-') {  // "-" alone is a value (stdin), not a flag
      out.positional.push_back(w);
      continue;
    }
    const bool is_short = w[1] != '-';
    std::string body = w.substr(is_short ? 1 : 2);
    std::optional<std::string> inline_value;
    if (size_t eq = body.find('='); eq != std::string::npos) {
      inline_value = body.substr(eq + 1);
      body.resize(eq);
    }
    const FlagSpec* spec = FindSpec(specs, body, is_short);
    if (spec == nullptr) {
      return Status::InvalidArgument("unknown flag " + std::string(is_short ? "-" : "--") + body);
    }
    std::string value;
    if (spec->kind == FlagKind::kBool) {
      value = inline_value.value_or("true");
      if (value != "true" && value != "false") {
        return Status::InvalidArgument("flag " + Display(*spec) + " takes true or false, got '" +
                                       value + "'");
      }
    } else if (inline_value) {
      value = *inline_value;
    } else if (i + 1 < words.size() && words[i + 1] != "--") {
      value = words[++i];
    } else {
      return Status::InvalidArgument("flag " + Display(*spec) + " needs a value (" +
                                     spec->value_name + ")");
    }
    std::vector<std::string>& slot = out.values_[spec->name];
    if (spec->kind != FlagKind::kRepeated) slot.clear();
    slot.push_back(std::move(value));
  }
  return out;
}

std::string FormatFlagHelp(const std::vector<FlagSpec>& specs) {
  std::vector<std::pair<std::string, std::string>> lines;
  size_t width = 0;
  for (const FlagSpec& s : specs) {
    std::string left = s.short_name ? std::string("-") + s.short_name + ", " : "    ";
    left += "--" + s.name;
    if (s.kind != FlagKind::kBool) left += " " + s.value_name;
    width = std::max(width, left.size());
    lines.emplace_back(std::move(left),
                       s.help + (s.kind == FlagKind::kRepeated ? " (repeatable)" : ""));
  }
  std::string out;
  for (const auto& [left, help] : lines) {
    out += "  " + left + std::string(width - left.size() + 3, ' ') + help + "\n";
  }
  return out;
}

}  // namespace gpupool::ctl
