#include "tests/support/daemon_process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "gpupool/v1/pools.grpc.pb.h"
#include "store/process.h"
#include "tests/support/wait_for.h"

namespace gpupool::testing {

namespace fs = std::filesystem;

Result<std::unique_ptr<ChildProcess>> ChildProcess::Spawn(const std::vector<std::string>& argv,
                                                          const std::string& log_path,
                                                          int max_open_files) {
  int log = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log < 0) return Status::Internal("cannot open " + log_path);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = ::fork();
  if (pid < 0) {
    ::close(log);
    return Status::Internal("fork failed");
  }
  if (pid == 0) {
    ::setpgid(0, 0);
    if (max_open_files > 0) {
      const rlimit lim{static_cast<rlim_t>(max_open_files), static_cast<rlim_t>(max_open_files)};
      if (::setrlimit(RLIMIT_NOFILE, &lim) != 0) ::_exit(126);
    }
    ::dup2(log, STDOUT_FILENO);
    ::dup2(log, STDERR_FILENO);
    int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull >= 0) ::dup2(devnull, STDIN_FILENO);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  ::close(log);
  return std::unique_ptr<ChildProcess>(new ChildProcess(pid));
}

ChildProcess::~ChildProcess() {
  if (!reaped_ && Running()) {
    Signal(SIGKILL);
    Wait(std::chrono::seconds(5));
  }
}

bool ChildProcess::Running() {
  if (reaped_) return false;
  int status = 0;
  pid_t r = ::waitpid(pid_, &status, WNOHANG);
  if (r == pid_) reaped_ = true;
  return r == 0;
}

void ChildProcess::Signal(int sig) {
  if (!reaped_) ::kill(pid_, sig);
}

int ChildProcess::Wait(std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    pid_t r = ::waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      reaped_ = true;
      return status;
    }
    if (r < 0) return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return -1;
}

Result<std::string> MakeTempDir(const std::string& prefix) {
  std::string pattern = (fs::temp_directory_path() / (prefix + "-XXXXXX")).string();
  if (::mkdtemp(pattern.data()) == nullptr) return Status::Internal("mkdtemp failed");
  ::chmod(pattern.c_str(), 0755);
  return pattern;
}

std::string BinaryPath(const std::string& name) {
  return std::string(GPUPOOL_BINARY_DIR) + "/cmd/" + name;
}

Result<std::unique_ptr<DaemonProcess>> DaemonProcess::Start(Options options) {
  std::unique_ptr<DaemonProcess> d(new DaemonProcess());
  d->options_ = std::move(options);
  if (d->options_.data_dir.empty()) {
    GPUPOOL_ASSIGN_OR_RETURN(d->data_dir_, MakeTempDir("gpupoold-test"));
  } else {
    d->data_dir_ = d->options_.data_dir;
  }
  // A port found free can be taken by another test process before gpupoold binds it; then the
  // daemon exits naming the address, and a second pair of ports is tried.
  Status launched;
  for (int attempt = 0; attempt < 3; ++attempt) {
    d->grpc_port_ = FreePort();
    d->http_port_ = FreePort();
    launched = d->Launch();
    if (launched.ok() || launched.message().find("Address already in use") == std::string::npos) {
      break;
    }
  }
  GPUPOOL_RETURN_IF_ERROR(launched);
  return d;
}

