// NvmlBackend's MIG side against tests/agent/fake_nvml_mig.cc, a libnvidia-ml that keeps its
// driver state in a directory: discovery of MIG mode, placements and capability files;
// ApplyMigLayout's all-or-nothing re-partitioning (refusals rolled back to the exact previous
// layout, DATA_LOSS when that fails too); and the fake's profiles held against the catalog.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "agent/nvml_backend.h"
#include "pool/mig_layout.h"

namespace gpupool::agent {
namespace {

namespace fs = std::filesystem;

const GpuModel& H100() { return *Catalog::Builtin().Find("H100-SXM"); }

MigLayout Layout(std::string_view text) {
  auto l = ParseMigLayout(H100(), text);
  EXPECT_TRUE(l.ok()) << l.status().ToString();
  return l.ok() ? *l : MigLayout{};
}

// A node of two H100s: GPU-h100-0 (minor 0) in MIG mode, GPU-h100-1 (minor 1) not.
class NvmlMigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    static int n = 0;
    dir_ =
        ::testing::TempDir() + "/nvml_mig_" + std::to_string(getpid()) + "_" + std::to_string(n++);
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    Write("gpus",
          "GPU-h100-0 0 1 NVIDIA H100 80GB HBM3\n"
          "GPU-h100-1 1 0 NVIDIA H100 80GB HBM3\n");
    ::setenv("GPUPOOL_FAKE_NVML_DIR", dir_.c_str(), 1);
  }
  void TearDown() override {
    backend_.reset();
    fs::remove_all(dir_);
  }

  void Write(const std::string& file, const std::string& text) {
    std::ofstream(dir_ + "/" + file) << text;
  }
  // (Re)opens the backend: a new agent process on the same driver state.
  NvmlBackend& Open(const char* library = GPUPOOL_FAKE_NVML_MIG) {
    backend_.reset();  // the library is unloaded: nothing survives but the files
    auto b = NvmlBackend::Open(Catalog::Builtin(), library,
                               {.dev_dir = dir_ + "/dev",
                                .proc_dir = dir_ + "/proc",
                                .driver_dirs = {dir_},
                                .bin_dirs = {}});
    if (!b.ok()) {
      ADD_FAILURE() << b.status().ToString();
      std::abort();  // every test needs the backend
    }
    backend_ = std::move(*b);
    return *backend_;
  }
  Inventory Discover() {
    auto inv = backend_->Discover();
    EXPECT_TRUE(inv.ok()) << inv.status().ToString();
    return inv.ok() ? *inv : Inventory{};
  }
  // GPU 0's instances as discovered, canonical (sorted by start).
  MigLayout Discovered() {
    MigLayout out;
    for (const Device& d : Discover().devices) {
      if (d.parent_uuid == "GPU-h100-0") out.push_back({d.mig_profile, d.mig_start});
    }
    std::sort(out.begin(), out.end(),
              [](const MigPlacement& a, const MigPlacement& b) { return a.start < b.start; });
    return out;
  }
  std::set<std::string> CapabilityFiles() {
    std::set<std::string> out;
    if (!fs::exists(dir_ + "/proc/capabilities")) return out;
    for (const auto& e : fs::recursive_directory_iterator(dir_ + "/proc/capabilities")) {
      if (e.is_regular_file()) out.insert(e.path().string());
    }
    return out;
  }

  std::string dir_;
  std::unique_ptr<NvmlBackend> backend_;
};

