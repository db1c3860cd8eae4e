#include "agent/oci/seccomp.h"

#include <sys/utsname.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>

namespace gpupool::agent::oci {
namespace {

using nlohmann::json;

// "6.1.0-18-amd64" → {6, 1, 0}
std::vector<int> KernelVersion(const std::string& text) {
  std::vector<int> v;
  size_t i = 0;
  while (i < text.size() && v.size() < 3) {
    if (!isdigit(static_cast<unsigned char>(text[i]))) break;
    size_t end = i;
    while (end < text.size() && isdigit(static_cast<unsigned char>(text[end]))) ++end;
    v.push_back(std::stoi(text.substr(i, end - i)));
    if (end >= text.size() || text[end] != '.') break;
    i = end + 1;
  }
  while (v.size() < 3) v.push_back(0);
  return v;
}

// Go architecture names → libseccomp's.
const char* ScmpArch(const std::string& go_arch) {
  if (go_arch == "amd64") return "SCMP_ARCH_X86_64";
  if (go_arch == "arm64") return "SCMP_ARCH_AARCH64";
  if (go_arch == "386") return "SCMP_ARCH_X86";
  if (go_arch == "ppc64le") return "SCMP_ARCH_PPC64LE";
  if (go_arch == "s390x") return "SCMP_ARCH_S390X";
  if (go_arch == "riscv64") return "SCMP_ARCH_RISCV64";
  return "";
}

std::vector<std::string> Strings(const json& j, const char* key) {
  std::vector<std::string> out;
  if (j.is_object() && j.contains(key) && j[key].is_array()) {
    for (const auto& v : j[key]) {
      if (v.is_string()) out.push_back(v.get<std::string>());
    }
  }
  return out;
}

bool Applies(const json& rule, const SeccompTarget& t, const std::set<std::string>& caps) {
  const json inc = rule.value("includes", json::object());
  const json exc = rule.value("excludes", json::object());
  auto arches = Strings(inc, "arches");
  if (!arches.empty() && std::find(arches.begin(), arches.end(), t.arch) == arches.end()) {
    return false;
  }
  for (const auto& a : Strings(exc, "arches")) {
    if (a == t.arch) return false;
  }
  for (const auto& c : Strings(inc, "caps")) {
    if (!caps.count(c)) return false;
  }
  for (const auto& c : Strings(exc, "caps")) {
    if (caps.count(c)) return false;
  }
  if (inc.is_object() && inc.contains("minKernel") && inc["minKernel"].is_string()) {
    if (KernelVersion(t.kernel) < KernelVersion(inc["minKernel"].get<std::string>())) return false;
  }
  return true;
}

Result<json> Convert(const std::string& profile_json, const SeccompTarget& target);

}  // namespace

SeccompTarget SeccompTarget::ThisNode(std::vector<std::string> capabilities) {
  SeccompTarget t;
  utsname u{};
  uname(&u);
  std::string machine = u.machine;
  t.arch = machine == "x86_64"    ? "amd64"
           : machine == "aarch64" ? "arm64"
           : machine == "i686"    ? "386"
                                  : machine;
  t.kernel = u.release;
  t.capabilities = std::move(capabilities);
  return t;
}

Result<json> ConvertSeccompProfile(const std::string& profile_json, const SeccompTarget& target) {
  try {
    return Convert(profile_json, target);
  } catch (const json::exception& e) {
    return Status::InvalidArgument(std::string("seccomp profile: ") + e.what());
  }
}

Result<json> LoadSeccompProfile(const std::string& path, const SeccompTarget& target) {
  std::ifstream in(path);
  if (!in) {
    return Status::NotFound("seccomp profile " + path +
                            " not found (Debian package golang-github-containers-common)");
  }
  std::stringstream ss;
  ss << in.rdbuf();
  auto converted = ConvertSeccompProfile(ss.str(), target);
  if (!converted.ok()) return converted.status().WithContext(path);
  return converted;
}

namespace {

Result<json> Convert(const std::string& profile_json, const SeccompTarget& target) {
  json p = json::parse(profile_json, nullptr, false);
  if (!p.is_object() || !p.contains("defaultAction") || !p["defaultAction"].is_string()) {
    return Status::InvalidArgument("seccomp profile: not a JSON object with a defaultAction");
  }
  json out{{"defaultAction", p["defaultAction"]}};
  if (p.contains("defaultErrnoRet") && p["defaultErrnoRet"].is_number_unsigned()) {
    out["defaultErrnoRet"] = p["defaultErrnoRet"];
  }
  std::string native = ScmpArch(target.arch);
  if (native.empty()) {
    return Status::InvalidArgument("seccomp profile: unknown architecture '" + target.arch + "'");
  }
  json arches = json::array();
  const json arch_map = p.value("archMap", json::array());
  for (const auto& m : arch_map) {
    if (m.value("architecture", "") != native) continue;
    arches.push_back(native);
    for (const auto& s : Strings(m, "subArchitectures")) arches.push_back(s);
  }
  if (arches.empty()) arches.push_back(native);
  out["architectures"] = arches;
  std::set<std::string> caps(target.capabilities.begin(), target.capabilities.end());
  json syscalls = json::array();
  const json rules = p.value("syscalls", json::array());
  for (const auto& rule : rules) {
    if (!rule.is_object() || !rule.contains("action")) {
      return Status::InvalidArgument("seccomp profile: a syscalls entry without an action");
    }
    if (!Applies(rule, target, caps)) continue;
    json names = rule.value("names", json::array());
    if (rule.contains("name") && rule["name"].is_string()) names.push_back(rule["name"]);
    if (!names.is_array() || !rule["action"].is_string()) {
      return Status::InvalidArgument(
          "seccomp profile: a syscalls entry whose names or action is "
          "malformed");
    }
    for (const auto& n : names) {
      if (!n.is_string()) {
        return Status::InvalidArgument("seccomp profile: a system call name is not a string");
      }
    }
    if (names.empty()) continue;
    json r{{"names", names}, {"action", rule["action"]}};
    if (rule.contains("errnoRet") && rule["errnoRet"].is_number_unsigned()) {
      r["errnoRet"] = rule["errnoRet"];
    }
    if (rule.contains("args") && rule["args"].is_array() && !rule["args"].empty()) {
      json args = json::array();
      for (const auto& a : rule["args"]) {
        json arg{{"index", a.value("index", 0)},
                 {"value", a.value("value", uint64_t{0})},
                 {"op", a.value("op", "")}};
        if (a.value("valueTwo", uint64_t{0}) != 0) arg["valueTwo"] = a["valueTwo"];
        args.push_back(arg);
      }
      r["args"] = args;
    }
    syscalls.push_back(r);
  }
  out["syscalls"] = syscalls;
  return out;
}

}  // namespace

}  // namespace gpupool::agent::oci
