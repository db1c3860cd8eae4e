// nodes list|get|cordon|uncordon|drain|revoke|clear-device|set-slots|set-mig and catalog list.
#include <charconv>
#include <ctime>

#include "cmd/ctl/app.h"
#include "cmd/ctl/units.h"
#include "gpupool/v1/agent.grpc.pb.h"
#include "gpupool/v1/pools.grpc.pb.h"
#include "pool/resources.h"

namespace gpupool::ctl {

namespace v1 = ::gpupool::v1;

namespace {

std::string NodeState(v1::NodeState s) {
  return ShortEnumName(v1::NodeState_Name(s), "NODE_STATE_");
}

std::string Tflops(const v1::Capacity& c) {
  return FormatUsedOf(c.allocated().milli_tflops(), c.offered().milli_tflops());
}
std::string Vram(const v1::Capacity& c) {
  return FormatMib(c.allocated().vram_mib()) + "/" + FormatMib(c.offered().vram_mib());
}

void PrintNode(std::ostream& out, const v1::Node& n) {
  std::string labels;
  for (const auto& [k, v] : n.labels()) labels += (labels.empty() ? "" : ",") + k + "=" + v;
  std::string images;  // what its store holds, as its agent last said
  for (const std::string& i : n.cached_images()) images += (images.empty() ? "" : ", ") + i;
  PrintFields(out, {
                       {"Name", n.name()},
                       {"Pool", n.pool()},
                       {"State", NodeState(n.state())},
                       {"Labels", labels.empty() ? "-" : labels},
                       {"CPU", FormatTflops(n.cpu_milli()) + " cores"},
                       {"Memory", FormatMib(n.memory_mib())},
                       {"TFLOPS", Tflops(n.capacity()) + " allocated/offered"},
                       {"VRAM", Vram(n.capacity()) + " allocated/offered"},
                       {"Running tasks", std::to_string(n.running_tasks())},
                       {"Last heartbeat", FormatTime(n.last_heartbeat_time())},
                       {"Images", images.empty() ? "-" : images},
                   });
  if (n.devices_size() == 0) return;
  out << '\n';
  Table t({"DEVICE", "INDEX", "MODEL", "MIG", "SLOTS", "HEALTHY", "TFLOPS", "VRAM", "UTIL",
           "MEM USED", "POWER", "TEMP", "ECC/XID", "FAULT"});
  for (const v1::Device& d : n.devices()) {
    std::vector<std::string> row = {
        d.id(), std::to_string(d.index()), d.model(),
        d.mig_profile().empty() ? "-" : d.mig_profile(),
        // used/total of a time-sliced device
        d.time_slice_slots() == 0
            ? "-"
            : std::to_string(d.slots_used()) + "/" + std::to_string(d.time_slice_slots()),
        d.healthy() ? "yes" : "NO", Tflops(d.capacity()), Vram(d.capacity())};
    // The agent's last sample (none before its first heartbeat).
    if (d.has_sample()) {
      const v1::DeviceSample& s = d.sample();
      row.insert(row.end(),
                 {std::to_string(s.utilization_pct()) + "%",
                  FormatMib(s.memory_used_mib()) + "/" + FormatMib(s.memory_total_mib()),
                  std::to_string(s.power_watts()) + "W", std::to_string(s.temperature_c()) + "C",
                  std::to_string(s.ecc_errors()) + "/" + std::to_string(s.xid_errors())});
    } else {
      row.insert(row.end(), {"-", "-", "-", "-", "-"});
    }
    row.push_back(d.fault().empty() ? "-" : d.fault() + " since " + FormatTime(d.fault_time()));
    t.AddRow(std::move(row));
  }
  t.Print(out);
  if (n.mig_gpus_size() > 0) {
    out << '\n';
    Table m({"MIG GPU", "INDEX", "MODEL", "LAYOUT", "WANTED", "STATE", "REASON"});
    for (const v1::MigGpu& g : n.mig_gpus()) {
      std::string reason = g.reason();
      if (!g.fault().empty()) reason = "FAULT: " + g.fault();
      m.AddRow(
          {g.id(), std::to_string(g.index()), g.model(), g.layout().empty() ? "(none)" : g.layout(),
           g.state().empty() ? "-" : (g.wanted_layout().empty() ? "(none)" : g.wanted_layout()),
           g.state().empty() ? "-" : g.state(), reason.empty() ? "-" : reason});
    }
    m.Print(out);
  }
  if (n.capabilities_size() == 0) return;
  out << '\n';
  Table c({"CAPABILITY", "ENFORCED", "DETAIL"});
  for (const v1::NodeCapability& cap : n.capabilities()) {
    c.AddRow({cap.name(), cap.enforced() ? "yes" : "NO", cap.detail()});
  }
  c.Print(out);
}

int List(Ctx& ctx, const ParsedArgs& a) {
  v1::ListNodesRequest req;
  req.set_pool(a.Get("pool"));
  v1::ListNodesResponse resp;
  auto call = ctx.NewCall();
  grpc::Status s = v1::NodeService::NewStub(ctx.channel())->ListNodes(call.get(), req, &resp);
  if (!s.ok()) return ctx.Fail(s);
  if (ctx.format != OutputFormat::kTable) {
    PrintMessage(ctx.out, resp, ctx.format);
    return kExitOk;
  }
  if (resp.nodes_size() == 0) {
    ctx.err << "no nodes\n";
    return kExitOk;
  }
  Table t({"NAME", "POOL", "STATE", "DEVICES", "TFLOPS", "VRAM", "TASKS", "HEARTBEAT"});
  const int64_t now = static_cast<int64_t>(std::time(nullptr));
  for (const v1::Node& n : resp.nodes()) {
    t.AddRow({n.name(), n.pool(), NodeState(n.state()), std::to_string(n.devices_size()),
              Tflops(n.capacity()), Vram(n.capacity()), std::to_string(n.running_tasks()),
              FormatAge(n.last_heartbeat_time(), now)});
  }
  t.Print(ctx.out);
  return kExitOk;
}

using NodeRpc = grpc::Status (v1::NodeService::Stub::*)(grpc::ClientContext*,
                                                        const v1::NodeActionRequest&, v1::Node*);

int Action(Ctx& ctx, const ParsedArgs& a, NodeRpc rpc, const char* done) {
  v1::NodeActionRequest req;
  req.set_name(a.positional[0]);
  v1::Node node;
  auto call = ctx.NewCall();
  auto stub = v1::NodeService::NewStub(ctx.channel());
  grpc::Status s = ((*stub).*rpc)(call.get(), req, &node);
  if (!s.ok()) return ctx.Fail(s);
  if (ctx.format != OutputFormat::kTable) {
    PrintMessage(ctx.out, node, ctx.format);
  } else {
    ctx.out << "node " << node.name() << " " << done << " (state " << NodeState(node.state())
            << ")\n";
  }
  return kExitOk;
}

int Get(Ctx& ctx, const ParsedArgs& a) {
  v1::GetNodeRequest req;
  req.set_name(a.positional[0]);
  v1::Node node;
  auto call = ctx.NewCall();
  grpc::Status s = v1::NodeService::NewStub(ctx.channel())->GetNode(call.get(), req, &node);
  if (!s.ok()) return ctx.Fail(s);
  if (ctx.format != OutputFormat::kTable) {
    PrintMessage(ctx.out, node, ctx.format);
  } else {
    PrintNode(ctx.out, node);
  }
  return kExitOk;
}

int Cordon(Ctx& ctx, const ParsedArgs& a) {
  return Action(ctx, a, &v1::NodeService::Stub::CordonNode, "cordoned");
}
int Uncordon(Ctx& ctx, const ParsedArgs& a) {
  return Action(ctx, a, &v1::NodeService::Stub::UncordonNode, "uncordoned");
}
int Drain(Ctx& ctx, const ParsedArgs& a) {
  return Action(ctx, a, &v1::NodeService::Stub::DrainNode, "draining");
}
int Fence(Ctx& ctx, const ParsedArgs& a) {
  return Action(ctx, a, &v1::NodeService::Stub::FenceNode, "fenced: its tasks are requeued");
}

// An admin puts a device a fatal XID/ECC fault took out of service back into service.
int ClearDevice(Ctx& ctx, const ParsedArgs& a) {
  v1::ClearDeviceFaultRequest req;
  req.set_node(a.positional[0]);
  req.set_device(a.positional[1]);
  v1::Node node;
  auto call = ctx.NewCall();
  grpc::Status s =
      v1::NodeService::NewStub(ctx.channel())->ClearDeviceFault(call.get(), req, &node);
  if (!s.ok()) return ctx.Fail(s);
  if (ctx.format != OutputFormat::kTable) {
    PrintMessage(ctx.out, node, ctx.format);
  } else {
    ctx.out << "node " << node.name() << ": device " << req.device()
            << " fault cleared; back in service\n";
  }
  return kExitOk;
}

// An admin time-slices one idle device (0: back to its pool's default).
int SetSlots(Ctx& ctx, const ParsedArgs& a) {
  v1::SetDeviceSlotsRequest req;
  req.set_node(a.positional[0]);
  req.set_device(a.positional[1]);
  int32_t slots = 0;
  const std::string& text = a.positional[2];
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), slots);
  if (ec != std::errc() || end != text.data() + text.size())
    return ctx.Usage("SLOTS: '" + text + "' is not a whole number (0..64)");
  req.set_slots(slots);
  v1::Node node;
  auto call = ctx.NewCall();
  grpc::Status s = v1::NodeService::NewStub(ctx.channel())->SetDeviceSlots(call.get(), req, &node);
  if (!s.ok()) return ctx.Fail(s);
  if (ctx.format != OutputFormat::kTable) {
    PrintMessage(ctx.out, node, ctx.format);
  } else if (slots == 0) {
    ctx.out << "node " << node.name() << ": device " << req.device()
            << " back to its pool's time-slicing\n";
  } else {
    ctx.out << "node " << node.name() << ": device " << req.device() << " time-sliced into "
            << slots << " slots\n";
  }
  return kExitOk;
}

