// End to end: `gpupoolctl session` (cmd/ctl/session.cc) with the real thin front, the real
// helper process and a secure gpupoold (TLS, admin token). What a script must be able to rely on:
// a command through the helper prints and exits exactly as a direct one; relative paths are the
// caller's; stdin and unserved commands still work (run directly); a request the helper took and
// never answered is reported, not run a second time; a session directory another user could have
// made is refused.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "cmd/ctl/session_wire.h"
#include "tests/cmd/run_ctl.h"
#include "tests/support/daemon_process.h"

namespace gpupool::ctltest {
namespace {

using gpupool::testing::DaemonProcess;
namespace session = gpupool::ctl::session;

class GpupoolctlSession : public ::testing::Test {
 protected:
  void SetUp() override {
    DaemonProcess::Options options;
    options.secure = true;
    Result<std::unique_ptr<DaemonProcess>> d = DaemonProcess::Start(options);
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    daemon_ = std::move(d).value();
    Result<std::string> dir = gpupool::testing::MakeTempDir("gpupoolctl-session");
    ASSERT_TRUE(dir.ok());
    dir_ = *dir;
    runtime_ = dir_ + "/run";
    ASSERT_EQ(::mkdir(runtime_.c_str(), 0700), 0);
  }
  void TearDown() override { Ctl({"session", "stop"}); }

  // gpupoolctl --server … --ca … --token ADMIN ARGS, through a session when one runs (`on`).
  Outcome Ctl(const std::vector<std::string>& args, bool session = true,
              const std::string& input = "") {
    std::vector<std::string> full = {"--server", daemon_->grpc_address(),
                                     "--ca",     daemon_->ca_path(),
                                     "--token",  daemon_->admin_token()};
    full.insert(full.end(), args.begin(), args.end());
    return RunCtl(
        full,
        {"XDG_RUNTIME_DIR=" + runtime_, std::string("GPUPOOL_SESSION=") + (session ? "on" : "off")},
        input);
  }
  // "N commands served" from `session status`, or -1.
  int Served() {
    const Outcome o = Ctl({"session", "status"});
    const size_t at = o.out.find(" commands served");
    if (o.exit != 0 || at == std::string::npos) return -1;
    return std::stoi(o.out.substr(o.out.rfind(' ', at - 1) + 1));
  }

