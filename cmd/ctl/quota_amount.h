// Quota amounts on gpupoolctl's command line and in its output: the part of `quotas set` that
// does not touch the network, kept apart so that tests can check it table by table.
//
// An amount is written like a quota amount in gpupoold's config file, as comma-separated
// key=value pairs, either in normalized units or in SKU units:
//   "tflops=200,vram=40GiB,devices=4" → resources {200000 milli-TFLOPS, 40960 MiB}, devices 4
//   "sku=medium,count=4"              → sku "medium", sku_count 4 (the server converts)
// TFLOPS and sizes take the CLI's usual units (units.h). Errors are InvalidArgument naming the
// key; callers add the flag and report a usage error (exit 2, nothing sent).
//
// Thread safety: pure functions.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "cmd/ctl/args.h"
#include "gpupool/v1/tenants.pb.h"

namespace gpupool::ctl {

namespace v1 = ::gpupool::v1;

Result<v1::QuotaAmount> ParseQuotaAmount(std::string_view text);

// Flags of `quotas set` (--guaranteed, --limit) and the quota they build: tenant and pool from
// the arguments, each amount from its flag (absent = zero). At least one flag must be given.
const std::vector<FlagSpec>& QuotaFlags();
Status BuildQuota(const ParsedArgs& args, v1::Quota* quota);

// "200 TFLOPS, 40GiB VRAM, 4 devices", only the non-zero parts; `zero` when all are zero.
std::string FormatQuotaAmount(const v1::QuotaAmount& amount, std::string_view zero);

}  // namespace gpupool::ctl
