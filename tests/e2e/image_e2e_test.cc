// Issue 25 end to end: a job whose tasks name an OCI image. A real gpupoold (embedded
// PostgreSQL), a real gpupool-agent with its sandbox and images on, a real docker-registry on
// loopback holding an image the test builds from local files; the agent pulls it with skopeo and
// umoci and runs the task under runc in a user namespace. Root only (the sandbox and runc need
// it); skips saying why elsewhere.
#include <arpa/inet.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <random>
#include <sstream>
#include <string>

#include "gpupool/v1/jobs.grpc.pb.h"
#include "gpupool/v1/pools.grpc.pb.h"
#include "tests/agent/net_fixture.h"
#include "tests/agent/oci_registry.h"
#include "tests/agent/sandbox_fixture.h"
#include "tests/support/daemon_process.h"
#include "tests/support/single_agent.h"
#include "tests/support/wait_for.h"

namespace gpupool {
namespace {

using testing::DaemonProcess;
using namespace std::chrono_literals;

bool WaitFor(const std::function<bool()>& done, std::chrono::seconds timeout = 60s) {
  return ::gpupool::testing::WaitFor(done, timeout, std::chrono::milliseconds(50));
}

class ImageE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Root, a memory cgroup controller, runc, skopeo and umoci.
    if (std::string why = agent::testing::CannotRunContainers(); !why.empty()) GTEST_SKIP() << why;
    Status st = registry_.Start();
    if (!st.ok()) GTEST_SKIP() << "no local registry: " << st.message();
    Result<std::string> dir = testing::MakeTempDir("gpupool-image-e2e");
    ASSERT_TRUE(dir.ok());
    dir_ = *dir;
    testing::TestLayer app;
    app.files["/etc/app-release"] = "gpupool app 1\n";
    auto digest = testing::BuildAndPush(registry_, dir_ + "/build", "test/app", "1",
                                        {testing::BusyboxLayer(), app});
    ASSERT_TRUE(digest.ok()) << digest.status().ToString();
    auto d = DaemonProcess::Start({.data_dir = "", .extra_args = {}, .secure = false});
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    daemon_ = std::move(d).value();
    jobs_ = v1::JobService::NewStub(
        grpc::CreateChannel(daemon_->grpc_address(), grpc::InsecureChannelCredentials()));
    ASSERT_TRUE(daemon_->CreatePool("gpu").ok());
    agent_ = std::make_unique<testing::SingleAgent>(
        dir_, "gpu",
        "sandbox:\n  enabled: true\n  cgroup_parent: gpupool-e2e-" + std::to_string(getpid()) +
            "\n  uid_pool: {first: 63000, count: 100}\n"
            // The loopback registry speaks plain HTTP.
            "images:\n  tls_verify: false\n"
            // Isolated networks offered; pools that name none get none.
            "network:\n  isolated: true\n  subnet: 10.217.0.0/24\n  dns: [198.51.100.53]\n");
    agent_->Connect(daemon_->grpc_address());
    ASSERT_TRUE(agent_->StartAndWaitReady());
  }

  void TearDown() override {
    agent_.reset();
    daemon_.reset();
    if (!HasFailure() && !dir_.empty()) std::filesystem::remove_all(dir_);
  }

  v1::SubmitJobRequest ImageJob(const std::string& image, const std::string& script) {
    v1::SubmitJobRequest req;
    v1::JobSpec* s = req.mutable_spec();
    s->set_tenant("acme/e2e/tester");
    s->set_pool("gpu");
    s->set_task_count(1);
    v1::TaskTemplate* t = s->mutable_template_();
    t->set_image(image);
    for (const char* a : {"/bin/sh", "-c"}) t->add_command(a);
    t->add_command(script);
    t->mutable_resources()->mutable_whole_gpus()->set_count(1);
    return req;
  }

  std::string Logs(const std::string& task_id) { return testing::TaskLogs(*jobs_, task_id); }

