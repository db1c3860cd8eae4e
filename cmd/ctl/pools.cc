// pools create|get|list|update|delete.
#include <cstdio>

#include "cmd/ctl/app.h"
#include "cmd/ctl/requests.h"
#include "cmd/ctl/units.h"
#include "gpupool/v1/pools.grpc.pb.h"
#include "pool/resources.h"

namespace gpupool::ctl {

namespace {

std::string Visibility(const v1::Pool& p) {
  return ShortEnumName(v1::Visibility_Name(p.visibility()), "VISIBILITY_");
}

std::string Sharing(const v1::Pool& p) {
  std::string s = ShortEnumName(v1::SharingMode_Name(p.sharing_mode()), "SHARING_MODE_");
  if (p.sharing_mode() == v1::SHARING_MODE_TIME_SLICED) {
    s += " x" + std::to_string(p.time_slice_replicas());
  }
  return s;
}

std::string Network(const v1::Pool& p) {
  if (p.network() == v1::NETWORK_MODE_UNSPECIFIED) return "each node's default";
  return ShortEnumName(v1::NetworkMode_Name(p.network()), "NETWORK_MODE_");
}

std::string MigRelayoutText(const v1::Pool& p) {
  switch (p.mig_relayout()) {
    case v1::MIG_RELAYOUT_IDLE:
      return "idle GPUs follow waiting MIG work";
    case v1::MIG_RELAYOUT_DRAIN:
      return "idle GPUs, then one drained GPU at a time, follow waiting MIG work";
    default:
      return "off (admins set layouts)";
  }
}

std::string Ratio(double r) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2g", r == 0 ? 1.0 : r);
  std::string s = buf;
  if (s.find('.') == std::string::npos) s += ".0";
  return s;
}

// "47.1%  2 GPUs (A100|H100), cpu 16, mem 64GiB"; "(prior)" for a class not observed yet.
std::string LearnedClass(const v1::LearnedClass& c) {
  char pct[16];
  std::snprintf(pct, sizeof pct, "%.1f%%  ", 100 * c.share());
  std::string s = pct;
  const v1::ResourceRequest& r = c.shape();
  if (c.share_milli() > 0) {
    s += "share " + FormatTflops(c.share_milli()) + " of a GPU";
  } else if (r.has_fractional()) {
    s += FormatTflops(r.fractional().milli_tflops()) + " TFLOPS + " +
         FormatMib(r.fractional().vram_mib()) + " VRAM";
  } else if (r.has_whole_gpus()) {
    s += std::to_string(r.whole_gpus().count()) + (r.whole_gpus().count() == 1 ? " GPU" : " GPUs");
    std::string models;
    for (const std::string& m : r.whole_gpus().models()) models += (models.empty() ? "" : "|") + m;
    if (!models.empty()) s += " (" + models + ")";
  } else if (r.has_mig()) {
    s += "MIG " + r.mig().profile();
  } else {
    s += "CPU only";
  }
  s += ", cpu " + FormatTflops(r.cpu_milli()) + ", mem " + FormatMib(r.memory_mib());
  if (c.prior()) s += "  (prior)";
  return s;
}

// "a, b" for `items`, or `none` when there are none.
template <typename Items>
std::string Joined(const Items& items, const std::string& none) {
  std::string out;
  for (const std::string& s : items) out += (out.empty() ? "" : ", ") + s;
  return out.empty() ? none : out;
}

void PrintPool(std::ostream& out, const v1::Pool& p) {
  const v1::Capacity& c = p.capacity();
  std::string allowed;
  for (const std::string& t : p.allowed_tenants()) allowed += (allowed.empty() ? "" : ", ") + t;
  std::vector<std::pair<std::string, std::string>> learned;
  if (p.learned_classes_size() > 0) {
    learned.emplace_back("Learned workload",
                         std::to_string(p.learned_tasks()) + " task(s) observed; top classes:");
    for (int i = 0; i < p.learned_classes_size(); ++i)
      learned.emplace_back("  #" + std::to_string(i + 1), LearnedClass(p.learned_classes(i)));
  }
  PrintFields(
      out,
      {
          {"Name", p.name()},
          {"Visibility", Visibility(p)},
          {"Allowed tenants", allowed.empty() ? "-" : allowed},
          {"Strategy",
           p.placement_strategy().empty() ? "(server default)" : p.placement_strategy()},
          {"Overcommit", "compute " + Ratio(p.compute_overcommit()) + "x, memory " +
                             Ratio(p.memory_overcommit()) + "x"},
          {"Sharing", Sharing(p)},
          {"MPS isolation", p.mps_tenant_isolation() ? "per tenant per GPU" : "per GPU"},
          {"Compute share", p.compute_fair() ? "fair (bursts into idle GPU time)" : "strict cap"},
          {"Network", Network(p)},
          {"MIG re-layout", MigRelayoutText(p)},
          {"Pinned images", Joined(p.pinned_images(), "-")},
          {"Requires",
           p.required_capabilities().empty()
               ? std::string("- (any node takes shared work)")
               : Joined(p.required_capabilities(), "") + " (of nodes taking shared work)"},
          {"Nodes", std::to_string(c.nodes())},
          {"Devices", std::to_string(c.devices())},
          {"TFLOPS", FormatUsedOf(c.allocated().milli_tflops(), c.offered().milli_tflops()) +
                         " allocated/offered (physical " +
                         FormatTflops(c.physical().milli_tflops()) + ")"},
          {"VRAM", FormatMib(c.allocated().vram_mib()) + "/" + FormatMib(c.offered().vram_mib()) +
                       " allocated/offered (physical " + FormatMib(c.physical().vram_mib()) + ")"},
          {"Created", FormatTime(p.create_time())},
      });
  if (!learned.empty()) PrintFields(out, learned);
}

int Output(Ctx& ctx, const v1::Pool& pool) {
  if (ctx.format != OutputFormat::kTable) {
    PrintMessage(ctx.out, pool, ctx.format);
  } else {
    PrintPool(ctx.out, pool);
  }
  return kExitOk;
}

int Create(Ctx& ctx, const ParsedArgs& a) {
  v1::CreatePoolRequest req;
  req.mutable_pool()->set_name(a.positional[0]);
  std::vector<std::string> mask;
  if (Status st = ApplyPoolFlags(a, req.mutable_pool(), &mask); !st.ok()) {
    return ctx.Usage(st.message());
  }
  v1::Pool pool;
  auto call = ctx.NewCall();
  grpc::Status s = v1::PoolService::NewStub(ctx.channel())->CreatePool(call.get(), req, &pool);
  if (!s.ok()) return ctx.Fail(s);
  if (ctx.format == OutputFormat::kTable) {
    ctx.out << "pool " << pool.name() << " created\n";
    return kExitOk;
  }
  return Output(ctx, pool);
}

int Get(Ctx& ctx, const ParsedArgs& a) {
  v1::GetPoolRequest req;
  req.set_name(a.positional[0]);
  v1::Pool pool;
  auto call = ctx.NewCall();
  grpc::Status s = v1::PoolService::NewStub(ctx.channel())->GetPool(call.get(), req, &pool);
  if (!s.ok()) return ctx.Fail(s);
  return Output(ctx, pool);
}

int List(Ctx& ctx, const ParsedArgs&) {
  v1::ListPoolsResponse resp;
  auto call = ctx.NewCall();
  grpc::Status s =
      v1::PoolService::NewStub(ctx.channel())->ListPools(call.get(), v1::ListPoolsRequest(), &resp);
  if (!s.ok()) return ctx.Fail(s);
  if (ctx.format != OutputFormat::kTable) {
    PrintMessage(ctx.out, resp, ctx.format);
    return kExitOk;
  }
  if (resp.pools_size() == 0) {
    ctx.err << "no pools\n";
    return kExitOk;
  }
  Table t({"NAME", "VISIBILITY", "STRATEGY", "SHARING", "OVERCOMMIT", "NODES", "DEVICES", "TFLOPS",
           "VRAM"});
  for (const v1::Pool& p : resp.pools()) {
    const v1::Capacity& c = p.capacity();
    t.AddRow({p.name(), Visibility(p),
              p.placement_strategy().empty() ? "-" : p.placement_strategy(), Sharing(p),
              Ratio(p.compute_overcommit()) + "/" + Ratio(p.memory_overcommit()),
              std::to_string(c.nodes()), std::to_string(c.devices()),
              FormatUsedOf(c.allocated().milli_tflops(), c.offered().milli_tflops()),
              FormatMib(c.allocated().vram_mib()) + "/" + FormatMib(c.offered().vram_mib())});
  }
  t.Print(ctx.out);
  return kExitOk;
}

int Update(Ctx& ctx, const ParsedArgs& a) {
  v1::UpdatePoolRequest req;
  req.mutable_pool()->set_name(a.positional[0]);
  std::vector<std::string> mask;
  if (Status st = ApplyPoolFlags(a, req.mutable_pool(), &mask); !st.ok()) {
    return ctx.Usage(st.message());
  }
  if (mask.empty()) return ctx.Usage("nothing to update: give at least one pool flag");
  for (const std::string& path : mask) req.mutable_update_mask()->add_paths(path);
  v1::Pool pool;
  auto call = ctx.NewCall();
  grpc::Status s = v1::PoolService::NewStub(ctx.channel())->UpdatePool(call.get(), req, &pool);
  if (!s.ok()) return ctx.Fail(s);
  return Output(ctx, pool);
}

int Delete(Ctx& ctx, const ParsedArgs& a) {
  v1::DeletePoolRequest req;
  req.set_name(a.positional[0]);
  v1::DeletePoolResponse resp;
  auto call = ctx.NewCall();
  grpc::Status s = v1::PoolService::NewStub(ctx.channel())->DeletePool(call.get(), req, &resp);
  if (!s.ok()) return ctx.Fail(s);
  if (ctx.format != OutputFormat::kTable) {
    PrintMessage(ctx.out, resp, ctx.format);
  } else {
    ctx.out << "pool " << req.name() << " deleted\n";
  }
  return kExitOk;
}

}  // namespace

