// Containers: one task as an OCI bundle, from request to a bundle the launcher can run — the seam
// the task runner calls for a container task.
//
// Prepare() does, in order, undoing what it did on any failure:
//   1. pulls the image into the node's store and holds it (an ImageLease) — or, with no image,
//      uses the host-root skeleton (rootfs.h) for a plain command;
//   2. takes the task's unprivileged uid/gid from the agent's UidMap;
//   3. builds the task's root file system (overlay over the image, or the fallback), makes its
//      declared volumes (a dataset of the node's, or a scratch directory) and their mount points,
//      and for an isolated network prepares its namespace (agent/net/task_network.h);
//   4. writes <task dir>/config.json (spec.h): the image's entrypoint/env with the task's args and
//      env, the limits, the granted device files, driver files, interposer, volumes, network, the
//      default seccomp profile converted for the task's capabilities, the cgroup path
//      <cgroup_parent>/<id> (v2 keys only on a v2 host).
// The PreparedContainer then gives the shim's argv (what the task runner spawns) and Release()
// (after the shim ended): delete the container if still there, unmount the rootfs, give the uid
// back, delete its network namespace, drop the image lease.
//
// Errors name the step ("image: …", "uid: …", "rootfs: …", "volume /data: …", "spec: …",
// "seccomp: …"); a task that cannot be confined does not run.
//
// Thread safety: ContainerFactory is safe from any thread; a PreparedContainer belongs to one task.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "agent/image/image_store.h"
#include "agent/oci/launcher.h"
#include "agent/oci/rootfs.h"
#include "agent/oci/seccomp.h"
#include "agent/oci/spec.h"
#include "agent/sandbox/uids.h"
#include "base/status.h"

namespace gpupool::agent::oci {

struct ContainerFactoryOptions {
  std::shared_ptr<image::ImageStore> store;  // REQUIRES: set for image tasks
  std::shared_ptr<sandbox::UidMap> uids;     // REQUIRES: set
  LauncherOptions launcher;
  std::string seccomp_profile = kDefaultSeccompProfile;
  std::string cgroup_parent = "/gpupool";
  bool cgroup_v2 = false;               // the node's memory controller is on v2
  std::vector<std::string> hide_paths;  // masked in every task (the agent's config, its data)
  std::vector<std::string> host_dirs = {"/usr", "/etc", "/opt"};  // plain commands' root
  // Where isolated networks come from (null: the node offers none, and an isolated task fails).
  std::shared_ptr<net::TaskNetworks> networks;
  // The datasets this node offers tasks' volumes, name → host directory (the agent's
  // `datasets:`), mounted read-only.
  std::map<std::string, std::string> datasets;
  // Fake GPU hardware only (tests/fakes/cuda, whose device memory is a file, not a device node):
  // this directory, bound read-write at its own path into every task granted a GPU, as a real
  // GPU's /dev/nvidia* node is made there. Empty on every real node; no config key sets it.
  std::string simulated_gpu_state;
};

struct ContainerRequest {
  std::string id;        // unique per task attempt: the container id and cgroup name
  std::string tenant;    // for the uid
  std::string task_dir;  // exists, root-owned: bundle, upper dir, logs
  std::string image;     // OCI reference; empty = a plain command on the host root
  image::RegistryCredential credential;
  // Told the pull's bytes as they move (image::ImageStore::Progress); null = nobody.
  image::ImageStore::Progress on_pull_progress;
  std::vector<std::string> args;        // image tasks: replace the image's Cmd (empty = keep it)
  std::vector<std::string> env;         // "K=V", over the image's
  std::vector<std::string> entrypoint;  // image tasks: replaces the image's (and its Cmd)
  std::string working_dir;              // image tasks: replaces the image's WorkingDir
  // The task's declared volumes (TaskTemplate.volumes), mount path → dataset name ("" = a scratch
  // directory, <task dir>/volumes/<n>, owned by the task). Image tasks only.
  std::map<std::string, std::string> task_volumes;
  int64_t memory_bytes = 0;
  int64_t cpu_milli = 0;
  int64_t pids_max = 4096;
  std::vector<std::string> device_files;  // granted device nodes (host path = container path)
  bool gpu = false;                       // granted a GPU (or a share of one)
  std::vector<std::string> driver_files;
  std::string interposer_library;
  std::string interposer_socket;
  std::vector<BindMount> volumes;
  Network network = Network::kNone;
  std::string netns_path;       // kIsolated: a prepared namespace; empty = one from the factory's
  std::vector<TaskPort> ports;  // kIsolated with a namespace of the factory's: published
  bool seccomp = true;          // false only where the caller can say why (tests' control runs)
  bool tenant_uid = false;      // an MPS client: the tenant's shared uid (sandbox::UidMap)
};

// A container a previous agent process prepared and whose shim still runs, for a restarted agent
// that re-adopts it (ContainerFactory::Adopt).
struct AdoptedContainer {
  std::string id;
  std::string tenant;
  std::string task_dir;         // absolute: the bundle
  std::string manifest_digest;  // its image, held again; empty: a plain command
  uint32_t uid = 0;             // the task's uid, reserved again
  bool tenant_uid = false;      // … its tenant's shared uid (an MPS client)
  bool overlay = false;         // its root file system is an overlay mounted at <task_dir>/rootfs
  int network_slot = -1;        // isolated: its network's slot, taken again (-1: none)
  std::vector<net::PublishedPort> published;  // … and its published ports, published again
};

class PreparedContainer {
 public:
  ~PreparedContainer();  // Release()
  PreparedContainer(const PreparedContainer&) = delete;
  PreparedContainer& operator=(const PreparedContainer&) = delete;

