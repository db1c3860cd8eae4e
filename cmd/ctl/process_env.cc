#include "cmd/ctl/process_env.h"

#include <cstdlib>

namespace gpupool::ctl {
namespace {

std::string Get(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? v : "";
}

}  // namespace

std::string DefaultClientConfigPath(const std::string& xdg_config_home, const std::string& home) {
  if (!xdg_config_home.empty()) return xdg_config_home + "/gpupool/config";
  if (!home.empty()) return home + "/.config/gpupool/config";
  return "";
}

ProcessEnv ReadProcessEnv() {
  ProcessEnv e;
  e.server = Get("GPUPOOL_SERVER");
  e.token = Get("GPUPOOL_TOKEN");
  e.ca = Get("GPUPOOL_CA");
  if (const char* p = std::getenv("GPUPOOL_CONFIG")) {
    e.config_path = p;
  } else {
    e.config_path = DefaultClientConfigPath(Get("XDG_CONFIG_HOME"), Get("HOME"));
  }
  return e;
}

}  // namespace gpupool::ctl
