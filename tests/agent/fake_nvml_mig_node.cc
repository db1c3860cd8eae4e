// tests/agent/fake_nvml_mig_node.h: the node's files, read and written.
#include "tests/agent/fake_nvml_mig_node.h"

#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace fake_nvml_mig {
namespace fs = std::filesystem;
namespace {

std::vector<Profile> Profiles(const char* g1, const char* g1x2, const char* g2, const char* g3,
                              const char* g4, const char* g7) {
  const std::vector<int> any = {0, 1, 2, 3, 4, 5, 6}, even = {0, 2, 4, 6};
  return {{0, g1, 1, 1, 7, any},
          {7, nullptr, 1, 1, 1, any},  // REV1: the 1-slice profile with
                                       // media extensions
          {9, g1x2, 1, 2, 4, even},
          {1, g2, 2, 2, 3, {0, 2, 4}},
          {2, g3, 3, 4, 2, {0, 4}},
          {3, g4, 4, 4, 1, {0}},
          {4, g7, 7, 8, 1, {0}}};
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool WriteAtomically(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp" + std::to_string(getpid());
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << text;
    if (!out.flush()) return false;
  }
  return std::rename(tmp.c_str(), path.c_str()) == 0;
}

// The node as the files describe it; a malformed `gpus` line is reported on stderr (NVML has no
// way to say more than an error code) and makes nvmlInit_v2 fail.
bool LoadGpus(std::vector<GpuConf>* out) {
  std::istringstream in(Slurp(Dir() + "/gpus"));
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (line.empty() || line[0] == '#') continue;
    std::istringstream ls(line);
    GpuConf g;
    int mig = -1;
    ls >> g.uuid >> g.minor >> mig;
    std::getline(ls >> std::ws, g.name);
    for (const Model& m : Models()) {
      if (g.name == m.nvml_name) g.model = &m;
    }
    if (g.uuid.empty() || (mig != 0 && mig != 1) || g.model == nullptr) {
      std::fprintf(stderr, "fake NVML: %s/gpus:%d: expected `<uuid> <minor> <0|1> <known name>`\n",
                   Dir().c_str(), n);
      return false;
    }
    g.mig = mig == 1;
    out->push_back(g);
  }
  return true;
}

State LoadState() {
  State s;
  std::istringstream in(Slurp(Dir() + "/state"));
  std::string kind;
  while (in >> kind) {
    if (kind == "serial") {
      in >> s.next_serial;
    } else if (kind == "gi") {
      Gi g{};
      in >> g.gpu >> g.id >> g.profile >> g.start >> g.serial;
      s.gis.push_back(g);
    } else if (kind == "ci") {
      Ci c{};
      in >> c.gpu >> c.gi >> c.id >> c.profile >> c.serial;
      s.cis.push_back(c);
    }
  }
  return s;
}

unsigned GiMinor(unsigned gpu_minor, unsigned gi) { return 3 + 135 * gpu_minor + 9 * gi; }
unsigned CiMinor(unsigned gpu_minor, unsigned gi, unsigned ci) {
  return GiMinor(gpu_minor, gi) + 1 + ci;
}

// A device file as the driver makes it: with `char_devices` in the directory (a test running as
// root, whose sandbox admits only device nodes), a character device with the driver's numbers —
// nvidia<minor> is 195:<minor>, nvidia-caps/nvidia-cap<N> is <caps major>:<N> (the caps major is
// dynamic on a real host, listed in /proc/devices as nvidia-caps; here the file's number) —
// else a plain file.
void MakeDeviceFile(const std::string& path, bool cap, unsigned minor) {
  std::ifstream in(Dir() + "/char_devices");
  unsigned caps_major = 0;
  if (in >> caps_major) {
    (void)::mknod(path.c_str(), S_IFCHR | 0666, makedev(cap ? caps_major : 195, minor));
    return;
  }
  std::ofstream{path};
}

void WriteCapability(const fs::path& access, unsigned minor) {
  fs::create_directories(access.parent_path());
  WriteAtomically(access.string(), "DeviceFileMinor: " + std::to_string(minor) +
                                       "\nDeviceFileMode: 292\nDeviceFileModify: 1\n");
  fs::create_directories(Dir() + "/dev/nvidia-caps");
  MakeDeviceFile(Dir() + "/dev/nvidia-caps/nvidia-cap" + std::to_string(minor), true, minor);
}

