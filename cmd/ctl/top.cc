// gpupoolctl top: a live view of the cluster as the caller's credential sees it — each pool's
// allocation, nodes by state, the queue by pool and priority class, and the running jobs —
// refreshed every interval. On a terminal each frame replaces the last; otherwise (a pipe, a
// file) frames follow one another, so `gpupoolctl top -n 1` is a one-shot summary for scripts.
#include <unistd.h>

#include <chrono>
#include <ctime>
#include <iostream>
#include <map>
#include <sstream>
#include <thread>

#include "cmd/ctl/app.h"
#include "cmd/ctl/units.h"
#include "gpupool/v1/jobs.grpc.pb.h"
#include "gpupool/v1/pools.grpc.pb.h"

namespace gpupool::ctl {
namespace {

struct Snapshot {
  v1::ListPoolsResponse pools;
  v1::ListNodesResponse nodes;
  std::vector<v1::Job> active;  // pending and running jobs
};

grpc::Status FetchJobsIn(Ctx& ctx, v1::JobState state, const std::string& pool,
                         std::vector<v1::Job>* out) {
  auto stub = v1::JobService::NewStub(ctx.channel());
  v1::ListJobsRequest req;
  req.set_state(state);
  req.set_pool(pool);
  req.set_page_size(1000);
  while (true) {
    v1::ListJobsResponse resp;
    auto call = ctx.NewCall();
    grpc::Status s = stub->ListJobs(call.get(), req, &resp);
    if (!s.ok()) return s;
    for (v1::Job& j : *resp.mutable_jobs()) out->push_back(std::move(j));
    if (resp.next_page_token().empty()) return grpc::Status::OK;
    req.set_page_token(resp.next_page_token());
  }
}

grpc::Status Fetch(Ctx& ctx, const std::string& pool, Snapshot* snap) {
  {
    auto call = ctx.NewCall();
    grpc::Status s = v1::PoolService::NewStub(ctx.channel())
                         ->ListPools(call.get(), v1::ListPoolsRequest(), &snap->pools);
    if (!s.ok()) return s;
  }
  {
    v1::ListNodesRequest req;
    req.set_pool(pool);
    auto call = ctx.NewCall();
    grpc::Status s =
        v1::NodeService::NewStub(ctx.channel())->ListNodes(call.get(), req, &snap->nodes);
    if (!s.ok()) return s;
  }
  for (v1::JobState st : {v1::JOB_STATE_RUNNING, v1::JOB_STATE_PENDING}) {
    if (grpc::Status s = FetchJobsIn(ctx, st, pool, &snap->active); !s.ok()) return s;
  }
  return grpc::Status::OK;
}

std::string Percent(int64_t used, int64_t of) {
  if (of <= 0) return "-";
  return std::to_string(used * 100 / of) + "%";
}

std::string Short(std::string_view full, std::string_view prefix) {
  return ShortEnumName(full, prefix);
}

void Render(std::ostream& out, const Snapshot& snap, const std::string& server, size_t max_jobs) {
  const std::time_t now = std::time(nullptr);
  char when[32];
  std::strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", std::localtime(&now));
  size_t running = 0, pending = 0;
  for (const v1::Job& j : snap.active) {
    (j.state() == v1::JOB_STATE_RUNNING ? running : pending) += 1;
  }
  out << "gpupool  " << server << "  " << when << "  jobs: " << running << " running, " << pending
      << " pending\n\n";

  Table pools({"POOL", "NODES", "DEVICES", "TFLOPS", "TFLOPS%", "VRAM", "VRAM%"});
  for (const v1::Pool& p : snap.pools.pools()) {
    const v1::Capacity& c = p.capacity();
    pools.AddRow({p.name(), std::to_string(c.nodes()), std::to_string(c.devices()),
                  FormatUsedOf(c.allocated().milli_tflops(), c.offered().milli_tflops()),
                  Percent(c.allocated().milli_tflops(), c.offered().milli_tflops()),
                  FormatMib(c.allocated().vram_mib()) + "/" + FormatMib(c.offered().vram_mib()),
                  Percent(c.allocated().vram_mib(), c.offered().vram_mib())});
  }
  pools.Print(out);

  std::map<std::string, int> by_state;
  for (const v1::Node& n : snap.nodes.nodes()) {
    ++by_state[Short(v1::NodeState_Name(n.state()), "NODE_STATE_")];
  }
  out << "\nnodes:";
  if (by_state.empty()) out << " none";
  for (const auto& [state, count] : by_state) out << "  " << state << " " << count;
  out << "\n\n";

  // The queue: pending tasks by pool and priority class.
  std::map<std::pair<std::string, std::string>, int64_t> queue;
  for (const v1::Job& j : snap.active) {
    for (const v1::Task& t : j.tasks()) {
      if (t.state() == v1::TASK_STATE_PENDING) {
        queue[{j.spec().pool(), j.spec().priority_class()}] += 1;
      }
    }
  }
  Table q({"QUEUE POOL", "PRIORITY", "PENDING TASKS"});
  for (const auto& [key, count] : queue) q.AddRow({key.first, key.second, std::to_string(count)});
  if (q.size() == 0) {
    out << "queue: empty\n";
  } else {
    q.Print(out);
  }

  Table jobs({"JOB", "TENANT", "POOL", "PRIORITY", "STATE", "TASKS R/P/N", "WHY (first pending)"});
  size_t shown = 0;
  for (const v1::Job& j : snap.active) {
    if (shown++ == max_jobs) break;
    int r = 0, p = 0;
    std::string why;
    for (const v1::Task& t : j.tasks()) {
      if (t.state() == v1::TASK_STATE_RUNNING) ++r;
      if (t.state() == v1::TASK_STATE_PENDING) {
        ++p;
        if (why.empty()) why = t.reason();
      }
    }
    if (why.size() > 60) why = why.substr(0, 57) + "...";
    jobs.AddRow({j.id(), j.spec().tenant(), j.spec().pool(), j.spec().priority_class(),
                 Short(v1::JobState_Name(j.state()), "JOB_STATE_"),
                 std::to_string(r) + "/" + std::to_string(p) + "/" + std::to_string(j.tasks_size()),
                 why.empty() ? "-" : why});
  }
  out << '\n';
  if (jobs.size() == 0) {
    out << "no running or pending jobs\n";
  } else {
    jobs.Print(out);
    if (snap.active.size() > max_jobs) {
      out << "… and " << snap.active.size() - max_jobs << " more (gpupoolctl jobs list)\n";
    }
  }
}

int Top(Ctx& ctx, const ParsedArgs& a) {
  int64_t interval_ms = 2000, iterations = 0, max_jobs = 20;
  if (auto d = a.Find("interval")) {
    Result<int64_t> ms = ParseDurationMs(*d);
    if (!ms.ok() || *ms < 100) return ctx.Usage("--interval: a duration of at least 100ms");
    interval_ms = *ms;
  }
  if (auto n = a.Find("iterations")) {
    Result<int64_t> v = ParseInt(*n, 1, 1'000'000);
    if (!v.ok()) return ctx.Usage("--iterations: " + v.status().message());
    iterations = *v;
  }
  if (auto j = a.Find("jobs")) {
    Result<int64_t> v = ParseInt(*j, 1, 10'000);
    if (!v.ok()) return ctx.Usage("--jobs: " + v.status().message());
    max_jobs = *v;
  }
  const bool terminal = &ctx.out == &std::cout && isatty(STDOUT_FILENO) == 1;
  for (int64_t i = 0; iterations == 0 || i < iterations; ++i) {
    if (i > 0) std::this_thread::sleep_for(std::chrono::milliseconds(interval_ms));
    Snapshot snap;
    if (grpc::Status s = Fetch(ctx, a.Get("pool"), &snap); !s.ok()) return ctx.Fail(s);
    std::ostringstream frame;
    Render(frame, snap, ctx.server, static_cast<size_t>(max_jobs));
    if (terminal) {
      ctx.out << "\033[H\033[2J";  // home, clear: the frame replaces the last one
    } else if (i > 0) {
      ctx.out << '\n';
    }
    ctx.out << frame.str();
    ctx.out.flush();
  }
  return kExitOk;
}

}  // namespace

std::vector<Command> TopCommands() {
  return {{"top",
           "[flags]",
           "A live view of pools, nodes, the queue and active jobs",
           "Refreshes every --interval until interrupted (or --iterations frames). Shows what\n"
           "the credential may see: a tenant sees its own jobs and the shared inventory.",
           {{"interval", 'd', FlagKind::kValue, "DURATION", "time between frames (default 2s)"},
            {"iterations", 'n', FlagKind::kValue, "N", "stop after N frames"},
            {"pool", 0, FlagKind::kValue, "NAME", "only this pool's nodes and jobs"},
            {"jobs", 0, FlagKind::kValue, "N", "at most N jobs listed (default 20)"}},
           "  gpupoolctl top\n  gpupoolctl top --pool shared -d 1s\n  gpupoolctl top -n 1\n",
           0,
           0,
           Top}};
}

}  // namespace gpupool::ctl