// The driver holds 3g.40gb at slice 4 (GPU instance 1) and 2g.20gb at slice 0 (GPU instance 2),
// each with one whole compute instance: discovery reports the GPU as re-partitionable, each
// instance's start, memory and its two capability device files.
TEST_F(NvmlMigTest, DiscoveryReportsMigModePlacementsAndCapabilityFiles) {
  Write("state",
        "serial 5\n"
        "gi 0 1 2 4 1\nci 0 1 0 2 2\n"
        "gi 0 2 1 0 3\nci 0 2 0 1 4\n");
  Open();
  const Inventory inv = Discover();
  ASSERT_EQ(inv.devices.size(), 4u);
  EXPECT_TRUE(inv.devices[0].mig_enabled);
  EXPECT_FALSE(inv.devices[3].mig_enabled);  // GPU-h100-1: MIG mode off
  EXPECT_EQ(inv.devices[3].uuid, "GPU-h100-1");
  const std::string dev = dir_ + "/dev";
  const Device& a = inv.devices[1];
  EXPECT_EQ(a.mig_profile, "3g.40gb");
  EXPECT_EQ(a.mig_start, 4);
  EXPECT_FALSE(a.mig_enabled);
  EXPECT_EQ(a.vram_mib, 4 * 10112);  // four memory slices of the fake's 10112 MiB
  // Minors as the driver numbers them: GPU instance G's access is 3 + 9·G on GPU minor 0, its
  // compute instance C's is that + 1 + C.
  EXPECT_EQ(a.device_files,
            (std::vector<std::string>{dev + "/nvidia0", dev + "/nvidia-caps/nvidia-cap12",
                                      dev + "/nvidia-caps/nvidia-cap13"}));
  const Device& b = inv.devices[2];
  EXPECT_EQ(b.mig_profile, "2g.20gb");
  EXPECT_EQ(b.mig_start, 0);
  EXPECT_EQ(b.device_files,
            (std::vector<std::string>{dev + "/nvidia0", dev + "/nvidia-caps/nvidia-cap21",
                                      dev + "/nvidia-caps/nvidia-cap22"}));
  for (const Device& d : inv.devices) {
    for (const std::string& f : d.device_files) EXPECT_TRUE(fs::exists(f)) << f;
  }
  std::ifstream access(dir_ + "/proc/capabilities/gpu0/mig/gi2/ci0/access");
  std::string text((std::istreambuf_iterator<char>(access)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, "DeviceFileMinor: 22\nDeviceFileMode: 292\nDeviceFileModify: 1\n");
}

// A layout is created in order, and a new process on the same driver sees the same instances
// with the same UUIDs.
TEST_F(NvmlMigTest, AppliesALayoutThatTheNextProcessSees) {
  const MigLayout layout = Layout("3g.40gb@4+2g.20gb@0+1g.10gb@2");
  ASSERT_TRUE(ValidateMigLayout(H100(), layout).ok());
  Open();
  ASSERT_TRUE(backend_->ApplyMigLayout("GPU-h100-0", layout).ok());
  EXPECT_EQ(FormatMigLayout(Discovered()), "2g.20gb@0+1g.10gb@2+3g.40gb@4");
  std::set<std::string> uuids;
  for (const Device& d : Discover().devices) uuids.insert(d.uuid);
  Open();
  EXPECT_EQ(FormatMigLayout(Discovered()), "2g.20gb@0+1g.10gb@2+3g.40gb@4");
  std::set<std::string> again;
  for (const Device& d : Discover().devices) again.insert(d.uuid);
  EXPECT_EQ(again, uuids);
  EXPECT_EQ(CapabilityFiles().size(), 6u);  // three GPU instances, three compute instances
}

// Re-applying destroys the old instances: their UUIDs and capability files are gone.
TEST_F(NvmlMigTest, ReapplyingDestroysTheOldInstancesAndTheirCapabilityFiles) {
  Open();
  ASSERT_TRUE(backend_->ApplyMigLayout("GPU-h100-0", Layout("3g.40gb@4+2g.20gb@0+1g.10gb@2")).ok());
  std::set<std::string> old_uuids;
  for (const Device& d : Discover().devices) {
    if (!d.parent_uuid.empty()) old_uuids.insert(d.uuid);
  }
  const std::set<std::string> old_files = CapabilityFiles();
  ASSERT_TRUE(backend_->ApplyMigLayout("GPU-h100-0", Layout("4g.40gb@0+3g.40gb@4")).ok());
  EXPECT_EQ(FormatMigLayout(Discovered()), "4g.40gb@0+3g.40gb@4");
  for (const Device& d : Discover().devices) EXPECT_FALSE(old_uuids.contains(d.uuid)) << d.uuid;
  const std::set<std::string> files = CapabilityFiles();
  EXPECT_EQ(files.size(), 4u);  // two GPU instances, two compute instances
  // GPU instance 3 (the 1g.10gb) is gone, with its compute instance.
  EXPECT_TRUE(old_files.contains(dir_ + "/proc/capabilities/gpu0/mig/gi3/access"));
  EXPECT_FALSE(fs::exists(dir_ + "/proc/capabilities/gpu0/mig/gi3/access"));
  EXPECT_FALSE(fs::exists(dir_ + "/dev/nvidia-caps/nvidia-cap" + std::to_string(3 + 9 * 3)));
}

// The driver refuses one creation: the error names the step, profile and reason, and the GPU is
// back exactly as it was.
TEST_F(NvmlMigTest, ARefusedCreationRestoresThePreviousLayout) {
  Open();
  ASSERT_TRUE(backend_->ApplyMigLayout("GPU-h100-0", Layout("3g.40gb@0+3g.40gb@4")).ok());
  Write("refuse_create", "1g.10gb\n");
  // In this order (not canonical): the 1g.10gb is the third creation.
  const MigLayout layout = {{"3g.40gb", 4}, {"2g.20gb", 0}, {"1g.10gb", 2}};
  ASSERT_TRUE(ValidateMigLayout(H100(), layout).ok());
  const Status s = backend_->ApplyMigLayout("GPU-h100-0", layout);
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(s.message(),
            "GPU GPU-h100-0: creating placement 3 of 3, 1g.10gb@2: "
            "nvmlDeviceCreateGpuInstanceWithPlacement: Insufficient resources; the previous "
            "layout 3g.40gb@0+3g.40gb@4 was restored");
  EXPECT_EQ(FormatMigLayout(Discovered()), "3g.40gb@0+3g.40gb@4");
  EXPECT_EQ(CapabilityFiles().size(), 4u);
}

// A layout that overlaps (passed without validation) is the driver's to refuse: the overlapping
// placement is named and the previous layout kept.
TEST_F(NvmlMigTest, AnOverlapTheDriverRefusesKeepsThePreviousLayout) {
  Open();
  ASSERT_TRUE(backend_->ApplyMigLayout("GPU-h100-0", Layout("4g.40gb@0+3g.40gb@4")).ok());
  const MigLayout overlap = {{"3g.40gb", 0}, {"2g.20gb", 2}};  // slices 0-3 and 2-3
  ASSERT_FALSE(ValidateMigLayout(H100(), overlap).ok());
  const Status s = backend_->ApplyMigLayout("GPU-h100-0", overlap);
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(s.message().find("creating placement 2 of 2, 2g.20gb@2: "
                             "nvmlDeviceCreateGpuInstanceWithPlacement: Insufficient resources"),
            std::string::npos)
      << s.message();
  EXPECT_EQ(FormatMigLayout(Discovered()), "4g.40gb@0+3g.40gb@4");
}

// Creation is refused after the first new instance, and then for the old layout too: DATA_LOSS,
// and the GPU is left with no instance.
TEST_F(NvmlMigTest, ARollbackThatFailsIsDataLoss) {
  Open();
  ASSERT_TRUE(backend_->ApplyMigLayout("GPU-h100-0", Layout("3g.40gb@0+3g.40gb@4")).ok());
  Write("refuse_create", "all after 1\n");
  const Status s = backend_->ApplyMigLayout("GPU-h100-0", Layout("4g.40gb@0+2g.20gb@4+1g.10gb@6"));
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_NE(s.message().find("creating placement 2 of 3, 2g.20gb@4"), std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("restoring the previous layout 3g.40gb@0+3g.40gb@4 failed too: "
                             "GPU GPU-h100-0: re-creating 3g.40gb@0: "
                             "nvmlDeviceCreateGpuInstanceWithPlacement: Insufficient resources"),
            std::string::npos)
      << s.message();
  EXPECT_TRUE(Discovered().empty());
  EXPECT_TRUE(CapabilityFiles().empty());
}

// A process holds an instance: tearing down is refused part-way, and the part already destroyed
// is re-created.
TEST_F(NvmlMigTest, AnInstanceInUseKeepsThePreviousLayout) {
  Open();
  ASSERT_TRUE(backend_->ApplyMigLayout("GPU-h100-0", Layout("3g.40gb@0+3g.40gb@4")).ok());
  Write("in_use", "0 2\n");  // GPU instance 2: the 3g.40gb at slice 4, torn down second
  const Status s = backend_->ApplyMigLayout("GPU-h100-0", Layout("7g.80gb@0"));
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(),
            "GPU GPU-h100-0: destroying 3g.40gb@4 (GPU instance 2): nvmlComputeInstanceDestroy: "
            "In use by another client; the previous layout 3g.40gb@0+3g.40gb@4 was restored");
  EXPECT_EQ(FormatMigLayout(Discovered()), "3g.40gb@0+3g.40gb@4");
}

