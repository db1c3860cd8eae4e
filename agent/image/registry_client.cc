#include "agent/image/registry_client.h"

#include <openssl/evp.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>
#include <thread>

#include "agent/image/digest.h"
#include "base/log.h"

namespace gpupool::agent::image {
namespace {

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

bool Has(const std::string& text, std::initializer_list<const char*> needles) {
  for (const char* n : needles) {
    if (text.find(n) != std::string::npos) return true;
  }
  return false;
}

std::string Base64(const std::string& in) {
  std::string out(4 * ((in.size() + 2) / 3) + 1, '\0');
  int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(in.data()),
                          static_cast<int>(in.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

}  // namespace

Status ClassifySkopeoFailure(const std::string& image, const ToolResult& run) {
  std::string err = Lower(run.err);
  std::string why = run.Describe();
  if (run.timed_out) return Status::Unavailable("image " + image + ": registry down: " + why);
  if (Has(err, {"no space left on device"})) {
    return Status::ResourceExhausted("image " + image + ": full disk: " + why);
  }
  if (Has(err, {"digest did not match", "digest mismatch", "does not match digest",
                "digest_invalid", "digest invalid"})) {
    return DataLoss("image " + image + ": digest mismatch: " + why);
  }
  if (Has(err, {"manifest unknown", "name unknown", "blob unknown", "repository name not known",
                "manifest_unknown", "name_unknown", "not found"})) {
    return Status::NotFound("image " + image + ": unknown image: " + why);
  }
  if (Has(err, {"unauthorized", "authentication required", "denied", "invalid username",
                "status 401", "status 403", "401 unauthorized", "403 forbidden"})) {
    return Status::PermissionDenied("image " + image + ": registry refused the credential: " + why);
  }
  if (Has(err, {"connection refused", "no such host", "i/o timeout", "timeout", "eof",
                "connection reset", "server misbehaving", "network is unreachable", "status 500",
                "status 502", "status 503", "status 504", "429", "too many requests",
                "500 internal server error", "502 bad gateway", "503 service unavailable",
                "504 gateway timeout", "pinging container registry"})) {
    return Status::Unavailable("image " + image + ": registry down: " + why);
  }
  return Status::Internal("image " + image + ": skopeo failed: " + why);
}

Result<ToolResult> RegistryClient::RunWithRetry(const ImageReference& ref,
                                                std::vector<std::string> args,
                                                const std::string& creds_flag,
                                                const std::string& no_creds_flag) {
  int secret = -1;
  if (credential_.empty()) {
    args.insert(args.begin() + 2, no_creds_flag);
  } else {
    nlohmann::json auth{
        {"auths",
         {{ref.registry, {{"auth", Base64(credential_.username + ":" + credential_.password)}}}}}};
    GPUPOOL_ASSIGN_OR_RETURN(secret, SecretFd("registry-auth", auth.dump()));
    args.insert(args.begin() + 2, creds_flag + "=/proc/self/fd/3");
  }
  ToolResult last;
  int64_t delay = options_.backoff_ms;
  Status st;
  for (int attempt = 1; attempt <= std::max(1, options_.pull_attempts); ++attempt) {
    if (secret >= 0) lseek(secret, 0, SEEK_SET);
    auto run = RunTool({.argv = args,
                        .env = {"HOME=/nonexistent"},
                        .pass_fd = secret,
                        .timeout_ms = options_.tool_timeout_ms,
                        .stdout_fd = -1});
    if (!run.ok()) {
      if (secret >= 0) close(secret);
      return run.status();
    }
    last = std::move(*run);
    if (last.ok()) break;
    st = ClassifySkopeoFailure(ref.Canonical(), last);
    if (st.code() != StatusCode::kUnavailable || attempt == options_.pull_attempts) break;
    LogWarn("image-store", "registry unavailable; retrying",
            {{"image", ref.Canonical()},
             {"attempt", std::to_string(attempt)},
             {"delay_ms", std::to_string(delay)}});
    std::this_thread::sleep_for(std::chrono::milliseconds(delay));
    delay *= 2;
  }
  if (secret >= 0) close(secret);
  if (!last.ok()) {
    if (st.code() == StatusCode::kUnavailable) {
      return Status::Unavailable(st.message() + " (after " +
                                 std::to_string(std::max(1, options_.pull_attempts)) +
                                 " attempts)");
    }
    return st;
  }
  return last;
}

Result<std::string> RegistryClient::InspectRaw(const ImageReference& ref,
                                               const std::string& target) {
  std::vector<std::string> args = {options_.skopeo, "inspect", "--raw"};
  if (!options_.tls_verify) args.push_back("--tls-verify=false");
  args.push_back("docker://" + target);
  GPUPOOL_ASSIGN_OR_RETURN(ToolResult run, RunWithRetry(ref, args, "--authfile", "--no-creds"));
  return run.out;
}

Status RegistryClient::CopyToLayout(const ImageReference& ref, const std::string& target,
                                    const std::string& layout, const std::string& tag) {
  std::vector<std::string> args = {options_.skopeo, "copy", "--preserve-digests", "--quiet"};
  if (!options_.tls_verify) args.push_back("--src-tls-verify=false");
  args.push_back("docker://" + target);
  args.push_back("oci:" + layout + ":" + tag);
  auto run = RunWithRetry(ref, args, "--src-authfile", "--src-no-creds");
  return run.status();
}

}  // namespace gpupool::agent::image
