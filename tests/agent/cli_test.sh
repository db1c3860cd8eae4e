#!/bin/sh
# gpupool-agent's command line: --probe on a simulated layout, config errors with file:line,
# and the nvml backend saying clearly why it is unavailable (or probing real GPUs when it is).
# With the MIG fake NVML (tests/agent/fake_nvml_mig.cc), the real agent's `nvml:` section: the
# backend loads that library and finds the device and capability files under its directory.
# usage: cli_test.sh path/to/gpupool-agent [path/to/libagent_fake_nvml_mig.so]
set -u
agent="$1"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

cat > "$dir/agent.yaml" <<'YAML'
node_name: n1
gpus:
  - {model: H100-SXM, count: 2, mig: {"0": [3g.40gb]}}
YAML
out=$("$agent" --config "$dir/agent.yaml" --probe) || fail "probe exited $?"
echo "$out" | grep -q '^backend: simulated$' || fail "probe: no backend line: $out"
echo "$out" | grep -q 'uuid: "MIG-sim-n1-0-0", model: "H100-SXM", index: 0, vram_mib: 40960, milli_tflops: 424071, mig_profile: "3g.40gb", parent_uuid: "GPU-sim-n1-0"' \
  || fail "probe: MIG instance missing: $out"
echo "$out" | grep -q '{a: 0, b: 1, kind: nvlink, gbps: 7200}' || fail "probe: link missing: $out"

printf 'node_name: n1\ngpus:\n  - {model: H100-SXM, count: eight}\n' > "$dir/bad.yaml"
err=$("$agent" --config "$dir/bad.yaml" --probe 2>&1); rc=$?
[ "$rc" = 2 ] || fail "bad config: exit $rc, want 2"
[ "$err" = "gpupool-agent: $dir/bad.yaml:3:30: gpus[0].count: must be an integer, got 'eight'" ] \
  || fail "bad config message: $err"

err=$("$agent" --no-such-flag 2>&1); rc=$?
[ "$rc" = 2 ] || fail "unknown flag: exit $rc, want 2"

out=$("$agent" --backend nvml --node-name n1 --probe 2>&1); rc=$?
if [ "$rc" = 0 ]; then
  echo "$out" | grep -q '^backend: nvml$' || fail "nvml probe: $out"
  echo "nvml present; probe:"; echo "$out"
else
  [ "$rc" = 3 ] || fail "nvml absent: exit $rc, want 3"
  echo "$out" | grep -q '^gpupool-agent: backend=nvml unavailable: libnvidia-ml.so.1: .*; use backend: simulated$' \
    || fail "nvml absent message: $out"
fi

if [ $# -ge 2 ]; then
  mkdir -p "$dir/node"
  echo 'GPU-h100-0 0 1 NVIDIA H100 80GB HBM3' > "$dir/node/gpus"
  printf 'serial 3\ngi 0 1 2 4 1\nci 0 1 0 2 2\n' > "$dir/node/state"  # 3g.40gb at slice 4
  printf 'node_name: n1\nbackend: nvml\nnvml:\n  library: %s\n  dev_dir: %s\n  proc_dir: %s\n' \
    "$2" "$dir/node/dev" "$dir/node/proc" > "$dir/nvml.yaml"
  out=$(GPUPOOL_FAKE_NVML_DIR="$dir/node" "$agent" --config "$dir/nvml.yaml" --probe 2>/dev/null) \
    || fail "probe on the fake NVML exited $?"
  echo "$out" | grep -q 'uuid: "MIG-h100-0-2", model: "H100-SXM", index: 0, vram_mib: 40448, milli_tflops: 424071, mig_profile: "3g.40gb", parent_uuid: "GPU-h100-0"' \
    || fail "probe on the fake NVML: MIG instance missing: $out"
fi
echo PASS