TEST_F(NvmlMigTest, RefusesWithoutPrivilegeAndKeepsTheLayout) {
  Open();
  ASSERT_TRUE(backend_->ApplyMigLayout("GPU-h100-0", Layout("7g.80gb@0")).ok());
  Write("unprivileged", "");
  const Status s = backend_->ApplyMigLayout("GPU-h100-0", Layout("3g.40gb@0"));
  EXPECT_EQ(s.code(), StatusCode::kPermissionDenied) << s.ToString();
  EXPECT_EQ(FormatMigLayout(Discovered()), "7g.80gb@0");
}

// Without profile names (no nvmlDeviceGetGpuInstanceProfileInfoV), profiles are matched by
// compute and memory slices, lowest id first: 1g.10gb is 1_SLICE (id 0, seven of them fit), not
// 1_SLICE_REV1 (id 7, "1g.10gb+me", one fits).
TEST_F(NvmlMigTest, WithoutProfileNamesSlicesPickTheProfile) {
  Write("v1_only", "");
  Open();
  const MigLayout layout = Layout("1g.10gb@0+1g.10gb@1+1g.20gb@2+3g.40gb@4");
  ASSERT_TRUE(backend_->ApplyMigLayout("GPU-h100-0", layout).ok());
  EXPECT_EQ(Discovered(), layout);  // names as the driver gives them: no "+me"
}

