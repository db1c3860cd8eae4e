#include "store/embedded_postgres.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pwd.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <pqxx/pqxx>
#include <random>

#include "base/log.h"
#include "store/pg_conn.h"
#include "store/process.h"

namespace gpupool {
namespace fs = std::filesystem;
namespace {

constexpr int kTailLines = 6;

Result<int> FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::Internal("socket: " + std::string(std::strerror(errno)));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    std::string err = std::strerror(errno);
    close(fd);
    return Status::Internal("cannot find a free port: " + err);
  }
  close(fd);
  return static_cast<int>(ntohs(addr.sin_port));
}

std::string RandomHex(size_t bytes) {
  std::random_device rd;
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < bytes; ++i) {
    unsigned v = rd() & 0xFF;
    out += kHex[v >> 4];
    out += kHex[v & 0xF];
  }
  return out;
}

std::string PercentEncode(const std::string& text) {
  std::string out;
  for (unsigned char c : text) {
    if (std::isalnum(c) || c == '_' || c == '-' || c == '.') {
      out += static_cast<char>(c);
    } else {
      char buf[4];
      std::snprintf(buf, sizeof buf, "%%%02X", c);
      out += buf;
    }
  }
  return out;
}

std::string FindRunuser() {
  for (const char* p : {"/usr/sbin/runuser", "/sbin/runuser", "/usr/bin/runuser"}) {
    if (access(p, X_OK) == 0) return p;
  }
  return "runuser";
}

}  // namespace

Result<std::string> EmbeddedPostgres::FindBinDir() {
  std::vector<std::pair<double, std::string>> found;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/usr/lib/postgresql", ec)) {
    std::string bin = entry.path().string() + "/bin";
    if (access((bin + "/initdb").c_str(), X_OK) != 0) continue;
    found.emplace_back(std::atof(entry.path().filename().c_str()), bin);
  }
  if (found.empty()) {
    return Status::NotFound(
        "no PostgreSQL server binaries in /usr/lib/postgresql/*/bin (install the 'postgresql' "
        "package, or configure an external database)");
  }
  std::sort(found.begin(), found.end());
  return found.back().second;
}

Result<std::unique_ptr<EmbeddedPostgres>> EmbeddedPostgres::Start(EmbeddedPostgresOptions options) {
  if (options.data_dir.empty()) return Status::InvalidArgument("embedded postgres: no data_dir");
  std::unique_ptr<EmbeddedPostgres> pg(new EmbeddedPostgres(std::move(options)));
  GPUPOOL_RETURN_IF_ERROR(pg->Prepare());
  GPUPOOL_RETURN_IF_ERROR(pg->StopStale());
  GPUPOOL_RETURN_IF_ERROR(pg->StartServer());
  GPUPOOL_RETURN_IF_ERROR(pg->SetPassword());
  GPUPOOL_RETURN_IF_ERROR(pg->CreateDatabase(pg->options_.database));
  LogInfo("store", "embedded PostgreSQL running",
          {{"dir", pg->pgdata_}, {"port", std::to_string(pg->port_)}, {"bin", pg->bin_dir_}});
  return pg;
}

EmbeddedPostgres::EmbeddedPostgres(EmbeddedPostgresOptions options)
    : options_(std::move(options)) {}

EmbeddedPostgres::~EmbeddedPostgres() {
  Status st = Stop();
  if (!st.ok()) LogWarn("store", "embedded PostgreSQL did not stop", {{"error", st.message()}});
  if (own_socket_dir_) {
    std::error_code ec;
    fs::remove_all(socket_dir_, ec);
  }
  if (lock_fd_ >= 0) close(lock_fd_);
}

