// ClientTable: per-client connection counts over real descriptors (sockets the test opens and
// closes), including a descriptor number the kernel hands out again.
#include "api/grpc/client_table.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <vector>

namespace gpupool::api::grpcface {
namespace {

int NewSocket() { return ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0); }

TEST(ClientTable, RefusesAClientAtItsLimitUntilOneOfItsConnectionsCloses) {
  ClientTable table(2);
  const int a1 = NewSocket(), a2 = NewSocket(), a3 = NewSocket(), b1 = NewSocket();
  EXPECT_TRUE(table.Admit(a1, "10.0.0.1"));
  EXPECT_TRUE(table.Admit(a2, "10.0.0.1"));
  EXPECT_FALSE(table.Admit(a3, "10.0.0.1"));  // a third from the same address
  EXPECT_TRUE(table.Admit(b1, "10.0.0.2"));   // another address has its own count
  EXPECT_EQ(table.Count("10.0.0.1"), 2u);
  // The server closes one of them without telling the table: the table finds out when it must.
  ::close(a1);
  EXPECT_TRUE(table.Admit(a3, "10.0.0.1"));
  EXPECT_EQ(table.Count("10.0.0.1"), 2u);
  for (int fd : {a2, a3, b1}) ::close(fd);
}

TEST(ClientTable, ADescriptorNumberHandedOutAgainReplacesItsOldEntry) {
  ClientTable table(1);
  const int first = NewSocket();
  ASSERT_TRUE(table.Admit(first, "10.0.0.1"));
  ::close(first);
  const int again = NewSocket();  // the lowest free number: the same one
  ASSERT_EQ(again, first);
  EXPECT_TRUE(table.Admit(again, "10.0.0.2"));
  EXPECT_EQ(table.Count("10.0.0.1"), 0u);
  EXPECT_EQ(table.Count("10.0.0.2"), 1u);
  ::close(again);
}

TEST(ClientTable, NoLimitTracksNothing) {
  ClientTable table(0);
  std::vector<int> fds;
  for (int i = 0; i < 10; ++i) {
    fds.push_back(NewSocket());
    EXPECT_TRUE(table.Admit(fds.back(), "10.0.0.1"));
  }
  EXPECT_EQ(table.Count("10.0.0.1"), 0u);
  for (int fd : fds) ::close(fd);
}

}  // namespace
}  // namespace gpupool::api::grpcface
