// ServiceImpl's catalog methods: what the server knows of GPU models, priority classes and SKUs.
//
// Anyone authenticated may call them. What a tenant sees is cut to what it may use: the fleet
// counts of ListGpuModels cover the pools visible to it (a private pool's hardware is its owners'
// business), and ListPriorityClasses shows the classes it may submit at.
#include <algorithm>
#include <map>
#include <set>

#include "api/service_internal.h"
#include "pool/catalog.h"
#include "scheduler/scheduler.h"

namespace gpupool::api {
namespace {

struct FleetCount {
  int32_t devices = 0;
  std::set<std::string> nodes;
};

// Devices per model over the nodes of the pools the caller may use. A MIG instance's model is its
// parent's, so the instances of one GPU count once each (the catalog lists models, not slices).
std::map<std::string, FleetCount> CountFleet(const CallContext& ctx,
                                             const std::vector<PoolView>& pools,
                                             const std::vector<NodeView>& nodes) {
  std::set<std::string> visible;
  for (const PoolView& p : pools) {
    if (PoolVisible(ctx, p.pool)) visible.insert(p.pool.name);
  }
  std::map<std::string, FleetCount> out;
  for (const NodeView& n : nodes) {
    if (!visible.contains(n.node.pool)) continue;
    for (const DeviceView& d : n.devices) {
      FleetCount& c = out[d.device.model];
      ++c.devices;
      c.nodes.insert(n.node.name);
    }
  }
  return out;
}

}  // namespace

void ServiceImpl::ListGpuModels(const CallContext& ctx, const v1::ListGpuModelsRequest&,
                                Reply<v1::ListGpuModelsResponse> done) {
  // Two reads of the scheduler, pools then nodes: a node that joins in between is counted only
  // if its pool was already visible, which is what a caller would see anyway.
  admin_->ListPools([admin = admin_, catalog = options_.catalog, ctx,
                     done = std::move(done)](std::vector<PoolView> pools) mutable {
    admin->ListNodes("", [pools = std::move(pools), catalog, ctx,
                          done = std::move(done)](std::vector<NodeView> nodes) {
      const std::map<std::string, FleetCount> fleet = CountFleet(ctx, pools, nodes);
      v1::ListGpuModelsResponse resp;
      for (const GpuModel& m : catalog->models()) {
        v1::GpuModel* out = resp.add_models();
        ToProto(m, out);
        if (auto it = fleet.find(m.name); it != fleet.end()) {
          out->set_fleet_devices(it->second.devices);
          out->set_fleet_nodes(static_cast<int32_t>(it->second.nodes.size()));
        }
      }
      done(Status::Ok(), std::move(resp));
    });
  });
}

void ServiceImpl::ListPriorityClasses(const CallContext& ctx,
                                      const v1::ListPriorityClassesRequest& req,
                                      Reply<v1::ListPriorityClassesResponse> done) {
  std::string tenant = req.tenant();
  if (!tenant.empty()) {
    if (Status s = ValidateTenantPath(tenant, "tenant"); !s.ok()) return Fail(done, s);
    if (Status s = RequireTenant(ctx, tenant, "tenant"); !s.ok()) return Fail(done, s);
  } else if (!ctx.admin()) {
    tenant = ctx.scope;  // a tenant sees what it may use
  }
  const std::shared_ptr<const ServicePolicy> policy = this->policy();
  const SchedulerOptions& opts = policy->scheduler;
  // An admin asking for no tenant sees every class; otherwise the tenant's list.
  const bool all = tenant.empty();
  const std::set<std::string> allowed =
      all ? std::set<std::string>{} : policy->access.Allowed(tenant);
  std::vector<const PriorityClass*> shown;
  for (const auto& [name, cls] : opts.priority_classes) {
    if (all || allowed.contains(name)) shown.push_back(&cls);
  }
  std::sort(shown.begin(), shown.end(), [](const PriorityClass* a, const PriorityClass* b) {
    return a->value != b->value ? a->value > b->value : a->name < b->name;
  });
  v1::ListPriorityClassesResponse resp;
  for (const PriorityClass* c : shown) {
    v1::PriorityClass* out = resp.add_priority_classes();
    out->set_name(c->name);
    out->set_value(c->value);
    out->set_preemptible(c->preemptible);
    out->set_may_preempt(c->may_preempt);
    out->set_min_runtime_ms(c->min_runtime_ms);
    out->set_is_default(c->name == opts.default_priority_class);
  }
  resp.set_default_class(opts.default_priority_class);
  done(Status::Ok(), std::move(resp));
}

void ServiceImpl::ListSkus(const CallContext&, const v1::ListSkusRequest&,
                           Reply<v1::ListSkusResponse> done) {
  const std::shared_ptr<const ServicePolicy> policy = this->policy();
  v1::ListSkusResponse resp;
  for (const auto& [name, sku] : policy->scheduler.skus) {  // a std::map: sorted by name
    v1::Sku* out = resp.add_skus();
    out->set_name(name);
    ToProto(sku.request, out->mutable_request());
  }
  done(Status::Ok(), std::move(resp));
}

}  // namespace gpupool::api
