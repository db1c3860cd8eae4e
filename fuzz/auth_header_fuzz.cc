// libFuzzer target: the Authorization header / metadata parsing (api/auth.h). Whatever the bytes,
// the answer is a CallContext or UNAUTHENTICATED whose message never quotes the header.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "api/auth.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const gpupool::api::Authenticator* auth = new gpupool::api::Authenticator(
      gpupool::api::Authenticator::Create({{"admin-token-0123456789", "ops", true},
                                           {"tenant-token-0123456789", "acme/research", false}})
          .value());
  std::string_view header(reinterpret_cast<const char*>(data), size);
  auto caller = auth->Authenticate(header);
  if (caller.ok()) return 0;
  if (caller.status().code() != gpupool::StatusCode::kUnauthenticated) __builtin_trap();
  // A credential the caller sent must never come back in the message.
  const std::string_view token = header.size() > 7 ? header.substr(7) : header;
  if (token.size() >= 8 && caller.status().message().find(token) != std::string::npos) {
    __builtin_trap();
  }
  return 0;
}
