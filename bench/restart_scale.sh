#!/bin/bash
# restart_scale: gpupoold's memory, /metrics scrape time and restart-to-ready with a deep queue.
#
# Starts gpupoold (--insecure, embedded PostgreSQL, fsync on) from BUILD, queues jobs into a pool
# without nodes with bench/submit_throughput (64 in flight for SECONDS), then prints the daemon's
# resident memory, 20 /metrics scrapes (min, p50, max seconds) and the time from start to a 200
# from /readyz; stops it (SIGTERM), starts it again on the same data and prints the same after
# the restart. docs/benchmarks.md, "Restart with a deep queue".
#
#   bench/restart_scale.sh [BUILD_DIR] [SECONDS]      (defaults: build, 12)
set -euo pipefail
B=$(realpath "${1:-build}")
SECS=${2:-12}
D=$(mktemp -d /tmp/gpupool-restart-scale.XXXXXX)
trap 'kill -TERM "${PID:-0}" 2>/dev/null || true; rm -rf "$D"' EXIT
GRPC=127.0.0.1:17170
HTTP=127.0.0.1:17180

start() {
  "$B/cmd/gpupoold" --insecure --data-dir "$D" --grpc-listen $GRPC --http-listen $HTTP \
    --log-level warn >>"$D/log" 2>&1 &
  PID=$!
  local t0 t1
  t0=$(date +%s.%N)
  until curl -sf -o /dev/null "http://$HTTP/readyz"; do sleep 0.05; done
  t1=$(date +%s.%N)
  echo "ready after $(echo "$t1 - $t0" | bc) s"
}
report() {
  sleep 2
  echo "resident: $(awk '/VmRSS/ {print $2, $3}' /proc/$PID/status)"
  for _ in $(seq 1 20); do
    curl -s -o /dev/null -w '%{time_total}\n' "http://$HTTP/metrics"
  done | sort -n | awk '{a[NR]=$1} END {print "scrape s: min " a[1] " p50 " a[int((NR+1)/2)] " max " a[NR]}'
}

echo "== fresh"
start
"$B/bench/submit_throughput" --server $GRPC --levels 64 --seconds "$SECS" | tail -2
report
echo "== after a restart"
kill -TERM $PID
wait $PID || true
start
report
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
