// gpupoold's secrets key (docs/security.md, "Secrets at rest"): the keyring that seals tenants'
// secret env values and the replicas' shared credentials in PostgreSQL (store/pg_secrets.h).
//
// Where it comes from, by the config's `secrets:` section:
//  * key_command: the program's stdout is the key file's text (a KMS or a vault fetches it). It
//    runs with no shell, no inherited environment and key_command_timeout_ms to finish.
//  * key_file: an existing file, readable only by its owner.
//  * neither: DATA_DIR/secrets.key, created (0600) with a fresh key on first start.
// The keyring is read once, at start; it is never logged, and only its key ids are.
//
// Thread safety: a free function.
#pragma once

#include <memory>

#include "base/crypto/secret_box.h"
#include "base/status.h"
#include "cmd/daemon/config.h"

namespace gpupool {

// FAILED_PRECONDITION naming the file or command, and what to do, when the key cannot be had: a
// missing key_file, one readable by others, a command that fails or times out, text that holds
// no key.
Result<std::shared_ptr<const SecretKeyring>> LoadSecretsKey(const DaemonConfig& config);

}  // namespace gpupool
