#include "cmd/daemon/secrets_key.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "base/log.h"
#include "base/run_tool.h"
#include "base/tls/pki.h"

namespace gpupool {
namespace {

namespace fs = std::filesystem;

Result<SecretKeyring> ReadKeyFile(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    return Status::FailedPrecondition(
        path + ": no secrets key there (" + std::strerror(errno) +
        "). Give gpupoold the key it sealed the database's secrets with, or for a new database "
        "create one: (umask 077; openssl rand -base64 32 > " +
        path + ")");
  }
  if ((st.st_mode & 077) != 0) {
    return Status::FailedPrecondition(
        path + ": the secrets key is readable by others than its owner; chmod 600 it");
  }
  std::ifstream in(path);
  if (!in) return Status::FailedPrecondition(path + ": cannot read the secrets key");
  std::stringstream text;
  text << in.rdbuf();
  Result<SecretKeyring> ring = SecretKeyring::Parse(text.str(), path);
  if (!ring.ok()) return Status::FailedPrecondition(ring.status().message());
  return ring;
}

Result<SecretKeyring> RunKeyCommand(const DaemonConfig::Secrets& s) {
  const std::string what = "secrets.key_command (" + s.key_command.front() + ")";
  ToolRun run;
  run.argv = s.key_command;
  run.timeout_ms = s.key_command_timeout_ms;
  Result<ToolResult> r = RunTool(run);
  if (!r.ok()) return Status::FailedPrecondition(what + ": " + r.status().message());
  if (r->timed_out) {
    return Status::FailedPrecondition(what + ": no answer within " +
                                      std::to_string(s.key_command_timeout_ms) + " ms");
  }
  if (!r->ok()) return Status::FailedPrecondition(what + ": " + r->Describe());
  Result<SecretKeyring> ring = SecretKeyring::Parse(r->out, what);
  if (!ring.ok()) return Status::FailedPrecondition(ring.status().message());
  return ring;
}

}  // namespace

Result<std::shared_ptr<const SecretKeyring>> LoadSecretsKey(const DaemonConfig& config) {
  const DaemonConfig::Secrets& s = config.secrets;
  Result<SecretKeyring> ring = Status::Internal("unset");
  if (!s.key_command.empty()) {
    ring = RunKeyCommand(s);
  } else if (!s.key_file.empty()) {
    ring = ReadKeyFile(s.key_file);
  } else {
    const std::string path = (fs::path(config.data_dir) / "secrets.key").string();
    std::error_code ec;
    if (!fs::exists(path, ec)) {
      GPUPOOL_ASSIGN_OR_RETURN(std::string text, SecretKeyring::NewKeyFileText());
      fs::create_directories(config.data_dir, ec);
      GPUPOOL_RETURN_IF_ERROR(tls::WritePrivateFile(path, text));
      LogInfo("gpupoold", "created the secrets key; back it up apart from the database",
              {{"file", path}});
    }
    ring = ReadKeyFile(path);
  }
  if (!ring.ok()) return ring.status();
  LogInfo("gpupoold", "secrets at rest are sealed",
          {{"key", ring->current_id()},
           {"keys", std::to_string(ring->ids().size())},
           {"source", ring->source()}});
  return std::make_shared<const SecretKeyring>(*std::move(ring));
}

}  // namespace gpupool
