#include "store/pg_cluster_credentials.h"

#include <pqxx/pqxx>

#include "store/pg_conn.h"

namespace gpupool {

Result<ClusterCredentials> PublishClusterCredentials(const std::string& uri,
                                                     const ClusterCredentials& mine) {
  if (mine.ca_cert_pem.empty() || mine.ca_key_pem.empty() || mine.admin_token.empty()) {
    return Status::InvalidArgument("cluster credentials: the CA and the admin token must be set");
  }
  GPUPOOL_ASSIGN_OR_RETURN(PgTarget target, ParsePgTarget(uri));
  try {
    pqxx::connection conn(target.conninfo);
    pqxx::work txn(conn);
    std::string sql =
        "INSERT INTO cluster_credentials (id, ca_cert, ca_key, admin_token, created_us) VALUES "
        "(1, ";
    AppendQuoted(&sql, mine.ca_cert_pem);
    sql += ", ";
    AppendQuoted(&sql, mine.ca_key_pem);
    sql += ", ";
    AppendQuoted(&sql, mine.admin_token);
    sql +=
        ", (extract(epoch from clock_timestamp()) * 1000000)::bigint) ON CONFLICT (id) DO NOTHING";
    txn.exec(sql);
    pqxx::result r = txn.exec("SELECT ca_cert, ca_key, admin_token FROM cluster_credentials");
    txn.commit();
    if (r.size() != 1) return Status::Internal("cluster credentials: the row is missing");
    ClusterCredentials out;
    out.ca_cert_pem = r[0][0].c_str();
    out.ca_key_pem = r[0][1].c_str();
    out.admin_token = r[0][2].c_str();
    return out;
  } catch (const std::exception& e) {
    return PgErrorToStatus(e, target).WithContext("cluster credentials");
  }
}

}  // namespace gpupool
