#include "store/pg_secrets.h"

#include <pqxx/pqxx>
#include <vector>

#include "store/pg_conn.h"
#include "store/pg_sql.h"

namespace gpupool {
namespace {

// "gpsec1.<id>.%" as a quoted LIKE pattern (ids are hex: nothing to escape).
std::string SealedUnder(const std::string& id) {
  std::string out;
  AppendQuoted(&out, std::string(SecretKeyring::kPrefix) + id + ".%");
  return out;
}

// `value` sealed under ring's current key: as it is when it already is, else opened (or taken as
// plaintext from an older version) and sealed again.
Result<std::string> Reseal(const SecretKeyring& ring, const std::string& value,
                           const std::string& context, const std::string& what, bool* changed) {
  if (SecretKeyring::KeyIdOf(value) == ring.current_id()) return value;
  GPUPOOL_ASSIGN_OR_RETURN(std::string plain, OpenStored(&ring, value, context, what));
  *changed = true;
  return ring.Seal(plain, context);
}

void AppendTextArray(std::string* sql, const std::vector<std::string>& v) {
  *sql += "ARRAY[";
  for (size_t i = 0; i < v.size(); ++i) {
    if (i > 0) *sql += ',';
    AppendQuoted(sql, v[i]);
  }
  *sql += "]::text[]";
}

}  // namespace

std::string SecretEnvContext(int64_t job_id, const std::string& name) {
  return "jobs.secret_env/" + std::to_string(job_id) + "/" + name;
}

std::string RequestDigestContext(int64_t job_id) {
  return "jobs.request_digest/" + std::to_string(job_id);
}

std::string RegistryCredentialContext(const std::string& tenant, const std::string& name) {
  // A name holds no '/', so the pair is unambiguous.
  return "registry_credentials/" + tenant + "/" + name;
}

std::string WebhookSecretContext(int64_t webhook_id) {
  return "webhooks/" + std::to_string(webhook_id);
}

std::string ClusterCredentialContext(const std::string& column) {
  return "cluster_credentials." + column;
}

Result<std::string> OpenStored(const SecretKeyring* ring, const std::string& value,
                               const std::string& context, const std::string& what) {
  if (!SecretKeyring::IsSealed(value)) return value;  // plaintext written before sealing
  if (ring == nullptr) {
    return Status::FailedPrecondition(
        "store: " + what + " is sealed, and this store was opened without a secrets key");
  }
  Result<std::string> plain = ring->Open(value, context);
  if (!plain.ok()) return plain.status().WithContext("store: " + what);
  return plain;
}

Status AdoptSecretKeys(pqxx::connection& conn, const SecretKeyring& ring,
                       const std::string& display) {
  pqxx::work txn(conn);
  // Serialises with a Recover that retires keys, so the check and the registration agree.
  txn.exec("LOCK TABLE secret_keys IN SHARE ROW EXCLUSIVE MODE");
  std::vector<std::string> missing;
  for (const auto& row :
       txn.exec("SELECT id FROM secret_keys WHERE retired_ms IS NULL ORDER BY id")) {
    const std::string id = row[0].c_str();
    if (!ring.Has(id)) missing.push_back(id);
  }
  if (!missing.empty()) {
    std::string ids;
    for (const std::string& id : missing) ids += (ids.empty() ? "" : ", ") + id;
    std::string have;
    for (const std::string& id : ring.ids()) have += (have.empty() ? "" : ", ") + id;
    return Status::FailedPrecondition(
        "database " + display + " holds secrets sealed with key " + ids + ", which " +
        ring.source() + " does not hold (it holds " + have +
        "). Start gpupoold with the secrets key it ran with before (every replica needs the "
        "same one; docs/security.md, \"Secrets at rest\")");
  }
  std::string sql = "INSERT INTO secret_keys (id, first_used_ms) VALUES (";
  AppendQuoted(&sql, ring.current_id());
  sql +=
      ", (extract(epoch from clock_timestamp()) * 1000)::bigint) ON CONFLICT (id) DO UPDATE SET "
      "retired_ms = NULL";
  txn.exec(sql);
  txn.commit();
  return Status::Ok();
}

Result<ResealCounts> ResealSecrets(pqxx::connection& conn, const SecretKeyring& ring,
                                   int64_t now_ms) {
  ResealCounts counts;
  pqxx::work txn(conn);
  txn.exec("LOCK TABLE secret_keys IN SHARE ROW EXCLUSIVE MODE");
  const std::string current = SealedUnder(ring.current_id());
  // Jobs with a secret value not yet under the current key (their digest goes with them).
  const std::string select =
      "SELECT id, secret_env, request_digest FROM jobs WHERE secret_env <> '{}' AND EXISTS "
      "(SELECT 1 FROM unnest(secret_env) WITH ORDINALITY AS e(v, i) WHERE i % 2 = 0 AND v NOT "
      "LIKE " +
      current + ") ORDER BY id FOR UPDATE";
  std::string updates;
  for (const auto& row : txn.exec(select)) {
    const int64_t id = row[0].as<int64_t>();
    std::vector<std::string> env = TextArray(row[1]);
    bool changed = false;
    for (size_t i = 0; i + 1 < env.size(); i += 2) {
      GPUPOOL_ASSIGN_OR_RETURN(
          env[i + 1], Reseal(ring, env[i + 1], SecretEnvContext(id, env[i]),
                             "job " + std::to_string(id) + " secret env " + env[i], &changed));
    }
    std::string digest = row[2].c_str();
    if (!digest.empty()) {
      GPUPOOL_ASSIGN_OR_RETURN(digest,
                               Reseal(ring, digest, RequestDigestContext(id),
                                      "job " + std::to_string(id) + " request digest", &changed));
    }
    if (!changed) continue;
    updates += "UPDATE jobs SET secret_env = ";
    AppendTextArray(&updates, env);
    updates += ", request_digest = ";
    AppendQuoted(&updates, digest);
    updates += " WHERE id = " + std::to_string(id) + ";\n";
    ++counts.jobs;
  }
  pqxx::result creds =
      txn.exec("SELECT ca_key, admin_token FROM cluster_credentials WHERE id = 1 FOR UPDATE");
  if (!creds.empty()) {
    const char* columns[] = {"ca_key", "admin_token"};
    std::string set;
    for (int c = 0; c < 2; ++c) {
      bool changed = false;
      GPUPOOL_ASSIGN_OR_RETURN(
          std::string v, Reseal(ring, creds[0][c].c_str(), ClusterCredentialContext(columns[c]),
                                std::string("cluster credential ") + columns[c], &changed));
      if (!changed) continue;
      set += std::string(set.empty() ? "" : ", ") + columns[c] + " = ";
      AppendQuoted(&set, v);
      ++counts.credentials;
    }
    if (!set.empty()) updates += "UPDATE cluster_credentials SET " + set + " WHERE id = 1;\n";
  }
  for (const auto& row : txn.exec("SELECT tenant, name, password FROM registry_credentials "
                                  "WHERE password NOT LIKE " +
                                  current + " ORDER BY tenant, name FOR UPDATE")) {
    const std::string tenant = row[0].c_str(), name = row[1].c_str();
    bool changed = false;
    GPUPOOL_ASSIGN_OR_RETURN(
        std::string v,
        Reseal(ring, row[2].c_str(), RegistryCredentialContext(tenant, name),
               "registry credential '" + name + "' of tenant '" + tenant + "'", &changed));
    if (!changed) continue;
    updates += "UPDATE registry_credentials SET password = ";
    AppendQuoted(&updates, v);
    updates += " WHERE tenant = ";
    AppendQuoted(&updates, tenant);
    updates += " AND name = ";
    AppendQuoted(&updates, name);
    updates += ";\n";
    ++counts.registry_credentials;
  }
  for (const auto& row : txn.exec("SELECT id, secret FROM webhooks WHERE secret NOT LIKE " +
                                  current + " ORDER BY id FOR UPDATE")) {
    const int64_t id = row[0].as<int64_t>();
    bool changed = false;
    GPUPOOL_ASSIGN_OR_RETURN(std::string v,
                             Reseal(ring, row[1].c_str(), WebhookSecretContext(id),
                                    "webhook " + std::to_string(id) + " secret", &changed));
    if (!changed) continue;
    updates += "UPDATE webhooks SET secret = ";
    AppendQuoted(&updates, v);
    updates += " WHERE id = " + std::to_string(id) + ";\n";
    ++counts.webhooks;
  }
  if (!updates.empty()) txn.exec(updates);
  std::string id_literal;
  AppendQuoted(&id_literal, ring.current_id());
  txn.exec("INSERT INTO secret_keys (id, first_used_ms) VALUES (" + id_literal + ", " +
           std::to_string(now_ms) + ") ON CONFLICT (id) DO UPDATE SET retired_ms = NULL");
  counts.retired_keys = txn.exec("UPDATE secret_keys SET retired_ms = " + std::to_string(now_ms) +
                                 " WHERE retired_ms IS NULL AND id <> " + id_literal)
                            .affected_rows();
  txn.commit();
  return counts;
}

}  // namespace gpupool