// An admin re-partitions one idle GPU in MIG mode.
int SetMig(Ctx& ctx, const ParsedArgs& a) {
  v1::SetMigLayoutRequest req;
  req.set_node(a.positional[0]);
  req.set_gpu(a.positional[1]);
  req.set_layout(a.positional.size() > 2 ? a.positional[2] : "");
  v1::Node node;
  auto call = ctx.NewCall();
  grpc::Status s = v1::NodeService::NewStub(ctx.channel())->SetMigLayout(call.get(), req, &node);
  if (!s.ok()) return ctx.Fail(s);
  if (ctx.format != OutputFormat::kTable) {
    PrintMessage(ctx.out, node, ctx.format);
    return kExitOk;
  }
  std::string state = "applied";
  for (const v1::MigGpu& g : node.mig_gpus()) {
    if (g.id() == req.gpu() && !g.state().empty()) state = g.state();
  }
  ctx.out << "node " << node.name() << ": GPU " << req.gpu() << " MIG layout "
          << (req.layout().empty() ? std::string("(no instance)") : req.layout()) << " " << state
          << (state == "applying" ? " (`nodes get` shows when its agent has it)" : "") << "\n";
  return kExitOk;
}

// An admin ends a node's certificate: its agent stream ends and it cannot reconnect with it.
int Revoke(Ctx& ctx, const ParsedArgs& a) {
  v1::RevokeNodeRequest req;
  req.set_node_name(a.positional[0]);
  v1::RevokeNodeResponse resp;
  auto call = ctx.NewCall();
  grpc::Status s =
      v1::NodeEnrollService::NewStub(ctx.channel())->RevokeNode(call.get(), req, &resp);
  if (!s.ok()) return ctx.Fail(s);
  ctx.out << "node " << req.node_name() << ": certificate revoked\n";
  return kExitOk;
}

