#include "agent/companion.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

namespace gpupool::agent {

std::string FindCompanion(const std::string& agent_binary, const std::string& name,
                          const std::string& build_dir, bool executable) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path dir = fs::path(agent_binary).parent_path();
  for (const fs::path& p : {dir / name, dir / ".." / build_dir / name,
                            dir / "../lib/gpupool" / name, fs::path("/usr/lib/gpupool") / name}) {
    struct stat st {};
    if (::stat(p.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    if (executable && access(p.c_str(), X_OK) != 0) continue;
    return fs::weakly_canonical(p, ec).string();
  }
  return "";
}

}  // namespace gpupool::agent
