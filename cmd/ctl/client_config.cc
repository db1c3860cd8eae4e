#include "cmd/ctl/client_config.h"

#include <sys/stat.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace gpupool::ctl {
namespace {

std::string Trim(std::string s) {
  const size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  const size_t e = s.find_last_not_of(" \t\r");
  return s.substr(b, e - b + 1);
}

}  // namespace

Result<ClientConfig> LoadClientConfig(const std::string& path) {
  ClientConfig c;
  if (path.empty()) return c;
  std::ifstream in(path);
  if (!in) {
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) return c;
    return Status::InvalidArgument(path + ": cannot read");
  }
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    const std::string where = path + ":" + std::to_string(n) + ": ";
    line = Trim(line);
    if (line.empty() || line[0] == '#') continue;
    const size_t eq = line.find('=');
    if (eq == std::string::npos) return Status::InvalidArgument(where + "expected 'key = value'");
    const std::string key = Trim(line.substr(0, eq));
    const std::string value = Trim(line.substr(eq + 1));
    if (key == "server") {
      c.server = value;
    } else if (key == "ca") {
      c.ca = value;
    } else if (key == "token") {
      c.token = value;
    } else {
      return Status::InvalidArgument(where + "unknown key '" + key +
                                     "' (expected server, ca or token)");
    }
  }
  return c;
}

Status SaveClientConfig(const std::string& path, const ClientConfig& c) {
  namespace fs = std::filesystem;
  if (path.empty()) {
    return Status::FailedPrecondition(
        "no config file location: set HOME or XDG_CONFIG_HOME (or GPUPOOL_CONFIG)");
  }
  std::error_code ec;
  const fs::path dir = fs::path(path).parent_path();
  if (!dir.empty() && !fs::exists(dir, ec)) {
    fs::create_directories(dir, ec);
    if (ec) return Status::Internal(dir.string() + ": " + ec.message());
    ::chmod(dir.c_str(), 0700);
  }
  std::ostringstream text;
  text << "# gpupoolctl settings (written by gpupoolctl login/config); holds a credential\n";
  if (!c.server.empty()) text << "server = " << c.server << "\n";
  if (!c.ca.empty()) text << "ca = " << c.ca << "\n";
  if (!c.token.empty()) text << "token = " << c.token << "\n";
  const std::string tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) return Status::Internal(tmp + ": cannot create");
  ::chmod(tmp.c_str(), 0600);
  const std::string s = text.str();
  const bool ok = std::fwrite(s.data(), 1, s.size(), f) == s.size();
  if (std::fclose(f) != 0 || !ok) return Status::Internal(tmp + ": write failed");
  fs::rename(tmp, path, ec);
  if (ec) return Status::Internal(path + ": " + ec.message());
  return Status::Ok();
}

}  // namespace gpupool::ctl
