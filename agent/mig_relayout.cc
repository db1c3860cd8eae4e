#include "agent/mig_relayout.h"

#include <fcntl.h>
#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "base/log.h"
#include "pool/mig_layout.h"

namespace gpupool::agent {
namespace {

const Device* FindGpu(const Inventory& inventory, const std::string& uuid) {
  for (const Device& d : inventory.devices) {
    if (d.uuid == uuid && d.mig_profile.empty()) return &d;
  }
  return nullptr;
}

// The GPU's instances as the backend reported them, in pool/mig_layout.h's text.
std::string CurrentLayout(const Inventory& inventory, const std::string& gpu) {
  MigLayout layout;
  for (const Device& d : inventory.devices) {
    if (d.parent_uuid == gpu && !d.mig_profile.empty())
      layout.push_back({d.mig_profile, d.mig_start});
  }
  return FormatMigLayout(layout);  // canonical: sorted by start
}

// The journal file of a GPU: its UUID with anything but [A-Za-z0-9-] replaced.
std::string FileName(const std::string& gpu) {
  std::string out = gpu;
  for (char& c : out) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-') c = '_';
  }
  return out;
}

v1::MigLayoutOutcome Refused(const std::string& gpu, int64_t generation, std::string error) {
  v1::MigLayoutOutcome o;
  o.set_gpu_uuid(gpu);
  o.set_generation(generation);
  o.set_error(std::move(error));
  return o;
}

}  // namespace

MigRelayouter::MigRelayouter(DeviceBackend* backend, Catalog models, std::string dir)
    : backend_(backend), models_(std::move(models)), dir_(std::move(dir)) {}

Status MigRelayouter::WriteEntry(const Entry& e) const {
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (ec) return Status::Internal("MIG journal " + dir_ + ": " + ec.message());
  const std::string path = dir_ + "/" + FileName(e.gpu);
  const std::string tmp = path + ".tmp";
  const std::string text =
      e.gpu + "\n" + std::to_string(e.generation) + "\n" + e.wanted + "\n" + e.previous + "\n";
  // Durable before the first driver call: written, synced, renamed, the directory synced.
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return Status::Internal("MIG journal " + tmp + ": cannot create");
  const bool written = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) &&
                       ::fsync(fd) == 0;
  ::close(fd);
  if (!written) return Status::Internal("MIG journal " + tmp + ": cannot write");
  std::filesystem::rename(tmp, path, ec);
  if (ec) return Status::Internal("MIG journal " + path + ": " + ec.message());
  if (const int dfd = ::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dfd >= 0) {
    (void)::fsync(dfd);
    ::close(dfd);
  }
  return Status::Ok();
}

void MigRelayouter::RemoveEntry(const std::string& gpu) const {
  std::error_code ec;
  std::filesystem::remove(dir_ + "/" + FileName(gpu), ec);
}

v1::MigLayoutOutcome MigRelayouter::Finish(const Entry& e, const GpuModel& model) {
  v1::MigLayoutOutcome o = Refused(e.gpu, e.generation, "");
  Result<MigLayout> wanted = ParseMigLayout(model, e.wanted);
  Status st = wanted.ok() ? backend_->ApplyMigLayout(e.gpu, *wanted) : wanted.status();
  if (st.ok()) return o;
  LogWarn("agent.mig", "MIG layout refused",
          {{"gpu", e.gpu}, {"layout", e.wanted}, {"error", st.message()}});
  std::string error = st.message();
  if (st.code() != StatusCode::kDataLoss) {
    // The backend put the GPU back as it was when the call began; that is `previous` unless a
    // dead agent left it half-way (recovery), in which case `previous` is made again.
    Result<MigLayout> before = ParseMigLayout(model, e.previous);
    Status back = before.ok() ? backend_->ApplyMigLayout(e.gpu, *before) : before.status();
    if (back.ok()) {
      o.set_error(error);
      return o;
    }
    error += "; the previous layout " + (e.previous.empty() ? std::string("(none)") : e.previous) +
             " could not be restored either: " + back.message();
  }
  // Neither layout: no instance at all, and the GPU out of service until an admin clears it.
  if (Status empty = backend_->ApplyMigLayout(e.gpu, {}); !empty.ok())
    error += "; its instances could not be removed: " + empty.message();
  LogError("agent.mig", "GPU left without MIG instances", {{"gpu", e.gpu}, {"error", error}});
  o.set_error(error);
  o.set_faulted(true);
  return o;
}

