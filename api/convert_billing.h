// convert_billing: gpupool.v1 billing messages (billing.proto) <-> the billing module's values
// (billing/), with validation at the edge. Decimals travel as strings; a malformed one is
// INVALID_ARGUMENT naming its field ("plan.rates[2].price: '1,5' is not a decimal number").
//
// Thread safety: pure functions over values.
#pragma once

#include <cstdint>

#include "base/status.h"
#include "billing/export.h"
#include "billing/period.h"
#include "billing/price_plan.h"
#include "billing/rating.h"
#include "gpupool/v1/billing.pb.h"

namespace gpupool::api {

namespace v1 = ::gpupool::v1;

// Name, currency, rates, multipliers, tenants, credit and effective time of a plan (version,
// creator and create time are the server's). An unset effective_time becomes `now_ms`; one
// before `now_ms` is refused (a version may not change what was already billed).
Result<billing::PricePlan> PricePlanFromProto(const v1::PricePlan& in, int64_t now_ms);
void ToProto(const billing::PricePlan& plan, v1::PricePlan* out);
void ToProto(const billing::Invoice& invoice, v1::Invoice* out);
void ToProto(const billing::FeedItem& item, v1::UsageFeedItem* out);

// The billing period of a request: `period` ("2026-11", "2026-11-05"), or start/end times, or
// else the calendar month (UTC) holding `now_ms`.
Result<billing::Period> PeriodFromRequest(const std::string& period,
                                          const google::protobuf::Timestamp* start,
                                          const google::protobuf::Timestamp* end, int64_t now_ms);

}  // namespace gpupool::api
