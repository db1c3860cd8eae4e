// Building API requests from gpupoolctl's flags and files: the part of each command that does
// not touch the network, kept apart so that tests can check it table by table.
//
// Every function returns InvalidArgument with a message naming the flag or the file on bad
// input; the caller reports it as a usage error (exit 2) and sends nothing.
//
// Thread safety: pure functions.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "cmd/ctl/args.h"
#include "gpupool/v1/jobs.pb.h"
#include "gpupool/v1/pools.pb.h"
#include "gpupool/v1/services.pb.h"

namespace gpupool::ctl {

namespace v1 = ::gpupool::v1;

// Flags of `jobs submit` and of `pools create` / `pools update`.
const std::vector<FlagSpec>& SubmitFlags();
const std::vector<FlagSpec>& PoolFlags();

// Parses a JobSpec written in protobuf JSON or YAML (the same field names; YAML is converted to
// JSON first, a plain scalar given for a string field as its text: `env: {PORT: 8080}`).
// `source` names the file in errors. Unknown fields are errors.
Status ParseJobSpecText(std::string_view text, std::string_view source, v1::JobSpec* spec);

// Parses a Service written in protobuf JSON or YAML, as ParseJobSpecText does a JobSpec. In YAML,
// `idle` (any Duration) may also be written as people do (5m, 1h30m; api/message_yaml.h).
// Output-only fields (id, generation, status, …), as `services get -o yaml` prints them, are
// dropped, so a printed service can be applied again.
Status ParseServiceText(std::string_view text, std::string_view source, v1::Service* service);
// Clears what the server sets (id, generation, has_previous, status, created_by, times).
void ClearServiceOutputOnly(v1::Service* service);

// Flags of `services create`, `services update` and `services apply`.
const std::vector<FlagSpec>& ServiceFlags();

// Applies `services create/update/apply` flags on top of *service (which may come from -f), as
// ApplySubmitFlags does for a job: flags given override the file; env is merged, --port adds a
// port, a resource flag replaces the shape, the words after "--" replace the command. A service
// with no serving port takes its template's only tcp port.
Status ApplyServiceFlags(const ParsedArgs& args, v1::Service* service);

// Applies `jobs submit` flags on top of *spec (which may come from -f). Flags that are given
// override the file; labels and env are merged; a resource flag replaces the file's shape; the
// words after "--" replace the command. Checks that exactly one resource shape is set and that a
// command is present.
Status ApplySubmitFlags(const ParsedArgs& args, v1::JobSpec* spec);

// Fills *pool from `pools create/update` flags; *mask receives the field names that were given
// (snake_case, for UpdatePoolRequest.update_mask).
Status ApplyPoolFlags(const ParsedArgs& args, v1::Pool* pool, std::vector<std::string>* mask);

// "running" / "RUNNING" / "JOB_STATE_RUNNING" → the enum.
Status ParseJobState(std::string_view text, v1::JobState* state);

// Converts a YAML document to JSON text (plain scalars that look like numbers, booleans or null
// become those; quoted scalars stay strings).
Result<std::string> YamlToJson(std::string_view yaml, std::string_view source);

// "12.5 TFLOPS, 20GiB VRAM", "2 GPUs (H100-SXM)", "MIG 1g.10gb", "SKU small"; plus ", 4 CPU,
// 16GiB RAM" when set.
std::string DescribeResources(const v1::ResourceRequest& r);

}  // namespace gpupool::ctl
