// json_mapping: REST requests and replies ↔ protobuf messages, by protobuf's JSON mapping.
//
// A REST request message is assembled from three sources, in this order:
//   1. the body, parsed as the whole request message (`{"spec": {…}}` for SubmitJob); unknown
//      fields are rejected; int64 fields take numbers or strings; enums take names or numbers;
//   2. query parameters, each naming a top-level scalar, enum, repeated scalar or FieldMask field
//      by its proto or JSON name (`page_size` or `pageSize`); repeat a parameter for a list;
//   3. path captures (`{job_id}`, `{pool.name}`), which must agree with the body when both set it.
// Replies print with lowerCamelCase names, enums as names, int64 as strings and every field —
// defaults included — so clients see `"exitCode": 0` rather than nothing.
//
// Errors are INVALID_ARGUMENT naming the field or parameter, e.g.
//   "request body: unknown field 'bogus' in 'spec'".
//
// Thread safety: pure functions.
#pragma once

#include <google/protobuf/message.h>

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"

namespace gpupool::api::rest {

// Parses `body` into `msg` (cleared first). An empty or all-whitespace body leaves it empty.
Status ParseJsonBody(std::string_view body, google::protobuf::Message* msg);

// Merges query parameters into top-level fields of `msg`.
Status ApplyQueryParams(const std::vector<std::pair<std::string, std::string>>& params,
                        google::protobuf::Message* msg);

// Sets the string field at dotted `field_path` to `value`; INVALID_ARGUMENT when the body already
// set it to something else.
Status ApplyPathParam(std::string_view field_path, std::string_view value,
                      google::protobuf::Message* msg);

// The message as JSON (see above for the print options); INTERNAL only for strings that are not
// valid UTF-8.
Result<std::string> ToJson(const google::protobuf::Message& msg);

// {"code": 5, "message": "…", "details": []} — the REST error body, grpc-gateway's shape.
std::string ErrorJson(const Status& status);

// `s` as a JSON string literal, quotes included.
std::string JsonQuote(std::string_view s);

}  // namespace gpupool::api::rest
