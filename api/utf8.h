// utf8: making text that may hold a caller's bytes safe to put in an error message.
//
// Error messages often quote what the caller sent ("pool 'x' not found"). A caller can send bytes
// that are not UTF-8; echoed as they are, they make a JSON error body invalid and a gRPC status
// message undecodable by strict clients. Both faces pass every message through ValidUtf8 in the
// one place where they convert a Status (api/status_convert.cc, api/rest/json_mapping.cc).
//
// Thread safety: pure functions.
#pragma once

#include <string>
#include <string_view>

namespace gpupool::api {

// True when `s` is well-formed UTF-8 (no overlong forms, surrogates or code points past U+10FFFF).
bool IsValidUtf8(std::string_view s);

// `s` with every byte that does not start a well-formed sequence replaced by U+FFFD.
std::string ValidUtf8(std::string_view s);

}  // namespace gpupool::api
