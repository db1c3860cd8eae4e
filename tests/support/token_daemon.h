// Test support: a real gpupoold (embedded PostgreSQL, plaintext on loopback) whose callers hold
// static API tokens, and REST calls made with one of them — what the end-to-end tests of admin
// and tenant verbs share (device slots, MIG layouts, the console).
//
// Thread safety: one test thread.
#pragma once

#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>

#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "tests/api/http_client.h"
#include "tests/support/daemon_process.h"

namespace gpupool::testing {

struct ApiToken {
  std::string token;
  std::string principal;  // a tenant path, or an admin's name
  bool admin = false;
};

// Writes <dir>/gpupoold.yaml — `auth.api_tokens` from `tokens`, then `extra_yaml` (a
// `scheduler:` block, …) — and starts gpupoold on it.
inline Result<std::unique_ptr<DaemonProcess>> StartDaemonWithTokens(
    const std::string& dir, const std::vector<ApiToken>& tokens, const std::string& extra_yaml) {
  {
    std::ofstream out(dir + "/gpupoold.yaml");
    out << "auth:\n  api_tokens:\n";
    for (const ApiToken& t : tokens) {
      out << "    - {token: " << t.token << ", principal: " << t.principal
          << (t.admin ? ", admin: true" : "") << "}\n";
    }
    out << extra_yaml;
    if (!out) return Status::Internal("cannot write " + dir + "/gpupoold.yaml");
  }
  return DaemonProcess::Start({"", {"--config", dir + "/gpupoold.yaml"}});
}

// One REST call to `daemon` with `token` as its bearer credential.
inline api::testing::HttpResult RestAs(const DaemonProcess& daemon, const std::string& token,
                                       api::testing::http::verb v, const std::string& target,
                                       const std::string& body = "") {
  return api::testing::HttpCall(daemon.http_port(), v, target, body,
                                {{"Authorization", "Bearer " + token}});
}

// A REST answer's JSON as message M (unknown fields ignored); a test failure when it does not
// parse.
template <typename M>
M ParseJson(const std::string& json) {
  M m;
  google::protobuf::util::JsonParseOptions o;
  o.ignore_unknown_fields = true;
  EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(json, &m, o).ok()) << json;
  return m;
}

}  // namespace gpupool::testing
