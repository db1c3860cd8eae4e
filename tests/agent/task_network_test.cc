// Task networks against the real kernel: namespaces, veths, iptables and routing, as root.
//
// The "internet" is a namespace the test makes (198.51.100.2, TEST-NET-2, behind a veth the node
// routes to) that also answers at 169.254.169.254 (a cloud's metadata address) and at
// 198.51.100.130 (in the operator's deny list), so each refusal is the firewall's doing and not a
// missing route. The node listens on all its addresses; a second task listens on its own.
#include "agent/net/task_network.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "base/run_tool.h"
#include "tests/agent/net_fixture.h"

namespace gpupool::agent::net {
namespace {

using testing::ConnectFrom;
using testing::Listener;
using testing::NodeAddress;
using testing::ReadIn;

void Sh(const std::string& command) {
  ToolRun run;
  run.argv = {"/bin/sh", "-c", command};
  run.timeout_ms = 10'000;
  auto r = RunTool(run);
  ASSERT_TRUE(r.ok() && r->ok()) << command << ": " << (r.ok() ? r->Describe() : "");
}

class TaskNetworkTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const std::string why = testing::CannotBuildNetworks(); !why.empty()) GTEST_SKIP() << why;
    const std::string tag = std::to_string(getpid() % 100000);
    options_ = testing::TestNetworkOptions("t", "10.214.0.0/24");
    options_.deny = {"198.51.100.128/25"};
    outside_ns_ = "gpo" + tag;
    outside_if_ = "o" + tag;
    // The "internet": one namespace the node routes TEST-NET-2, a metadata address and a denied
    // range to.
    Sh("ip netns add " + outside_ns_ + " && ip link add " + outside_if_ +
       " type veth peer name eth0 netns " + outside_ns_ + " && ip addr add 198.51.100.1/30 dev " +
       outside_if_ + " && ip link set " + outside_if_ + " up && ip -n " + outside_ns_ +
       " addr add 198.51.100.2/30 dev eth0 && ip -n " + outside_ns_ +
       " addr add 169.254.169.254/32 dev eth0 && ip -n " + outside_ns_ +
       " addr add 198.51.100.130/32 dev eth0 && ip -n " + outside_ns_ +
       " link set eth0 up && ip -n " + outside_ns_ + " link set lo up && ip -n " + outside_ns_ +
       " route add default via 198.51.100.1 && ip route add 169.254.169.254/32 via 198.51.100.2 && "
       "ip route add 198.51.100.128/25 via 198.51.100.2");
  }
  void TearDown() override {
    if (nets_) nets_->Uninstall();
    if (!outside_ns_.empty()) {
      ToolRun run;
      run.argv = {"/bin/sh", "-c",
                  "ip route del 169.254.169.254/32; ip route del 198.51.100.128/25; ip netns del " +
                      outside_ns_ + "; ip link del " + outside_if_ + " 2>/dev/null; true"};
      [[maybe_unused]] auto r = RunTool(run);
    }
  }

  NetworkOptions options_;
  std::string outside_ns_, outside_if_;
  std::unique_ptr<TaskNetworks> nets_;
};

TEST_F(TaskNetworkTest, AnIsolatedTaskReachesOutsideOnlyThroughNatAndNothingOfTheNodeOrOthers) {
  auto nets = TaskNetworks::Open(options_);
  ASSERT_TRUE(nets.ok()) << nets.status().message();
  nets_ = std::move(nets).value();
  auto a = nets_->Prepare("task-a");
  ASSERT_TRUE(a.ok()) << a.status().message();
  auto b = nets_->Prepare("task-b");
  ASSERT_TRUE(b.ok()) << b.status().message();
  EXPECT_NE(a->address, b->address);
  EXPECT_EQ(nets_->in_use(), 2);

  Listener internet("/run/netns/" + outside_ns_);
  Listener node("");  // the agent's, gpupoold's and PostgreSQL's stand-in: every node address
  Listener other_task(b->netns_path);

  // Outbound works, masqueraded: the far end sees the node, not the task's private address.
  EXPECT_EQ(ConnectFrom(a->netns_path, "198.51.100.2", internet.port()), 0);
  EXPECT_EQ(internet.last_peer(), "198.51.100.1");
  // The node itself, by the task's gateway and by its own public address: refused.
  EXPECT_NE(ConnectFrom(a->netns_path, a->gateway, node.port()), 0);
  const std::string public_address = NodeAddress(*ParseCidr(options_.subnet));
  ASSERT_FALSE(public_address.empty());
  EXPECT_EQ(ConnectFrom("", public_address, node.port()), 0) << "control: the node's listener";
  EXPECT_NE(ConnectFrom(a->netns_path, public_address, node.port()), 0);
  // The task's own loopback is its own: the node's 127.0.0.1 is not there.
  EXPECT_NE(ConnectFrom(a->netns_path, "127.0.0.1", node.port()), 0);
  // Another task: refused, although the node itself can reach it.
  EXPECT_EQ(ConnectFrom("", b->address, other_task.port()), 0) << "control: task b listens";
  EXPECT_NE(ConnectFrom(a->netns_path, b->address, other_task.port()), 0);
  // Link-local metadata and the operator's deny list: refused, though routed and listening.
  EXPECT_EQ(ConnectFrom("", "169.254.169.254", internet.port()), 0) << "control: metadata";
  EXPECT_EQ(ConnectFrom(a->netns_path, "169.254.169.254", internet.port()), EHOSTUNREACH);
  EXPECT_EQ(ConnectFrom("", "198.51.100.130", internet.port()), 0) << "control: denied range";
  EXPECT_EQ(ConnectFrom(a->netns_path, "198.51.100.130", internet.port()), EHOSTUNREACH);
  // Nothing from outside reaches a task unasked.
  EXPECT_NE(ConnectFrom("/run/netns/" + outside_ns_, a->address, other_task.port()), 0);
  // No IPv6 on either end of the veth.
  if (std::filesystem::exists("/proc/sys/net/ipv6")) {
    EXPECT_EQ(ReadIn(a->netns_path, "/proc/sys/net/ipv6/conf/all/disable_ipv6"), "1");
    EXPECT_EQ(ReadIn("", "/proc/sys/net/ipv6/conf/" + a->host_iface + "/disable_ipv6"), "1");
  }

  nets_->Release(*a);
  nets_->Release(*b);
  EXPECT_TRUE(a->resolv_conf.empty()) << "no name servers configured";
  EXPECT_EQ(nets_->in_use(), 0);
  EXPECT_FALSE(std::filesystem::exists(a->netns_path));
  EXPECT_FALSE(std::filesystem::exists("/sys/class/net/" + a->host_iface));
}