std::vector<Command> PoolCommands() {
  const char* pool_text =
      "Overcommit multiplies what the pool offers (1.5 = 150% of physical TFLOPS), never what a\n"
      "device has. Sharing: exclusive (one task per device), fractional (TFLOPS/VRAM slices) or\n"
      "time-sliced (--replicas N tasks per device). --mps-isolation tenant gives every tenant its\n"
      "own MPS control daemon on each shared GPU of the pool's nodes, so an MPS fault reaches "
      "only\n"
      "that tenant's tasks (agents with mps.enabled; docs/sandbox.md). --compute-share fair lets\n"
      "a slice burst into the time its GPU's other tenants leave idle and give it back within\n"
      "1 s of their return; strict (the default) holds it to its share (docs/interposer.md).\n"
      "--requires lists what a\n"
      "node must enforce to take the pool's fractional or time-sliced work (vram_cap,\n"
      "compute_share, spill, sandbox, vram_scrub, mps); such work waits with MISSING_CAPABILITY\n"
      "until a node that enforces them is in the pool. A new pool requires vram_cap,\n"
      "compute_share and sandbox unless told otherwise; --requires none requires nothing (for\n"
      "tenants who trust each other). --network says what the pool's tasks may\n"
      "reach: none (loopback only), isolated (outbound through NAT; the node, other tasks, the\n"
      "control plane and link-local metadata refused) or host (the node's network); unset, each\n"
      "node's default (docs/network.md). --mig-relayout idle lets the scheduler re-partition the\n"
      "pool's idle MIG GPUs for MIG work that finds no room (drain: also one busy GPU at a time,\n"
      "which takes no new work until its tasks end); off (the default) leaves layouts to admins\n"
      "(`nodes set-mig`; docs/placement.md, \"Dynamic MIG\").";
  return {
      {"pools create", "NAME [flags]", "Create a pool (admin)", pool_text, PoolFlags(),
       "  gpupoolctl pools create training --strategy fgd --sharing fractional "
       "--compute-overcommit 1.5\n"
       "  gpupoolctl pools create acme-private --visibility private --allow acme/ml,acme/infra "
       "--sharing exclusive\n"
       "  gpupoolctl pools create notebooks --sharing time-sliced --replicas 4\n"
       "  gpupoolctl pools create inference --sharing fractional --mps-isolation tenant\n"
       "  gpupoolctl pools create notebooks-burst --sharing fractional --compute-share fair\n"
       "  gpupoolctl pools create slices --sharing fractional --requires vram_cap,compute_share,"
       "sandbox,vram_scrub\n"
       "  gpupoolctl pools create lab --sharing fractional --requires none\n"
       "  gpupoolctl pools create web --network isolated\n"
       "  gpupoolctl pools create mig-a100 --sharing exclusive --mig-relayout idle\n",
       1, 1, Create},
      {"pools get",
       "NAME",
       "Show a pool and its capacity",
       "Admins also see the workload the pool's placement has learned from submissions: the\n"
       "heaviest request classes (decayed; docs/placement.md) and their share.",
       {},
       "  gpupoolctl pools get training\n",
       1,
       1,
       Get},
      {"pools list",
       "",
       "List pools with allocated/offered capacity",
       "",
       {},
       "  gpupoolctl pools list\n  gpupoolctl -o json pools list\n",
       0,
       0,
       List},
      {"pools update", "NAME [flags]", "Change a pool's policy (admin)",
       "Only the flags given are changed (they form the update mask).", PoolFlags(),
       "  gpupoolctl pools update training --compute-overcommit 2.0\n"
       "  gpupoolctl pools update acme-private --allow acme/ml --allow acme/research\n",
       1, 1, Update},
      {"pools delete",
       "NAME",
       "Delete a pool (admin)",
       "",
       {},
       "  gpupoolctl pools delete scratch\n",
       1,
       1,
       Delete},
  };
}

}  // namespace gpupool::ctl
