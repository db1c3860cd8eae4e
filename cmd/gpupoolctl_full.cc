// gpupoolctl-full: the command line for gpupool tenants and admins (a gRPC client), which the thin
// `gpupoolctl` front (cmd/gpupoolctl.cc) runs whenever no session helper serves the command.
// Wiring only; the commands live in cmd/ctl/.
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "cmd/ctl/app.h"
#include "cmd/ctl/process_env.h"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  const gpupool::ctl::ProcessEnv pe = gpupool::ctl::ReadProcessEnv();
  gpupool::ctl::Environment env;
  env.server = pe.server, env.token = pe.token, env.ca = pe.ca;
  env.config_path = pe.config_path;
  std::ios::sync_with_stdio(false);
  // The channel outlives Run so that gRPC is never shut down: _exit skips its ~10 ms wait for
  // its own threads (cmd/ctl/app.h). Output is flushed first; nothing else needs a destructor.
  std::shared_ptr<grpc::Channel> channel;
  const int code = gpupool::ctl::Run(args, env, std::cout, std::cerr, &channel);
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  _exit(code);
}
