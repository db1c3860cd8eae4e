#include "cmd/daemon/cluster_credentials.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "api/credentials.h"
#include "base/log.h"
#include "base/tls/pki.h"
#include "store/pg_cluster_credentials.h"

namespace gpupool {

namespace fs = std::filesystem;

namespace {

Result<std::string> ReadWhole(const fs::path& path) {
  std::ifstream in(path);
  if (!in) return Status::Internal(path.string() + ": cannot read");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Status Refuse(const fs::path& file, const std::string& what) {
  return Status::FailedPrecondition(
      file.string() + ": this replica already has " + what +
      ", and it is not the one the replicas share (published in PostgreSQL by the first secure "
      "replica, table cluster_credentials). Move the data directory's tls/ and admin.token aside "
      "to adopt the shared ones, or give every replica these files before their first start");
}

}  // namespace

Status ShareClusterCredentials(const std::string& uri, const std::string& data_dir,
                               const std::vector<std::string>& server_names,
                               const SecretKeyring& ring) {
  const fs::path tls_dir = fs::path(data_dir) / "tls";
  const fs::path ca_crt = tls_dir / "ca.crt", ca_key = tls_dir / "ca.key";
  const fs::path token_path = fs::path(data_dir) / "admin.token";
  std::error_code ec;
  const bool had_ca = fs::exists(ca_crt, ec);
  const bool had_token = fs::exists(token_path, ec);

  // Ours, as a single replica would have them (created now when missing).
  GPUPOOL_RETURN_IF_ERROR(
      tls::CertAuthority::LoadOrCreate(tls_dir.string(), server_names).status());
  ClusterCredentials mine;
  GPUPOOL_ASSIGN_OR_RETURN(mine.admin_token,
                           api::LoadOrCreateTokenFile(token_path.string(), "the admin credential"));
  GPUPOOL_ASSIGN_OR_RETURN(mine.ca_cert_pem, ReadWhole(ca_crt));
  GPUPOOL_ASSIGN_OR_RETURN(mine.ca_key_pem, ReadWhole(ca_key));

  GPUPOOL_ASSIGN_OR_RETURN(ClusterCredentials shared, PublishClusterCredentials(uri, mine, ring));
  if (shared == mine) {
    LogInfo("gpupoold",
            "secure replicas: this replica's CA and admin credential are the shared ones",
            {{"ca", ca_crt.string()}});
    return Status::Ok();
  }
  const bool other_ca =
      shared.ca_cert_pem != mine.ca_cert_pem || shared.ca_key_pem != mine.ca_key_pem;
  if (other_ca && had_ca) return Refuse(ca_crt, "a CA");
  if (shared.admin_token != mine.admin_token && had_token) {
    return Refuse(token_path, "an admin credential");
  }
  // The admin credential first, the CA last: whoever takes the shared CA on disk as the sign
  // that this replica adopted the cluster's credentials finds the token adopted too.
  if (shared.admin_token != mine.admin_token) {
    GPUPOOL_RETURN_IF_ERROR(tls::WritePrivateFile(token_path.string(), shared.admin_token + "\n"));
  }
  if (other_ca) {
    GPUPOOL_RETURN_IF_ERROR(tls::WritePrivateFile(ca_key.string(), shared.ca_key_pem));
    GPUPOOL_RETURN_IF_ERROR(tls::WritePrivateFile(ca_crt.string(), shared.ca_cert_pem));
    // Issued by the CA just discarded: the next LoadOrCreate issues one from the shared CA.
    fs::remove(tls_dir / "server.crt", ec);
    fs::remove(tls_dir / "server.key", ec);
  }
  LogInfo("gpupoold", "secure replicas: adopted the shared CA and admin credential",
          {{"ca", ca_crt.string()}});
  return Status::Ok();
}

}  // namespace gpupool
