// OrgTree (org_tree.h): the default tree, the YAML parser and the pod → tenant hash.
#include "twin/org_tree.h"

#include <algorithm>
#include <functional>

#include "pool/yaml_error.h"
#include "scheduler/tenancy.h"

namespace gpupool::twin {
namespace {

uint64_t Fnv1a(std::string_view s) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return h;
}

std::string ParentOf(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? "" : path.substr(0, slash);
}

// The checks shared by the default tree and a parsed one; `at` names an entry for messages.
Status Check(const OrgTree& tree, const std::function<std::string(size_t)>& at) {
  std::map<std::string, size_t> index;
  std::map<std::string, int64_t> child_guarantees;
  for (size_t i = 0; i < tree.tenants.size(); ++i) {
    const OrgTenant& t = tree.tenants[i];
    GPUPOOL_RETURN_IF_ERROR(ValidateTenantPath(t.path, at(i) + "path"));
    if (index.contains(t.path))
      return Status::InvalidArgument(at(i) + "path: '" + t.path + "' is listed twice");
    std::string parent = ParentOf(t.path);
    if (!parent.empty() && !index.contains(parent)) {
      return Status::InvalidArgument(at(i) + "path: parent '" + parent + "' of '" + t.path +
                                     "' must be listed before it");
    }
    if (t.limit_pct_milli > 0 && t.guaranteed_pct_milli > t.limit_pct_milli) {
      return Status::InvalidArgument(at(i) + "guaranteed_pct: above limit_pct of '" + t.path + "'");
    }
    index[t.path] = i;
  }
  // The nearest quota'd ancestor's guarantee bounds its quota'd descendants' sum.
  for (const OrgTenant& t : tree.tenants) {
    if (t.guaranteed_pct_milli == 0) continue;
    for (std::string p = ParentOf(t.path); !p.empty(); p = ParentOf(p)) {
      const OrgTenant& up = tree.tenants[index[p]];
      if (!up.HasQuota()) continue;
      child_guarantees[p] += t.guaranteed_pct_milli;
      if (up.guaranteed_pct_milli > 0 && child_guarantees[p] > up.guaranteed_pct_milli) {
        return Status::InvalidArgument(at(index[t.path]) +
                                       "guaranteed_pct: the guarantees below '" + p +
                                       "' sum above its own");
      }
      break;
    }
  }
  int64_t top = 0;
  for (const OrgTenant& t : tree.tenants)
    if (t.guaranteed_pct_milli > 0 && tree.GroupOf(ParentOf(t.path)).empty())
      top += t.guaranteed_pct_milli;
  if (top > 100'000) return Status::InvalidArgument("tenants: top-level guarantees sum above 100%");
  int64_t weight = 0;
  for (const OrgTenant* leaf : tree.Leaves()) weight += leaf->weight;
  if (weight <= 0) return Status::InvalidArgument("tenants: no leaf tenant with a positive weight");
  return Status::Ok();
}

}  // namespace

std::vector<const OrgTenant*> OrgTree::Leaves() const {
  std::vector<const OrgTenant*> out;
  for (const OrgTenant& t : tenants) {
    bool has_child = std::any_of(tenants.begin(), tenants.end(),
                                 [&](const OrgTenant& c) { return ParentOf(c.path) == t.path; });
    if (!has_child) out.push_back(&t);
  }
  return out;
}

const std::string& OrgTree::PickTenant(std::string_view name) const {
  std::vector<const OrgTenant*> leaves = Leaves();
  int64_t total = 0;
  for (const OrgTenant* l : leaves) total += l->weight;
  auto x = static_cast<int64_t>(Fnv1a(name) % static_cast<uint64_t>(total));
  for (const OrgTenant* l : leaves) {
    if (x < l->weight) return l->path;
    x -= l->weight;
  }
  return leaves.back()->path;
}

std::string OrgTree::ClassOf(const std::string& qos) const {
  auto it = qos_classes.find(qos);
  return it == qos_classes.end() ? default_class : it->second;
}

const OrgTenant* OrgTree::Find(const std::string& path) const {
  for (const OrgTenant& t : tenants)
    if (t.path == path) return &t;
  return nullptr;
}

std::string OrgTree::GroupOf(const std::string& path) const {
  for (std::string p = path; !p.empty(); p = ParentOf(p)) {
    const OrgTenant* t = Find(p);
    if (t != nullptr && t->HasQuota()) return p;
  }
  return "";
}

OrgTree DefaultOrgTree() {
  OrgTree tree;
  struct Org {
    const char* name;
    int64_t guaranteed, limit;
    const char* teams[2];
    int64_t weights[2];
  };
  // Guarantees sum to 75 % of the pool, as an operator sets them: a pool promised whole cannot
  // be packed whole (fragmentation), and the quarter left over is what groups borrow, beyond
  // their guarantee, up to their limits.
  static constexpr Org kOrgs[] = {
      {"search", 30, 100, {"web", "ads"}, {25, 15}},
      {"vision", 22, 90, {"detect", "train"}, {20, 10}},
      {"speech", 15, 80, {"asr", "tts"}, {12, 8}},
      {"research", 8, 60, {"alice", "bob"}, {5, 5}},
  };
  for (const Org& o : kOrgs) {
    tree.tenants.push_back({o.name, o.guaranteed * 1000, o.limit * 1000, 0});
    for (int i = 0; i < 2; ++i)
      tree.tenants.push_back({std::string(o.name) + "/" + o.teams[i], 0, 0, o.weights[i]});
  }
  tree.qos_classes = {
      {"LS", "high"}, {"Guaranteed", "high"}, {"Burstable", "normal"}, {"BE", "low"}};
  tree.default_class = "normal";
  return tree;
}

Result<OrgTree> ParseOrgTree(std::string_view yaml, const std::string& source) {
  GPUPOOL_ASSIGN_OR_RETURN(YAML::Node root, ParseYaml(yaml, source));
  YamlDoc doc{source};
  GPUPOOL_RETURN_IF_ERROR(doc.RequireMap(root, YamlPath{}));
  GPUPOOL_RETURN_IF_ERROR(
      doc.CheckKeys(root, YamlPath{}, {"tenants", "qos_classes", "default_class"}));
  OrgTree tree;
  YamlPath tp = YamlPath{}.Key("tenants");
  YAML::Node list = root["tenants"];
  if (!list) return doc.Error(root, tp, "missing required key");
  GPUPOOL_RETURN_IF_ERROR(doc.RequireSequence(list, tp));
  std::vector<YAML::Node> entries;
  for (size_t i = 0; i < list.size(); ++i) {
    YAML::Node e = list[i];
    YamlPath at = tp.Index(i);
    GPUPOOL_RETURN_IF_ERROR(doc.RequireMap(e, at));
    GPUPOOL_RETURN_IF_ERROR(
        doc.CheckKeys(e, at, {"path", "guaranteed_pct", "limit_pct", "weight"}));
    OrgTenant t;
    GPUPOOL_ASSIGN_OR_RETURN(t.path, doc.String(e, at, "path"));
    if (e["guaranteed_pct"]) {
      GPUPOOL_ASSIGN_OR_RETURN(t.guaranteed_pct_milli,
                               doc.Milli(e, at, "guaranteed_pct", 0, 100'000));
    }
    if (e["limit_pct"]) {
      GPUPOOL_ASSIGN_OR_RETURN(t.limit_pct_milli, doc.Milli(e, at, "limit_pct", 0, 100'000));
    }
    if (e["weight"]) {
      GPUPOOL_ASSIGN_OR_RETURN(t.weight, doc.Int(e, at, "weight", 0, 1'000'000));
    }
    tree.tenants.push_back(std::move(t));
    entries.push_back(e);
  }
  if (YAML::Node q = root["qos_classes"]) {
    YamlPath qp = YamlPath{}.Key("qos_classes");
    GPUPOOL_RETURN_IF_ERROR(doc.RequireMap(q, qp));
    for (const auto& kv : q) {
      std::string key = kv.first.as<std::string>();
      GPUPOOL_ASSIGN_OR_RETURN(std::string cls, doc.String(q, qp, key));
      tree.qos_classes[key] = cls;
    }
  } else {
    tree.qos_classes = DefaultOrgTree().qos_classes;
  }
  if (root["default_class"]) {
    GPUPOOL_ASSIGN_OR_RETURN(tree.default_class, doc.String(root, YamlPath{}, "default_class"));
  }
  GPUPOOL_RETURN_IF_ERROR(Check(tree, [&](size_t i) {
    return source + ":" + std::to_string(entries[i].Mark().line + 1) + ": " + tp.Index(i).str() +
           ".";
  }));
  return tree;
}

Result<OrgTree> LoadOrgTree(const std::string& path) {
  GPUPOOL_ASSIGN_OR_RETURN(std::string text, ReadTextFile(path));
  return ParseOrgTree(text, path);
}

}  // namespace gpupool::twin
