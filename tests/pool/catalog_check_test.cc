// CheckDevice: an agent's report against the built-in catalog, case by case, with the expected
// arithmetic written out.
#include "pool/catalog_check.h"

#include <gtest/gtest.h>

namespace gpupool {
namespace {

struct Case {
  const char* name;
  ReportedDevice device;
  const char* error;  // empty: accepted
};

// H100-SXM: 989.5 TFLOPS bf16 → 989500; 80 GB → 81920 MiB, lowest accepted 81920 × 0.9 = 73728.
// Its 1g.10gb profile: 989500 × 1 / 7 = 141357 (rounded down), 10240 MiB, lowest 9216.
// T4 has no bf16: compute is its fp16, 65 TFLOPS → 65000.
const Case kCases[] = {
    {"catalog figures", {"H100-SXM", "", 989'500, 81'920}, ""},
    {"usable VRAM a little lower", {"H100-SXM", "", 989'500, 81'559}, ""},
    {"lowest accepted VRAM", {"H100-SXM", "", 989'500, 73'728}, ""},
    {"alias and NVML product name", {"NVIDIA H100 80GB HBM3", "", 989'500, 81'920}, ""},
    {"fp16 card", {"T4", "", 65'000, 15'360}, ""},
    {"MIG instance", {"H100-SXM", "1g.10gb", 141'357, 9'856}, ""},
    {"VRAM below 90%",
     {"H100-SXM", "", 989'500, 73'727},
     "dev.vram_mib: 73727 MiB contradicts the catalog: H100-SXM has 81920 MiB (a device may "
     "report 73728 to 81920)"},
    {"VRAM above the catalog",
     {"H100-SXM", "", 989'500, 81'921},
     "dev.vram_mib: 81921 MiB contradicts the catalog: H100-SXM has 81920 MiB (a device may "
     "report 73728 to 81920)"},
    {"other compute",
     {"H100-SXM", "", 989'000, 81'920},
     "dev.milli_tflops: 989000 contradicts the catalog: H100-SXM has 989500 milli-TFLOPS"},
    {"MIG compute of the whole card",
     {"H100-SXM", "1g.10gb", 989'500, 10'240},
     "dev.milli_tflops: 989500 contradicts the catalog: H100-SXM 1g.10gb has 141357 "
     "milli-TFLOPS"},
    {"unknown profile",
     {"H100-SXM", "2g.99gb", 1, 1},
     "dev.mig_profile: '2g.99gb' is not a MIG profile of H100-SXM in the catalog"},
    {"profile of a card without MIG",
     {"L4", "1g.10gb", 1, 1},
     "dev.mig_profile: '1g.10gb' is not a MIG profile of L4 in the catalog"},
    {"unknown model",
     {"RTX-4090", "", 1, 1},
     "dev.model: 'RTX-4090' is not in the catalog (add it to the catalog file of the daemon and "
     "the agent)"},
};

TEST(CatalogCheckTest, ReportsAgainstTheBuiltinCatalog) {
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.name);
    Status st = CheckDevice(Catalog::Builtin(), c.device, "dev");
    if (std::string(c.error).empty()) {
      EXPECT_TRUE(st.ok()) << st.ToString();
    } else {
      EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
      EXPECT_EQ(st.message(), c.error);
    }
  }
}

}  // namespace
}  // namespace gpupool