TEST_F(TaskNetworkTest, OpenRemovesWhatAnEarlierRunLeftAndIsIdempotent) {
  auto first = TaskNetworks::Open(options_);
  ASSERT_TRUE(first.ok()) << first.status().message();
  auto left = (*first)->Prepare("crashed");
  ASSERT_TRUE(left.ok()) << left.status().message();
  ASSERT_TRUE(std::filesystem::exists(left->netns_path));
  // A new agent on the same prefix: the namespace of the dead one is gone, the hooks are there
  // once (a second Open does not add them again).
  auto second = TaskNetworks::Open(options_);
  ASSERT_TRUE(second.ok()) << second.status().message();
  nets_ = std::move(second).value();
  EXPECT_FALSE(std::filesystem::exists(left->netns_path));
  ToolRun run;
  run.argv = {
      "/bin/sh", "-c",
      "iptables -w -S FORWARD | grep -c -- '-j GPT" + options_.prefix.substr(3) + "-FORWARD'"};
  auto r = RunTool(run);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->out, "1\n");
}

TEST_F(TaskNetworkTest, ANameServerInADeniedRangeAnswersOnPort53Only) {
  options_.dns = {"198.51.100.130"};  // inside the deny list (198.51.100.128/25)
  auto nets = TaskNetworks::Open(options_);
  ASSERT_TRUE(nets.ok()) << nets.status().message();
  nets_ = std::move(nets).value();
  auto a = nets_->Prepare("task-a");
  ASSERT_TRUE(a.ok()) << a.status().message();
  std::ifstream in(a->resolv_conf);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("nameserver 198.51.100.130\n"), std::string::npos) << text;
  Listener other("/run/netns/" + outside_ns_);
  Listener dns("/run/netns/" + outside_ns_, 53);
  EXPECT_EQ(ConnectFrom(a->netns_path, "198.51.100.130", 53), 0);
  EXPECT_EQ(ConnectFrom(a->netns_path, "198.51.100.130", other.port()), EHOSTUNREACH);
  nets_->Release(*a);
  EXPECT_FALSE(std::filesystem::exists(a->resolv_conf));
}

