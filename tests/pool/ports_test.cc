// pool/ports: what a task may declare as the ports it listens on.
#include "pool/ports.h"

#include <gtest/gtest.h>

namespace gpupool {
namespace {

TEST(TaskPortsTest, ParsesAndFormatsTheCommandLineForm) {
  EXPECT_EQ(*ParseTaskPort("8080"), (TaskPort{"", 8080, "tcp"}));
  EXPECT_EQ(*ParseTaskPort("53/udp"), (TaskPort{"", 53, "udp"}));
  EXPECT_EQ(*ParseTaskPort("8080/tcp:http"), (TaskPort{"http", 8080, "tcp"}));
  EXPECT_EQ(*ParseTaskPort("9000:metrics"), (TaskPort{"metrics", 9000, "tcp"}));
  EXPECT_EQ(FormatTaskPort({"http", 8080, "tcp"}), "8080/tcp:http");
  EXPECT_EQ(FormatTaskPort({"", 53, "udp"}), "53/udp");
}

TEST(TaskPortsTest, EndpointsRoundTripTheStoresForm) {
  const TaskEndpoint e{{"http", 8080, "tcp"}, "node-3.example", 30001};
  EXPECT_EQ(FormatTaskEndpoint(e), "8080/tcp:http=30001@node-3.example");
  EXPECT_EQ(*ParseTaskEndpoint(FormatTaskEndpoint(e)), e);
  const TaskEndpoint v6{{"", 53, "udp"}, "fd00::1", 53};
  EXPECT_EQ(*ParseTaskEndpoint(FormatTaskEndpoint(v6)), v6);
  EXPECT_FALSE(ParseTaskEndpoint("8080/tcp=30001").ok());
  EXPECT_FALSE(ParseTaskEndpoint("8080/tcp=0@h").ok());
  EXPECT_FALSE(ParseTaskEndpoint("8080/tcp=30001@").ok());
}

TEST(TaskPortsTest, RefusesNamingTheEntryAndWhatIsWrong) {
  struct Case {
    std::string text, message;
  };
  for (const Case& c : std::vector<Case>{
           {"http", "port 'http': want PORT[/PROTOCOL][:NAME]"},
           {"", "port '': want PORT[/PROTOCOL][:NAME]"},
           {"0", "port '0': port: must be 1..65535, got 0"},
           {"65536", "port '65536': port: must be 1..65535, got 65536"},
           {"80/sctp", "port '80/sctp': protocol: want tcp or udp, got 'sctp'"},
           {"80:Web", "port '80:Web': name 'Web': want [a-z][a-z0-9-]*, at most 15 characters"},
       }) {
    auto r = ParseTaskPort(c.text);
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_EQ(r.status().message(), c.message);
  }
  std::vector<TaskPort> ports = {{"a", 80, "tcp"}, {"b", 80, "tcp"}};
  EXPECT_EQ(CheckTaskPorts(ports, "template.ports").message(),
            "template.ports[1]: 80/tcp is declared twice");
  ports[1].protocol = "udp";
  EXPECT_TRUE(CheckTaskPorts(ports).ok()) << "the same number over another protocol";
  ports[1].name = "a";
  EXPECT_EQ(CheckTaskPorts(ports).message(), "ports[1].name 'a' is used twice");
  EXPECT_EQ(CheckTaskPorts(std::vector<TaskPort>(17, TaskPort{"", 1, "tcp"})).message(),
            "ports: at most 16 per task, got 17");
}

}  // namespace
}  // namespace gpupool