  const std::string& id() const { return id_; }
  const std::string& bundle() const { return bundle_; }
  const sandbox::TaskIdentity& identity() const { return identity_; }
  const TaskRootfs& rootfs() const { return rootfs_; }
  const RuntimeSpecInput& spec_input() const { return input_; }
  // What the task runner spawns; the shim's exit code is the task's (launcher.h).
  std::vector<std::string> ShimArgv() const { return launcher_.ShimArgv(bundle_, id_); }
  const Launcher& launcher() const { return launcher_; }
  // The image came from the node's store without fetching a blob (false for plain commands).
  bool image_cache_hit() const { return lease_.cache_hit(); }
  const std::string& image_digest() const { return lease_.image().manifest_digest; }
  // Its isolated network's slot, -1 without one.
  int network_slot() const { return network_ ? network_->network().slot : -1; }
  // Its declared ports and the node's ports they are published on (isolated networks).
  std::vector<net::PublishedPort> published() const {
    return network_ ? network_->network().published : std::vector<net::PublishedPort>{};
  }
  void Release();
  // Lets go without releasing anything: the container runs on for the next agent process,
  // which adopts it. Its uid, mounts, image and network stay.
  void Abandon();

 private:
  friend class ContainerFactory;
  explicit PreparedContainer(LauncherOptions launcher) : launcher_(std::move(launcher)) {}
  std::string id_, bundle_;
  Launcher launcher_;
  std::shared_ptr<sandbox::UidMap> uids_;
  std::string work_dir_;  // a plain command's, locked (root, 0700) on Release()
  sandbox::TaskIdentity identity_;
  bool has_identity_ = false;
  image::ImageLease lease_;
  std::unique_ptr<net::NetworkLease> network_;
  TaskRootfs rootfs_;
  RuntimeSpecInput input_;
  bool released_ = false;
};

class ContainerFactory {
 public:
  explicit ContainerFactory(ContainerFactoryOptions options);
  Result<std::unique_ptr<PreparedContainer>> Prepare(const ContainerRequest& request) const;
  // Rebuilds what Prepare() made for a container that still runs (nothing is pulled, mounted or
  // written): its uid reserved, its image held, its root file system known. Release() then undoes
  // it as for a prepared one. Errors name what is gone or taken.
  Result<std::unique_ptr<PreparedContainer>> Adopt(const AdoptedContainer& adopted) const;
  const ContainerFactoryOptions& options() const { return options_; }

 private:
  // The binds of request.task_volumes: each dataset checked against options_.datasets, each
  // scratch directory made, each mount point made in `rootfs`. Errors name the volume.
  Result<std::vector<BindMount>> Volumes(const ContainerRequest& request, const TaskRootfs& rootfs,
                                         const sandbox::TaskIdentity& who) const;
  ContainerFactoryOptions options_;
};

}  // namespace gpupool::agent::oci
