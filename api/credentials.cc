#include "api/credentials.h"

#include <openssl/evp.h>
#include <openssl/rand.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "base/tls/pki.h"

namespace gpupool::api {
namespace {

constexpr char kHex[] = "0123456789abcdef";

std::string Hex(const unsigned char* p, size_t n) {
  std::string out;
  out.reserve(2 * n);
  for (size_t i = 0; i < n; ++i) {
    out.push_back(kHex[p[i] >> 4]);
    out.push_back(kHex[p[i] & 0xf]);
  }
  return out;
}

bool IsLowerHex(std::string_view s, size_t n) {
  return s.size() == n && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

}  // namespace

Result<std::string> RandomHex(size_t bytes) {
  std::vector<unsigned char> buf(bytes);
  if (RAND_bytes(buf.data(), static_cast<int>(buf.size())) != 1) {
    return Status::Internal("the system's random number generator failed");
  }
  return Hex(buf.data(), buf.size());
}

std::string Sha256Hex(std::string_view data) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(data.data(), data.size(), md, &len, EVP_sha256(), nullptr);
  return Hex(md, len);
}

bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  const size_t n = std::max(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= static_cast<unsigned char>(x ^ y);
  }
  return diff == 0;
}

Result<ApiKeySecret> NewApiKeySecret() {
  ApiKeySecret k;
  GPUPOOL_ASSIGN_OR_RETURN(k.id, RandomHex(6));
  GPUPOOL_ASSIGN_OR_RETURN(k.secret, RandomHex(32));
  return k;
}

bool LooksLikeApiKey(std::string_view text) { return text.rfind("gpk_", 0) == 0; }

Result<ApiKeySecret> ParseApiKey(std::string_view text) {
  // gpk_ + 12 + _ + 64
  if (text.size() != 4 + 12 + 1 + 64 || !LooksLikeApiKey(text) || text[16] != '_' ||
      !IsLowerHex(text.substr(4, 12), 12) || !IsLowerHex(text.substr(17), 64)) {
    return Status::InvalidArgument("malformed API key");
  }
  return ApiKeySecret{std::string(text.substr(4, 12)), std::string(text.substr(17))};
}

Result<ApiKeySecret> NewJoinTokenSecret() { return NewApiKeySecret(); }

bool LooksLikeJoinToken(std::string_view text) { return text.rfind("gpj_", 0) == 0; }

Result<ApiKeySecret> ParseJoinToken(std::string_view text) {
  if (!LooksLikeJoinToken(text)) return Status::InvalidArgument("malformed join token");
  Result<ApiKeySecret> k = ParseApiKey("gpk_" + std::string(text.substr(4)));
  if (!k.ok()) return Status::InvalidArgument("malformed join token");
  return k;
}

Result<std::string> LoadOrCreateTokenFile(const std::string& path, std::string_view what) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::exists(path, ec)) {
    GPUPOOL_ASSIGN_OR_RETURN(std::string token, RandomHex(32));
    const fs::path parent = fs::path(path).parent_path();
    if (!parent.empty()) fs::create_directories(parent, ec);
    GPUPOOL_RETURN_IF_ERROR(tls::WritePrivateFile(path, token + "\n"));
    return token;
  }
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return Status::Internal(path + ": cannot stat");
  if ((st.st_mode & 077) != 0) {
    return Status::FailedPrecondition(path +
                                      ": readable by others than its owner; chmod 600 it (it "
                                      "is " +
                                      std::string(what) + ")");
  }
  std::ifstream in(path);
  if (!in) return Status::Internal(path + ": cannot read");
  std::stringstream ss;
  ss << in.rdbuf();
  std::string token = ss.str();
  while (!token.empty() && (token.back() == '\n' || token.back() == '\r' || token.back() == ' ')) {
    token.pop_back();
  }
  if (token.size() < 16 || token.find_first_of(" \t\r\n") != std::string::npos) {
    return Status::FailedPrecondition(
        path + ": not a valid token (one line, at least 16 characters) for " + std::string(what) +
        "; delete it to have a new one created");
  }
  return token;
}

}  // namespace gpupool::api
