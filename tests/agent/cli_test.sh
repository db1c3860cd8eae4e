#!/bin/sh
# gpupool-agent's command line: --probe on a simulated layout, config errors with file:line,
# and the nvml backend saying clearly why it is unavailable (or probing real GPUs when it is).
# usage: cli_test.sh path/to/gpupool-agent
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
echo PASS
