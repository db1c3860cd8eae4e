#include "agent/config.h"

#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "pool/volumes.h"

namespace gpupool::agent {
namespace {

// Field reader that turns yaml-cpp nodes into typed values with located errors.
class Reader {
 public:
  explicit Reader(std::string source) : source_(std::move(source)) {}

  Status Error(const YAML::Node& n, const std::string& key, const std::string& msg) const {
    const YAML::Mark m = n.Mark();
    std::string where = source_;
    if (m.line >= 0) where += ":" + std::to_string(m.line + 1) + ":" + std::to_string(m.column + 1);
    return Status::InvalidArgument(where + ": " + key + ": " + msg);
  }

  static std::string Show(const YAML::Node& n) {
    if (n.IsScalar()) return "'" + n.Scalar() + "'";
    if (n.IsSequence()) return "a list";
    if (n.IsMap()) return "a map";
    return "nothing";
  }

  Status String(const YAML::Node& n, const std::string& key, std::string* out) const {
    if (!n.IsScalar()) return Error(n, key, "must be a string, got " + Show(n));
    *out = n.Scalar();
    return Status::Ok();
  }

  Status Int(const YAML::Node& n, const std::string& key, int64_t min, int64_t* out) const {
    int64_t v = 0;
    bool ok = n.IsScalar();
    if (ok) {
      try {
        v = n.as<int64_t>();
      } catch (const YAML::Exception&) {
        ok = false;
      }
    }
    if (!ok) return Error(n, key, "must be an integer, got " + Show(n));
    if (v < min) return Error(n, key, "must be ≥ " + std::to_string(min) + ", got " + n.Scalar());
    *out = v;
    return Status::Ok();
  }

  Status Bool(const YAML::Node& n, const std::string& key, bool* out) const {
    try {
      if (n.IsScalar()) {
        *out = n.as<bool>();
        return Status::Ok();
      }
    } catch (const YAML::Exception&) {
    }
    return Error(n, key, "must be true or false, got " + Show(n));
  }

  Status Double(const YAML::Node& n, const std::string& key, double* out) const {
    try {
      if (n.IsScalar()) {
        *out = n.as<double>();
        return Status::Ok();
      }
    } catch (const YAML::Exception&) {
    }
    return Error(n, key, "must be a number, got " + Show(n));
  }

  Status Map(const YAML::Node& n, const std::string& key) const {
    return n.IsMap() ? Status::Ok() : Error(n, key, "must be a map, got " + Show(n));
  }

