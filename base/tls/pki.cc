#include "base/tls/pki.h"

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>

#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include "base/address_list.h"
#include "base/tls/openssl_ptr.h"

namespace gpupool::tls {
namespace {

namespace fs = std::filesystem;

using Cert = OpenSslPtr<X509, X509_free>;
using Req = OpenSslPtr<X509_REQ, X509_REQ_free>;

constexpr int64_t kDay = 86'400;
constexpr int64_t kCaLifetime = 3650 * kDay;
constexpr int64_t kServerLifetime = 365 * kDay;

// The newest OpenSSL error as text, for INTERNAL messages.
std::string SslError(const char* what) {
  const unsigned long e = ERR_get_error();
  char buf[256] = {0};
  if (e != 0) ERR_error_string_n(e, buf, sizeof buf);
  ERR_clear_error();
  return std::string(what) + (e != 0 ? std::string(": ") + buf : "");
}

Pkey NewKey() { return Pkey(EVP_EC_gen("P-256")); }

std::string KeyPem(EVP_PKEY* key) {
  Bio bio(BIO_new(BIO_s_mem()));
  if (!PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr)) return "";
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(n));
}

std::string CertPem(X509* cert) {
  Bio bio(BIO_new(BIO_s_mem()));
  if (!PEM_write_bio_X509(bio.get(), cert)) return "";
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(n));
}

Pkey ReadKey(std::string_view pem) {
  Bio bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  return Pkey(PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr));
}

Cert ReadCert(std::string_view pem) {
  Bio bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  return Cert(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
}

bool SetName(X509_NAME* name, const std::string& cn) {
  return X509_NAME_add_entry_by_txt(name, "O", MBSTRING_UTF8,
                                    reinterpret_cast<const unsigned char*>("gpupool"), -1, -1,
                                    0) == 1 &&
         X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8,
                                    reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1,
                                    0) == 1;
}

bool AddExt(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str());
  if (ext == nullptr) return false;
  const bool ok = X509_add_ext(cert, ext, -1) == 1;
  X509_EXTENSION_free(ext);
  return ok;
}

// A certificate for `pubkey` named `cn`, signed by `issuer_key` (self-signed when issuer is null).
Result<Cert> Issue(EVP_PKEY* pubkey, const std::string& cn, X509* issuer, EVP_PKEY* issuer_key,
                   int64_t lifetime_s, const std::vector<std::pair<int, std::string>>& exts) {
  Cert cert(X509_new());
  if (!cert) return Status::Internal(SslError("X509_new"));
  X509_set_version(cert.get(), 2);
  // A random 127-bit serial: unique without a counter to keep.
  Bignum bn(BN_new());
  if (!bn || !BN_rand(bn.get(), 127, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) ||
      !BN_to_ASN1_INTEGER(bn.get(), X509_get_serialNumber(cert.get()))) {
    return Status::Internal(SslError("serial number"));
  }
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -300);  // tolerate a little clock skew
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), static_cast<long>(lifetime_s));
  if (!X509_set_pubkey(cert.get(), pubkey) || !SetName(X509_get_subject_name(cert.get()), cn)) {
    return Status::Internal(SslError("certificate subject"));
  }
  X509* signer = issuer != nullptr ? issuer : cert.get();
  if (!X509_set_issuer_name(cert.get(), X509_get_subject_name(signer))) {
    return Status::Internal(SslError("certificate issuer"));
  }
  for (const auto& [nid, value] : exts) {
    if (!AddExt(cert.get(), signer, nid, value)) {
      return Status::Internal(SslError("certificate extension"));
    }
  }
  if (X509_sign(cert.get(), issuer_key, EVP_sha256()) == 0) {
    return Status::Internal(SslError("signing the certificate"));
  }
  return cert;
}

