#!/usr/bin/env python3
"""The interposer's checks on a real GPU (scripts/gpu-verify runs this after building
agent/interposer alone): real child processes with libgpupool-cuda preloaded, each task's limits
in a gpupool-ledger, the truth read from NVML (nvidia-smi). With --sim the same flow runs on the
fake driver and fake NVML (a dry run of the script; the GPU-only figures are then skipped).

Writes <out>/gpu-verify.json (every check, its figures) and <out>/gpu-verify.md (a table for
docs/benchmarks.md). Exit 1 when a check failed.
"""
import argparse
import ctypes
import json
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MIB = 1 << 20
GIB = 1 << 30
PATHS = ["plain", "pitch", "managed", "array", "vmm", "pool", "async", "graph"]


class Proc:
    """A child with its stdout read line by line on a thread (readline with a timeout)."""

    def __init__(self, argv, env, stdin=True):
        self.argv = argv
        self.p = subprocess.Popen(argv, env=env, stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                  bufsize=1)
        self.lines = queue.Queue()
        self.all = []
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self):
        for line in self.p.stdout:
            line = line.rstrip("\n")
            self.all.append(line)
            self.lines.put(line)
        self.lines.put(None)

    @property
    def pid(self):
        return self.p.pid

    def readline(self, timeout=60.0):
        try:
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            raise TimeoutError("%s: no output in %.0f s" % (" ".join(self.argv[:3]), timeout))
        if line is None:
            raise EOFError("%s ended: %s" % (" ".join(self.argv[:3]), " | ".join(self.all[-5:])))
        return line

    def read_until(self, prefix, timeout=60.0):
        end = time.time() + timeout
        while True:
            line = self.readline(max(0.1, end - time.time()))
            if line.startswith(prefix):
                return line

    def write(self, text):
        self.p.stdin.write(text)
        self.p.stdin.flush()

    def finish(self, timeout=60.0):
        """Closes stdin (the probe's cue to free and exit) and waits; returns the exit code."""
        try:
            if self.p.stdin:
                self.p.stdin.close()
        except OSError:
            pass
        try:
            return self.p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.p.kill()
            return self.p.wait()


def fields(line):
    """'a=1 b=x' -> {'a': '1', 'b': 'x'} (words without '=' are skipped)."""
    out = {}
    for w in line.split():
        if "=" in w:
            k, v = w.split("=", 1)
            out[k] = v
    return out


class Ledgers:
    """gpupool-ledger with one or more tenants of the device (--next between them)."""

    def __init__(self, v, tenants, watch=False):
        self.v = v
        self.dir = tempfile.mkdtemp(prefix="gv-ledger-", dir=v.work)
        self.sockets = []
        argv = [v.ledger_bin, "--status-ms", "200"]
        if watch:  # the agent's watchdog over this script's children (NVML per process)
            argv += ["--watch-root", str(os.getpid()), "--watch-ms", "200"]
            if v.sim:
                argv += ["--nvml", os.path.join(v.fake_nvml_dir, "libnvidia-ml.so.1")]
        for i, t in enumerate(tenants):
            sock = os.path.join(self.dir, "t%d.sock" % i)
            self.sockets.append(sock)
            if i:
                argv.append("--next")
            argv += ["--socket", sock, "--vram", str(t["vram"]),
                     "--context-bytes", str(t.get("context", v.context_bytes)),
                     "--compute-percent", str(t.get("compute", 100))]
            if t.get("spill"):
                argv += ["--spill", str(t["spill"])]
        self.usage = {}
        self.proc = Proc(argv, dict(v.base_env), stdin=False)  # the fakes' state too, in --sim
        if self.proc.readline(10) != "ready":
            raise RuntimeError("gpupool-ledger did not start: %s" % self.proc.all)
        threading.Thread(target=self._watch, daemon=True).start()

    def _watch(self):
        while True:
            try:
                line = self.proc.readline(3600)
            except (EOFError, TimeoutError):
                return
            parts = line.split()
            if len(parts) > 2 and parts[0] in ("usage", "final"):
                self.usage[parts[1]] = {k: int(x) for k, x in fields(line).items()}

    def latest(self, i=0, wait=0.45):
        time.sleep(wait)  # one status period and a bit: the figure after what just happened
        return self.usage.get(self.sockets[i], {})

    def stop(self):
        self.proc.p.send_signal(signal.SIGTERM)
        self.proc.p.wait(timeout=10)
        shutil.rmtree(self.dir, ignore_errors=True)


