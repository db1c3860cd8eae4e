#include "cmd/ctl/quota_amount.h"

#include <map>

#include "cmd/ctl/units.h"
#include "pool/resources.h"

namespace gpupool::ctl {
namespace {

constexpr char kKeys[] = "tflops, vram, devices, sku, count";
constexpr char kExample[] = "e.g. tflops=200,vram=40GiB or sku=medium,count=4";

Status KeyError(std::string_view key, const Status& s) {
  return Status::InvalidArgument(std::string(key) + ": " + s.message());
}

// "a=1,b=2" → {a: 1, b: 2}; every part must be key=value and each key appear once.
Result<std::map<std::string, std::string>> SplitPairs(std::string_view text) {
  std::map<std::string, std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string_view::npos) comma = text.size();
    const std::string_view part = text.substr(start, comma - start);
    const size_t eq = part.find('=');
    if (eq == std::string_view::npos || eq == 0 || eq + 1 == part.size()) {
      return Status::InvalidArgument("'" + std::string(part) +
                                     "' is not key=value (keys: " + kKeys + "; " + kExample + ")");
    }
    const std::string key(part.substr(0, eq));
    if (!out.emplace(key, std::string(part.substr(eq + 1))).second) {
      return Status::InvalidArgument("'" + key + "' given twice");
    }
    start = comma + 1;
  }
  return out;
}

}  // namespace

Result<v1::QuotaAmount> ParseQuotaAmount(std::string_view text) {
  if (text.empty()) return Status::InvalidArgument(std::string("empty amount: ") + kExample);
  GPUPOOL_ASSIGN_OR_RETURN(auto pairs, SplitPairs(text));
  v1::QuotaAmount a;
  for (const auto& [key, value] : pairs) {
    if (key == "tflops") {
      Result<int64_t> v = ParseTflops(value);
      if (!v.ok()) return KeyError(key, v.status());
      a.mutable_resources()->set_milli_tflops(*v);
    } else if (key == "vram") {
      Result<int64_t> v = ParseMemoryMib(value);
      if (!v.ok()) return KeyError(key, v.status());
      a.mutable_resources()->set_vram_mib(*v);
    } else if (key == "devices") {
      Result<int64_t> v = ParseInt(value, 1, 10'000'000);
      if (!v.ok()) return KeyError(key, v.status());
      a.set_devices(static_cast<int32_t>(*v));
    } else if (key == "sku") {
      a.set_sku(value);
    } else if (key == "count") {
      Result<int64_t> v = ParseInt(value, 1, 1'000'000);
      if (!v.ok()) return KeyError(key, v.status());
      a.set_sku_count(static_cast<int32_t>(*v));
    } else {
      return Status::InvalidArgument("unknown key '" + key + "' (keys: " + kKeys + ")");
    }
  }
  const bool units = a.has_resources() || a.devices() != 0;
  const bool sku = !a.sku().empty() || a.sku_count() != 0;
  if (units && sku) {
    return Status::InvalidArgument("give either tflops/vram/devices or sku and count, not both");
  }
  if (!a.sku().empty() && a.sku_count() == 0) {
    return Status::InvalidArgument("sku needs a count, e.g. sku=" + a.sku() + ",count=4");
  }
  if (a.sku().empty() && a.sku_count() != 0) {
    return Status::InvalidArgument("count needs a sku, e.g. sku=medium,count=" +
                                   std::to_string(a.sku_count()));
  }
  return a;
}

const std::vector<FlagSpec>& QuotaFlags() {
  static const std::vector<FlagSpec> flags = {
      {"guaranteed", 0, FlagKind::kValue, "AMOUNT",
       "what reclaim gives back, e.g. tflops=200,vram=40GiB or sku=medium,count=4"},
      {"limit", 0, FlagKind::kValue, "AMOUNT",
       "the most the subtree may hold, borrowing, e.g. tflops=400,devices=8"},
  };
  return flags;
}

Status BuildQuota(const ParsedArgs& args, v1::Quota* quota) {
  quota->set_tenant(args.positional.at(0));
  quota->set_pool(args.positional.at(1));
  if (!args.Has("guaranteed") && !args.Has("limit")) {
    return Status::InvalidArgument("give --guaranteed, --limit or both");
  }
  for (const char* flag : {"guaranteed", "limit"}) {
    auto text = args.Find(flag);
    if (!text) continue;
    Result<v1::QuotaAmount> a = ParseQuotaAmount(*text);
    if (!a.ok())
      return Status::InvalidArgument("--" + std::string(flag) + ": " + a.status().message());
    *(flag[0] == 'g' ? quota->mutable_guaranteed() : quota->mutable_limit()) = *a;
  }
  return Status::Ok();
}

std::string FormatQuotaAmount(const v1::QuotaAmount& amount, std::string_view zero) {
  std::string out;
  auto add = [&out](const std::string& part) { out += (out.empty() ? "" : ", ") + part; };
  if (!amount.sku().empty()) add(std::to_string(amount.sku_count()) + " x " + amount.sku());
  if (amount.resources().milli_tflops() != 0) {
    add(FormatTflops(amount.resources().milli_tflops()) + " TFLOPS");
  }
  if (amount.resources().vram_mib() != 0) add(FormatMib(amount.resources().vram_mib()) + " VRAM");
  if (amount.devices() != 0) {
    add(std::to_string(amount.devices()) + (amount.devices() == 1 ? " device" : " devices"));
  }
  return out.empty() ? std::string(zero) : out;
}

}  // namespace gpupool::ctl