Status EmbeddedPostgres::Prepare() {
  as_root_ = geteuid() == 0;
  if (options_.bin_dir.empty()) {
    GPUPOOL_ASSIGN_OR_RETURN(bin_dir_, FindBinDir());
  } else {
    bin_dir_ = options_.bin_dir;
  }
  if (access((bin_dir_ + "/pg_ctl").c_str(), X_OK) != 0) {
    return Status::NotFound("embedded postgres: no pg_ctl in " + bin_dir_);
  }
  std::error_code ec;
  fs::create_directories(options_.data_dir, ec);
  if (ec) {
    return Status::Internal("cannot create data directory " + options_.data_dir + ": " +
                            ec.message());
  }
  options_.data_dir = fs::absolute(options_.data_dir).lexically_normal().string();
  while (options_.data_dir.size() > 1 && options_.data_dir.back() == '/') {
    options_.data_dir.pop_back();
  }
  std::string lock_path = options_.data_dir + "/pg.lock";
  lock_fd_ = open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (lock_fd_ < 0)
    return Status::Internal("cannot open " + lock_path + ": " + std::strerror(errno));
  if (flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    return Status::FailedPrecondition("data directory " + options_.data_dir +
                                      " is in use by another process (" + lock_path +
                                      " is locked)");
  }
  cluster_parent_ = options_.data_dir;
  if (as_root_) GPUPOOL_RETURN_IF_ERROR(ChooseClusterParent());
  pgdata_ = cluster_parent_ + "/pg";
  if (!fs::exists(pgdata_ + "/PG_VERSION")) {
    if (fs::exists(pgdata_)) {
      return Status::FailedPrecondition(pgdata_ +
                                        " exists but holds no PostgreSQL cluster (no PG_VERSION);"
                                        " move it away");
    }
    GPUPOOL_RETURN_IF_ERROR(InitDb());
  }
  return Status::Ok();
}

Status EmbeddedPostgres::ChooseClusterParent() {
  GPUPOOL_ASSIGN_OR_RETURN(int rc, RunPg("/usr/bin/test", {"-x", options_.data_dir},
                                         options_.data_dir + "/pg-initdb.log"));
  if (rc == 0) return Status::Ok();
  // The server's user cannot even enter the data directory (e.g. it is under /root, mode 0700).
  // Keep the cluster where that user can reach it, named after the data directory, and leave a
  // symlink data_dir/pg → there so people find it.
  uint64_t h = 1469598103934665603ULL;  // FNV-1a of the absolute data directory
  for (unsigned char c : options_.data_dir) h = (h ^ c) * 1099511628211ULL;
  char name[17];
  std::snprintf(name, sizeof name, "%016llx", static_cast<unsigned long long>(h));
  std::string parent = "/var/lib/gpupool/clusters/" + std::string(name);
  std::error_code ec;
  fs::create_directories(parent, ec);
  if (ec) return Status::Internal("cannot create " + parent + ": " + ec.message());
  for (const char* d : {"/var/lib/gpupool", "/var/lib/gpupool/clusters"}) {
    fs::permissions(d, fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec, ec);
  }
  fs::permissions(parent, fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec,
                  ec);
  std::string link = options_.data_dir + "/pg";
  if (!fs::exists(fs::symlink_status(link))) fs::create_directory_symlink(parent + "/pg", link, ec);
  LogWarn(
      "store", "the PostgreSQL user cannot enter the data directory; keeping the cluster elsewhere",
      {{"data_dir", options_.data_dir}, {"cluster", parent + "/pg"}, {"user", options_.run_as}});
  cluster_parent_ = parent;
  return Status::Ok();
}

Result<int> EmbeddedPostgres::RunPg(const std::string& program, std::vector<std::string> args,
                                    const std::string& log) {
  std::vector<std::string> argv;
  if (as_root_) argv = {FindRunuser(), "-u", options_.run_as, "--"};
  argv.push_back(program.starts_with("/") ? program : bin_dir_ + "/" + program);
  for (auto& a : args) argv.push_back(std::move(a));
  return RunProcess(argv, log);
}