TEST_F(NvmlMigTest, AGpuWithMigOffIsRefused) {
  Open();
  const Status s = backend_->ApplyMigLayout("GPU-h100-1", Layout("7g.80gb@0"));
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(),
            "cannot re-partition GPU GPU-h100-1: its MIG mode is off (nvidia-smi -i <gpu> -mig 1)");
}

TEST_F(NvmlMigTest, AnUnknownGpuIsNotFound) {
  Open();
  const Status s = backend_->ApplyMigLayout("GPU-nope", Layout("7g.80gb@0"));
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_EQ(s.message(), "no GPU GPU-nope on this node");
}

TEST_F(NvmlMigTest, AProfileTheDriverLacksIsRefusedBeforeAnythingChanges) {
  Open();
  ASSERT_TRUE(backend_->ApplyMigLayout("GPU-h100-0", Layout("7g.80gb@0")).ok());
  const Status s = backend_->ApplyMigLayout("GPU-h100-0", {{"5g.50gb", 0}});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "cannot re-partition GPU GPU-h100-0 (NVIDIA H100 80GB HBM3): the driver "
            "offers no MIG profile 5g.50gb");
  EXPECT_EQ(FormatMigLayout(Discovered()), "7g.80gb@0");
}

// tests/agent/fake_nvml.cc has no MIG management calls, like a pre-R450 driver.
TEST_F(NvmlMigTest, ALibraryWithoutMigManagementIsAFailedPrecondition) {
  Open(GPUPOOL_FAKE_NVML);
  const Status s = backend_->ApplyMigLayout("GPU-fake-0", Layout("7g.80gb@0"));
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(), std::string("cannot re-partition GPU GPU-fake-0: ") + GPUPOOL_FAKE_NVML +
                             " lacks MIG management (no nvmlDeviceGetGpuInstanceProfileInfo); "
                             "the driver is too old");
}

