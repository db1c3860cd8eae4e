#!/usr/bin/env python3
"""The Python SDK's test (CTest: sdk_python_test), end to end, as a new user meets it:

1. installs the SDK into a fresh virtual environment with the one command docs/sdk.md gives
   (no package index: Debian's python3-grpcio and python3-protobuf come through
   --system-site-packages), from a copy of sdk/python and api/gpupool/v1 so the source tree
   stays clean;
2. starts a real gpupoold in its default secure mode (TLS, credentials required, embedded
   PostgreSQL in a fresh data directory), logs in with the real `gpupoolctl login --data-dir`
   (which writes the login file the SDK reads), creates pool `gpu`, and starts a real
   gpupool-agent with two simulated H100s that joins with the daemon's node token;
3. runs the unittest modules beside this file (*_test.py) with the venv's interpreter, HOME
   pointing at the login file; they use the SDK only.

Standard library only: it runs before the SDK exists. Run by hand (paths from a build tree):

    /usr/bin/python3 tests/sdk/run_sdk_tests.py --source-dir . --gpupoold build/cmd/gpupoold \
        --agent build/cmd/gpupool-agent --gpupoolctl build/cmd/gpupoolctl [--keep]

The work directory (venv, data dir, logs) is removed on success and kept, with the logs' tails
printed, on failure or with --keep.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def log(message: str) -> None:
    print(f"[sdk-test {time.strftime('%H:%M:%S')}] {message}", flush=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


class Cluster:
    """gpupoold and one agent, as child processes in process groups of their own."""

    def __init__(self, args: argparse.Namespace, work: Path) -> None:
        self.args = args
        self.work = work
        self.data = work / "data"
        self.home = work / "home"
        self.address = ""
        self.procs: list[subprocess.Popen] = []

    def spawn(self, argv: list[str], log_name: str) -> subprocess.Popen:
        out = open(self.work / log_name, "ab")
        p = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                             start_new_session=True)
        out.close()
        self.procs.append(p)
        return p

    def ctl_env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("GPUPOOL_") and k != "XDG_CONFIG_HOME"}
        env.update(HOME=str(self.home), GPUPOOL_SESSION="off")
        return env

    def ctl(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run([self.args.gpupoolctl, *args], env=self.ctl_env(),
                              capture_output=True, text=True, timeout=60)

    def start_daemon(self) -> None:
        self.data.mkdir(mode=0o755)
        self.home.mkdir()
        self.address = f"127.0.0.1:{free_port()}"
        daemon = self.spawn([self.args.gpupoold, "--data-dir", str(self.data), "--grpc-listen",
                             self.address, "--http-listen", f"127.0.0.1:{free_port()}"],
                            "gpupoold.log")
        # `login` makes one authenticated call, so its success is also the readiness check.
        deadline = time.monotonic() + 90
        while True:
            if daemon.poll() is not None:
                raise RuntimeError("gpupoold exited during start-up:\n" +
                                   tail(self.work / "gpupoold.log"))
            if (self.data / "admin.token").exists() and (self.data / "tls" / "ca.crt").exists():
                r = self.ctl("login", "--server", self.address, "--data-dir", str(self.data))
                if r.returncode == 0:
                    return
                if time.monotonic() > deadline:
                    raise RuntimeError(f"gpupoolctl login failed: {r.stderr}")
            elif time.monotonic() > deadline:
                raise RuntimeError("gpupoold wrote no admin.token and CA within 90 s")
            time.sleep(0.2)

    def start_agent(self) -> None:
        r = self.ctl("pools", "create", "gpu", "--requires", "none")
        if r.returncode != 0:
            raise RuntimeError(f"pools create: {r.stderr}")
        config = self.work / "node-a.yaml"
        # As tests/support/agent_process.cc configures its agents: simulated GPUs, short
        # heartbeats; joining a secure daemon with its node token and trusting its CA.
        config.write_text(
            "node_name: node-a\npool: gpu\ncpu_milli: 64000\nmemory_mib: 262144\n"
            "backend: simulated\nheartbeat_interval_ms: 200\nstop_grace_period_ms: 1000\n"
            "reconnect: {initial_ms: 100, max_ms: 500}\nstop_tasks_on_shutdown: true\n"
            "gpus:\n  - model: H100-SXM\n    count: 2\n"
            f"token_file: {self.data / 'node.token'}\nca_file: {self.data / 'tls' / 'ca.crt'}\n")
        self.spawn([self.args.agent, "--config", str(config), "--scheduler", self.address,
                    "--data-dir", str(self.work / "node-a")], "node-a.log")
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            r = self.ctl("nodes", "get", "node-a", "-o", "json")
            if r.returncode == 0 and json.loads(r.stdout).get("state") == "NODE_STATE_READY":
                return
            time.sleep(0.2)
        raise RuntimeError("node-a not READY within 60 s:\n" + tail(self.work / "node-a.log"))

    def stop(self) -> None:
        for p in reversed(self.procs):
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
                try:
                    p.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    os.killpg(p.pid, signal.SIGKILL)
                    p.wait()
        # A daemon that died hard leaves its embedded PostgreSQL running: stop it by its pid file.
        for pid_file in self.data.rglob("postmaster.pid"):
            try:
                os.kill(int(pid_file.read_text().split()[0]), signal.SIGQUIT)
            except (OSError, ValueError, IndexError):
                pass


def install_sdk(args: argparse.Namespace, work: Path) -> Path:
    """The documented command, run in a copy of the two directories it needs."""
    src = work / "src"
    ignore = shutil.ignore_patterns("build", "*.egg-info", "__pycache__")
    root = Path(args.source_dir)
    shutil.copytree(root / "sdk" / "python", src / "sdk" / "python", ignore=ignore)
    shutil.copytree(root / "api" / "gpupool" / "v1", src / "api" / "gpupool" / "v1")
    env = dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INPUT="1")
    for argv in ([args.python, "-m", "venv", "--system-site-packages", ".venv"],
                 [".venv/bin/pip", "install", "--no-build-isolation", "--no-index",
                  "./sdk/python"]):
        r = subprocess.run(argv, cwd=src, env=env, capture_output=True, text=True, timeout=300)
        if r.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} failed:\n{r.stdout}\n{r.stderr}")
    return src / ".venv" / "bin" / "python"


def run_tests(python: Path, cluster: Cluster) -> int:
    env = cluster.ctl_env()
    env.update(GPUPOOL_TEST_SERVER=cluster.address, GPUPOOL_TEST_DATA_DIR=str(cluster.data),
               PYTHONDONTWRITEBYTECODE="1")
    argv = [str(python), "-m", "unittest", "discover", "-v", "-s", str(HERE), "-t", str(HERE),
            "-p", "*_test.py"]
    return subprocess.run(argv, cwd=cluster.work, env=env, timeout=600).returncode


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source-dir", required=True)
    parser.add_argument("--gpupoold", required=True)
    parser.add_argument("--agent", required=True)
    parser.add_argument("--gpupoolctl", required=True)
    parser.add_argument("--python", default="/usr/bin/python3",
                        help="the interpreter whose site packages hold python3-grpcio")
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    args = parser.parse_args()
    for tool in ("gpupoold", "agent", "gpupoolctl"):
        setattr(args, tool, str(Path(getattr(args, tool)).resolve()))

    work = Path(tempfile.mkdtemp(prefix="gpupool-sdk-test-"))
    work.chmod(0o755)  # the embedded PostgreSQL runs as the postgres user when we are root
    cluster = Cluster(args, work)
    rc = 1
    started = time.monotonic()
    try:
        t = time.monotonic()
        python = install_sdk(args, work)
        log(f"SDK installed into a fresh venv in {time.monotonic() - t:.1f} s")
        t = time.monotonic()
        cluster.start_daemon()
        cluster.start_agent()
        log(f"gpupoold (TLS, {cluster.address}) and node-a ready in {time.monotonic() - t:.1f} s")
        t = time.monotonic()
        rc = run_tests(python, cluster)
        log(f"tests ran in {time.monotonic() - t:.1f} s: {'ok' if rc == 0 else 'FAILED'}")
    except Exception as e:  # noqa: BLE001 - any set-up failure is the test's failure, reported
        log(f"set-up failed: {e}")
    finally:
        cluster.stop()
        if rc != 0:
            for name in ("gpupoold.log", "node-a.log"):
                print(f"---- {name} (tail) ----\n{tail(work / name)}")
        if rc != 0 or args.keep:
            log(f"work directory kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    log(f"total {time.monotonic() - started:.1f} s")
    return rc


if __name__ == "__main__":
    sys.exit(main())
