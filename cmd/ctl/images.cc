// images prepull|unpin|list: the images a pool pins on its nodes (Pool.pinned_images; docs/
// images.md, "Prepull and pins"). Each verb is a read-modify-write of the pool's list through
// GetPool and UpdatePool (admin).
#include <algorithm>
#include <chrono>
#include <thread>

#include "cmd/ctl/app.h"
#include "gpupool/v1/pools.grpc.pb.h"
#include "pool/image_reference.h"

namespace gpupool::ctl {

namespace v1 = ::gpupool::v1;

namespace {

grpc::Status GetPool(Ctx& ctx, const std::string& name, v1::Pool* out) {
  v1::GetPoolRequest req;
  req.set_name(name);
  auto call = ctx.NewCall();
  return v1::PoolService::NewStub(ctx.channel())->GetPool(call.get(), req, out);
}

grpc::Status SetPins(Ctx& ctx, const std::string& pool, const std::vector<std::string>& images,
                     v1::Pool* out) {
  v1::UpdatePoolRequest req;
  req.mutable_pool()->set_name(pool);
  for (const std::string& i : images) req.mutable_pool()->add_pinned_images(i);
  req.mutable_update_mask()->add_paths("pinned_images");
  auto call = ctx.NewCall();
  return v1::PoolService::NewStub(ctx.channel())->UpdatePool(call.get(), req, out);
}

grpc::Status ListNodes(Ctx& ctx, const std::string& pool, v1::ListNodesResponse* out) {
  v1::ListNodesRequest req;
  req.set_pool(pool);
  auto call = ctx.NewCall();
  return v1::NodeService::NewStub(ctx.channel())->ListNodes(call.get(), req, out);
}

template <typename Strings>
bool Contains(const Strings& list, const std::string& s) {
  return std::find(list.begin(), list.end(), s) != list.end();
}

// Ready nodes of the pool holding `image`, and ready nodes in all.
std::pair<int, int> Holders(const v1::ListNodesResponse& nodes, const std::string& image) {
  int holding = 0, ready = 0;
  for (const v1::Node& n : nodes.nodes()) {
    if (n.state() != v1::NODE_STATE_READY) continue;
    ++ready;
    holding += Contains(n.cached_images(), image) ? 1 : 0;
  }
  return {holding, ready};
}

// The stored form of IMAGE (gpupoold keeps pins canonical), or a usage error naming the part.
Result<std::string> Canonical(const std::string& image) {
  Result<ImageReference> ref = ParseImageReference(image);
  if (!ref.ok()) return Status::InvalidArgument("IMAGE '" + image + "': " + ref.status().message());
  return ref->Canonical();
}

// What prepull and unpin act on: --pool, IMAGE in its stored form, and the pool as it is.
struct PinTarget {
  std::string pool;
  std::string image;
  v1::Pool current;
};

// kExitOk with `t` filled, or the exit code of what went wrong (already reported).
int LoadTarget(Ctx& ctx, const ParsedArgs& a, PinTarget* t) {
  t->pool = a.Get("pool");
  if (t->pool.empty()) return ctx.Usage("--pool is required");
  Result<std::string> image = Canonical(a.positional[0]);
  if (!image.ok()) return ctx.Usage(image.status().message());
  t->image = *image;
  grpc::Status s = GetPool(ctx, t->pool, &t->current);
  return s.ok() ? kExitOk : ctx.Fail(s);
}

int Prepull(Ctx& ctx, const ParsedArgs& a) {
  PinTarget t;
  if (int rc = LoadTarget(ctx, a, &t); rc != kExitOk) return rc;
  const bool already = Contains(t.current.pinned_images(), t.image);
  v1::Pool updated = t.current;
  if (!already) {
    std::vector<std::string> images(t.current.pinned_images().begin(),
                                    t.current.pinned_images().end());
    images.push_back(t.image);
    if (grpc::Status s = SetPins(ctx, t.pool, images, &updated); !s.ok()) return ctx.Fail(s);
  }
  if (ctx.format != OutputFormat::kTable && !a.Has("wait")) {
    PrintMessage(ctx.out, updated, ctx.format);
    return kExitOk;
  }
  ctx.out << (already ? "already pinned: " : "pinned ") << t.image << " to pool " << t.pool
          << ": its nodes pull it now and keep it (gpupoolctl images unpin to let it go)\n";
  if (!a.Has("wait")) return kExitOk;
  // Until every ready node of the pool reports holding it, or the --timeout.
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(ctx.timeout_ms);
  for (;;) {
    v1::ListNodesResponse nodes;
    if (grpc::Status s = ListNodes(ctx, t.pool, &nodes); !s.ok()) return ctx.Fail(s);
    const auto [holding, ready] = Holders(nodes, t.image);
    if (holding == ready) {
      ctx.out << t.image << " is on " << holding << " of " << ready << " ready node(s)\n";
      return kExitOk;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      ctx.err << "timed out: " << t.image << " is on " << holding << " of " << ready
              << " ready node(s); the others keep pulling (their agents' logs say why not)\n";
      return kExitUnavailable;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
}

int Unpin(Ctx& ctx, const ParsedArgs& a) {
  PinTarget t;
  if (int rc = LoadTarget(ctx, a, &t); rc != kExitOk) return rc;
  std::vector<std::string> images;
  bool found = false;
  for (const std::string& i : t.current.pinned_images()) {
    if (i == t.image) {
      found = true;
    } else {
      images.push_back(i);
    }
  }
  if (!found) {
    std::string listed;
    for (const std::string& i : t.current.pinned_images()) listed += "\n  " + i;
    ctx.err << "pool " << t.pool << " does not pin '" << a.positional[0] << "'"
            << (listed.empty() ? std::string(" (it pins none)") : "; it pins:" + listed) << "\n";
    return kExitNotFound;
  }
  v1::Pool updated;
  if (grpc::Status s = SetPins(ctx, t.pool, images, &updated); !s.ok()) return ctx.Fail(s);
  if (ctx.format != OutputFormat::kTable) {
    PrintMessage(ctx.out, updated, ctx.format);
    return kExitOk;
  }
  ctx.out << "unpinned " << t.image << " from pool " << t.pool
          << ": its nodes keep it until their stores need the room\n";
  return kExitOk;
}

int List(Ctx& ctx, const ParsedArgs& a) {
  const std::string pool = a.Get("pool");
  if (pool.empty()) return ctx.Usage("--pool is required");
  v1::Pool current;
  grpc::Status s = GetPool(ctx, pool, &current);
  if (!s.ok()) return ctx.Fail(s);
  v1::ListNodesResponse nodes;
  s = ListNodes(ctx, pool, &nodes);
  if (!s.ok()) return ctx.Fail(s);
  if (ctx.format != OutputFormat::kTable) {
    PrintMessage(ctx.out, current, ctx.format);
    return kExitOk;
  }
  if (current.pinned_images_size() == 0) {
    ctx.err << "pool " << pool << " pins no image\n";
    return kExitOk;
  }
  Table t({"IMAGE", "ON READY NODES"});
  for (const std::string& i : current.pinned_images()) {
    const auto [holding, ready] = Holders(nodes, i);
    t.AddRow({i, std::to_string(holding) + "/" + std::to_string(ready)});
  }
  t.Print(ctx.out);
  return kExitOk;
}

const FlagSpec kPoolFlag{"pool", 0, FlagKind::kValue, "NAME", "the pool (required)"};

}  // namespace

std::vector<Command> ImageCommands() {
  const char* text =
      "A pool's pinned images are pulled by every node of the pool as soon as it knows of them,\n"
      "by a node that joins the pool later, and kept: never collected from a node's image store\n"
      "while pinned. Tasks of a pinned image then start warm. Pins are pulled without a registry\n"
      "credential (public images, or a registry the nodes may read). Admin only; at most 16 per\n"
      "pool; stored in canonical form (busybox → docker.io/library/busybox:latest). See\n"
      "docs/images.md, \"Prepull and pins\".";
  return {
      {"images prepull",
       "IMAGE --pool NAME [--wait]",
       "Pull an image onto every node of a pool now, and keep it there (admin)",
       std::string(text) +
           "\n--wait returns once every ready node of the pool reports holding the image (up to "
           "--timeout).",
       {kPoolFlag,
        {"wait", 0, FlagKind::kBool, "", "wait until every ready node of the pool holds it"}},
       "  gpupoolctl images prepull --pool training registry.example:5000/ml/pytorch:2.4\n"
       "  gpupoolctl --timeout 10m images prepull --pool training --wait nvcr.io/nvidia/"
       "pytorch:24.05-py3\n",
       1,
       1,
       Prepull},
      {"images unpin",
       "IMAGE --pool NAME",
       "Stop keeping an image on a pool's nodes (admin)",
       std::string(text) + "\nThe nodes keep the image until their stores need the room.",
       {kPoolFlag},
       "  gpupoolctl images unpin --pool training registry.example:5000/ml/pytorch:2.4\n",
       1,
       1,
       Unpin},
      {"images list",
       "--pool NAME",
       "A pool's pinned images and how many of its ready nodes hold each (admin)",
       text,
       {kPoolFlag},
       "  gpupoolctl images list --pool training\n",
       0,
       0,
       List},
  };
}

}  // namespace gpupool::ctl
