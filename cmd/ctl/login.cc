// gpupoolctl login / config: save where gpupoold is, the CA to trust and the credential, so that
// later commands need no flags (client_config.h has the file and the precedence).
//
// `login` checks the settings against the server (one authenticated call) before saving them,
// so a typo in the address or a wrong token is reported now rather than on the next command.
#include <filesystem>

#include "cmd/ctl/app.h"
#include "cmd/ctl/client_config.h"
#include "gpupool/v1/pools.grpc.pb.h"
#include "pool/yaml_error.h"

namespace gpupool::ctl {
namespace {

std::string Trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

std::string Redacted(const std::string& token) {
  if (token.empty()) return "(none)";
  return token.substr(0, std::min<size_t>(token.size(), 8)) + "… (" + std::to_string(token.size()) +
         " characters)";
}

int Login(Ctx& ctx, const ParsedArgs& a) {
  ClientConfig c;
  c.server = ctx.server;
  c.token = ctx.token;
  c.ca = ctx.ca_path;
  if (const std::string dir = a.Get("data-dir"); !dir.empty()) {
    // The daemon's own directory: its admin credential and its CA.
    const std::filesystem::path d = std::filesystem::absolute(dir);
    if (!a.Has("token") && !a.Has("token-file")) {
      Result<std::string> t = ReadTextFile((d / "admin.token").string());
      if (!t.ok()) return ctx.Fail(t.status().WithContext("--data-dir"), kExitUsage);
      c.token = Trimmed(*t);
    }
    if (!a.Has("ca")) c.ca = (d / "tls" / "ca.crt").string();
  }
  if (const std::string f = a.Get("token-file"); !f.empty()) {
    Result<std::string> t = ReadTextFile(f);
    if (!t.ok()) return ctx.Fail(t.status().WithContext("--token-file"), kExitUsage);
    c.token = Trimmed(*t);
  }
  if (c.token.empty()) {
    return ctx.Usage("no credential: give --token, --token-file or --data-dir");
  }
  if (!c.ca.empty()) {
    Result<std::string> pem = ReadTextFile(c.ca);
    if (!pem.ok()) return ctx.Fail(pem.status().WithContext("CA certificate"), kExitUsage);
    c.ca = std::filesystem::absolute(c.ca).string();
    ctx.ca_pem = std::move(pem).value();
  }
  ctx.token = c.token;
  // One authenticated call proves the address, the CA and the credential.
  v1::ListPoolsResponse resp;
  auto call = ctx.NewCall();
  grpc::Status st =
      v1::PoolService::NewStub(ctx.channel())->ListPools(call.get(), v1::ListPoolsRequest(), &resp);
  if (!st.ok()) return ctx.Fail(st);
  if (Status s = SaveClientConfig(ctx.config_path, c); !s.ok()) return ctx.Fail(s, kExitError);
  ctx.out << "logged in to " << c.server << (c.ca.empty() ? " (plaintext)" : " (TLS)")
          << "; settings saved in " << ctx.config_path << "\n";
  return kExitOk;
}

int ConfigShow(Ctx& ctx, const ParsedArgs&) {
  ctx.out << "config file: " << (ctx.config_path.empty() ? "(none)" : ctx.config_path) << "\n"
          << "server:      " << ctx.server << "\n"
          << "ca:          " << (ctx.ca_path.empty() ? "(none: plaintext)" : ctx.ca_path) << "\n"
          << "token:       " << Redacted(ctx.token) << "\n";
  return kExitOk;
}

int ConfigSet(Ctx& ctx, const ParsedArgs& a) {
  Result<ClientConfig> c = LoadClientConfig(ctx.config_path);
  if (!c.ok()) return ctx.Fail(c.status(), kExitUsage);
  const std::string& key = a.positional[0];
  const std::string value = a.positional.size() > 1 ? a.positional[1] : "";
  if (key == "server") {
    c->server = value;
  } else if (key == "ca") {
    c->ca = value.empty() ? "" : std::filesystem::absolute(value).string();
  } else if (key == "token") {
    c->token = value;
  } else {
    return ctx.Usage("unknown setting '" + key + "': expected server, ca or token");
  }
  if (Status s = SaveClientConfig(ctx.config_path, *c); !s.ok()) return ctx.Fail(s, kExitError);
  ctx.out << key << (value.empty() ? " cleared" : " set") << " in " << ctx.config_path << "\n";
  return kExitOk;
}

}  // namespace

std::vector<Command> LoginCommands() {
  return {
      {"login",
       "[--server HOST:PORT] (--data-dir DIR | --token TOKEN | --token-file FILE) [--ca FILE]",
       "Check a server address, CA and credential, and save them for later commands",
       "Saves the settings in $XDG_CONFIG_HOME/gpupool/config (default ~/.config/gpupool/config,\n"
       "or $GPUPOOL_CONFIG), mode 0600, after one authenticated call succeeds. --data-dir reads\n"
       "gpupoold's own directory: its admin credential (DIR/admin.token) and CA (DIR/tls/ca.crt).",
       {{"data-dir", 0, FlagKind::kValue, "DIR", "gpupoold's data directory (admin login)"},
        {"token-file", 0, FlagKind::kValue, "FILE", "read the credential from FILE"}},
       "  gpupoolctl login --server 127.0.0.1:7070 --data-dir /var/lib/gpupool\n"
       "  gpupoolctl login --server gpu.example:7070 --ca ca.crt --token-file key.txt\n",
       0,
       0,
       Login},
      {"config show",
       "",
       "Show the settings in effect (server, CA, credential redacted) and the config file",
       "Flags and GPUPOOL_SERVER/GPUPOOL_TOKEN/GPUPOOL_CA override the file.",
       {},
       "  gpupoolctl config show\n",
       0,
       0,
       ConfigShow},
      {"config set",
       "KEY [VALUE]",
       "Set (or, without VALUE, clear) server, ca or token in the config file",
       "",
       {},
       "  gpupoolctl config set server gpu.example:7070\n  gpupoolctl config set ca ./ca.crt\n",
       1,
       2,
       ConfigSet},
  };
}

}  // namespace gpupool::ctl
