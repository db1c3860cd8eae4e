// gpupool-ledger — one task's GPU ledger as a standalone process, for tests and scripts (the
// agent embeds LedgerServer instead). Serves until SIGTERM/SIGINT; prints "ready" on stdout once
// the socket accepts connections. With --status, prints the usage every --status-ms.
//   gpupool-ledger --socket PATH --vram BYTES [--spill BYTES] [--context-bytes BYTES]
//                  [--lease-bytes BYTES] [--compute-percent 1..100]
#include <errno.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "agent/interposer/ledger/ledger_server.h"

namespace {

gpupool::ledger::LedgerServer* g_server = nullptr;

void OnSignal(int) {
  if (g_server != nullptr) g_server->Stop();
}

bool ParseU64(const char* s, uint64_t* out) {
  if (s == nullptr || *s < '0' || *s > '9') return false;
  char* end = nullptr;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno != 0 || *end != 0) return false;
  *out = v;
  return true;
}

int Usage(const char* why) {
  fprintf(stderr,
          "gpupool-ledger: %s\nusage: gpupool-ledger --socket PATH --vram BYTES [--spill BYTES] "
          "[--context-bytes BYTES] [--lease-bytes BYTES] [--compute-percent 1..100]\n",
          why);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string socket;
  gpupool::ledger::Limits limits;
  bool have_vram = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
    uint64_t n = 0;
    if (a == "--socket" && v != nullptr) {
      socket = v;
    } else if (a == "--vram" && ParseU64(v, &n)) {
      limits.vram = n;
      have_vram = true;
    } else if (a == "--spill" && ParseU64(v, &n)) {
      limits.spill = n;
    } else if (a == "--lease-bytes" && ParseU64(v, &n)) {
      limits.lease_bytes = n;
    } else if (a == "--context-bytes" && ParseU64(v, &n)) {
      limits.context_bytes = n;
    } else if (a == "--compute-percent" && ParseU64(v, &n) && n >= 1 && n <= 100) {
      limits.compute_percent = static_cast<uint32_t>(n);
    } else {
      return Usage(("bad or incomplete option: " + a).c_str());
    }
    ++i;
  }
  if (socket.empty() || !have_vram) return Usage("--socket and --vram are required");
  std::string error;
  auto server = gpupool::ledger::LedgerServer::Create(socket, limits, &error);
  if (server == nullptr) {
    fprintf(stderr, "gpupool-ledger: %s\n", error.c_str());
    return 1;
  }
  g_server = server.get();
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  printf("ready\n");
  fflush(stdout);
  server->Run();
  gpupool::ledger::Usage u = server->Snapshot();
  printf("vram %llu spill %llu refused %llu protocol_errors %llu\n",
         static_cast<unsigned long long>(u.vram), static_cast<unsigned long long>(u.spill),
         static_cast<unsigned long long>(u.refused),
         static_cast<unsigned long long>(u.protocol_errors));
  return 0;
}