 private:
  std::string source_;
};

Status ParseTopology(const Reader& r, const YAML::Node& n, Topology* out) {
  std::string s;
  GPUPOOL_RETURN_IF_ERROR(r.String(n, "topology", &s));
  static const std::map<std::string, Topology> kNames = {{"auto", Topology::kAuto},
                                                         {"nvlink-all", Topology::kNvlinkAll},
                                                         {"nvlink-pairs", Topology::kNvlinkPairs},
                                                         {"pcie-pairs", Topology::kPciePairs},
                                                         {"pcie", Topology::kPcie},
                                                         {"none", Topology::kNone}};
  auto it = kNames.find(s);
  if (it == kNames.end()) {
    return r.Error(n, "topology",
                   "unknown topology '" + s +
                       "' (expected auto, nvlink-all, nvlink-pairs, pcie-pairs, pcie or none)");
  }
  *out = it->second;
  return Status::Ok();
}

Status ParseLink(const Reader& r, const YAML::Node& n, const std::string& key, Link* link) {
  GPUPOOL_RETURN_IF_ERROR(r.Map(n, key));
  for (const auto& kv : n) {
    const std::string k = kv.first.Scalar();
    const std::string full = key + "." + k;
    int64_t v = 0;
    if (k == "a" || k == "b") {
      GPUPOOL_RETURN_IF_ERROR(r.Int(kv.second, full, 0, &v));
      (k == "a" ? link->a : link->b) = static_cast<int32_t>(v);
    } else if (k == "gbps") {
      GPUPOOL_RETURN_IF_ERROR(r.Int(kv.second, full, 0, &v));
      link->bandwidth_gbps = static_cast<int32_t>(v);
    } else if (k == "kind") {
      std::string s;
      GPUPOOL_RETURN_IF_ERROR(r.String(kv.second, full, &s));
      if (s == "nvlink") {
        link->kind = LinkKind::kNvlink;
      } else if (s == "pcie-switch") {
        link->kind = LinkKind::kPcieSwitch;
      } else if (s == "pcie-host") {
        link->kind = LinkKind::kPcieHost;
      } else if (s == "system") {
        link->kind = LinkKind::kSystem;
      } else {
        return r.Error(
            kv.second, full,
            "unknown link kind '" + s + "' (expected nvlink, pcie-switch, pcie-host or system)");
      }
    } else {
      return r.Error(kv.first, full, "unknown key (expected a, b, kind, gbps)");
    }
  }
  if (!n["a"] || !n["b"] || !n["kind"]) return r.Error(n, key, "needs a, b and kind");
  return Status::Ok();
}

Status ParseGpuGroup(const Reader& r, const YAML::Node& n, const std::string& key,
                     const Catalog& models, SimGpuGroup* g) {
  GPUPOOL_RETURN_IF_ERROR(r.Map(n, key));
  YAML::Node mig_node;  // rebound with reset(): operator= on a Node assigns through it
  bool has_mig = false;
  for (const auto& kv : n) {
    const std::string k = kv.first.Scalar();
    const std::string full = key + "." + k;
    if (k == "model") {
      GPUPOOL_RETURN_IF_ERROR(r.String(kv.second, full, &g->model));
      const GpuModel* found = models.Find(g->model);
      if (found == nullptr) {
        std::string known;
        for (const GpuModel& m : models.models()) known += (known.empty() ? "" : ", ") + m.name;
        return r.Error(kv.second, full, "unknown model '" + g->model + "' (known: " + known + ")");
      }
      g->model = found->name;  // an alias ("H100") reports as the catalog's name
    } else if (k == "count") {
      int64_t v = 0;
      GPUPOOL_RETURN_IF_ERROR(r.Int(kv.second, full, 1, &v));
      if (v > 64) return r.Error(kv.second, full, "at most 64 GPUs per entry");
      g->count = static_cast<int32_t>(v);
    } else if (k == "mig") {
      GPUPOOL_RETURN_IF_ERROR(r.Map(kv.second, full));
      mig_node.reset(kv.second);
      has_mig = true;
    } else if (k == "unhealthy") {
      if (!kv.second.IsSequence()) return r.Error(kv.second, full, "must be a list of indexes");
      for (const auto& i : kv.second) {
        int64_t v = 0;
        GPUPOOL_RETURN_IF_ERROR(r.Int(i, full + "[]", 0, &v));
        g->unhealthy.push_back(static_cast<int32_t>(v));
      }
    } else {
      return r.Error(kv.first, full, "unknown key (expected model, count, mig, unhealthy)");
    }
  }
  if (g->model.empty()) return r.Error(n, key + ".model", "is required");
  const GpuModel& spec = *models.Find(g->model);
  for (int32_t u : g->unhealthy) {
    if (u >= g->count) {
      return r.Error(n, key + ".unhealthy", "index " + std::to_string(u) + " ≥ count");
    }
  }
  if (!has_mig) return Status::Ok();
  if (spec.mig_profiles.empty()) {
    return r.Error(mig_node, key + ".mig", "model " + g->model + " does not support MIG");
  }
  for (const auto& kv : mig_node) {
    int64_t idx = 0;
    const std::string full = key + ".mig." + kv.first.Scalar();
    GPUPOOL_RETURN_IF_ERROR(r.Int(kv.first, full, 0, &idx));
    if (idx >= g->count) {
      return r.Error(kv.first, full,
                     "GPU index " + std::to_string(idx) + " ≥ count " + std::to_string(g->count));
    }
    if (!kv.second.IsSequence()) {
      return r.Error(kv.second, full,
                     "must be a list of MIG profiles, e.g. [3g.40gb] ([]: MIG mode, no instance)");
    }
    int32_t slices = 0;
    int64_t vram = 0;
    std::vector<std::string> profiles;
    for (const auto& p : kv.second) {
      std::string name;
      GPUPOOL_RETURN_IF_ERROR(r.String(p, full + "[]", &name));
      const MigProfile* prof = spec.FindMig(name);
      if (prof == nullptr) {
        std::string known;
        for (const MigProfile& m : spec.mig_profiles) known += (known.empty() ? "" : ", ") + m.name;
        return r.Error(
            p, full,
            "'" + name + "' is not a MIG profile of " + spec.name + " (catalog: " + known + ")");
      }
      slices += prof->compute_slices;
      vram += prof->vram_mib;
      profiles.push_back(prof->name);
    }
    if (slices > 7) {
      return r.Error(kv.second, full,
                     "MIG instances use " + std::to_string(slices) + " compute slices, GPU has 7");
    }
    if (vram > spec.vram_mib) {
      return r.Error(kv.second, full,
                     "MIG instances use " + std::to_string(vram) + " MiB, " + g->model + " has " +
                         std::to_string(spec.vram_mib) + " MiB");
    }
    g->mig[static_cast<int32_t>(idx)] = std::move(profiles);
  }
  return Status::Ok();
}

// Parses one simulated-layout key; false in *handled when `k` is not one.
Status ParseSimKey(const Reader& r, const std::string& k, const YAML::Node& v,
                   const Catalog& models, SimLayout* sim, bool* handled) {
  *handled = true;
  if (k == "gpus") {
    if (!v.IsSequence()) return r.Error(v, k, "must be a list of {model, count, mig}");
    int i = 0;
    for (const auto& g : v) {
      SimGpuGroup group;
      GPUPOOL_RETURN_IF_ERROR(
          ParseGpuGroup(r, g, "gpus[" + std::to_string(i++) + "]", models, &group));
      sim->gpus.push_back(std::move(group));
    }
  } else if (k == "topology") {
    GPUPOOL_RETURN_IF_ERROR(ParseTopology(r, v, &sim->topology));
  } else if (k == "links") {
    if (!v.IsSequence()) return r.Error(v, k, "must be a list of {a, b, kind, gbps}");
    int i = 0;
    for (const auto& l : v) {
      Link link;
      GPUPOOL_RETURN_IF_ERROR(ParseLink(r, l, "links[" + std::to_string(i++) + "]", &link));
      sim->links.push_back(link);
    }
  } else if (k == "sim_seed") {
    int64_t seed = 0;
    GPUPOOL_RETURN_IF_ERROR(r.Int(v, k, 0, &seed));
    sim->seed = static_cast<uint64_t>(seed);
  } else if (k == "sim_device_dir") {
    GPUPOOL_RETURN_IF_ERROR(r.String(v, k, &sim->device_dir));
    if (sim->device_dir.empty() || sim->device_dir[0] != '/') {
      return r.Error(v, k, "must be an absolute path, got '" + sim->device_dir + "'");
    }
  } else {
    *handled = false;
  }
  return Status::Ok();
}

Status ParseStringList(const Reader& r, const YAML::Node& n, const std::string& key,
                       std::vector<std::string>* out) {
  if (!n.IsSequence()) return r.Error(n, key, "must be a list of strings, got " + Reader::Show(n));
  out->clear();
  int i = 0;
  for (const auto& e : n) {
    std::string s;
    GPUPOOL_RETURN_IF_ERROR(r.String(e, key + "[" + std::to_string(i++) + "]", &s));
    out->push_back(s);
  }
  return Status::Ok();
}

// The `nvml:` section: paths the driver decides, so each must be absolute (a library may also be
// a bare soname, found the way dlopen finds it).
Status ParseNvml(const Reader& r, const YAML::Node& v, NvmlOptions* o) {
  const std::string k = "nvml";
  GPUPOOL_RETURN_IF_ERROR(r.Map(v, k));
  for (const auto& kv : v) {
    const std::string sub = kv.first.Scalar();
    const std::string full = k + "." + sub;
    const YAML::Node& n = kv.second;
    std::string* field = sub == "library"    ? &o->library
                         : sub == "dev_dir"  ? &o->dev_dir
                         : sub == "proc_dir" ? &o->proc_dir
                                             : nullptr;
    if (field == nullptr) {
      return r.Error(kv.first, full, "unknown key (expected library, dev_dir, proc_dir)");
    }
    GPUPOOL_RETURN_IF_ERROR(r.String(n, full, field));
    if (field->empty()) return r.Error(n, full, "must not be empty");
    const bool soname = sub == "library" && field->find('/') == std::string::npos;
    if (!soname && (*field)[0] != '/') {
      return r.Error(
          n, full,
          "must be an absolute path" +
              std::string(sub == "library" ? " or a library name (libnvidia-ml.so.1)" : "") +
              ", got '" + *field + "'");
    }
  }
  return Status::Ok();
}

// The `sandbox:` section (docs/sandbox.md).
Status ParseMps(const Reader& r, const YAML::Node& v, MpsOptions* o) {
  const std::string k = "mps";
  GPUPOOL_RETURN_IF_ERROR(r.Map(v, k));
  for (const auto& kv : v) {
    const std::string sub = kv.first.Scalar();
    const std::string full = k + "." + sub;
    const YAML::Node& n = kv.second;
    if (sub == "enabled") {
      GPUPOOL_RETURN_IF_ERROR(r.Bool(n, full, &o->enabled));
    } else if (sub == "control") {
      GPUPOOL_RETURN_IF_ERROR(r.String(n, full, &o->control));
      if (o->control.empty()) return r.Error(n, full, "must not be empty");
    } else if (sub == "dir") {
      GPUPOOL_RETURN_IF_ERROR(r.String(n, full, &o->dir));
      if (o->dir.empty() || o->dir[0] != '/') {
        return r.Error(n, full, "must be an absolute path, got '" + o->dir + "'");
      }
    } else if (sub == "isolation") {
      std::string iso;
      GPUPOOL_RETURN_IF_ERROR(r.String(n, full, &iso));
      if (iso != "device" && iso != "tenant") {
        return r.Error(n, full, "must be device or tenant, got '" + iso + "'");
      }
      o->per_tenant = iso == "tenant";
    } else if (sub == "start_timeout_ms") {
      GPUPOOL_RETURN_IF_ERROR(r.Int(n, full, 100, &o->start_timeout_ms));
    } else {
      return r.Error(kv.first, full,
                     "unknown key (expected enabled, control, dir, isolation, start_timeout_ms)");
    }
  }
  return Status::Ok();
}

Status ParseSlices(const Reader& r, const YAML::Node& v, SliceOptions* o) {
  const std::string k = "gpu_slices";
  GPUPOOL_RETURN_IF_ERROR(r.Map(v, k));
  for (const auto& kv : v) {
    const std::string sub = kv.first.Scalar();
    const std::string full = k + "." + sub;
    const YAML::Node& n = kv.second;
    if (sub == "enabled") {
      GPUPOOL_RETURN_IF_ERROR(r.Bool(n, full, &o->enabled));
    } else if (sub == "library") {
      GPUPOOL_RETURN_IF_ERROR(r.String(n, full, &o->library));
      if (o->library.empty() || o->library[0] != '/') {
        return r.Error(n, full, "must be an absolute path, got '" + o->library + "'");
      }
    } else if (sub == "context_mib") {
      GPUPOOL_RETURN_IF_ERROR(r.Int(n, full, 0, &o->context_mib));
    } else if (sub == "watchdog_nvml") {
      GPUPOOL_RETURN_IF_ERROR(r.String(n, full, &o->watchdog_nvml));
    } else if (sub == "watchdog_interval_ms") {
      GPUPOOL_RETURN_IF_ERROR(r.Int(n, full, 10, &o->watchdog_interval_ms));
    } else {
      return r.Error(kv.first, full,
                     "unknown key (expected enabled, library, context_mib, watchdog_nvml, "
                     "watchdog_interval_ms)");
    }
  }
  return Status::Ok();
}

Status ParseImages(const Reader& r, const YAML::Node& v, ImageOptions* o) {
  const std::string k = "images";
  GPUPOOL_RETURN_IF_ERROR(r.Map(v, k));
  for (const auto& kv : v) {
    const std::string sub = kv.first.Scalar();
    const std::string full = k + "." + sub;
    const YAML::Node& n = kv.second;
    std::string* path = nullptr;
    if (sub == "enabled") {
      GPUPOOL_RETURN_IF_ERROR(r.Bool(n, full, &o->enabled));
    } else if (sub == "tls_verify") {
      GPUPOOL_RETURN_IF_ERROR(r.Bool(n, full, &o->tls_verify));
    } else if (sub == "budget_mib") {
      GPUPOOL_RETURN_IF_ERROR(r.Int(n, full, 0, &o->budget_mib));
    } else if (sub == "tag_ttl_ms") {
      GPUPOOL_RETURN_IF_ERROR(r.Int(n, full, 0, &o->tag_ttl_ms));
    } else if (sub == "runc") {
      GPUPOOL_RETURN_IF_ERROR(r.String(n, full, &o->runc));
    } else if (sub == "dir") {
      path = &o->dir;
    } else if (sub == "shim") {
      path = &o->shim;
    } else if (sub == "seccomp_profile") {
      path = &o->seccomp_profile;
    } else if (sub == "datasets") {
      GPUPOOL_RETURN_IF_ERROR(r.Map(n, full));
      for (const auto& d : n) {
        const std::string name = d.first.Scalar();
        const std::string at = full + "." + name;
        if (Status st = CheckDatasetName(name); !st.ok()) return r.Error(d.first, at, st.message());
        std::string dir;
        GPUPOOL_RETURN_IF_ERROR(r.String(d.second, at, &dir));
        if (dir.empty() || dir[0] != '/') {
          return r.Error(d.second, at, "must be an absolute path, got '" + dir + "'");
        }
        o->datasets[name] = dir;
      }
    } else {
      return r.Error(
          kv.first, full,
          "unknown key (expected enabled, dir, budget_mib, tag_ttl_ms, tls_verify, runc, "
          "shim, seccomp_profile, datasets)");
    }
    if (path != nullptr) {
      GPUPOOL_RETURN_IF_ERROR(r.String(n, full, path));
      if (path->empty() || (*path)[0] != '/') {
        return r.Error(n, full, "must be an absolute path, got '" + *path + "'");
      }
    }
  }
  return Status::Ok();
}

Status ParseNetwork(const Reader& r, const YAML::Node& v, NetworkConfig* o) {
  const std::string k = "network";
  GPUPOOL_RETURN_IF_ERROR(r.Map(v, k));
  for (const auto& kv : v) {
    const std::string sub = kv.first.Scalar();
    const std::string full = k + "." + sub;
    const YAML::Node& n = kv.second;
    if (sub == "isolated") {
      GPUPOOL_RETURN_IF_ERROR(r.Bool(n, full, &o->isolated));
    } else if (sub == "default") {
      std::string mode;
      GPUPOOL_RETURN_IF_ERROR(r.String(n, full, &mode));
      auto m = net::ParseNetworkMode(mode);
      if (!m.ok()) return r.Error(n, full, m.status().message());
      o->default_mode = *m;
    } else if (sub == "subnet") {
      GPUPOOL_RETURN_IF_ERROR(r.String(n, full, &o->options.subnet));
      auto c = net::ParseCidr(o->options.subnet);
      if (!c.ok()) return r.Error(n, full, c.status().message());
      if (c->bits < 8 || c->bits > 24) {
        return r.Error(n, full, "the prefix length must be 8..24 (a /30 per task)");
      }
    } else if (sub == "deny") {
      GPUPOOL_RETURN_IF_ERROR(ParseStringList(r, n, full, &o->options.deny));
      for (const std::string& d : o->options.deny) {
        auto c = net::ParseCidr(d);
        if (!c.ok()) return r.Error(n, full, c.status().message());
      }
    } else if (sub == "dns") {
      GPUPOOL_RETURN_IF_ERROR(ParseStringList(r, n, full, &o->options.dns));
      for (const std::string& d : o->options.dns) {
        auto c = net::ParseCidr(d);
        if (!c.ok() || c->bits != 32 || d.find('/') != std::string::npos) {
          return r.Error(n, full, "'" + d + "': want an IPv4 address");
        }
      }
    } else if (sub == "prefix") {
      // Several agents on one host (simulated fleets, the demo) each need their own names.
      GPUPOOL_RETURN_IF_ERROR(r.String(n, full, &o->options.prefix));
    } else if (sub == "iface") {
      GPUPOOL_RETURN_IF_ERROR(r.String(n, full, &o->options.iface));
    } else if (sub == "published_ports") {
      // "FIRST-LAST": the node's ports isolated tasks' declared ports are published on.
      std::string range;
      GPUPOOL_RETURN_IF_ERROR(r.String(n, full, &range));
      const size_t dash = range.find('-');
      const auto number = [](const std::string& s) {
        return !s.empty() && s.size() <= 5 &&
                       std::all_of(s.begin(), s.end(),
                                   [](unsigned char c) { return std::isdigit(c); })
                   ? std::stoi(s)
                   : -1;
      };
      const int first = dash == std::string::npos ? -1 : number(range.substr(0, dash));
      const int last = dash == std::string::npos ? -1 : number(range.substr(dash + 1));
      if (first < 1 || last > 65535 || last < first) {
        return r.Error(n, full, "'" + range + "': want FIRST-LAST within 1..65535");
      }
      o->options.published_first = first;
      o->options.published_count = last - first + 1;
    } else if (sub == "advertise") {
      GPUPOOL_RETURN_IF_ERROR(r.String(n, full, &o->advertise));
      if (o->advertise.find_first_of(" \t@/") != std::string::npos || o->advertise.size() > 253) {
        return r.Error(n, full, "'" + o->advertise + "': want a host name or address");
      }
    } else {
      return r.Error(kv.first, full,
                     "unknown key (expected isolated, default, subnet, deny, dns, prefix, iface, "
                     "published_ports, advertise)");
    }
  }
  return Status::Ok();
}

Status ParseSandbox(const Reader& r, const YAML::Node& v, sandbox::SandboxOptions* o) {
  const std::string k = "sandbox";
  GPUPOOL_RETURN_IF_ERROR(r.Map(v, k));
  for (const auto& kv : v) {
    const std::string sub = kv.first.Scalar();
    const std::string full = k + "." + sub;
    const YAML::Node& n = kv.second;
    if (sub == "enabled") {
      GPUPOOL_RETURN_IF_ERROR(r.Bool(n, full, &o->enabled));
    } else if (sub == "cgroup_parent") {
      GPUPOOL_RETURN_IF_ERROR(r.String(n, full, &o->cgroup_parent));
      if (o->cgroup_parent.empty() || o->cgroup_parent[0] == '/' ||
          o->cgroup_parent.find("..") != std::string::npos) {
        return r.Error(
            n, full, "must be a relative cgroup path without '..', got '" + o->cgroup_parent + "'");
      }
    } else if (sub == "uid_pool") {
      GPUPOOL_RETURN_IF_ERROR(r.Map(n, full));
      for (const auto& pk : n) {
        const std::string pf = full + "." + pk.first.Scalar();
        if (pk.first.Scalar() == "first") {
          GPUPOOL_RETURN_IF_ERROR(r.Int(pk.second, pf, 1, &o->uid_pool_first));
        } else if (pk.first.Scalar() == "count") {
          GPUPOOL_RETURN_IF_ERROR(r.Int(pk.second, pf, 1, &o->uid_pool_count));
        } else {
          return r.Error(pk.first, pf, "unknown key (expected first, count)");
        }
      }
      if (o->uid_pool_count <= 0 || o->uid_pool_first <= 0) {
        return r.Error(n, full, "needs first and count, e.g. {first: 200000, count: 1000}");
      }
      if (o->uid_pool_first + o->uid_pool_count > 4294967295LL) {
        return r.Error(n, full, "runs past the largest uid");
      }
    } else if (sub == "tenant_users") {
      GPUPOOL_RETURN_IF_ERROR(r.Map(n, full));
      for (const auto& tu : n) {
        std::string user;
        GPUPOOL_RETURN_IF_ERROR(r.String(tu.second, full + "." + tu.first.Scalar(), &user));
        o->tenant_users[tu.first.Scalar()] = user;
      }
    } else if (sub == "pids_max") {
      GPUPOOL_RETURN_IF_ERROR(r.Int(n, full, 0, &o->pids_max));
    } else if (sub == "default_memory_mib") {
      GPUPOOL_RETURN_IF_ERROR(r.Int(n, full, 0, &o->default_memory_mib));
    } else if (sub == "hide") {
      GPUPOOL_RETURN_IF_ERROR(ParseStringList(r, n, full, &o->hide_paths));
    } else if (sub == "private_tmp") {
      // The hand-written launcher's key (issue 25): the OCI runtime gives every task a fresh /tmp.
      return r.Error(kv.first, full,
                     "is no longer used: every task gets a fresh /tmp from the OCI runtime "
                     "(remove the key; docs/sandbox.md)");
    } else if (sub == "host_dirs") {
      GPUPOOL_RETURN_IF_ERROR(ParseStringList(r, n, full, &o->host_dirs));
    } else {
      return r.Error(kv.first, full,
                     "unknown key (expected enabled, cgroup_parent, uid_pool, tenant_users, "
                     "pids_max, default_memory_mib, hide, host_dirs)");
    }
  }
  for (const std::string& p : o->hide_paths) {
    if (p.empty() || p[0] != '/')
      return r.Error(v["hide"], k + ".hide", "'" + p + "' is not absolute");
  }
  for (const std::string& p : o->host_dirs) {
    // The whole host root would undo the point of the skeleton root (oci/rootfs.h).
    if (p.empty() || p[0] != '/' || p == "/" ||
        std::filesystem::path(p).lexically_normal().string() != p) {
      return r.Error(v["host_dirs"], k + ".host_dirs",
                     "'" + p + "' must be an absolute, normalised directory other than /");
    }
  }
  return Status::Ok();
}

Status CheckLinks(const Reader& r, const YAML::Node& root, const SimLayout& sim) {
  int32_t n = 0;
  for (const auto& g : sim.gpus) n += g.count;
  for (size_t i = 0; i < sim.links.size(); ++i) {
    const Link& l = sim.links[i];
    if (l.a >= n || l.b >= n || l.a == l.b) {
      return r.Error(root["links"][i], "links[" + std::to_string(i) + "]",
                     "link " + std::to_string(l.a) + "-" + std::to_string(l.b) +
                         " must join two different GPUs among 0.." + std::to_string(n - 1));
    }
  }
  return Status::Ok();
}

Result<YAML::Node> LoadYaml(const std::string& text, const std::string& source) {
  try {
    YAML::Node root = YAML::Load(text);
    if (!root || root.IsNull()) return YAML::Node(YAML::NodeType::Map);
    return root;
  } catch (const YAML::ParserException& e) {
    return Status::InvalidArgument(source + ":" + std::to_string(e.mark.line + 1) + ":" +
                                   std::to_string(e.mark.column + 1) + ": " + e.msg);
  }
}

Status ParseTop(const Reader& r, const YAML::Node& root, AgentConfig* c) {
  GPUPOOL_RETURN_IF_ERROR(r.Map(root, "(top level)"));
  // The catalog comes first: the GPU layout is checked against it.
  if (root["catalog"]) {
    GPUPOOL_RETURN_IF_ERROR(r.String(root["catalog"], "catalog", &c->catalog));
    Result<Catalog> loaded = Catalog::LoadFile(c->catalog);
    if (!loaded.ok()) return r.Error(root["catalog"], "catalog", loaded.status().message());
    c->models = std::move(loaded).value();
  }
  for (const auto& kv : root) {
    const std::string k = kv.first.Scalar();
    const YAML::Node& v = kv.second;
    bool handled = false;
    GPUPOOL_RETURN_IF_ERROR(ParseSimKey(r, k, v, c->models, &c->sim, &handled));
    if (handled || k == "catalog") continue;
    if (k == "scheduler") {
      GPUPOOL_RETURN_IF_ERROR(r.String(v, k, &c->scheduler));
    } else if (k == "node_name") {
      GPUPOOL_RETURN_IF_ERROR(r.String(v, k, &c->node_name));
    } else if (k == "pool") {
      GPUPOOL_RETURN_IF_ERROR(r.String(v, k, &c->pool));
    } else if (k == "token") {
      if (root["token_file"]) return r.Error(v, k, "set token or token_file, not both");
      GPUPOOL_RETURN_IF_ERROR(r.String(v, k, &c->token));
    } else if (k == "token_file") {
      std::string path;
      GPUPOOL_RETURN_IF_ERROR(r.String(v, k, &path));
      Result<std::string> token = ReadTokenFile(path);
      if (!token.ok()) return r.Error(v, k, token.status().message());
      c->token = std::move(token).value();
      c->token_file = std::move(path);
    } else if (k == "ca_file") {
      GPUPOOL_RETURN_IF_ERROR(r.String(v, k, &c->ca_file));
    } else if (k == "backend") {
      GPUPOOL_RETURN_IF_ERROR(r.String(v, k, &c->backend));
      if (c->backend != "simulated" && c->backend != "nvml") {
        return r.Error(v, k, "unknown backend '" + c->backend + "' (expected simulated or nvml)");
      }
    } else if (k == "data_dir") {
      GPUPOOL_RETURN_IF_ERROR(r.String(v, k, &c->data_dir));
    } else if (k == "log_level") {
      GPUPOOL_RETURN_IF_ERROR(r.String(v, k, &c->log_level));
    } else if (k == "metrics_listen") {
      GPUPOOL_RETURN_IF_ERROR(r.String(v, k, &c->metrics_listen));
      if (Status st = CheckListenAddress(c->metrics_listen); !st.ok()) {
        return r.Error(v, k, st.message());
      }
    } else if (k == "time_slicing") {
      GPUPOOL_RETURN_IF_ERROR(r.Map(v, k));
      for (const auto& e : v) {
        const std::string key = k + "." + e.first.Scalar();
        int64_t slots = 0;
        GPUPOOL_RETURN_IF_ERROR(r.Int(e.second, key, 1, &slots));
        if (slots > kMaxTimeSliceSlots) {
          return r.Error(
              e.second, key,
              "must be ≤ " + std::to_string(kMaxTimeSliceSlots) + ", got " + e.second.Scalar());
        }
        c->time_slicing[e.first.Scalar()] = static_cast<int32_t>(slots);
      }
    } else if (k == "labels") {
      GPUPOOL_RETURN_IF_ERROR(r.Map(v, k));
      for (const auto& l : v) {
        std::string val;
        GPUPOOL_RETURN_IF_ERROR(r.String(l.second, k + "." + l.first.Scalar(), &val));
        c->labels[l.first.Scalar()] = val;
      }
    } else if (k == "cpu_milli") {
      GPUPOOL_RETURN_IF_ERROR(r.Int(v, k, 0, &c->cpu_milli));
    } else if (k == "memory_mib") {
      GPUPOOL_RETURN_IF_ERROR(r.Int(v, k, 0, &c->memory_mib));
    } else if (k == "spill_budget_mib") {
      GPUPOOL_RETURN_IF_ERROR(r.Int(v, k, 0, &c->spill_budget_mib));
    } else if (k == "heartbeat_interval_ms") {
      GPUPOOL_RETURN_IF_ERROR(r.Int(v, k, 10, &c->heartbeat_interval_ms));
    } else if (k == "stop_grace_period_ms") {
      GPUPOOL_RETURN_IF_ERROR(r.Int(v, k, 0, &c->stop_grace_period_ms));
    } else if (k == "output_tail_bytes") {
      GPUPOOL_RETURN_IF_ERROR(r.Int(v, k, 0, &c->output_tail_bytes));
    } else if (k == "keepalive_ms") {
      GPUPOOL_RETURN_IF_ERROR(r.Int(v, k, 0, &c->keepalive_ms));
    } else if (k == "stop_tasks_on_shutdown") {
      GPUPOOL_RETURN_IF_ERROR(r.Bool(v, k, &c->stop_tasks_on_shutdown));
    } else if (k == "vram_scrub") {
      GPUPOOL_RETURN_IF_ERROR(r.Bool(v, k, &c->vram_scrub));
    } else if (k == "health_poll_ms") {
      GPUPOOL_RETURN_IF_ERROR(r.Int(v, k, 10, &c->health_poll_ms));
    } else if (k == "sim_vram_mib") {
      GPUPOOL_RETURN_IF_ERROR(r.Int(v, k, 1, &c->sim_vram_mib));
    } else if (k == "sandbox") {
      GPUPOOL_RETURN_IF_ERROR(ParseSandbox(r, v, &c->sandbox));
    } else if (k == "mps") {
      GPUPOOL_RETURN_IF_ERROR(ParseMps(r, v, &c->mps));
    } else if (k == "nvml") {
      GPUPOOL_RETURN_IF_ERROR(ParseNvml(r, v, &c->nvml));
    } else if (k == "gpu_slices") {
      GPUPOOL_RETURN_IF_ERROR(ParseSlices(r, v, &c->gpu_slices));
    } else if (k == "images") {
      GPUPOOL_RETURN_IF_ERROR(ParseImages(r, v, &c->images));
    } else if (k == "network") {
      GPUPOOL_RETURN_IF_ERROR(ParseNetwork(r, v, &c->network));
    } else if (k == "reconnect") {
      GPUPOOL_RETURN_IF_ERROR(r.Map(v, k));
      for (const auto& rk : v) {
        const std::string sub = rk.first.Scalar();
        if (sub == "initial_ms") {
          GPUPOOL_RETURN_IF_ERROR(r.Int(rk.second, k + "." + sub, 1, &c->reconnect.initial_ms));
        } else if (sub == "max_ms") {
          GPUPOOL_RETURN_IF_ERROR(r.Int(rk.second, k + "." + sub, 1, &c->reconnect.max_ms));
        } else if (sub == "jitter") {
          GPUPOOL_RETURN_IF_ERROR(r.Double(rk.second, k + "." + sub, &c->reconnect.jitter));
          if (c->reconnect.jitter < 0 || c->reconnect.jitter > 1) {
            return r.Error(rk.second, k + "." + sub, "must be between 0 and 1");
          }
        } else {
          return r.Error(rk.first, k + "." + sub,
                         "unknown key (expected initial_ms, max_ms, jitter)");
        }
      }
    } else {
      return r.Error(kv.first, k, "unknown key (see docs/agent.md for the reference)");
    }
  }
  return CheckLinks(r, root, c->sim);
}

}  // namespace

const char* TopologyName(Topology t) {
  switch (t) {
    case Topology::kAuto:
      return "auto";
    case Topology::kNvlinkAll:
      return "nvlink-all";
    case Topology::kNvlinkPairs:
      return "nvlink-pairs";
    case Topology::kPciePairs:
      return "pcie-pairs";
    case Topology::kPcie:
      return "pcie";
    case Topology::kNone:
      return "none";
  }
  return "?";
}

Result<AgentConfig> ParseAgentConfig(const std::string& yaml, const std::string& source) {
  GPUPOOL_ASSIGN_OR_RETURN(YAML::Node root, LoadYaml(yaml, source));
  AgentConfig c;
  c.source = source;
  Reader r(source);
  GPUPOOL_RETURN_IF_ERROR(ParseTop(r, root, &c));
  return c;
}

Result<std::string> ReadTokenFile(const std::string& path) {
  // A regular file of at most 4 KiB: never a device or a pipe that reads forever.
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    return Status::NotFound(path + ": cannot read the token file (not a regular file)");
  }
  std::ifstream in(path);
  if (!in) return Status::NotFound(path + ": cannot read the token file");
  std::string token(4096, '\0');
  in.read(token.data(), static_cast<std::streamsize>(token.size()));
  token.resize(static_cast<size_t>(in.gcount()));
  const auto space = [](char ch) { return ch == ' ' || ch == '\t' || ch == '\r' || ch == '\n'; };
  while (!token.empty() && space(token.back())) token.pop_back();
  size_t start = 0;
  while (start < token.size() && space(token[start])) ++start;
  token.erase(0, start);
  if (token.empty()) return Status::InvalidArgument(path + ": the token file is empty");
  if (token.find('\n') != std::string::npos) {
    return Status::InvalidArgument(path + ": the token file must hold one line");
  }
  return token;
}