class Verify:
    def __init__(self, args):
        self.sim = args.sim
        self.tools = args.tools
        self.lib = args.lib
        self.ledger_bin = args.ledger
        self.out = args.out
        self.work = tempfile.mkdtemp(prefix="gpupool-gv-")
        self.results = []
        self.charged = {}  # launch kind -> [(percent, µs charged per kernel)]
        self.kernel_us = {}  # launch kind -> [a compute probe's kernel, as it timed it (µs)]
        self.header = args.header.replace("\\n", "\n")
        self.unit = MIB if self.sim else GIB  # sizes scale down on the fake device
        self.context_bytes = 0
        self.base_env = dict(os.environ)
        self.fake_cuda_dir = args.fake_cuda_dir
        self.fake_nvml_dir = args.fake_nvml_dir
        if self.sim:
            self.fake_state = os.path.join(self.work, "fake-state")
            os.makedirs(self.fake_state)
            self.base_env.update({
                "LD_LIBRARY_PATH": args.fake_cuda_dir + ":" + args.fake_nvml_dir,
                "GPUPOOL_FAKE_CUDA_STATE": self.fake_state,
                # One 64 MiB device, 8 SMs, 4 MiB per context: GiB figures become MiB.
                "GPUPOOL_FAKE_CUDA_DEVICES": "FakeH200,%d,8,%d" % (64 * MIB, 4 * MIB),
            })
        self.base_env["GPUPOOL_PROBE_BLOCKS"] = "1" if self.sim else "1024"

    # ---- plumbing ----
    def record(self, check, ok, detail, **figures):
        result = "PASS" if ok is True else "FAIL" if ok is False else "INFO"
        self.results.append({"check": check, "result": result, "detail": detail, "figures": figures})
        print("gpu-verify: %s %s: %s" % (result, check, detail), flush=True)
        self.write_report()  # after each check: a run cut short keeps what it measured

    def write_report(self):
        os.makedirs(self.out, exist_ok=True)
        with open(os.path.join(self.out, "gpu-verify.json"), "w") as f:
            json.dump(self.results, f, indent=1)
        with open(os.path.join(self.out, "gpu-verify.md"), "w") as f:
            f.write(self.header + "| check | result | detail |\n|---|---|---|\n")
            for r in self.results:
                f.write("| %s | %s | %s |\n" % (r["check"], r["result"],
                                                r["detail"].replace("|", "/")))

    def probe(self, args, socket=None, preload=True, env=None):
        e = dict(self.base_env)
        if preload:
            e["LD_PRELOAD"] = self.lib
            e["GPUPOOL_LEDGER_SOCKET"] = socket
        if env:
            e.update(env)
        return Proc([os.path.join(self.tools, "cuda_probe")] + [str(a) for a in args], e)

    def nvml_used(self, pid):
        """NVML's figure for one process (bytes), or None where there is no nvidia-smi."""
        if self.sim or not shutil.which("nvidia-smi"):
            return None
        for _ in range(20):  # NVML lists a process a moment after its context exists
            out = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory",
                                  "--format=csv,noheader,nounits"], capture_output=True,
                                 text=True, timeout=30).stdout
            for row in out.splitlines():
                parts = [x.strip() for x in row.split(",")]
                if len(parts) == 2 and parts[0] == str(pid) and parts[1].isdigit():
                    return int(parts[1]) * MIB
            time.sleep(0.1)
        return None

    def run_check(self, name, fn):
        t0 = time.time()
        try:
            fn()
        except Exception as ex:  # one broken check must not hide the others' figures
            self.record(name, False, "error: %s: %s" % (type(ex).__name__, ex))
        print("gpu-verify: (%s took %.1f s)" % (name, time.time() - t0), flush=True)

    # ---- the checks ----
    def check_entry_points(self):
        """What the driver's cuGetProcAddress answers for every entry point the interposer hooks,
        at the driver's own version and CUDA 12.8's, legacy and per-thread stream: each answer
        must be an exported variant the interposer hooks (else the interposer refuses it)."""
        src = open(os.path.join(ROOT, "agent/interposer/core.cc")).read()
        block = src[src.index("kHooked[] = {"):]
        hooked = re.findall(r'"(cu\w+)"', block[:block.index("};")])
        bases = sorted({re.sub(r"(_v\d)?(_pt[sd]z)?$", "", h) for h in hooked} - {"cuGetProcAddress"})
        env_lib = os.path.join(self.fake_cuda_dir, "libcuda.so.1") if self.sim else "libcuda.so.1"
        if self.sim:
            os.environ["GPUPOOL_FAKE_CUDA_STATE"] = self.fake_state
        lib = ctypes.CDLL(env_lib)
        lib.cuInit(0)
        ver = ctypes.c_int(0)
        lib.cuDriverGetVersion(ctypes.byref(ver))
        exported = {}
        for b in bases:
            for v in ("", "_v2", "_v3", "_v4", "_v5"):
                for t in ("", "_ptsz", "_ptds"):
                    try:
                        fn = getattr(lib, b + v + t)
                    except AttributeError:
                        continue
                    exported[ctypes.cast(fn, ctypes.c_void_p).value] = b + v + t
        get = lib.cuGetProcAddress_v2
        get.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p), ctypes.c_int,
                        ctypes.c_uint64, ctypes.POINTER(ctypes.c_int)]
        unknown, answers = [], {}
        for b in bases:
            for version in sorted({ver.value, 12080}):
                for flags in (1, 2):  # legacy default stream, per-thread default stream
                    p = ctypes.c_void_p()
                    st = ctypes.c_int(0)
                    r = get(b.encode(), ctypes.byref(p), version, flags, ctypes.byref(st))
                    if r != 0 or not p.value:
                        answers["%s@%d/%d" % (b, version, flags)] = "none (rc %d)" % r
                        continue
                    name = exported.get(p.value, "internal 0x%x" % p.value)
                    answers["%s@%d/%d" % (b, version, flags)] = name
                    if name not in hooked:
                        unknown.append("%s@%d/%d→%s" % (b, version, flags, name))
        self.record("entry points", not unknown,
                    "driver %d: %d hooked base names × 2 versions × 2 stream modes; %s" %
                    (ver.value, len(bases), "every answer hooked" if not unknown else
                     "not hooked: " + ", ".join(unknown)), answers=answers)

    def check_context(self):
        """What one CUDA context costs on this device (NVML), to charge per context."""
        p = self.probe(["alloc", "plain", 1], preload=False)
        line = p.readline(60)
        used = self.nvml_used(p.pid)
        p.finish()
        if used is None:
            self.context_bytes = 4 * MIB if self.sim else 0
            self.record("context size", None, "no NVML here: charging %d MiB per context" %
                        (self.context_bytes // MIB))
            return
        # Rounded up to 2 MiB (the allocation granule) so that the charge covers it.
        self.context_bytes = (used + 2 * MIB - 1) // (2 * MIB) * (2 * MIB)
        self.record("context size", None, "a context with 1 byte allocated holds %d MiB (NVML); "
                    "charged %d MiB per context below (%s)" % (used // MIB,
                                                                self.context_bytes // MIB, line),
                    context_mib=used // MIB)

    def check_paths(self):
        """Each allocation path at the grant -1 and +1 byte, against the ledger and NVML."""
        avail = 2 * self.unit  # whole VMM granules (2 MiB) on either device
        grant = self.context_bytes + avail
        rows = []
        ok_all = True
        for path in PATHS:
            led = Ledgers(self, [{"vram": grant}])
            try:
                fits = self.probe(["alloc", path, avail - 1], led.sockets[0])
                rc_fit = fields(fits.readline(60)).get("rc")
                charged = led.latest().get("vram", -1)
                nvml = self.nvml_used(fits.pid)
                fits.finish()
                over = self.probe(["alloc", path, avail + 1], led.sockets[0])
                rc_over = fields(over.readline(60)).get("rc")
                nvml_over = self.nvml_used(over.pid)
                over.finish()
            finally:
                led.stop()
            ok = rc_fit == "0" and rc_over == "2" and (nvml is None or nvml <= grant) and \
                (nvml_over is None or nvml_over <= grant)
            ok_all &= ok
            rows.append({"path": path, "rc_fit": rc_fit, "rc_over": rc_over, "ledger": charged,
                         "nvml": nvml, "nvml_over": nvml_over, "grant": grant, "ok": ok})
            print("  %-8s grant-1: rc=%s ledger=%s nvml=%s | grant+1: rc=%s nvml=%s" %
                  (path, rc_fit, charged, nvml, rc_over, nvml_over), flush=True)
        bad = [r["path"] for r in rows if not r["ok"]]
        mib = lambda b: "-" if b is None else "%d" % (b // MIB)
        detail = "grant %d MiB (context %d + %d): " % (grant // MIB, self.context_bytes // MIB,
                                                      avail // MIB) + "; ".join(
            "%s %s/%s nvml %s MiB" % (r["path"], r["rc_fit"], r["rc_over"], mib(r["nvml"]))
            for r in rows)
        self.record("allocation paths at grant -1/+1", ok_all,
                    detail + ("" if ok_all else " — wrong: " + ", ".join(bad)), rows=rows)

    def check_watchdog(self):
        """The agent's watchdog on NVML's real per-process figures: a process through the
        interposer is charged the driver's own memory (its context) that the ledger was not told
        of, and left alone; one started without it is killed within about 0.6 s."""
        u = self.unit
        led = Ledgers(self, [{"vram": 2 * u + 1024 * MIB, "context": 0}], watch=True)
        try:
            honest = self.probe(["alloc", "plain", u], led.sockets[0])
            rc = fields(honest.readline(60)).get("rc")
            time.sleep(1.0)
            charged = led.latest().get("vram", 0)
            nvml = self.nvml_used(honest.pid)
            t0 = time.time()
            around = self.probe(["alloc", "plain", u // 4], preload=False)
            around.readline(60)
            around_code = around.p.wait(timeout=10)
            killed_after = time.time() - t0
            honest_code = honest.finish()
            verdicts = [l for l in led.proc.all if l.startswith("killed ")]
        finally:
            led.stop()
        ok = rc == "0" and honest_code == 0 and around_code == -9 and \
            any("pid=%d " % around.pid in l for l in verdicts) and \
            not any("pid=%d " % honest.pid in l for l in verdicts) and charged > u
        self.record("watchdog on NVML", ok,
                    "through the interposer: %s MiB allocated, ledger charge %d MiB after the "
                    "watchdog (NVML %s MiB), exit %d; without it: killed after %.2f s (exit %s); "
                    "%s" % (u // MIB, charged // MIB, "-" if nvml is None else nvml // MIB,
                            honest_code, killed_after, around_code,
                            verdicts[0] if verdicts else "no verdict"))

    def check_info(self):
        grant = self.context_bytes + 1 * self.unit
        led = Ledgers(self, [{"vram": grant}])
        try:
            p = self.probe(["info"], led.sockets[0])
            f = fields(p.readline(60))
            p.finish()
            n = self.probe(["nvml-info"], led.sockets[0])
            g = fields(n.readline(60))
            n.finish()
        finally:
            led.stop()
        ok = int(f.get("total", -1)) == grant and int(g.get("total", -1)) == grant
        self.record("the slice in cuMemGetInfo and NVML", ok,
                    "cuMemGetInfo total %s, nvmlDeviceGetMemoryInfo total %s (grant %d)" %
                    (f.get("total"), g.get("total"), grant))

    def check_launches(self):
        """Empty launches back to back, native and interposed in turn (twice each: the better
        run of each counts), and interposed with a compute cap (each launch metered)."""
        n = 10000 if self.sim else 1000000
        runs = {"native": [], "interposed": [], "capped": []}
        for label, preload, percent in (("native", False, 100), ("interposed", True, 100),
                                        ("native", False, 100), ("interposed", True, 100),
                                        ("capped", True, 99)):
            led = Ledgers(self, [{"vram": self.context_bytes + self.unit, "compute": percent}])
            try:
                p = self.probe(["launches", n], led.sockets[0], preload=preload)
                f = fields(p.read_until("launches=", 300))
                p.finish()
            finally:
                led.stop()
            runs[label].append(float(f.get("ns_per_launch", "nan")))
        best = {k: min(v) for k, v in runs.items()}
        added = best["interposed"] - best["native"]
        self.record("launch overhead", None,
                    "%d empty launches, ns per launch: native %s, interposed %s (+%.0f ns, "
                    "best of two), capped 99 %% %.0f" %
                    (n, "/".join("%.0f" % x for x in runs["native"]),
                     "/".join("%.0f" % x for x in runs["interposed"]), added, best["capped"]),
                    runs=runs, added_ns=added)

    def shares(self, kind, percents, seconds, spans=None):
        """Runs one saturating probe per tenant at once; returns each one's share of the device in
        percent: its own GPU time over wall time, launches × kernel_us / wall_us (the probe's
        kernel does a fixed amount of work, timed before "ready" as the least of a few launches,
        and every launch has run by the end of wall_us: the driver queues launches far ahead, so
        launches issued in the given seconds are not kernels run in them). With `spans`, each
        tenant's metered event pairs are kept in $OUT/spans.txt (GPUPOOL_CUDA_SPANS), one line
        per pair: "<spans>/<cap> recorded_ns start_ns end_ns"."""
        led = Ledgers(self, [{"vram": self.context_bytes + self.unit, "compute": c}
                             for c in percents])
        try:
            ps = [self.probe(["compute", kind, seconds], s, env=None if spans is None else {
                "GPUPOOL_CUDA_SPANS": os.path.join(self.out, "spans-%s-%d" % (spans, i))})
                  for i, s in enumerate(led.sockets)]
            for p in ps:
                if p.readline(120) != "ready":
                    raise RuntimeError("compute probe not ready: %s" % p.all)
            for p in ps:
                p.write("go\n")
            out, launches = [], []
            for p in ps:
                f = fields(p.read_until("done", seconds + 60))
                launches.append(int(f["launches"]))
                kernel_us, wall_us = float(f["kernel_us"]), float(f["wall_us"])
                self.kernel_us.setdefault(kind, []).append(round(kernel_us))
                out.append(100.0 * int(f["launches"]) * kernel_us / wall_us)
                p.finish()
        finally:
            led.stop()
        if spans is not None:  # one file for all (the device returns a limited number of files)
            with open(os.path.join(self.out, "spans.txt"), "a") as kept:
                for i in range(len(percents)):
                    prefix = "spans-%s-%d." % (spans, i)
                    for name in sorted(os.listdir(self.out)):
                        if name.startswith(prefix):
                            with open(os.path.join(self.out, name)) as f:
                                kept.writelines("%s/%d %s" % (spans, percents[i], l) for l in f)
                            os.remove(os.path.join(self.out, name))
        # What the interposer charged per kernel (its events), for the record.
        for i, sock in enumerate(led.sockets):
            gpu_ns = led.usage.get(sock, {}).get("gpu_ns", 0)
            if i < len(launches) and launches[i] and gpu_ns:
                self.charged.setdefault(kind, []).append(
                    (percents[i], round(gpu_ns / launches[i] / 1e3, 1)))
        return out

    def check_compute(self):
        # A share is the tenant's own GPU time over wall time (shares()). An uncapped tenant alone
        # is run too, as a sanity figure: it should keep the device busy (~100 %).
        secs = 3.0
        clock = self.probe(["clock", 500], preload=False)
        clock_line = clock.readline(60)
        clock.finish()
        alone = self.shares("plain", [100], secs)[0]
        half = self.shares("plain", [50], secs)[0]
        detail = ["uncapped alone %.1f %% busy; capped 50 alone %.1f" % (alone, half)]
        ok = abs(half - 50) <= 5
        figures = {"alone_busy": alone, "capped50": half}
        for kind in ("plain", "ex", "coop", "graph"):
            try:  # one launch kind's failure keeps the others' figures
                a, b = self.shares(kind, [30, 70], secs,
                                   spans="30-70" if kind == "plain" else None)
            except Exception as ex:
                detail.append("%s: %s" % (kind, ex))
                ok = False
                continue
            figures[kind] = [a, b]
            detail.append("%s 30/70 → %.1f/%.1f" % (kind, a, b))
            ok &= abs(a - 30) <= 5 and abs(b - 70) <= 5
        try:  # two tenants capped at 99 (metered, barely throttled): how their spans overlap
            both = self.shares("plain", [99, 99], secs, spans="99-99")
            detail.append("99/99 → %.1f/%.1f" % tuple(both))
            figures["both99"] = both
        except Exception as ex:
            detail.append("99/99: %s" % ex)
        detail.append("clocks: %s" % clock_line)
        detail.append("a kernel takes (µs, as each probe timed it) %s; charged per kernel "
                      "(cap: µs) %s" % (
                          "; ".join("%s %s" % (k, ", ".join(str(x) for x in v))
                                    for k, v in self.kernel_us.items()),
                          "; ".join("%s %s" % (k, ", ".join("%d: %.0f" % c for c in v))
                                    for k, v in self.charged.items())))
        self.record("compute shares (~1 ms kernels of work, %g s)" % secs, ok, "; ".join(detail),
                    charged=self.charged, kernel_us=self.kernel_us, **figures)

    def check_spill(self):
        u = self.unit
        grant = self.context_bytes + 4 * u
        led = Ledgers(self, [{"vram": grant, "spill": 4 * u}])
        try:
            p = self.probe(["spill", 6, u], led.sockets[0])
            rcs = [fields(p.readline(120)).get("rc") for _ in range(6)]
            tail = p.read_until("holding", 120)
            write = next((fields(l).get("rc") for l in p.all if l.startswith("write")), None)
            nvml = self.nvml_used(p.pid)
            time.sleep(1.5)
            usage = led.latest()
            more = self.probe(["spill", 1, 2 * u + 1], led.sockets[0])
            rc_more = fields(more.readline(60)).get("rc")
            more.finish()
            code = p.finish()
        finally:
            led.stop()
        ok = rcs == ["0"] * 6 and rc_more == "2" and usage.get("spill") == 2 * u and \
            usage.get("spill_byte_seconds", 0) > 0 and code == 0 and write in (None, "0") and \
            (nvml is None or nvml <= grant)
        self.record("spill", ok,
                    "grant %d MiB + %d MiB spill, 6 × %d MiB: rc %s, written through: %s, ledger "
                    "vram %s spill %s (%s byte·s), NVML %s MiB, %d MiB more: rc %s (%s)" %
                    (grant // MIB, 4 * u // MIB, u // MIB, ",".join(map(str, rcs)), write,
                     usage.get("vram"), usage.get("spill"), usage.get("spill_byte_seconds"),
                     "-" if nvml is None else nvml // MIB, (2 * u + 1) // MIB, rc_more, tail))

    def check_fault(self):
        led = Ledgers(self, [{"vram": self.context_bytes + self.unit},
                             {"vram": self.context_bytes + self.unit}])
        try:
            b = self.probe(["compute", "plain", 3], led.sockets[1])
            if b.readline(120) != "ready":
                raise RuntimeError("tenant B not ready: %s" % b.all)
            b.write("go\n")
            a = self.probe(["fault"], led.sockets[0])
            fa = a.readline(60)
            a.finish()
            fb = fields(b.read_until("done", 60))
            code_b = b.finish()
        finally:
            led.stop()
        sync = fa.split("sync rc=")[-1]
        ok = code_b == 0 and int(fb.get("launches", 0)) > 0 and (self.sim or sync == "700")
        self.record("illegal address isolated", ok,
                    "tenant A's faulting kernel: %s; tenant B meanwhile: %s launches, exit %d" %
                    (fa, fb.get("launches"), code_b))

    def check_torch(self):
        py = shutil.which("python3")
        probe = os.path.join(os.path.dirname(os.path.abspath(__file__)), "torch_probe.py")
        try:
            subprocess.run([py, "-c", "import torch; assert torch.cuda.is_available()"],
                           check=True, capture_output=True, timeout=120, env=self.base_env)
        except Exception:
            self.record("PyTorch under a cap", None, "no PyTorch with CUDA here: skipped")
            return
        grant = self.context_bytes + 2 * GIB
        for mode, conf, percent in (("native", "", 50),
                                    ("expandable", "expandable_segments:True", 100),
                                    ("async", "backend:cudaMallocAsync", 100)):
            led = Ledgers(self, [{"vram": grant, "compute": percent}])
            try:
                env = dict(self.base_env, LD_PRELOAD=self.lib,
                           GPUPOOL_LEDGER_SOCKET=led.sockets[0])
                if conf:
                    env["PYTORCH_CUDA_ALLOC_CONF"] = conf
                r = subprocess.run([py, probe, str(grant)], capture_output=True, text=True,
                                   timeout=100, env=env)
                usage = led.latest()
            finally:
                led.stop()
            lines = (r.stdout + r.stderr).strip().splitlines()
            with open(os.path.join(self.out, "torch-%s.log" % mode), "w") as f:
                f.write(r.stdout + r.stderr)
            refused = sorted({l for l in lines if l.startswith("gpupool-cuda:")})
            # A C++ error ends in a stack trace: what it says comes before the frames (run 5 lost
            # it to the frames), and the interposer's own complaints say which call it refused.
            said = [l for l in lines if not l.lstrip().startswith("frame #")]
            for l in refused[:40] + ([] if r.returncode == 0 else said[-30:]):
                print("    torch %s: %s" % (mode, l), flush=True)
            result = next((json.loads(l[7:]) for l in lines if l.startswith("RESULT ")), None)
            ok = r.returncode == 0 and result is not None and result.get("ok")
            self.record("PyTorch under a cap: %s" % (conf or "default allocator, compute 50 %"),
                        ok, json.dumps(result) if result else " | ".join(said[-8:]),
                        result=result, ledger_after=usage)

    def check_scrub(self):
        if self.sim:
            self.record("scrub of a freed slice", None, "skipped on the fake (the CUDA scrubber runs on it in ctest: agent_cuda_scrub_test)")
            return
        uuid = subprocess.run(["nvidia-smi", "--query-gpu=uuid", "--format=csv,noheader"],
                              capture_output=True, text=True).stdout.split()[0]
        gp = os.path.join(self.tools, "gpu_probe")
        run = lambda *a: subprocess.run([gp] + list(a), capture_output=True, text=True,
                                        timeout=150, env=self.base_env)
        secret = "GPUPOOL-SECRET-%d" % os.getpid()
        w = run("write", secret, str(16 * 1024))
        base = run("read", secret, str(32 * 1024))
        w2 = run("write", secret, str(16 * 1024))
        t0 = time.time()
        s = subprocess.run([os.path.join(self.tools, "gpupool-scrub"), uuid],
                           capture_output=True, text=True, timeout=150)
        scrub_s = time.time() - t0
        after = run("read", secret)
        f = fields(s.stdout)
        per_gib = (int(f.get("us", 0)) / 1e6) / max(1e-9, int(f.get("bytes", 0)) / GIB)
        ok = s.returncode == 0 and after.returncode == 0 and w.returncode == 0 and \
            w2.returncode == 0
        self.record("scrub of a freed slice", ok,
                    "A wrote 16 GiB (%s); without a scrub B found: %s; after gpupool-scrub "
                    "(%s; %.3f s/GiB, %.1f s wall) B found: %s" %
                    (w.stdout.strip(), base.stdout.strip(), s.stdout.strip() or s.stderr.strip(),
                     per_gib, scrub_s, after.stdout.strip()),
                    unscrubbed_exit=base.returncode, scrub_s_per_gib=per_gib)

    def check_mps(self):
        ctl = shutil.which("nvidia-cuda-mps-control")
        if self.sim or ctl is None:
            self.record("MPS: two tasks on one daemon", None,
                        "no nvidia-cuda-mps-control here: skipped")
            return
        pipe = os.path.join(self.work, "mps-pipe")
        logd = os.path.join(self.work, "mps-log")
        os.makedirs(pipe)
        os.makedirs(logd)
        env = dict(self.base_env, CUDA_MPS_PIPE_DIRECTORY=pipe, CUDA_MPS_LOG_DIRECTORY=logd)
        subprocess.run([ctl, "-d"], env=env, check=True, timeout=30)
        try:
            # Two clients of one server (one uid), each with its own limits in its environment.
            a = Proc([os.path.join(self.tools, "cuda_probe"), "compute", "plain", "3"],
                     dict(env, CUDA_MPS_ACTIVE_THREAD_PERCENTAGE="30",
                          CUDA_MPS_PINNED_DEVICE_MEM_LIMIT="0=2G"))
            b = Proc([os.path.join(self.tools, "cuda_probe"), "compute", "plain", "3"],
                     dict(env, CUDA_MPS_ACTIVE_THREAD_PERCENTAGE="70",
                          CUDA_MPS_PINNED_DEVICE_MEM_LIMIT="0=4G"))
            ready = [a.readline(45), b.readline(45)]
            t0 = time.time()
            a.write("go\n")
            b.write("go\n")
            fa = fields(a.read_until("done", 60))
            fb = fields(b.read_until("done", 60))
            # Each probe waits for its queued launches after its 3 s: that drain is not the wait
            # for the other client this measures.
            drain = max(float(f.get("wall_us", 3e6)) / 1e6 - 3 for f in (fa, fb))
            wall = time.time() - t0 - max(drain, 0.0)
            a.finish()
            b.finish()
            over = Proc([os.path.join(self.tools, "cuda_probe"), "alloc", "plain", str(3 * GIB)],
                        dict(env, CUDA_MPS_PINNED_DEVICE_MEM_LIMIT="0=2G"))
            rc_over = over.readline(60)
            over.finish()
            ok = ready == ["ready", "ready"] and wall < 5.5 and int(fa.get("launches", 0)) > 0 \
                and int(fb.get("launches", 0)) > 0 and rc_over != "rc=0"
            self.record("MPS: two tasks on one daemon", ok,
                        "both ran their 3 s at once (%.1f s wall): %s / %s launches; 3 GiB past "
                        "a 2G pinned limit: %s" % (wall, fa.get("launches"), fb.get("launches"),
                                                    rc_over))
        finally:
            subprocess.run([ctl], input="quit\n", text=True, env=env, timeout=30)

    def run(self, only):
        # PyTorch early: a run cut short keeps what matters most to tenants.
        checks = [("entry", self.check_entry_points), ("context", self.check_context),
                  ("torch", self.check_torch), ("paths", self.check_paths),
                  ("info", self.check_info), ("watchdog", self.check_watchdog),
                  ("compute", self.check_compute),
                  ("launches", self.check_launches), ("spill", self.check_spill),
                  ("fault", self.check_fault), ("mps", self.check_mps),
                  ("scrub", self.check_scrub)]
        for name, fn in checks:
            if not only or name in only or name == "context":
                self.run_check(name, fn)
        shutil.rmtree(self.work, ignore_errors=True)
        self.write_report()
        return 1 if any(r["result"] == "FAIL" for r in self.results) else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tools", required=True, help="gpu-tools dir (cuda_probe, gpu_probe, …)")
    ap.add_argument("--lib", required=True, help="libgpupool-cuda.so")
    ap.add_argument("--ledger", required=True, help="gpupool-ledger")
    ap.add_argument("--out", required=True)
    ap.add_argument("--sim", action="store_true", help="the fake driver and NVML")
    ap.add_argument("--fake-cuda-dir", default="")
    ap.add_argument("--fake-nvml-dir", default="")
    ap.add_argument("--only", default="", help="comma-separated checks")
    ap.add_argument("--header", default="", help="markdown before the table")
    args = ap.parse_args()
    only = [x for x in args.only.split(",") if x]
    sys.exit(Verify(args).run(only))


if __name__ == "__main__":
    main()
