// A real OpenID Connect provider on loopback for tests: tests/oidc_provider/provider.mjs (panva's
// oidc-provider under Node.js, installed by scripts/install-deps) as a child process. It publishes
// its discovery document and JWKS, signs ID tokens with the first of `keys`, and serves the
// authorization code flow with PKCE to one public client, "gpupool-console".
//
// Stop() and Start() again on the same port model a provider that goes away and comes back, or
// that rotates its keys (start it with a new first key, the old one after it).
#pragma once

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "tests/support/daemon_process.h"
#include "tests/support/free_port.h"
#include "tests/support/wait_for.h"

namespace gpupool::testing {

class OidcProvider {
 public:
  struct Options {
    std::string dir;                                        // for key files and the log
    std::vector<std::pair<std::string, std::string>> keys;  // kid, RSA private key PEM
    std::vector<std::string> redirect_uris;                 // at least one
    std::vector<std::string> accounts;                      // "login=tenant:role" ("-": none)
    int id_token_ttl_s = 600;
  };

  explicit OidcProvider(Options o, int port = 0)
      : options_(std::move(o)), port_(port > 0 ? port : FreePort()) {}

  std::string issuer() const { return "http://127.0.0.1:" + std::to_string(port_); }
  int port() const { return port_; }

  // Starts it and waits until its discovery document is served.
  Status Start() {
    std::vector<std::string> argv = {GPUPOOL_NODE,     GPUPOOL_OIDC_PROVIDER,
                                     "--port",         std::to_string(port_),
                                     "--id-token-ttl", std::to_string(options_.id_token_ttl_s)};
    for (size_t i = 0; i < options_.keys.size(); ++i) {
      const std::string file = options_.dir + "/oidc-key-" + options_.keys[i].first + ".pem";
      std::ofstream(file) << options_.keys[i].second;
      argv.insert(argv.end(), {"--key", options_.keys[i].first + "=" + file});
    }
    for (const std::string& r : options_.redirect_uris) {
      argv.insert(argv.end(), {"--redirect-uri", r});
    }
    for (const std::string& a : options_.accounts) argv.insert(argv.end(), {"--account", a});
    const std::string log = options_.dir + "/oidc-provider.log";
    // The log is appended to across restarts: only what this start writes counts.
    std::error_code ec;
    const uintmax_t before = std::filesystem::exists(log, ec) ? std::filesystem::file_size(log) : 0;
    GPUPOOL_ASSIGN_OR_RETURN(child_, ChildProcess::Spawn(argv, log));
    const bool up = WaitFor(
        [&] {
          std::ifstream in(log);
          in.seekg(static_cast<std::streamoff>(before));
          std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
          return text.find("issuer " + issuer()) != std::string::npos || !child_->Running();
        },
        std::chrono::seconds(60), std::chrono::milliseconds(50));
    if (!up || !child_->Running()) {
      return Status::Unavailable("the OIDC provider did not start; see " + log +
                                 " (scripts/install-deps installs its npm packages)");
    }
    return Status::Ok();
  }

  void Stop() {
    if (!child_) return;
    child_->Signal(SIGTERM);
    if (child_->Wait(std::chrono::seconds(10)) < 0) child_->Signal(SIGKILL);
    child_.reset();
  }

  void set_keys(std::vector<std::pair<std::string, std::string>> keys) {
    options_.keys = std::move(keys);
  }

  ~OidcProvider() { Stop(); }

 private:
  Options options_;
  int port_;
  std::unique_ptr<ChildProcess> child_;
};

}  // namespace gpupool::testing