Result<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::Internal(path + ": cannot read");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string SanList(const std::vector<std::string>& names) {
  // kReplicaTlsName: what a client given several replicas checks (base/address_list.h).
  std::string out = std::string("DNS:localhost,DNS:") + kReplicaTlsName + ",IP:127.0.0.1,IP:::1";
  for (const std::string& n : names) {
    const bool ip = !n.empty() &&
                    n.find_first_not_of("0123456789.:abcdefABCDEF") == std::string::npos &&
                    n.find_first_of(".:") != std::string::npos;
    out += (ip ? ",IP:" : ",DNS:") + n;
  }
  return out;
}

}  // namespace

Status WritePrivateFile(const std::string& path, std::string_view content) {
  const std::string tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) return Status::Internal(tmp + ": cannot create");
  ::chmod(tmp.c_str(), 0600);
  const bool ok = std::fwrite(content.data(), 1, content.size(), f) == content.size();
  if (std::fclose(f) != 0 || !ok) return Status::Internal(tmp + ": write failed");
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) return Status::Internal(path + ": " + ec.message());
  return Status::Ok();
}

Result<KeyAndCsr> NewKeyAndCsr(const std::string& common_name) {
  Pkey key = NewKey();
  if (!key) return Status::Internal(SslError("key generation"));
  Req req(X509_REQ_new());
  if (!req || !X509_REQ_set_pubkey(req.get(), key.get()) ||
      !SetName(X509_REQ_get_subject_name(req.get()), common_name) ||
      X509_REQ_sign(req.get(), key.get(), EVP_sha256()) == 0) {
    return Status::Internal(SslError("CSR"));
  }
  Bio bio(BIO_new(BIO_s_mem()));
  if (!PEM_write_bio_X509_REQ(bio.get(), req.get())) return Status::Internal(SslError("CSR PEM"));
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio.get(), &data);
  return KeyAndCsr{KeyPem(key.get()), std::string(data, static_cast<size_t>(n))};
}

Result<CertInfo> ParseCert(std::string_view cert_pem) {
  Cert cert = ReadCert(cert_pem);
  if (!cert) {
    ERR_clear_error();
    return Status::InvalidArgument("not a PEM certificate");
  }
  CertInfo info;
  char cn[256] = {0};
  if (X509_NAME_get_text_by_NID(X509_get_subject_name(cert.get()), NID_commonName, cn, sizeof cn) >
      0) {
    info.common_name = cn;
  }
  Bignum bn(ASN1_INTEGER_to_BN(X509_get0_serialNumber(cert.get()), nullptr));
  if (bn) {
    char* hex = BN_bn2hex(bn.get());
    info.serial_hex = hex;
    OPENSSL_free(hex);
  }
  const auto to_epoch = [](const ASN1_TIME* t) -> int64_t {
    struct tm tm = {};
    if (ASN1_TIME_to_tm(t, &tm) != 1) return 0;
    return static_cast<int64_t>(timegm(&tm));
  };
  info.not_before_s = to_epoch(X509_get0_notBefore(cert.get()));
  info.not_after_s = to_epoch(X509_get0_notAfter(cert.get()));
  return info;
}

