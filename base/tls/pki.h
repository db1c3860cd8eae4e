// pki: gpupoold's private certificate authority and the X.509 work around it, on OpenSSL.
// In base/ because both gpupoold (the CA) and gpupool-agent (keys, CSRs, renewal) use it.
//
// The CA lives in one directory (`<data-dir>/tls/`), created on first start, every file 0600:
//   ca.key, ca.crt          the CA (ECDSA P-256, ten years); ca.crt is what clients trust
//   server.key, server.crt  gpupoold's TLS identity, signed by the CA (SAN: localhost, 127.0.0.1,
//                           ::1 and any names given), re-issued when it nears expiry
// Node certificates are issued from a node's CSR (SignNodeCsr): the CA checks the CSR's
// signature (the requester holds the key) and writes the subject itself — CN = the node name the
// caller was authorised for — ignoring whatever the CSR asked for. That binds a node name to a
// key. Certificates are for TLS client authentication only (no CA bit, extendedKeyUsage
// clientAuth).
//
// Errors: INVALID_ARGUMENT for a malformed or badly signed CSR or PEM; INTERNAL for OpenSSL or
// file-system failures, naming the file.
//
// Thread safety: a CertAuthority is immutable after LoadOrCreate; its methods may be called from
// any thread. The free functions are pure.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace gpupool::tls {

struct KeyAndCsr {
  std::string key_pem;  // PKCS#8 private key
  std::string csr_pem;
};

// What gpupool reads out of a certificate.
struct CertInfo {
  std::string common_name;
  std::string serial_hex;  // uppercase hex, no leading zeros
  int64_t not_before_s = 0;
  int64_t not_after_s = 0;  // seconds since the epoch
};

// A fresh ECDSA P-256 key and a CSR for it with CN = `common_name`.
Result<KeyAndCsr> NewKeyAndCsr(const std::string& common_name);
Result<CertInfo> ParseCert(std::string_view cert_pem);

// Writes `content` to `path` with mode 0600 (via a temporary file and rename).
Status WritePrivateFile(const std::string& path, std::string_view content);

class CertAuthority {
 public:
  // Loads the CA from `dir`, or creates it (and the directory, 0700) when `dir` holds no ca.crt.
  // `server_names`: extra DNS names or IP addresses for server.crt.
  static Result<CertAuthority> LoadOrCreate(const std::string& dir,
                                            const std::vector<std::string>& server_names = {});

  const std::string& ca_pem() const { return ca_pem_; }
  const std::string& server_cert_pem() const { return server_cert_pem_; }
  const std::string& server_key_pem() const { return server_key_pem_; }
  const std::string& dir() const { return dir_; }

  // A client certificate for `node` from `csr_pem`, valid for `validity`.
  Result<std::string> SignNodeCsr(std::string_view csr_pem, const std::string& node,
                                  std::chrono::seconds validity) const;

 private:
  std::string dir_;
  std::string ca_pem_;
  std::string ca_key_pem_;
  std::string server_cert_pem_;
  std::string server_key_pem_;
};

}  // namespace gpupool::tls
