// ClusterCredentials: the private CA and the admin credential that secure gpupoold replicas share
// through their PostgreSQL (docs/ha.md, "Secure replicas"), so that a client trusting one CA with
// one credential is served by whichever replica leads.
//
// The first secure replica to start publishes its CA (certificate and private key) and its admin
// token in the table `cluster_credentials` (one row, migration 13); every later replica adopts
// them. Publishing is INSERT … ON CONFLICT DO NOTHING followed by a read in one transaction, so
// two replicas starting together end up with the same row.
//
// Protection: the CA key and the admin token are sealed at rest with the secrets key
// (store/pg_secrets.h), which never enters the database; the row is still as sensitive as
// `<data-dir>/tls/ca.key` and `<data-dir>/admin.token` (whoever reads it can issue node
// certificates and act as admin). PUBLIC has no rights on the table; it is readable by gpupoold's
// own role and the database's superusers and owner, who can already change every job, key digest
// and lease row. It is also in every backup of the database: protect backups like the data
// directory.
//
// Thread safety: a free function; opens a connection of its own.
#pragma once

#include <string>

#include "base/crypto/secret_box.h"
#include "base/status.h"

namespace gpupool {

struct ClusterCredentials {
  std::string ca_cert_pem;
  std::string ca_key_pem;
  std::string admin_token;
  friend bool operator==(const ClusterCredentials&, const ClusterCredentials&) = default;
};

// Publishes `mine` unless a replica already published credentials, and returns the cluster's:
// `mine` or the earlier ones. UNAVAILABLE when the database cannot be reached; INVALID_ARGUMENT
// when a field of `mine` is empty; FAILED_PRECONDITION when the published ones do not open with
// `ring` (another secrets key).
Result<ClusterCredentials> PublishClusterCredentials(const std::string& uri,
                                                     const ClusterCredentials& mine,
                                                     const SecretKeyring& ring);

}  // namespace gpupool