TEST_F(TaskNetworkTest, APublishedPortIsReachedOnTheNodeByAnyoneButATask) {
  options_.published_first = 31000 + getpid() % 1000;
  options_.published_count = 3;
  auto nets = TaskNetworks::Open(options_);
  ASSERT_TRUE(nets.ok()) << nets.status().message();
  nets_ = std::move(nets).value();
  Listener placeholder("");  // a port of the task's own, free in its namespace as well
  const int task_port = placeholder.port();
  auto a = nets_->Prepare("task-a", {{"http", task_port, "tcp"}, {"", 9, "udp"}});
  ASSERT_TRUE(a.ok()) << a.status().message();
  ASSERT_EQ(a->published.size(), 2u);
  const int host_port = a->published[0].host_port;
  EXPECT_EQ(host_port, options_.published_first);
  EXPECT_EQ(a->published[1].host_port, options_.published_first + 1);
  EXPECT_EQ(a->published[0].spec.name, "http");
  auto b = nets_->Prepare("task-b");
  ASSERT_TRUE(b.ok()) << b.status().message();
  Listener in_task(a->netns_path, task_port);

  // From outside, on the node's address: the task's listener, which sees the caller's address.
  const std::string outside = "/run/netns/" + outside_ns_;
  EXPECT_EQ(ConnectFrom(outside, "198.51.100.1", host_port), 0);
  EXPECT_EQ(in_task.last_peer(), "198.51.100.2");
  // From the node itself, on its public address.
  const std::string public_address = NodeAddress(*ParseCidr(options_.subnet));
  EXPECT_EQ(ConnectFrom("", public_address, host_port), 0);
  // Another task: refused on the node's addresses as before, and the task's address is not
  // reachable from outside on the declared port either (only the published one is).
  EXPECT_NE(ConnectFrom(b->netns_path, public_address, host_port), 0);
  EXPECT_NE(ConnectFrom(b->netns_path, b->gateway, host_port), 0);
  EXPECT_NE(ConnectFrom(outside, a->address, task_port), 0);

  // The range holds 3 ports: two are taken, so two more do not fit, and nothing is half-taken.
  auto c = nets_->Prepare("task-c", {{"", 80, "tcp"}, {"", 81, "tcp"}});
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(c.status().message().find("network.published_ports"), std::string::npos)
      << c.status().message();
  EXPECT_EQ(nets_->in_use(), 2);
  // Bad ports are refused naming the port.
  auto d = nets_->Prepare("task-d", {{"", 80, "sctp"}});
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("ports[0].protocol"), std::string::npos);

  // A restarted agent: Open flushes the published ports, Adopt loads them again.
  auto reopened = TaskNetworks::Open(options_, /*remove_leftovers=*/false);
  ASSERT_TRUE(reopened.ok()) << reopened.status().message();
  nets_ = std::move(reopened).value();
  EXPECT_NE(ConnectFrom(outside, "198.51.100.1", host_port), 0) << "flushed until adopted";
  auto adopted = nets_->Adopt(a->slot, "task-a", a->published);
  ASSERT_TRUE(adopted.ok()) << adopted.status().message();
  EXPECT_EQ(adopted->published, a->published);
  EXPECT_EQ(ConnectFrom(outside, "198.51.100.1", host_port), 0);
  EXPECT_FALSE(nets_->Adopt(b->slot + 1, "task-x", a->published).ok()) << "its ports are taken";

  // Released: the node's port answers no more, and is free for the next task.
  nets_->Release(*adopted);
  EXPECT_NE(ConnectFrom(outside, "198.51.100.1", host_port), 0);
  auto e = nets_->Prepare("task-e", {{"", 80, "tcp"}});
  ASSERT_TRUE(e.ok()) << e.status().message();
  nets_->Release(*e);
}

TEST(PublishedPortTest, FormatsAndParsesAndRefusesNamingWhatIsWrong) {
  const PublishedPort p{{"http", 8080, "tcp"}, 30001};
  EXPECT_EQ(FormatPublishedPort(p), "8080/tcp:http=30001");
  EXPECT_EQ(*ParsePublishedPort("8080/tcp:http=30001"), p);
  EXPECT_EQ(ParsePublishedPort("53/udp")->spec.protocol, "udp");
  EXPECT_EQ(ParsePublishedPort("80")->spec.protocol, "tcp");
  EXPECT_FALSE(ParsePublishedPort("0/tcp").ok());
  EXPECT_FALSE(ParsePublishedPort("80/tcp=70000").ok());
  EXPECT_FALSE(ParsePublishedPort("http").ok());
  EXPECT_FALSE(ParsePublishedPort("80/tcp:Bad").ok());
}

TEST(DefaultNameServersTest, LoopbackStubsGiveWayToTheUpstreamOnes) {
  const std::string path = ::testing::TempDir() + "/resolv.conf";
  std::ofstream(path) << "# comment\nnameserver 10.0.0.2\nnameserver 127.0.0.53\n"
                         "nameserver ::1\nsearch example.org\nnameserver 10.0.0.2\n";
  EXPECT_EQ(DefaultNameServers(path), (std::vector<std::string>{"10.0.0.2"}));
}

TEST(TaskNetworkOptionsTest, BadOptionsAreRefusedNamingTheField) {
  NetworkOptions o;
  o.subnet = "10.0.0.0/28";
  auto r = TaskNetworks::Open(o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("network.subnet"), std::string::npos);
  o = NetworkOptions{};
  o.deny = {"10.1.2.300/8"};
  r = TaskNetworks::Open(o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("network.deny: '10.1.2.300/8'"), std::string::npos);
  o = NetworkOptions{};
  o.iface = "toolong1";
  EXPECT_FALSE(TaskNetworks::Open(o).ok());
  EXPECT_FALSE(ParseNetworkMode("bridge").ok());
  EXPECT_EQ(*ParseNetworkMode("isolated"), NetworkMode::kIsolated);
  EXPECT_EQ(ParseCidr("10.1.2.3/16")->ToString(), "10.1.0.0/16");
  EXPECT_TRUE(ParseCidr("10.1.0.0/16")->Contains((10u << 24) | (1u << 16) | 77u));
}

}  // namespace
}  // namespace gpupool::agent::net
