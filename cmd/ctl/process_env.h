// Where gpupoolctl's defaults come from in the process environment: GPUPOOL_SERVER,
// GPUPOOL_TOKEN, GPUPOOL_CA and the settings file (GPUPOOL_CONFIG, else under XDG_CONFIG_HOME or
// HOME). Read the same way by the thin front (which hands them to a session helper) and by the
// full CLI. Standard library only, like the front.
//
// Thread safety: reads the environment; call before starting threads.
#pragma once

#include <string>

namespace gpupool::ctl {

struct ProcessEnv {
  std::string server, token, ca, config_path;
};

ProcessEnv ReadProcessEnv();

// The settings file's default path: `xdg_config_home`/gpupool/config when that is set, else
// `home`/.config/gpupool/config; empty when neither is set (client_config.h).
std::string DefaultClientConfigPath(const std::string& xdg_config_home, const std::string& home);

}  // namespace gpupool::ctl
