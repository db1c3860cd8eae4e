// ClientConfig: gpupoolctl's saved connection settings — where gpupoold is, which CA to trust and
// which credential to send — in `$XDG_CONFIG_HOME/gpupool/config` (default
// `~/.config/gpupool/config`; process_env.h has the path), written by `gpupoolctl login` and
// `gpupoolctl config set`.
//
// The file is lines of `key = value` (`server`, `ca`, `token`); `#` starts a comment. It holds a
// secret, so it is written with mode 0600 in a 0700 directory, through a temporary file and a
// rename. Precedence when a command runs: flag, then environment (GPUPOOL_SERVER, GPUPOOL_TOKEN,
// GPUPOOL_CA), then this file, then the built-in default (127.0.0.1:7070, plaintext, no token).
//
// Thread safety: plain values and free functions.
#pragma once

#include <string>

#include "base/status.h"

namespace gpupool::ctl {

struct ClientConfig {
  std::string server;
  std::string ca;  // path of a PEM CA certificate; set = TLS
  std::string token;
};

// A missing file is an empty config; a malformed line is INVALID_ARGUMENT naming the file and line.
Result<ClientConfig> LoadClientConfig(const std::string& path);
Status SaveClientConfig(const std::string& path, const ClientConfig& config);

}  // namespace gpupool::ctl
