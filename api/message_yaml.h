// Protobuf messages written in YAML: gpupoolctl's -f files (job specs, services) and gpupoold's
// `services:` entries. The YAML is turned into protobuf's JSON mapping and parsed as the message,
// so both spell fields the same way (snake_case or lowerCamel) and unknown fields are errors.
//
// Reading the document as its message (`msg`) settles what YAML leaves open:
//  * a plain scalar given for a string field is its text (`env: {PORT: 8080}` is "8080");
//  * a google.protobuf.Duration may be written as people do (5m, 1h30m, 1.5s; pool/duration_text.h)
//    as well as protobuf's "300s";
//  * elsewhere, plain scalars that look like numbers, booleans or null become those, quoted
//    scalars stay strings.
// Without a message (nullptr) only the last rule applies.
//
// Thread safety: pure functions.
#pragma once

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>
#include <yaml-cpp/yaml.h>

#include <string>
#include <string_view>

#include "base/status.h"

namespace gpupool::api {

// InvalidArgument naming the field ("idle: invalid duration 'soon': ...") for a value that no
// reading can make fit (a Duration that is none).
Result<std::string> YamlNodeToJson(const YAML::Node& node, const google::protobuf::Descriptor* msg);

// Parses protobuf JSON into *m (unknown fields are errors): "not a valid <Message>: <why>" on
// bad input; the caller says where the text came from.
Status MessageFromJson(const std::string& json, google::protobuf::Message* m);

}  // namespace gpupool::api
