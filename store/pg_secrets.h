// Secrets at rest in the PostgreSQL store (docs/security.md, "Secrets at rest"). Internal to
// store/.
//
// What is sealed (base/crypto/secret_box.h), and the context each value is bound to:
//   jobs.secret_env          each value:           "jobs.secret_env/<job id>/<name>"
//   jobs.request_digest      of jobs with secrets: "jobs.request_digest/<job id>" (the digest
//                            covers the secret values, so it would let a reader test guesses)
//   cluster_credentials      ca_key, admin_token:  "cluster_credentials.<column>"
//   registry_credentials     password:             "registry_credentials/<tenant>/<name>"
//   webhooks                 secret:               "webhooks/<id>"
// A value without the "gpsec1." prefix was written before this version, in plaintext: it is read
// as it is and re-sealed by the next leader's Recover.
//
// The table secret_keys (migration 15) lists the ids of the keys whose values may still be in the
// database (retired_ms IS NULL). Open refuses a keyring that lacks one of them, so gpupoold stops
// at start naming the key instead of serving a database it can only half read; Recover re-seals
// every value under the current key and then retires the others.
//
// Thread safety: free functions over a connection or transaction the caller owns.
#pragma once

#include <cstdint>
#include <map>
#include <pqxx/pqxx>
#include <string>

#include "base/crypto/secret_box.h"
#include "base/status.h"

namespace gpupool {

std::string SecretEnvContext(int64_t job_id, const std::string& name);
std::string RequestDigestContext(int64_t job_id);
std::string ClusterCredentialContext(const std::string& column);
std::string RegistryCredentialContext(const std::string& tenant, const std::string& name);
std::string WebhookSecretContext(int64_t webhook_id);

// `value` opened with `ring` when sealed, as it is when it is plaintext from an older version.
// FAILED_PRECONDITION when it is sealed and `ring` is null or cannot open it; `what` names the
// record in the message ("job 42 secret env TOKEN").
Result<std::string> OpenStored(const SecretKeyring* ring, const std::string& value,
                               const std::string& context, const std::string& what);

// At Open: FAILED_PRECONDITION, naming the key, the keyring's source and the database, when the
// database lists a key in use that `ring` lacks; else registers ring's current key as in use.
Status AdoptSecretKeys(pqxx::connection& conn, const SecretKeyring& ring,
                       const std::string& display);

struct ResealCounts {
  int64_t jobs = 0;                  // jobs whose secret env was re-sealed
  int64_t credentials = 0;           // cluster_credentials fields re-sealed
  int64_t registry_credentials = 0;  // registry_credentials rows re-sealed
  int64_t webhooks = 0;              // webhooks rows re-sealed
  int64_t retired_keys = 0;
};
// Re-seals, in one transaction, every value that is plaintext or sealed under another key than
// ring's current one, then retires every other key. An error names the job or row it could not
// open.
Result<ResealCounts> ResealSecrets(pqxx::connection& conn, const SecretKeyring& ring,
                                   int64_t now_ms);

}  // namespace gpupool
