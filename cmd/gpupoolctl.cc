// gpupoolctl: the command line for gpupool tenants and admins (a gRPC client). Wiring only; the
// commands live in cmd/ctl/.
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "cmd/ctl/app.h"
#include "cmd/ctl/client_config.h"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  gpupool::ctl::Environment env;
  if (const char* s = std::getenv("GPUPOOL_SERVER")) env.server = s;
  if (const char* t = std::getenv("GPUPOOL_TOKEN")) env.token = t;
  if (const char* c = std::getenv("GPUPOOL_CA")) env.ca = c;
  if (const char* p = std::getenv("GPUPOOL_CONFIG")) {
    env.config_path = p;
  } else {
    const char* xdg = std::getenv("XDG_CONFIG_HOME");
    const char* home = std::getenv("HOME");
    env.config_path = gpupool::ctl::DefaultClientConfigPath(xdg != nullptr ? xdg : "",
                                                            home != nullptr ? home : "");
  }
  std::ios::sync_with_stdio(false);
  const int code = gpupool::ctl::Run(args, env, std::cout, std::cerr);
  std::cout.flush();
  return code;
}
