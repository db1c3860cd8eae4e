#!/bin/sh
# A stand-in nvidia-cuda-mps-control for tests (issue 10): the agent's MpsManager runs it as it
# would run the real one, and it logs what it receives so tests can assert it.
#   fake_mps_control.sh -f   the control daemon, in the foreground: writes its pid to
#                            $CUDA_MPS_PIPE_DIRECTORY/fake-mps.pid and waits; refuses to start
#                            when <mps dir>/fail-start exists. Creates the server file the fake
#                            CUDA driver's clients join (tests/fakes/cuda/fake_mps.cc: one uid
#                            per server) and the log, writable by the tasks' uids.
#   fake_mps_control.sh      a client: each command line on stdin is appended to
#                            $CUDA_MPS_PIPE_DIRECTORY/fake-mps.log ("cmd <line>"); "get_*" answers
#                            100, "quit" stops the daemon. Fails, like the real client, when no
#                            daemon runs.
dir="${CUDA_MPS_PIPE_DIRECTORY:?CUDA_MPS_PIPE_DIRECTORY is not set}"
log="$dir/fake-mps.log"
case "$1" in
  -f)
    if [ -e "$dir/../../fail-start" ]; then
      echo "fake mps: refusing to start (fail-start present)" >&2
      exit 1
    fi
    : > "$dir/fake-mps-server"
    : > "$dir/fake-mps-active"
    touch "$log"
    chmod 666 "$dir/fake-mps-server" "$dir/fake-mps-active" "$log"
    echo "daemon start devices=$CUDA_VISIBLE_DEVICES logdir=$CUDA_MPS_LOG_DIRECTORY" >> "$log"
    echo $$ > "$dir/fake-mps.pid"
    trap 'echo "daemon quit" >> "$log"; rm -f "$dir/fake-mps.pid"; exit 0' TERM INT
    while :; do
      sleep 1 &
      wait $!
    done
    ;;
  "")
    pid=$(cat "$dir/fake-mps.pid" 2>/dev/null)
    if [ -z "$pid" ] || ! kill -0 "$pid" 2>/dev/null; then
      echo "Cannot find MPS control daemon process" >&2
      exit 1
    fi
    while read -r line; do
      echo "cmd $line" >> "$log"
      case "$line" in
        get_*) echo 100 ;;
        quit) kill "$pid" ;;
      esac
    done
    ;;
  *)
    echo "usage: $0 [-f]" >&2
    exit 2
    ;;
esac
