// Secure replicas share one CA and one admin credential (docs/ha.md, "Secure replicas"): before a
// replica loads its CA, ShareClusterCredentials makes `<data-dir>/tls/ca.{crt,key}` and
// `<data-dir>/admin.token` the cluster's, as published in PostgreSQL by the first secure replica
// (store/pg_cluster_credentials.h, which also states how the private key is protected).
//
//  * The first replica publishes what it has (created now, or files an operator put there).
//  * A later replica whose files were created by this very start adopts the cluster's: it writes
//    them (0600) over its own, and drops its server certificate so that the CA re-issues it.
//  * A later replica that already had a different CA or admin token is refused at start
//    (FAILED_PRECONDITION naming the file and what to do): silently replacing an operator's
//    credentials would lock out the clients and agents that trust them.
//
// Each replica keeps its own server certificate (its own names), issued by the shared CA.
#pragma once

#include <string>
#include <vector>

#include "base/crypto/secret_box.h"
#include "base/status.h"

namespace gpupool {

// `server_names`: as for tls::CertAuthority::LoadOrCreate; `ring` seals what is published (every
// replica has the same secrets key). REQUIRES: the database's migrations have run (PgStore::Open).
Status ShareClusterCredentials(const std::string& uri, const std::string& data_dir,
                               const std::vector<std::string>& server_names,
                               const SecretKeyring& ring);

}  // namespace gpupool
