/* oci_probe: a tiny static program (C-style C++, linked -static) the OCI runtime tests copy into
 * their image. oci_probe move_pages    calls move_pages(0, 0, …), which the default seccomp profile
 * refuses (EPERM) and the kernel otherwise allows any process for itself; prints "ok" (exit 0) or
 * "errno <n> <name>" (exit 1). oci_probe hog <MiB>     allocates and touches memory 1 MiB at a
 * time, up to <MiB>.
 */
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

int main(int argc, char** argv) {
  if (argc >= 2 && strcmp(argv[1], "move_pages") == 0) {
    long rc = syscall(SYS_move_pages, 0, 0UL, nullptr, nullptr, nullptr, 0);
    if (rc == 0) {
      printf("ok\n");
      return 0;
    }
    printf("errno %d %s\n", errno, strerror(errno));
    return 1;
  }
  if (argc >= 3 && strcmp(argv[1], "hog") == 0) {
    long mib = atol(argv[2]);
    for (long i = 0; i < mib; ++i) {
      char* p = static_cast<char*>(malloc(1 << 20));
      if (p == nullptr) return 2;
      memset(p, 1, 1 << 20);
    }
    printf("allocated %ld MiB\n", mib);
    return 0;
  }
  fprintf(stderr, "usage: oci_probe move_pages | hog <MiB>\n");
  return 64;
}
