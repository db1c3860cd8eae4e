#include "tests/agent/oci_registry.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "base/run_tool.h"
#include "tests/support/free_port.h"
#include "tests/support/wait_for.h"

namespace gpupool::testing {
namespace {

namespace fs = std::filesystem;

bool Accepts(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bool ok = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  close(fd);
  return ok;
}

Status Run(std::vector<std::string> argv) {
  auto r = RunTool(
      {.argv = std::move(argv), .env = {}, .pass_fd = -1, .timeout_ms = 120'000, .stdout_fd = -1});
  if (!r.ok()) return r.status();
  if (!r->ok()) return Status::Internal(r->Describe());
  return Status::Ok();
}

bool HaveTool(const std::string& name) {
  auto r = RunTool({.argv = {"sh", "-c", "command -v " + name},
                    .env = {},
                    .pass_fd = -1,
                    .timeout_ms = 10'000,
                    .stdout_fd = -1});
  return r.ok() && r->ok();
}

}  // namespace

std::string MakeScratchDir(const std::string& prefix) {
  std::string tmpl = prefix + "XXXXXX";
  return mkdtemp(tmpl.data());
}

std::string ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

LocalRegistry::~LocalRegistry() {
  Stop();
  std::error_code ec;
  if (!dir_.empty()) fs::remove_all(dir_, ec);
}

Status LocalRegistry::Start(const std::string& htpasswd_user, const std::string& bcrypt_hash) {
  for (const char* tool : {"docker-registry", "skopeo", "umoci"}) {
    if (!HaveTool(tool)) {
      return Status::FailedPrecondition(std::string(tool) +
                                        " is not installed (scripts/install-deps installs it)");
    }
  }
  if (dir_.empty()) dir_ = MakeScratchDir("/tmp/gpupool-registry-");
  if (port_ == 0) port_ = FreePort();
  std::ofstream config(dir_ + "/config.yml");
  config << "version: 0.1\n"
         << "log:\n  level: info\n  accesslog:\n    disabled: false\n"
         << "storage:\n  filesystem:\n    rootdirectory: " << dir_ << "/data\n"
         << "  delete:\n    enabled: true\n"
         << "http:\n  addr: 127.0.0.1:" << port_ << "\n";
  if (!htpasswd_user.empty()) {
    std::ofstream(dir_ + "/htpasswd") << htpasswd_user << ":" << bcrypt_hash << "\n";
    config << "auth:\n  htpasswd:\n    realm: gpupool-test\n    path: " << dir_ << "/htpasswd\n";
  }
  config.close();
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, (dir_ + "/registry.log").c_str(),
                                   O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  std::string cfg = dir_ + "/config.yml";
  const char* argv[] = {"docker-registry", "serve", cfg.c_str(), nullptr};
  const char* envp[] = {"PATH=/usr/bin:/bin", nullptr};
  int rc = posix_spawnp(&pid_, "docker-registry", &fa, nullptr, const_cast<char**>(argv),
                        const_cast<char**>(envp));
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) {
    pid_ = -1;
    return Status::Internal("cannot start docker-registry");
  }
  if (!WaitFor([&] { return Accepts(port_); }, std::chrono::seconds(20))) {
    Stop();
    return Status::Internal("docker-registry did not listen on " + host() + ": " +
                            ReadWholeFile(dir_ + "/registry.log"));
  }
  return Status::Ok();
}

void LocalRegistry::Stop() {
  if (pid_ <= 0) return;
  kill(pid_, SIGTERM);
  int status = 0;
  waitpid(pid_, &status, 0);
  pid_ = -1;
}

size_t LocalRegistry::LogBytes() const { return ReadWholeFile(dir_ + "/registry.log").size(); }

int LocalRegistry::BlobGets(const std::string& digest, size_t since) const {
  const std::string text = ReadWholeFile(dir_ + "/registry.log");
  std::istringstream log(since < text.size() ? text.substr(since) : std::string());
  int n = 0;
  for (std::string line; std::getline(log, line);) {
    if (line.find("\"GET ") != std::string::npos &&
        line.find("/blobs/" + digest + " ") != std::string::npos) {
      ++n;
    }
  }
  return n;
}

std::string LocalRegistry::BlobDataPath(const std::string& digest) const {
  std::string hex = digest.substr(7);
  return dir_ + "/data/docker/registry/v2/blobs/sha256/" + hex.substr(0, 2) + "/" + hex + "/data";
}

TestLayer BusyboxLayer() {
  TestLayer layer;
  layer.copy_from_host["/bin/busybox"] = "/bin/busybox";
  for (const char* applet : {"sh", "id", "ls", "cat", "echo", "sleep", "nc", "unshare", "head",
                             "tail", "test", "touch", "mkdir", "stat", "true", "wc", "dd"}) {
    layer.symlinks[std::string("/bin/") + applet] = "busybox";
  }
  return layer;
}

Result<std::string> BuildAndPush(const LocalRegistry& registry, const std::string& work_dir,
                                 const std::string& repository, const std::string& tag,
                                 const std::vector<TestLayer>& layers,
                                 const std::vector<std::string>& cmd, const std::string& push_user,
                                 const std::string& push_password) {
  std::string layout = work_dir + "/layout-" + tag;
  std::string bundle = work_dir + "/bundle-" + tag;
  std::error_code ec;
  fs::remove_all(layout, ec);
  std::string image = layout + ":" + tag;
  GPUPOOL_RETURN_IF_ERROR(Run({"umoci", "init", "--layout", layout}));
  GPUPOOL_RETURN_IF_ERROR(Run({"umoci", "new", "--image", image}));
  for (const TestLayer& layer : layers) {
    fs::remove_all(bundle, ec);
    std::vector<std::string> unpack = {"umoci", "unpack", "--image", image, bundle};
    if (geteuid() != 0) unpack.insert(unpack.begin() + 2, "--rootless");
    GPUPOOL_RETURN_IF_ERROR(Run(unpack));
    std::string rootfs = bundle + "/rootfs";
    for (const auto& [path, content] : layer.files) {
      fs::create_directories(fs::path(rootfs + path).parent_path());
      std::ofstream(rootfs + path, std::ios::binary) << content;
      chmod((rootfs + path).c_str(), path.rfind("/bin/", 0) == 0 ? 0755 : 0644);
    }
    for (const auto& [path, host] : layer.copy_from_host) {
      fs::create_directories(fs::path(rootfs + path).parent_path());
      fs::copy_file(host, rootfs + path, fs::copy_options::overwrite_existing, ec);
      if (ec) return Status::Internal("copy " + host + ": " + ec.message());
      chmod((rootfs + path).c_str(), 0755);
    }
    for (const auto& [path, target] : layer.symlinks) {
      fs::create_directories(fs::path(rootfs + path).parent_path());
      fs::create_symlink(target, rootfs + path, ec);
    }
    // Fixed times: the same files make the same layer (same digest) in every build.
    const timespec times[2] = {{1577836800, 0}, {1577836800, 0}};
    for (const auto& entry : fs::recursive_directory_iterator(rootfs)) {
      utimensat(AT_FDCWD, entry.path().c_str(), times, AT_SYMLINK_NOFOLLOW);
    }
    utimensat(AT_FDCWD, rootfs.c_str(), times, AT_SYMLINK_NOFOLLOW);
    GPUPOOL_RETURN_IF_ERROR(Run({"umoci", "repack", "--image", image, bundle}));
  }
  std::vector<std::string> config = {"umoci", "config", "--image", image};
  for (const auto& c : cmd) config.push_back("--config.cmd=" + c);
  GPUPOOL_RETURN_IF_ERROR(Run(config));
  std::vector<std::string> push = {"skopeo", "copy", "--quiet", "--dest-tls-verify=false"};
  if (!push_user.empty()) push.push_back("--dest-creds=" + push_user + ":" + push_password);
  push.push_back("oci:" + image);
  push.push_back("docker://" + registry.host() + "/" + repository + ":" + tag);
  GPUPOOL_RETURN_IF_ERROR(Run(push));
  auto digest = RunTool({.argv = {"skopeo", "inspect", "--tls-verify=false", "--format",
                                  "{{.Digest}}", "oci:" + image},
                         .env = {},
                         .pass_fd = -1,
                         .timeout_ms = 60'000,
                         .stdout_fd = -1});
  if (!digest.ok()) return digest.status();
  if (!digest->ok()) return Status::Internal("skopeo inspect: " + digest->Describe());
  std::string d = digest->out;
  while (!d.empty() && (d.back() == '\n' || d.back() == ' ')) d.pop_back();
  fs::remove_all(bundle, ec);
  return d;
}

}  // namespace gpupool::testing