Status EmbeddedPostgres::InitDb() {
  std::string tmp = cluster_parent_ + "/pg.initdb";
  std::string log = options_.data_dir + "/pg-initdb.log";
  std::error_code ec;
  fs::remove_all(tmp, ec);
  fs::create_directories(tmp, ec);
  if (ec) return Status::Internal("cannot create " + tmp + ": " + ec.message());
  fs::permissions(tmp, fs::perms::owner_all, ec);
  if (as_root_) {
    passwd* pw = getpwnam(options_.run_as.c_str());
    if (pw == nullptr) {
      return Status::FailedPrecondition("running as root, but there is no '" + options_.run_as +
                                        "' user to run PostgreSQL as");
    }
    if (chown(tmp.c_str(), pw->pw_uid, pw->pw_gid) != 0) {
      return Status::Internal("chown " + tmp + ": " + std::strerror(errno));
    }
    GPUPOOL_ASSIGN_OR_RETURN(int rc, RunPg("/usr/bin/test", {"-w", tmp}, log));
    if (rc != 0) {
      return Status::FailedPrecondition(
          "the '" + options_.run_as + "' user cannot write " + tmp +
          ": every directory above the data directory must be searchable by it (chmod o+x), "
          "or choose a data directory elsewhere (e.g. under /var/lib or /tmp)");
    }
  }
  std::vector<std::string> args = {"-D",
                                   tmp,
                                   "-U",
                                   "postgres",
                                   "--auth-local=trust",
                                   "--auth-host=scram-sha-256",
                                   "-E",
                                   "UTF8",
                                   "--locale=C.UTF-8"};
  if (!options_.fsync) args.push_back("--no-sync");
  LogInfo("store", "initializing embedded PostgreSQL cluster", {{"dir", pgdata_}});
  GPUPOOL_ASSIGN_OR_RETURN(int rc, RunPg("initdb", std::move(args), log));
  if (rc != 0) {
    return Status::Internal("initdb failed (exit " + std::to_string(rc) +
                            "): " + TailOfFile(log, kTailLines) + " (log: " + log + ")");
  }
  fs::rename(tmp, pgdata_, ec);
  if (ec) return Status::Internal("rename " + tmp + " → " + pgdata_ + ": " + ec.message());
  return Status::Ok();
}

Status EmbeddedPostgres::StopStale() {
  std::string log = options_.data_dir + "/pg-ctl.log";
  GPUPOOL_ASSIGN_OR_RETURN(int rc, RunPg("pg_ctl", {"status", "-D", pgdata_}, log));
  if (rc != 0) return Status::Ok();  // 3: not running (a stale postmaster.pid is fine)
  // We hold pg.lock, so the server belongs to a previous process that died without stopping it.
  LogWarn("store", "stopping a PostgreSQL server left running by a previous process",
          {{"dir", pgdata_}});
  running_ = true;
  return Stop();
}

Status EmbeddedPostgres::StartServer() {
  std::string log = options_.data_dir + "/pg-ctl.log";
  std::string server_log = pgdata_ + "/server.log";
  if (socket_dir_.empty()) {
    // sun_path holds 107 bytes: "<dir>/.s.PGSQL.<port>" must fit.
    if (pgdata_.size() + 20 < 100) {
      socket_dir_ = pgdata_;
    } else {
      char tmpl[] = "/tmp/gpupool-pg-XXXXXX";
      if (mkdtemp(tmpl) == nullptr)
        return Status::Internal("mkdtemp: " + std::string(std::strerror(errno)));
      socket_dir_ = tmpl;
      own_socket_dir_ = true;
      if (as_root_) {
        if (passwd* pw = getpwnam(options_.run_as.c_str())) {
          (void)chown(tmpl, pw->pw_uid, pw->pw_gid);
        }
      }
    }
  }
  for (int attempt = 0;; ++attempt) {
    // Once the server has run, its port is in every client's URI: never move it.
    if (port_ == 0 || (options_.port == 0 && attempt > 0 && !started_once_)) {
      if (options_.port != 0) {
        port_ = options_.port;
      } else {
        GPUPOOL_ASSIGN_OR_RETURN(port_, FreePort());
      }
    }
    std::string opts = "-p " + std::to_string(port_) + " -k " + ShellQuote(socket_dir_) +
                       " -c listen_addresses=127.0.0.1";
    if (!options_.fsync) opts += " -c fsync=off -c full_page_writes=off";
    for (const auto& s : options_.settings) opts += " -c " + ShellQuote(s);
    GPUPOOL_ASSIGN_OR_RETURN(
        int rc,
        RunPg("pg_ctl", {"start", "-D", pgdata_, "-l", server_log, "-w", "-t", "60", "-o", opts},
              log));
    if (rc == 0) break;
    std::string tail = TailOfFile(server_log, kTailLines);
    bool port_taken = tail.find("could not bind") != std::string::npos ||
                      tail.find("already in use") != std::string::npos;
    if (port_taken && options_.port == 0 && !started_once_ && attempt < 4) continue;
    return Status::Internal("pg_ctl start failed (exit " + std::to_string(rc) +
                            "): " + (tail.empty() ? TailOfFile(log, kTailLines) : tail) +
                            " (log: " + server_log + ")");
  }
  running_ = true;
  started_once_ = true;
  return Status::Ok();
}

