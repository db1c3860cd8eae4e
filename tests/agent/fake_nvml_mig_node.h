// The fake NVML's node (tests/agent/fake_nvml_mig.cc): what the kernel driver holds, kept in
// files so that it outlives the process.
//
// The node is described by files in $GPUPOOL_FAKE_NVML_DIR, read on every call, so what one
// process creates the next one sees, as with the kernel driver:
//   gpus         one line per GPU: `<uuid> <minor> <mig 0|1> <NVML name>`; the name picks the
//                profile table (NVIDIA H100 80GB HBM3, NVIDIA H200, NVIDIA A100-SXM4-40GB,
//                NVIDIA A100-SXM4-80GB). Written by the test.
//   state        the driver's instances: `serial <next>`, `gi <gpu> <id> <profile> <start>
//                <serial>`, `ci <gpu> <gi> <id> <profile> <serial>`. Written by the fake only, as
//                a temporary file renamed over the old one, under an flock(2) on `lock`: every
//                NVML call is one atomic step, so a process killed mid-way leaves a whole file.
//   in_use       optional, lines `<gpu> <gi>` or `<gpu> <gi> <ci>`: instances a process holds;
//                destroying them answers IN_USE.
//   refuse_create  optional fault injection: `<profile name>|all [after <n>]`. Creating a GPU
//                instance of that profile (any, for `all`) answers INSUFFICIENT_RESOURCES, once
//                `n` more such creations have succeeded (the fake counts `n` down in the file).
//   unprivileged optional: every create/destroy answers NO_PERMISSION (MIG management requires
//                root, per the reference).
//   v1_only      optional: nvmlDeviceGetGpuInstanceProfileInfoV answers FUNCTION_NOT_FOUND, as
//                a library from before R510 has no such call (profiles then have no names).
//   char_devices optional, the nvidia-caps major (e.g. `238`): device files are character devices
//                with the driver's numbers (a test as root whose sandbox admits only device nodes).
// Device files, as a sandboxed task needs them (plain files unless char_devices says otherwise):
//   dev/nvidia<minor> for each GPU; proc/capabilities/gpu<minor>/mig/gi<G>/access and
//   …/gi<G>/ci<C>/access ("DeviceFileMinor: N\nDeviceFileMode: 292\nDeviceFileModify: 1"), with
//   dev/nvidia-caps/nvidia-cap<N>, created and removed with their instances. N as the driver
//   numbers them in /proc/driver/nvidia-caps/mig-minors (config 1, monitor 2, then per GPU minor
//   15 GPU instances of 1 access + 8 compute instances): gi access = 3 + 135·gpu + 9·G, ci access
//   = that + 1 + C ("gpu31/gi14/ci7/access 4322").
//
// Simplifications, each documented: GPU instance ids are the lowest free from 1 (0 for the
// whole-GPU profile, as nvidia-smi's examples show), where a driver uses a fixed table per
// placement; memory sizes are memory slices × a per-slice figure near what drivers report;
// compute instances are shared-engine only (engine profile 0).
//
// Thread safety: a process's calls and different processes' are serialised by the flock.
#pragma once

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <tuple>
#include <vector>

namespace fake_nvml_mig {

// NVML_COMPUTE_INSTANCE_PROFILE_*: 1 0, 2 1, 3 2, 4 3, 7 4, 8 5, 6 6, 1_REV1 7, COUNT 8; the
// compute slices of each.
constexpr unsigned kCiProfileCount = 8;
constexpr int kCiSlices[kCiProfileCount] = {1, 2, 3, 4, 7, 8, 6, 1};

// One GPU instance profile of a model (MIG User Guide, "Supported MIG Profiles").
struct Profile {
  unsigned id;
  const char* suffix;  // name after "<g>g.": "10gb", "10gb+me"
  int slices, memory_slices, max_instances;
  std::vector<int> starts;
};
struct Model {
  const char* nvml_name;
  unsigned long long total_mib, slice_mib;
  int sms_per_slice;
  std::vector<Profile> profiles;
};

// The GPUs the fake knows, by NVML name.
const std::vector<Model>& Models();
const Profile* FindProfile(const Model& m, unsigned id);
// "3g.40gb"; "1g.10gb+me" for 1_SLICE_REV1.
std::string NameOf(const Model& m, const Profile& p);

struct GpuConf {
  std::string uuid, name;
  unsigned minor = 0;
  bool mig = false;
  const Model* model = nullptr;
};

struct Gi {
  unsigned gpu, id, profile, start;
  unsigned long long serial;
};
struct Ci {
  unsigned gpu, gi, id, profile;
  unsigned long long serial;
};
struct State {
  unsigned long long next_serial = 1;
  std::vector<Gi> gis;
  std::vector<Ci> cis;
};

// $GPUPOOL_FAKE_NVML_DIR ("" when unset).
std::string Dir();

// Every NVML call holds the node's lock for its whole read-modify-write.
class Locked {
 public:
  Locked() : fd_(::open((Dir() + "/lock").c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644)) {
    if (fd_ >= 0) ::flock(fd_, LOCK_EX);
  }
  ~Locked() {
    if (fd_ >= 0) ::close(fd_);
  }
  Locked(const Locked&) = delete;
  Locked& operator=(const Locked&) = delete;

 private:
  int fd_;
};

// Everything one call needs, read under the lock.
struct Node {
  Locked lock;
  std::vector<GpuConf> gpus;
  State state;
  bool ok = false;
  Node();
  const Gi* FindGi(unsigned gpu, unsigned id, unsigned long long serial = 0) const {
    for (const Gi& g : state.gis) {
      if (g.gpu == gpu && g.id == id && (serial == 0 || g.serial == serial)) return &g;
    }
    return nullptr;
  }
  const Ci* FindCi(unsigned gpu, unsigned gi, unsigned id, unsigned long long serial = 0) const {
    for (const Ci& c : state.cis) {
      if (c.gpu == gpu && c.gi == gi && c.id == id && (serial == 0 || c.serial == serial)) {
        return &c;
      }
    }
    return nullptr;
  }
  // The MIG devices of a GPU, as nvmlDeviceGetMigDeviceHandleByIndex enumerates them.
  std::vector<const Ci*> MigDevices(unsigned gpu) const {
    std::vector<const Ci*> out;
    for (const Ci& c : state.cis) {
      if (c.gpu == gpu) out.push_back(&c);
    }
    std::sort(out.begin(), out.end(), [](const Ci* a, const Ci* b) {
      return std::tie(a->gi, a->id) < std::tie(b->gi, b->id);
    });
    return out;
  }
  // Writes the state atomically, then makes the device files match it.
  bool Save() const;
};

// Makes the device and capability files match `s`: the instances' appear, the destroyed ones' go.
void SyncDeviceFiles(const std::vector<GpuConf>& gpus, const State& s);

// The fault files (see the top).
bool InUse(unsigned gpu, unsigned gi, int ci);  // ci -1: the GPU instance itself
bool Unprivileged();
bool V1Only();
// Whether creating `profile` is refused now; counts `after` down on a creation it lets through.
bool RefuseCreate(const std::string& profile);

}  // namespace fake_nvml_mig
