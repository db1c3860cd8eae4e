// The cgroup v2 eBPF device filter on this host's real cgroup2 tree (issue 10): a process in a
// group with the program attached opens the granted fake /dev/nvidia0 (ENXIO from the absent
// driver: the filter let it through) and /dev/null, and gets EPERM on /dev/nvidia1 and on a
// block device. Skips, saying why, without root, without a cgroup2 mount, or where the kernel
// refuses cgroup device programs.
#include "agent/sandbox/bpf_device_filter.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "agent/sandbox/cgroup.h"

namespace gpupool::agent::sandbox {
namespace {

std::string Cgroup2Mount() {
  std::ifstream in("/proc/self/mountinfo");
  for (std::string line; std::getline(in, line);) {
    const size_t dash = line.find(" - cgroup2 ");
    if (dash == std::string::npos) continue;
    std::istringstream f(line.substr(0, dash));
    std::string id, parent, dev, root, mount;
    f >> id >> parent >> dev >> root >> mount;
    return mount;
  }
  return "";
}

TEST(BpfDeviceFilterTest, RulesAreCheckedAndNamed) {
  for (const char* bad : {"x 1:3 rw", "c 1 rw", "c a:3 rw", "c 1:3 rwz", "c 1:3"}) {
    Status st = AttachDeviceFilter("/nonexistent", {bad});
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << bad << ": " << st.ToString();
    EXPECT_NE(st.message().find(std::string("device rule '") + bad + "'"), std::string::npos)
        << st.message();
  }
}

TEST(BpfDeviceFilterTest, OnlyGrantedDevicesOpenInTheGroup) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (bpf(2) and mknod)";
  const std::string mount = Cgroup2Mount();
  if (mount.empty()) GTEST_SKIP() << "no cgroup2 mount on this host";
  if (Status probe = ProbeDeviceFilter(); !probe.ok()) {
    GTEST_SKIP() << "this kernel refuses cgroup device programs: " << probe.message();
  }
  char tmpl[] = "/tmp/gpupool-bpf-test-XXXXXX";
  const std::string dev = mkdtemp(tmpl);
  auto node = [&](const std::string& name, mode_t type, int maj, int min) {
    const std::string path = dev + "/" + name;
    EXPECT_EQ(mknod(path.c_str(), type | 0666, makedev(maj, min)), 0)
        << path << ": " << strerror(errno);
    return path;
  };
  const std::string nvidia0 = node("nvidia0", S_IFCHR, 195, 0);
  const std::string nvidia1 = node("nvidia1", S_IFCHR, 195, 1);
  const std::string block = node("blk", S_IFBLK, 7, 200);  // a loop device number
  const std::string group = mount + "/gpupool-bpf-test-" + std::to_string(getpid());
  ASSERT_EQ(mkdir(group.c_str(), 0755), 0) << group << ": " << strerror(errno);

  std::vector<std::string> rules = BaselineDeviceRules();
  rules.push_back("c 195:0 rw");
  Status st = AttachDeviceFilter(group, rules);
  ASSERT_TRUE(st.ok()) << st.ToString();

  int results[2];
  ASSERT_EQ(pipe(results), 0);
  const pid_t child = fork();
  if (child == 0) {
    // Join the group, then report the errno of each open (0 = opened).
    std::ofstream(group + "/cgroup.procs") << "0";
    int codes[4];
    int i = 0;
    for (const std::string& path : {std::string("/dev/null"), nvidia0, nvidia1, block}) {
      const int fd = open(path.c_str(), O_RDWR);
      codes[i++] = fd >= 0 ? 0 : errno;
      if (fd >= 0) close(fd);
    }
    [[maybe_unused]] ssize_t n = write(results[1], codes, sizeof(codes));
    _exit(0);
  }
  close(results[1]);
  int codes[4] = {-1, -1, -1, -1};
  ASSERT_EQ(read(results[0], codes, sizeof(codes)), static_cast<ssize_t>(sizeof(codes)));
  close(results[0]);
  int ws = 0;
  waitpid(child, &ws, 0);
  EXPECT_EQ(codes[0], 0) << "/dev/null: " << strerror(codes[0]);
  EXPECT_EQ(codes[1], ENXIO) << "granted nvidia0 (no driver behind it): " << strerror(codes[1]);
  EXPECT_EQ(codes[2], EPERM) << "nvidia1: " << strerror(codes[2]);
  EXPECT_EQ(codes[3], EPERM) << "block device: " << strerror(codes[3]);

  // Outside the group nothing is filtered.
  const int fd = open(nvidia1.c_str(), O_RDWR);
  EXPECT_EQ(fd < 0 ? errno : 0, ENXIO);
  if (fd >= 0) close(fd);
  EXPECT_EQ(rmdir(group.c_str()), 0) << strerror(errno);
  std::filesystem::remove_all(dev);
}

}  // namespace
}  // namespace gpupool::agent::sandbox