Result<AgentConfig> LoadAgentConfigFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::NotFound(path + ": cannot open config file");
  std::stringstream ss;
  ss << in.rdbuf();
  return ParseAgentConfig(ss.str(), path);
}

Result<SimLayout> ParseSimLayout(const std::string& yaml, const Catalog& models,
                                 const std::string& source) {
  GPUPOOL_ASSIGN_OR_RETURN(YAML::Node root, LoadYaml(yaml, source));
  Reader r(source);
  GPUPOOL_RETURN_IF_ERROR(r.Map(root, "(top level)"));
  SimLayout sim;
  for (const auto& kv : root) {
    bool handled = false;
    GPUPOOL_RETURN_IF_ERROR(ParseSimKey(r, kv.first.Scalar(), kv.second, models, &sim, &handled));
    if (!handled) {
      return r.Error(kv.first, kv.first.Scalar(),
                     "unknown key (expected gpus, topology, links, sim_seed, sim_device_dir)");
    }
  }
  GPUPOOL_RETURN_IF_ERROR(CheckLinks(r, root, sim));
  return sim;
}

Status CheckListenAddress(const std::string& address) {
  if (address.empty()) return Status::Ok();  // off
  const size_t colon = address.rfind(':');
  const std::string port = colon == std::string::npos ? "" : address.substr(colon + 1);
  const bool digits = !port.empty() && port.size() <= 5 &&
                      port.find_first_not_of("0123456789") == std::string::npos;
  if (colon == 0 || !digits || std::stoi(port) < 1 || std::stoi(port) > 65535) {
    return Status::InvalidArgument("'" + address +
                                   "' is not HOST:PORT with a port 1..65535, e.g. 0.0.0.0:9400");
  }
  return Status::Ok();
}

