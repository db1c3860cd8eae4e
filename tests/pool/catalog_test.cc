// Tests of pool/catalog: the shipped figures, lookup, and every validation error (file:line).
#include "pool/catalog.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "pool/yaml_error.h"

namespace gpupool {
namespace {

// Each model as written in pool/catalog.yaml: TFLOPS × 1000, GB × 1024.
struct ModelRow {
  const char* name;
  const char* vendor;
  int64_t bf16;
  int64_t fp16;
  int64_t compute;  // bf16 if > 0 else fp16
  int64_t vram;
  size_t migs;
};

TEST(CatalogBuiltin, EveryModelHasItsDatasheetFigures) {
  const ModelRow rows[] = {
      {"H200", "NVIDIA", 989'500, 989'500, 989'500, 141 * 1024, 6},
      {"H100-SXM", "NVIDIA", 989'500, 989'500, 989'500, 80 * 1024, 6},
      {"H100-PCIe", "NVIDIA", 756'500, 756'500, 756'500, 80 * 1024, 6},
      {"A100-40GB", "NVIDIA", 312'000, 312'000, 312'000, 40 * 1024, 6},
      {"A100-80GB", "NVIDIA", 312'000, 312'000, 312'000, 80 * 1024, 6},
      {"A10", "NVIDIA", 125'000, 125'000, 125'000, 24 * 1024, 0},
      {"L40S", "NVIDIA", 362'050, 362'050, 362'050, 48 * 1024, 0},
      {"L4", "NVIDIA", 121'000, 121'000, 121'000, 24 * 1024, 0},
      {"T4", "NVIDIA", 0, 65'000, 65'000, 16 * 1024, 0},
      {"V100-16GB", "NVIDIA", 0, 125'000, 125'000, 16 * 1024, 0},
      {"V100-32GB", "NVIDIA", 0, 125'000, 125'000, 32 * 1024, 0},
      {"MI300X", "AMD", 1'307'400, 1'307'400, 1'307'400, 192 * 1024, 0},
      {"MI250X", "AMD", 383'000, 383'000, 383'000, 128 * 1024, 0},
  };
  const Catalog& c = Catalog::Builtin();
  ASSERT_EQ(c.models().size(), std::size(rows));
  for (const ModelRow& r : rows) {
    SCOPED_TRACE(r.name);
    const GpuModel* m = c.Find(r.name);
    ASSERT_NE(m, nullptr);
    EXPECT_EQ(m->name, r.name);
    EXPECT_EQ(m->vendor, r.vendor);
    EXPECT_EQ(m->bf16_milli_tflops, r.bf16);
    EXPECT_EQ(m->fp16_milli_tflops, r.fp16);
    EXPECT_EQ(m->ComputeMilliTflops(), r.compute);
    EXPECT_EQ(m->vram_mib, r.vram);
    EXPECT_EQ(m->resources(), (Resources{r.compute, r.vram}));
    EXPECT_EQ(m->mig_profiles.size(), r.migs);
  }
}

struct MigRow {
  const char* model;
  const char* profile;
  int slices;
  int64_t milli_tflops;  // card compute × slices / 7, rounded down
  int64_t vram;
  int max_instances;
};

TEST(CatalogBuiltin, MigProfiles) {
  const MigRow rows[] = {
      {"A100-40GB", "1g.5gb", 1, 312'000 / 7, 5 * 1024, 7},  // 44571
      {"A100-40GB", "1g.10gb", 1, 312'000 / 7, 10 * 1024, 4},
      {"A100-40GB", "2g.10gb", 2, 312'000 * 2 / 7, 10 * 1024, 3},  // 89142
      {"A100-40GB", "3g.20gb", 3, 312'000 * 3 / 7, 20 * 1024, 2},  // 133714
      {"A100-40GB", "4g.20gb", 4, 312'000 * 4 / 7, 20 * 1024, 1},  // 178285
      {"A100-40GB", "7g.40gb", 7, 312'000, 40 * 1024, 1},
      {"A100-80GB", "1g.10gb", 1, 44'571, 10 * 1024, 7},
      {"A100-80GB", "1g.20gb", 1, 44'571, 20 * 1024, 4},
      {"A100-80GB", "2g.20gb", 2, 89'142, 20 * 1024, 3},
      {"A100-80GB", "3g.40gb", 3, 133'714, 40 * 1024, 2},
      {"A100-80GB", "4g.40gb", 4, 178'285, 40 * 1024, 1},
      {"A100-80GB", "7g.80gb", 7, 312'000, 80 * 1024, 1},
      {"H100-SXM", "1g.10gb", 1, 141'357, 10 * 1024, 7},  // 989500 / 7
      {"H100-SXM", "1g.20gb", 1, 141'357, 20 * 1024, 4},
      {"H100-SXM", "2g.20gb", 2, 282'714, 20 * 1024, 3},
      {"H100-SXM", "3g.40gb", 3, 424'071, 40 * 1024, 2},
      {"H100-SXM", "4g.40gb", 4, 565'428, 40 * 1024, 1},
      {"H100-SXM", "7g.80gb", 7, 989'500, 80 * 1024, 1},
      {"H100-PCIe", "1g.10gb", 1, 108'071, 10 * 1024, 7},  // 756500 / 7
      {"H100-PCIe", "3g.40gb", 3, 324'214, 40 * 1024, 2},
      {"H100-PCIe", "7g.80gb", 7, 756'500, 80 * 1024, 1},
      {"H200", "1g.18gb", 1, 141'357, 18 * 1024, 7},
      {"H200", "1g.35gb", 1, 141'357, 35 * 1024, 4},
      {"H200", "2g.35gb", 2, 282'714, 35 * 1024, 3},
      {"H200", "3g.71gb", 3, 424'071, 71 * 1024, 2},
      {"H200", "4g.71gb", 4, 565'428, 71 * 1024, 1},
      {"H200", "7g.141gb", 7, 989'500, 141 * 1024, 1},
  };
  const Catalog& c = Catalog::Builtin();
  for (const MigRow& r : rows) {
    SCOPED_TRACE(std::string(r.model) + " " + r.profile);
    const MigProfile* p = c.FindMig(r.model, r.profile);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(p->name, r.profile);
    EXPECT_EQ(p->compute_slices, r.slices);
    EXPECT_EQ(p->milli_tflops, r.milli_tflops);
    EXPECT_EQ(p->vram_mib, r.vram);
    EXPECT_EQ(p->max_instances, r.max_instances);
  }
  EXPECT_EQ(c.FindMig("A100-40GB", "1g.20gb"), nullptr);  // an 80GB-only profile
  EXPECT_EQ(c.FindMig("L40S", "1g.10gb"), nullptr);       // no MIG at all
  EXPECT_EQ(c.FindMig("B200", "1g.10gb"), nullptr);       // unknown model
  EXPECT_NE(c.FindMig("a100 80gb", "1G.10GB"), nullptr);  // case-insensitive both ways
}

TEST(CatalogBuiltin, LookupIgnoresCaseAndSeparatorsAndKnowsAliases) {
  const struct {
    const char* query;
    const char* model;  // nullptr = not found
  } rows[] = {
      {"H100-SXM", "H100-SXM"},
      {"h100-sxm", "H100-SXM"},
      {"H100 SXM", "H100-SXM"},
      {"h100_sxm", "H100-SXM"},
      {"H100", "H100-SXM"},  // documented alias: the SXM part
      {"NVIDIA H100 80GB HBM3", "H100-SXM"},
      {"NVIDIA H100 PCIe", "H100-PCIe"},
      {"h100pcie", "H100-PCIe"},
      {"NVIDIA A100-SXM4-40GB", "A100-40GB"},
      {"NVIDIA A100-SXM4-80GB", "A100-80GB"},
      {"Tesla T4", "T4"},
      {"Tesla V100-SXM2-32GB", "V100-32GB"},
      {"AMD Instinct MI300X", "MI300X"},
      {"mi250x", "MI250X"},
      {"A100", nullptr},  // ambiguous on purpose
      {"B200", nullptr},
      {"", nullptr},
  };
  const Catalog& c = Catalog::Builtin();
  for (const auto& r : rows) {
    SCOPED_TRACE(r.query);
    const GpuModel* m = c.Find(r.query);
    if (r.model == nullptr) {
      EXPECT_EQ(m, nullptr);
    } else {
      ASSERT_NE(m, nullptr);
      EXPECT_EQ(m->name, r.model);
    }
  }
}

TEST(CatalogBuiltin, EmbeddedTextIsTheShippedFile) {
  std::ifstream in(GPUPOOL_SOURCE_DIR "/pool/catalog.yaml");
  ASSERT_TRUE(in.good());
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(Catalog::BuiltinYaml(), text);
}

// Every model block of the shipped file cites the datasheet its figures come from.
TEST(CatalogBuiltin, EveryModelCitesADatasheet) {
  const std::string text(Catalog::BuiltinYaml());
  for (const GpuModel& m : Catalog::Builtin().models()) {
    SCOPED_TRACE(m.name);
    const size_t start = text.find("  - name: " + m.name + "\n");
    ASSERT_NE(start, std::string::npos);
    const size_t end = text.find("  - name: ", start + 1);
    const std::string block = text.substr(start, end == std::string::npos ? end : end - start);
    EXPECT_NE(block.find("datasheet, 20"), std::string::npos) << block;
  }
}

// Board figures the simulated agent uses, as the datasheets state them (see catalog.yaml).
TEST(CatalogBuiltin, BoardPowerAndInterconnect) {
  const GpuModel* h100 = Catalog::Builtin().Find("H100-SXM");
  ASSERT_NE(h100, nullptr);
  EXPECT_EQ(h100->tdp_watts, 700);
  EXPECT_EQ(h100->gpu_link_gb_per_s, 900);
  EXPECT_EQ(h100->pcie_gb_per_s, 128);
  const GpuModel* l4 = Catalog::Builtin().Find("L4");
  ASSERT_NE(l4, nullptr);
  EXPECT_EQ(l4->gpu_link_gb_per_s, 0);  // no NVLink
  for (const GpuModel& m : Catalog::Builtin().models()) {
    EXPECT_GT(m.tdp_watts, 0) << m.name;
    EXPECT_GT(m.pcie_gb_per_s, 0) << m.name;
  }
}

TEST(CatalogFile, LoadFileReportsPathAndLine) {
  const std::string path = testing::TempDir() + "/catalog_test_bad.yaml";
  {
    std::ofstream out(path);
    out << "models:\n  - name: X\n    vendor: V\n    fp16_tflops: 1\n    vram_mib: zero\n";
  }
  Result<Catalog> c = Catalog::LoadFile(path);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(),
            path + ":5: models[0].vram_mib: must be an integer, got \"zero\"");
  std::remove(path.c_str());

  Result<Catalog> missing = Catalog::LoadFile(path);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
}

TEST(CatalogFile, LoadsTheShippedFileFromDisk) {
  Result<Catalog> c = Catalog::LoadFile(GPUPOOL_SOURCE_DIR "/pool/catalog.yaml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->models().size(), Catalog::Builtin().models().size());
}

// A valid one-model catalog to start each bad case from.
constexpr const char* kGood = R"(models:
  - name: Card
    vendor: ACME
    bf16_tflops: 70
    fp16_tflops: 70
    vram_mib: 8192
    mig_profiles:
      - {name: 1g.1gb, compute_slices: 1, vram_mib: 1024, max_instances: 7}
)";

TEST(CatalogParse, MinimalCatalogParses) {
  Result<Catalog> c = Catalog::Parse(kGood, "c.yaml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_EQ(c->models().size(), 1u);
  EXPECT_EQ(c->models()[0].mig_profiles[0].milli_tflops, 10'000);  // 70 TFLOPS / 7
  EXPECT_EQ(c->source(), "c.yaml");
}

TEST(CatalogParse, ValidationErrorsNameFileKeyAndLine) {
  const struct {
    const char* name;
    const char* yaml;
    const char* message;
  } rows[] = {
      {"empty", "", "c.yaml: empty catalog (expected a \"models\" list)"},
      {"syntax", "models: [\n", "c.yaml:2: end of sequence flow not found"},
      {"unknown top key", "model: []\n", "c.yaml:1: model: unknown key (allowed: models)"},
      {"models not a list", "models: {a: 1}\n", "c.yaml:1: models: must be a list"},
      {"no models", "models: []\n", "c.yaml:1: models: must list at least one model"},
      {"unknown model key",
       "models:\n  - name: X\n    vendor: V\n    fp16_tflops: 1\n    vram_mib: 1\n    colour: "
       "red\n",
       "c.yaml:6: models[0].colour: unknown key (allowed: name, vendor, form_factor, aliases, "
       "bf16_tflops, fp16_tflops, vram_mib, tdp_watts, gpu_link_gb_per_s, pcie_gb_per_s, "
       "mig_profiles)"},
      {"missing name", "models:\n  - vendor: V\n    fp16_tflops: 1\n    vram_mib: 1\n",
       "c.yaml:2: models[0].name: missing required key"},
      {"missing fp16", "models:\n  - name: X\n    vendor: V\n    vram_mib: 1\n",
       "c.yaml:2: models[0].fp16_tflops: missing required key"},
      {"zero fp16", "models:\n  - name: X\n    vendor: V\n    fp16_tflops: 0\n    vram_mib: 1\n",
       "c.yaml:4: models[0].fp16_tflops: must be greater than zero, got \"0\""},
      {"negative bf16",
       "models:\n  - name: X\n    vendor: V\n    bf16_tflops: -1\n    fp16_tflops: 1\n"
       "    vram_mib: 1\n",
       "c.yaml:4: models[0].bf16_tflops: must not be negative, got \"-1\""},
      {"negative tdp",
       "models:\n  - name: X\n    vendor: V\n    fp16_tflops: 1\n    vram_mib: 1\n"
       "    tdp_watts: -5\n",
       "c.yaml:6: models[0].tdp_watts: must not be negative, got \"-5\""},
      {"too many places",
       "models:\n  - name: X\n    vendor: V\n    fp16_tflops: 1.2345\n    vram_mib: 1\n",
       "c.yaml:4: models[0].fp16_tflops: must be a decimal number with at most 3 places, got "
       "\"1.2345\""},
      {"zero vram", "models:\n  - name: X\n    vendor: V\n    fp16_tflops: 1\n    vram_mib: 0\n",
       "c.yaml:5: models[0].vram_mib: must be a positive integer, got \"0\""},
      {"negative vram",
       "models:\n  - name: X\n    vendor: V\n    fp16_tflops: 1\n    vram_mib: -8\n",
       "c.yaml:5: models[0].vram_mib: must be a positive integer, got \"-8\""},
      {"empty vendor",
       "models:\n  - name: X\n    vendor: ''\n    fp16_tflops: 1\n    vram_mib: 1\n",
       "c.yaml:3: models[0].vendor: must not be empty"},
      {"duplicate key",
       "models:\n  - name: X\n    vendor: V\n    fp16_tflops: 1\n    vram_mib: 1\n    vram_mib: "
       "2\n",
       "c.yaml:6: models[0].vram_mib: duplicate key"},
      {"duplicate model",
       "models:\n  - {name: X, vendor: V, fp16_tflops: 1, vram_mib: 1}\n"
       "  - {name: x, vendor: V, fp16_tflops: 1, vram_mib: 1}\n",
       "c.yaml:3: models[1].name: duplicate model name \"x\" (already used by X)"},
      {"alias clashes with a name",
       "models:\n  - {name: X-1, vendor: V, fp16_tflops: 1, vram_mib: 1}\n"
       "  - {name: Y, vendor: V, fp16_tflops: 1, vram_mib: 1, aliases: [x1]}\n",
       "c.yaml:3: models[1].aliases: duplicate model name \"x1\" (already used by X-1)"},
      {"mig bigger than card",
       "models:\n  - name: X\n    vendor: V\n    fp16_tflops: 7\n    vram_mib: 1024\n"
       "    mig_profiles:\n"
       "      - {name: 1g.2gb, compute_slices: 1, vram_mib: 2048, max_instances: 1}\n",
       "c.yaml:7: models[0].mig_profiles[0].vram_mib: profile \"1g.2gb\" has 2048 MiB, more than "
       "its card X (1024 MiB)"},
      {"mig too many slices",
       "models:\n  - name: X\n    vendor: V\n    fp16_tflops: 7\n    vram_mib: 1024\n"
       "    mig_profiles:\n"
       "      - {name: 8g.1gb, compute_slices: 8, vram_mib: 512, max_instances: 1}\n",
       "c.yaml:7: models[0].mig_profiles[0].compute_slices: must be between 1 and 7, got \"8\""},
      {"mig slices disagree with name",
       "models:\n  - name: X\n    vendor: V\n    fp16_tflops: 7\n    vram_mib: 1024\n"
       "    mig_profiles:\n"
       "      - {name: 2g.1gb, compute_slices: 3, vram_mib: 512, max_instances: 1}\n",
       "c.yaml:7: models[0].mig_profiles[0].compute_slices: is 3 but profile \"2g.1gb\" names 2 "
       "slices"},
      {"mig instances overflow the card",
       "models:\n  - name: X\n    vendor: V\n    fp16_tflops: 7\n    vram_mib: 1024\n"
       "    mig_profiles:\n"
       "      - {name: 2g.1gb, compute_slices: 2, vram_mib: 512, max_instances: 4}\n",
       "c.yaml:7: models[0].mig_profiles[0].max_instances: 4 instances of 2 slices exceed the "
       "card's 7 compute slices"},
      {"mig missing key",
       "models:\n  - name: X\n    vendor: V\n    fp16_tflops: 7\n    vram_mib: 1024\n"
       "    mig_profiles:\n"
       "      - {name: 1g.1gb, compute_slices: 1, vram_mib: 512}\n",
       "c.yaml:7: models[0].mig_profiles[0].max_instances: missing required key"},
      {"mig unknown key",
       "models:\n  - name: X\n    vendor: V\n    fp16_tflops: 7\n    vram_mib: 1024\n"
       "    mig_profiles:\n"
       "      - {name: 1g.1gb, compute_slices: 1, vram_mib: 512, max_instances: 1, sm: 1}\n",
       "c.yaml:7: models[0].mig_profiles[0].sm: unknown key (allowed: name, compute_slices, "
       "vram_mib, max_instances, memory_slices, starts)"},
      {"mig start past the memory slices",
       "models:\n  - name: X\n    vendor: V\n    fp16_tflops: 7\n    vram_mib: 1024\n"
       "    mig_profiles:\n"
       "      - {name: 3g.1gb, compute_slices: 3, vram_mib: 512, max_instances: 2,"
       " memory_slices: 4, starts: [0, 5]}\n",
       "c.yaml:7: models[0].mig_profiles[0].starts: start '5' must be an integer from 0 to 4 (an "
       "instance of 4 memory slices ends within the GPU's 8)"},
      {"mig starts not ascending",
       "models:\n  - name: X\n    vendor: V\n    fp16_tflops: 7\n    vram_mib: 1024\n"
       "    mig_profiles:\n"
       "      - {name: 1g.1gb, compute_slices: 1, vram_mib: 512, max_instances: 2,"
       " memory_slices: 1, starts: [2, 0]}\n",
       "c.yaml:7: models[0].mig_profiles[0].starts: must be ascending and distinct"},
      {"mig starts without memory_slices",
       "models:\n  - name: X\n    vendor: V\n    fp16_tflops: 7\n    vram_mib: 1024\n"
       "    mig_profiles:\n"
       "      - {name: 1g.1gb, compute_slices: 1, vram_mib: 512, max_instances: 2, starts: [0]}\n",
       "c.yaml:7: models[0].mig_profiles[0].memory_slices: missing required key (memory_slices and "
       "starts go together)"},
      {"duplicate mig",
       "models:\n  - name: X\n    vendor: V\n    fp16_tflops: 7\n    vram_mib: 1024\n"
       "    mig_profiles:\n"
       "      - {name: 1g.1gb, compute_slices: 1, vram_mib: 512, max_instances: 1}\n"
       "      - {name: 1G.1GB, compute_slices: 1, vram_mib: 512, max_instances: 1}\n",
       "c.yaml:8: models[0].mig_profiles[1].name: duplicate MIG profile \"1G.1GB\" in model X"},
      {"aliases not a list",
       "models:\n  - {name: X, vendor: V, fp16_tflops: 1, vram_mib: 1, aliases: Y}\n",
       "c.yaml:2: models[0].aliases: must be a list"},
      {"empty alias",
       "models:\n  - {name: X, vendor: V, fp16_tflops: 1, vram_mib: 1, aliases: [Y, '']}\n",
       "c.yaml:2: models[0].aliases[1]: must be a non-empty string"},
      {"huge vram",
       "models:\n  - name: X\n    vendor: V\n    fp16_tflops: 1\n    vram_mib: 99999999999\n",
       "c.yaml:5: models[0].vram_mib: must be between 1 and 16777216, got \"99999999999\""},
      {"model not a map", "models:\n  - X\n",
       "c.yaml:2: models[0]: must be a mapping (key: value)"},
  };
  for (const auto& r : rows) {
    SCOPED_TRACE(r.name);
    Result<Catalog> c = Catalog::Parse(r.yaml, "c.yaml");
    ASSERT_FALSE(c.ok());
    EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(c.status().message(), r.message);
  }
}

TEST(YamlError, FormatAndDecimal) {
  EXPECT_EQ(FormatYamlError("a.yaml", 3, "x.y", "bad"), "a.yaml:3: x.y: bad");
  EXPECT_EQ(FormatYamlError("a.yaml", 0, "", "bad"), "a.yaml: bad");
  EXPECT_EQ(YamlPath{}.Key("pools").Index(2).Key("name").str(), "pools[2].name");

  const struct {
    const char* text;
    bool ok;
    int64_t milli;
  } rows[] = {
      {"989.5", true, 989'500}, {"362.05", true, 362'050}, {"0.001", true, 1},
      {"12", true, 12'000},     {".5", true, 500},         {"-1.5", true, -1'500},
      {"1.2345", false, 0},     {"1e3", false, 0},         {"", false, 0},
      {".", false, 0},          {"abc", false, 0},         {"99999999999999999", false, 0},
  };
  for (const auto& r : rows) {
    SCOPED_TRACE(r.text);
    int64_t v = 0;
    EXPECT_EQ(ParseDecimalMilli(r.text, &v), r.ok);
    if (r.ok) {
      EXPECT_EQ(v, r.milli);
    }
  }
}

}  // namespace
}  // namespace gpupool
