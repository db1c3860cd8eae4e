// libFuzzer target: the Authorization header / metadata parsing (api/auth.h). Whatever the bytes,
// the answer is a CallContext or UNAUTHENTICATED with one of the fixed messages, so nothing of
// the header (a credential) can come back. (The first version checked "the header does not
// appear in the message" and the fuzzer found a header that is a fragment of the fixed text:
// docs/fuzzing.md.)
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
  static constexpr std::string_view kFixed[] = {
      "missing credentials: send the header 'Authorization: Bearer <token>'",
      "unsupported authorization scheme: expected 'Authorization: Bearer <token>'",
      "invalid bearer token",
  };
  for (std::string_view m : kFixed) {
    if (caller.status().message() == m) return 0;
  }
  __builtin_trap();  // a message built from the input
}