Status ValidateAgentConfig(AgentConfig* c) {
  auto bad = [&](const std::string& key, const std::string& msg) {
    return Status::InvalidArgument(c->source + ": " + key + ": " + msg);
  };
  if (c->node_name.empty()) {
    char host[256] = {};
    if (gethostname(host, sizeof(host) - 1) != 0 || host[0] == '\0') {
      return bad("node_name", "is required (the host name could not be read)");
    }
    c->node_name = host;
  }
  if (c->scheduler.empty()) return bad("scheduler", "is required, e.g. 127.0.0.1:7070");
  if (c->pool.empty()) return bad("pool", "is required");
  if (Status st = CheckListenAddress(c->metrics_listen); !st.ok()) {
    return bad("metrics_listen", st.message());
  }
  if (c->data_dir.empty()) return bad("data_dir", "is required");
  if (c->backend != "simulated" && c->backend != "nvml") {
    return bad("backend", "unknown backend '" + c->backend + "' (expected simulated or nvml)");
  }
  if (c->backend == "simulated" && c->sim.gpus.empty()) {
    return bad("gpus",
               "backend simulated needs at least one entry, e.g. "
               "gpus: [{model: H100-SXM, count: 8}]");
  }
  if (c->sandbox.enabled && c->sandbox.uid_pool_count <= 0 && c->sandbox.tenant_users.empty()) {
    return bad("sandbox",
               "enabled needs sandbox.uid_pool (e.g. {first: 200000, count: 1000}) or "
               "sandbox.tenant_users");
  }
  if (c->sandbox.enabled && !c->images.enabled) {
    // One sandbox path (issue 25): tasks are confined by the OCI runtime the images section runs.
    return bad("images.enabled",
               "false leaves the sandbox nothing to confine tasks with: sandbox.enabled needs "
               "images.enabled (the OCI runtime is the sandbox; docs/sandbox.md)");
  }
  if (c->vram_scrub && c->backend == "simulated" && c->sim.device_dir.empty()) {
    return bad("vram_scrub",
               "with backend simulated needs sim_device_dir (the simulated VRAM files live there)");
  }
  if (c->reconnect.max_ms < c->reconnect.initial_ms) {
    return bad("reconnect.max_ms", "must be ≥ reconnect.initial_ms");
  }
  if (c->cpu_milli == 0) {
    c->cpu_milli = static_cast<int64_t>(std::max(1u, std::thread::hardware_concurrency())) * 1000;
  }
  if (c->memory_mib == 0) {
    const long pages = sysconf(_SC_PHYS_PAGES);
    const long page = sysconf(_SC_PAGESIZE);
    if (pages > 0 && page > 0) {
      c->memory_mib = static_cast<int64_t>(pages) * page / (1024 * 1024);
    }
  }
  return Status::Ok();
}

Status ApplyTimeSlicing(const std::map<std::string, int32_t>& time_slicing,
                        std::vector<Device>* devices) {
  for (Device& d : *devices) d.time_slice_slots = 0;
  for (const auto& [key, slots] : time_slicing) {
    Device* match = nullptr;
    for (Device& d : *devices) {
      const bool by_index = d.mig_profile.empty() && std::to_string(d.index) == key;
      if (by_index || d.uuid == key) {
        match = &d;
        break;
      }
    }
    if (match == nullptr) {
      return Status::InvalidArgument("time_slicing." + key +
                                     ": no GPU of that index or device of that UUID on this node");
    }
    for (const Device& d : *devices) {
      if (!d.parent_uuid.empty() && d.parent_uuid == match->uuid) {
        return Status::InvalidArgument("time_slicing." + key + ": GPU " + match->uuid +
                                       " is partitioned into MIG instances; slice an instance "
                                       "(by its UUID, e.g. " +
                                       d.uuid + ") instead");
      }
    }
    match->time_slice_slots = slots;
  }
  return Status::Ok();
}

}  // namespace gpupool::agent
