// The console's files as embedded by cmake/embed_files.cmake into console_files.cc (generated in
// the build tree from api/rest/console/). Names are relative to that folder ("app.js").
#pragma once

#include <span>
#include <string_view>

namespace gpupool::api::rest::console {

struct EmbeddedFile {
  std::string_view name;
  std::string_view data;
};

std::span<const EmbeddedFile> Files();

}  // namespace gpupool::api::rest::console