bool SaveState(const std::vector<GpuConf>& gpus, const State& s) {
  std::string text = "serial " + std::to_string(s.next_serial) + "\n";
  for (const Gi& g : s.gis) {
    text += "gi " + std::to_string(g.gpu) + " " + std::to_string(g.id) + " " +
            std::to_string(g.profile) + " " + std::to_string(g.start) + " " +
            std::to_string(g.serial) + "\n";
  }
  for (const Ci& c : s.cis) {
    text += "ci " + std::to_string(c.gpu) + " " + std::to_string(c.gi) + " " +
            std::to_string(c.id) + " " + std::to_string(c.profile) + " " +
            std::to_string(c.serial) + "\n";
  }
  if (!WriteAtomically(Dir() + "/state", text)) return false;
  SyncDeviceFiles(gpus, s);
  return true;
}

}  // namespace

const std::vector<Model>& Models() {
  static const std::vector<Model> models = {
      {"NVIDIA H100 80GB HBM3", 81559, 10112, 16,
       Profiles("10gb", "20gb", "20gb", "40gb", "40gb", "80gb")},
      {"NVIDIA H200", 143771, 17920, 16, Profiles("18gb", "35gb", "35gb", "71gb", "71gb", "141gb")},
      {"NVIDIA A100-SXM4-40GB", 40536, 4864, 14,
       Profiles("5gb", "10gb", "10gb", "20gb", "20gb", "40gb")},
      {"NVIDIA A100-SXM4-80GB", 81920, 9856, 14,
       Profiles("10gb", "20gb", "20gb", "40gb", "40gb", "80gb")},
  };
  return models;
}

const Profile* FindProfile(const Model& m, unsigned id) {
  for (const Profile& p : m.profiles) {
    if (p.id == id) return &p;
  }
  return nullptr;
}

std::string NameOf(const Model& m, const Profile& p) {
  if (p.id == 7) {  // +me: the 1-slice profile's name with media extensions
    return "1g." + std::string(FindProfile(m, 0)->suffix) + "+me";
  }
  return std::to_string(p.slices) + "g." + p.suffix;
}

std::string Dir() {
  const char* d = std::getenv("GPUPOOL_FAKE_NVML_DIR");
  return d != nullptr ? d : "";
}

void SyncDeviceFiles(const std::vector<GpuConf>& gpus, const State& s) {
  std::error_code ec;
  fs::create_directories(Dir() + "/dev", ec);
  for (const GpuConf& g : gpus)
    MakeDeviceFile(Dir() + "/dev/nvidia" + std::to_string(g.minor), false, g.minor);
  fs::remove_all(Dir() + "/proc/capabilities", ec);
  fs::remove_all(Dir() + "/dev/nvidia-caps", ec);
  for (const Gi& gi : s.gis) {
    if (gi.gpu >= gpus.size()) continue;
    const unsigned m = gpus[gi.gpu].minor;
    const fs::path dir = fs::path(Dir()) / "proc/capabilities" / ("gpu" + std::to_string(m)) /
                         "mig" / ("gi" + std::to_string(gi.id));
    WriteCapability(dir / "access", GiMinor(m, gi.id));
    for (const Ci& ci : s.cis) {
      if (ci.gpu == gi.gpu && ci.gi == gi.id) {
        WriteCapability(dir / ("ci" + std::to_string(ci.id)) / "access", CiMinor(m, gi.id, ci.id));
      }
    }
  }
}

Node::Node() : ok(LoadGpus(&gpus)) { state = LoadState(); }

bool Node::Save() const { return SaveState(gpus, state); }

bool InUse(unsigned gpu, unsigned gi, int ci) {
  std::istringstream in(Slurp(Dir() + "/in_use"));
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    unsigned g = 0, i = 0;
    int c = -1;
    if (!(ls >> g >> i)) continue;
    ls >> c;
    if (g == gpu && i == gi && (c == -1 || c == ci)) return true;
  }
  return false;
}

bool Unprivileged() { return fs::exists(Dir() + "/unprivileged"); }

bool RefuseCreate(const std::string& profile) {
  const std::string path = Dir() + "/refuse_create";
  std::istringstream in(Slurp(path));
  std::string what, word;
  long after = 0;
  if (!(in >> what)) return false;
  if (in >> word && word == "after") in >> after;
  if (what != "all" && what != profile) return false;
  if (after <= 0) return true;
  WriteAtomically(path, what + " after " + std::to_string(after - 1) + "\n");
  return false;
}

bool V1Only() { return fs::exists(Dir() + "/v1_only"); }

}  // namespace fake_nvml_mig