v1::MigLayoutOutcome MigRelayouter::Apply(const v1::SetMigLayout& req, const Inventory& inventory,
                                          const BusyFn& busy) {
  const std::string& uuid = req.gpu_uuid();
  auto keep = [&](v1::MigLayoutOutcome o) {
    outcomes_[uuid] = o;
    return o;
  };
  const Device* gpu = FindGpu(inventory, uuid);
  if (gpu == nullptr)
    return keep(Refused(uuid, req.generation(), "no GPU " + uuid + " on this node"));
  if (!gpu->mig_enabled) {
    return keep(Refused(uuid, req.generation(), "GPU " + uuid + " is not in MIG mode"));
  }
  const GpuModel* model = models_.Find(gpu->model);
  if (model == nullptr) {
    return keep(Refused(uuid, req.generation(),
                        "GPU model '" + gpu->model + "' is not in the agent's catalog"));
  }
  Result<MigLayout> layout = ParseMigLayout(*model, req.layout());
  if (!layout.ok()) {
    return keep(Refused(uuid, req.generation(), "layout: " + layout.status().message()));
  }
  if (busy(uuid)) {
    return keep(Refused(uuid, req.generation(),
                        "GPU " + uuid + " has instances running tasks; its layout is kept"));
  }
  const Entry e{uuid, FormatMigLayout(*layout), CurrentLayout(inventory, uuid), req.generation()};
  if (Status st = WriteEntry(e); !st.ok())
    return keep(Refused(uuid, req.generation(), st.message()));
  LogInfo("agent.mig", "re-partitioning GPU",
          {{"gpu", uuid},
           {"from", e.previous},
           {"to", e.wanted},
           {"generation", std::to_string(e.generation)}});
  v1::MigLayoutOutcome o = Finish(e, *model);
  RemoveEntry(uuid);
  return keep(o);
}

void MigRelayouter::Recover(const Inventory& inventory, const BusyFn& busy) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir_, ec)) return;
  for (const auto& file : std::filesystem::directory_iterator(dir_, ec)) {
    if (file.path().extension() == ".tmp") {  // never renamed: nothing was done after it
      std::filesystem::remove(file.path(), ec);
      continue;
    }
    std::ifstream in(file.path());
    Entry e;
    std::string generation;
    if (!std::getline(in, e.gpu) || !std::getline(in, generation) || !std::getline(in, e.wanted) ||
        !std::getline(in, e.previous)) {
      LogWarn("agent.mig", "unreadable MIG journal entry removed",
              {{"file", file.path().string()}});
      std::filesystem::remove(file.path(), ec);
      continue;
    }
    e.generation = std::strtoll(generation.c_str(), nullptr, 10);
    const Device* gpu = FindGpu(inventory, e.gpu);
    const GpuModel* model = gpu != nullptr ? models_.Find(gpu->model) : nullptr;
    if (gpu == nullptr || model == nullptr) {
      LogWarn("agent.mig", "MIG journal entry for a GPU this node no longer has", {{"gpu", e.gpu}});
      std::filesystem::remove(file.path(), ec);
      continue;
    }
    if (busy(e.gpu)) {  // kept: finished by a later start, once its tasks are gone
      outcomes_[e.gpu] =
          Refused(e.gpu, e.generation, "an interrupted re-layout waits for the GPU's tasks to end");
      outcomes_[e.gpu].set_faulted(true);
      continue;
    }
    LogWarn("agent.mig", "finishing an interrupted MIG re-layout",
            {{"gpu", e.gpu}, {"to", e.wanted}, {"previous", e.previous}});
    outcomes_[e.gpu] = Finish(e, *model);
    std::filesystem::remove(file.path(), ec);
  }
}

void MigRelayouter::FillRegister(v1::Register* r) const {
  for (const auto& [gpu, o] : outcomes_) *r->add_mig_outcomes() = o;
}

}  // namespace gpupool::agent