std::string EmbeddedPostgres::SocketConninfo(const std::string& database) const {
  return "host='" + socket_dir_ + "' port=" + std::to_string(port_) +
         " user=postgres connect_timeout=10 dbname='" + database + "'";
}

Status EmbeddedPostgres::SetPassword() {
  if (password_.empty()) password_ = RandomHex(16);
  try {
    pqxx::connection conn(SocketConninfo("postgres"));
    pqxx::nontransaction n(conn);
    n.exec("ALTER ROLE postgres PASSWORD " + n.quote(password_));
    return Status::Ok();
  } catch (const std::exception& e) {
    return Status::Internal("embedded postgres: cannot set the password: " + std::string(e.what()));
  }
}

Status EmbeddedPostgres::CreateDatabase(const std::string& database) {
  try {
    pqxx::connection conn(SocketConninfo("postgres"));
    pqxx::nontransaction n(conn);
    auto r = n.exec("SELECT 1 FROM pg_database WHERE datname = " + n.quote(database));
    if (r.empty()) n.exec("CREATE DATABASE " + n.quote_name(database));
    return Status::Ok();
  } catch (const pqxx::sql_error& e) {
    if (e.sqlstate() == "42P04") return Status::Ok();  // created meanwhile
    return Status::Internal("create database '" + database + "': " + e.what());
  } catch (const std::exception& e) {
    return Status::Unavailable("create database '" + database + "': " + e.what());
  }
}

std::string EmbeddedPostgres::UriFor(const std::string& database) const {
  return "postgresql://postgres:" + password_ + "@127.0.0.1:" + std::to_string(port_) + "/" +
         PercentEncode(database);
}

Status EmbeddedPostgres::Stop() {
  if (!running_) return Status::Ok();
  std::string log = options_.data_dir + "/pg-ctl.log";
  GPUPOOL_ASSIGN_OR_RETURN(
      int rc, RunPg("pg_ctl", {"stop", "-D", pgdata_, "-m", "fast", "-w", "-t", "60"}, log));
  if (rc != 0) {
    GPUPOOL_ASSIGN_OR_RETURN(
        rc, RunPg("pg_ctl", {"stop", "-D", pgdata_, "-m", "immediate", "-w", "-t", "30"}, log));
  }
  if (rc != 0) {
    // Already gone (someone stopped it, or it crashed) is as good as stopped.
    GPUPOOL_ASSIGN_OR_RETURN(int status, RunPg("pg_ctl", {"status", "-D", pgdata_}, log));
    if (status == 0) {
      return Status::Internal("pg_ctl stop failed (exit " + std::to_string(rc) +
                              "): " + TailOfFile(log, kTailLines));
    }
  }
  running_ = false;
  return Status::Ok();
}

Status EmbeddedPostgres::Restart() {
  if (running_) return Status::Ok();
  return StartServer();
}

pid_t EmbeddedPostgres::ServerPid() const {
  // postmaster.pid's first line is the postmaster's pid; the file outlives a kill -9.
  std::ifstream in(pgdata_ + "/postmaster.pid");
  long pid = 0;
  if (!(in >> pid) || pid <= 0) return -1;
  // A dead postmaster may linger as a zombie when nobody reaps it (a container's pid 1 that does
  // not): state 'Z' in /proc/PID/stat counts as dead. The state follows the ")" of the name.
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  size_t paren = text.rfind(')');
  if (paren == std::string::npos || paren + 2 >= text.size()) return -1;
  char state = text[paren + 2];
  if (state == 'Z' || state == 'X') return -1;
  return static_cast<pid_t>(pid);
}

Status EmbeddedPostgres::RestartAfterCrash() {
  if (ServerPid() > 0) return Status::Ok();  // alive after all (or already restarted)
  running_ = false;
  return StartServer();
}

}  // namespace gpupool
