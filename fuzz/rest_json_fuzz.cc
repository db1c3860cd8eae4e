// libFuzzer target: the REST JSON mapping (api/rest/json_mapping.h). The first byte picks the
// request message; the rest is a body, then (after a NUL) a query string. Whatever parses must
// print back as JSON that parses again to the same message; nothing may crash or hang.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

#include "api/rest/json_mapping.h"
#include "api/rest/router.h"
#include "gpupool/v1/audit.pb.h"
#include "gpupool/v1/jobs.pb.h"
#include "gpupool/v1/pools.pb.h"
#include "gpupool/v1/tenants.pb.h"

namespace {

std::unique_ptr<google::protobuf::Message> Pick(uint8_t which) {
  namespace v1 = ::gpupool::v1;
  switch (which % 8) {
    case 0:
      return std::make_unique<v1::SubmitJobRequest>();
    case 1:
      return std::make_unique<v1::UpdatePoolRequest>();
    case 2:
      return std::make_unique<v1::SetQuotaRequest>();
    case 3:
      return std::make_unique<v1::ListJobsRequest>();
    case 4:
      return std::make_unique<v1::CreateTenantRequest>();
    case 5:
      return std::make_unique<v1::ListAuditRecordsRequest>();
    case 6:
      return std::make_unique<v1::CancelJobRequest>();
    default:
      return std::make_unique<v1::CreatePoolRequest>();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gpupool::api::rest;  // NOLINT
  if (size == 0) return 0;
  std::unique_ptr<google::protobuf::Message> msg = Pick(data[0]);
  std::string_view in(reinterpret_cast<const char*>(data + 1), size - 1);
  const size_t nul = in.find('\0');
  std::string_view body = in.substr(0, nul);
  std::string_view query = nul == std::string_view::npos ? "" : in.substr(nul + 1);

  if (ParseJsonBody(body, msg.get()).ok()) {
    gpupool::Result<std::string> json = ToJson(*msg);
    if (json.ok()) {
      std::unique_ptr<google::protobuf::Message> again = Pick(data[0]);
      if (!ParseJsonBody(*json, again.get()).ok()) __builtin_trap();  // printed JSON must parse
      if (again->SerializeAsString() != msg->SerializeAsString()) __builtin_trap();
    }
  }
  auto params = ParseQuery(query);
  if (params.ok()) (void)ApplyQueryParams(*params, msg.get());
  (void)ErrorJson(gpupool::Status::InvalidArgument(std::string(body)));
  (void)JsonQuote(body);
  return 0;
}