// The fake's profile tables are NVIDIA's; the catalog's geometry is too. Held against each other
// through the NVML calls themselves: every catalog profile of each model is offered under its
// name, with the catalog's memory slices and starts.
TEST_F(NvmlMigTest, TheFakesProfilesAgreeWithTheCatalog) {
  Write("gpus",
        "GPU-a 0 1 NVIDIA H100 80GB HBM3\nGPU-b 1 1 NVIDIA H200\n"
        "GPU-c 2 1 NVIDIA A100-SXM4-40GB\nGPU-d 3 1 NVIDIA A100-SXM4-80GB\n");
  void* lib = dlopen(GPUPOOL_FAKE_NVML_MIG, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(lib, nullptr) << dlerror();
  struct Info {
    unsigned version, id, p2p, slices, count, sms, ce, dec, enc, jpeg, ofa;
    unsigned long long mib;
    char name[96];
  };
  struct Placement {
    unsigned start, size;
  };
  auto init = reinterpret_cast<int (*)()>(dlsym(lib, "nvmlInit_v2"));
  auto handle =
      reinterpret_cast<int (*)(unsigned, void**)>(dlsym(lib, "nvmlDeviceGetHandleByIndex_v2"));
  auto name_of = reinterpret_cast<int (*)(void*, char*, unsigned)>(dlsym(lib, "nvmlDeviceGetName"));
  auto info_of = reinterpret_cast<int (*)(void*, unsigned, Info*)>(
      dlsym(lib, "nvmlDeviceGetGpuInstanceProfileInfoV"));
  auto placements = reinterpret_cast<int (*)(void*, unsigned, Placement*, unsigned*)>(
      dlsym(lib, "nvmlDeviceGetGpuInstancePossiblePlacements_v2"));
  ASSERT_EQ(init(), 0);
  for (unsigned i = 0; i < 4; ++i) {
    void* dev = nullptr;
    ASSERT_EQ(handle(i, &dev), 0);
    char name[96] = {};
    name_of(dev, name, sizeof(name));
    const GpuModel* model = Catalog::Builtin().Find(name);
    ASSERT_NE(model, nullptr) << name;
    std::set<std::string> offered;
    for (unsigned id = 0; id < 10; ++id) {
      Info info{};
      info.version = (2u << 24) | sizeof(Info);
      if (info_of(dev, id, &info) != 0) continue;
      const std::string profile = std::string(info.name).substr(4);  // after "MIG "
      const MigProfile* p = model->FindMig(profile);
      if (p == nullptr) continue;  // "+me" variants are not in the catalog
      offered.insert(p->name);
      EXPECT_EQ(static_cast<int>(info.slices), p->compute_slices) << name << " " << profile;
      EXPECT_EQ(static_cast<int>(info.count), p->max_instances) << name << " " << profile;
      Placement got[8] = {};
      unsigned n = 8;
      ASSERT_EQ(placements(dev, id, got, &n), 0);
      std::vector<int> starts;
      for (unsigned k = 0; k < n; ++k) {
        starts.push_back(static_cast<int>(got[k].start));
        EXPECT_EQ(static_cast<int>(got[k].size), p->memory_slices) << name << " " << profile;
      }
      EXPECT_EQ(starts, p->starts) << name << " " << profile;
    }
    EXPECT_EQ(offered.size(), model->mig_profiles.size()) << name;
  }
  dlclose(lib);
}

}  // namespace
}  // namespace gpupool::agent