std::string DaemonProcess::ca_pem() const {
  std::ifstream in(ca_path());
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string DaemonProcess::admin_token() const {
  std::ifstream in(data_dir_ + "/admin.token");
  std::string token;
  std::getline(in, token);
  return token;
}

std::shared_ptr<grpc::Channel> DaemonProcess::Channel() const {
  if (!options_.secure) {
    return grpc::CreateChannel(grpc_address(), grpc::InsecureChannelCredentials());
  }
  grpc::SslCredentialsOptions o;
  o.pem_root_certs = ca_pem();
  return grpc::CreateChannel(grpc_address(), grpc::SslCredentials(o));
}

std::shared_ptr<grpc::Channel> DaemonProcess::AdminChannel() const {
  if (!options_.secure) return Channel();
  grpc::SslCredentialsOptions o;
  o.pem_root_certs = ca_pem();
  return grpc::CreateChannel(
      grpc_address(), grpc::CompositeChannelCredentials(
                          grpc::SslCredentials(o), grpc::AccessTokenCredentials(admin_token())));
}

namespace {

// One secrets key file per test binary (0600, removed at exit), for daemons on one external
// database: they are replicas of one cluster, and an operator gives replicas the same key.
const std::string& SharedSecretsKeyFile() {
  static const std::string path = [] {
    std::string p = std::filesystem::temp_directory_path() /
                    ("gpupool-test-secrets-" + std::to_string(::getpid()) + ".key");
    std::ofstream(p) << "# tests' shared secrets key\n"
                        "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=\n";
    std::filesystem::permissions(
        p, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
    std::atexit([] { std::filesystem::remove(SharedSecretsKeyFile()); });
    return p;
  }();
  return path;
}

bool Has(const std::vector<std::string>& args, const std::string& flag) {
  return std::find(args.begin(), args.end(), flag) != args.end();
}

}  // namespace

Status DaemonProcess::Launch() {
  std::vector<std::string> argv{BinaryPath("gpupoold"),
                                "--data-dir",
                                data_dir_,
                                "--grpc-listen",
                                grpc_address(),
                                "--http-listen",
                                "127.0.0.1:" + std::to_string(http_port_)};
  if (!options_.secure) argv.push_back("--insecure");
  if (Has(options_.extra_args, "--database") && !Has(options_.extra_args, "--secrets-key-file")) {
    argv.insert(argv.end(), {"--secrets-key-file", SharedSecretsKeyFile()});
  }
  argv.insert(argv.end(), options_.extra_args.begin(), options_.extra_args.end());
  GPUPOOL_ASSIGN_OR_RETURN(child_, ChildProcess::Spawn(argv, log_path(), options_.max_open_files));
  if (!options_.wait_until_serving) return Status::Ok();
  // Ready when the API answers a call (the embedded database may take a few seconds); a daemon
  // with API tokens configured answers UNAUTHENTICATED, which means it is serving too. A secure
  // daemon writes its CA before it listens, so the channel is made once the CA is there.
  std::unique_ptr<v1::PoolService::Stub> stub;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline) {
    if (!child_->Running()) {
      return Status::Internal("gpupoold exited during start-up:\n" + LogTail(20));
    }
    if (!stub) {
      if (options_.secure && ca_pem().empty()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        continue;
      }
      stub = v1::PoolService::NewStub(Channel());
    }
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(500));
    v1::ListPoolsResponse resp;
    grpc::Status st = stub->ListPools(&ctx, v1::ListPoolsRequest{}, &resp);
    if (st.ok() || st.error_code() == grpc::StatusCode::UNAUTHENTICATED) return Status::Ok();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return Status::Unavailable("gpupoold not ready within 60 s:\n" + LogTail(20));
}

Result<std::vector<std::unique_ptr<DaemonProcess>>> DaemonProcess::StartReplicas(
    int count, const std::vector<std::string>& args) {
  std::vector<std::unique_ptr<DaemonProcess>> replicas;
  for (int i = 0; i < count; ++i) {
    GPUPOOL_ASSIGN_OR_RETURN(
        std::unique_ptr<DaemonProcess> d,
        Start({.data_dir = "", .extra_args = args, .wait_until_serving = false}));
    replicas.push_back(std::move(d));
  }
  return replicas;
}

int ServingReplica(const std::vector<std::unique_ptr<DaemonProcess>>& replicas,
                   std::chrono::milliseconds timeout) {
  int found = -1;
  WaitFor(
      [&] {
        for (size_t i = 0; i < replicas.size(); ++i) {
          if (replicas[i]->Serving()) found = static_cast<int>(i);
        }
        return found >= 0;
      },
      timeout, std::chrono::milliseconds(50));
  return found;
}

Status DaemonProcess::CreatePool(const std::string& name) {
  auto stub = v1::PoolService::NewStub(Channel());
  grpc::ClientContext ctx;
  if (options_.secure) ctx.AddMetadata("authorization", "Bearer " + admin_token());
  v1::CreatePoolRequest req;
  req.mutable_pool()->set_name(name);
  // No requirement of nodes for shared work: the tests' agents run without the sandbox (the
  // default requirement's own tests name it).
  req.mutable_pool()->add_required_capabilities("none");
  v1::Pool pool;
  grpc::Status st = stub->CreatePool(&ctx, req, &pool);
  if (!st.ok()) return Status::Internal("create pool '" + name + "': " + st.error_message());
  return Status::Ok();
}

bool DaemonProcess::Exited() { return !child_ || !child_->Running(); }

bool DaemonProcess::Serving() {
  if (!child_ || !child_->Running()) return false;
  if (options_.secure && ca_pem().empty()) return false;
  auto stub = v1::PoolService::NewStub(Channel());
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(500));
  v1::ListPoolsResponse resp;
  grpc::Status st = stub->ListPools(&ctx, v1::ListPoolsRequest{}, &resp);
  return st.ok() || st.error_code() == grpc::StatusCode::UNAUTHENTICATED;
}

Status DaemonProcess::Restart() {
  if (child_ && child_->Running()) return Status::FailedPrecondition("still running");
  return Launch();
}

void DaemonProcess::Kill9() {
  if (!child_) return;
  child_->Signal(SIGKILL);
  child_->Wait(std::chrono::seconds(10));
}

int DaemonProcess::Stop() {
  if (!child_ || !child_->Running()) return -1;
  child_->Signal(SIGTERM);
  int status = child_->Wait(std::chrono::seconds(30));
  if (status < 0) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string DaemonProcess::LogTail(int lines) const { return TailOfFile(log_path(), lines); }

void DaemonProcess::StopLeftoverPostgres() {
  // A kill -9 leaves the embedded server running; stop any postmaster under our directory.
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(data_dir_, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (it->path().filename() != "postmaster.pid") continue;
    std::ifstream in(it->path());
    pid_t pid = 0;
    if (in >> pid && pid > 0) {
      ::kill(pid, SIGQUIT);
      for (int i = 0; i < 100 && ::kill(pid, 0) == 0; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    }
  }
}

DaemonProcess::~DaemonProcess() {
  Stop();
  StopLeftoverPostgres();
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  bool failed = info != nullptr && info->result() != nullptr && info->result()->Failed();
  if (failed) {
    std::fprintf(stderr, "gpupoold log (kept in %s):\n%s\n", data_dir_.c_str(),
                 LogTail(40).c_str());
  } else if (options_.data_dir.empty()) {
    std::error_code ec;
    fs::remove_all(data_dir_, ec);
  }
}

}  // namespace gpupool::testing