int Catalog(Ctx& ctx, const ParsedArgs& a) {
  v1::ListGpuModelsResponse resp;
  auto call = ctx.NewCall();
  grpc::Status s = v1::CatalogService::NewStub(ctx.channel())
                       ->ListGpuModels(call.get(), v1::ListGpuModelsRequest(), &resp);
  if (!s.ok()) return ctx.Fail(s);
  if (ctx.format != OutputFormat::kTable) {
    PrintMessage(ctx.out, resp, ctx.format);
    return kExitOk;
  }
  if (a.GetBool("mig")) {
    Table t({"MODEL", "PROFILE", "TFLOPS", "VRAM", "MAX INSTANCES", "STARTS"});
    for (const v1::GpuModel& m : resp.models()) {
      for (const v1::MigProfile& p : m.mig_profiles()) {
        std::string starts;
        for (int at : p.starts()) starts += (starts.empty() ? "" : ",") + std::to_string(at);
        t.AddRow({m.name(), p.name(), FormatTflops(p.milli_tflops()), FormatMib(p.vram_mib()),
                  std::to_string(p.max_instances()), starts.empty() ? "-" : starts});
      }
    }
    t.Print(ctx.out);
    return kExitOk;
  }
  Table t({"MODEL", "VENDOR", "BF16 TFLOPS", "FP16 TFLOPS", "VRAM", "MIG PROFILES", "FLEET"});
  for (const v1::GpuModel& m : resp.models()) {
    if (a.GetBool("fleet") && m.fleet_devices() == 0) continue;
    std::string migs;
    for (const v1::MigProfile& p : m.mig_profiles()) migs += (migs.empty() ? "" : ",") + p.name();
    t.AddRow({m.name(), m.vendor(),
              m.bf16_milli_tflops() > 0 ? FormatTflops(m.bf16_milli_tflops()) : "-",
              FormatTflops(m.fp16_milli_tflops()), FormatMib(m.vram_mib()),
              migs.empty() ? "-" : migs,
              m.fleet_devices() == 0
                  ? "-"
                  : std::to_string(m.fleet_devices()) + " on " + std::to_string(m.fleet_nodes()) +
                        (m.fleet_nodes() == 1 ? " node" : " nodes")});
  }
  t.Print(ctx.out);
  return kExitOk;
}

}  // namespace