  // Submits `req` and waits for its first task to end; returns that task as it ended.
  v1::Task RunToEnd(const v1::SubmitJobRequest& req) {
    grpc::ClientContext ctx;
    v1::SubmitJobResponse resp;
    grpc::Status st = jobs_->SubmitJob(&ctx, req, &resp);
    EXPECT_TRUE(st.ok()) << st.error_message();
    v1::Task task;
    EXPECT_TRUE(WaitFor([&] {
      task = testing::FirstTask(*jobs_, resp.job_id());
      return task.state() == v1::TASK_STATE_SUCCEEDED || task.state() == v1::TASK_STATE_FAILED;
    })) << "state "
        << v1::TaskState_Name(task.state()) << ": " << task.reason();
    return task;
  }

  // An admin sets the pool's network (UpdatePool, mask `network`).
  void SetPoolNetwork(v1::NetworkMode mode) {
    auto pools = v1::PoolService::NewStub(
        grpc::CreateChannel(daemon_->grpc_address(), grpc::InsecureChannelCredentials()));
    grpc::ClientContext ctx;
    v1::UpdatePoolRequest req;
    req.mutable_pool()->set_name("gpu");
    req.mutable_pool()->set_network(mode);
    req.mutable_update_mask()->add_paths("network");
    v1::Pool out;
    grpc::Status st = pools->UpdatePool(&ctx, req, &out);
    ASSERT_TRUE(st.ok()) << st.error_message();
    EXPECT_EQ(out.network(), mode);
  }

