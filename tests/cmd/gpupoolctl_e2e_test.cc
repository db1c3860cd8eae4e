// End to end: the real gpupoolctl binary, run as a child process, against a real gRPC server on
// loopback (tests/cmd/fake_server.h, in-memory until gpupoold exists). Checks what a script sees:
// exit codes, stdout, stderr, and what reached the server.
#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "tests/cmd/fake_server.h"
#include "tests/cmd/run_ctl.h"

namespace gpupool::ctltest {
namespace {

class GpupoolctlE2E : public ::testing::Test {
 protected:
  FakeServer server_{"s3cret"};

  // gpupoolctl --server ADDR --token s3cret ARGS...
  Outcome Ctl(std::vector<std::string> args, const std::string& input = "") {
    std::vector<std::string> full = {"--server", server_.address(), "--token", "s3cret"};
    full.insert(full.end(), args.begin(), args.end());
    return RunCtl(full, {}, input);
  }

  void CreatePool(const std::string& name) {
    Outcome o = Ctl({"pools", "create", name, "--sharing", "fractional"});
    ASSERT_EQ(o.exit, 0) << Dump(o);
  }
};

TEST_F(GpupoolctlE2E, CatalogListTableAndJson) {
  Outcome o = Ctl({"catalog", "list"});
  ASSERT_EQ(o.exit, 0) << Dump(o);
  EXPECT_EQ(o.out.rfind("MODEL       VENDOR   BF16 TFLOPS   FP16 TFLOPS   VRAM", 0), 0u) << o.out;
  EXPECT_NE(o.out.find("H100-SXM    NVIDIA   989.5         989.5         80GiB    "
                       "1g.10gb,1g.20gb,2g.20gb,3g.40gb,4g.40gb,7g.80gb    -\n"),
            std::string::npos)
      << o.out;
  EXPECT_NE(o.out.find("T4          NVIDIA   -             65            16GiB    -   "),
            std::string::npos)
      << o.out;
  EXPECT_TRUE(o.err.empty()) << o.err;

  o = Ctl({"-o", "json", "catalog", "list"});
  ASSERT_EQ(o.exit, 0) << Dump(o);
  v1::ListGpuModelsResponse resp;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(o.out, &resp).ok()) << o.out;
  EXPECT_EQ(resp.models_size(), 13);
  EXPECT_EQ(resp.models(1).name(), "H100-SXM");
  EXPECT_EQ(resp.models(1).bf16_milli_tflops(), 989'500);

  o = Ctl({"catalog", "list", "--mig"});
  ASSERT_EQ(o.exit, 0) << Dump(o);
  // Each profile with NVIDIA's allowed starts: what `nodes set-mig` layouts are written with.
  EXPECT_NE(o.out.find("A100-40GB   1g.5gb     44.571    5GiB     7               0,1,2,3,4,5,6\n"),
            std::string::npos)
      << o.out;
  EXPECT_NE(o.out.find("H100-SXM    3g.40gb    424.071   40GiB    2               0,4\n"),
            std::string::npos)
      << o.out;
}

TEST_F(GpupoolctlE2E, TokenAndServerFromFlagsOrEnvironment) {
  Outcome o = RunCtl({"--server", server_.address(), "catalog", "list"});
  EXPECT_EQ(o.exit, 6) << Dump(o);
  EXPECT_EQ(o.err,
            "gpupoolctl: UNAUTHENTICATED: missing or wrong bearer token\n"
            "(no credential was sent: run 'gpupoolctl login', or pass --token)\n");
  EXPECT_TRUE(o.out.empty());

  o = RunCtl({"catalog", "list"}, {"GPUPOOL_SERVER=" + server_.address(), "GPUPOOL_TOKEN=s3cret"});
  EXPECT_EQ(o.exit, 0) << Dump(o);
  std::lock_guard<std::mutex> lock(server_.state().mu);
  EXPECT_EQ(server_.state().last_authorization, "Bearer s3cret");
}

TEST_F(GpupoolctlE2E, UnreachableServerIsExitFive) {
  // Port 1 on loopback: nothing listens there, the connection is refused at once.
  Outcome o = RunCtl({"--server", "127.0.0.1:1", "--timeout", "5s", "pools", "list"});
  EXPECT_EQ(o.exit, 5) << Dump(o);
  EXPECT_EQ(o.err.rfind("gpupoolctl: UNAVAILABLE: cannot reach gpupoold at 127.0.0.1:1: ", 0), 0u)
      << o.err;
}

TEST_F(GpupoolctlE2E, PoolsLifecycle) {
  Outcome o = Ctl({"pools", "create", "training", "--strategy", "fgd", "--sharing", "fractional",
                   "--compute-overcommit", "1.5"});
  ASSERT_EQ(o.exit, 0) << Dump(o);
  EXPECT_EQ(o.out, "pool training created\n");

  o = Ctl({"pools", "create", "training"});
  EXPECT_EQ(o.exit, 7) << Dump(o);
  EXPECT_EQ(o.err, "gpupoolctl: ALREADY_EXISTS: pool 'training' already exists\n");

  o = Ctl({"pools", "create", "bad", "--compute-overcommit", "20"});
  EXPECT_EQ(o.exit, 4) << Dump(o);
  EXPECT_EQ(o.err, "gpupoolctl: INVALID_ARGUMENT: pool.compute_overcommit: must be 1.0..10.0\n");

  o = Ctl({"pools", "get", "training"});
  ASSERT_EQ(o.exit, 0) << Dump(o);
  EXPECT_NE(o.out.find("Sharing:          FRACTIONAL\n"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("Overcommit:       compute 1.5x, memory 1.0x\n"), std::string::npos)
      << o.out;
  EXPECT_NE(o.out.find("TFLOPS:           12.5/2968.5 allocated/offered (physical 1979)\n"),
            std::string::npos)
      << o.out;
  EXPECT_NE(o.out.find("Learned workload:  40 task(s) observed; top classes:\n"
                       "  #1:              75.0%  12.5 TFLOPS + 20GiB VRAM, cpu 2, mem 8GiB\n"
                       "  #2:              25.0%  2 GPUs (H100-SXM), cpu 16, mem 64GiB\n"),
            std::string::npos)
      << o.out;

  o = Ctl({"pools", "list"});
  ASSERT_EQ(o.exit, 0) << Dump(o);
  EXPECT_EQ(o.out,
            "NAME       VISIBILITY   STRATEGY   SHARING      OVERCOMMIT   NODES   DEVICES   "
            "TFLOPS        VRAM\n"
            "training   PUBLIC       fgd        FRACTIONAL   1.5/1.0      1       2         "
            "12.5/2968.5   20GiB/160GiB\n");

  o = Ctl({"pools", "update", "training", "--compute-overcommit", "2", "--strategy", "best-fit"});
  ASSERT_EQ(o.exit, 0) << Dump(o);
  {
    std::lock_guard<std::mutex> lock(server_.state().mu);
    const v1::UpdatePoolRequest& u = server_.state().last_update;
    ASSERT_EQ(u.update_mask().paths_size(), 2);
    EXPECT_EQ(u.update_mask().paths(0), "placement_strategy");
    EXPECT_EQ(u.update_mask().paths(1), "compute_overcommit");
    EXPECT_DOUBLE_EQ(u.pool().compute_overcommit(), 2.0);
  }

  o = Ctl({"-o", "yaml", "pools", "get", "training"});
  ASSERT_EQ(o.exit, 0) << Dump(o);
  EXPECT_NE(o.out.find("placementStrategy: best-fit\n"), std::string::npos) << o.out;

  o = Ctl({"pools", "delete", "training"});
  EXPECT_EQ(o.exit, 0) << Dump(o);
  EXPECT_EQ(o.out, "pool training deleted\n");
  o = Ctl({"pools", "get", "training"});
  EXPECT_EQ(o.exit, 3) << Dump(o);
  EXPECT_EQ(o.err, "gpupoolctl: NOT_FOUND: pool 'training' not found\n");
}

TEST_F(GpupoolctlE2E, AnImageJobShowsWhatItRunsIn) {
  CreatePool("training");
  Outcome o = Ctl({"jobs",         "submit",   "--pool",       "training",
                   "--gpus",       "1",        "--image",      "registry.local:5000/team/train:3",
                   "--entrypoint", "/bin/sh",  "--entrypoint", "-c",
                   "--workdir",    "/scratch", "--volume",     "/data=imagenet-1k",
                   "--volume",     "/scratch", "--",           "make test"});
  ASSERT_EQ(o.exit, 0) << Dump(o);
  EXPECT_EQ(o.out, "job 1 submitted: 1 task in pool training\n");
  o = Ctl({"jobs", "get", "1"});
  ASSERT_EQ(o.exit, 0) << Dump(o);
  EXPECT_NE(o.out.find("Image:        registry.local:5000/team/train:3\n"), std::string::npos)
      << o.out;
  EXPECT_NE(o.out.find("Entrypoint:   /bin/sh -c\n"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("Workdir:      /scratch\n"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("Volumes:      /data=imagenet-1k (read-only), /scratch (scratch)\n"),
            std::string::npos)
      << o.out;
}

TEST_F(GpupoolctlE2E, SubmitGetListCancel) {
  CreatePool("training");
  Outcome o = Ctl(
      {"jobs",    "submit",   "--tenant", "acme/ml/alice", "--pool", "training",      "--tasks",
       "2",       "--tflops", "12.5",     "--vram",        "20GiB",  "--max-runtime", "1h",
       "--label", "team=ml",  "--env",    "EPOCHS=3",      "--",     "python",        "train.py",
       "--lr",    "0.1"});
  ASSERT_EQ(o.exit, 0) << Dump(o);
  EXPECT_EQ(o.out, "job 1 submitted: 2 tasks in pool training\n");
  {
    std::lock_guard<std::mutex> lock(server_.state().mu);
    const v1::JobSpec& spec = server_.state().last_submit.spec();
    EXPECT_EQ(spec.tenant(), "acme/ml/alice");
    EXPECT_EQ(spec.task_count(), 2);
    EXPECT_EQ(spec.max_runtime().seconds(), 3600);
    EXPECT_EQ(spec.template_().resources().fractional().milli_tflops(), 12'500);
    EXPECT_EQ(spec.template_().resources().fractional().vram_mib(), 20'480);
    ASSERT_EQ(spec.template_().command_size(), 4);
    EXPECT_EQ(spec.template_().command(2), "--lr");
    EXPECT_EQ(spec.template_().env().at("EPOCHS"), "3");
  }

  // A spec file on stdin, in YAML, with a flag overriding the tenant.
  o = Ctl({"-o", "json", "jobs", "submit", "-f", "-", "--tenant", "acme/infra"},
          "pool: training\ntask_count: 1\ntemplate:\n  command: [nvidia-smi]\n"
          "  resources:\n    whole_gpus: {count: 2, models: [H100-SXM]}\n");
  ASSERT_EQ(o.exit, 0) << Dump(o);
  v1::SubmitJobResponse submitted;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(o.out, &submitted).ok()) << o.out;
  EXPECT_EQ(submitted.job_id(), "2");
  EXPECT_EQ(submitted.job().spec().tenant(), "acme/infra");
  EXPECT_EQ(submitted.job().spec().template_().resources().whole_gpus().count(), 2);

  o = Ctl({"jobs", "submit", "--pool", "nope", "--mig", "1g.10gb", "--", "x"});
  EXPECT_EQ(o.exit, 3) << Dump(o);
  EXPECT_EQ(o.err, "gpupoolctl: NOT_FOUND: pool 'nope' not found\n");
  o = Ctl({"jobs", "submit", "--sku", "small", "--", "x"});
  EXPECT_EQ(o.exit, 4) << Dump(o);
  EXPECT_EQ(o.err, "gpupoolctl: INVALID_ARGUMENT: spec.pool: required\n");
  o = Ctl({"jobs", "submit", "--pool", "training", "--tflops", "1", "--vram", "8GB", "--", "x"});
  EXPECT_EQ(o.exit, 2) << Dump(o);
  EXPECT_EQ(o.err,
            "gpupoolctl: USAGE: --vram: memory size '8GB': use binary units MiB, GiB or TiB (e.g. "
            "20GiB)\nRun 'gpupoolctl jobs submit --help' for usage.\n");

  o = Ctl({"jobs", "get", "1"});
  ASSERT_EQ(o.exit, 0) << Dump(o);
  EXPECT_NE(o.out.find("State:        PENDING\n"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("Resources:    12.5 TFLOPS, 20GiB VRAM\n"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("Command:      python train.py --lr 0.1\n"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("Max runtime:  1h\n"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("TASK   STATE     NODE   DEVICES   ATTEMPT   EXIT   REASON\n"
                       "1.0    PENDING   -      -         0         -      -\n"),
            std::string::npos)
      << o.out;

  o = Ctl({"-o", "json", "jobs", "get", "1"});
  ASSERT_EQ(o.exit, 0) << Dump(o);
  v1::Job job;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(o.out, &job).ok()) << o.out;
  EXPECT_EQ(job.state(), v1::JOB_STATE_PENDING);
  EXPECT_NE(o.out.find("\"state\": \"JOB_STATE_PENDING\""), std::string::npos) << o.out;

  o = Ctl({"jobs", "get", "99"});
  EXPECT_EQ(o.exit, 3) << Dump(o);
  EXPECT_EQ(o.err, "gpupoolctl: NOT_FOUND: job '99' not found\n");

  o = Ctl({"jobs", "list", "--pool", "training", "--limit", "1"});
  ASSERT_EQ(o.exit, 0) << Dump(o);
  EXPECT_EQ(o.out.rfind("ID   TENANT          POOL       PRIORITY   TASKS   RESOURCES", 0), 0u)
      << o.out;
  EXPECT_NE(o.out.find("1    acme/ml/alice   training   -          2       12.5 TFLOPS, 20GiB "
                       "VRAM   PENDING"),
            std::string::npos)
      << o.out;
  EXPECT_EQ(o.err, "more jobs: add --page-token 1 (or --all)\n");

  o = Ctl({"-o", "json", "jobs", "list", "--all", "--limit", "1", "--state", "pending"});
  ASSERT_EQ(o.exit, 0) << Dump(o);
  v1::ListJobsResponse list;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(o.out, &list).ok()) << o.out;
  EXPECT_EQ(list.jobs_size(), 2);
  {
    std::lock_guard<std::mutex> lock(server_.state().mu);
    EXPECT_EQ(server_.state().last_list.state(), v1::JOB_STATE_PENDING);
  }

  o = Ctl({"jobs", "cancel", "1", "--reason", "wrong data"});
  ASSERT_EQ(o.exit, 0) << Dump(o);
  EXPECT_EQ(o.out, "job 1: CANCELLED\n");
  o = Ctl({"jobs", "list", "--state", "cancelled"});
  ASSERT_EQ(o.exit, 0) << Dump(o);
  EXPECT_NE(o.out.find("CANCELLED"), std::string::npos) << o.out;
  EXPECT_EQ(o.out.find("acme/infra"), std::string::npos) << o.out;
}

TEST_F(GpupoolctlE2E, WatchAndLogsStream) {
  CreatePool("training");
  ASSERT_EQ(Ctl({"jobs", "submit", "--pool", "training", "--gpus", "1", "--", "x"}).exit, 0);

  Outcome o = Ctl({"jobs", "watch", "1"});
  ASSERT_EQ(o.exit, 0) << Dump(o);
  EXPECT_EQ(o.out,
            "2026-11-22T15:40:18Z   PENDING   submitted\n"
            "2026-11-22T15:40:19Z   RUNNING   task 1.0: RUNNING\n"
            "2026-11-22T15:40:20Z   SUCCEEDED   all tasks succeeded\n");

  o = Ctl({"-o", "json", "jobs", "watch", "1"});
  ASSERT_EQ(o.exit, 0) << Dump(o);
  size_t lines = 0;
  for (char c : o.out) lines += c == '\n';
  EXPECT_EQ(lines, 3u) << o.out;  // JSON Lines: one event per line
  v1::JobEvent last;
  const std::string last_line = o.out.substr(o.out.rfind('\n', o.out.size() - 2) + 1);
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(last_line, &last).ok()) << last_line;
  EXPECT_EQ(last.job().state(), v1::JOB_STATE_SUCCEEDED);

  o = Ctl({"jobs", "watch", "7"});
  EXPECT_EQ(o.exit, 3) << Dump(o);

  o = Ctl({"logs", "1.0", "-f"});
  ASSERT_EQ(o.exit, 0) << Dump(o);
  EXPECT_EQ(o.out, "hello from 1.0\nsecond line\n");
  {
    std::lock_guard<std::mutex> lock(server_.state().mu);
    EXPECT_TRUE(server_.state().last_logs.follow());
  }
  o = Ctl({"logs", "1.0", "--offset", "6"});
  ASSERT_EQ(o.exit, 0) << Dump(o);
  {
    std::lock_guard<std::mutex> lock(server_.state().mu);
    EXPECT_FALSE(server_.state().last_logs.follow());
    EXPECT_EQ(server_.state().last_logs.offset(), 6);
  }
  o = Ctl({"logs", "9.0"});
  EXPECT_EQ(o.exit, 3) << Dump(o);
  EXPECT_EQ(o.err, "gpupoolctl: NOT_FOUND: task '9.0' not found\n");
}

// jobs list -w: the list once with its header, then a line per job that changes, until the
// watch timeout; top -n 1: one frame with pools, nodes, the queue and the active jobs.
TEST_F(GpupoolctlE2E, ListWatchAndTop) {
  CreatePool("training");
  Outcome o = Ctl({"jobs", "submit", "--tenant", "acme/ml/alice", "--pool", "training", "--gpus",
                   "1", "--", "train"});
  ASSERT_EQ(o.exit, 0) << Dump(o);
  // The job finishes once the watcher has listed it at least once.
  std::thread change([this] {
    for (int i = 0; i < 1000; ++i) {
      {
        std::lock_guard<std::mutex> lock(server_.state().mu);
        if (server_.state().list_calls > 0) {
          server_.state().jobs.begin()->second.set_state(v1::JOB_STATE_SUCCEEDED);
          return;
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  });
  o = Ctl({"jobs", "list", "-w", "--interval", "100ms", "--watch-timeout", "4s"});
  change.join();
  ASSERT_EQ(o.exit, 0) << Dump(o);
  EXPECT_EQ(o.out.rfind("ID   TENANT", 0), 0u) << o.out;
  EXPECT_EQ(std::count(o.out.begin(), o.out.end(), '\n'), 3) << o.out;  // header, PENDING, change
  EXPECT_NE(o.out.find("PENDING"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("SUCCEEDED"), std::string::npos) << o.out;
  o = Ctl({"jobs", "list", "-w", "--interval", "10ms"});
  EXPECT_EQ(o.exit, 2) << Dump(o);  // below the 100ms floor: a usage error, nothing sent

  o = Ctl({"top", "-n", "1"});
  ASSERT_EQ(o.exit, 0) << Dump(o);
  EXPECT_NE(o.out.find("POOL "), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("training"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("nodes:"), std::string::npos) << o.out;
  EXPECT_EQ(o.out.find("\033["), std::string::npos) << "no screen control on a pipe";
  o = Ctl({"top", "-n", "2", "-d", "100ms"});
  ASSERT_EQ(o.exit, 0) << Dump(o);
  size_t frames = 0;
  for (size_t at = o.out.find("gpupool  "); at != std::string::npos;
       at = o.out.find("gpupool  ", at + 1)) {
    ++frames;
  }
  EXPECT_EQ(frames, 2u) << o.out;
}

TEST_F(GpupoolctlE2E, Nodes) {
  Outcome o = Ctl({"nodes", "list", "--pool", "training"});
  ASSERT_EQ(o.exit, 0) << Dump(o);
  EXPECT_EQ(o.out,
            "NAME     POOL       STATE   DEVICES   TFLOPS      VRAM           TASKS   HEARTBEAT\n"
            "gpu-01   training   READY   2         12.5/1979   20GiB/160GiB   1       -\n");

  o = Ctl({"nodes", "get", "gpu-01"});
  ASSERT_EQ(o.exit, 0) << Dump(o);
  EXPECT_NE(o.out.find("GPU-gpu-01-0   0       H100-SXM   -     -       yes       12.5/989.5   "
                       "20GiB/80GiB   87%    20GiB/80GiB   412W    64C    0/1       -\n"),
            std::string::npos)
      << o.out;
  EXPECT_NE(o.out.find("GPU-gpu-01-1   1       H100-SXM   -     -       yes       0/989.5      "
                       "0MiB/80GiB    -      -             -       -      -         -\n"),
            std::string::npos)
      << o.out;

  o = Ctl({"nodes", "cordon", "gpu-01"});
  ASSERT_EQ(o.exit, 0) << Dump(o);
  EXPECT_EQ(o.out, "node gpu-01 cordoned (state CORDONED)\n");
  o = Ctl({"nodes", "drain", "gpu-01"});
  EXPECT_EQ(o.out, "node gpu-01 draining (state DRAINING)\n");
  o = Ctl({"nodes", "uncordon", "gpu-01"});
  EXPECT_EQ(o.out, "node gpu-01 uncordoned (state READY)\n");
  o = Ctl({"nodes", "drain", "gpu-99"});
  EXPECT_EQ(o.exit, 3) << Dump(o);
}

TEST_F(GpupoolctlE2E, UsageErrorsSendNothing) {
  Outcome o =
      Ctl({"jobs", "submit", "--pool", "training", "--gpus", "2", "--mig", "1g.10gb", "--", "x"});
  EXPECT_EQ(o.exit, 2) << Dump(o);
  EXPECT_EQ(o.err.rfind("gpupoolctl: USAGE: give one resource shape", 0), 0u) << o.err;
  std::lock_guard<std::mutex> lock(server_.state().mu);
  EXPECT_EQ(server_.state().last_authorization, "");  // no call reached the server
}

}  // namespace
}  // namespace gpupool::ctltest
