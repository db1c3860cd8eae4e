#include "store/pg_cluster_credentials.h"

#include <pqxx/pqxx>

#include "store/pg_conn.h"
#include "store/pg_secrets.h"

namespace gpupool {

Result<ClusterCredentials> PublishClusterCredentials(const std::string& uri,
                                                     const ClusterCredentials& mine,
                                                     const SecretKeyring& ring) {
  if (mine.ca_cert_pem.empty() || mine.ca_key_pem.empty() || mine.admin_token.empty()) {
    return Status::InvalidArgument("cluster credentials: the CA and the admin token must be set");
  }
  GPUPOOL_ASSIGN_OR_RETURN(PgTarget target, ParsePgTarget(uri));
  GPUPOOL_ASSIGN_OR_RETURN(std::string ca_key,
                           ring.Seal(mine.ca_key_pem, ClusterCredentialContext("ca_key")));
  GPUPOOL_ASSIGN_OR_RETURN(std::string admin_token,
                           ring.Seal(mine.admin_token, ClusterCredentialContext("admin_token")));
  try {
    pqxx::connection conn(target.conninfo);
    pqxx::work txn(conn);
    std::string sql =
        "INSERT INTO cluster_credentials (id, ca_cert, ca_key, admin_token, created_us) VALUES "
        "(1, ";
    AppendQuoted(&sql, mine.ca_cert_pem);
    sql += ", ";
    AppendQuoted(&sql, ca_key);
    sql += ", ";
    AppendQuoted(&sql, admin_token);
    sql +=
        ", (extract(epoch from clock_timestamp()) * 1000000)::bigint) ON CONFLICT (id) DO NOTHING";
    txn.exec(sql);
    pqxx::result r = txn.exec("SELECT ca_cert, ca_key, admin_token FROM cluster_credentials");
    txn.commit();
    if (r.size() != 1) return Status::Internal("cluster credentials: the row is missing");
    ClusterCredentials out;
    out.ca_cert_pem = r[0][0].c_str();
    GPUPOOL_ASSIGN_OR_RETURN(out.ca_key_pem,
                             OpenStored(&ring, r[0][1].c_str(), ClusterCredentialContext("ca_key"),
                                        "cluster credential ca_key"));
    GPUPOOL_ASSIGN_OR_RETURN(
        out.admin_token, OpenStored(&ring, r[0][2].c_str(), ClusterCredentialContext("admin_token"),
                                    "cluster credential admin_token"));
    return out;
  } catch (const std::exception& e) {
    return PgErrorToStatus(e, target).WithContext("cluster credentials");
  }
}

}  // namespace gpupool