Result<CertAuthority> CertAuthority::LoadOrCreate(const std::string& dir,
                                                  const std::vector<std::string>& server_names) {
  CertAuthority ca;
  ca.dir_ = dir;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return Status::Internal(dir + ": " + ec.message());
  fs::permissions(dir, fs::perms::owner_all, fs::perm_options::replace, ec);
  const std::string ca_crt = dir + "/ca.crt", ca_key = dir + "/ca.key";
  if (!fs::exists(ca_crt)) {
    Pkey key = NewKey();
    if (!key) return Status::Internal(SslError("CA key generation"));
    GPUPOOL_ASSIGN_OR_RETURN(Cert cert,
                             Issue(key.get(), "gpupool CA", nullptr, key.get(), kCaLifetime,
                                   {{NID_basic_constraints, "critical,CA:TRUE"},
                                    {NID_key_usage, "critical,keyCertSign,cRLSign"},
                                    {NID_subject_key_identifier, "hash"}}));
    GPUPOOL_RETURN_IF_ERROR(WritePrivateFile(ca_key, KeyPem(key.get())));
    GPUPOOL_RETURN_IF_ERROR(WritePrivateFile(ca_crt, CertPem(cert.get())));
  }
  GPUPOOL_ASSIGN_OR_RETURN(ca.ca_pem_, ReadFile(ca_crt));
  GPUPOOL_ASSIGN_OR_RETURN(ca.ca_key_pem_, ReadFile(ca_key));
  Cert ca_cert = ReadCert(ca.ca_pem_);
  Pkey ca_pkey = ReadKey(ca.ca_key_pem_);
  if (!ca_cert || !ca_pkey) return Status::Internal(SslError((dir + ": unreadable CA").c_str()));

  // The server certificate: issued when missing or in the last third of its life.
  const std::string srv_crt = dir + "/server.crt", srv_key = dir + "/server.key";
  bool issue = !fs::exists(srv_crt) || !fs::exists(srv_key);
  if (!issue) {
    GPUPOOL_ASSIGN_OR_RETURN(std::string pem, ReadFile(srv_crt));
    Result<CertInfo> info = ParseCert(pem);
    const int64_t now = static_cast<int64_t>(std::time(nullptr));
    issue = !info.ok() || now > info->not_after_s - kServerLifetime / 3;
  }
  if (issue) {
    Pkey key = NewKey();
    if (!key) return Status::Internal(SslError("server key generation"));
    GPUPOOL_ASSIGN_OR_RETURN(
        Cert cert, Issue(key.get(), "gpupoold", ca_cert.get(), ca_pkey.get(), kServerLifetime,
                         {{NID_basic_constraints, "critical,CA:FALSE"},
                          {NID_key_usage, "critical,digitalSignature"},
                          {NID_ext_key_usage, "serverAuth"},
                          {NID_subject_alt_name, SanList(server_names)}}));
    GPUPOOL_RETURN_IF_ERROR(WritePrivateFile(srv_key, KeyPem(key.get())));
    GPUPOOL_RETURN_IF_ERROR(WritePrivateFile(srv_crt, CertPem(cert.get())));
  }
  GPUPOOL_ASSIGN_OR_RETURN(ca.server_cert_pem_, ReadFile(srv_crt));
  GPUPOOL_ASSIGN_OR_RETURN(ca.server_key_pem_, ReadFile(srv_key));
  return ca;
}

Result<std::string> CertAuthority::SignNodeCsr(std::string_view csr_pem, const std::string& node,
                                               std::chrono::seconds validity) const {
  Bio bio(BIO_new_mem_buf(csr_pem.data(), static_cast<int>(csr_pem.size())));
  Req req(PEM_read_bio_X509_REQ(bio.get(), nullptr, nullptr, nullptr));
  if (!req) {
    ERR_clear_error();
    return Status::InvalidArgument("csr_pem: not a PEM certificate signing request");
  }
  EVP_PKEY* pub = X509_REQ_get0_pubkey(req.get());
  if (pub == nullptr || X509_REQ_verify(req.get(), pub) != 1) {
    ERR_clear_error();
    return Status::InvalidArgument("csr_pem: the request's signature does not verify");
  }
  Cert ca_cert = ReadCert(ca_pem_);
  Pkey ca_key = ReadKey(ca_key_pem_);
  if (!ca_cert || !ca_key) return Status::Internal(SslError("CA"));
  GPUPOOL_ASSIGN_OR_RETURN(Cert cert,
                           Issue(pub, node, ca_cert.get(), ca_key.get(), validity.count(),
                                 {{NID_basic_constraints, "critical,CA:FALSE"},
                                  {NID_key_usage, "critical,digitalSignature"},
                                  {NID_ext_key_usage, "clientAuth"}}));
  return CertPem(cert.get());
}

}  // namespace gpupool::tls
