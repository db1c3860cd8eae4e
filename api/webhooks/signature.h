// Webhook signatures (docs/webhooks.md, "Verifying a delivery"): every delivery carries
//   Gpupool-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>
// so a receiver that knows the webhook's secret can tell the body came from gpupoold, unchanged,
// and recently (the time is signed with it, which bounds replays).
//
// Thread safety: free functions, no state.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"

namespace gpupool::webhooks {

// Lower-case hex of HMAC-SHA256(key, message).
std::string HmacSha256Hex(std::string_view key, std::string_view message);

// The Gpupool-Signature header value for `body` sent at `unix_seconds`.
std::string Sign(std::string_view secret, int64_t unix_seconds, std::string_view body);

// OK when `header` (as Sign writes it; several v1= entries are allowed, for a receiver's sake
// during a secret's rotation) signs `body` under `secret`, at a time within `tolerance_seconds`
// of `now_seconds`. UNAUTHENTICATED with the reason otherwise. The comparison is constant-time.
Status Verify(std::string_view secret, std::string_view header, std::string_view body,
              int64_t now_seconds, int64_t tolerance_seconds);

// A new signing secret: "whsec_" and 64 hex digits of randomness (32 bytes).
Result<std::string> NewSecret();

}  // namespace gpupool::webhooks