std::vector<Command> NodeCommands() {
  return {
      {"nodes list",
       "[flags]",
       "List nodes with allocated/offered capacity",
       "",
       {{"pool", 0, FlagKind::kValue, "NAME", "only nodes of this pool"}},
       "  gpupoolctl nodes list\n  gpupoolctl nodes list --pool training\n",
       0,
       0,
       List},
      {"nodes get",
       "NAME",
       "Show a node and its devices",
       "Each device row ends with the last sample its agent sent in a heartbeat: utilization, "
       "memory used/total, power, temperature and the ECC/XID error counters ('-' before the "
       "first heartbeat).",
       {},
       "  gpupoolctl nodes get gpu-07\n",
       1,
       1,
       Get},
      {"nodes cordon",
       "NAME",
       "Stop placing new tasks on a node (running tasks stay)",
       "",
       {},
       "  gpupoolctl nodes cordon gpu-07\n",
       1,
       1,
       Cordon},
      {"nodes uncordon",
       "NAME",
       "Let a cordoned or drained node take tasks again",
       "",
       {},
       "  gpupoolctl nodes uncordon gpu-07\n",
       1,
       1,
       Uncordon},
      {"nodes revoke",
       "NAME",
       "Revoke a node's certificate (admin): its agent is disconnected and refused",
       "The node may join again with a join token afterwards (docs/security.md).",
       {},
       "  gpupoolctl nodes revoke gpu-07\n",
       1,
       1,
       Revoke},
      {"nodes drain",
       "NAME",
       "Cordon a node and requeue its running tasks",
       "",
       {},
       "  gpupoolctl nodes drain gpu-07\n",
       1,
       1,
       Drain},
      {"nodes clear-device",
       "NODE DEVICE",
       "Put a device a fatal XID/ECC fault took out of service back in service (admin)",
       "A fatal XID (48, 62, 64, 74, 79, 92, 95, 119, 120, 140) or an uncorrectable ECC error\n"
       "fails the device's tasks and keeps the device unhealthy, across agent and gpupoold\n"
       "restarts, until an admin clears it (docs/sandbox.md, \"Health\"). `nodes get` shows\n"
       "the fault.",
       {},
       "  gpupoolctl nodes clear-device gpu-07 GPU-5c1e0a9e-0000-0000-0000-000000000000\n",
       2,
       2,
       ClearDevice},
      {"nodes set-slots",
       "NODE DEVICE SLOTS",
       "Time-slice one GPU or MIG instance into SLOTS slots (admin; 0: the pool's default)",
       "Each shared request that lands on a time-sliced device takes one slot and is held to\n"
       "the slot's share (the device's offered TFLOPS and VRAM over its slots); a request for\n"
       "whole GPUs never lands there. A MIG instance with slots serves that many requests for\n"
       "its profile. The device must be idle; SLOTS is 0..64. `nodes get` shows used/total\n"
       "(docs/placement.md, \"Time-slicing per device\").",
       {},
       "  gpupoolctl nodes set-slots gpu-07 GPU-5c1e0a9e-0000-0000-0000-000000000000 4\n"
       "  gpupoolctl nodes set-slots gpu-07 MIG-3g.40gb-0 2\n",
       3,
       3,
       SetSlots},
      {"nodes set-mig",
       "NODE GPU [LAYOUT]",
       "Re-partition one idle GPU in MIG mode into MIG instances (admin)",
       "LAYOUT lists instances as PROFILE@START joined by '+', START being the first memory\n"
       "slice NVIDIA's placement rules allow the profile (`catalog list --mig` lists profiles);\n"
       "no LAYOUT removes every instance. The GPU must be in MIG mode and none of its instances\n"
       "may run a task. The layout is stored, then the node's agent destroys and creates the\n"
       "instances all or nothing; a layout the driver refuses leaves the GPU as it was, with\n"
       "the reason in `nodes get`. A pool with --mig-relayout idle|drain re-partitions its GPUs\n"
       "itself (docs/placement.md, \"Dynamic MIG\").",
       {},
       "  gpupoolctl nodes set-mig gpu-07 GPU-5c1e0a9e-0000-0000-0000-000000000000 "
       "3g.40gb@4+2g.20gb@0+1g.10gb@2+1g.10gb@3\n"
       "  gpupoolctl nodes set-mig gpu-07 GPU-5c1e0a9e-0000-0000-0000-000000000000 7g.80gb@0\n",
       2,
       3,
       SetMig},
      {"nodes fence",
       "NAME",
       "Say a silent node is powered off (admin): its tasks are requeued now",
       "A silent node (NOT_READY) keeps its tasks for the node lease (5 minutes by default), so a\n"
       "control-plane outage kills nothing. When you know the node is down (powered off, its\n"
       "tasks dead), fence it and its tasks run elsewhere at once. Only a NOT_READY node can be\n"
       "fenced; a node whose agent is connected is refused. Audited (docs/ha.md, \"Fencing\").",
       {},
       "  gpupoolctl nodes fence gpu-07\n",
       1,
       1,
       Fence},
      {"catalog list",
       "[flags]",
       "List the GPU models the server knows and how many the fleet has",
       "Compute is dense tensor-core TFLOPS: bf16, or fp16 for cards without bf16 (T4, V100).\n"
       "FLEET counts the devices of each model (a MIG instance counts once) and the nodes "
       "holding them, over the pools you may use.",
       {{"mig", 0, FlagKind::kBool, "", "list MIG profiles instead, one per line"},
        {"fleet", 0, FlagKind::kBool, "", "only the models the fleet has"}},
       "  gpupoolctl catalog list\n  gpupoolctl catalog list --fleet\n"
       "  gpupoolctl catalog list --mig\n",
       0,
       0,
       Catalog},
  };
}

}  // namespace gpupool::ctl