  // Runs gpupoolctl against the daemon; returns its exit code and fills `out`.
  int Ctl(const std::vector<std::string>& args, std::string* out) {
    std::vector<std::string> argv = {testing::BinaryPath("gpupoolctl"), "--server",
                                     daemon_->grpc_address()};
    argv.insert(argv.end(), args.begin(), args.end());
    auto ctl = testing::ChildProcess::Spawn(argv, dir_ + "/ctl.log");
    if (!ctl.ok()) return -1;
    const int status = (*ctl)->Wait(120s);
    std::ifstream in(dir_ + "/ctl.log");
    out->assign((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

  testing::LocalRegistry registry_;
  std::string dir_;
  std::unique_ptr<DaemonProcess> daemon_;
  std::unique_ptr<testing::SingleAgent> agent_;
  std::unique_ptr<v1::JobService::Stub> jobs_;
};

TEST_F(ImageE2eTest, AJobFromAnImageRunsAsRootInItsContainer) {
  const std::string image = registry_.host() + "/test/app:1";
  grpc::ClientContext ctx;
  v1::SubmitJobResponse resp;
  grpc::Status st = jobs_->SubmitJob(&ctx, ImageJob(image, "id -u; cat /etc/app-release"), &resp);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(resp.job().spec().template_().image(), image) << "the API shows the image back";
  v1::Task task;
  ASSERT_TRUE(WaitFor([&] {
    task = testing::FirstTask(*jobs_, resp.job_id());
    return task.state() == v1::TASK_STATE_SUCCEEDED || task.state() == v1::TASK_STATE_FAILED;
  })) << "state "
      << v1::TaskState_Name(task.state()) << ": " << task.reason();
  EXPECT_EQ(task.state(), v1::TASK_STATE_SUCCEEDED) << task.reason();
  EXPECT_EQ(Logs(task.id()), "0\ngpupool app 1\n");
  // What the node said it enforces.
  v1::Node node = agent_->Node();
  bool images = false;
  for (const auto& c : node.capabilities()) images |= c.name() == "images" && c.enforced();
  EXPECT_TRUE(images) << node.DebugString();
}

// A cold start shows PULLING with the bytes to a watcher: the agent reports the store's
// progress, gpupoold shows it on the SCHEDULED task. The pull of a 16 MiB layer starts after
// placement and reports first after about 100 ms, well after the watch is open.
TEST_F(ImageE2eTest, AWatcherSeesTheTaskPullingWithItsBytes) {
  testing::TestLayer big;
  std::string noise(16 << 20, '\0');  // random: the blob stays 16 MiB once compressed
  std::mt19937_64 rng(7);
  for (char& c : noise) c = static_cast<char>(rng());
  big.files["/etc/big"] = std::move(noise);
  auto digest = testing::BuildAndPush(registry_, dir_ + "/build-big", "test/big", "1",
                                      {testing::BusyboxLayer(), big});
  ASSERT_TRUE(digest.ok()) << digest.status().ToString();
  const std::string image = registry_.host() + "/test/big:1";
  grpc::ClientContext submit;
  v1::SubmitJobResponse resp;
  ASSERT_TRUE(jobs_->SubmitJob(&submit, ImageJob(image, "true"), &resp).ok());

  grpc::ClientContext watch;
  watch.set_deadline(std::chrono::system_clock::now() + 120s);
  v1::WatchJobRequest req;
  req.set_job_id(resp.job_id());
  auto stream = jobs_->WatchJob(&watch, req);
  std::vector<v1::Task> pulling;
  std::vector<v1::TaskState> states;
  for (v1::JobEvent e; stream->Read(&e);) {
    ASSERT_EQ(e.job().tasks_size(), 1);
    const v1::Task& t = e.job().tasks(0);
    if (states.empty() || states.back() != t.state()) states.push_back(t.state());
    if (t.state() == v1::TASK_STATE_PULLING) pulling.push_back(t);
    if (e.job().state() == v1::JOB_STATE_SUCCEEDED || e.job().state() == v1::JOB_STATE_FAILED) {
      break;
    }
  }
  watch.TryCancel();
  ASSERT_FALSE(pulling.empty()) << "no PULLING seen";
  for (const v1::Task& t : pulling) {
    EXPECT_EQ(t.pull().image(), image);
    EXPECT_GE(t.pull().bytes_total(), 16 << 20);
    EXPECT_LE(t.pull().bytes_done(), t.pull().bytes_total());
    EXPECT_EQ(t.node(), pulling.front().node());
  }
  EXPECT_EQ(pulling.back().pull().bytes_done(), pulling.back().pull().bytes_total());
  // PULLING comes between SCHEDULED and RUNNING, and the job succeeds.
  auto at = [&](v1::TaskState s) { return std::find(states.begin(), states.end(), s); };
  ASSERT_NE(at(v1::TASK_STATE_RUNNING), states.end());
  EXPECT_LT(at(v1::TASK_STATE_PULLING), at(v1::TASK_STATE_RUNNING));
  EXPECT_EQ(states.back(), v1::TASK_STATE_SUCCEEDED);
  // Once it ran, nothing of the pull is shown.
  v1::Task done = testing::FirstTask(*jobs_, resp.job_id());
  EXPECT_EQ(done.state(), v1::TASK_STATE_SUCCEEDED);
  EXPECT_FALSE(done.has_pull());
}

// Prepull and pins (docs/images.md): `gpupoolctl images prepull --wait` returns once the pool's
// node holds the image, fetched before any task asked for it; a task of it then starts without
// PULLING and fetches nothing; the node shows the image; unpinning empties the pool's list.
TEST_F(ImageE2eTest, APrepulledImageIsOnTheNodeBeforeItsFirstTask) {
  testing::TestLayer data;
  data.files["/etc/prepulled"] = "prepulled\n";
  auto digest = testing::BuildAndPush(registry_, dir_ + "/build-pre", "test/pre", "1",
                                      {testing::BusyboxLayer(), data});
  ASSERT_TRUE(digest.ok()) << digest.status().ToString();
  const std::string image = registry_.host() + "/test/pre:1";
  std::string out;
  ASSERT_EQ(Ctl({"images", "prepull", "--pool", "gpu", "--wait", image}, &out), 0) << out;
  EXPECT_NE(out.find("pinned " + image + " to pool gpu"), std::string::npos) << out;
  EXPECT_NE(out.find(image + " is on 1 of 1 ready node(s)"), std::string::npos) << out;
  ASSERT_EQ(Ctl({"images", "list", "--pool", "gpu"}, &out), 0) << out;
  EXPECT_NE(out.find(image), std::string::npos) << out;
  EXPECT_NE(out.find("1/1"), std::string::npos) << out;
  // Pinned again: nothing changes.
  ASSERT_EQ(Ctl({"images", "prepull", "--pool", "gpu", image}, &out), 0) << out;
  EXPECT_NE(out.find("already pinned"), std::string::npos) << out;

  // Its first task starts warm: no PULLING, nothing fetched from the registry.
  const size_t log_from = registry_.LogBytes();
  grpc::ClientContext submit;
  v1::SubmitJobResponse resp;
  ASSERT_TRUE(jobs_->SubmitJob(&submit, ImageJob(image, "cat /etc/prepulled"), &resp).ok());
  grpc::ClientContext watch;
  watch.set_deadline(std::chrono::system_clock::now() + 120s);
  v1::WatchJobRequest req;
  req.set_job_id(resp.job_id());
  auto stream = jobs_->WatchJob(&watch, req);
  bool pulled = false;
  v1::JobState end = v1::JOB_STATE_UNSPECIFIED;
  for (v1::JobEvent e; stream->Read(&e);) {
    if (e.job().tasks_size() == 1 && e.job().tasks(0).state() == v1::TASK_STATE_PULLING) {
      pulled = true;
    }
    end = e.job().state();
    if (end == v1::JOB_STATE_SUCCEEDED || end == v1::JOB_STATE_FAILED) break;
  }
  watch.TryCancel();
  EXPECT_EQ(end, v1::JOB_STATE_SUCCEEDED);
  EXPECT_FALSE(pulled) << "a prepulled image's task showed PULLING";
  const v1::Task task = testing::FirstTask(*jobs_, resp.job_id());
  EXPECT_EQ(Logs(task.id()), "prepulled\n");
  std::ifstream access(registry_.dir() + "/registry.log");
  const std::string log((std::istreambuf_iterator<char>(access)), std::istreambuf_iterator<char>());
  const std::string since = log.size() > log_from ? log.substr(log_from) : "";
  for (std::istringstream lines(since); std::getline(lines, out);) {
    EXPECT_FALSE(out.find("\"GET ") != std::string::npos &&
                 out.find("/blobs/") != std::string::npos)
        << "a blob fetched after the prepull: " << out;
  }

  ASSERT_EQ(Ctl({"images", "unpin", "--pool", "gpu", image}, &out), 0) << out;
  ASSERT_EQ(Ctl({"-o", "json", "pools", "get", "gpu"}, &out), 0) << out;
  EXPECT_EQ(out.find("pinnedImages"), std::string::npos) << out;
  EXPECT_NE(Ctl({"images", "unpin", "--pool", "gpu", image}, &out), 0);
  EXPECT_NE(out.find("does not pin"), std::string::npos) << out;
}

TEST_F(ImageE2eTest, AnImageTheRegistryLacksFailsTheTaskNamingIt) {
  grpc::ClientContext ctx;
  v1::SubmitJobResponse resp;
  ASSERT_TRUE(
      jobs_->SubmitJob(&ctx, ImageJob(registry_.host() + "/test/absent:1", "true"), &resp).ok());
  v1::Task task;
  ASSERT_TRUE(WaitFor([&] {
    task = testing::FirstTask(*jobs_, resp.job_id());
    return task.state() == v1::TASK_STATE_FAILED;
  })) << "state "
      << v1::TaskState_Name(task.state()) << ": " << task.reason();
  EXPECT_NE(task.reason().find("image"), std::string::npos) << task.reason();
  EXPECT_NE(task.reason().find("test/absent"), std::string::npos) << task.reason();
}

// Registry credentials kept once per tenant (issue 25): an operator of tenant "acme" stores the
// credential of its private registry with gpupoolctl (the secret from a file, never argv); a job
// of a tenant below it names the credential and its task runs from the private image without
// ever seeing the secret; a rotation to a wrong secret is used by the next start, whose task
// fails saying the registry refused it — never echoing it.
TEST_F(ImageE2eTest, ATenantsStoredRegistryCredentialPullsItsPrivateImage) {
  // bcrypt (cost 4) of "s3cret" for the registry's htpasswd (as in image_store_test.cc).
  constexpr char kBcryptS3cret[] = "$2b$04$ax8.W/eQ7R/xmzfReiQmeumJMVzO..JZcrtiCzfUPrgKAaxILgP/q";
  testing::LocalRegistry secured;
  ASSERT_TRUE(secured.Start("tenant-a", kBcryptS3cret).ok());
  testing::TestLayer marker;
  marker.files["/etc/private-release"] = "private 1\n";
  ASSERT_TRUE(testing::BuildAndPush(secured, dir_ + "/private", "private/app", "1",
                                    {testing::BusyboxLayer(), marker}, {"/bin/sh"}, "tenant-a",
                                    "s3cret")
                  .ok());
  const std::string secret_file = dir_ + "/pull.secret";
  std::ofstream(secret_file) << "s3cret\n";
  std::string out;
  ASSERT_EQ(Ctl({"registry-credentials", "create", "acme-hub", "--tenant", "acme", "--registry",
                 secured.host(), "--username", "tenant-a", "--secret-file", secret_file},
                &out),
            0)
      << out;
  ASSERT_EQ(Ctl({"registry-credentials", "list", "--tenant", "acme"}, &out), 0) << out;
  EXPECT_NE(out.find("acme-hub"), std::string::npos) << out;
  EXPECT_EQ(out.find("s3cret"), std::string::npos) << out;

  auto run = [&](const std::string& script) {
    v1::SubmitJobRequest req = ImageJob(secured.host() + "/private/app:1", script);
    req.mutable_spec()->mutable_template_()->set_registry_credential("acme-hub");
    return RunToEnd(req);
  };
  const v1::Task ok = run("cat /etc/private-release; env");
  EXPECT_EQ(ok.state(), v1::TASK_STATE_SUCCEEDED) << ok.reason();
  const std::string logs = Logs(ok.id());
  EXPECT_NE(logs.find("private 1"), std::string::npos) << logs;
  EXPECT_EQ(logs.find("s3cret"), std::string::npos) << logs;
  EXPECT_EQ(logs.find("GPUPOOL_REGISTRY_CREDENTIAL"), std::string::npos) << logs;

  // Rotated to a wrong secret: the next start pulls with it and the registry refuses.
  std::ofstream(secret_file) << "wrong-secret\n";
  ASSERT_EQ(
      Ctl({"registry-credentials", "create", "acme-hub", "--tenant", "acme", "--registry",
           secured.host(), "--username", "tenant-a", "--secret-file", secret_file, "--replace"},
          &out),
      0)
      << out;
  const v1::Task refused = run("true");
  EXPECT_EQ(refused.state(), v1::TASK_STATE_FAILED);
  EXPECT_NE(refused.reason().find("refused"), std::string::npos) << refused.reason();
  EXPECT_EQ(refused.reason().find("wrong-secret"), std::string::npos) << refused.reason();

  // A name the tenant does not keep is refused at submission, naming the field.
  v1::SubmitJobRequest unknown = ImageJob(secured.host() + "/private/app:1", "true");
  unknown.mutable_spec()->mutable_template_()->set_registry_credential("nope");
  grpc::ClientContext ctx;
  v1::SubmitJobResponse resp;
  grpc::Status st = jobs_->SubmitJob(&ctx, unknown, &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(st.error_message().find("template.registry_credential"), std::string::npos)
      << st.error_message();
}

TEST_F(ImageE2eTest, AMalformedImageIsRefusedAtSubmissionNamingTheField) {
  for (const char* bad : {"Team/App:1", "app@sha256:1234", "app:-x"}) {
    grpc::ClientContext ctx;
    v1::SubmitJobResponse resp;
    grpc::Status st = jobs_->SubmitJob(&ctx, ImageJob(bad, "true"), &resp);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << bad;
    EXPECT_NE(st.error_message().find("template.image"), std::string::npos)
        << bad << ": " << st.error_message();
  }
}

// Issue 25, network per pool: the pool's network reaches the node's tasks, image and plain alike.
TEST_F(ImageE2eTest, APoolsNetworkConfinesItsTasksAndAnAdminMayOpenIt) {
  using agent::testing::Listener;
  Listener node("");  // a port of the node's own, on all its addresses
  const std::string address = agent::testing::NodeAddress(agent::net::Cidr{0, 32});
  ASSERT_FALSE(address.empty());
  const std::string probe = "if nc -w 2 " + address + " " + std::to_string(node.port()) +
                            " </dev/null >/dev/null 2>&1; then echo reached; else echo refused; "
                            "fi";
  auto run = [&](const std::string& image, const std::string& script) {
    v1::SubmitJobRequest req = ImageJob(image, script);
    if (image.empty()) {
      // A plain command: the node's shell, in the sandbox.
      req.mutable_spec()->mutable_template_()->clear_image();
      req.mutable_spec()->mutable_template_()->clear_command();
      for (const char* a : {"/bin/bash", "-c"})
        req.mutable_spec()->mutable_template_()->add_command(a);
      req.mutable_spec()->mutable_template_()->add_command(script);
    }
    const v1::Task task = RunToEnd(req);
    EXPECT_EQ(task.state(), v1::TASK_STATE_SUCCEEDED) << task.reason();
    return Logs(task.id());
  };
  const std::string image = registry_.host() + "/test/app:1";

  // Isolated: its own address from the node's subnet, and the node's port refused.
  SetPoolNetwork(v1::NETWORK_MODE_ISOLATED);
  // Its own address from the node's subnet, the node's name server, the node's port refused.
  EXPECT_EQ(run(image,
                "ip -4 -o addr show dev eth0 | awk '{print $4}' | cut -d. -f1-3; "
                "grep nameserver /etc/resolv.conf; " +
                    probe),
            "10.217.0\nnameserver 198.51.100.53\nrefused\n");
  const std::string bash_probe = "if timeout 3 bash -c 'echo > /dev/tcp/" + address + "/" +
                                 std::to_string(node.port()) +
                                 "' 2>/dev/null; then echo reached; else echo refused; fi";
  EXPECT_EQ(run("", "grep -c eth0 /proc/net/dev; " + bash_probe), "1\nrefused\n");
  // None: loopback only.
  SetPoolNetwork(v1::NETWORK_MODE_NONE);
  EXPECT_EQ(run(image, "ls /sys/class/net 2>/dev/null | grep -v lo | wc -l; " + probe),
            "0\nrefused\n");
  // Host, an admin's choice: the node's network.
  SetPoolNetwork(v1::NETWORK_MODE_HOST);
  EXPECT_EQ(run(image, probe), "reached\n");
  EXPECT_EQ(run("", bash_probe), "reached\n");
  // The node says what it enforces.
  bool network = false;
  const v1::Node node_info = agent_->Node();
  for (const auto& c : node_info.capabilities()) {
    if (c.name() == "network") {
      network =
          c.enforced() && c.detail().find("isolated: outbound through NAT") != std::string::npos;
    }
  }
  EXPECT_TRUE(network) << node_info.DebugString();
}

// What an HTTP/1.0 GET of "/" at address:port answers, "" when nothing does (3 s at most).
std::string HttpGet(const std::string& address, int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  timeval timeout{3, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, address.c_str(), &a.sin_addr);
  std::string out;
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
    const std::string request = "GET / HTTP/1.0\r\n\r\n";
    if (send(fd, request.data(), request.size(), MSG_NOSIGNAL) ==
        static_cast<ssize_t>(request.size())) {
      char buf[4096];
      for (ssize_t n; (n = recv(fd, buf, sizeof buf, 0)) > 0;) out.append(buf, n);
    }
  }
  close(fd);
  return out;
}

TEST_F(ImageE2eTest, ATasksDeclaredPortIsPublishedOnItsNodeAndItsEndpointReported) {
  SetPoolNetwork(v1::NETWORK_MODE_ISOLATED);
  const std::string image = registry_.host() + "/test/app:1";
  // A web server in the task, submitted with gpupoolctl's --port.
  std::string out;
  ASSERT_EQ(Ctl({"jobs", "submit", "--tenant", "acme/e2e/tester", "--pool", "gpu", "--gpus", "1",
                 "--image", image, "--port", "8080/tcp:http", "--", "/bin/sh", "-c",
                 "mkdir -p /tmp/www && echo served-by-task > /tmp/www/index.html && "
                 "exec busybox httpd -f -p 8080 -h /tmp/www"},
                &out),
            0)
      << out;
  const size_t at = out.find_first_of("0123456789");
  ASSERT_NE(at, std::string::npos) << out;
  const std::string job_id = out.substr(at, out.find_first_not_of("0123456789", at) - at);
  v1::Task task;
  ASSERT_TRUE(WaitFor([&] {
    task = testing::FirstTask(*jobs_, job_id);
    return task.state() == v1::TASK_STATE_RUNNING || task.state() == v1::TASK_STATE_FAILED;
  })) << v1::TaskState_Name(task.state());
  ASSERT_EQ(task.state(), v1::TASK_STATE_RUNNING) << task.reason();
  ASSERT_EQ(task.endpoints_size(), 1) << task.DebugString();
  const v1::Endpoint& e = task.endpoints(0);
  EXPECT_EQ(e.name(), "http");
  EXPECT_EQ(e.port(), 8080u);
  EXPECT_EQ(e.protocol(), "tcp");
  EXPECT_EQ(e.host(), task.node()) << "no network.advertise: the node's name";
  EXPECT_GE(e.host_port(), 30000u);
  EXPECT_LE(e.host_port(), 32767u);
  // The node says where it publishes.
  bool said = false;
  const v1::Node node_info = agent_->Node();
  for (const auto& c : node_info.capabilities()) {
    said =
        said || (c.name() == "network" &&
                 c.detail().find("declared ports published on 30000-32767") != std::string::npos);
  }
  EXPECT_TRUE(said) << node_info.DebugString();

  // Reached on the node's address at the published port, once the server listens.
  const std::string address = agent::testing::NodeAddress(agent::net::Cidr{0, 32});
  ASSERT_FALSE(address.empty());
  std::string page;
  EXPECT_TRUE(WaitFor(
      [&] {
        page = HttpGet(address, static_cast<int>(e.host_port()));
        return page.find("served-by-task") != std::string::npos;
      },
      30s))
      << page;
  // The CLI shows where.
  ASSERT_EQ(Ctl({"jobs", "get", job_id}, &out), 0) << out;
  EXPECT_NE(out.find("Ports:"), std::string::npos) << out;
  EXPECT_NE(out.find(" 8080/tcp (http)\n"), std::string::npos) << out;
  EXPECT_NE(
      out.find("port 8080/tcp (http) at " + task.node() + ":" + std::to_string(e.host_port())),
      std::string::npos)
      << out;

  // Cancelled: the node's port answers no more.
  ASSERT_EQ(Ctl({"jobs", "cancel", job_id}, &out), 0) << out;
  ASSERT_TRUE(WaitFor(
      [&] { return testing::FirstTask(*jobs_, job_id).state() == v1::TASK_STATE_CANCELLED; }));
  EXPECT_TRUE(
      WaitFor([&] { return HttpGet(address, static_cast<int>(e.host_port())).empty(); }, 10s));

  // A pool whose tasks get no network cannot publish: the task fails saying so.
  SetPoolNetwork(v1::NETWORK_MODE_NONE);
  v1::SubmitJobRequest req = ImageJob(image, "true");
  v1::Port* port = req.mutable_spec()->mutable_template_()->add_ports();
  port->set_port(8080);
  const v1::Task refused = RunToEnd(req);
  EXPECT_EQ(refused.state(), v1::TASK_STATE_FAILED);
  EXPECT_NE(refused.reason().find("declares ports, and its network is none"), std::string::npos)
      << refused.reason();
  // A bad port is refused at submission naming the field.
  port->set_protocol("sctp");
  grpc::ClientContext ctx;
  v1::SubmitJobResponse resp;
  const grpc::Status st = jobs_->SubmitJob(&ctx, req, &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(st.error_message().find("template.ports[0].protocol"), std::string::npos)
      << st.error_message();
}

}  // namespace
}  // namespace gpupool
