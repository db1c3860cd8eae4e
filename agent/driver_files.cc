#include "agent/driver_files.h"

#include <dlfcn.h>
#include <link.h>

#include <algorithm>
#include <filesystem>
#include <set>

namespace gpupool::agent {
namespace {

// `name` is `lib` followed by "." and a version ("libcuda.so.1", "libcuda.so.550.54.15").
bool IsVersionOf(const std::string& name, const std::string& lib) {
  return name.size() > lib.size() + 1 && name.compare(0, lib.size(), lib) == 0 &&
         name[lib.size()] == '.';
}

}  // namespace

std::vector<std::string> FindDriverFiles(const std::vector<std::string>& library_dirs,
                                         const std::vector<std::string>& bin_dirs) {
  std::set<std::string> found;
  std::error_code ec;
  for (const std::string& dir : library_dirs) {
    for (auto it = std::filesystem::directory_iterator(dir, ec);
         !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
      const std::string name = it->path().filename().string();
      const bool wanted = std::any_of(std::begin(kDriverLibraries), std::end(kDriverLibraries),
                                      [&](const char* lib) { return IsVersionOf(name, lib); });
      // A dangling link would fail the bind, and so the task: leave it out.
      if (wanted && std::filesystem::is_regular_file(it->path(), ec)) {
        found.insert(std::filesystem::absolute(it->path(), ec).lexically_normal().string());
      }
    }
    ec.clear();
  }
  for (const char* bin : kDriverBinaries) {
    for (const std::string& dir : bin_dirs) {
      const std::filesystem::path p = std::filesystem::path(dir) / bin;
      if (std::filesystem::is_regular_file(p, ec)) {
        found.insert(std::filesystem::absolute(p, ec).lexically_normal().string());
        break;
      }
    }
  }
  return {found.begin(), found.end()};
}

std::string LoadedLibraryDir(void* handle) {
  link_map* map = nullptr;
  if (handle == nullptr || dlinfo(handle, RTLD_DI_LINKMAP, &map) != 0 || map == nullptr ||
      map->l_name == nullptr || map->l_name[0] != '/') {
    return "";
  }
  std::error_code ec;
  const std::filesystem::path real = std::filesystem::canonical(map->l_name, ec);
  return ec ? "" : real.parent_path().string();
}

}  // namespace gpupool::agent