  std::unique_ptr<DaemonProcess> daemon_;
  std::string dir_, runtime_;
};

TEST_F(GpupoolctlSession, ACommandThroughTheHelperIsTheCommand) {
  Outcome o = Ctl({"session", "status"});
  EXPECT_EQ(o.exit, 3) << Dump(o);
  EXPECT_NE(o.err.find("NOT_FOUND: no session: " + runtime_ + "/gpupool"), std::string::npos)
      << Dump(o);
  o = Ctl({"session", "start", "--idle", "10m"});
  ASSERT_EQ(o.exit, 0) << Dump(o);
  EXPECT_NE(o.out.find("session: running"), std::string::npos) << Dump(o);
  struct stat st {};
  ASSERT_EQ(::stat((runtime_ + "/gpupool/ctl.sock").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  // Set-up commands the helper does not serve run directly, as before.
  for (std::vector<std::string> args : std::vector<std::vector<std::string>>{
           {"pools", "create", "gpu", "--sharing", "fractional"}, {"tenants", "create", "acme"}}) {
    o = Ctl(args);
    ASSERT_EQ(o.exit, 0) << Dump(o);
  }
  EXPECT_EQ(Served(), 0);

  // A submission and a read through the helper: same output and exit code as directly.
  o = Ctl({"jobs", "submit", "--tenant", "acme/u", "--pool", "gpu", "--tflops", "1", "--vram",
           "1GiB", "--", "/bin/true"});
  ASSERT_EQ(o.exit, 0) << Dump(o);
  EXPECT_NE(o.out.find("job 1 submitted"), std::string::npos) << Dump(o);
  const Outcome via = Ctl({"-o", "json", "jobs", "get", "1"});
  const Outcome direct = Ctl({"-o", "json", "jobs", "get", "1"}, /*session=*/false);
  EXPECT_EQ(via.exit, 0) << Dump(via);
  EXPECT_EQ(via.out, direct.out);
  EXPECT_EQ(via.err, direct.err);
  EXPECT_EQ(Served(), 2);

  // Errors keep their exit codes and messages.
  const Outcome missing = Ctl({"jobs", "get", "999"});
  EXPECT_EQ(missing.exit, 3) << Dump(missing);
  EXPECT_EQ(missing.err, Ctl({"jobs", "get", "999"}, false).err);
  EXPECT_EQ(Served(), 3);

  // A relative --file is the caller's: the helper reads it from the caller's directory.
  const std::string work = dir_ + "/work";
  ASSERT_EQ(::mkdir(work.c_str(), 0755), 0);
  std::ofstream(work + "/job.yaml") << "tenant: acme/u\npool: gpu\ntemplate:\n"
                                    << "  command: [/bin/true]\n"
                                    << "  resources:\n    fractional: {milli_tflops: 1000, "
                                       "vram_mib: 1024}\n";
  char here[4096];
  ASSERT_NE(::getcwd(here, sizeof here), nullptr);
  ASSERT_EQ(::chdir(work.c_str()), 0);
  o = Ctl({"jobs", "submit", "-f", "job.yaml"});
  ASSERT_EQ(::chdir(here), 0);
  EXPECT_EQ(o.exit, 0) << Dump(o);
  EXPECT_NE(o.out.find("job 2 submitted"), std::string::npos) << Dump(o);
  EXPECT_EQ(Served(), 4);

  // Stdin ("-f -") is not the helper's: that command runs directly, and works.
  o = Ctl({"jobs", "submit", "-f", "-"}, true,
          "tenant: acme/u\npool: gpu\ntemplate:\n  command: [/bin/true]\n  resources:\n"
          "    fractional: {milli_tflops: 1000, vram_mib: 1024}\n");
  EXPECT_EQ(o.exit, 0) << Dump(o);
  EXPECT_NE(o.out.find("job 3 submitted"), std::string::npos) << Dump(o);
  EXPECT_EQ(Served(), 4);

  o = Ctl({"session", "stop"});
  EXPECT_EQ(o.exit, 0) << Dump(o);
  EXPECT_NE(::access((runtime_ + "/gpupool/ctl.sock").c_str(), F_OK), 0);
  // With no helper, everything runs directly.
  o = Ctl({"jobs", "get", "3"});
  EXPECT_EQ(o.exit, 0) << Dump(o);
}

// A helper that takes a request and dies before answering: the front must not run the command
// itself (a second job), and must say so.
TEST_F(GpupoolctlSession, ARequestTheHelperTookIsNeverRunTwice) {
  ASSERT_EQ(Ctl({"pools", "create", "gpu", "--sharing", "fractional"}).exit, 0);
  ASSERT_EQ(Ctl({"tenants", "create", "acme"}).exit, 0);
  const std::string dir = runtime_ + "/gpupool";
  ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
  const int listener = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  const std::string path = session::SocketPath(dir);
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  ASSERT_EQ(::bind(listener, reinterpret_cast<const sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(listener, 4), 0);
  std::thread dying([listener] {
    const int fd = ::accept(listener, nullptr, nullptr);
    if (fd >= 0) {
      session::ReadFrame(fd, 1 << 20);  // takes the whole request, then dies without a word
      ::close(fd);
    }
  });
  const Outcome o = Ctl({"jobs", "submit", "--tenant", "acme/u", "--pool", "gpu", "--tflops", "1",
                         "--vram", "1GiB", "--", "/bin/true"});
  dying.join();
  ::close(listener);
  EXPECT_EQ(o.exit, 5) << Dump(o);
  EXPECT_NE(o.err.find("may or may not have run"), std::string::npos) << Dump(o);
  const Outcome jobs = Ctl({"-o", "json", "jobs", "list"}, /*session=*/false);
  EXPECT_EQ(jobs.exit, 0) << Dump(jobs);
  EXPECT_EQ(jobs.out.find("\"jobId\""), std::string::npos) << Dump(jobs);
}

// A session directory another user could have made (not 0700) is never used: the helper will not
// start in it, and the front runs commands directly rather than hand a token to its socket.
TEST_F(GpupoolctlSession, RefusesASessionDirectoryOthersCouldUse) {
  const std::string dir = runtime_ + "/gpupool";
  ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
  ASSERT_EQ(::chmod(dir.c_str(), 0755), 0);
  Outcome o = Ctl({"session", "start"});
  EXPECT_EQ(o.exit, 1) << Dump(o);
  EXPECT_NE(o.err.find(dir + ": not a directory of uid"), std::string::npos) << Dump(o);
  EXPECT_NE(o.err.find("mode 0700"), std::string::npos) << Dump(o);
  o = Ctl({"pools", "list"});
  EXPECT_EQ(o.exit, 0) << Dump(o);
}

TEST(SessionWire, FramesRoundTripAndBadOnesAreRefused) {
  session::Request req;
  req.cwd = "/home/u";
  req.server = "a:1,b:2";
  req.token = std::string("gpk_\0x", 6);  // any bytes
  req.args = {"jobs", "submit", "", "--", "sh", "-c", "echo 'a b'"};
  const std::string frame = session::EncodeRequest(req);
  std::optional<session::Request> back = session::DecodeRequest(frame);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->cwd, req.cwd);
  EXPECT_EQ(back->server, req.server);
  EXPECT_EQ(back->token, req.token);
  EXPECT_EQ(back->ca, "");
  EXPECT_EQ(back->args, req.args);
  // Cut short, or one byte too many, or another magic: refused.
  EXPECT_FALSE(session::DecodeRequest(frame.substr(0, frame.size() - 1)).has_value());
  EXPECT_FALSE(session::DecodeRequest(frame + "x").has_value());
  EXPECT_FALSE(session::DecodeRequest("GPC2" + frame.substr(4)).has_value());

  session::Reply reply{true, 4, "out\n", "gpupoolctl: INVALID_ARGUMENT: x\n"};
  std::optional<session::Reply> r = session::DecodeReply(session::EncodeReply(reply));
  ASSERT_TRUE(r.has_value());
  EXPECT_TRUE(r->served);
  EXPECT_EQ(r->exit_code, 4);
  EXPECT_EQ(r->out, reply.out);
  EXPECT_EQ(r->err, reply.err);
  // A reply is four strings with a known first word and an exit code of 0–255.
  EXPECT_FALSE(session::DecodeReply(session::EncodeRequest(req)).has_value());

  // ReadFrame: a frame over the limit, or a wrong magic, is not read.
  int fds[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  ASSERT_TRUE(session::WriteAll(fds[0], frame));
  EXPECT_FALSE(session::ReadFrame(fds[1], 8).has_value());
  ASSERT_TRUE(session::WriteAll(fds[0], "XXXX" + frame.substr(4)));
  EXPECT_FALSE(session::ReadFrame(fds[1], 1 << 20).has_value());
  ::close(fds[0]);
  ::close(fds[1]);
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  ASSERT_TRUE(session::WriteAll(fds[0], frame));
  std::optional<std::string> read = session::ReadFrame(fds[1], 1 << 20);
  ASSERT_TRUE(read.has_value());
  EXPECT_EQ(*read, frame);
  EXPECT_EQ(session::PeerUid(fds[1]), static_cast<long>(::getuid()));
  ::close(fds[0]);
  ::close(fds[1]);
}

}  // namespace
}  // namespace gpupool::ctltest
